"""``MQClientAPI``: the one request layer of the SDK (Java ``MQClientAPIImpl``).

It is the only client module that knows request codes and builds custom headers and bodies.
Every call takes the broker or name server address; a non-success reply becomes the
registered :class:`ResponseError` subclass (with ``retriable``/``refresh_route`` flags),
transport failures are ``RemotingTimeoutError`` / ``RemotingConnectError``. Admin calls used
by ``mqadmin`` live in :mod:`pocketmq.client.api_admin` and share this layer.

Name server calls go to one name server at a time; a transport failure moves to the next
(Java keeps the chosen namesrv until it fails).
"""

from __future__ import annotations

import logging
import zlib
from asyncio import Task
from asyncio import get_running_loop as _get_running_loop
from collections.abc import Awaitable, Iterable, Mapping, Sequence
from typing import Any

import orjson

from pocketmq.client.api_admin import AdminCalls
from pocketmq.client.consumer.fast_decode import decode_pull_body
from pocketmq.client.consumer.subscription import SubscriptionData, filter_by_tags
from pocketmq.client.errors import RemotingConnectError, RemotingTimeoutError, TopicRouteNotFoundError
from pocketmq.client.message import MessageQueue, PullResult, PullStatus, SendResult, SendStatus
from pocketmq.remoting.protocol import fastjson
from pocketmq.remoting.protocol.codes import (
    CURRENT_VERSION,
    RPC_ONEWAY,
    LanguageCode,
    RequestCode,
    ResponseCode,
)
from pocketmq.remoting.protocol.command import PREFIX, RemotingCommand
from pocketmq.remoting.protocol.errors import QueryNotFoundError, error_from_response
from pocketmq.remoting.protocol.headers import (
    ConsumerSendMsgBackRequestHeader,
    EndTransactionRequestHeader,
    GetConsumerListByGroupRequestHeader,
    GetMaxOffsetRequestHeader,
    GetMinOffsetRequestHeader,
    GetRouteInfoRequestHeader,
    PullMessageRequestHeader,
    QueryConsumerOffsetRequestHeader,
    SearchOffsetRequestHeader,
    UnregisterClientRequestHeader,
    UpdateConsumerOffsetRequestHeader,
)
from pocketmq.remoting.protocol.heartbeat import HeartbeatData
from pocketmq.remoting.protocol.message import COMPRESSED_FLAG, QUEUE_ID_TEXT, MessageExt, decode_messages
from pocketmq.remoting.protocol.route import TopicRouteData
from pocketmq.remoting.protocol.send_ok import SendOkReply
from pocketmq.remoting.protocol.slots import SlotRecord
from pocketmq.remoting.transport.client import RemotingClient, ReplyWaiter

LANGUAGE = LanguageCode.PYTHON
_CURRENT_VERSION = int(CURRENT_VERSION)
# Hot-path enum members as plain module names (``Enum.MEMBER`` is a slow metaclass lookup on
# CPython 3.11); request codes as plain ints.
_SEND_MESSAGE_V2 = int(RequestCode.SEND_MESSAGE_V2)
_SEND_BATCH_MESSAGE = int(RequestCode.SEND_BATCH_MESSAGE)
_PULL_MESSAGE = int(RequestCode.PULL_MESSAGE)
_END_TRANSACTION = int(RequestCode.END_TRANSACTION)
_RPC_ONEWAY = int(RPC_ONEWAY)
_SEND_OK = SendStatus.SEND_OK

_SEND_STATUS = {
    ResponseCode.SUCCESS: SendStatus.SEND_OK,
    ResponseCode.FLUSH_DISK_TIMEOUT: SendStatus.FLUSH_DISK_TIMEOUT,
    ResponseCode.FLUSH_SLAVE_TIMEOUT: SendStatus.FLUSH_SLAVE_TIMEOUT,
    ResponseCode.SLAVE_NOT_AVAILABLE: SendStatus.SLAVE_NOT_AVAILABLE,
}
_PULL_STATUS = {
    ResponseCode.SUCCESS: PullStatus.FOUND,
    ResponseCode.PULL_NOT_FOUND: PullStatus.NO_NEW_MSG,
    ResponseCode.PULL_RETRY_IMMEDIATELY: PullStatus.NO_MATCHED_MSG,
    ResponseCode.PULL_OFFSET_MOVED: PullStatus.OFFSET_ILLEGAL,
}

_NO_EXT: dict[str, str] = {}
_logger = logging.getLogger(__name__)
#: _write_ends' tasks of ENDs whose connection closed before the turn's write (kept referenced)
_end_tasks: set[Task[None]] = set()


