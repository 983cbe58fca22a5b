"""Admin reply bodies that ``remoting.protocol.bodies`` does not have yet (fastjson shapes).

==============================  ==================================================================
body                            JSON (keys alphabetical; ``<MQ>`` = fastjson object-as-key)
==============================  ==================================================================
ConsumeStatsList (317)          ``{"brokerAddr","consumeStatsList":[{group:[ConsumeStats]}],"totalDiff"}``
QueryConsumeTimeSpanBody (303)  ``{"consumeTimeSpanSet":[{"consumeTimeStamp","delayTime",
                                "maxTimeStamp","messageQueue":MQ,"minTimeStamp"}]}``
QueryCorrectionOffsetBody (308) ``{"correctionOffsets":{queueId:offset}}``
BrokerStatsData (315)           ``{"statsDay","statsHour","statsMinute"}`` each ``{"avgpt","sum","tps"}``
QueryConsumeQueueResponseBody   ``{"filterData"?,"maxQueueIndex","minQueueIndex","queueData":[
(321)                           {"eval","physicOffset","physicSize","tagsCode"}],"subscriptionData"?}``
TopicConfigAndQueueMapping      TopicConfig fields (+ ``mappingDetail`` for static topics, never here)
(351, 5.x GET_TOPIC_CONFIG)
==============================  ==================================================================
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from pocketmq.broker.stats import StatsSnapshot
from pocketmq.remoting.protocol import fastjson
from pocketmq.remoting.protocol.bodies import ConsumeStats, MessageQueue, SubscriptionData


def consume_stats_json(stats: ConsumeStats) -> dict[str, Any]:
    return {"consumeTps": float(stats.consume_tps), "offsetTable": stats.offset_table}


def encode_consume_stats_list(
    broker_addr: str, per_group: Iterable[tuple[str, list[ConsumeStats]]], total_diff: int
) -> bytes:
    return fastjson.dumpb(
        {
            "brokerAddr": broker_addr,
            "consumeStatsList": [{g: [consume_stats_json(s) for s in lst]} for g, lst in per_group],
            "totalDiff": total_diff,
        }
    )


@dataclass(frozen=True, slots=True)
class QueueTimeSpan:
    message_queue: MessageQueue
    min_time_stamp: int
    max_time_stamp: int
    consume_time_stamp: int
    delay_time: int

    def to_json(self) -> dict[str, Any]:
        return {
            "consumeTimeStamp": self.consume_time_stamp,
            "delayTime": self.delay_time,
            "maxTimeStamp": self.max_time_stamp,
            "messageQueue": self.message_queue.to_json(),
            "minTimeStamp": self.min_time_stamp,
        }


def encode_time_spans(spans: Iterable[QueueTimeSpan]) -> bytes:
    return fastjson.dumpb({"consumeTimeSpanSet": [s.to_json() for s in spans]})


def encode_correction_offsets(offsets: Mapping[int, int]) -> bytes:
    return fastjson.dumpb({"correctionOffsets": dict(offsets)})


def encode_broker_stats_data(minute: StatsSnapshot, hour: StatsSnapshot, day: StatsSnapshot) -> bytes:
    return fastjson.dumpb(
        {"statsDay": day.to_json(), "statsHour": hour.to_json(), "statsMinute": minute.to_json()}
    )


@dataclass(frozen=True, slots=True)
class ConsumeQueueData:
    physic_offset: int
    physic_size: int
    tags_code: int

    def to_json(self) -> dict[str, Any]:
        # ``eval`` is a Java primitive boolean: always written, false unless a CQ-ext filter ran
        return {
            "eval": False,
            "physicOffset": self.physic_offset,
            "physicSize": self.physic_size,
            "tagsCode": self.tags_code,
        }


def encode_query_consume_queue(
    min_index: int,
    max_index: int,
    queue_data: Iterable[ConsumeQueueData],
    subscription: SubscriptionData | None = None,
    filter_data: str | None = None,
) -> bytes:
    out: dict[str, Any] = {}
    if filter_data is not None:
        out["filterData"] = filter_data
    out["maxQueueIndex"] = max_index
    out["minQueueIndex"] = min_index
    out["queueData"] = [d.to_json() for d in queue_data]
    if subscription is not None:
        out["subscriptionData"] = subscription.to_json()
    return fastjson.dumpb(out)
