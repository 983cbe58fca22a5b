"""PULL_MESSAGE (11): tag-hash filtering, commit-offset flag, long-polling suspend.

Checks and codes (``PullMessageProcessor.processRequest``):

====  =========================================================================================
code  condition
====  =========================================================================================
16    broker not readable; group ``consumeEnable=false``; topic not readable; broadcast
      consumption of a group with ``consumeBroadcastEnable=false``
26    unknown group and ``autoCreateSubscriptionGroup=false``
17    unknown topic
1     ``queueId`` outside ``[0, readQueueNums)``; SQL92 without ``enablePropertyFilter``
23    a SQL92 expression that does not compile (remark: the position and the reason)
24    no SUBSCRIPTION flag and no heartbeat subscription for the topic
25    heartbeat ``subVersion`` older than the request's
====  =========================================================================================

The checks and the status mapping are :mod:`pocketmq.broker.processor.pull_checks`.
Store status → reply: FOUND 0; NO_MATCHED_MESSAGE / MESSAGE_WAS_REMOVING 20;
OFFSET_OVERFLOW_ONE / OFFSET_FOUND_NULL 19; OFFSET_TOO_SMALL / OFFSET_OVERFLOW_BADLY 21;
NO_MESSAGE_IN_QUEUE / NO_MATCHED_LOGIC_QUEUE 21 unless the request offset is 0 (then 19).
Every reply carries ``suggestWhichBrokerId``, ``nextBeginOffset``, ``minOffset``, ``maxOffset``
and the status name as remark. A 19 with SUSPEND set is held (:mod:`pocketmq.broker.longpolling`)
and answered later; the COMMIT_OFFSET side effect happens only on the first execution.

A held pull keeps its parsed header (and the filter of a subscription it carried), so waking
it re-runs the checks and the store read but not the parsing. Subscriptions carried by pulls
are parsed once per distinct (topic, expression, type, version) and cached; SQL92 expressions
are compiled once per (group, topic, expression) (:class:`pocketmq.broker.filter.SqlFilterCache`).
With ``filterSupportRetry`` a pull of ``%RETRY%<group>`` evaluates each message against the
group's SQL92 subscription of the message's original topic (:mod:`pocketmq.broker.filter`).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pocketmq.broker.config_file import reply_when_durable
from pocketmq.broker.filter import RetrySqlMessageFilter, SqlFilterCache, SqlMessageFilter, TagMessageFilter
from pocketmq.broker.longpolling import HeldPull
from pocketmq.broker.processor.pull_checks import check_pull, pull_outcome
from pocketmq.remoting.protocol.bodies import ExpressionType, MessageModel, SubscriptionData
from pocketmq.remoting.protocol.codes import (
    CURRENT_VERSION,
    FLAG_COMMIT_OFFSET,
    FLAG_SUBSCRIPTION,
    FLAG_SUSPEND,
    RPC_TYPE_RESPONSE,
    LanguageCode,
    RequestCode,
    ResponseCode,
)
from pocketmq.remoting.protocol.command import (
    PREFIX,
    EncodedReply,
    RemotingCommand,
    RenderedReply,
    reply_template,
)
from pocketmq.remoting.protocol.errors import (
    NoPermissionError,
    RemoteSystemError,
    RemotingConnectError,
    ResponseError,
    SubscriptionNotExistError,
    SubscriptionNotLatestError,
    SubscriptionParseFailedError,
)
from pocketmq.remoting.protocol.filter import SqlExpression, SqlFilterError
from pocketmq.remoting.protocol.headers import PullMessageRequestHeader
from pocketmq.remoting.protocol.slots import SlotRecord
from pocketmq.remoting.protocol.topics import RETRY_GROUP_TOPIC_PREFIX
from pocketmq.store import BrokerRole

if TYPE_CHECKING:
    from pocketmq.broker.client_manager import ConsumerManager
    from pocketmq.broker.config import BrokerConfig
    from pocketmq.broker.longpolling import PullRequestHoldService
    from pocketmq.broker.offset_manager import ConsumerOffsetManager
    from pocketmq.broker.state import BrokerState, Registrar
    from pocketmq.broker.stats import BrokerStatsManager
    from pocketmq.broker.subscription import SubscriptionGroupManager
    from pocketmq.broker.topic_config import TopicConfigManager
    from pocketmq.remoting.transport.connection import RemotingConnection
    from pocketmq.store import MessageStore

logger = logging.getLogger(__name__)


# Enum members hoisted for the per-request path (docs/development.md, hot paths).
_TAG = ExpressionType.TAG.value
_SLAVE = BrokerRole.SLAVE
#: TAG filters of heartbeat subscriptions kept (cleared when full)
_TAG_FILTERS_MAX = 4096
_BROADCASTING = MessageModel.BROADCASTING
_SUCCESS = int(ResponseCode.SUCCESS)
_PULL_NOT_FOUND = int(ResponseCode.PULL_NOT_FOUND)
_PULL_OFFSET_MOVED = int(ResponseCode.PULL_OFFSET_MOVED)
_SYSTEM_ERROR = int(ResponseCode.SYSTEM_ERROR)
_RESPONSE = int(RPC_TYPE_RESPONSE)
_JAVA = int(LanguageCode.JAVA)
_CURRENT_VERSION = int(CURRENT_VERSION)
#: distinct carried subscriptions kept parsed (cleared when full: keys come from clients)
_SUB_CACHE_MAX = 4096

_Filter = TagMessageFilter | SqlMessageFilter | RetrySqlMessageFilter

_pack_prefix = PREFIX.pack
#: the reply's extFields, in this order (``_response``)
_REPLY_KEYS = ("suggestWhichBrokerId", "nextBeginOffset", "minOffset", "maxOffset")


class PullReply(SlotRecord, RenderedReply):
    """A PULL_MESSAGE reply (JSON) whose frame head was rendered from its ``(code, remark)``
    template as it was built (``_response``): a reply's remark is its status name, which
    made every FOUND reply take the generic header encoder (~20k instructions with its
    extFields' build, a woken pull's at one send in flight). Its ``ext_fields`` dict is built
    only when asked for (decoded from ``head``: EncodedReply's property), as a SEND_OK's: a
    reply is only written, and the dict's build and release was ~2k instructions per reply."""

    __slots__ = ()
    ext_fields = EncodedReply.ext_fields


#: the reply's extFields in their order, each a value cut out of the template
_REPLY_EXT: dict[str, str | None] = dict.fromkeys(_REPLY_KEYS)
#: (code, remark) -> the JSON header cut where the four extFields values and the opaque go
#: (``reply_template``; None: a remark holding its cut marker, encoded the general way)
_heads: dict[tuple[int, str], tuple[str, ...] | None] = {}


def _reply_template(code: int, remark: str) -> tuple[str, ...] | None:
    tpl = _heads[(code, remark)] = reply_template(_REPLY_EXT, code, remark)
    if len(_heads) > 256:  # (codes x status names: a handful)
        _heads.clear()
    return tpl


class _Settings:
    """A config's values that ``check_pull`` and ``pull_outcome`` read (``PullSettings``),
    copied once per config object (``PullMessageProcessor._read_config``)."""

    __slots__ = ("broker_ip1", "broker_permission", "is_slave", "slave_read_enable", "store")

    def __init__(self, cfg: BrokerConfig) -> None:
        self.broker_permission, self.broker_ip1 = cfg.broker_permission, cfg.broker_ip1
        self.slave_read_enable, self.is_slave, self.store = cfg.slave_read_enable, cfg.is_slave, cfg.store


@dataclass(eq=False, kw_only=True)
class PullMessageProcessor:
    """Owns PULL_MESSAGE; built by the controller with exactly these collaborators."""

    #: the message store (reads)
    store: MessageStore
    #: topic configs
    topics: TopicConfigManager
    #: subscription groups (auto-created when allowed)
    groups: SubscriptionGroupManager
    #: committed offsets (COMMIT_OFFSET)
    offsets: ConsumerOffsetManager
    #: the consumers' heartbeat subscriptions
    consumers: ConsumerManager
    #: long polling: a pull that found nothing is held there; its ``execute`` is set to
    #: :meth:`execute_when_wakeup` here
    hold: PullRequestHoldService
    #: the broker's live config
    state: BrokerState
    #: counts found pulls
    stats: BrokerStatsManager

    def __post_init__(self) -> None:
        self.hold.execute = self.execute_when_wakeup
        #: (topic, expression, type, version) -> the parsed subscription and its TAG filter (None
        #: for SQL92: its compiled form lives in ``sql_filters`` alone, which bounds its memory)
        self._carried: dict[
            tuple[str, str | None, str | None, int], tuple[SubscriptionData, TagMessageFilter | None]
        ] = {}
        #: compiled SQL92 subscriptions (carried or from heartbeats)
        self.sql_filters = SqlFilterCache(_SUB_CACHE_MAX)
        #: id of a heartbeat subscription -> its TAG filter (``_tag_filter``)
        self._tag_filters: dict[int, TagMessageFilter] = {}
        #: the config the values ``_read_config`` sets were read from (None: none yet)
        self._cfg: BrokerConfig | None = None
        self._settings: _Settings

    def _read_config(self, cfg: BrokerConfig) -> None:
        """Read the settings ``process_request`` uses from a new config. Configs are frozen and
        replaced whole (UPDATE_BROKER_CONFIG), so this runs once per config, not per pull: a
        pydantic model's attribute read goes through its ``__getattr__`` hook (~0.5k
        instructions each, callgrind), four per held pull otherwise."""
        #: what check_pull and pull_outcome read of it
        self._settings = _Settings(cfg)
        self._filter_retry = cfg.filter_support_retry
        self._long_polling = cfg.long_polling_enable
        self._short_polling_ms = cfg.short_polling_time_mills
        # (``cfg.is_slave`` without its Enum ``value`` read)
        self._commits = cfg.store.broker_role is not _SLAVE
        self._cfg = cfg

    def register(self, register: Registrar) -> None:
        # Java serves pulls only on the main port, never on the VIP port.
        register(RequestCode.PULL_MESSAGE, self.process, fast=False)

    def process(
        self, conn: RemotingConnection, request: RemotingCommand
    ) -> RemotingCommand | Awaitable[RemotingCommand | None] | None:
        if not conn.is_active and _lost_pull_without_commit(request):
            # served after its connection closed, with nothing to commit: only the group's
            # auto-creation is kept (T16: ~80,000 such pulls of 100 closed non-readers, ~17 µs
            # each through ``process_request``); one that commits takes the full path below
            group = (request.ext_fields or {}).get("consumerGroup")
            if group is not None:
                self.groups.find_subscription_group_config(group)
            return None
        if self.groups.durable is not None:
            return self._after_pending_write(conn, request)
        response = self.process_request(conn, request, allow_suspend=True)
        if self.groups.durable is None:
            return response
        # a group auto-created by this pull is written before the reply acknowledges it
        return reply_when_durable(response, self.groups)

    async def _after_pending_write(
        self, conn: RemotingConnection, request: RemotingCommand
    ) -> RemotingCommand | None:
        """A pull that arrives while a group write is pending (its own group may be the one
        being created) reads the store only once the write is durable and the connection can
        take the reply. So a waiting pull holds its request, not a reply: a client that sends
        thousands of pulls in that window without reading cost ~100 MiB of replies per
        connection otherwise (chaos T16), since replies written by tasks bypass the
        connection's stop-handling-when-the-write-buffer-is-full rule."""
        await self._groups_durable()
        try:
            while not conn.can_write:
                await conn.drain()  # woken together: each re-checks, the first reply pauses the rest
        except RemotingConnectError:
            return None  # the peer is gone: nobody to answer
        response = self.process_request(conn, request, allow_suspend=True)
        await self._groups_durable()  # this pull (re)created its group
        return response

    async def _groups_durable(self) -> None:
        written = reply_when_durable(None, self.groups)
        if written is not None:
            await written

    def execute_when_wakeup(self, held: HeldPull) -> None:
        """Re-run a held pull without suspending and send its reply (long-polling callback)."""
        conn = held.conn
        if not conn.is_active:
            return
        try:
            response = self.process_request(conn, held.request, allow_suspend=False, header=held.header)
        except ResponseError as exc:
            response = RemotingCommand.response_to(held.request, exc.response_code, exc.remark)
        except Exception as exc:
            logger.exception("held pull %s:%d failed", held.topic, held.queue_id)
            response = RemotingCommand.response_to(held.request, _SYSTEM_ERROR, str(exc))
        if response is not None and conn.is_active:
            conn.send_response(response)

    # ------------------------------------------------------------------------------------------
    def process_request(
        self,
        conn: RemotingConnection,
        request: RemotingCommand,
        *,
        allow_suspend: bool,
        header: PullMessageRequestHeader | None = None,
    ) -> RemotingCommand | None:
        """Run one pull; ``header`` is the request's already parsed header (a held pull's)."""
        cfg = self.state.config
        if cfg is not self._cfg:
            self._read_config(cfg)
        settings = self._settings
        if header is None:
            header = PullMessageRequestHeader.from_ext_fields(request.ext_fields)
        sgc, _ = check_pull(settings, header, self.groups, self.topics, conn)
        group = header.consumer_group
        sys_flag = header.sys_flag
        # (the flags as ints, tested for truth: a bool() call each otherwise)
        has_suspend = sys_flag & FLAG_SUSPEND
        has_commit = sys_flag & FLAG_COMMIT_OFFSET
        has_subscription = sys_flag & FLAG_SUBSCRIPTION
        topic = header.topic
        queue_id = header.queue_id
        message_filter: _Filter
        if has_subscription:
            sub, message_filter = self._carried_subscription(header)
        else:
            sub = self._subscription(header, sgc.consume_broadcast_enable)
            if sub.expression_type == _TAG:
                message_filter = self._tag_filter(sub)
            else:
                message_filter = self._sql_filter(group, sub)
        if sub.expression_type != _TAG and not cfg.enable_property_filter:
            raise RemoteSystemError(
                f"The broker does not support consumer to filter message by {sub.expression_type}"
            )
        if self._filter_retry and topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
            message_filter = self._retry_filter(group, message_filter)
        if not conn.is_active:
            # a pull read before its connection closed (served by the transport after the
            # close): no reply can reach the peer, so the store is not read for it (100 clients
            # closed with ~1,000 pulls of 512 KiB each read ~50 GB: seconds of loop, T16); what
            # it changes on the broker, its group and committed offset, still applies
            if allow_suspend and has_commit and self._commits:
                self.offsets.commit_offset(group, topic, queue_id, header.commit_offset)
            return None
        # An accept-all filter goes as None: the store then makes no per-record filter calls
        # (and a held pull's arrival check none). (``accepts_all`` is a property: read once.)
        store_filter = None if message_filter.accepts_all else message_filter
        result = self.store.get_message(
            group,
            topic,
            queue_id,
            header.queue_offset,
            header.max_msg_nums,
            message_filter=store_filter,
        )
        status = result.status
        code, suggest, next_begin = pull_outcome(
            settings,
            status,
            header.queue_offset,
            result.next_begin_offset,
            result.suggest_pulling_from_slave,
            sgc.which_broker_when_consume_slowly,
            sgc.broker_id,
        )

        response: RemotingCommand | None = None
        if code == _PULL_NOT_FOUND and allow_suspend and has_suspend:
            timeout = header.suspend_timeout_millis if self._long_polling else self._short_polling_ms
            hold = self.hold
            held = HeldPull()  # (its slots filled here: HeldPull has no Python __init__)
            held.conn, held.request, held.topic, held.queue_id = conn, request, topic, queue_id
            held.pull_from_offset, held.deadline_ms = header.queue_offset, hold.now_ms() + max(0, timeout)
            held.message_filter, held.header, held.done = store_filter, header, False
            if not hold.suspend(held):
                response = self._response(request, code, status._name_, suggest, next_begin, result)
        else:
            if code == _PULL_OFFSET_MOVED:
                logger.warning(
                    "PULL_OFFSET_MOVED: group=%s topic=%s queue=%d requested=%d next=%d min=%d max=%d",
                    group, topic, queue_id, header.queue_offset, next_begin, result.min_offset, result.max_offset,
                )  # fmt: skip
            response = self._response(request, code, status._name_, suggest, next_begin, result)
            if code == _SUCCESS:
                self.stats.on_get(group, topic, result.message_count, len(result.body))

        if allow_suspend and has_commit and self._commits:
            self.offsets.commit_offset(group, topic, queue_id, header.commit_offset)
        return response

    def _tag_filter(self, sub: SubscriptionData) -> TagMessageFilter:
        """The TAG filter of a heartbeat subscription, made once per subscription object (a
        pull runs twice per delivery, held then woken, and a filter's making reads Enum values:
        ~5k instructions). Subscriptions are frozen and replaced, not changed, by a heartbeat;
        the filter keeps its subscription, so an id reused by a new one is told apart."""
        cached = self._tag_filters.get(id(sub))
        if cached is not None and cached.subscription is sub:
            return cached
        if len(self._tag_filters) >= _TAG_FILTERS_MAX:
            self._tag_filters.clear()
        made = self._tag_filters[id(sub)] = TagMessageFilter(sub)
        return made

    def _sql_filter(self, group: str, sub: SubscriptionData) -> SqlMessageFilter:
        try:
            return self.sql_filters.get(group, sub.topic, sub.sub_string)
        except SqlFilterError as exc:
            raise SubscriptionParseFailedError(f"parse the consumer's subscription failed: {exc}") from None

    def _retry_filter(self, group: str, own: _Filter) -> _Filter:
        """``filterSupportRetry``: the group's SQL92 subscriptions filter its retry messages."""
        cgi = self.consumers.get_consumer_group_info(group)
        if cgi is None or not own.accepts_all:
            return own
        if all(sub.expression_type == _TAG for sub in cgi.subscription_table.values()):
            return own  # nothing to filter on: skip decoding each retry message
        sql_filters = self.sql_filters

        def lookup(real_topic: str) -> SqlExpression | None:
            return sql_filters.get_subscription(group, cgi.find_subscription_data(real_topic))

        return RetrySqlMessageFilter(lookup)

    def _carried_subscription(self, header: PullMessageRequestHeader) -> tuple[SubscriptionData, _Filter]:
        """The subscription a pull carries (FLAG_SUBSCRIPTION), parsed once per distinct one."""
        key = (header.topic, header.subscription, header.expression_type, header.sub_version)
        cached = self._carried.get(key)
        if cached is None:
            cached = self._parse_carried(key, header)
        sub, tag_filter = cached
        return sub, tag_filter if tag_filter is not None else self._sql_filter(header.consumer_group, sub)

    def _parse_carried(
        self, key: tuple[str, str | None, str | None, int], header: PullMessageRequestHeader
    ) -> tuple[SubscriptionData, TagMessageFilter | None]:
        """Parse and cache a carried subscription (an invalid SQL92 one raises 23 here)."""
        try:
            sub = SubscriptionData.build(
                header.topic,
                header.subscription,
                sub_version=header.sub_version,
                expression_type=header.expression_type or "TAG",
            )
        except Exception as exc:
            raise SubscriptionParseFailedError("parse the consumer's subscription failed") from exc
        tag_filter = None
        if sub.expression_type == _TAG:
            tag_filter = TagMessageFilter(sub)
        else:
            self._sql_filter(header.consumer_group, sub)  # an invalid expression: 23 now
        if len(self._carried) >= _SUB_CACHE_MAX:
            self._carried.clear()
        cached = self._carried[key] = (sub, tag_filter)
        return cached

    def _subscription(self, header: PullMessageRequestHeader, broadcast_enable: bool) -> SubscriptionData:
        """The subscription from the group's heartbeat (a pull without FLAG_SUBSCRIPTION)."""
        topic = header.topic
        cgi = self.consumers.get_consumer_group_info(header.consumer_group)
        if cgi is None:
            raise SubscriptionNotExistError("the consumer's group info not exist")
        if not broadcast_enable and cgi.message_model is _BROADCASTING:
            raise NoPermissionError(
                f"the consumer group[{header.consumer_group}] can not consume by broadcast way"
            )
        sub = cgi.find_subscription_data(topic)
        if sub is None:
            raise SubscriptionNotExistError("the consumer's subscription not exist")
        if sub.sub_version < header.sub_version:
            raise SubscriptionNotLatestError("the consumer's subscription not latest")
        return sub

    @staticmethod
    def _response(
        request: RemotingCommand, code: int, remark: str, suggest: int, next_begin: int, result: Any
    ) -> RemotingCommand:
        # (f-strings, not str(): FORMAT_VALUE formats an int without the type call, ~0.3k
        # instructions fewer each, the same digits)
        s_suggest, s_next = f"{suggest}", f"{next_begin}"
        s_min, s_max = f"{result.min_offset}", f"{result.max_offset}"
        body = result.body if code == _SUCCESS and result.body else None
        try:
            tpl = _heads[(code, remark)] if not request.serialize_type else None
        except KeyError:
            tpl = _reply_template(code, remark)
        if tpl is None:  # ROCKETMQ (binary) headers, or a remark with the cut marker
            ext = dict(zip(_REPLY_KEYS, (s_suggest, s_next, s_min, s_max), strict=True))
            return RemotingCommand.response_to(request, code, remark, ext, body)
        # (what response_to sets, its extFields left unset, then its head rendered)
        self = PullReply()
        self.code, self.opaque, self.flag, self.remark, self.body = (
            code,
            request.opaque,
            _RESPONSE,
            remark,
            body,
        )
        self.language, self.version, self.serialize_type = _JAVA, _CURRENT_VERSION, 0
        opaque = self.head_opaque = self.opaque
        header = f"{tpl[0]}{s_suggest}{tpl[1]}{s_next}{tpl[2]}{s_min}{tpl[3]}{s_max}{tpl[4]}{opaque}{tpl[5]}".encode()
        hlen = len(header)
        self.head = _pack_prefix(4 + hlen + (len(body) if body else 0), hlen) + header
        return self


def _lost_pull_without_commit(request: RemotingCommand) -> bool:
    """Whether a pull's ``sysFlag`` lacks FLAG_COMMIT_OFFSET (a missing or bad one: also true)."""
    flag = (request.ext_fields or {}).get("sysFlag")
    return flag is None or not flag.isdigit() or not int(flag) & FLAG_COMMIT_OFFSET
