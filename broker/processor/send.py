"""SEND_MESSAGE (10), SEND_MESSAGE_V2 (310), SEND_BATCH_MESSAGE (320) and V2 with ``m=true``.

Checks, in RocketMQ's order (``AbstractSendMessageProcessor.msgCheck`` + ``SendMessageProcessor``),
with RocketMQ's codes and remarks:

====  =========================================================================================
code  condition
====  =========================================================================================
14    the broker is a slave (SERVICE_NOT_AVAILABLE)
1     before ``startAcceptSendRequestTimeStamp``
16    broker not writable and the topic is an order topic
1     topic blank, with characters outside ``[%|a-zA-Z0-9_-]`` or longer than 127
16    topic in the not-allowed-to-send set (SCHEDULE_TOPIC_XXXX, RMQ_SYS_TRANS_*, ...), or a topic
      without PERM_WRITE
17    unknown topic and no auto-create (template missing or without PERM_INHERIT)
1     queueId >= max(readQueueNums, writeQueueNums)
26    ``%RETRY%<group>`` whose group does not exist (and no auto-create)
13    stored record longer than ``maxMessageSize``; properties longer than 32767 bytes; bad batch
      body or one longer than ``maxMessageSize`` in all; a batch to a ``%RETRY%`` topic; a batch
      whose header carries ``DELAY`` > 0 or a transaction type in its sysFlag
1     ``DELAY`` that is not an integer (Java's ``Integer.parseInt`` fails)
16    a transactional half message while ``rejectTransactionMessage`` (else it is stored as a
      half message: :mod:`pocketmq.broker.transaction`)
====  =========================================================================================

The checks are :func:`~pocketmq.broker.processor.send_checks.check_send` (and the size rules
there); the put status → reply table is ``send_checks.PUT_STATUS_REPLY``.

A ``%RETRY%<group>`` send at or past the group's max reconsume times goes to ``%DLQ%<group>``
(created write-only, as RocketMQ 4.x): :mod:`pocketmq.broker.retry_policy`, shared with
CONSUMER_SEND_MSG_BACK. ``DELAY`` > 0 (clamped to the highest level) stores the
message in ``SCHEDULE_TOPIC_XXXX`` for the schedule service (:mod:`pocketmq.broker.schedule`).

Stored properties = the request's, minus ``WAIT``, plus ``CLUSTER``. Batch records get the
header's properties appended to their own. The put is synchronous on the loop.
A SYNC_FLUSH put waits for its group-commit round: the handler returns no reply and
:mod:`pocketmq.broker.processor.flush_replies` answers the send once its round is flushed (no
task per send). A SYNC_MASTER put (replication) makes the handler return an awaitable instead.
While a topic auto-created by a send is being written to topics.json (``topics.durable``), replies
are deferred until the write completes (``config_file.reply_when_durable``; issue 23); the
steady state pays one attribute test.
"""

from __future__ import annotations

import random
import struct
from collections.abc import Awaitable, Callable, Container
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pocketmq.broker.config_file import reply_when_durable
from pocketmq.broker.processor.batch_body import checked_body
from pocketmq.broker.processor.flush_replies import FlushReplies
from pocketmq.broker.processor.message_props import (
    CLUSTER_KEY,
    DELAY_KEY,
    TRAN_KEY,
    WAIT_KEY,
    apply_delay_level,
    delay_level_of,
    has_delay,
    stored_properties,
    strip_property,
)
from pocketmq.broker.processor.peer_address import born_host_of
from pocketmq.broker.processor.replication_replies import ReplicationReplies
from pocketmq.broker.processor.send_checks import (
    ILLEGAL_REMARK,
    PUT_STATUS_DEFAULT,
    PUT_STATUS_REPLY,
    SendSettings,
    check_send,
    stored_size,
)
from pocketmq.broker.processor.send_ok_texts import (
    HEX4,
    NO_BLOCK,
    NO_NUMBER,
    REPLY_PREFIXES,
    encoded_reply,
    number_block,
    offset_block,
)
from pocketmq.broker.retry_policy import dlq_queue_id, ensure_dlq_topic, goes_to_dlq, max_reconsume_times
from pocketmq.broker.transaction.half_props import LAST_PLAN, sent_half_properties
from pocketmq.remoting.protocol.codes import (
    CURRENT_VERSION,
    RPC_TYPE_RESPONSE,
    LanguageCode,
    RequestCode,
    ResponseCode,
)
from pocketmq.remoting.protocol.command import PREFIX, EncodedReply, RemotingCommand, SendV2Request
from pocketmq.remoting.protocol.errors import (
    MessageIllegalError,
    NoPermissionError,
    RemoteSystemError,
    SubscriptionGroupNotExistError,
)
from pocketmq.remoting.protocol.headers import SendMessageRequestHeader
from pocketmq.remoting.protocol.message import (
    MAX_PROPERTIES_LENGTH,
    MULTI_TAGS_FLAG,
    TRANSACTION_ROLLBACK_TYPE,
    HostAddress,
    MessageConst,
    get_property,
)
from pocketmq.remoting.protocol.route import (
    RETRY_GROUP_TOPIC_PREFIX,
    RMQ_SYS_TRANS_HALF_TOPIC,
    TopicConfig,
    TopicFilterType,
)
from pocketmq.remoting.protocol.send_raw import SendRawRequest, full_header
from pocketmq.remoting.protocol.slots import SlotRecord
from pocketmq.store import AppendResult, MessageInner, PutMessageStatus, PutResult

