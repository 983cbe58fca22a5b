"""The name server's request processors: request code → handler (reference §2.1).

Handlers are thin: read the custom header, call :class:`RouteInfoManager` or
:class:`KVConfigManager`, encode the reply. Rules:

* **Errors.** A missing/unparsable header field raises ``HeaderFieldError`` (SYSTEM_ERROR, the
  remark names the field, answered by the transport). Any ``ValueError`` that carries a
  ``remark`` (``RegistrationError``, ``BodyFormatError``...) becomes SYSTEM_ERROR with that remark
  here, without a traceback in the log: bad input is the sender's problem, not ours. Such
  requests change no table.
* **Unknown codes** are answered REQUEST_CODE_NOT_SUPPORTED (3) by the transport. Java's name
  server stays silent instead (its processor is the default one and returns null), which leaves
  the caller waiting for its timeout; an immediate answer is strictly more useful.
* **Route bodies are cached** per topic and per JSON form (quoted integer keys for request
  version >= 401 or ``acceptStandardJsonOnly``, fastjson's bare keys otherwise). Every operation
  that can change a route -- registrations, removals (also from :mod:`housekeeping`), topic
  deletion, write-permission changes, ORDER_TOPIC_CONFIG KV changes, config updates -- calls
  :meth:`NamesrvProcessor.invalidate_routes`. GET_ROUTEINFO_BY_TOPIC, the one hot request (every
  client polls every topic every 30 s), also skips the generic header codec.
* **KV writes** change memory, then the reply waits until a snapshot with the change is on disk
  (as Java's synchronous ``persist``); :class:`KVWriter` is ``controller.SnapshotPersister``.
"""

from __future__ import annotations

import logging
import zlib
from collections.abc import Awaitable, Callable
from typing import Protocol

from pydantic.alias_generators import to_camel

from pocketmq.namesrv.config import KNOWN_UNSUPPORTED_KEYS, NamesrvConfig
from pocketmq.namesrv.housekeeping import BROKER_ADDR_ATTR
from pocketmq.namesrv.kv_config import KVConfigManager
from pocketmq.namesrv.route_info import RouteInfoManager
from pocketmq.remoting.common import properties
from pocketmq.remoting.common.config import ConfigError, apply_config, render_config
from pocketmq.remoting.protocol.codes import (
    VERSION_REGISTER_BODY,
    VERSION_STANDARD_JSON_ROUTE,
    RequestCode,
    ResponseCode,
)
from pocketmq.remoting.protocol.command import RemotingCommand
from pocketmq.remoting.protocol.errors import HeaderFieldError, ResponseError
from pocketmq.remoting.protocol.headers import (
    AddWritePermOfBrokerRequestHeader,
    DeleteKVConfigRequestHeader,
    DeleteTopicFromNamesrvRequestHeader,
    GetKVConfigRequestHeader,
    GetKVConfigResponseHeader,
    GetKVListByNamespaceRequestHeader,
    GetTopicsByClusterRequestHeader,
    PutKVConfigRequestHeader,
    QueryDataVersionRequestHeader,
    QueryDataVersionResponseHeader,
    RegisterBrokerRequestHeader,
    RegisterBrokerResponseHeader,
    UnRegisterBrokerRequestHeader,
    WipeWritePermOfBrokerRequestHeader,
)
from pocketmq.remoting.protocol.route import (
    NAMESPACE_ORDER_TOPIC_CONFIG,
    DataVersion,
    KVTable,
    RegisterBrokerBody,
    TopicConfigSerializeWrapper,
    TopicList,
)
from pocketmq.remoting.transport.connection import Handler, RemotingConnection
from pocketmq.remoting.transport.tls import RESTART_REMARK, changed_tls_keys

logger = logging.getLogger(__name__)

__all__ = ["FAQ_URL", "ConfigOwner", "KVWriter", "NamesrvProcessor", "topic_not_exist_remark"]

#: RocketMQ 4.9's ``FAQUrl.APPLY_TOPIC_URL``; the remark ends like Java's ``suggestTodo``.
FAQ_URL = "http://rocketmq.apache.org/docs/faq/"


def topic_not_exist_remark(topic: str) -> str:
    """The TOPIC_NOT_EXIST remark of GET_ROUTEINFO_BY_TOPIC, worded as Java's name server."""
    return f"No topic route info in name server for the topic: {topic}\nSee {FAQ_URL} for further details."


