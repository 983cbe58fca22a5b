"""Human output of the message and client-status commands (pure, like :mod:`.format`).

* ``queryMsgById`` / ``queryMsgByUniqueKey``: one ``Label: value`` line per field (labels as
  RocketMQ prints them), the body, then the consumption state per consumer group;
* ``queryMsgByKey``: ``#Message ID #QID #Offset``;
* ``printMsg`` / ``consumeMessage``: a ``minOffset=.., maxOffset=.., MessageQueue [..]`` banner per
  queue, then ``MSGID: <id> MessageExt [..] BODY: <text>`` per message;
* ``sendMessage``: ``#Broker Name #QID #Send Result #MsgId``;
* ``consumerStatus``: per-client table, subscription consistency, and one client's details.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pocketmq.client.admin.format import human_time, kv_lines, table
from pocketmq.client.admin.model import MessageTrack, QueueRange, body_json
from pocketmq.remoting.protocol.message import MessageExt

__all__ = [
    "consumer_status_text",
    "message_detail_text",
    "message_line",
    "print_msg_text",
    "query_by_key_table",
    "send_result_table",
]


def _body_text(msg: MessageExt, charset: str) -> str:
    text, enc = body_json(msg.body, charset)
    return text if enc != "base64" else f"(binary, base64) {text}"


def _host(h: tuple[str, int]) -> str:
    return f"{h[0]}:{h[1]}"


def message_detail_text(
    msg: MessageExt, tracks: Sequence[MessageTrack] | None, charset: str = "utf-8", print_body: bool = True
) -> str:
    """The ``Label: value`` detail of one message, then its consumption tracks."""
    props = ", ".join(f"{k}={v}" for k, v in sorted(msg.properties.items()))
    items: list[tuple[str, object]] = [
        ("Msg ID:", msg.uniq_key or msg.msg_id),
        ("OffsetID:", msg.msg_id),
        ("Topic:", msg.topic),
        ("Tags:", f"[{msg.tags or ''}]"),
        ("Keys:", f"[{msg.keys or ''}]"),
        ("Queue ID:", msg.queue_id),
        ("Queue Offset:", msg.queue_offset),
        ("CommitLog Offset:", msg.commit_log_offset),
        ("Reconsume Times:", msg.reconsume_times),
        ("Born Timestamp:", human_time(msg.born_timestamp)),
        ("Store Timestamp:", human_time(msg.store_timestamp)),
        ("Born Host:", _host(msg.born_host)),
        ("Store Host:", _host(msg.store_host)),
        ("System Flag:", msg.sys_flag),
        ("Properties:", "{" + props + "}"),
        ("Message Body:", _body_text(msg, charset) if print_body else "NOT PRINT BODY"),
    ]
    out = kv_lines(items, " ", 20)
    if tracks is None:
        return out
    if not tracks:
        return out + "\nWARN: No Consumer\n"
    rows = [[t.consumer_group, t.track_type, t.exception_desc or ""] for t in tracks]
    return out + "\n" + table(["#ConsumerGroup", "#TrackType", "#ExceptionDesc"], rows)


def query_by_key_table(msgs: Sequence[MessageExt]) -> str:
    rows = [[m.uniq_key or m.msg_id, m.queue_id, m.queue_offset] for m in msgs]
    return table(["#Message ID", "#QID", "#Offset"], rows)


def message_line(msg: MessageExt, broker_name: str, print_body: bool, charset: str = "utf-8") -> str:
    summary = (
        f"MessageExt [topic={msg.topic}, brokerName={broker_name}, queueId={msg.queue_id}, "
        f"queueOffset={msg.queue_offset}, storeTimestamp={msg.store_timestamp}, tags={msg.tags}, "
        f"keys={msg.keys}, offsetMsgId={msg.msg_id}]"
    )
    body = _body_text(msg, charset) if print_body else "NOT PRINT BODY"
    return f"MSGID: {msg.uniq_key or msg.msg_id} {summary} BODY: {body}\n"


def print_msg_text(topic: str, ranges: Sequence[QueueRange], print_body: bool, charset: str = "utf-8") -> str:
    out: list[str] = []
    for r in ranges:
        out.append(
            f"minOffset={r.min_offset}, maxOffset={r.max_offset}, "
            f"MessageQueue [topic={topic}, brokerName={r.broker_name}, queueId={r.queue_id}]\n"
        )
        out.extend(message_line(m, r.broker_name, print_body, charset) for m in r.messages)
    return "".join(out)


def send_result_table(broker_name: str, queue_id: int, status: str, msg_id: str) -> str:
    return table(
        ["#Broker Name", "#QID", "#Send Result", "#MsgId"], [[broker_name, queue_id, status, msg_id]]
    )


def _sub_text(sub: Mapping[str, Any]) -> str:
    """``topic:expression``, with the type when it is not TAG (``T:SQL92(a > 5)``)."""
    kind = sub.get("expressionType") or "TAG"
    expr = sub.get("subString")
    return f"{sub.get('topic')}:{expr}" if kind == "TAG" else f"{sub.get('topic')}:{kind}({expr})"


def consumer_status_text(
    group: str, clients: Mapping[str, Mapping[str, Any]], errors: Mapping[str, str], detail: str | None
) -> str:
    """consumerStatus: one line per client, then whether their subscriptions agree.

    ``clients`` maps client id to its ConsumerRunningInfo JSON (``mqTable`` as a list of queue
    objects, see ``MQAdmin.consumer_running_info``); ``detail`` names the client whose
    properties, subscriptions and queues are printed in full (``-i``).
    """
    rows: list[list[object]] = []
    for i, (cid, info) in enumerate(sorted(clients.items()), 1):
        props = info.get("properties") or {}
        rows.append(
            [f"{i:03d}", cid, props.get("PROP_CLIENT_VERSION", ""), len(info.get("mqTable") or {}),
             ", ".join(_sub_text(s) for s in info.get("subscriptionSet") or [])]
        )  # fmt: skip
    for cid, err in sorted(errors.items()):
        rows.append(["ERR", cid, "", "", err])
    out = table(["#Index", "#ClientId", "#Version", "#Queues", "#Subscriptions"], rows)
    subs = {
        tuple(
            sorted(
                (str(s.get("topic")), str(s.get("subString")), str(s.get("expressionType") or "TAG"))
                for s in info.get("subscriptionSet") or []
            )
        )
        for info in clients.values()
    }
    if len(subs) <= 1:
        out += "\nSame subscription in the same group of consumer\n"
    else:
        out += f"\nWARN: Different subscription in the same group of consumer!!! ({group})\n"
    if detail is not None and detail in clients:
        info = clients[detail]
        out += f"\n#Consumer Properties#\n{kv_lines(sorted((info.get('properties') or {}).items()), ': ')}"
        out += "\n#Consumer Subscription#\n"
        out += table(
            ["#Topic", "#SubExpression", "#ExpressionType"],
            [[s.get("topic"), s.get("subString"), s.get("expressionType", "TAG")]
             for s in info.get("subscriptionSet") or []],
        )  # fmt: skip
        out += "\n#Consumer MQ Detail#\n"
        queues = sorted(info.get("mqTable") or [], key=lambda q: (q["topic"], q["brokerName"], q["queueId"]))
        mq_rows = [
            [
                pq["topic"],
                pq["brokerName"],
                pq["queueId"],
                pq.get("cachedMsgCount", 0),
                pq.get("cachedMsgMinOffset", 0),
                pq.get("cachedMsgMaxOffset", 0),
                str(pq.get("locked", False)).lower(),
                human_time(int(pq.get("lastPullTimestamp", 0) or 0)),
                human_time(int(pq.get("lastConsumeTimestamp", 0) or 0)),
            ]
            for pq in queues
        ]
        out += table(
            ["#Topic", "#Broker Name", "#QID", "#CachedMsgs", "#MinOffset", "#MaxOffset", "#Locked",
             "#LastPull", "#LastConsume"],
            mq_rows,
        )  # fmt: skip
    return out
