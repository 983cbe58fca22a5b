"""Source offsets: the canonical JSON Spark checkpoints, and parsing of user offset options.

Shape (ConsumeQueue logical offsets; the value is the *next* offset to read)::

    {"<topic>": {"<brokerName>": {"<queueId>": nextOffset, ...}, ...}, ...}

Spark serialises the dict we return with ``json.dumps`` and compares the text with the last
one to decide whether a new micro-batch has data (Spark compares offsets as JSON text): a different key
order is a "change" and an idle stream then runs empty batches forever. Every dict handed to
Spark is therefore built by :func:`to_json_dict`, with keys inserted in ``sort_keys`` order
(string order, so ``"10"`` sorts before ``"2"``), which makes ``json.dumps`` of it equal to
``json.dumps(..., sort_keys=True)``. Queues are keyed by broker *name* (stable across master and
slave), never by address.

In user options (``startingOffsets``/``endingOffsets``), ``-2`` means earliest and ``-1``
latest, as in the Kafka source and rocketmq-spark.

Queues are the protocol's :class:`~pocketmq.remoting.protocol.heartbeat.MessageQueue`
(``topic, broker_name, queue_id``); :func:`queue_label` is how messages name one.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from pocketmq.remoting.protocol.heartbeat import MessageQueue
from pocketmq.spark.errors import InvalidOptionError

EARLIEST = -2
LATEST = -1


def queue_label(mq: MessageQueue) -> str:
    """``topic/brokerName/queueId``: how errors and logs name a queue."""
    return f"{mq.topic}/{mq.broker_name}/{mq.queue_id}"


def json_order(mq: MessageQueue) -> tuple[str, str, str]:
    """Sort key of the JSON keys (queue ids compare as strings, as ``sort_keys`` does)."""
    return (mq.topic, mq.broker_name, str(mq.queue_id))


OffsetMap = dict[MessageQueue, int]
JsonOffsets = dict[str, dict[str, dict[str, int]]]


def to_json_dict(offsets: Mapping[MessageQueue, int]) -> JsonOffsets:
    """The canonical offset dict (keys inserted in sorted order, values plain ints)."""
    nested: dict[str, dict[str, dict[str, int]]] = {}
    for key in sorted(offsets, key=json_order):
        nested.setdefault(key.topic, {}).setdefault(key.broker_name, {})[str(key.queue_id)] = int(
            offsets[key]
        )
    return nested


def to_json(offsets: Mapping[MessageQueue, int]) -> str:
    """Canonical JSON text (what Spark writes to the offsets log)."""
    return json.dumps(to_json_dict(offsets), sort_keys=True)


def from_json_dict(obj: Any, *, what: str = "offsets", allow_special: bool = False) -> OffsetMap:
    """Parse the nested offset dict (a checkpointed offset or a user option's JSON).

    Args:
        what: the option or source name used in error messages.
        allow_special: accept ``-2`` (earliest) and ``-1`` (latest) as values.

    Raises:
        InvalidOptionError: the shape is wrong, a queue id is not an integer, or an offset is
            negative (other than the allowed specials).
    """
    if not isinstance(obj, Mapping):
        raise InvalidOptionError(
            what, f'expected a JSON object {{"topic": {{"broker": {{"queueId": offset}}}}}}, got {obj!r}'
        )
    out: OffsetMap = {}
    for topic, brokers in _named_maps(obj, what, "topic", None, "broker names to queues"):
        for broker, queues in _named_maps(brokers, what, "broker", topic, "queue ids to offsets"):
            for qid, offset in queues.items():
                queue_id = _parse_queue_id(qid, what, topic, broker)
                if isinstance(offset, bool) or not isinstance(offset, int):
                    raise InvalidOptionError(
                        what, f"offset of {topic}/{broker}/{qid} must be an integer, got {offset!r}"
                    )
                if offset < 0 and not (allow_special and offset in (EARLIEST, LATEST)):
                    allowed = " (-2 = earliest, -1 = latest)" if allow_special else ""
                    raise InvalidOptionError(
                        what, f"offset of {topic}/{broker}/{qid} is {offset}; offsets must be >= 0{allowed}"
                    )
                out[MessageQueue(topic, broker, queue_id)] = offset
    return out


def _named_maps(
    obj: Mapping[Any, Any], what: str, kind: str, parent: str | None, contents: str
) -> Iterator[tuple[str, Mapping[Any, Any]]]:
    """One level of the nested offset dict: non-empty ``kind`` names, each mapping ``contents``."""
    for name, value in obj.items():
        if not isinstance(name, str) or not name:
            raise InvalidOptionError(what, f"{kind} names must be non-empty strings, got {name!r}")
        if not isinstance(value, Mapping):
            label = f"{kind} {name!r}" if parent is None else f"{parent}/{name}"
            raise InvalidOptionError(what, f"{label} must map {contents}, got {value!r}")
        yield name, value


def _parse_queue_id(qid: Any, what: str, topic: str, broker: str) -> int:
    if isinstance(qid, int) and not isinstance(qid, bool):
        value = qid
    elif isinstance(qid, str) and qid.isdigit() and qid.isascii():
        value = int(qid)
    else:
        raise InvalidOptionError(what, f"queue id {qid!r} of {topic}/{broker} is not a non-negative integer")
    if not 0 <= value < 2**31:
        raise InvalidOptionError(what, f"queue id {qid!r} of {topic}/{broker} is out of range")
    return value


def parse_json_option(name: str, text: str) -> Any:
    """``json.loads`` with an error naming the option."""
    try:
        return json.loads(text)
    except ValueError as exc:
        raise InvalidOptionError(name, f"not valid JSON ({exc}): {text!r}") from None


def topics_of(offsets: Iterable[MessageQueue]) -> set[str]:
    return {key.topic for key in offsets}
