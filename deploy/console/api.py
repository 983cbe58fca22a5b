"""The console's JSON API: each route is one admin call (``pocketmq.client.admin.MQAdmin``).

=======  =====================================  ==================================================
method   path                                   admin call (RocketMQ dashboard page)
=======  =====================================  ==================================================
GET      /api/cluster                           clusterList: brokers, roles, runtime figures
GET      /api/broker/config?addr=               getBrokerConfig
GET      /api/topics                            topicList, each with its type (normal, retry,
                                                DLQ, system)
POST     /api/topics                            updateTopic ``{topic, cluster, readQueueNums,
                                                writeQueueNums, perm, order}``
DELETE   /api/topics/{topic}?cluster=           deleteTopic (brokers and name servers)
GET      /api/topics/{topic}                    topicStatus + topicRoute + consuming groups with lag
POST     /api/topics/{topic}/send               sendMessage ``{body, tags, keys}``
GET      /api/groups                            consumerProgress (every group: clients, TPS, lag)
GET      /api/groups/{group}                    consumerProgress -s + consumerConnection
POST     /api/groups                            updateSubGroup ``{group, cluster, ...}``
DELETE   /api/groups/{group}?cluster=           deleteSubGroup
POST     /api/groups/{group}/reset              resetOffsetByTime ``{topic, timestamp}`` (-1 = end)
GET      /api/producers?group=&topic=           producerConnection
GET      /api/messages?topic=&key=|id=|begin=   queryMsgByKey / queryMsgById / printMsg by time
GET      /api/message?topic=&id=                the message, its body and per-group consume state
POST     /api/message/resend                    consumeMessageDirectly ``{topic, id, group,
                                                clientId}``
GET      /api/trace?id=&traceTopic=             queryMsgTraceById (the trace hops)
=======  =====================================  ==================================================

Failures answer ``{"error": "..."}``: 400 for a missing or bad parameter, 404 when nothing was
found, 502 when a broker or name server refused or could not be reached (its code and remark).
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web

from pocketmq.client.admin import MQAdmin, MQAdminError
from pocketmq.client.admin.model import message_json
from pocketmq.client.errors import MQClientError, TopicRouteNotFoundError
from pocketmq.client.message import SendResult
from pocketmq.remoting.protocol.errors import RemotingError, ResponseError
from pocketmq.remoting.protocol.route import PermName, TopicConfig
from pocketmq.remoting.protocol.topics import is_dlq_topic, is_retry_topic, is_system_topic

__all__ = ["ADMIN_KEY", "CREDENTIALS_KEY", "routes", "send_as_console", "topic_kind"]

ADMIN_KEY: web.AppKey[MQAdmin] = web.AppKey("admin", MQAdmin)
#: the console's ACL credentials (``access_key`` / ``secret_key``) when it has them
CREDENTIALS_KEY: web.AppKey[dict[str, str]] = web.AppKey("credentials", dict)
#: the dashboard's cap on a query by time
MAX_BY_TIME = 2000

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class BadRequest(Exception):
    """A missing or malformed parameter (400)."""


class NotFound(Exception):
    """Nothing matches (404)."""


def topic_kind(topic: str, clusters: set[str], brokers: set[str]) -> str:
    """NORMAL, RETRY, DLQ or SYSTEM (the dashboard's topic filter)."""
    if is_retry_topic(topic):
        return "RETRY"
    if is_dlq_topic(topic):
        return "DLQ"
    if is_system_topic(topic) or topic in clusters or topic in brokers or topic.endswith("_REPLY_TOPIC"):
        return "SYSTEM"
    return "NORMAL"


def _handler(fn: Callable[[MQAdmin, web.Request], Awaitable[Any]]) -> Handler:
    """Run ``fn`` with the app's admin client; its result as JSON, errors as ``{"error"}``."""

    async def handle(request: web.Request) -> web.StreamResponse:
        admin = request.app[ADMIN_KEY]
        try:
            result = await fn(admin, request)
        except BadRequest as exc:
            return web.json_response({"error": str(exc)}, status=400)
        except (NotFound, TopicRouteNotFoundError) as exc:
            return web.json_response({"error": str(exc)}, status=404)
        except (ResponseError, MQAdminError, MQClientError, RemotingError, OSError) as exc:
            return web.json_response({"error": f"{type(exc).__name__}: {exc}"}, status=502)
        return web.json_response(result)

    return handle


def _arg(request: web.Request, name: str, *, required: bool = True) -> str:
    value = request.query.get(name, "").strip()
    if required and not value:
        raise BadRequest(f"parameter {name!r} is required")
    return value


def _int(data: dict[str, Any], name: str, default: int) -> int:
    value = data.get(name, default)
    try:
        return int(value)
    except (TypeError, ValueError):
        raise BadRequest(f"{name} must be an integer, not {value!r}") from None


async def _body(request: web.Request) -> dict[str, Any]:
    try:
        data = await request.json()
    except ValueError:
        raise BadRequest("the request body must be a JSON object") from None
    if not isinstance(data, dict):
        raise BadRequest("the request body must be a JSON object")
    return data


# ---------------------------------------------------------------------------------- cluster
async def cluster(admin: MQAdmin, request: web.Request) -> Any:
    brokers = await admin.cluster_list()
    now = admin.now_ms()
    out = []
    for b in brokers:
        row = b.to_json()
        row["role"] = "MASTER" if b.broker_id == 0 else "SLAVE"
        row["hours"] = round(b.hours(now), 2)
        out.append(row)
    return {"brokers": out, "time": now}


async def broker_config(admin: MQAdmin, request: web.Request) -> Any:
    return await admin.broker_config(_arg(request, "addr"))


# ----------------------------------------------------------------------------------- topics
async def topics(admin: MQAdmin, request: web.Request) -> Any:
    info = await admin.cluster_info()
    clusters = set(info.cluster_addr_table)
    brokers = set(info.broker_addr_table)
    names = sorted(await admin.topic_list())
    return {"topics": [{"topic": t, "kind": topic_kind(t, clusters, brokers)} for t in names]}


async def create_topic(admin: MQAdmin, request: web.Request) -> Any:
    data = await _body(request)
    name = str(data.get("topic", "")).strip()
    if not name:
        raise BadRequest("topic is required")
    cluster_name = str(data.get("cluster") or "").strip() or None
    broker = str(data.get("brokerAddr") or "").strip() or None
    if cluster_name is None and broker is None:
        raise BadRequest("cluster or brokerAddr is required")
    config = TopicConfig(
        name,
        _int(data, "readQueueNums", 8),
        _int(data, "writeQueueNums", 8),
        _int(data, "perm", PermName.PERM_READ | PermName.PERM_WRITE),
        order=bool(data.get("order", False)),
    )
    addrs = await admin.create_topic(config, broker_addr=broker, cluster=cluster_name)
    return {"topic": name, "brokers": addrs}


async def delete_topic(admin: MQAdmin, request: web.Request) -> Any:
    topic = request.match_info["topic"]
    brokers, namesrvs = await admin.delete_topic(topic, _arg(request, "cluster", required=False) or None)
    return {"topic": topic, "brokers": brokers, "namesrvs": namesrvs}


async def topic_detail(admin: MQAdmin, request: web.Request) -> Any:
    topic = request.match_info["topic"]
    route = await admin.topic_route_or_none(topic)
    if route is None:
        raise NotFound(f"no route for topic {topic!r}")
    status = await admin.topic_status(topic)
    groups = []
    for group in await admin.topic_groups(topic):
        try:
            progress = await admin.consume_stats(group, topic)
            groups.append(
                {"group": group, "diffTotal": progress.diff_total, "consumeTps": progress.consume_tps}
            )
        except (ResponseError, MQAdminError):
            groups.append({"group": group, "diffTotal": None, "consumeTps": None})
    return {"topic": topic, "status": status.to_json(), "route": route.to_json(), "groups": groups}


async def send_as_console(
    request: web.Request, topic: str, body: bytes, *, tags: str | None, keys: str | None,
    properties: dict[str, str] | None = None,
) -> SendResult:  # fmt: skip
    """Send one message; signed with the console's ACL credentials when it has them (the admin
    client's short-lived producer is not)."""
    admin = request.app[ADMIN_KEY]
    creds = request.app.get(CREDENTIALS_KEY)
    if not creds:
        return await admin.send_message(topic, body, tags=tags, keys=keys, properties=properties)
    from pocketmq.client.message import Message
    from pocketmq.client.producer.producer import Producer

    timeout = int(admin.timeout * 1000)
    producer = Producer(
        "PID_CONSOLE", ";".join(admin.namesrv_addrs), send_msg_timeout=timeout,
        mq_client_api_timeout=timeout, access_key=creds["access_key"], secret_key=creds["secret_key"],
    )  # fmt: skip
    await producer.start()
    try:
        return await producer.send(Message(topic, body, tags=tags, keys=keys, properties=properties or {}))
    finally:
        await producer.shutdown()


async def send(admin: MQAdmin, request: web.Request) -> Any:
    topic = request.match_info["topic"]
    data = await _body(request)
    body = str(data.get("body", ""))
    result = await send_as_console(
        request,
        topic,
        body.encode("utf-8"),
        tags=str(data.get("tags") or "") or None,
        keys=str(data.get("keys") or "") or None,
    )
    mq = result.message_queue
    return {
        "sendStatus": result.send_status.name,
        "msgId": result.msg_id,
        "offsetMsgId": result.offset_msg_id,
        "brokerName": mq.broker_name,
        "queueId": mq.queue_id,
        "queueOffset": result.queue_offset,
    }


# ----------------------------------------------------------------------------------- groups
async def groups(admin: MQAdmin, request: web.Request) -> Any:
    return {"groups": [g.to_json() for g in await admin.all_groups_progress()]}


async def group_detail(admin: MQAdmin, request: web.Request) -> Any:
    group = request.match_info["group"]
    out: dict[str, Any] = {"group": group, "progress": None, "connection": None, "error": None}
    try:
        out["connection"] = (await admin.consumer_connection(group)).to_json()
    except (ResponseError, MQAdminError) as exc:
        out["error"] = str(exc)
    try:
        out["progress"] = (await admin.consumer_progress(group, show_client_ip=True)).to_json()
    except (ResponseError, MQAdminError) as exc:
        out["error"] = str(exc)
    return out


async def create_group(admin: MQAdmin, request: web.Request) -> Any:
    from pocketmq.remoting.protocol.bodies import SubscriptionGroupConfig

    data = await _body(request)
    name = str(data.get("group", "")).strip()
    cluster_name = str(data.get("cluster") or "").strip() or None
    if not name or cluster_name is None:
        raise BadRequest("group and cluster are required")
    config = SubscriptionGroupConfig(
        name,
        consume_enable=bool(data.get("consumeEnable", True)),
        consume_broadcast_enable=bool(data.get("consumeBroadcastEnable", True)),
        retry_queue_nums=_int(data, "retryQueueNums", 1),
        retry_max_times=_int(data, "retryMaxTimes", 16),
    )
    return {"group": name, "brokers": await admin.create_subscription_group(config, cluster=cluster_name)}


async def delete_group(admin: MQAdmin, request: web.Request) -> Any:
    group = request.match_info["group"]
    cluster_name = _arg(request, "cluster")
    return {"group": group, "brokers": await admin.delete_subscription_group(group, cluster=cluster_name)}


async def reset_offset(admin: MQAdmin, request: web.Request) -> Any:
    group = request.match_info["group"]
    data = await _body(request)
    topic = str(data.get("topic", "")).strip()
    if not topic:
        raise BadRequest("topic is required")
    result = await admin.reset_offset_by_time(group, topic, _int(data, "timestamp", -1), force=True)
    return result.to_json()


async def producers(admin: MQAdmin, request: web.Request) -> Any:
    rows = await admin.producer_connection(_arg(request, "group"), _arg(request, "topic"))
    return {"connections": [r.to_json() for r in rows]}


# --------------------------------------------------------------------------------- messages
async def messages(admin: MQAdmin, request: web.Request) -> Any:
    topic = _arg(request, "topic")
    key, msg_id, begin = (_arg(request, n, required=False) for n in ("key", "id", "begin"))
    if key:
        found = await admin.query_by_key(topic, key)
    elif msg_id:
        try:
            found = await admin.find_message(msg_id, topic)
        except (ResponseError, MQAdminError) as exc:
            raise NotFound(str(exc)) from None
    elif begin:
        end = _arg(request, "end", required=False)
        try:
            begin_ms = int(begin)
            end_ms = int(end) if end else int(time.time() * 1000)
        except ValueError:
            raise BadRequest("begin and end are epoch milliseconds") from None
        ranges = await admin.read_messages(topic, begin_ms=begin_ms, end_ms=end_ms, max_count=MAX_BY_TIME)
        found = [m for r in ranges for m in r.messages]
    else:
        raise BadRequest("give key, id or begin")
    return {"messages": [message_json(m, with_body=False) for m in found]}


async def message_detail(admin: MQAdmin, request: web.Request) -> Any:
    topic, msg_id = _arg(request, "topic"), _arg(request, "id")
    try:
        found = await admin.find_message(msg_id, topic)
    except (ResponseError, MQAdminError) as exc:
        raise NotFound(str(exc)) from None
    msg = found[0]
    tracks = await admin.message_tracks(msg)
    return {"message": message_json(msg), "tracks": [t.to_json() for t in tracks]}


async def resend(admin: MQAdmin, request: web.Request) -> Any:
    data = await _body(request)
    topic, msg_id, group, client = (
        str(data.get(k, "")).strip() for k in ("topic", "id", "group", "clientId")
    )
    if not (topic and msg_id and group and client):
        raise BadRequest("topic, id, group and clientId are required")
    msg = (await admin.find_message(msg_id, topic))[0]
    return await admin.consume_message_directly(group, client, msg)


async def trace(admin: MQAdmin, request: web.Request) -> Any:
    from pocketmq.client.admin.traces import query_msg_trace

    msg_id = _arg(request, "id")
    topic = _arg(request, "traceTopic", required=False) or None
    try:
        hops = await query_msg_trace(admin, msg_id, topic)
    except TopicRouteNotFoundError as exc:
        return {"msgId": msg_id, "hops": [], "error": f"no trace topic: {exc}"}
    return {"msgId": msg_id, "hops": [h.to_json() for h in hops]}


def routes(app: web.Application) -> None:
    r = app.router
    r.add_get("/api/cluster", _handler(cluster))
    r.add_get("/api/broker/config", _handler(broker_config))
    r.add_get("/api/topics", _handler(topics))
    r.add_post("/api/topics", _handler(create_topic))
    r.add_get("/api/topics/{topic}", _handler(topic_detail))
    r.add_delete("/api/topics/{topic}", _handler(delete_topic))
    r.add_post("/api/topics/{topic}/send", _handler(send))
    r.add_get("/api/groups", _handler(groups))
    r.add_post("/api/groups", _handler(create_group))
    r.add_get("/api/groups/{group}", _handler(group_detail))
    r.add_delete("/api/groups/{group}", _handler(delete_group))
    r.add_post("/api/groups/{group}/reset", _handler(reset_offset))
    r.add_get("/api/producers", _handler(producers))
    r.add_get("/api/messages", _handler(messages))
    r.add_get("/api/message", _handler(message_detail))
    r.add_post("/api/message/resend", _handler(resend))
    r.add_get("/api/trace", _handler(trace))
