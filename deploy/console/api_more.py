"""The console's Dashboard, DLQ and ACL routes (rocketmq-dashboard's pages of those names).

=======  =====================================  ==================================================
method   path                                   admin call
=======  =====================================  ==================================================
GET      /api/dashboard                         brokers' day totals, topics' 24 h puts and stored
                                                messages, the collected per-minute history
                                                (:mod:`.volume`)
GET      /api/dlq?group=&begin=&end=|id=        the messages of ``%DLQ%<group>`` by time range
                                                (up to 2000; the topic must be readable) or by id
POST     /api/dlq/readable                      ``{group}``: grant read on the write-only DLQ
                                                topic (``updateTopicPerm -p 6``)
POST     /api/dlq/resend                        ``{group, id}``: send the message again to its
                                                original topic (``RETRY_TOPIC``); with
                                                ``clientId``: CONSUME_MESSAGE_DIRECTLY to that
                                                client of the group (rocketmq-dashboard's resend)
GET      /api/acl                               per broker: GET_BROKER_CLUSTER_ACL_CONFIG (code 54)
                                                and GET_BROKER_CLUSTER_ACL_INFO (52)
POST     /api/acl                               UPDATE_AND_CREATE_ACL_CONFIG (50) on every broker
                                                ``{accessKey, secretKey, whiteRemoteAddress, admin,
                                                defaultTopicPerm, defaultGroupPerm, topicPerms,
                                                groupPerms}`` (perms: ``topic=PUB|SUB`` lines)
DELETE   /api/acl/{accessKey}                   DELETE_ACL_CONFIG (51) on every broker
POST     /api/acl/white                         UPDATE_GLOBAL_WHITE_ADDRS_CONFIG (53)
                                                ``{addresses}`` on every broker
=======  =====================================  ==================================================

ACL requests are signed with the console's ``--access-key`` / ``--secret-key`` (an admin
account of the cluster's ``plain_acl.yml``); a broker without ``aclEnable`` answers with its
error, shown per broker.
"""

from __future__ import annotations

import re
from typing import Any

from aiohttp import web

from pocketmq.client.admin import MQAdmin, MQAdminError
from pocketmq.client.admin.model import message_json
from pocketmq.deploy.console.api import (
    MAX_BY_TIME,
    BadRequest,
    NotFound,
    _arg,
    _body,
    _handler,
    send_as_console,
)
from pocketmq.deploy.console.volume import VolumeCollector, dashboard
from pocketmq.remoting.protocol.errors import ResponseError
from pocketmq.remoting.protocol.message import MessageConst
from pocketmq.remoting.protocol.route import PermName
from pocketmq.remoting.protocol.topics import DLQ_GROUP_TOPIC_PREFIX

__all__ = ["COLLECTOR_KEY", "more_routes", "user_properties"]

COLLECTOR_KEY: web.AppKey[VolumeCollector] = web.AppKey("volume", VolumeCollector)

#: property names the client or broker set themselves: not copied when a DLQ message is resent
_SYSTEM_PROPERTIES = frozenset(
    v for k, v in vars(MessageConst).items() if k.isupper() and isinstance(v, str) and k != "KEY_SEPARATOR"
)


def user_properties(props: dict[str, str]) -> dict[str, str]:
    """The application's own properties of a stored message (no system ones)."""
    return {k: v for k, v in props.items() if k not in _SYSTEM_PROPERTIES}


async def dashboard_route(admin: MQAdmin, request: web.Request) -> Any:
    return await dashboard(admin, request.app.get(COLLECTOR_KEY))


# -------------------------------------------------------------------------------------- DLQ
def _dlq_row(msg: Any) -> dict[str, Any]:
    row = message_json(msg, with_body=False)
    props = msg.properties
    row["originTopic"] = props.get(MessageConst.RETRY_TOPIC, "")
    row["originMsgId"] = props.get(MessageConst.ORIGIN_MESSAGE_ID, "")
    return row


async def dlq_messages(admin: MQAdmin, request: web.Request) -> Any:
    group = _arg(request, "group")
    topic = DLQ_GROUP_TOPIC_PREFIX + group
    msg_id, begin = _arg(request, "id", required=False), _arg(request, "begin", required=False)
    route = await admin.topic_route_or_none(topic)
    if route is None:
        return {"topic": topic, "messages": [], "readable": True, "note": f"{group} has no dead-letter queue"}
    # the broker creates %DLQ% topics write-only (as RocketMQ does): a time-range read needs the
    # read permission an operator grants (POST /api/dlq/readable); a read by id never does
    readable = all(PermName.is_readable(q.perm) for q in route.queue_datas)
    if not msg_id and not readable:
        return {"topic": topic, "messages": [], "readable": False, "note": f"{topic} is write-only"}
    if msg_id:
        try:
            found = await admin.find_message(msg_id, topic)
        except (ResponseError, MQAdminError) as exc:
            raise NotFound(str(exc)) from None
    else:
        end = _arg(request, "end", required=False)
        try:
            begin_ms = int(begin) if begin else 0
            end_ms = int(end) if end else admin.now_ms()
        except ValueError:
            raise BadRequest("begin and end are epoch milliseconds") from None
        ranges = await admin.read_messages(topic, begin_ms=begin_ms, end_ms=end_ms, max_count=MAX_BY_TIME)
        found = [m for r in ranges for m in r.messages]
    return {"topic": topic, "messages": [_dlq_row(m) for m in found], "readable": readable}


