"""More of RocketMQ's mqadmin commands, with its names and options: queryMsgByOffset,
printMsgByQueue, checkMsgSendRT, clusterRT, sendMsgStatus, updateKvConfig, deleteKvConfig,
updateNamesrvConfig, getConsumerConfig, allocateMQ, cleanExpiredCQ, cleanUnusedTopic,
deleteExpiredCommitLog. Registered in :data:`pocketmq.client.admin.cli.COMMANDS` through
:data:`EXTRA_COMMANDS`.

JSON documents (``--json``):

* queryMsgByOffset: ``{"topic", "brokerName", "queueId", "offset", "messages": [message]}``
* printMsgByQueue: ``{"topic", "brokerName", "queueId", "minOffset", "maxOffset", "messages",
  "tagCounts"}`` (``tagCounts`` only counts with ``-d true``; messages carry bodies with ``-p true``)
* checkMsgSendRT / sendMsgStatus: ``{"topic", "size", "sends": [{"index", "rtMs", "sendStatus",
  "brokerName", "queueId", "msgId", "error"}], "avgRtMs"}``
* clusterRT: ``{"rows": [{"cluster", "brokerName", "avgRtMs", "successCount", "failCount"}]}``
* updateKvConfig / deleteKvConfig: ``{"namespace", "key", "value", "namesrvs"}`` (no value for delete)
* updateNamesrvConfig: ``{"key", "value", "namesrvs"}``
* getConsumerConfig: ``{"group", "brokers": [{"cluster", "brokerName", "addr", "config"}]}``
* allocateMQ: ``{"topic", "result": {ip: [{"topic", "brokerName", "queueId"}]}}``
* cleanExpiredCQ / cleanUnusedTopic / deleteExpiredCommitLog: ``{"brokers": [{"addr", "result"}]}``
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

import click

from pocketmq.client.admin.cli_common import Opts, admin_command, bool_option, emit, run_admin, time_value

if TYPE_CHECKING:
    from pocketmq.client.admin.admin import MQAdmin
    from pocketmq.client.admin.model import QueueRange

_X = "pocketmq.client.admin.cli_extra"

#: name → (module, attribute, one-line description), merged into ``cli.COMMANDS``.
EXTRA_COMMANDS: dict[str, tuple[str, str, str]] = {
    "queryMsgByOffset": (_X, "query_msg_by_offset", "Query Message by offset"),
    "printMsgByQueue": (_X, "print_msg_by_queue", "Print Message Detail by queueId"),
    "checkMsgSendRT": (_X, "check_msg_send_rt", "Check message send response time"),
    "clusterRT": (_X, "cluster_rt", "List All clusters Message Send RT"),
    "sendMsgStatus": (_X, "send_msg_status", "Send msg to broker"),
    "updateKvConfig": (_X, "update_kv_config", "Create or update KV config"),
    "deleteKvConfig": (_X, "delete_kv_config", "Delete KV config"),
    "updateNamesrvConfig": (_X, "update_namesrv_config", "Update configs of name server"),
    "getConsumerConfig": (_X, "get_consumer_config", "Get consumer config by subscription group name"),
    "allocateMQ": (_X, "allocate_mq", "Allocate MQ"),
    "cleanExpiredCQ": (_X, "clean_expired_cq", "Clean expired ConsumeQueue on broker"),
    "cleanUnusedTopic": (_X, "clean_unused_topic", "Clean unused topic on broker"),
    "deleteExpiredCommitLog": (_X, "delete_expired_commit_log", "Delete expired CommitLog files"),
}


def _range_doc(topic: str, r: QueueRange, with_body: bool, charset: str) -> dict[str, Any]:
    from pocketmq.client.admin.model import message_json

    return {
        "topic": topic,
        "brokerName": r.broker_name,
        "queueId": r.queue_id,
        "minOffset": r.min_offset,
        "maxOffset": r.max_offset,
        "messages": [message_json(m, with_body=with_body, charset=charset) for m in r.messages],
    }


@admin_command("queryMsgByOffset", "Query Message by offset.")
@click.option("-t", "--topic", "topic", required=True)
@click.option("-b", "--brokerName", "broker_name", required=True)
@click.option("-i", "--queueId", "queue_id", type=click.IntRange(0), required=True)
@click.option("-o", "--offset", "offset", type=click.IntRange(0), required=True)
@click.option("-f", "--bodyFormat", "charset", default="utf-8", show_default=True, help="body charset")
def query_msg_by_offset(
    opts: Opts, topic: str, broker_name: str, queue_id: int, offset: int, charset: str
) -> None:
    from pocketmq.client.admin.base import MQAdminError
    from pocketmq.client.admin.format_msg import message_detail_text
    from pocketmq.client.admin.model import message_json

    async def job(admin: MQAdmin) -> list[QueueRange]:
        return await admin.read_messages(
            topic, broker_name=broker_name, queue_id=queue_id, offset=offset, max_count=1
        )

    ranges = run_admin(opts, job)
    msgs = [m for r in ranges for m in r.messages if m.queue_offset == offset]
    if not msgs:
        raise MQAdminError(f"no message at offset {offset} of {topic} {broker_name}:{queue_id}")
    doc = {
        "topic": topic, "brokerName": broker_name, "queueId": queue_id, "offset": offset,
        "messages": [message_json(m, charset=charset) for m in msgs],
    }  # fmt: skip
    emit(opts, doc, lambda: "".join(message_detail_text(m, []) for m in msgs))


@admin_command("printMsgByQueue", "Print Message Detail by queueId.")
@click.option("-t", "--topic", "topic", required=True)
@click.option("-a", "--brokerName", "broker_name", required=True)
@click.option("-i", "--queueId", "queue_id", type=click.IntRange(0), required=True)
@click.option("-c", "--charsetName", "charset", default="utf-8", show_default=True)
@click.option("-s", "--subExpression", "expression", default="*", show_default=True)
@click.option("-b", "--beginTimestamp", "begin", help="epoch ms or yyyy-MM-dd#HH:mm:ss:SSS")
@click.option("-e", "--endTimestamp", "end", help="epoch ms or yyyy-MM-dd#HH:mm:ss:SSS")
@bool_option("-p", "--print", "print_body", default=False, help="print every message (with its body)")
@bool_option("-d", "--calculate", "calculate", default=False, help="count the messages by tag")
@bool_option("-f", "--orderby", "order_by", default=False, help="with -d: biggest count first")
def print_msg_by_queue(
    opts: Opts, topic: str, broker_name: str, queue_id: int, charset: str, expression: str,
    begin: str | None, end: str | None, print_body: bool, calculate: bool, order_by: bool,
) -> None:  # fmt: skip
    from pocketmq.client.admin.format_msg import message_line

    begin_ms, end_ms = time_value(begin, "'-b'"), time_value(end, "'-e'")

    async def job(admin: MQAdmin) -> list[QueueRange]:
        return await admin.read_messages(
            topic, expression=expression, begin_ms=begin_ms, end_ms=end_ms,
            broker_name=broker_name, queue_id=queue_id,
        )  # fmt: skip

    (r,) = run_admin(opts, job)
    counts: dict[str, int] = {}
    if calculate:
        for m in r.messages:
            counts[m.tags or ""] = counts.get(m.tags or "", 0) + 1
    ordered = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]) if order_by else (kv[0], 0))
    doc = _range_doc(topic, r, print_body, charset)
    if not print_body:
        doc["messages"] = []
    doc["tagCounts"] = dict(ordered)

    def text() -> str:
        lines = [message_line(m, broker_name, True, charset) for m in r.messages] if print_body else []
        lines += [f"{tag or '<none>'} {n}\n" for tag, n in ordered]
        return "".join(lines) or f"{len(r.messages)} messages in [{r.min_offset}, {r.max_offset})\n"

    emit(opts, doc, text)


async def _timed_sends(
    admin: MQAdmin, topic: str, size: int, amount: int, queue_of: Any = None
) -> list[dict[str, Any]]:
    """``amount`` sends of ``size``-byte bodies through one producer, each timed."""
    from pocketmq.client.message import Message
    from pocketmq.client.producer.producer import Producer

    producer = Producer(
        f"PID_MQADMIN_RT_{int(time.time() * 1000)}", ";".join(admin.namesrv_addrs),
        send_msg_timeout=int(admin.timeout * 1000), mq_client_api_timeout=int(admin.timeout * 1000),
        retry_times_when_send_failed=0,
    )  # fmt: skip
    await producer.start()
    rows: list[dict[str, Any]] = []
    try:
        for i in range(amount):
            t0 = time.perf_counter()
            try:
                msg = Message(topic, b"x" * size)
                r = await (producer.send(msg, queue=queue_of) if queue_of is not None else producer.send(msg))
                row = {"sendStatus": str(r.send_status.name if hasattr(r.send_status, "name") else r.send_status),
                       "brokerName": r.message_queue.broker_name, "queueId": r.message_queue.queue_id,
                       "msgId": r.msg_id, "error": None}  # fmt: skip
            except Exception as exc:  # every failed send is a row of the report
                row = {
                    "sendStatus": None,
                    "brokerName": None,
                    "queueId": None,
                    "msgId": None,
                    "error": str(exc),
                }
            rows.append({"index": i, "rtMs": round((time.perf_counter() - t0) * 1000, 3), **row})
    finally:
        await producer.shutdown()
    return rows


def _avg(rows: list[dict[str, Any]]) -> float:
    ok = [r["rtMs"] for r in rows if r["error"] is None]
    return round(sum(ok) / len(ok), 3) if ok else 0.0


def _sends_text(rows: list[dict[str, Any]], avg: float) -> str:
    from pocketmq.client.admin.format import table

    body = table(
        ["#Index", "#RT(ms)", "#Status", "#Broker", "#Queue", "#MsgId/Error"],
        [(r["index"], r["rtMs"], r["sendStatus"] or "FAILED", r["brokerName"] or "", r["queueId"] or "",
          r["msgId"] or r["error"]) for r in rows],
    )  # fmt: skip
    return body + f"Avg RT: {avg:.3f} ms\n"


@admin_command("checkMsgSendRT", "Check message send response time.")
@click.option("-t", "--topic", "topic", required=True)
@click.option("-a", "--amount", "amount", type=click.IntRange(1), default=100, show_default=True)
@click.option(
    "-s", "--size", "size", type=click.IntRange(1), default=128, show_default=True, help="body bytes"
)
def check_msg_send_rt(opts: Opts, topic: str, amount: int, size: int) -> None:
    rows = run_admin(opts, lambda a: _timed_sends(a, topic, size, amount))
    avg = _avg(rows)
    emit(opts, {"topic": topic, "size": size, "sends": rows, "avgRtMs": avg}, lambda: _sends_text(rows, avg))


@admin_command("sendMsgStatus", "Send msg to broker.")
@click.option("-b", "--brokerName", "broker_name", required=True, help="the topic named after the broker")
@click.option("-s", "--messageSize", "size", type=click.IntRange(1), default=128, show_default=True)
@click.option("-c", "--count", "count", type=click.IntRange(1), default=50, show_default=True)
def send_msg_status(opts: Opts, broker_name: str, size: int, count: int) -> None:
    # RocketMQ sends to the topic named after the broker (every broker has one), so each send
    # measures that broker alone.
    rows = run_admin(opts, lambda a: _timed_sends(a, broker_name, size, count))
    avg = _avg(rows)
    emit(
        opts,
        {"topic": broker_name, "size": size, "sends": rows, "avgRtMs": avg},
        lambda: _sends_text(rows, avg),
    )


@admin_command("clusterRT", "List All clusters Message Send RT.")
@click.option("-a", "--amount", "amount", type=click.IntRange(1), default=100, show_default=True)
@click.option("-s", "--size", "size", type=click.IntRange(1), default=128, show_default=True)
@click.option("-c", "--cluster", "cluster", help="only this cluster")
@click.option("-p", "--print log", "print_log", is_flag=True, help="accepted for compatibility")
@click.option("-m", "--machine room", "machine_room", default="noname", help="accepted for compatibility")
@click.option(
    "-i", "--interval", "interval", type=click.IntRange(1), help="repeat every N seconds (Ctrl-C stops)"
)
def cluster_rt(
    opts: Opts,
    amount: int,
    size: int,
    cluster: str | None,
    print_log: bool,
    machine_room: str,
    interval: int | None,
) -> None:
    from pocketmq.client.admin.format import table

    async def job(admin: MQAdmin) -> list[dict[str, Any]]:
        info = await admin.cluster_info()
        out = []
        for name in sorted(info.cluster_addr_table):
            if cluster is not None and name != cluster:
                continue
            for broker in sorted(info.cluster_addr_table[name]):
                rows = await _timed_sends(admin, broker, size, amount)
                ok = sum(1 for r in rows if r["error"] is None)
                out.append({"cluster": name, "brokerName": broker, "avgRtMs": _avg(rows),
                            "successCount": ok, "failCount": len(rows) - ok})  # fmt: skip
        return out

    def text(rows: list[dict[str, Any]]) -> str:
        return table(
            ["#Cluster Name", "#Broker Name", "#RT", "#successCount", "#failCount"],
            [
                (r["cluster"], r["brokerName"], f"{r['avgRtMs']:.2f}", r["successCount"], r["failCount"])
                for r in rows
            ],
        )

    while True:
        rows = run_admin(opts, job)
        emit(opts, {"rows": rows}, text(rows) if not opts.json else "")
        if interval is None:
            return
        time.sleep(interval)


@admin_command("updateKvConfig", "Create or update KV config.")
@click.option("-s", "--namespace", "namespace", required=True)
@click.option("-k", "--key", "key", required=True)
@click.option("-v", "--value", "value", required=True)
def update_kv_config(opts: Opts, namespace: str, key: str, value: str) -> None:
    async def job(admin: MQAdmin) -> list[str]:
        await admin.put_kv_config(namespace, key, value)
        return list(admin.namesrv_addrs)

    namesrvs = run_admin(opts, job)
    doc = {"namespace": namespace, "key": key, "value": value, "namesrvs": namesrvs}
    emit(opts, doc, "update kv config in namespace success.\n")


@admin_command("deleteKvConfig", "Delete KV config.")
@click.option("-s", "--namespace", "namespace", required=True)
@click.option("-k", "--key", "key", required=True)
def delete_kv_config(opts: Opts, namespace: str, key: str) -> None:
    async def job(admin: MQAdmin) -> list[str]:
        await admin.delete_kv_config(namespace, key)
        return list(admin.namesrv_addrs)

    namesrvs = run_admin(opts, job)
    emit(
        opts,
        {"namespace": namespace, "key": key, "namesrvs": namesrvs},
        "delete kv config from namespace success.\n",
    )


@admin_command("updateNamesrvConfig", "Update configs of name server.")
@click.option("-k", "--key", "key", required=True)
@click.option("-v", "--value", "value", required=True)
def update_namesrv_config(opts: Opts, key: str, value: str) -> None:
    async def job(admin: MQAdmin) -> list[str]:
        await admin.gather(admin.api.update_namesrv_config(ns, {key: value}) for ns in admin.namesrv_addrs)
        return list(admin.namesrv_addrs)

    namesrvs = run_admin(opts, job)
    doc = {"key": key, "value": value, "namesrvs": namesrvs}
    emit(opts, doc, f"update name server config success!{namesrvs}\n{key} : {value}\n")


@admin_command("getConsumerConfig", "Get consumer config by subscription group name.")
@click.option("-g", "--groupName", "group", required=True)
def get_consumer_config(opts: Opts, group: str) -> None:
    from pocketmq.client.admin.base import MQAdminError

    async def job(admin: MQAdmin) -> list[dict[str, Any]]:
        info = await admin.cluster_info()
        out = []
        for cluster in sorted(info.cluster_addr_table):
            for name, addr in await admin.cluster_masters(cluster):
                groups = await admin.subscription_groups(addr)
                if group in groups:
                    cfg = groups[group]
                    config = cfg.to_json() if hasattr(cfg, "to_json") else dict(vars(cfg))
                    out.append({"cluster": cluster, "brokerName": name, "addr": addr, "config": config})
        if not out:
            raise MQAdminError(f"no broker has subscription group {group!r}")
        return out

    rows = run_admin(opts, job)

    def text() -> str:
        return "".join(
            f"============================{r['cluster']}===============================\n"
            f"{r['brokerName']} ({r['addr']})\n"
            + "".join(f"  {k:<32}= {v}\n" for k, v in r["config"].items())
            for r in rows
        )

    emit(opts, {"group": group, "brokers": rows}, text)


@admin_command("allocateMQ", "Allocate MQ.")
@click.option("-t", "--topic", "topic", required=True)
@click.option(
    "-i", "--ipList", "ip_list", required=True, help="comma separated client ids, e.g. 10.0.0.1,10.0.0.2"
)
def allocate_mq(opts: Opts, topic: str, ip_list: str) -> None:
    from pocketmq.client.consumer.rebalance import allocate_averagely
    from pocketmq.remoting.protocol.route import PermName

    ips = [ip.strip() for ip in ip_list.split(",") if ip.strip()]
    if not ips:
        raise click.BadParameter("give at least one client", param_hint="'-i'")

    async def job(admin: MQAdmin) -> dict[str, list[dict[str, Any]]]:
        from pocketmq.client.message import MessageQueue

        route = await admin.topic_route(topic)
        mqs = sorted(
            MessageQueue(topic, qd.broker_name, q)
            for qd in route.queue_datas
            if PermName.is_readable(qd.perm)
            for q in range(qd.read_queue_nums)
        )
        return {
            ip: [{"topic": m.topic, "brokerName": m.broker_name, "queueId": m.queue_id}
                 for m in allocate_averagely("aa", ip, mqs, ips)]
            for ip in ips
        }  # fmt: skip

    result = run_admin(opts, job)
    from pocketmq.client.admin.format import dumps_json

    emit(opts, {"topic": topic, "result": result}, lambda: dumps_json({"result": result}))


def _broker_call(opts: Opts, broker_addr: str | None, cluster: str | None, code: int) -> list[dict[str, Any]]:
    async def job(admin: MQAdmin) -> list[dict[str, Any]]:
        addrs = await admin.targets(broker_addr, cluster)
        out = []
        for addr in addrs:
            reply = await admin.api.invoke(addr, code)
            out.append({"addr": addr, "result": reply.code == 0 and (reply.body or b"").strip() != b"false",
                        "code": reply.code, "remark": reply.remark})  # fmt: skip
        return out

    return run_admin(opts, job)


def _broker_call_line(what: str, r: dict[str, Any]) -> str:
    if r["result"]:
        return f"{what} {r['addr']}: success\n"
    return f"{what} {r['addr']}: false (code {r['code']}: {r['remark']})\n"


def _broker_call_command(
    opts: Opts, broker_addr: str | None, cluster: str | None, code: int, what: str
) -> None:
    if not broker_addr and not cluster:
        raise click.UsageError("give a broker address (-b) or a cluster name (-c)")
    rows = _broker_call(opts, broker_addr, cluster, code)
    doc = {"brokers": [{"addr": r["addr"], "result": r["result"]} for r in rows]}
    emit(opts, doc, lambda: "".join(_broker_call_line(what, r) for r in rows))
    if not all(r["result"] for r in rows):
        raise click.exceptions.Exit(1)


@admin_command("cleanExpiredCQ", "Clean expired ConsumeQueue on broker.")
@click.option("-b", "--brokerAddr", "broker_addr", help="broker address")
@click.option("-c", "--cluster", "cluster", help="every master of this cluster")
def clean_expired_cq(opts: Opts, broker_addr: str | None, cluster: str | None) -> None:
    from pocketmq.remoting.protocol.codes import RequestCode

    _broker_call_command(opts, broker_addr, cluster, RequestCode.CLEAN_EXPIRED_CONSUMEQUEUE, "cleanExpiredCQ")


@admin_command("cleanUnusedTopic", "Clean unused topic on broker.")
@click.option("-b", "--brokerAddr", "broker_addr", help="broker address")
@click.option("-c", "--cluster", "cluster", help="every master of this cluster")
def clean_unused_topic(opts: Opts, broker_addr: str | None, cluster: str | None) -> None:
    from pocketmq.remoting.protocol.codes import RequestCode

    _broker_call_command(opts, broker_addr, cluster, RequestCode.CLEAN_UNUSED_TOPIC, "cleanUnusedTopic")


@admin_command("deleteExpiredCommitLog", "Delete expired CommitLog files.")
@click.option("-b", "--brokerAddr", "broker_addr", help="broker address")
@click.option("-c", "--cluster", "cluster", help="every master of this cluster")
def delete_expired_commit_log(opts: Opts, broker_addr: str | None, cluster: str | None) -> None:
    from pocketmq.remoting.protocol.codes import RequestCode

    _broker_call_command(
        opts, broker_addr, cluster, RequestCode.DELETE_EXPIRED_COMMITLOG, "deleteExpiredCommitLog"
    )
