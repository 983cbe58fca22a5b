"""``queryMsgTraceById``: a message's send and consume hops from the trace topic.

Text output is Java's: a ``#Type #ProducerGroup #ClientHost #SendTime #CostTimes #Status`` block
for the send, then one ``#ConsumerGroup`` block per consumer group (its SubAfter hops). ``--json``:
``{"msgId", "traceTopic", "hops": [{type, msgId, groupName, timestamp, costTime, status, topic,
tags, keys, storeHost, offsetMsgId, requestId, retryTimes, contextCode, regionId, clientHost}]}``
with every hop (SubBefore included), oldest first.
"""

from __future__ import annotations

import time

import click

from pocketmq.client.admin.cli_common import Opts, admin_command, emit, run_admin
from pocketmq.client.trace import TRACE_TOPIC, TraceHop

__all__ = ["query_msg_trace_by_id", "trace_text"]

_ROW = "{:<10} {:<20} {:<20} {:<20} {:<10} {:<10}\n"


def _time(ms: int) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ms / 1000))


def trace_text(hops: list[TraceHop]) -> str:
    out = []
    for h in hops:
        if h.type == "Pub":
            out.append(
                _ROW.format("#Type", "#ProducerGroup", "#ClientHost", "#SendTime", "#CostTimes", "#Status")
            )
            out.append(
                _ROW.format(
                    "Pub", h.group_name, h.client_host, _time(h.timestamp), f"{h.cost_time}ms", h.status
                )
            )
            out.append("\n")
    groups: dict[str, list[TraceHop]] = {}
    for h in hops:
        if h.type == "SubAfter":
            groups.setdefault(h.group_name, []).append(h)
    for group_hops in groups.values():
        out.append(
            _ROW.format("#Type", "#ConsumerGroup", "#ClientHost", "#ConsumerTime", "#CostTimes", "#Status")
        )
        out.extend(
            _ROW.format("Sub", h.group_name, h.client_host, _time(h.timestamp), f"{h.cost_time}ms", h.status)
            for h in group_hops
        )
        out.append("\n")
    return "".join(out)


@admin_command("queryMsgTraceById", "Query a message trace.")
@click.option("-i", "--msgId", "msg_id", required=True, help="the message id (the producer's msgId)")
@click.option("-t", "--traceTopic", "trace_topic", default=TRACE_TOPIC, show_default=True)
def query_msg_trace_by_id(opts: Opts, msg_id: str, trace_topic: str) -> None:
    from pocketmq.client.admin.base import MQAdminError
    from pocketmq.client.admin.traces import query_msg_trace

    msg_id = msg_id.strip()
    hops = run_admin(opts, lambda a: query_msg_trace(a, msg_id, trace_topic))
    if not hops:
        raise MQAdminError(f"no trace of message {msg_id!r} in {trace_topic!r}")
    doc = {"msgId": msg_id, "traceTopic": trace_topic, "hops": [h.to_json() for h in hops]}
    emit(opts, doc, lambda: trace_text(hops))