async def dlq_readable(admin: MQAdmin, request: web.Request) -> Any:
    """Grant read on ``%DLQ%<group>`` (perm 6) on each master (``mqadmin updateTopicPerm -p 6``)."""
    group = str((await _body(request)).get("group") or "").strip()
    if not group:
        raise BadRequest("group is required")
    topic = DLQ_GROUP_TOPIC_PREFIX + group
    route = await admin.topic_route_or_none(topic)
    if route is None:
        raise NotFound(f"{group} has no dead-letter queue")
    done = []
    for _, addr in admin.route_masters(route):
        done += await admin.update_topic_perm(
            topic, PermName.PERM_READ | PermName.PERM_WRITE, broker_addr=addr
        )
    return {"topic": topic, "brokers": [addr for addr, _, _ in done]}


async def dlq_resend(admin: MQAdmin, request: web.Request) -> Any:
    data = await _body(request)
    group, msg_id, client = (str(data.get(k) or "").strip() for k in ("group", "id", "clientId"))
    if not (group and msg_id):
        raise BadRequest("group and id are required")
    try:
        msg = (await admin.find_message(msg_id, DLQ_GROUP_TOPIC_PREFIX + group))[0]
    except (ResponseError, MQAdminError) as exc:
        raise NotFound(str(exc)) from None
    if client:
        return {"clientId": client, "result": await admin.consume_message_directly(group, client, msg)}
    origin = msg.properties.get(MessageConst.RETRY_TOPIC, "")
    if not origin:
        raise BadRequest(f"message {msg_id} has no RETRY_TOPIC property: its original topic is unknown")
    props = user_properties(msg.properties)
    props[MessageConst.ORIGIN_MESSAGE_ID] = msg.properties.get(MessageConst.ORIGIN_MESSAGE_ID, msg.msg_id)
    result = await send_as_console(request, origin, msg.body, tags=msg.tags, keys=msg.keys, properties=props)
    return {"topic": origin, "sendStatus": result.send_status.name, "msgId": result.msg_id}


# -------------------------------------------------------------------------------------- ACL
async def _acl_brokers(admin: MQAdmin) -> list[tuple[str, str]]:
    """(label, address) of every broker, masters and slaves (as ``mqadmin ... -c``)."""
    info = await admin.cluster_info()
    return [
        (f"{name}/{bid}", addr)
        for name, data in sorted(info.broker_addr_table.items())
        for bid, addr in sorted(data.broker_addrs.items())
    ]


async def acl_list(admin: MQAdmin, request: web.Request) -> Any:
    out = []
    for label, addr in await _acl_brokers(admin):
        row: dict[str, Any] = {"broker": label, "addr": addr, "error": None}
        try:
            row["config"] = await admin.acl_config(addr)
            row["version"] = await admin.acl_config_version(addr)
        except (ResponseError, MQAdminError) as exc:
            row["error"] = str(exc)
        out.append(row)
    return {"brokers": out}


def _perm_lines(value: Any) -> list[str] | None:
    """``topicPerms``: a list, or text with one ``name=PERM`` per line or comma; None = keep."""
    if value is None:
        return None
    items = value if isinstance(value, list) else re.split(r"[,\n]", str(value))
    out = [str(i).strip() for i in items if str(i).strip()]
    for item in out:
        if "=" not in item:
            raise BadRequest(f"permission {item!r} is not name=PERM")
    return out


async def _on_every_broker(admin: MQAdmin, call: Any) -> dict[str, Any]:
    done: list[str] = []
    failed: dict[str, str] = {}
    for _, addr in await _acl_brokers(admin):
        try:
            await call(addr)
            done.append(addr)
        except (ResponseError, MQAdminError) as exc:
            failed[addr] = str(exc)
    if not done and failed:
        raise MQAdminError("; ".join(f"{a}: {e}" for a, e in failed.items()))
    return {"brokers": done, "failed": failed}


async def acl_update(admin: MQAdmin, request: web.Request) -> Any:
    data = await _body(request)
    access_key = str(data.get("accessKey") or "").strip()
    if not access_key:
        raise BadRequest("accessKey is required")

    def text(name: str) -> str | None:
        value = str(data.get(name) or "").strip()
        return value or None

    topic_perms, group_perms = _perm_lines(data.get("topicPerms")), _perm_lines(data.get("groupPerms"))

    async def call(addr: str) -> None:
        await admin.update_acl_config(
            addr, access_key, secret_key=text("secretKey"), white_remote_address=text("whiteRemoteAddress"),
            admin=bool(data.get("admin", False)), default_topic_perm=text("defaultTopicPerm"),
            default_group_perm=text("defaultGroupPerm"), topic_perms=topic_perms, group_perms=group_perms,
        )  # fmt: skip

    return {"accessKey": access_key, **await _on_every_broker(admin, call)}


async def acl_delete(admin: MQAdmin, request: web.Request) -> Any:
    access_key = request.match_info["access_key"]
    return {
        "accessKey": access_key,
        **await _on_every_broker(admin, lambda addr: admin.delete_acl_config(addr, access_key)),
    }


async def acl_white(admin: MQAdmin, request: web.Request) -> Any:
    data = await _body(request)
    raw = data.get("addresses")
    addresses = [
        a.strip() for a in (raw if isinstance(raw, list) else str(raw or "").split(",")) if a.strip()
    ]
    return {
        "addresses": addresses,
        **await _on_every_broker(admin, lambda addr: admin.update_global_white_addrs(addr, addresses)),
    }


def more_routes(app: web.Application) -> None:
    r = app.router
    r.add_get("/api/dashboard", _handler(dashboard_route))
    r.add_get("/api/dlq", _handler(dlq_messages))
    r.add_post("/api/dlq/resend", _handler(dlq_resend))
    r.add_post("/api/dlq/readable", _handler(dlq_readable))
    r.add_get("/api/acl", _handler(acl_list))
    r.add_post("/api/acl", _handler(acl_update))
    r.add_post("/api/acl/white", _handler(acl_white))
    r.add_delete("/api/acl/{access_key}", _handler(acl_delete))