_new = object.__new__
_pack_prefix = PREFIX.pack
#: the last born timestamp (ms) a :class:`SendRequest` rendered, with its text: one tuple, read
#: and replaced whole, so that producers on loops in other threads never pair a ms with
#: another ms's text
_born_text: list[tuple[int, str]] = [(-1, "-1")]
#: the last frame prefix a :class:`SendRequest` packed, with its header and body lengths (one
#: tuple, read and replaced whole, as ``_born_text``)
_kept_prefix: list[tuple[int, int, bytes]] = [(-1, -1, b"")]
#: Cut markers of :func:`send_template`: JSON renders them as they are (no escaping).
BORN_MARK = "@@pocketmq-born@@"
UNIQ_MARK = "@@pocketmq-uniq@@"


class SendRequest(SlotRecord, RemotingCommand):
    """A SEND_MESSAGE_V2 request whose header is a per-queue :func:`send_template` filled with
    the born timestamp, the UNIQ_KEY and the opaque: no extFields dict, no JSON dump per send.

    Only for a transport without RPC hooks (nothing else reads ``ext_fields``, which is None);
    its other fields are what the template was rendered from."""

    __slots__ = ("born", "tpl", "uniq")
    tpl: tuple[str, ...]
    born: int
    uniq: str
    # The fields every such request shares, as class attributes (read only: they shadow the
    # base class's slots), so that :func:`plain_request` sets four slots, not eleven.
    code = _SEND_MESSAGE_V2
    flag = 0
    remark = None
    ext_fields = None
    language = LANGUAGE
    version = _CURRENT_VERSION
    serialize_type = 0

    def encode_header(self) -> bytes:
        # pieces joined by an f-string: half the cost of ``%`` over the whole template
        a, b, c, d = self.tpl
        # the born timestamp's text kept while it is the same ms (the sends of a ms share it:
        # ~0.8k instructions less a send than rendering the 13-digit int each time)
        ms, text = _born_text[0]
        if ms != self.born:
            ms = self.born
            text = str(ms)
            _born_text[0] = (ms, text)
        header = f"{a}{text}{b}{self.uniq}{c}{self.opaque}{d}".encode()
        hlen = len(header)
        body = self.body
        blen = len(body) if body else 0
        # the frame prefix kept with its lengths while they are the same (a producer's messages
        # of one size: the header's length changes only with the opaque's digits), not packed
        # per send (Struct.pack: ~0.6k instructions more than this check)
        kept_hlen, kept_blen, prefix = _kept_prefix[0]
        if kept_hlen != hlen or kept_blen != blen:
            prefix = _pack_prefix(4 + hlen + blen, hlen)
            _kept_prefix[0] = (hlen, blen, prefix)
        return prefix + header


def plain_request(tpl: tuple[str, ...], born: int, uniq: str, body: bytes) -> SendRequest:
    """A plain message's SEND_MESSAGE_V2 request from its queue's :func:`send_template` (only
    for a transport without RPC hooks: they would see no ``ext_fields``)."""
    # slots filled directly, the constant fields are class attributes: no dataclass __init__
    # call per send (RemotingCommand.request with its keyword argument and a cast measured
    # 1.5k instructions more per send)
    cmd: SendRequest = SendRequest()
    cmd.opaque, cmd.body, cmd.tpl, cmd.born, cmd.uniq = 0, body, tpl, born, uniq
    return cmd


def send_request(ext: dict[str, str], body: bytes, batch: bool) -> RemotingCommand:
    """SEND_MESSAGE_V2 (SEND_BATCH_MESSAGE with ``batch``) with the header fields ``ext``."""
    return RemotingCommand(
        _SEND_BATCH_MESSAGE if batch else _SEND_MESSAGE_V2, 0, 0, None, ext, body, LANGUAGE
    )


def send_template(ext: dict[str, str]) -> tuple[str, ...] | None:
    """The JSON header of a SEND_MESSAGE_V2 request with extFields ``ext`` cut where the born
    timestamp, the UNIQ_KEY and the opaque go (in this order; 4 pieces): ``ext`` holds
    :data:`BORN_MARK` and :data:`UNIQ_MARK` where those go. Joined with those values, it is
    byte-identical to the ``encode_header`` of the same request (which renders it here). None
    when a marker is not found exactly once or the three are not in that order."""
    return _template(_SEND_MESSAGE_V2, 0, ext, (BORN_MARK, UNIQ_MARK))


_OPAQUE = '"opaque":0,'
_OPAQUE_MARK = "@@pocketmq-opaque@@"


