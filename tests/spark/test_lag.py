"""Lag metrics of a stream (issue 22): Kafka's three OffsetsBehindLatest numbers from progress."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pocketmq.spark.lag import _offsets, offsets_behind_latest, source_lag
from tests.spark.cluster import ThreadedCluster


def test_offsets_behind_latest_per_queue() -> None:
    end = {"T": {"b": {"0": 10, "1": 5}}}
    latest = json.dumps({"T": {"b": {"0": 40, "1": 5, "2": 7}}})  # queue 2 not planned yet
    assert offsets_behind_latest(end, latest) == {
        "minOffsetsBehindLatest": "0",
        "maxOffsetsBehindLatest": "30",
        "avgOffsetsBehindLatest": "15.0",
    }
    assert offsets_behind_latest(end, None) is None
    assert offsets_behind_latest({"k": {"0": 1}}, {"k": {"0": 5}}) is None  # Kafka-shaped: not ours


@pytest.mark.spark
@pytest.mark.integration
def test_lag_metrics_fall_to_zero(spark: Any, mq: ThreadedCluster, tmp_path: Path) -> None:
    from pocketmq.spark.progress import LagListener

    mq.create_topic("LagT", 2)
    mq.fill("LagT", 100, 2)  # 4 queues x 100
    listener = LagListener()
    spark.streams.addListener(listener)
    try:
        q = (
            spark.readStream.format("rocketmq")
            .option("nameServer", mq.namesrv)
            .option("topic", "LagT")
            .option("startingOffsets", "earliest")
            .option("maxOffsetsPerTrigger", "100")
            .load()
            .writeStream.format("noop")
            .option("checkpointLocation", str(tmp_path / "cp"))
            .trigger(availableNow=True)
            .start()
        )
        q.awaitTermination(120)
        assert q.exception() is None
        progresses = [p for p in q.recentProgress if p["numInputRows"] > 0]
        lags = [source_lag(p)[0] for p in progresses]
        assert all(lag is not None for lag in lags), json.dumps(progresses[-1]["sources"])
        maxes = [int(lag["maxOffsetsBehindLatest"]) for lag in lags]  # type: ignore[index]
        assert maxes[0] > 0 and maxes == sorted(maxes, reverse=True), maxes
        assert lags[-1] == {"minOffsetsBehindLatest": "0", "maxOffsetsBehindLatest": "0",
                            "avgOffsetsBehindLatest": "0.0"}  # fmt: skip
        assert listener.latest(q.id) and listener.latest(q.id)[0] is not None
        # reportLatestOffset: every progress carries the queues' latest offsets next to the
        # batch's end; behind it while the backlog lasts, equal to it once consumed
        first, last = progresses[0]["sources"][0], progresses[-1]["sources"][0]
        assert sum(_offsets(first["latestOffset"]).values()) == 400
        assert sum(_offsets(first["endOffset"]).values()) < 400
        assert _offsets(last["latestOffset"]) == _offsets(last["endOffset"]) != {}
    finally:
        spark.streams.removeListener(listener)
