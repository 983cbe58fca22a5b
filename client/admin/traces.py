"""Reading message traces back (``mqadmin queryMsgTraceById``, the console's trace page).

The trace records (format in :mod:`pocketmq.client.trace`) of a message are the trace-topic
messages whose KEYS contain its id: a query by key on the trace topic, as Java's
``QueryMsgTraceByIdSubCommand`` does, decoded and filtered to that id.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pocketmq.client.trace import TRACE_TOPIC, TraceHop, decode_traces

if TYPE_CHECKING:
    from pocketmq.client.admin.admin import MQAdmin

__all__ = ["query_msg_trace"]

#: Java queries at most 64 trace messages per id
MAX_TRACE_MESSAGES = 64


async def query_msg_trace(admin: MQAdmin, msg_id: str, trace_topic: str | None = None) -> list[TraceHop]:
    """The hops recorded for ``msg_id`` (the producer's msgId), oldest first.

    Raises: TopicRouteNotFoundError when the trace topic does not exist.
    """
    found = await admin.query_by_key(trace_topic or TRACE_TOPIC, msg_id, MAX_TRACE_MESSAGES)
    hops: list[TraceHop] = []
    for msg in found:
        host = msg.born_host[0] if msg.born_host else ""
        hops += [
            h for h in decode_traces(msg.body.decode("utf-8", "replace"), str(host)) if h.msg_id == msg_id
        ]
    order = {"Pub": 0, "SubBefore": 1, "SubAfter": 2}
    hops.sort(key=lambda h: (h.timestamp, order.get(h.type, 3)))
    return hops