def _template(code: int, flag: int, ext: dict[str, str], marks: tuple[str, ...]) -> tuple[str, ...] | None:
    """The JSON header of a request with extFields ``ext`` cut at each marker of ``marks``
    (found once in ``ext``'s values, in this order) and at the opaque's value: the pieces to
    join with the values in between. None when a marker is not found exactly once or they are
    out of order."""
    cmd = RemotingCommand(code, 0, flag, None, ext, None, LANGUAGE)
    head = cmd.encode_header()[PREFIX.size :].decode()
    cuts = (*marks, _OPAQUE)
    if (
        any(head.count(m) != 1 for m in cuts)
        or sorted(cuts, key=head.index) != list(cuts)
        or _OPAQUE_MARK in head
    ):
        return None
    rest = head.replace(_OPAQUE, f'"opaque":{_OPAQUE_MARK},')
    pieces = []
    for mark in (*marks, _OPAQUE_MARK):
        piece, rest = rest.split(mark, 1)
        pieces.append(piece)
    return (*pieces, rest)


#: One END_TRANSACTION of :class:`EndTransactionRequest`: its group's and state's
#: :func:`end_template`, the queue offset, the commit-log offset, the msgId, the transactionId.
EndItem = tuple[tuple[str, ...], int, int, str, str]


class EndTransactionRequest(RemotingCommand):
    """END_TRANSACTION oneways, one frame per item of ``items`` (a loop turn's to one broker:
    :meth:`MQClientAPI.end_transaction`), each header its template joined with the item's
    offsets and ids and its opaque: the request's and the next ones, in order (the transport
    gives the request as many). No header dataclass, no extFields dict, no JSON dump per
    transaction, one write per turn. Only for a transport without RPC hooks (``ext_fields`` is
    None)."""

    __slots__ = ("items",)
    items: list[EndItem]
    # The fields every such request shares, as class attributes (read only: they shadow the
    # base class's slots), as SendRequest's; ``flag`` and ``opaque`` stay slots (the transport
    # sets them).
    code = _END_TRANSACTION
    remark = None
    ext_fields = None
    body = None
    language = LANGUAGE
    version = _CURRENT_VERSION
    serialize_type = 0

    def encode_header(self) -> bytes:
        opaque = self.opaque
        parts: list[bytes] = []
        append = parts.append
        prefixes = _END_PREFIXES
        for (t0, t1, t2, t3, t4, t5), queue_offset, commit_log_offset, msg_id, transaction_id in self.items:
            header = (
                f"{t0}{queue_offset}{t1}{commit_log_offset}{t2}{msg_id}{t3}{transaction_id}{t4}{opaque}{t5}"
            ).encode()
            hlen = len(header)
            # the frame prefix by the header's length: a list subscript, not a Struct.pack call
            # (~0.45k instructions less per END_TRANSACTION) nor a dict.get call
            try:
                prefix = prefixes[hlen]
            except IndexError:  # a header of ids longer than any END of a UNIQ_KEY
                prefix = _pack_prefix(4 + hlen, hlen)
            if prefix is None:
                prefix = prefixes[hlen] = _pack_prefix(4 + hlen, hlen)
            append(prefix)
            append(header)
            opaque = (opaque + 1) & 0x7FFFFFFF
        return b"".join(parts)


#: the frame prefix of an :class:`EndTransactionRequest` by its header length (None: not made
#: yet); a group's headers differ only by the digits of two offsets and the opaque (a few dozen
#: lengths per group). Headers of :data:`_END_PREFIXES_MAX` bytes or more get theirs packed.
_END_PREFIXES_MAX = 1024
_END_PREFIXES: list[bytes | None] = [None] * _END_PREFIXES_MAX


#: Markers of :func:`end_template`, one per changing field, in the header's field order.
_END_MARKS = {
    "tranStateTableOffset": "@@pocketmq-end-queue-offset@@",
    "commitLogOffset": "@@pocketmq-end-commit-log-offset@@",
    "msgId": "@@pocketmq-end-msg-id@@",
    "transactionId": "@@pocketmq-end-transaction-id@@",
}


#: END_TRANSACTION's states (commit, rollback, unknown): each has templates of its own
_END_STATES = (8, 12, 0)


def _end_header(
    group: str, queue_offset: int, commit_log_offset: int, state: int, msg_id: str, transaction_id: str
) -> EndTransactionRequestHeader:
    """A producer's own END_TRANSACTION header (not from a check)."""
    return EndTransactionRequestHeader(
        producer_group=group,
        tran_state_table_offset=queue_offset,
        commit_log_offset=commit_log_offset,
        commit_or_rollback=state,
        from_transaction_check=False,
        msg_id=msg_id,
        transaction_id=transaction_id,
    )