class ConfigOwner(Protocol):
    """Who holds the live :class:`NamesrvConfig` (the controller)."""

    @property
    def config(self) -> NamesrvConfig: ...

    def set_config(self, config: NamesrvConfig) -> None: ...  # effective at once

    async def persist_config(self) -> None: ...  # the current config is on disk afterwards (OSError)


class KVWriter(Protocol):
    """Persists the KV table (the controller's ``SnapshotPersister``)."""

    def mark_dirty(self) -> None: ...

    async def flush(self) -> None: ...  # every change made so far is on disk afterwards (OSError)


#: A reply to a request: same opaque, response flag, the request's serialize type.
_reply = RemotingCommand.response_to


def _bad_request(conn: RemotingConnection, request: RemotingCommand, exc: ValueError) -> RemotingCommand:
    remark = getattr(exc, "remark", None) or str(exc)
    logger.warning(
        "request rejected code=%d remote=%s remark=%r", request.code, conn.remote_addr, remark[:200]
    )
    return _reply(request, ResponseCode.SYSTEM_ERROR, remark)


def _guard(fn: Handler) -> Handler:
    """Turn a ``ValueError`` with a remark into SYSTEM_ERROR (sync and async handlers)."""

    async def _await(
        conn: RemotingConnection, request: RemotingCommand, pending: Awaitable[RemotingCommand | None]
    ) -> RemotingCommand | None:
        try:
            return await pending
        except ResponseError:
            raise
        except ValueError as exc:
            return _bad_request(conn, request, exc)

    def handler(
        conn: RemotingConnection, request: RemotingCommand
    ) -> RemotingCommand | Awaitable[RemotingCommand | None] | None:
        try:
            result = fn(conn, request)
        except ResponseError:
            raise
        except ValueError as exc:
            return _bad_request(conn, request, exc)
        if result is None or isinstance(result, RemotingCommand):
            return result
        return _await(conn, request, result)

    return handler


