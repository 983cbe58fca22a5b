"""The ``--json`` documents of the flat admin results and the queue-offset rows: keys, their order and values (the rows
build them from their dataclass fields, so a renamed field must not rename a key)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from pocketmq.client.admin.model import (
    BrokerConsumeRow,
    ConnectionRow,
    GroupSummary,
    MessageTrack,
    ProgressRow,
    QueueStatus,
    ResetResult,
    ResetRow,
    StatsRow,
)

CASES: list[tuple[Any, str]] = [
    (QueueStatus("b", 1, 2, 3, 4),
     '{"brokerName": "b", "queueId": 1, "minOffset": 2, "maxOffset": 3, "lastUpdateTimestamp": 4}'),
    (GroupSummary("g", 1, "v", "ct", "mm", 1.5, 3),
     '{"group": "g", "count": 1, "version": "v", "consumeType": "ct", "messageModel": "mm",'
     ' "consumeTps": 1.5, "diffTotal": 3}'),
    (ConnectionRow("c", "a", "PY", 409),
     '{"clientId": "c", "clientAddr": "a", "language": "PY", "version": 409, "versionDesc": "V4_9_8"}'),
    (ResetRow("b", 1, 2, 3), '{"brokerName": "b", "queueId": 1, "consumerOffset": 2, "offset": 3}'),
    (ResetResult("g", "t", 5, True, False, [ResetRow("b", 1, 2, 3)]),
     '{"group": "g", "topic": "t", "timestamp": 5, "force": true, "dryRun": false,'
     ' "queues": [{"brokerName": "b", "queueId": 1, "consumerOffset": 2, "offset": 3}]}'),
    (StatsRow("t", "g", 1, 2.0, 3.0, 4, 5),
     '{"topic": "t", "consumerGroup": "g", "accumulation": 1, "inTps": 2.0, "outTps": 3.0,'
     ' "inMsg24Hour": 4, "outMsg24Hour": 5}'),
    (StatsRow("t", None),
     '{"topic": "t", "consumerGroup": null, "accumulation": 0, "inTps": 0.0, "outTps": 0.0,'
     ' "inMsg24Hour": 0, "outMsg24Hour": 0}'),
    (MessageTrack("g", "T"), '{"consumerGroup": "g", "trackType": "T", "exceptionDesc": null}'),
    (ProgressRow("t", "b", 1, 10, 4, 7, "ip"),
     '{"topic": "t", "brokerName": "b", "queueId": 1, "brokerOffset": 10, "consumerOffset": 4,'
     ' "diff": 6, "lastTimestamp": 7, "clientIp": "ip"}'),
    (BrokerConsumeRow("t", "g", "b", 1, 10, 4, 7),
     '{"topic": "t", "group": "g", "brokerName": "b", "queueId": 1, "brokerOffset": 10,'
     ' "consumerOffset": 4, "diff": 6, "lastTimestamp": 7}'),
]  # fmt: skip


@pytest.mark.parametrize(
    ("row", "expected"), CASES, ids=lambda v: type(v).__name__ if not isinstance(v, str) else ""
)
def test_flat_row_json(row: Any, expected: str) -> None:
    assert json.dumps(row.to_json()) == expected
