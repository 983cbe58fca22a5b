"""Consumer lag of a RocketMQ stream, as Kafka's source reports it: offsets behind the latest.

Kafka's source adds ``minOffsetsBehindLatest``, ``maxOffsetsBehindLatest`` and
``avgOffsetsBehindLatest`` to each progress's ``sources[i].metrics``. Spark (through 4.3) gives
Python sources no way to add metrics, so the RocketMQ source reports what they are computed
from instead: ``reportLatestOffset`` puts the newest offset of every queue into the progress's
``latestOffset``, next to the batch's ``endOffset``. :func:`offsets_behind_latest` turns one
source progress into Kafka's three metrics (same names, same string forms);
:class:`pocketmq.spark.progress.LagListener` does it for every progress of every query.

Lag of a queue = latest offset - end offset of the batch (0 when the batch reached it); queues
in ``latestOffset`` that the batch has not planned yet count from their first offset, which the
source plans from the next batch on, so they are left out, as Kafka leaves out new partitions.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

METRICS = ("minOffsetsBehindLatest", "maxOffsetsBehindLatest", "avgOffsetsBehindLatest")


def _offsets(value: Any) -> dict[tuple[str, str, str], int]:
    """``{"topic": {"broker": {"qid": n}}}`` (a dict or its JSON text) -> flat map."""
    if value is None:
        return {}
    try:
        data = json.loads(value) if isinstance(value, str) else value
    except ValueError:
        return {}
    out: dict[tuple[str, str, str], int] = {}
    if not isinstance(data, Mapping):
        return out
    for topic, brokers in data.items():
        if not isinstance(brokers, Mapping):
            continue
        for broker, queues in brokers.items():
            if not isinstance(queues, Mapping):
                continue
            for qid, offset in queues.items():
                if not isinstance(offset, int) or isinstance(offset, bool):
                    return {}  # not a RocketMQ offset map
                out[(str(topic), str(broker), str(qid))] = offset
    return out


def offsets_behind_latest(end_offset: Any, latest_offset: Any) -> dict[str, str] | None:
    """Kafka's three lag metrics from a source progress's ``endOffset`` and ``latestOffset``;
    ``None`` when the progress has no latest offset (the source reported none yet)."""
    end, latest = _offsets(end_offset), _offsets(latest_offset)
    if not latest:
        return None
    behind = [max(0, latest[k] - end[k]) for k in latest if k in end]
    if not behind:
        return None
    return {
        "minOffsetsBehindLatest": str(min(behind)),
        "maxOffsetsBehindLatest": str(max(behind)),
        "avgOffsetsBehindLatest": str(sum(behind) / len(behind)),
    }


def source_lag(progress: Mapping[str, Any]) -> list[dict[str, str] | None]:
    """The lag metrics of each source of one query progress (``query.lastProgress``, or
    ``json.loads(progress.json)``); ``None`` for a source without RocketMQ-shaped offsets
    (Spark describes Python sources by a JVM class name only, so the offsets' shape
    ``{"topic": {"broker": {"queueId": n}}}`` is what tells them apart) or without a latest one."""
    return [
        offsets_behind_latest(source.get("endOffset"), source.get("latestOffset"))
        for source in progress.get("sources") or []
    ]
