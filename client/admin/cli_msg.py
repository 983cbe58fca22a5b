"""Message commands: queryMsgById, queryMsgByKey, queryMsgByUniqueKey, printMsg, sendMessage,
consumeMessage.

JSON documents (``message`` = :func:`pocketmq.client.admin.model.message_json`: msgId,
offsetMsgId, topic, tags, keys, queueId, queueOffset, commitLogOffset, reconsumeTimes,
bornTimestamp, storeTimestamp, bornHost, storeHost, sysFlag, properties, bodySize, body,
bodyEncoding):

* queryMsgById / queryMsgByUniqueKey: ``{"messages": [message + "tracks": [{consumerGroup,
  trackType, exceptionDesc}]], "consumeResult"?}`` (``consumeResult`` with ``-g``/``-d``)
* queryMsgByKey: ``{"topic", "key", "messages": [message]}``
* printMsg / consumeMessage: ``{"topic", "queues": [{brokerName, queueId, minOffset, maxOffset,
  "messages": [message]}]}``
* sendMessage: ``{"brokerName", "queueId", "sendStatus", "msgId", "offsetMsgId", "queueOffset"}``
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

from pocketmq.client.admin.cli_common import Opts, admin_command, bool_option, emit, run_admin, time_value

if TYPE_CHECKING:
    from pocketmq.client.admin.admin import MQAdmin
    from pocketmq.client.admin.model import MessageTrack, QueueRange
    from pocketmq.remoting.protocol.message import MessageExt


def _details(
    opts: Opts, found: list[tuple[MessageExt, list[MessageTrack]]], consume_result: Any = None
) -> None:
    from pocketmq.client.admin.format_msg import message_detail_text
    from pocketmq.client.admin.model import message_json

    docs = [{**message_json(m), "tracks": [t.to_json() for t in tracks]} for m, tracks in found]
    doc: dict[str, Any] = {"messages": docs}
    if consume_result is not None:
        doc["consumeResult"] = consume_result

    def text() -> str:
        out = "\n".join(message_detail_text(m, tracks) for m, tracks in found)
        if consume_result is not None:
            out += f"\nConsumeMessageDirectlyResult: {consume_result}\n"
        return out

    emit(opts, doc, text)


async def _with_tracks(
    admin: MQAdmin, msgs: list[MessageExt], group: str | None, client_id: str | None
) -> tuple[list[tuple[MessageExt, list[MessageTrack]]], Any]:
    found = [(m, await admin.message_tracks(m)) for m in msgs]
    result = None
    if group and client_id and msgs:
        result = await admin.consume_message_directly(group, client_id, msgs[0])
    return found, result


@admin_command("queryMsgById", "Query Message by Id.")
@click.option("-i", "--msgId", "msg_ids", required=True, help="offset message id(s), comma separated")
@click.option("-t", "--topic", "topic", help="topic: also look the id up as a unique key (producer msgId)")
@click.option("-g", "--consumerGroup", "group", help="with -d: have this consumer consume the message again")
@click.option("-d", "--clientId", "client_id", help="with -g: the consumer client id")
def query_msg_by_id(
    opts: Opts, msg_ids: str, topic: str | None, group: str | None, client_id: str | None
) -> None:
    ids = [i.strip() for i in msg_ids.split(",") if i.strip()]

    async def job(admin: MQAdmin) -> tuple[list[tuple[MessageExt, list[MessageTrack]]], Any]:
        msgs = [m for i in ids for m in await admin.find_message(i, topic)]
        return await _with_tracks(admin, msgs, group, client_id)

    found, result = run_admin(opts, job)
    _details(opts, found, result)


@admin_command("queryMsgByUniqueKey", "Query Message by Unique key.")
@click.option("-i", "--msgId", "msg_id", required=True, help="the producer's message id (UNIQ_KEY)")
@click.option("-t", "--topic", "topic", required=True)
@click.option("-g", "--consumerGroup", "group", help="with -d: have this consumer consume the message again")
@click.option("-d", "--clientId", "client_id", help="with -g: the consumer client id")
@click.option(
    "-a", "--showAll", "show_all", is_flag=True, help="every stored copy (retries), not just the first"
)
def query_msg_by_unique_key(
    opts: Opts, msg_id: str, topic: str, group: str | None, client_id: str | None, show_all: bool
) -> None:
    from pocketmq.client.admin.base import MQAdminError

    async def job(admin: MQAdmin) -> tuple[list[tuple[MessageExt, list[MessageTrack]]], Any]:
        msgs = await admin.query_by_unique_key(topic, msg_id)
        if not msgs:
            raise MQAdminError(f"no message with unique key {msg_id!r} in topic {topic!r}")
        return await _with_tracks(admin, msgs if show_all else msgs[:1], group, client_id)

    found, result = run_admin(opts, job)
    _details(opts, found, result)


@admin_command("queryMsgByKey", "Query Message by Key.")
@click.option("-t", "--topic", "topic", required=True)
@click.option("-k", "--msgKey", "key", required=True)
@click.option("-b", "--beginTimestamp", "begin", help="epoch ms or yyyy-MM-dd#HH:mm:ss:SSS (default 0)")
@click.option("-e", "--endTimestamp", "end", help="epoch ms or yyyy-MM-dd#HH:mm:ss:SSS (default: no end)")
@click.option("-m", "--maxNum", "max_num", type=click.IntRange(1), default=64, show_default=True)
@click.option("-c", "--cluster", "cluster", help="accepted for compatibility")
def query_msg_by_key(
    opts: Opts, topic: str, key: str, begin: str | None, end: str | None, max_num: int, cluster: str | None
) -> None:
    from pocketmq.client.admin.base import MQAdminError
    from pocketmq.client.admin.format_msg import query_by_key_table
    from pocketmq.client.admin.messages import MAX_TIME
    from pocketmq.client.admin.model import message_json

    b = time_value(begin, "'-b'") or 0
    e = time_value(end, "'-e'") or MAX_TIME
    msgs = run_admin(opts, lambda a: a.query_by_key(topic, key, max_num, b, e))
    if not msgs:
        raise MQAdminError(f"no message with key {key!r} in topic {topic!r}")
    doc = {"topic": topic, "key": key, "messages": [message_json(m) for m in msgs]}
    emit(opts, doc, lambda: query_by_key_table(msgs))


def _ranges_doc(topic: str, ranges: list[QueueRange], print_body: bool, charset: str) -> dict[str, Any]:
    from pocketmq.client.admin.model import message_json

    return {
        "topic": topic,
        "queues": [
            {
                "brokerName": r.broker_name, "queueId": r.queue_id, "minOffset": r.min_offset,
                "maxOffset": r.max_offset,
                "messages": [message_json(m, with_body=print_body, charset=charset) for m in r.messages],
            }
            for r in ranges
        ],
    }  # fmt: skip


def _charset(name: str) -> str:
    import codecs

    try:
        return codecs.lookup(name).name
    except LookupError:
        raise click.BadParameter(f"unknown charset {name!r}", param_hint="'-c'") from None


@admin_command("printMsg", "Print Message Detail.")
@click.option("-t", "--topic", "topic", required=True)
@click.option("-c", "--charsetName", "charset", default="UTF-8", show_default=True)
@click.option("-s", "--subExpression", "expression", default="*", show_default=True, help="tag expression")
@click.option("-b", "--beginTimestamp", "begin", help="epoch ms or yyyy-MM-dd#HH:mm:ss:SSS")
@click.option("-e", "--endTimestamp", "end", help="epoch ms or yyyy-MM-dd#HH:mm:ss:SSS")
@bool_option("-d", "--printBody", "print_body", default=True, help="print the message bodies")
def print_msg(
    opts: Opts,
    topic: str,
    charset: str,
    expression: str,
    begin: str | None,
    end: str | None,
    print_body: bool,
) -> None:
    from pocketmq.client.admin.format_msg import print_msg_text

    cs = _charset(charset)
    b, e = time_value(begin, "'-b'"), time_value(end, "'-e'")
    ranges = run_admin(opts, lambda a: a.read_messages(topic, expression=expression, begin_ms=b, end_ms=e))
    emit(
        opts,
        _ranges_doc(topic, ranges, print_body, cs),
        lambda: print_msg_text(topic, ranges, print_body, cs),
    )


@admin_command("consumeMessage", "Consume message.")
@click.option("-t", "--topic", "topic", required=True)
@click.option("-b", "--brokerName", "broker_name", help="only this broker")
@click.option("-i", "--queueId", "queue_id", type=click.IntRange(0), help="only this queue")
@click.option("-o", "--offset", "offset", type=click.IntRange(0), help="start at this queue offset")
@click.option("-g", "--consumerGroup", "group", help="pull as this group (no offset is committed)")
@click.option("-s", "--beginTimestamp", "begin", help="epoch ms or yyyy-MM-dd#HH:mm:ss:SSS")
@click.option("-e", "--endTimestamp", "end", help="epoch ms or yyyy-MM-dd#HH:mm:ss:SSS")
@click.option("-c", "--MessageNumber", "count", type=click.IntRange(1), default=128, show_default=True)
def consume_message(
    opts: Opts, topic: str, broker_name: str | None, queue_id: int | None, offset: int | None,
    group: str | None, begin: str | None, end: str | None, count: int,
) -> None:  # fmt: skip
    from pocketmq.client.admin.format_msg import print_msg_text
    from pocketmq.remoting.protocol.route import TOOLS_CONSUMER_GROUP

    b, e = time_value(begin, "'-s'"), time_value(end, "'-e'")
    ranges = run_admin(
        opts,
        lambda a: a.read_messages(
            topic, begin_ms=b, end_ms=e, broker_name=broker_name, queue_id=queue_id, offset=offset,
            max_count=count, group=group or TOOLS_CONSUMER_GROUP,
        ),
    )  # fmt: skip
    emit(opts, _ranges_doc(topic, ranges, True, "utf-8"), lambda: print_msg_text(topic, ranges, True))


@admin_command("sendMessage", "Send a message.")
@click.option("-t", "--topic", "topic", required=True)
@click.option("-p", "--body", "body", required=True, help="UTF-8 message body")
@click.option("-k", "--key", "keys", help="message keys")
@click.option("-c", "--tags", "tags", help="message tags")
@click.option("-b", "--broker", "broker_name", help="send to this broker (with -i)")
@click.option("-i", "--qid", "queue_id", type=click.IntRange(0), help="send to this queue (with -b)")
@bool_option("-m", "--msgTraceEnable", "trace", default=False, help="accepted for compatibility")
def send_message(
    opts: Opts, topic: str, body: str, keys: str | None, tags: str | None, broker_name: str | None,
    queue_id: int | None, trace: bool,
) -> None:  # fmt: skip
    from pocketmq.client.admin.format_msg import send_result_table

    if (broker_name is None) != (queue_id is None):
        raise click.UsageError("-b brokerName and -i queueId go together")
    result = run_admin(
        opts,
        lambda a: a.send_message(
            topic, body.encode(), tags=tags, keys=keys, broker_name=broker_name, queue_id=queue_id
        ),
    )
    mq = result.message_queue
    doc = {
        "brokerName": mq.broker_name, "queueId": mq.queue_id, "sendStatus": result.send_status.value,
        "msgId": result.msg_id, "offsetMsgId": result.offset_msg_id, "queueOffset": result.queue_offset,
    }  # fmt: skip
    emit(
        opts,
        doc,
        lambda: send_result_table(mq.broker_name, mq.queue_id, result.send_status.value, result.msg_id),
    )