if TYPE_CHECKING:
    from pocketmq.broker.schedule import ScheduleMessageService
    from pocketmq.broker.state import BrokerState, Registrar
    from pocketmq.broker.stats import BrokerStatsManager
    from pocketmq.broker.subscription import SubscriptionGroupManager
    from pocketmq.broker.topic_config import TopicConfigManager
    from pocketmq.remoting.transport.connection import RemotingConnection
    from pocketmq.store import MessageStore

#: the longest not-yet-dispatched tail a send dispatches itself for a waiting pull (_dispatch_now)
_DISPATCH_NOW_MAX_BYTES = 256 * 1024

# Enum members hoisted for the per-request path (docs/development.md, hot paths).
_SEND_MESSAGE = int(RequestCode.SEND_MESSAGE)
_SEND_BATCH_MESSAGE = int(RequestCode.SEND_BATCH_MESSAGE)
_SUCCESS = int(ResponseCode.SUCCESS)
_JAVA = LanguageCode.JAVA
_RESPONSE = int(RPC_TYPE_RESPONSE)
_pack_prefix = PREFIX.pack
#: the most topics process keeps the checked config of (SendMessageProcessor._plain_topics)
_PLAIN_TOPICS_MAX = 100_000
_join = b"".join
_PUT_OK = PutMessageStatus.PUT_OK
_MULTI_TAG = TopicFilterType.MULTI_TAG
#: bound once (a classmethod read builds a bound method per request)
_parse_v2 = SendMessageRequestHeader.from_ext_fields_v2
_parse_v2_attrs = SendMessageRequestHeader.from_v2_attrs
#: how process's tail answers a put: its reply returned, handed to FlushReplies (SYNC_FLUSH) or
#: to ReplicationReplies (SYNC_MASTER)
_NOW, _FLUSHED, _REPLICATED = 0, 1, 2


class _SentMessage(SlotRecord, MessageInner):
    """The MessageInner of a single send, made by a bare class call (SlotRecord: object's own
    ``__init__``, ~0.26k instructions fewer than ``object.__new__(MessageInner)`` through
    tp_new_wrapper, callgrind); ``process`` fills every slot."""

    __slots__ = ()


