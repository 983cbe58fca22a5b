"""Spark tier: the source in one shared local[2] session against a real cluster (2 broker groups).

Every streaming query uses an AvailableNow trigger (deterministic, stops by itself) except the
idle-stream test, whose subject is the trigger loop. Each test has its own topic.
"""

from __future__ import annotations

import importlib.util
import json
import shutil
import time
from pathlib import Path
from typing import Any

import pytest

from tests.spark.cluster import RETENTION_STORE, ThreadedCluster

pytestmark = [pytest.mark.spark, pytest.mark.integration]

ROOT = Path(__file__).resolve().parents[2]


def stream(spark: Any, opts: dict[str, str], out: Path, cp: Path, *, available_now: bool = True) -> Any:
    reader = spark.readStream.format("rocketmq")
    for k, v in opts.items():
        reader = reader.option(k, v)
    writer = (
        reader.load()
        .writeStream.format("parquet")
        .option("path", str(out))
        .option("checkpointLocation", str(cp))
    )
    writer = (
        writer.trigger(availableNow=True)
        if available_now
        else writer.trigger(processingTime="250 milliseconds")
    )
    return writer.start()


def run(spark: Any, opts: dict[str, str], out: Path, cp: Path) -> list[int]:
    """One AvailableNow run to the end; the input rows of each batch it ran."""
    q = stream(spark, opts, out, cp)
    q.awaitTermination(90)
    assert not q.isActive
    return [p["numInputRows"] for p in q.recentProgress]


def keys_of(spark: Any, out: Path) -> tuple[int, int]:
    df = spark.read.parquet(str(out))
    return df.count(), df.select("brokerName", "queueId", "queueOffset").distinct().count()


def filled(
    mq: ThreadedCluster, topic: str, queues: int, per_queue: int, *, body_size: int = 0, **read: str
) -> dict[str, str]:
    """Create ``topic`` with ``queues`` queues per broker, put ``per_queue`` messages in each, and
    return the source options that read it from the earliest offset (plus ``read``)."""
    mq.create_topic(topic, queues)
    mq.fill(topic, per_queue, queues, body_size=body_size)
    return {"nameServer": mq.namesrv, "topic": topic, "startingOffsets": "earliest", **read}


def offsets_logged(cp: Path) -> list[dict[str, Any]]:
    """The source offsets Spark checkpointed per batch (the last line of each offsets file)."""
    files = sorted((cp / "offsets").glob("[0-9]*"), key=lambda p: int(p.name))
    return [json.loads(f.read_text().strip().splitlines()[-1]) for f in files]


# --------------------------------------------------------------------------- streaming


def test_exactly_once_across_restart_with_batch_sizes(
    spark: Any, mq: ThreadedCluster, tmp_path: Path
) -> None:
    opts = filled(mq, "EO", 4, 50, maxOffsetsPerTrigger="120")  # 2 brokers x 4 queues x 50 = 400
    out, cp = tmp_path / "out", tmp_path / "cp"
    # 120 / 8 queues = 15 offsets per queue per batch (Kafka's split rounds shares down)
    assert run(spark, opts, out, cp) == [120, 120, 120, 40]
    assert keys_of(spark, out) == (400, 400)
    mq.fill("EO", 25, 4, start=50)
    assert run(spark, opts, out, cp) == [120, 80]  # resumes exactly where the checkpoint ended
    assert keys_of(spark, out) == (600, 600)
    last = offsets_logged(cp)[-1]
    assert last == {"EO": {b: {str(q): 75 for q in range(4)} for b in ("broker-a", "broker-b")}}
    assert list(last["EO"]) == ["broker-a", "broker-b"]  # canonical key order


def test_read_failure_mid_batch_then_restart(
    spark: Any, mq: ThreadedCluster, tmp_path: Path, fault_dir: Path
) -> None:
    opts = filled(mq, "FAIL", 4, 40, maxOffsetsPerTrigger="160")
    out, cp = tmp_path / "out", tmp_path / "cp"
    (fault_dir / "fail-from-20").touch()  # batch 1 reads [20, 40): one of its tasks dies after its rows
    q = stream(spark, opts, out, cp)
    with pytest.raises(Exception, match="injected fault"):
        q.awaitTermination(90)
    assert not (fault_dir / "fail-from-20").exists()
    planned = offsets_logged(cp)
    assert len(planned) == 2 and not (cp / "commits" / "1").exists()
    assert keys_of(spark, out) == (160, 160)  # the failed batch's files are not in the sink's log
    assert run(spark, opts, out, cp) == [160]  # batch 1 replayed with the same offsets
    assert offsets_logged(cp)[1] == planned[1]
    assert keys_of(spark, out) == (320, 320)