def end_template(group: str, state: int) -> tuple[str, ...] | None:
    """The JSON header of a producer's own END_TRANSACTION oneway (not from a check) for
    ``group`` and ``state`` (its text in the pieces: not formatted per frame), cut where
    tranStateTableOffset, commitLogOffset, msgId, transactionId and the opaque go (the fields of
    :class:`EndTransactionRequestHeader` in its order; 6 pieces). Joined with values that need
    no JSON escaping, it is byte-identical to the general path's header. None: no template
    possible."""
    ext = _end_header(group, 0, 0, state, "m", "t").to_ext_fields()
    for name, mark in _END_MARKS.items():
        ext[name] = mark  # an existing key: its place in the order stays
    return _template(_END_TRANSACTION, _RPC_ONEWAY, ext, tuple(_END_MARKS.values()))


def end_templates(group: str) -> dict[int, tuple[str, ...]]:
    """:func:`end_template` of ``group`` per state of :data:`_END_STATES` (empty: none possible)."""
    tpls = {state: end_template(group, state) for state in _END_STATES}
    return {state: tpl for state, tpl in tpls.items() if tpl is not None}


def decode_pull_result(result: PullResult, sub: SubscriptionData | None) -> list[MessageExt]:
    """Decode a FOUND reply's body: inflate compressed bodies, re-filter tags exactly.

    Raises:
        MessageDecodeError: the body is not a sequence of valid records.
    """
    body = result.body
    result.body = None
    if not body:
        return []
    msgs = decode_pull_body(body, inflate=True)
    if sub is not None:
        msgs = filter_by_tags(sub, msgs)
    result.msgs = msgs
    return msgs


def pull_result(reply: RemotingCommand, request_offset: int, addr: str) -> PullResult:
    """PULL_MESSAGE's ``reply`` to a pull at ``request_offset`` as a :class:`PullResult` (its
    body raw).

    Raises:
        ResponseError: the reply's code is no pull status (``error_from_response``: e.g.
            ``FlowControlError``).
    """
    status = _PULL_STATUS.get(reply.code)  # type: ignore[call-overload]
    if status is None:
        raise error_from_response(reply.code, reply.remark, addr=addr, opaque=reply.opaque)
    ext = reply.ext_fields or {}
    return PullResult(
        status,
        int(ext.get("nextBeginOffset", request_offset)),
        int(ext.get("minOffset", 0)),
        int(ext.get("maxOffset", 0)),
        [],
        int(ext.get("suggestWhichBrokerId", 0)),
        reply.body,
    )


def _ok(response: RemotingCommand, addr: str) -> RemotingCommand:
    if response.code != ResponseCode.SUCCESS:
        raise error_from_response(response.code, response.remark, addr=addr, opaque=response.opaque)
    return response


def _mq_json(mq: MessageQueue) -> dict[str, Any]:
    return {"brokerName": mq.broker_name, "queueId": mq.queue_id, "topic": mq.topic}