def _topic_list_handler(query: Callable[[], TopicList]) -> Handler:
    def handler(conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        return _reply(request, body=query().encode())

    return handler


class NamesrvProcessor:
    """Every name-server request handler, over one set of tables.

    Args:
        route_info: the route tables.
        kv: the KV table.
        owner: holds the live config and applies UPDATE_NAMESRV_CONFIG.
        kv_persister: writes ``kvConfig.json`` after PUT/DELETE_KV_CONFIG.
        cache_routes: keep encoded route bodies (off only to measure what the cache buys).
    """

    def __init__(
        self,
        route_info: RouteInfoManager,
        kv: KVConfigManager,
        owner: ConfigOwner,
        kv_persister: KVWriter,
        *,
        cache_routes: bool = True,
    ) -> None:
        self.route_info = route_info
        self.kv = kv
        self.owner = owner
        self.kv_persister = kv_persister
        self.cache_routes = cache_routes
        # topic -> encoded TopicRouteData, one dict per JSON form.
        self._routes_standard: dict[str, bytes] = {}
        self._routes_legacy: dict[str, bytes] = {}

    def handlers(self) -> dict[int, Handler]:
        """Request code → handler, ready for ``RemotingServer.register``."""
        guarded: dict[int, Handler] = {
            RequestCode.PUT_KV_CONFIG: self.put_kv_config,
            RequestCode.GET_KV_CONFIG: self.get_kv_config,
            RequestCode.DELETE_KV_CONFIG: self.delete_kv_config,
            RequestCode.GET_KVLIST_BY_NAMESPACE: self.get_kv_list_by_namespace,
            RequestCode.QUERY_DATA_VERSION: self.query_data_version,
            RequestCode.REGISTER_BROKER: self.register_broker,
            RequestCode.UNREGISTER_BROKER: self.unregister_broker,
            RequestCode.GET_BROKER_CLUSTER_INFO: self.get_broker_cluster_info,
            RequestCode.WIPE_WRITE_PERM_OF_BROKER: self.wipe_write_perm_of_broker,
            RequestCode.ADD_WRITE_PERM_OF_BROKER: self.add_write_perm_of_broker,
            RequestCode.DELETE_TOPIC_IN_NAMESRV: self.delete_topic_in_namesrv,
            RequestCode.GET_TOPICS_BY_CLUSTER: self.get_topics_by_cluster,
            RequestCode.UPDATE_NAMESRV_CONFIG: self.update_namesrv_config,
            RequestCode.GET_NAMESRV_CONFIG: self.get_namesrv_config,
        }
        rim = self.route_info
        topic_lists: dict[int, Callable[[], TopicList]] = {
            RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER: rim.get_all_topic_list,
            RequestCode.GET_SYSTEM_TOPIC_LIST_FROM_NS: rim.get_system_topic_list,
            RequestCode.GET_UNIT_TOPIC_LIST: rim.get_unit_topics,
            RequestCode.GET_HAS_UNIT_SUB_TOPIC_LIST: rim.get_has_unit_sub_topic_list,
            RequestCode.GET_HAS_UNIT_SUB_UNUNIT_TOPIC_LIST: rim.get_has_unit_sub_un_unit_topic_list,
        }
        for code, query in topic_lists.items():
            guarded[code] = _topic_list_handler(query)
        table = {int(code): _guard(fn) for code, fn in guarded.items()}
        # The hot path handles its own (header-only) errors; no wrapper call per request.
        table[int(RequestCode.GET_ROUTEINFO_BY_TOPIC)] = self.get_route_info_by_topic
        return table

    def invalidate_routes(self) -> None:  # after any table change
        self._routes_standard.clear()
        self._routes_legacy.clear()

    def get_route_info_by_topic(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        ext = request.ext_fields
        topic = ext.get("topic") if ext else None
        if not topic:
            raise HeaderFieldError("the custom field <topic> is null (GetRouteInfoRequestHeader)")
        if request.version >= VERSION_STANDARD_JSON_ROUTE:
            cache = self._routes_standard
        else:
            flag = ext.get("acceptStandardJsonOnly") if ext else None
            standard = flag is not None and flag.lower() == "true"
            cache = self._routes_standard if standard else self._routes_legacy
        body = cache.get(topic)
        if body is None:
            route = self.route_info.pickup_topic_route_data(topic)
            if route is None:
                return _reply(request, ResponseCode.TOPIC_NOT_EXIST, topic_not_exist_remark(topic))
            body = route.encode(standard_json=cache is self._routes_standard)
            if self.cache_routes:
                cache[topic] = body
        return _reply(request, body=body)

    def get_broker_cluster_info(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        return _reply(request, body=self.route_info.get_all_cluster_info().encode())

    # -- broker registration -----------------------------------------------------------------

    def register_broker(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        header = RegisterBrokerRequestHeader.from_ext_fields(request.ext_fields)
        body = request.body
        if body and header.body_crc32 != 0 and zlib.crc32(body) & 0x7FFFFFFF != header.body_crc32:
            logger.warning(
                "register rejected reason=crc32 broker=%s addr=%s remote=%s",
                header.broker_name,
                header.broker_addr,
                conn.remote_addr,
            )
            return _reply(request, ResponseCode.SYSTEM_ERROR, "crc32 not match")
        filter_servers: list[str] | None
        if not body:
            # Java: no body means an empty topic table at DataVersion(0, 0).
            wrapper, filter_servers = TopicConfigSerializeWrapper(), []
        elif request.version >= VERSION_REGISTER_BODY:
            parsed = RegisterBrokerBody.decode(body, compressed=header.compressed)
            wrapper, filter_servers = parsed.topic_config_serialize_wrapper, parsed.filter_server_list
        else:
            wrapper, filter_servers = TopicConfigSerializeWrapper.decode(body), None
        rim = self.route_info
        addr = header.broker_addr
        known = addr in rim.broker_live_table
        changed = not known or rim.is_broker_topic_config_changed(addr, wrapper.data_version)
        result = rim.register_broker(
            header.cluster_name,
            addr,
            header.broker_name,
            header.broker_id,
            header.ha_server_addr,
            wrapper,
            filter_servers,
            conn,
        )
        conn.attrs[BROKER_ADDR_ATTR] = addr
        self.invalidate_routes()
        if changed:
            version = wrapper.data_version
            logger.info(
                "broker registered cluster=%s broker=%s id=%d addr=%s ha=%s topics=%d "
                "data_version=%d/%d first=%s remote=%s",
                header.cluster_name,
                header.broker_name,
                header.broker_id,
                addr,
                header.ha_server_addr,
                len(wrapper.topic_config_table),
                version.timestamp,
                version.counter,
                not known,
                conn.remote_addr,
            )
        elif logger.isEnabledFor(logging.DEBUG):
            logger.debug(
                "broker heartbeat broker=%s id=%d addr=%s", header.broker_name, header.broker_id, addr
            )
        reply_header = RegisterBrokerResponseHeader(  # type: ignore[call-arg, unused-ignore]
            ha_server_addr=result.ha_server_addr, master_addr=result.master_addr
        )
        kv_body = result.kv_table.encode() if result.kv_table is not None else None
        return _reply(request, ext_fields=reply_header.to_ext_fields(), body=kv_body)

    def unregister_broker(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        header = UnRegisterBrokerRequestHeader.from_ext_fields(request.ext_fields)
        removed = self.route_info.unregister_broker(
            header.cluster_name, header.broker_addr, header.broker_name, header.broker_id
        )
        self.invalidate_routes()
        logger.info(
            "broker unregistered cluster=%s broker=%s id=%d addr=%s found=%s name_removed=%s remote=%s",
            header.cluster_name,
            header.broker_name,
            header.broker_id,
            header.broker_addr,
            removed is not None,
            bool(removed and removed.broker_name_removed),
            conn.remote_addr,
        )
        return _reply(request)

    def query_data_version(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        header = QueryDataVersionRequestHeader.from_ext_fields(request.ext_fields)
        version = DataVersion.decode(request.body) if request.body else DataVersion()
        changed, stored = self.route_info.query_data_version(header.broker_addr, version)
        return _reply(
            request,
            ext_fields=QueryDataVersionResponseHeader(changed=changed).to_ext_fields(),  # type: ignore[call-arg, unused-ignore]
            body=stored.encode() if stored is not None else None,
        )

    # -- topics and permissions --------------------------------------------------------------

    def wipe_write_perm_of_broker(
        self, conn: RemotingConnection, request: RemotingCommand
    ) -> RemotingCommand:
        header = WipeWritePermOfBrokerRequestHeader.from_ext_fields(request.ext_fields)
        return self._change_write_perm(conn, request, header.broker_name, wipe=True)

    def add_write_perm_of_broker(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        header = AddWritePermOfBrokerRequestHeader.from_ext_fields(request.ext_fields)
        return self._change_write_perm(conn, request, header.broker_name, wipe=False)

    def _change_write_perm(
        self, conn: RemotingConnection, request: RemotingCommand, broker_name: str, *, wipe: bool
    ) -> RemotingCommand:
        rim = self.route_info
        count = (
            rim.wipe_write_perm_of_broker(broker_name) if wipe else rim.add_write_perm_of_broker(broker_name)
        )
        self.invalidate_routes()
        what = "wiped" if wipe else "added"
        logger.info(
            "write permission %s broker=%s topics=%d remote=%s", what, broker_name, count, conn.remote_addr
        )
        return _reply(request, ext_fields={"wipeTopicCount" if wipe else "addTopicCount": str(count)})

    def delete_topic_in_namesrv(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        header = DeleteTopicFromNamesrvRequestHeader.from_ext_fields(request.ext_fields)
        deleted = self.route_info.delete_topic(header.topic, header.cluster_name)
        self.invalidate_routes()
        logger.info(
            "topic deleted topic=%s cluster=%s found=%s remote=%s",
            header.topic,
            header.cluster_name,
            deleted,
            conn.remote_addr,
        )
        return _reply(request)

    def get_topics_by_cluster(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        header = GetTopicsByClusterRequestHeader.from_ext_fields(request.ext_fields)
        return _reply(request, body=self.route_info.get_topics_by_cluster(header.cluster).encode())

    # -- KV config ---------------------------------------------------------------------------

    async def _persist_kv(self, request: RemotingCommand, changed: bool, namespace: str) -> RemotingCommand:
        if namespace == NAMESPACE_ORDER_TOPIC_CONFIG:
            self.invalidate_routes()  # orderTopicConf is part of the route body
        if changed:
            self.kv_persister.mark_dirty()
        try:
            await self.kv_persister.flush()
        except OSError as exc:
            logger.error("kv config not persisted path=%s error=%s", self.kv.path, exc)
            return _reply(
                request, ResponseCode.SYSTEM_ERROR, f"kv config changed in memory but not persisted: {exc}"
            )
        return _reply(request)

    def put_kv_config(self, conn: RemotingConnection, request: RemotingCommand) -> Awaitable[RemotingCommand]:
        header = PutKVConfigRequestHeader.from_ext_fields(request.ext_fields)
        changed = self.kv.put_kv_config(header.namespace, header.key, header.value)
        if changed:
            logger.info(
                "kv config put namespace=%s key=%s remote=%s", header.namespace, header.key, conn.remote_addr
            )
        return self._persist_kv(request, changed, header.namespace)

    def delete_kv_config(
        self, conn: RemotingConnection, request: RemotingCommand
    ) -> Awaitable[RemotingCommand]:
        header = DeleteKVConfigRequestHeader.from_ext_fields(request.ext_fields)
        changed = self.kv.delete_kv_config(header.namespace, header.key)
        if changed:
            logger.info(
                "kv config deleted namespace=%s key=%s remote=%s",
                header.namespace,
                header.key,
                conn.remote_addr,
            )
        return self._persist_kv(request, changed, header.namespace)

    def get_kv_config(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        header = GetKVConfigRequestHeader.from_ext_fields(request.ext_fields)
        value = self.kv.get_kv_config(header.namespace, header.key)
        if value is None:
            return _reply(
                request,
                ResponseCode.QUERY_NOT_FOUND,
                f"No config item, Namespace: {header.namespace} Key: {header.key}",
            )
        fields = GetKVConfigResponseHeader(value=value).to_ext_fields()  # type: ignore[call-arg, unused-ignore]
        return _reply(request, ext_fields=fields)

    def get_kv_list_by_namespace(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        header = GetKVListByNamespaceRequestHeader.from_ext_fields(request.ext_fields)
        table = self.kv.get_kv_list_by_namespace(header.namespace)
        if table is None:
            return _reply(
                request, ResponseCode.QUERY_NOT_FOUND, f"No config item, Namespace: {header.namespace}"
            )
        return _reply(request, body=KVTable(table).encode())

    # -- name server config ------------------------------------------------------------------

    def get_namesrv_config(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        return _reply(request, body=render_config(self.owner.config).encode("utf-8"))

    def update_namesrv_config(
        self, conn: RemotingConnection, request: RemotingCommand
    ) -> RemotingCommand | Awaitable[RemotingCommand]:
        if not request.body:
            return _reply(request)
        try:
            updates = properties.loads_request_body(request.body)
        except ValueError as exc:
            return _reply(request, ResponseCode.SYSTEM_ERROR, str(exc))
        config = self.owner.config
        black = config.config_black_list_keys
        # kv_config_path and kvConfigPath name the same key.
        refused = sorted(k for k in updates if to_camel(k.strip()) in black)
        if refused:
            logger.warning("config update refused keys=%s remote=%s", ",".join(refused), conn.remote_addr)
            return _reply(
                request,
                ResponseCode.NO_PERMISSION,
                f"Can not update config in black list: {', '.join(refused)}",
            )
        try:
            new_config = apply_config(config, updates, known_foreign_keys=KNOWN_UNSUPPORTED_KEYS)
        except ConfigError as exc:
            return _reply(request, ResponseCode.SYSTEM_ERROR, str(exc))
        changed = changed_tls_keys(config, new_config)
        if changed:  # the listening socket was built with them
            return _reply(
                request, ResponseCode.SYSTEM_ERROR, f"UPDATE_NAMESRV_CONFIG: {changed[0]} {RESTART_REMARK}"
            )
        logger.info("config updated keys=%s remote=%s", ",".join(sorted(updates)), conn.remote_addr)
        # Applied synchronously: a second update in the same batch builds on this one.
        self.owner.set_config(new_config)
        self.invalidate_routes()
        return self._persist_config(request)

    async def _persist_config(self, request: RemotingCommand) -> RemotingCommand:
        try:
            await self.owner.persist_config()
        except OSError as exc:
            logger.error("config not persisted error=%s", exc)
            return _reply(request, ResponseCode.SYSTEM_ERROR, f"config applied but not persisted: {exc}")
        return _reply(request)