def test_queue_added_between_runs(spark: Any, mq: ThreadedCluster, tmp_path: Path) -> None:
    opts = filled(mq, "GROW", 2, 30)
    out, cp = tmp_path / "out", tmp_path / "cp"
    assert sum(run(spark, opts, out, cp)) == 120
    mq.create_topic("GROW", 3)  # queue 2 appears on both brokers
    mq.fill("GROW", 10, 3, only=[2])
    mq.fill("GROW", 5, 3, start=30, only=[0, 1])
    assert sum(run(spark, opts, out, cp)) == 40
    df = spark.read.parquet(str(out))
    assert keys_of(spark, out) == (160, 160)
    assert sorted(r["queueOffset"] for r in df.where("queueId = 2").collect()) == sorted(list(range(10)) * 2)
    assert offsets_logged(cp)[-1]["GROW"]["broker-b"] == {"0": 35, "1": 35, "2": 10}


def test_tag_filtering(spark: Any, mq: ThreadedCluster, tmp_path: Path) -> None:
    # tags cycle A, B, C by offset
    opts = filled(mq, "TAGS", 2, 60, subExpression="A || C", maxOffsetsPerTrigger="120")
    out, cp = tmp_path / "out", tmp_path / "cp"
    assert sum(run(spark, opts, out, cp)) == 160  # limits count offsets: 2 batches of 120 offsets
    rows = spark.read.parquet(str(out)).select("tags", "queueOffset").collect()
    assert {r["tags"] for r in rows} == {"A", "C"}
    assert all(r["queueOffset"] % 3 != 1 for r in rows)


def test_retention_with_fail_on_data_loss_true_and_false(spark: Any, tmp_path: Path) -> None:
    mq = ThreadedCluster(brokers=2, store_config=RETENTION_STORE)
    try:
        opts = filled(mq, "RET", 2, 40, body_size=1000)
        out, cp = tmp_path / "out", tmp_path / "cp"
        assert sum(run(spark, opts, out, cp)) == 160
        mq.fill("RET", 260, 2, start=40, body_size=1000)
        mq.retention()  # min offsets move far beyond the checkpointed 40
        shutil.copytree(cp, tmp_path / "cp2")  # a second query continuing from the same point
        shutil.copytree(out, tmp_path / "out2")
        q = stream(spark, opts, out, cp)
        with pytest.raises(Exception, match=r"data loss on queue RET/broker-.*removed by retention"):
            q.awaitTermination(90)
        skip = {**opts, "failOnDataLoss": "false"}
        run(spark, skip, tmp_path / "out2", tmp_path / "cp2")
        df = spark.read.parquet(str(tmp_path / "out2")).where("queueOffset >= 40")
        lows = {
            (r["brokerName"], r["queueId"]): r["min(queueOffset)"]
            for r in df.groupBy("brokerName", "queueId").min("queueOffset").collect()
        }
        assert len(lows) == 4 and all(40 < lo < 300 for lo in lows.values())
        assert (
            df.count()
            == df.select("brokerName", "queueId", "queueOffset").distinct().count()
            == sum(300 - lo for lo in lows.values())
        )
    finally:
        mq.close()


def test_idle_stream_runs_no_empty_batches(spark: Any, mq: ThreadedCluster, tmp_path: Path) -> None:
    mq.create_topic("IDLE", 4)
    mq.fill("IDLE", 5, 4)
    opts = {"nameServer": mq.namesrv, "topic": "IDLE", "startingOffsets": "latest"}
    out, cp = tmp_path / "out", tmp_path / "cp"
    q = stream(spark, opts, out, cp, available_now=False)
    try:
        deadline = time.monotonic() + 30
        while not (cp / "offsets" / "0").exists() and time.monotonic() < deadline:
            time.sleep(0.2)
        time.sleep(3)  # about 12 triggers with nothing new
        assert len(offsets_logged(cp)) == 1  # only batch 0 (empty: 'latest' is pinned there)
        mq.fill("IDLE", 3, 4, start=5)
        while time.monotonic() < deadline and not (out.exists() and list(out.glob("*.parquet"))):
            time.sleep(0.2)
        q.processAllAvailable()
    finally:
        q.stop()
    assert keys_of(spark, out) == (24, 24)
    assert len(offsets_logged(cp)) == 2