class MQClientAPI(AdminCalls):
    def __init__(
        self, remoting: RemotingClient, namesrv_addrs: Sequence[str], timeout_ms: int = 3000
    ) -> None:
        self.remoting = remoting
        self.namesrv_addrs = list(namesrv_addrs)
        self.timeout = timeout_ms / 1000
        self._ns_index = 0
        #: producer group -> its end_templates per state (empty: none possible)
        self._end_templates: dict[str, dict[int, tuple[str, ...]]] = {}
        #: broker address -> the ENDs of this loop turn, written together at its end (_write_ends)
        self._ends: dict[str, list[EndItem]] = {}

    # ------------------------------------------------------------------------ request layer
    @staticmethod
    def request(
        code: int, ext: Mapping[str, str] | None = None, body: bytes | None = None, *, oneway: bool = False
    ) -> RemotingCommand:
        return RemotingCommand.request(
            code, dict(ext) if ext is not None else None, body, language=LANGUAGE, oneway=oneway
        )

    async def invoke(
        self, addr: str, code: int, ext: Mapping[str, str] | None = None, body: bytes | None = None,
        timeout: float | None = None,
    ) -> RemotingCommand:  # fmt: skip
        """Send one request and return the reply whatever its code."""
        return await self.remoting.invoke(addr, self.request(code, ext, body), timeout or self.timeout)

    async def invoke_checked(
        self, addr: str, code: int, ext: Mapping[str, str] | None = None, body: bytes | None = None,
        timeout: float | None = None,
    ) -> RemotingCommand:  # fmt: skip
        """:meth:`invoke` raising the registered ResponseError for a non-success reply."""
        return _ok(await self.invoke(addr, code, ext, body, timeout), addr)

    async def invoke_oneway(
        self, addr: str, code: int, ext: Mapping[str, str] | None = None, body: bytes | None = None
    ) -> None:
        await self.remoting.invoke_oneway(addr, self.request(code, ext, body, oneway=True))

    async def invoke_namesrv(
        self, code: int, ext: Mapping[str, str] | None = None, body: bytes | None = None,
        timeout: float | None = None, addr: str | None = None,
    ) -> RemotingCommand:  # fmt: skip
        """Ask one name server (``addr`` or the current one, failing over on transport errors)."""
        if addr is not None:
            return await self.invoke(addr, code, ext, body, timeout)
        if not self.namesrv_addrs:
            raise RemotingConnectError("no name server address configured")
        last: Exception | None = None
        n = len(self.namesrv_addrs)
        for i in range(n):
            ns = self.namesrv_addrs[(self._ns_index + i) % n]
            try:
                reply = await self.invoke(ns, code, ext, body, timeout)
            except (RemotingConnectError, RemotingTimeoutError) as exc:
                last = exc
                continue
            self._ns_index = (self._ns_index + i) % n
            return reply
        assert last is not None
        raise last

    async def invoke_namesrv_checked(
        self, code: int, ext: Mapping[str, str] | None = None, body: bytes | None = None,
        timeout: float | None = None, addr: str | None = None,
    ) -> RemotingCommand:  # fmt: skip
        reply = await self.invoke_namesrv(code, ext, body, timeout, addr)
        return _ok(reply, addr or "namesrv")

    # --------------------------------------------------------------------------------- route
    async def get_topic_route(self, topic: str, timeout: float | None = None) -> TopicRouteData:
        """GET_ROUTEINFO_BY_TOPIC.

        Raises:
            TopicRouteNotFoundError: the name servers know no such topic (code 17).
        """
        ext = GetRouteInfoRequestHeader(topic=topic, accept_standard_json_only=True).to_ext_fields()
        reply = await self.invoke_namesrv(RequestCode.GET_ROUTEINFO_BY_TOPIC, ext, None, timeout)
        if reply.code == ResponseCode.TOPIC_NOT_EXIST:
            raise TopicRouteNotFoundError(topic, reply.remark or "")
        _ok(reply, "namesrv")
        if not reply.body:
            raise TopicRouteNotFoundError(topic, "empty route body")
        return TopicRouteData.decode(reply.body)

    # ---------------------------------------------------------------------------------- send
    async def send_message(
        self, addr: str, mq: MessageQueue, ext: dict[str, str], body: bytes, msg_id: str,
        timeout: float, *, batch: bool = False,
    ) -> SendResult:  # fmt: skip
        """SEND_MESSAGE_V2 (or SEND_BATCH_MESSAGE) with a prepared V2 header."""
        response = await self.send_message_request(addr, ext, body, timeout, batch=batch)
        return self.process_send_response(mq, response, msg_id, addr)

    def send_message_request(
        self, addr: str, ext: dict[str, str], body: bytes, timeout: float, *, batch: bool = False
    ) -> Awaitable[RemotingCommand]:
        """Write SEND_MESSAGE_V2 (or SEND_BATCH_MESSAGE) and return the reply's awaitable.

        The producer's hot path: no coroutine between the caller and the reply future; pass
        the reply to :meth:`process_send_response`.
        """
        return self.remoting.invoke(addr, send_request(ext, body, batch), timeout)

    def send_plain(
        self, addr: str, tpl: tuple[str, ...], born: int, uniq: str, body: bytes, timeout: float
    ) -> Awaitable[RemotingCommand]:
        """:meth:`send_message_request` of a plain message from its queue's :func:`send_template`
        (only while the transport has no RPC hooks: they would see no ``ext_fields``)."""
        return self.remoting.invoke(addr, plain_request(tpl, born, uniq, body), timeout)

    async def send_message_oneway(
        self, addr: str, ext: dict[str, str], body: bytes, *, batch: bool = False
    ) -> None:
        code = RequestCode.SEND_BATCH_MESSAGE if batch else RequestCode.SEND_MESSAGE_V2
        await self.remoting.invoke_oneway(
            addr, RemotingCommand.request(code, ext, body, language=LANGUAGE, oneway=True)
        )

    @staticmethod
    def process_send_response(
        mq: MessageQueue, response: RemotingCommand, msg_id: str, addr: str
    ) -> SendResult:
        if type(response) is SendOkReply:  # decoded typed (send_ok: code 0): the fields, no dict
            f = response.fields  # (queueId and queueOffset decoded as ints)
            if f.queueId != mq.queue_id:
                mq = MessageQueue(mq.topic, mq.broker_name, f.queueId)
            result = _new(SendResult)
            result.send_status = _SEND_OK
            result.msg_id = msg_id
            result.offset_msg_id = f.msgId
            result.message_queue = mq
            result.queue_offset = f.queueOffset
            result.transaction_id = f.transactionId
            result.region_id = f.MSG_REGION
            result.trace_on = f.TRACE_ON != "false"
            return result
        code = response.code
        status = _SEND_OK if code == 0 else _SEND_STATUS.get(code)  # type: ignore[call-overload]
        if status is None:
            raise error_from_response(code, response.remark, addr=addr, opaque=response.opaque)
        ext = response.ext_fields or _NO_EXT
        get = ext.get
        qid = get("queueId")
        if qid is not None and qid != QUEUE_ID_TEXT.get(mq.queue_id):
            mq = MessageQueue(mq.topic, mq.broker_name, int(qid))
        offset = get("queueOffset")
        region = get("MSG_REGION")
        # slots filled directly: no dataclass __init__ call per send
        result = _new(SendResult)
        result.send_status = status
        result.msg_id = msg_id
        result.offset_msg_id = get("msgId", "")
        result.message_queue = mq
        result.queue_offset = -1 if offset is None else int(offset)
        result.transaction_id = get("transactionId")
        result.region_id = "DefaultRegion" if region is None else region
        result.trace_on = get("TRACE_ON") != "false"
        return result

    # ---------------------------------------------------------------------------------- pull
    async def pull_message(self, addr: str, header: PullMessageRequestHeader, timeout: float) -> PullResult:
        """PULL_MESSAGE; the body stays raw in ``PullResult.body`` (see :func:`decode_pull_result`)."""
        reply = await self.remoting.invoke(
            addr,
            RemotingCommand(_PULL_MESSAGE, 0, 0, None, header.to_ext_fields(), None, LANGUAGE),
            timeout,
        )
        return pull_result(reply, header.queue_offset, addr)

    def pull_message_into(
        self, addr: str, ext_fields: dict[str, str], timeout: float, waiter: ReplyWaiter
    ) -> bool:
        """:meth:`pull_message` (its header as ``ext_fields``) whose raw reply goes to ``waiter``
        as the connection reads it (:meth:`RemotingClient.invoke_into`; :func:`pull_result`
        reads it); False: nothing was sent (no open connection, RPC hooks, a full write
        buffer): use :meth:`pull_message`. Written alone: the pull task writes nothing else in
        its turn, so no batch (and no flush turn after it) is opened for it."""
        return self.remoting.invoke_into(
            addr,
            RemotingCommand(_PULL_MESSAGE, 0, 0, None, ext_fields, None, LANGUAGE),
            timeout,
            waiter,
            True,
        )

    # ------------------------------------------------------------------------------- offsets
    async def query_consumer_offset(self, addr: str, group: str, mq: MessageQueue) -> int:
        """The group's stored offset, or -1 when the broker has none (QUERY_NOT_FOUND)."""
        ext = QueryConsumerOffsetRequestHeader(consumer_group=group, topic=mq.topic, queue_id=mq.queue_id)
        try:
            reply = await self.invoke_checked(addr, RequestCode.QUERY_CONSUMER_OFFSET, ext.to_ext_fields())
        except QueryNotFoundError:
            return -1
        return int(reply.ext("offset") or 0)

    async def update_consumer_offset(
        self, addr: str, group: str, mq: MessageQueue, offset: int, *, oneway: bool = False
    ) -> None:
        ext = UpdateConsumerOffsetRequestHeader(
            consumer_group=group,
            topic=mq.topic,
            queue_id=mq.queue_id,
            commit_offset=offset,
        ).to_ext_fields()
        if oneway:
            await self.invoke_oneway(addr, RequestCode.UPDATE_CONSUMER_OFFSET, ext)
        else:
            await self.invoke_checked(addr, RequestCode.UPDATE_CONSUMER_OFFSET, ext)

    async def get_max_offset(self, addr: str, mq: MessageQueue) -> int:
        ext = GetMaxOffsetRequestHeader(topic=mq.topic, queue_id=mq.queue_id).to_ext_fields()
        return int((await self.invoke_checked(addr, RequestCode.GET_MAX_OFFSET, ext)).ext("offset") or 0)

    async def get_min_offset(self, addr: str, mq: MessageQueue) -> int:
        ext = GetMinOffsetRequestHeader(topic=mq.topic, queue_id=mq.queue_id).to_ext_fields()
        return int((await self.invoke_checked(addr, RequestCode.GET_MIN_OFFSET, ext)).ext("offset") or 0)

    async def search_offset(self, addr: str, mq: MessageQueue, timestamp_ms: int) -> int:
        ext = SearchOffsetRequestHeader(topic=mq.topic, queue_id=mq.queue_id, timestamp=timestamp_ms)
        reply = await self.invoke_checked(addr, RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, ext.to_ext_fields())
        return int(reply.ext("offset") or 0)

    # ----------------------------------------------------------------------- clients, groups
    async def send_heartbeat(self, addr: str, heartbeat: HeartbeatData, timeout: float | None = None) -> int:
        """HEART_BEAT; returns the broker's version number."""
        reply = await self.invoke_checked(addr, RequestCode.HEART_BEAT, None, heartbeat.encode(), timeout)
        return reply.version

    async def check_client_in_broker(
        self, addr: str, group: str, client_id: str, sub: SubscriptionData, timeout: float | None = None
    ) -> None:
        """CHECK_CLIENT_CONFIG (46): the broker compiles a SQL92 subscription. Raises the reply's
        ResponseError (23: it does not compile; 1: the broker does not filter by SQL92)."""
        body = fastjson.dumpb({"clientId": client_id, "group": group, "subscriptionData": sub.to_json()})
        await self.invoke_checked(addr, RequestCode.CHECK_CLIENT_CONFIG, None, body, timeout)

    async def unregister_client(
        self, addr: str, client_id: str, producer_group: str | None, consumer_group: str | None
    ) -> None:
        ext = UnregisterClientRequestHeader(
            client_id=client_id,
            producer_group=producer_group,
            consumer_group=consumer_group,
        ).to_ext_fields()
        await self.invoke_checked(addr, RequestCode.UNREGISTER_CLIENT, ext)

    async def get_consumer_id_list(self, addr: str, group: str) -> list[str]:
        ext = GetConsumerListByGroupRequestHeader(consumer_group=group).to_ext_fields()
        reply = await self.invoke_checked(addr, RequestCode.GET_CONSUMER_LIST_BY_GROUP, ext)
        if not reply.body:
            return []
        obj = fastjson.decode_object(reply.body, "GetConsumerListByGroupResponseBody")
        return [str(x) for x in fastjson.get_list(obj, "consumerIdList")]

    async def consumer_send_message_back(
        self, addr: str, msg: MessageExt, group: str, delay_level: int, max_reconsume_times: int,
        timeout: float | None = None,
    ) -> None:  # fmt: skip
        """CONSUMER_SEND_MSG_BACK: the broker re-stores ``msg`` in %RETRY%group (or the DLQ)."""
        ext = ConsumerSendMsgBackRequestHeader(
            offset=msg.commit_log_offset,
            group=group,
            delay_level=delay_level,
            origin_msg_id=msg.msg_id,
            origin_topic=msg.topic,
            unit_mode=False,
            max_reconsume_times=max_reconsume_times,
        ).to_ext_fields()
        await self.invoke_checked(addr, RequestCode.CONSUMER_SEND_MSG_BACK, ext, None, timeout)

    async def lock_batch_mq(
        self, addr: str, group: str, client_id: str, mqs: Iterable[MessageQueue]
    ) -> set[MessageQueue]:
        body = orjson.dumps(
            {"clientId": client_id, "consumerGroup": group, "mqSet": [_mq_json(m) for m in mqs]}
        )
        reply = await self.invoke_checked(addr, RequestCode.LOCK_BATCH_MQ, None, body)
        if not reply.body:
            return set()
        obj = fastjson.decode_object(reply.body, "LockBatchResponseBody")
        return {
            MessageQueue.from_json(fastjson.as_object(x, "lockOKMQSet[]"))
            for x in fastjson.get_list(obj, "lockOKMQSet")
        }

    async def unlock_batch_mq(
        self, addr: str, group: str, client_id: str, mqs: Iterable[MessageQueue], *, oneway: bool = False
    ) -> None:
        body = orjson.dumps(
            {"clientId": client_id, "consumerGroup": group, "mqSet": [_mq_json(m) for m in mqs]}
        )
        if oneway:
            await self.invoke_oneway(addr, RequestCode.UNLOCK_BATCH_MQ, None, body)
        else:
            await self.invoke_checked(addr, RequestCode.UNLOCK_BATCH_MQ, None, body)

    async def end_transaction_oneway(
        self, addr: str, header: EndTransactionRequestHeader, remark: str | None = None
    ) -> None:
        request = self.request(RequestCode.END_TRANSACTION, header.to_ext_fields(), oneway=True)
        request.remark = remark
        await self.remoting.invoke_oneway(addr, request)

    def end_transaction(
        self, addr: str, group: str, queue_offset: int, commit_log_offset: int, state: int,
        msg_id: str, transaction_id: str,
    ) -> Awaitable[None] | None:  # fmt: skip
        """A producer's own END_TRANSACTION oneway (not from a check): the header from the
        group's and state's :func:`end_template` when the state is one of :data:`_END_STATES`,
        the ids are ASCII letters and digits (no JSON escaping) and no RPC hooks run (they
        would see no ``ext_fields``), else :meth:`end_transaction_oneway`'s; the same bytes.
        None: queued for this loop turn's END write to ``addr`` (the connection is open),
        nothing to await."""
        remoting = self.remoting
        try:
            # ASCII letters and digits: bytes.isalnum reads a table, str.isalnum the Unicode
            # database per character (~1.7k instructions for a UNIQ_KEY against ~0.8k); UTF-8's
            # bytes of other characters are no ASCII letters (no str.isascii call first), a lone
            # surrogate does not encode
            plain_ids = msg_id.encode().isalnum() and (
                transaction_id is msg_id or transaction_id.encode().isalnum()  # (the same id, usually)
            )
        except UnicodeEncodeError:
            plain_ids = False
        if plain_ids and not (remoting.hooks or remoting.before_hooks):
            # subscripts, not dict.get calls (a method call each); a miss raises, rarely
            try:
                tpls = self._end_templates[group]
            except KeyError:
                tpls = self._end_templates[group] = end_templates(group)
            # the state's own template: its text is in the pieces (none: a state of no template)
            try:
                tpl = tpls[state]
            except KeyError:
                tpl = None
            if tpl is not None:
                item = (tpl, queue_offset, commit_log_offset, msg_id, transaction_id)
                # The turn's ENDs to a broker go in one request (one oneway_now, one
                # encode_header for all: no request, oneway_now and send call per END) written
                # when the loop gets to the turn's callbacks; its first is queued only when
                # the connection is open (else it is awaited, connecting, as before).
                queued = self._ends.get(addr)
                if queued is not None:
                    queued.append(item)
                    return None
                if remoting.writable(addr):
                    self._ends[addr] = [item]
                    _get_running_loop().call_soon(self._write_ends, addr)
                    return None
                cmd = _new(EndTransactionRequest)  # awaited: a request of its own
                cmd.opaque, cmd.flag, cmd.items = 0, _RPC_ONEWAY, [item]
                return remoting.invoke_oneway(addr, cmd)
        header = _end_header(group, queue_offset, commit_log_offset, state, msg_id, transaction_id)
        return self.end_transaction_oneway(addr, header)

    def _write_ends(self, addr: str) -> None:
        """Write the ENDs :meth:`end_transaction` queued for ``addr`` this turn: one request of
        their frames (consecutive opaques); with the connection closed since, each through
        invoke_oneway in a task of its own (a failure is logged: nobody awaits it)."""
        items = self._ends.pop(addr)
        cmd = _new(EndTransactionRequest)
        cmd.opaque, cmd.flag, cmd.items = 0, _RPC_ONEWAY, items
        if not self.remoting.oneway_now(addr, cmd, len(items)):
            task = _get_running_loop().create_task(self._end_each(addr, items))
            _end_tasks.add(task)
            task.add_done_callback(_end_tasks.discard)

    async def _end_each(self, addr: str, items: list[EndItem]) -> None:
        for item in items:
            cmd = _new(EndTransactionRequest)
            cmd.opaque, cmd.flag, cmd.items = 0, _RPC_ONEWAY, [item]
            try:
                await self.remoting.invoke_oneway(addr, cmd)
            except Exception as exc:  # oneway: the broker will check the half back
                _logger.warning("END_TRANSACTION of %s to %s not written: %s", item[3], addr, exc)

    async def view_message(self, addr: str, commit_log_offset: int) -> MessageExt:
        reply = await self.invoke_checked(
            addr, RequestCode.VIEW_MESSAGE_BY_ID, {"offset": str(commit_log_offset)}
        )
        msgs = decode_messages(reply.body or b"")
        if not msgs:
            raise QueryNotFoundError(f"no message at offset {commit_log_offset}", addr=addr)
        msg = msgs[0]
        if msg.sys_flag & COMPRESSED_FLAG:
            msg.body = zlib.decompress(msg.body)
        return msg