@dataclass(eq=False, kw_only=True)
class SendMessageProcessor:
    """Owns the send codes; built by the controller with exactly these collaborators."""

    #: the message store (puts, and the dispatch-now shortcut)
    store: MessageStore
    #: topic configs (auto-creation, ``%DLQ%`` topics)
    topics: TopicConfigManager
    #: subscription groups (a ``%RETRY%`` send's max reconsume times)
    groups: SubscriptionGroupManager
    #: the broker's live config and store host
    state: BrokerState
    #: wall clock (``startAcceptSendRequestTimeStamp``)
    now_ms: Callable[[], int]
    #: the ``(topic, queue_id)`` keys pulls are held on (``PullRequestHoldService.held_queues``,
    #: a live view): a put to one of them is dispatched at once
    held_queues: Container[tuple[str, int]]
    #: counts stored sends
    stats: BrokerStatsManager
    #: the delay service (``max_delay_level``); None ignores ``DELAY``
    schedule: ScheduleMessageService | None
    #: None, or the half-message service (``prepare_message`` / ``put_half(inner, ...)`` /
    #: ``store_half(inner, ...) -> PutResult | Awaitable[PutResult]``)
    transactions: Any = None

    def __post_init__(self) -> None:
        self._s = self._new_settings()
        self._rng = random.Random()
        #: Topic names that passed the name checks (valid, not a system topic): checked once.
        self._ok_topics: set[str] = set()
        #: topic -> the config (frozen: replaced whole when changed) with which a send to it
        #: passed check_send and that needs no retry/DLQ or MULTI_TAG step (process)
        self._plain_topics: dict[str, TopicConfig] = {}
        self._msgid_prefix: tuple[HostAddress, str] | None = None
        self._held_pulls = self.held_queues
        #: SYNC_FLUSH sends waiting for their group-commit round
        self.flush_replies = FlushReplies(self._render)
        self.replication_replies = ReplicationReplies(self._render)

    def _settings(self) -> SendSettings:
        s = self._s
        if s.cfg is not self.state.config:
            s = self._s = self._new_settings()
        return s

    def _new_settings(self) -> SendSettings:
        """The settings of the config, and the SEND_OK's text kept from send to send (``_reply``)
        started anew from its template's parts (p0 .. p4, cut at msgId, queueId, queueOffset and
        the opaque): every kept text holds parts."""
        s = SendSettings(self.state.config)
        parts = s.send_ok or ("",) * 5
        #: the last SEND_OK's 64 KiB block of CommitLog offsets: (its first offset, the reply's
        #: text up to the msgId's last four hex digits: p0, the store host's hex and the
        #: block's 12 digits); reset when the host changes (_msg_id)
        self._block = NO_BLOCK
        #: queue id -> its last SEND_OK's block of 1000 queue offsets (number_block: p1, the
        #: queue id and p2 before the block's leading digits; the last three's texts end in p3)
        self._queue_blocks: dict[int, tuple[int, bytes, list[bytes]]] = {}
        #: the last SEND_OK's block of 1000 opaques (number_block; the last three's texts end
        #: in p4, the template's end)
        self._opaque_block = NO_NUMBER
        #: the store host process renders SEND_OKs from the kept texts for (set by _msg_id
        #: once the msgId prefix is this host's; None: the template changed, or none)
        self._ok_host: HostAddress | None = None
        #: (a number's last three digits, all of it below 1000 / zero-padded otherwise) + p3;
        #: the same + p4 (UTF-8)
        self._number_texts = (
            [f"{i}{parts[3]}".encode() for i in range(1000)],
            [f"{i:03d}{parts[3]}".encode() for i in range(1000)],
            [f"{i}{parts[4]}".encode() for i in range(1000)],
            [f"{i:03d}{parts[4]}".encode() for i in range(1000)],
        )
        return s

    def _dispatch_now(self) -> None:
        """Dispatch what was just put, here, so a pull held on its queue is answered at once.

        Otherwise the reput task dispatches it one loop turn later; doing it now takes that
        turn (and the task's wake-up) off the send-to-receive latency. Same work, same order:
        the reput task then finds nothing left. Only done when a pull waits on the queue, and
        only for a short backlog: a long one stays with the reput task, which yields between
        slices instead of holding the loop.
        """
        store = self.store
        if store.dispatch_behind_bytes > _DISPATCH_NOW_MAX_BYTES:
            return
        try:
            store.do_reput(index=False)
        except OSError:
            pass  # e.g. ENOSPC creating a ConsumeQueue file: the reput task retries and logs it

    def register(self, register: Registrar) -> None:
        for code in (RequestCode.SEND_MESSAGE, RequestCode.SEND_MESSAGE_V2, RequestCode.SEND_BATCH_MESSAGE):
            register(code, self.process)

    # ------------------------------------------------------------------------------- entry
    def process(
        self, conn: RemotingConnection, request: RemotingCommand
    ) -> RemotingCommand | Awaitable[RemotingCommand] | None:
        """A send: a batch (``_send_batch``), else a single message, stored here (no call level
        per send for it: ~0.6k instructions). Every reply goes through ``_durable``."""
        # (__class__ read: ~50 instructions fewer than a type() call, callgrind)
        if request.__class__ is SendRawRequest:  # read by a learnt shape (frame, send_raw): parsed there
            # (its code is SEND_MESSAGE_V2, a class attribute: not read, as 3.11 specializes no
            # class attribute read through an instance, ~0.13k instructions)
            # the shape's one header: this send's but for its queue id, born timestamp and
            # properties, read from the request (send_raw: no header object per send)
            header = request.shape_header
            # properties without WAIT, CLUSTER, DELAY, TRAN_MSG or a trailing separator, as
            # every header of its shape has (send_raw._plain): none searched below
            plain = request.plain
            if header.batch:
                return self._durable(self._send_batch(conn, request, request.send_header))
            queue_id = request.queue_id
            born = request.born_timestamp
            sent = request.properties or ""
        else:
            plain = False
            code = request.code
            if request.__class__ is SendV2Request:  # decoded typed (frame): no extFields dict
                header = _parse_v2_attrs(request.v2_fields)
            elif code == _SEND_MESSAGE:
                header = SendMessageRequestHeader.from_ext_fields(request.ext_fields)
            else:
                header = _parse_v2(request.ext_fields)
            if header.batch or code == _SEND_BATCH_MESSAGE:
                return self._durable(self._send_batch(conn, request, header))
            queue_id = header.queue_id
            born = header.born_timestamp
            sent = header.properties or ""
        s = self._s
        if s.cfg is not self.state.config:  # inline of _settings
            s = self._settings()
        topic = header.topic  # (read once: a slot read each further time)
        # inline of check_send's outcome when its broker-wide checks pass
        # (SendSettings.quick_checks) and the topic's config is the one (frozen) a send already
        # passed it with, not a %RETRY% or MULTI_TAG topic's (_plain_topics): only the queue id
        # is left to check (two subscripts and an identity test, no name, perm, prefix or
        # filter type test per send); anything else takes the call
        tc = None
        if s.quick_checks:
            try:  # (subscripts, no method call)
                tc = self.topics.topic_config_table[topic]
                if self._plain_topics[topic] is not tc:
                    tc = None
            except KeyError:
                tc = None
        if tc is None or (queue_id >= tc.write_queue_nums and queue_id >= tc.read_queue_nums):
            tc = check_send(s, full_header(request, header), self.topics, self._ok_topics, self.now_ms, conn)
            special = (topic[0] == "%" and topic.startswith(RETRY_GROUP_TOPIC_PREFIX)) or tc.topic_filter_type is _MULTI_TAG  # fmt: skip
            if not special and s.quick_checks:
                plain_topics = self._plain_topics
                if len(plain_topics) > _PLAIN_TOPICS_MAX:  # bounded: deleted topics' stay
                    plain_topics.clear()
                plain_topics[topic] = tc
        else:
            special = False
        body = request.body or b""
        if queue_id < 0:
            queue_id = self._rng.randrange(99999999) % max(1, tc.write_queue_nums)
        # the stored message, every slot filled directly: a third fewer instructions than the
        # dataclass __init__ (test_send checks that all of MessageInner's fields are set here);
        # what a half's differs in (topic, queue, properties, sysFlag) is filled below
        inner = _SentMessage()
        inner.body = body
        inner.flag = header.flag
        inner.born_timestamp = born
        try:  # (cached on the connection; a subscript, no method call)
            inner.born_host = conn.attrs["born_host"]
        except KeyError:
            inner.born_host = born_host_of(conn)
        inner.store_host = self.state.store_host
        inner.reconsume_times = header.reconsume_times or 0
        inner.prepared_transaction_offset = 0
        inner.tags_code = 0
        tran = not plain and TRAN_KEY in sent  # (topic: checked, not blank)
        result: PutResult | None = None  # (set here by a half's fast path)
        then = _NOW  # how process's tail answers the put
        if (
            tran
            and self.transactions is not None
            and DELAY_KEY not in sent
            and len(body) <= s.max_body_fast
            and len(sent) <= s.half_fast_max_props
            and not (topic[0] == "%" and topic.startswith(RETRY_GROUP_TOPIC_PREFIX))
            and tc.topic_filter_type is not _MULTI_TAG
        ):
            # A half's fast path (its own put, no stored-properties step): the half's
            # properties come from the request's (half_props.sent_half_properties, whose split
            # also gives the sender's TRAN_MSG and WAIT); None: the general path decides (the
            # same checks and outcome). Taken only where that path's checks cannot fail and
            # change nothing: no DELAY (no schedule rewrite, no delayed retry), not a %RETRY% or
            # MULTI_TAG topic (no DLQ rewrite or sysFlag change), a body under max_body_fast
            # and properties whose stored string (the request's minus WAIT, plus CLUSTER)
            # cannot pass MAX_PROPERTIES_LENGTH characters, which is what the general path
            # checks first. (The last shape's plan first: one call less than
            # sent_half_properties, which tries it.)
            planned = LAST_PLAN[0](sent, s.cluster, topic, queue_id) or sent_half_properties(
                sent, s.cluster, topic, queue_id
            )
            tran_value = None if planned is None else planned[3]
            if planned is not None and (
                tran_value == "true" or (tran_value and tran_value.lower() == "true")
            ):
                if s.reject_transaction:  # (s is renewed with the config: _settings)
                    raise NoPermissionError(
                        f"the broker[{s.cfg.broker_ip1}] sending transaction message is forbidden"
                    )
                # the half itself (what put_half makes of the sent message), every slot filled
                # directly as below: its topic and queue, sysFlag without the transaction bits
                inner.topic = RMQ_SYS_TRANS_HALF_TOPIC
                inner.queue_id = 0
                inner.properties = planned[0]
                inner.sys_flag = header.sys_flag & ~TRANSACTION_ROLLBACK_TYPE  # (| TRANSACTION_NOT_TYPE: 0)
                # (store_half waits when the sender does and the flush or replication policy
                # does: the policy is s.policy_waits, so a send under ASYNC_FLUSH skips the config
                # reads)
                sent_wait = planned[4]
                waits = s.policy_waits and (sent_wait is None or sent_wait.lower() == "true")
                half = self.transactions.store_half(inner, planned, waits, topic, queue_id)
                if half.__class__ is not AppendResult and half.__class__ is not PutResult:
                    # (an awaitable; no isinstance call)
                    return self._durable(self._reply_after(request, half, queue_id, topic))
                result = half
                counted = topic  # (answered by the tail below, counted under the sent topic)
        if result is None:  # not a half's fast path
            if plain:  # (what the branch below decides, known from the shape)
                # (four statements: a 4-target assignment builds and unpacks a tuple)
                props = f"{sent}{s.cluster_tail}"
                wait = True
                delayed = s.tail_delay
                tran = s.tail_tran
            elif sent and WAIT_KEY not in sent and CLUSTER_KEY not in sent and sent[-1] != "\x02":
                # the SDK's common send (no WAIT, no CLUSTER, no trailing separator): what
                # stored_properties returns for it, without the call
                props, wait = f"{sent}{s.cluster_tail}", True
                # whether props holds DELAY / TRAN_MSG: sent or the tail does (a key holds no
                # \x02, the tail's first character, so none spans the two)
                delayed = s.tail_delay or DELAY_KEY in sent
                tran = tran or s.tail_tran
            else:
                props, wait = stored_properties(sent, s.cluster)
                delayed = DELAY_KEY in props
                tran = TRAN_KEY in props
            if (
                len(props) > MAX_PROPERTIES_LENGTH and len(props.encode()) > MAX_PROPERTIES_LENGTH
            ):  # inline of send_checks.properties_too_long
                raise MessageIllegalError(ILLEGAL_REMARK)
            if len(body) > s.max_body_fast and stored_size(len(body), topic, props) > s.max_body:
                raise MessageIllegalError(ILLEGAL_REMARK)  # inline of send_checks.message_too_large
            inner.topic = topic
            inner.queue_id = queue_id
            inner.properties = props
            inner.sys_flag = header.sys_flag
            if special:  # a %RETRY% or MULTI_TAG topic
                self._retry_and_dlq(request, full_header(request, header), inner, tc)
            if delayed and self.schedule is not None:
                try:
                    apply_delay_level(
                        inner,
                        self.schedule.max_delay_level,
                        get_property(sent, MessageConst.WAIT),
                    )
                except ValueError as exc:
                    raise RemoteSystemError(str(exc)) from None
            if tran:
                tran_value = get_property(props, MessageConst.TRAN_MSG)
                if (
                    tran_value is not None
                    and tran_value.lower() == "true"
                    and not (inner.reconsume_times > 0 and has_delay(props))
                ):
                    # (the half's properties are built from the request's unless the delay or DLQ
                    # rewrite above changed the stored ones)
                    cluster = s.cluster if inner.properties is props else None
                    return self._durable(
                        self._prepare_transaction(request, inner, queue_id, wait, sent, cluster)
                    )
            store = self.store
            if wait and s.policy_waits:
                if not s.sync_flush_only and not (s.sync_master_only and self.topics.durable is None):
                    return self._durable(
                        self._reply_after(request, store.put_message_async(inner), queue_id, inner.topic)
                    )
                result = store.put_message(inner)
                if s.sync_master_only:  # SYNC_MASTER: no task per send (ReplicationReplies)
                    then = _REPLICATED
                else:
                    # (a stored put is its own append: no call of the append property for it)
                    stored = result.__class__ is AppendResult or result.append is not None
                    held = self._held_pulls
                    if held and stored and (inner.topic, inner.queue_id) in held:
                        self._dispatch_now()  # as below: the pull's reply need not wait for the fsync's
                    if stored and self.topics.durable is not None:  # the reply must be returned
                        return self._durable(self._put_then_flush(conn, request, result, queue_id, inner.topic))  # fmt: skip
                    then = _FLUSHED  # answered by FlushReplies, like a held pull
            else:
                put = store.put_now  # (then called: a read 3.11 specializes, MessageStore._set_writable)
                result = put(inner)
                held = self._held_pulls
                # (empty while no pull is held: no key tuple built and hashed per send, ~0.2k)
                if (
                    held
                    and (inner.topic, inner.queue_id) in held
                    and (result.__class__ is AppendResult or result.append is not None)  # (as above)
                ):  # inline of longpolling.PullRequestHoldService.is_held
                    self._dispatch_now()
            counted = inner.topic  # (the stats' topic: a DLQ's or the schedule's when rewritten)
        # ----- the reply of a put made here: the one place a SEND_OK is rendered from the
        # kept texts (no call level per send: ~0.33k instructions with its dispatch below);
        # _reply renders the others'
        # (batches, awaited puts, transactions' general path) the general way
        append = result if result.__class__ is AppendResult else result.append
        if append is None:  # a failed put: answered now
            return self._durable(self._render(request, result, queue_id))
        # inline of broker.stats.BrokerStatsManager.on_put (no call per send: ~0.6k
        # instructions); the put's store time is the stats' clock read (read a moment earlier).
        # A put waiting for its flush or its slave is counted now, as RocketMQ counts it
        stats = self.stats
        now, nums = append.store_timestamp, append.msg_num
        if now >= stats.next_roll:
            stats.roll(now)
        try:
            counts = stats.topic_put[counted]
        except KeyError:
            counts = stats.put_counts(counted)
        counts.times += 1
        counts.size += append.wrote_bytes
        if nums != 1:
            counts.extra += nums - 1
        opaque = request.opaque
        if (
            (append is result or result.status is _PUT_OK)  # (an AppendResult: PUT_OK, its own append)
            and append.store_host is self._ok_host  # (the template's and msgId prefix's: _msg_id)
            and append.batch_offsets is None
            and (request.__class__ is SendRawRequest or not request.serialize_type)
            and opaque >= 0  # (number_block's: a client's opaque wraps to negative after 2**31)
        ):  # (a SendRawRequest's serialize type is JSON, a class attribute: not read, as above)
            # the frame head rendered now from the template (EncodedReply): no extFields
            # dump and no extFields dict (EncodedReply decodes it from the head if asked);
            # the msgId inline of _msg_id (the same host): the offset's 64 KiB block's text
            # kept from the last send (consecutive sends' offsets grow by a record: a block
            # holds ~50 1 KiB sends) and its last four hex digits from a table (a subtract,
            # a compare and a subscript for to_bytes().hex().upper()'s three calls)
            block = self._block
            offset = append.wrote_offset
            low = offset - block[0]
            if not 0 <= low < 65536:
                block = self._new_block(offset)
                low = offset - block[0]
            # the queue offset and the opaque likewise: the text of their block of 1000
            # (kept: the queue's last, the last opaque's) and their last three digits from
            # a table; the template's parts joined to those texts and tables, so the head
            # is 6 pieces, not 10 with two ints formatted (~0.8k instructions an int, ~0.15k
            # a piece)
            try:
                qblock = self._queue_blocks[queue_id]
            except KeyError:
                qblock = NO_NUMBER
            queue_offset = append.logics_offset
            qlow = queue_offset - qblock[0]
            if not 0 <= qlow < 1000:
                qblock = self._queue_block(queue_id, queue_offset)
                qlow = queue_offset - qblock[0]
            oblock = self._opaque_block
            olow = opaque - oblock[0]
            if not 0 <= olow < 1000:
                texts = self._number_texts
                oblock = self._opaque_block = number_block(opaque, "", texts[2], texts[3])
                olow = opaque - oblock[0]
            # (bytes joined: ~0.9k instructions fewer than the str's BUILD_STRING and encode)
            head = _join((block[1], HEX4[low], qblock[1], qblock[2][qlow], oblock[1], oblock[2][olow]))  # fmt: skip
            # inline of encoded_reply (no Python __init__: command.EncodedReply; code, remark,
            # body, language, version, serialize_type: its class attributes, a SEND_OK's)
            ok = EncodedReply()
            ok.opaque = ok.head_opaque = opaque
            ok.flag = _RESPONSE
            n = len(head)
            ok.head = (REPLY_PREFIXES[n] if n < 1024 else _pack_prefix(4 + n, n)) + head
            reply: RemotingCommand = ok
        else:
            reply = self._render(request, result, queue_id)
        if not then:  # _NOW (0: no global read)
            if self.topics.durable is None:  # inline of _durable (steady state: no topic waits)
                return reply
            return reply_when_durable(reply, self.topics, self.groups)
        if then is _FLUSHED:  # (the steady state: topics.durable is None, tested above)
            self.flush_replies.add(self.store, conn, request, result, queue_id, reply)
            return None  # answered by FlushReplies, like a held pull
        return self._durable(self.replication_replies.add(self.store, conn, request, result, queue_id, reply))

    def _durable(
        self, reply: RemotingCommand | Awaitable[RemotingCommand] | None
    ) -> RemotingCommand | Awaitable[RemotingCommand] | None:
        """``reply``, or, while a topic auto-created for this (or a concurrent) send is being
        written to topics.json, an awaitable of it once the file holds it."""
        if self.topics.durable is None or reply is None:  # steady state: no topic waits for its write
            return reply
        return reply_when_durable(reply, self.topics, self.groups)

    # --------------------------------------------------------------------------- retry / DLQ
    def _retry_and_dlq(
        self, request: RemotingCommand, header: SendMessageRequestHeader, inner: MessageInner, tc: TopicConfig
    ) -> TopicConfig:
        """``handleRetryAndDLQ``: a ``%RETRY%`` send past its max reconsume times goes to the DLQ."""
        topic = header.topic
        if topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
            group = topic[len(RETRY_GROUP_TOPIC_PREFIX) :]
            sgc = self.groups.find_subscription_group_config(group)
            if sgc is None:
                raise SubscriptionGroupNotExistError(f"subscription group not exist, {group}")
            max_times = max_reconsume_times(sgc.retry_max_times, request.version, header.max_reconsume_times)
            if goes_to_dlq(header.reconsume_times or 0, max_times):
                tc = ensure_dlq_topic(self.topics, group)
                inner.topic = tc.topic_name
                inner.queue_id = dlq_queue_id(self._rng)
                props, _ = strip_property(inner.properties_string(), MessageConst.DELAY)
                inner.properties = props
        if tc.topic_filter_type == _MULTI_TAG:
            inner.sys_flag |= MULTI_TAGS_FLAG
        return tc

    def _prepare_transaction(
        self,
        request: RemotingCommand,
        inner: MessageInner,
        queue_id: int,
        wait: bool,
        sent: str,
        cluster: str | None,
    ) -> RemotingCommand | Awaitable[RemotingCommand]:
        """Store ``inner`` as a half message (``sent``: the request's properties; ``cluster``: the
        one ``inner``'s stored properties name, None when they are not the request's rewritten
        by ``stored_properties`` alone)."""
        cfg = self.state.config
        service = self.transactions
        if cfg.reject_transaction_message or service is None:
            raise NoPermissionError(f"the broker[{cfg.broker_ip1}] sending transaction message is forbidden")
        # the half's properties in one pass from the request's (transaction.half_props), or the
        # general way (from the stored ones)
        planned = (
            None if cluster is None else sent_half_properties(sent, cluster, inner.topic, inner.queue_id)
        )
        if planned is None:
            result = service.prepare_message(inner, wait, get_property(sent, MessageConst.WAIT))
        else:
            result = service.put_half(inner, planned, wait)
        if isinstance(result, PutResult):
            return self._reply(request, result, queue_id, inner.topic)
        return self._reply_after(request, result, queue_id, inner.topic)

    # --------------------------------------------------------------------------------- batch
    def _send_batch(
        self, conn: RemotingConnection, request: RemotingCommand, header: SendMessageRequestHeader
    ) -> RemotingCommand | Awaitable[RemotingCommand] | None:
        s = self._settings()
        tc = check_send(s, header, self.topics, self._ok_topics, self.now_ms, conn)
        topic = header.topic
        if topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
            raise MessageIllegalError(f"batch request does not support retry group {topic}")
        if header.sys_flag & TRANSACTION_ROLLBACK_TYPE:  # asyncPutMessages: no transactional batch
            raise MessageIllegalError(ILLEGAL_REMARK)
        queue_id = header.queue_id
        if queue_id < 0:
            queue_id = self._rng.randrange(99999999) % max(1, tc.write_queue_nums)
        batch_props, wait = stored_properties(header.properties, s.cluster)
        if DELAY_KEY in batch_props and _delay_or_error(batch_props) > 0:
            # CommitLog.asyncPutMessages: a batch cannot be delayed
            raise MessageIllegalError("batch messages cannot be delayed (DELAY)")
        sys_flag = header.sys_flag
        if tc.topic_filter_type == _MULTI_TAG:
            sys_flag |= MULTI_TAGS_FLAG
        items = checked_body(request.body or b"", batch_props, s.max_body, ILLEGAL_REMARK, topic)
        # the shared fields once; the store encodes the items against them (no MessageInner
        # each); every slot filled directly as process's (no dataclass __init__)
        template = _SentMessage()
        # (at most three targets a line: four build and unpack a tuple)
        template.topic, template.body, template.queue_id = topic, b"", queue_id
        template.properties, template.sys_flag, template.born_timestamp = "", sys_flag, header.born_timestamp
        template.born_host, template.store_host = born_host_of(conn), self.state.store_host
        template.reconsume_times = header.reconsume_times or 0
        template.flag = template.prepared_transaction_offset = template.tags_code = 0
        store = self.store
        if wait and s.policy_waits:
            if not s.sync_flush_only and not (s.sync_master_only and self.topics.durable is None):
                return self._reply_after(request, store.put_batch_async(template, items), queue_id, topic)
            result = store.put_batch(template, items)
            if s.sync_master_only:  # SYNC_MASTER: no task per send
                reply = self._reply(request, result, queue_id, topic)
                if result.append is None:
                    return reply
                return self.replication_replies.add(store, conn, request, result, queue_id, reply)
            if (topic, queue_id) in self._held_pulls and result.append is not None:
                self._dispatch_now()
            return self._put_then_flush(conn, request, result, queue_id, topic)
        result = store.put_batch(template, items)
        if (
            (topic, queue_id) in self._held_pulls and result.append is not None
        ):  # inline of longpolling.PullRequestHoldService.is_held
            self._dispatch_now()
        return self._reply(request, result, queue_id, topic)

    def _put_then_flush(
        self,
        conn: RemotingConnection,
        request: RemotingCommand,
        result: PutResult,
        queue_id: int,
        topic: str,
    ) -> RemotingCommand | Awaitable[RemotingCommand] | None:
        """A failed put is answered now; a stored one once its round is flushed (FlushReplies)."""
        if result.append is None:
            return self._reply(request, result, queue_id, topic)
        if self.topics.durable is not None:  # process() defers the reply: it must be returned
            return self._reply_after(request, self._flushed(result), queue_id, topic)
        reply = self._reply(request, result, queue_id, topic)  # (counted now, sent once flushed)
        self.flush_replies.add(self.store, conn, request, result, queue_id, reply)
        return None  # answered by FlushReplies, like a held pull

    async def _flushed(self, result: PutResult) -> PutResult:
        """``result`` once its group-commit round is flushed (FLUSH_DISK_TIMEOUT when it timed out)."""
        waiter = self.store.flush_waiter(result)
        if waiter is None or await waiter or result.append is None:
            return result
        return PutResult(PutMessageStatus.FLUSH_DISK_TIMEOUT, result.append)

    # ------------------------------------------------------------------------------- replies
    async def _reply_after(
        self, request: RemotingCommand, pending: Awaitable[PutResult], queue_id: int, topic: str
    ) -> RemotingCommand:
        return self._reply(request, await pending, queue_id, topic)

    def _reply(
        self, request: RemotingCommand, result: PutResult, queue_id: int, topic: str
    ) -> RemotingCommand:
        """The reply of a put not made by process's own path (batches, awaited puts, the general
        transaction path), its stats counted under ``topic``."""
        # (a stored put is its own append: no property call for it)
        append = result if result.__class__ is AppendResult else result.append
        if append is not None:
            self.stats.on_put(topic, append.msg_num, append.wrote_bytes, append.store_timestamp)
        return self._render(request, result, queue_id)

    def _render(self, request: RemotingCommand, result: PutResult, queue_id: int) -> RemotingCommand:
        """A send's reply rendered the general way (no stats: counted when the put was made);
        process renders its own SEND_OKs from the kept texts."""
        status = result.status
        append = result if result.__class__ is AppendResult else result.append
        s = self._s
        if status is _PUT_OK and append is not None:
            parts = s.send_ok
            msg_id = self._msg_id(append)
            qid = f"{queue_id}"  # (FORMAT_VALUE: no str() call)
            qoff = f"{append.logics_offset}"
            if request.serialize_type or parts is None:
                ext = {
                    "MSG_REGION": s.region,
                    "TRACE_ON": s.trace_on,
                    "msgId": msg_id,
                    "queueId": qid,
                    "queueOffset": qoff,
                }
                return RemotingCommand(
                    _SUCCESS, request.opaque, RPC_TYPE_RESPONSE, None, ext, None, _JAVA, CURRENT_VERSION,
                    request.serialize_type,
                )  # fmt: skip
            p0, p1, p2, p3, p4 = parts
            opaque = request.opaque
            header = f"{p0}{msg_id}{p1}{qid}{p2}{qoff}{p3}{opaque}{p4}".encode()
            return encoded_reply(header, opaque)
        code, remark = PUT_STATUS_REPLY.get(status, PUT_STATUS_DEFAULT)
        ext = {"MSG_REGION": s.region, "TRACE_ON": s.trace_on}
        if append is not None and status.is_ok:
            ext["msgId"] = self._msg_id(append)
            ext["queueId"] = str(queue_id)
            ext["queueOffset"] = str(append.logics_offset)
        return RemotingCommand.response_to(request, code, remark, ext)

    def _new_block(self, offset: int) -> tuple[int, bytes]:
        """``offset``'s 64 KiB block (``offset_block``) after p0 and the store host's hex, kept."""
        parts, cached = self._s.send_ok, self._msgid_prefix
        assert parts is not None and cached is not None  # (process renders so: _ok_host is set)
        block = self._block = offset_block(offset, parts[0] + cached[1])
        return block

    def _queue_block(self, queue_id: int, queue_offset: int) -> tuple[int, bytes, list[bytes]]:
        """``queue_offset``'s block of 1000 (``number_block``) after p1, the queue id and p2,
        kept as the queue's."""
        parts = self._s.send_ok
        assert parts is not None  # (as _new_block's)
        texts = self._number_texts
        block = self._queue_blocks[queue_id] = number_block(
            queue_offset, f"{parts[1]}{queue_id}{parts[2]}", texts[0], texts[1]
        )
        return block

    def _msg_id(self, append: AppendResult) -> str:
        """Offset msgId(s): the store host's hex prefix is computed once per host."""
        cached = self._msgid_prefix
        host = append.store_host
        if cached is None or cached[0] != host:
            if len(host[0]) != 4:
                return append.msg_id
            cached = self._msgid_prefix = (
                host,
                (host[0] + host[1].to_bytes(4, "big", signed=True)).hex().upper(),
            )
            self._block = NO_BLOCK  # (its text holds the former host's)
        # process renders this host's SEND_OKs from the kept texts from now, while the
        # template holds (one identity test a send for the template, the prefix and the host)
        self._ok_host = host if self._s.send_ok is not None else None
        prefix = cached[1]
        offsets = append.batch_offsets
        if offsets is None:
            return f"{prefix}{append.wrote_offset:016X}"
        # the offsets' 8-byte big-endian hex split by commas, each comma then followed by the
        # prefix: C-level passes over the batch, no format call per message ("%016X" cost
        # ~2,600 instructions a message, this ~800). Big-endian as the reversed bytes of the
        # reversed offsets packed little-endian: a native-order "<q" is a plain C conversion,
        # a ">q" the generic one (_PyLong_AsByteArray)
        hexes = struct.pack(f"<{len(offsets)}q", *offsets[::-1])[::-1].hex(",", 8).upper()
        return prefix + hexes.replace(",", "," + prefix)


def _delay_or_error(props: str) -> int:
    try:
        return delay_level_of(props)
    except ValueError as exc:
        raise RemoteSystemError(str(exc)) from None