def test_example_pipeline(spark: Any, mq: ThreadedCluster, tmp_path: Path) -> None:
    spec = importlib.util.spec_from_file_location("tag_counts", ROOT / "spark" / "examples" / "tag_counts.py")
    assert spec is not None and spec.loader is not None
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    mq.create_topic("EXAMPLE", 3)
    mq.fill("EXAMPLE", 30, 3)  # per queue: 10 x A, B, C
    out, cp = str(tmp_path / "counts"), str(tmp_path / "cp")
    example.start(spark, mq.namesrv, "EXAMPLE", out, cp, max_offsets_per_trigger=100).awaitTermination(90)
    assert example.totals(spark, out) == {"A": 60, "B": 60, "C": 60}


# -------------------------------------------------------------------------------- batch


def test_batch_read_explicit_ranges_and_min_partitions(spark: Any, mq: ThreadedCluster) -> None:
    mq.create_topic("BATCH", 4)
    mq.fill("BATCH", 40, 4)
    base = {"nameServer": mq.namesrv, "topic": "BATCH"}
    assert spark.read.format("rocketmq").options(**base).load().count() == 320
    start = {"BATCH": {"broker-a": {"0": 10, "1": -2}, "broker-b": {"3": 5}}}
    end = {
        "BATCH": {
            "broker-a": {"0": 30, "1": 20, "2": 0, "3": 0},
            "broker-b": {"0": 0, "1": 0, "2": 0, "3": 25},
        }
    }
    df = (
        spark.read.format("rocketmq").options(**base)
        .option("startingOffsets", json.dumps(start)).option("endingOffsets", json.dumps(end))
        .option("minPartitions", "12").load()
    )  # fmt: skip
    # 20 + 20 + 20 offsets over 3 queues; 12 partitions wanted -> 4 each
    assert df.rdd.getNumPartitions() == 12
    got = sorted((r["brokerName"], r["queueId"], r["queueOffset"]) for r in df.collect())
    want = (
        [("broker-a", 0, o) for o in range(10, 30)]
        + [("broker-a", 1, o) for o in range(20)]
        + [("broker-b", 3, o) for o in range(5, 25)]
    )
    assert got == sorted(want)
    capped = spark.read.format("rocketmq").options(**base).option("maxRecordsPerPartition", "15").load()
    assert capped.rdd.getNumPartitions() == 8 * 3


def test_sql_filter_option_in_executors(spark: Any, mq: ThreadedCluster, tmp_path: Path) -> None:
    # tags cycle A, B, C and KEYS is k<i>: the SQL92 filter runs in the executors, no broker setting
    opts = filled(mq, "SQLF", 2, 30, filter="TAGS IN ('A', 'C') AND KEYS <> 'k3'")
    rows = (
        spark.read.format("rocketmq").options(**opts).load().select("tags", "keys", "queueOffset").collect()
    )
    assert len(rows) == 2 * 2 * 19  # per queue: 10 A + 10 C, minus k3
    assert {r["tags"] for r in rows} == {"A", "C"} and all(r["keys"] != "k3" for r in rows)
    out, cp = tmp_path / "out", tmp_path / "cp"
    assert sum(run(spark, opts, out, cp)) == 2 * 2 * 19


def test_batch_read_properties_and_registration(spark: Any, mq: ThreadedCluster) -> None:
    from pocketmq.spark.source import RocketMQDataSource

    mq.create_topic("PROPS", 1)
    mq.fill("PROPS", 3, 1)
    spark.dataSource.register(RocketMQDataSource)  # the explicit way works as well
    rows = (
        spark.read.format("rocketmq").option("nameServer", mq.namesrv).option("topic", "PROPS")
        .option("includeProperties", "true").load().where("brokerName = 'broker-a'").orderBy("queueOffset").collect()
    )  # fmt: skip
    assert [r["tags"] for r in rows] == ["A", "B", "C"]
    assert rows[1]["properties"]["KEYS"] == "k1" and rows[1]["keys"] == "k1"
    assert rows[0]["body"] == b"PROPS/broker-a/0/0" and rows[0]["storeHost"] == mq.c.broker_addrs[0]


def test_invalid_options_fail_naming_the_option(spark: Any, mq: ThreadedCluster, tmp_path: Path) -> None:
    with pytest.raises(Exception, match="'topik': unknown option"):
        spark.read.format("rocketmq").option("nameServer", mq.namesrv).option("topik", "X").load().collect()
    with pytest.raises(Exception, match="'maxOffsetsPerTrigger': must be >= 1"):
        q = stream(
            spark,
            {"nameServer": mq.namesrv, "topic": "X", "maxOffsetsPerTrigger": "0"},
            tmp_path / "o",
            tmp_path / "c",
        )
        q.awaitTermination(60)
