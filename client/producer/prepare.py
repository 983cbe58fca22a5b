"""Message preparation for sends (the producer's per-message CPU): validation (Java
``Validators.checkMessage``), body compression, the properties string with its ``UNIQ_KEY``,
batch bodies, and the SEND_MESSAGE_V2 header fields of each attempt.

Plain messages (tags at most, no keys or user properties, WAIT true) take a fast path that
builds the properties string directly instead of a properties dict: the same string
``properties_to_string`` makes of ``{"TAGS": t, "UNIQ_KEY": u}``. So do transactional halves
of such messages (``TRAN_MSG`` and ``PGROUP`` set by :mod:`.transaction`, nothing else): the
string of ``{"TRAN_MSG": "true", "PGROUP": g, "TAGS": t, "UNIQ_KEY": u}``.
"""

from __future__ import annotations

import struct
import time
import zlib
from collections.abc import Sequence

from pocketmq.client.api import BORN_MARK, UNIQ_MARK, send_template
from pocketmq.client.config import ProducerConfig
from pocketmq.client.errors import MessageValidationError
from pocketmq.client.message import Message, MessageQueue
from pocketmq.client.validation import check_send_topic
from pocketmq.remoting.protocol.message import (
    COMPRESSED_FLAG,
    MAX_PROPERTIES_LENGTH,
    TRANSACTION_PREPARED_TYPE,
    MessageConst,
    UniqIdGenerator,
    encode_batch,
    pack_host_ip,
    properties_to_string,
)
from pocketmq.remoting.protocol.slots import SlotRecord
from pocketmq.remoting.protocol.topics import is_retry_topic

#: Header templates kept per producer (a bound: topics and tags come from the application).
_MAX_HEADS = 4096
#: Prefix of :attr:`Prepared.plain_tags` for a transactional half (tags never hold it).
TX_MARK = "\x01"
_TRAN_MSG = MessageConst.TRAN_MSG
_PGROUP = MessageConst.PGROUP
#: a batch body item's head (``encode_batch``): TOTALSIZE, MAGICCODE 0, BODYCRC 0, FLAG, BODYLENGTH
_pack_item = struct.Struct(">iiiii").pack
_pack_plen = struct.Struct(">h").pack
_UNIQ_PREFIX = b"UNIQ_KEY\x01"
#: _uniform_batch's last cuts: (messages, bytes a message's tail, the tails' slices)
_kept_cuts: list[tuple[int, int, list[slice]]] = [(0, 0, [])]


class Prepared:
    """A message encoded once for every attempt: body, sysFlag, properties, ids."""

    __slots__ = (
        "_props",
        "batch",
        "body",
        "born",
        "flag",
        "max_reconsume",
        "msg_id",
        "plain_tags",
        "reconsume",
        "sys_flag",
        "topic",
    )

    def __init__(
        self, topic: str, body: bytes, sys_flag: int, flag: int, props: str, msg_id: str, batch: bool
    ) -> None:
        self.topic = topic
        self.body = body
        self.sys_flag = sys_flag
        self.flag = flag
        self._props: str | None = props
        self.msg_id = msg_id
        self.batch = batch
        #: the wall-clock ms its UNIQ_KEY was made at (the plain fast path's; 0: not known),
        #: the born timestamp of a first attempt made right away (no second clock read)
        self.born = 0
        self.reconsume: str | None = None
        self.max_reconsume: str | None = None
        #: a plain message (flag and sysFlag 0, properties TAGS and UNIQ_KEY only): its tags
        #: ("" without), whose header comes from a per-queue template (:meth:`MessagePreparer.head`);
        #: a transactional half of one (sysFlag prepared, TRAN_MSG and PGROUP first): TX_MARK + tags
        self.plain_tags: str | None = None

    @property
    def props(self) -> str:
        """The properties string. A plain message's (the fast path of :meth:`MessagePreparer.
        prepare`) is rendered on first use: its header comes from a template that holds none
        (``UNIQ_KEY`` filled in), so most sends never need it."""
        props = self._props
        if props is None:
            # the same string properties_to_string makes of {"TAGS": t, "UNIQ_KEY": u}
            tags, uniq = self.plain_tags, self.msg_id
            props = self._props = f"TAGS\x01{tags}\x02UNIQ_KEY\x01{uniq}" if tags else f"UNIQ_KEY\x01{uniq}"
        return props

    @props.setter
    def props(self, props: str) -> None:
        self._props = props


class _Plain(SlotRecord, Prepared):
    """A :class:`Prepared` made by :meth:`MessagePreparer.prepare`'s plain fast path as
    ``_Plain()``, its slots then filled: object's own __init__ (not Prepared's), so the call is
    type_call -> object_new -> object_init, ~0.3k instructions less than
    ``object.__new__(Prepared)`` (its argument tuple and tp_new_wrapper's checks)."""

    __slots__ = ()


class MessagePreparer:
    """Turns :class:`Message` objects into :class:`Prepared` sends for one producer."""

    def __init__(self, config: ProducerConfig) -> None:
        self.group = config.producer_group
        self._uniq = UniqIdGenerator(pack_host_ip(config.client_ip) if "." in config.client_ip else None)
        self._valid_topics: set[str] = set()
        self._create_topic_key = config.create_topic_key
        self._default_queue_nums = str(config.default_topic_queue_nums)
        # Copies of the (frozen) config read on every message.
        self._max_size = config.max_message_size
        self._compress_over = config.compress_msg_body_over_howmuch
        self._compress_level = config.compress_level
        #: a body shorter than this is sent as it is (neither compressed nor too large)
        self._plain_limit = min(self._compress_over, self._max_size + 1)
        #: (topic, queue id, broker, tags) -> header template (empty: none possible)
        self.heads: dict[tuple[str, int, str, str], tuple[str, ...]] = {}
        #: an untagged plain message's templates of its own topic's queues, by the queue alone
        #: (:meth:`head` adds them; read by ``Sender.send_first``, whose queue is one of the
        #: message's topic): no key tuple made and hashed per send (~0.75k instructions)
        self.untagged: dict[MessageQueue, tuple[str, ...]] = {}
        #: a transactional half's properties before TAGS (None: the group holds a separator,
        #: which validate() refuses, so such halves take the general path)
        group = self.group
        self._tx_props = (
            None if "\x01" in group or "\x02" in group else f"{_TRAN_MSG}\x01true\x02{_PGROUP}\x01{group}\x02"
        )

    def validate(self, msg: Message) -> None:
        """Raises MessageValidationError for a bad topic, body, delay level or property."""
        if type(msg) is not Message and not isinstance(msg, Message):
            raise MessageValidationError(f"expected a Message, got {type(msg).__name__}")
        if msg.topic not in self._valid_topics:
            check_send_topic(msg.topic)
            if len(self._valid_topics) < 10_000:
                self._valid_topics.add(msg.topic)
        body = msg.body
        if type(body) is not bytes and not isinstance(body, bytearray | memoryview):
            raise MessageValidationError(f"message body must be bytes, got {type(body).__name__}")
        size = len(body)
        if not 0 < size <= self._max_size:
            if size == 0:
                raise MessageValidationError("the message body length is zero")
            raise MessageValidationError(
                f"the message body size {size} is over the max value {self._max_size}"
            )
        if msg.delay_level < 0:
            raise MessageValidationError(f"delay level {msg.delay_level} is negative")
        if msg.properties:
            for k, v in msg.properties.items():
                if not k or "\x01" in k or "\x02" in k or "\x01" in str(v) or "\x02" in str(v):
                    raise MessageValidationError(f"property {k!r} contains a reserved separator character")

    def prepare(self, msg: Message) -> Prepared:
        """Validate and encode ``msg`` once for every attempt of its send."""
        body = msg.body
        if (
            type(msg) is Message
            and type(body) is bytes
            and body  # (not empty)
            and len(body) < self._plain_limit
            and msg.topic in self._valid_topics
            and not (msg.keys or msg.delay_level or msg.flag)
            and msg.wait_store_msg_ok
        ):
            # The common case, checked and encoded in one go (the checks are validate()'s for
            # such a message): a known topic, an uncompressed body, TAGS and UNIQ_KEY only.
            # inline of pocketmq.remoting.protocol.message.properties_to_string
            tags = msg.tags
            if msg.properties:
                # a transactional half of such a message, else the general path below
                half = self._half(msg, body, tags)
                if half is not None:
                    return half
            elif not tags or ("\x01" not in tags and "\x02" not in tags):
                gen = self._uniq
                uniq = gen.create()
                # a plain message: slots filled directly (no __init__ call)
                p: Prepared = _Plain()
                p.born = gen.last_ms
                p.topic = msg.topic
                p.body = body
                p.sys_flag = p.flag = 0
                p._props = None  # rendered when first read (Prepared.props)
                p.msg_id = uniq
                p.batch = False
                p.reconsume = p.max_reconsume = None
                p.plain_tags = tags or ""
                return p
        self.validate(msg)
        body = msg.body
        if type(body) is not bytes:
            body = bytes(body)
        sys_flag = 0
        if len(body) >= self._compress_over:
            body = zlib.compress(body, self._compress_level)
            sys_flag |= COMPRESSED_FLAG
        if not msg.properties and not msg.keys and not msg.delay_level and msg.wait_store_msg_ok:
            # The common case, without building a dict: TAGS and UNIQ_KEY only.
            # inline of pocketmq.remoting.protocol.message.properties_to_string
            uniq = self._uniq.create()
            tags = msg.tags
            props_str = f"TAGS\x01{tags}\x02UNIQ_KEY\x01{uniq}" if tags else f"UNIQ_KEY\x01{uniq}"
            if tags and ("\x01" in tags or "\x02" in tags):
                raise MessageValidationError("tags contain a reserved separator character")
            prepared = Prepared(msg.topic, body, sys_flag, msg.flag, props_str, uniq, False)
            prepared.born = self._uniq.last_ms
            if not sys_flag and not msg.flag:
                prepared.plain_tags = tags or ""
            return prepared
        props = msg.wire_properties()
        uniq = props.get(MessageConst.UNIQ_KEY) or self._uniq.create()
        props[MessageConst.UNIQ_KEY] = uniq
        if props.get(MessageConst.TRAN_MSG) == "true":
            sys_flag |= TRANSACTION_PREPARED_TYPE
        retry = is_retry_topic(msg.topic)
        reconsume = props.pop(MessageConst.RECONSUME_TIME, None) if retry else None
        max_reconsume = props.pop(MessageConst.MAX_RECONSUME_TIMES, None) if retry else None
        props_str = properties_to_string(props)
        if len(props_str) > MAX_PROPERTIES_LENGTH // 3 and len(props_str.encode()) > MAX_PROPERTIES_LENGTH:
            raise MessageValidationError(f"message properties are longer than {MAX_PROPERTIES_LENGTH} bytes")
        prepared = Prepared(msg.topic, body, sys_flag, msg.flag, props_str, uniq, False)
        prepared.reconsume = reconsume
        prepared.max_reconsume = max_reconsume
        return prepared

    def _half(self, msg: Message, body: bytes, tags: str | None) -> Prepared | None:
        """A transactional half of a plain message (what :meth:`prepare`'s general path makes of
        it, without a properties dict), or None: not that shape, left to the general path."""
        props = msg.properties
        head = self._tx_props
        if (
            head is None
            or len(props) != 2
            or next(iter(props)) != _TRAN_MSG  # the general path keeps the dict's order
            or props[_TRAN_MSG] != "true"
            or props.get(_PGROUP) != self.group
            or (tags and ("\x01" in tags or "\x02" in tags))
        ):
            return None
        uniq = self._uniq.create()
        # inline of pocketmq.remoting.protocol.message.properties_to_string
        props_str = f"{head}TAGS\x01{tags}\x02UNIQ_KEY\x01{uniq}" if tags else f"{head}UNIQ_KEY\x01{uniq}"
        if len(props_str) > MAX_PROPERTIES_LENGTH // 3 and len(props_str.encode()) > MAX_PROPERTIES_LENGTH:
            return None  # the general path raises its error
        p = Prepared(msg.topic, body, TRANSACTION_PREPARED_TYPE, msg.flag, props_str, uniq, False)
        if not msg.flag:
            p.plain_tags = TX_MARK + (tags or "")
        return p

    def prepare_half(self, msg: Message) -> Prepared | None:
        """:meth:`prepare` of ``msg`` as a transactional half (``TRAN_MSG`` and ``PGROUP`` added
        to its properties, as :mod:`.transaction` does) without touching ``msg``: a plain
        message's :class:`Prepared` with the transaction's properties in front. None: not a
        plain message without properties, to send with those properties set.

        Raises:
            MessageValidationError: as :meth:`prepare`.
        """
        head = self._tx_props
        tags = msg.tags
        if head is None or msg.properties or (tags and ("\x01" in tags or "\x02" in tags)):
            return None  # (such tags: prepare raises, the general path does not)
        p = self.prepare(msg)
        tags = p.plain_tags
        if tags is None:
            return None
        props = head + p.props
        if len(props) > MAX_PROPERTIES_LENGTH // 3 and len(props.encode()) > MAX_PROPERTIES_LENGTH:
            return None  # the general path raises its error
        p.props = props
        p.sys_flag = TRANSACTION_PREPARED_TYPE
        p.plain_tags = TX_MARK + tags
        return p

    def prepare_batch(self, msgs: Sequence[Message]) -> Prepared:
        """One SEND_BATCH_MESSAGE body for ``msgs`` (one topic, no delay, no retry topic).

        Raises:
            MessageValidationError: empty batch, mixed topics, retry topics, delay levels, or an
                encoded batch larger than ``max_message_size``.
        """
        if not msgs:
            raise MessageValidationError("a batch needs at least one message")
        topic = msgs[0].topic
        if topic in self._valid_topics:
            plain = self._plain_batch(msgs, topic)
            if plain is not None:
                return plain
        retry = is_retry_topic(topic)  # every message must have this topic: checked once
        create = self._uniq.create
        ids: list[str] = []
        items: list[tuple[int, bytes, str]] = []
        for m in msgs:
            self.validate(m)
            if m.topic != topic:
                raise MessageValidationError("all messages of a batch must have the same topic")
            if retry:
                raise MessageValidationError("retry topics are not supported in batches")
            if m.delay_level > 0:
                raise MessageValidationError("delay levels are not supported in batches")
            body = m.body if type(m.body) is bytes else bytes(m.body)
            tags = m.tags
            if (
                not m.properties
                and not m.keys
                and m.wait_store_msg_ok
                and (not tags or ("\x01" not in tags and "\x02" not in tags))
            ):
                # The common case, as in _prepare: TAGS and UNIQ_KEY only, no dict built (the
                # same string properties_to_string makes of them).
                # inline of pocketmq.remoting.protocol.message.properties_to_string
                uniq = create()
                props_str = f"TAGS\x01{tags}\x02UNIQ_KEY\x01{uniq}" if tags else f"UNIQ_KEY\x01{uniq}"
            else:
                props = m.wire_properties()
                uniq = props.get(MessageConst.UNIQ_KEY) or create()
                props[MessageConst.UNIQ_KEY] = uniq
                props_str = properties_to_string(props)
            ids.append(uniq)
            items.append((m.flag, body, props_str))
        body = encode_batch(items)
        if len(body) > self._max_size:
            raise MessageValidationError(f"the batch size {len(body)} is over the max value {self._max_size}")
        wait = "true" if all(m.wait_store_msg_ok for m in msgs) else "false"
        return Prepared(topic, body, 0, 0, f"WAIT\x01{wait}", ",".join(ids), True)

    def _plain_batch(self, msgs: Sequence[Message], topic: str) -> Prepared | None:
        """``prepare_batch`` of plain messages of a topic that passed ``validate`` before, in one
        pass (no ``validate`` call and no item per message, the body encoded as it goes: the
        bytes ``encode_batch`` makes): each a :class:`Message` with a bytes body within the
        limit, TAGS (separator-free) or none, no keys or user properties, no delay, waiting
        for the store. None for anything else (``prepare_batch`` then checks every message, and
        raises as before); ids made here are not reused."""
        if topic[0] == "%" and is_retry_topic(topic):
            return None
        max_size = self._max_size
        parts: list[bytes] = []
        add = parts.extend
        # the batch's ids made at once (one clock read, not one an id)
        # (as one comma-joined text, its msgId: no string made per id unless it is cut apart)
        text = self._uniq.create_text(len(msgs))
        uniform = _uniform_batch(msgs, topic, text, max_size)
        if uniform is not None:
            return uniform
        ids = text.split(",")
        # an item's two packed heads kept while its body length, properties length and flag are
        # the same as the item before's (a batch of one size and tags: packed once, not twice
        # per message: ~1k instructions a message, callgrind)
        kept_blen = kept_plen = kept_flag = -1
        item = plen_head = b""
        for m, uniq in zip(msgs, ids, strict=True):
            body = m.body
            tags = m.tags
            if (
                type(m) is not Message
                or type(body) is not bytes
                or m.topic != topic
                or not 0 < len(body) <= max_size
                or m.delay_level
                or m.properties
                or m.keys
                or not m.wait_store_msg_ok
                or (tags and ("\x01" in tags or "\x02" in tags))
            ):
                return None
            # (the string _prepare makes of TAGS and UNIQ_KEY)
            props = (f"TAGS\x01{tags}\x02UNIQ_KEY\x01{uniq}" if tags else f"UNIQ_KEY\x01{uniq}").encode()
            blen = len(body)
            plen = len(props)
            if plen > MAX_PROPERTIES_LENGTH:
                return None
            flag = m.flag
            if blen != kept_blen or plen != kept_plen or flag != kept_flag:
                item, plen_head = _pack_item(22 + blen + plen, 0, 0, flag, blen), _pack_plen(plen)
                kept_blen, kept_plen, kept_flag = blen, plen, flag
            add((item, body, plen_head, props))
        data = b"".join(parts)
        if len(data) > max_size:
            return None
        return Prepared(topic, data, 0, 0, "WAIT\x01true", text, True)

    def head(self, p: Prepared, mq: MessageQueue) -> tuple[str, ...] | None:
        """The :func:`~pocketmq.client.api.send_template` of a plain ``p`` on ``mq`` (None: not
        plain, or no template), cached per (topic, queue, tags); a transactional half's per
        (topic, queue, TX_MARK + tags); an untagged message's on a queue of its topic also by
        the queue alone (:attr:`untagged`)."""
        tags = p.plain_tags
        if tags is None:
            return None
        key = (p.topic, mq.queue_id, mq.broker_name, tags)
        tpl = self.heads.get(key)
        if tpl is None:
            sys_flag, head = 0, ""
            if tags[:1] == TX_MARK:  # a transactional half: its properties and sysFlag
                sys_flag, head, tags = TRANSACTION_PREPARED_TYPE, self._tx_props or "", tags[1:]
            props = (
                f"{head}TAGS\x01{tags}\x02UNIQ_KEY\x01{UNIQ_MARK}"
                if tags
                else f"{head}UNIQ_KEY\x01{UNIQ_MARK}"
            )
            ext = self.ext(Prepared(p.topic, b"", sys_flag, 0, props, "", False), mq)
            ext["g"] = BORN_MARK
            tpl = send_template(ext) or ()  # (): no template possible, cached as such
            if len(self.heads) >= _MAX_HEADS:
                self.heads.clear()
                self.untagged.clear()
            self.heads[key] = tpl
        if not p.plain_tags and mq.topic == p.topic:  # (a queue named for another topic: not kept)
            self.untagged[mq] = tpl
        return tpl or None

    def ext(self, p: Prepared, mq: MessageQueue) -> dict[str, str]:
        """The SEND_MESSAGE_V2 header (short names) of one attempt on ``mq``."""
        ext = {
            "a": self.group,
            "b": p.topic,
            "c": self._create_topic_key,
            "d": self._default_queue_nums,
            "e": str(mq.queue_id),
            "f": str(p.sys_flag),
            "g": str(time.time_ns() // 1_000_000),
            "h": str(p.flag),
            "i": p.props,
            "j": p.reconsume or "0",
            "k": "false",
            "m": "true" if p.batch else "false",
            "n": mq.broker_name,
        }
        if p.max_reconsume is not None:
            ext["l"] = p.max_reconsume
        return ext


def _uniform_batch(msgs: Sequence[Message], topic: str, ids: str, max_size: int) -> Prepared | None:
    """``_plain_batch`` of untagged messages of one body length and flag (a producer's usual
    batch), from its ids as one comma-joined text: the bytes the item-by-item way makes, with
    no properties text, encode or packed head per message. Every item's head is the same, and
    so is the text between one body and the next but for the id in it: those texts are made
    for all messages by one replace of the ids' commas and one encode, then cut apart (a slice
    a message). None: not such a batch (the item-by-item way then)."""
    first = msgs[0]
    body = first.body
    blen = len(body) if type(body) is bytes else 0
    flag = first.flag
    if not 0 < blen <= max_size:
        return None
    bodies: list[bytes] = []
    add = bodies.append
    for m in msgs:
        body = m.body
        if (
            type(m) is not Message
            or type(body) is not bytes
            or len(body) != blen
            or m.flag != flag
            or m.tags
            or m.topic != topic
            or m.delay_level
            or m.properties
            or m.keys
            or not m.wait_store_msg_ok
        ):
            return None
        add(body)
    n = len(bodies)
    size = ids.find(",") if n > 1 else len(ids)
    # every id of one length (a comma after each: the generator's are), ASCII hex: a text's
    # length is its bytes'
    if ids[size :: size + 1] != "," * (n - 1) or len(ids) != n * (size + 1) - 1:
        return None
    plen = len(_UNIQ_PREFIX) + size
    if plen > MAX_PROPERTIES_LENGTH:
        return None
    item = _pack_item(22 + blen + plen, 0, 0, flag, blen)
    # after each body: its properties' length and text, then the next item's head; the last
    # body's without the head (one latin-1 text: the binary heads map to it byte for byte)
    mid = (_pack_plen(plen) + _UNIQ_PREFIX).decode("latin-1")
    tails = (mid + ids.replace(",", item.decode("latin-1") + mid)).encode("latin-1")
    step = 22 + plen
    if len(tails) != n * step - 20:
        return None  # (not ASCII)
    parts: list[bytes] = [item] * (2 * n + 1)
    parts[1::2] = bodies
    # the cuts: the last batch shape's slice objects kept (one tuple, read and replaced whole,
    # as producers on loops in other threads may share it), taken by map in C: ~0.3k
    # instructions a message less than a comprehension of slices (callgrind micro)
    kept_n, kept_step, cuts = _kept_cuts[0]
    if kept_n != n or kept_step != step:
        cuts = [slice(i, i + step) for i in range(0, len(tails), step)]
        _kept_cuts[0] = (n, step, cuts)
    parts[2::2] = map(tails.__getitem__, cuts)
    data = b"".join(parts)
    if len(data) > max_size:
        return None
    return Prepared(topic, data, 0, 0, "WAIT\x01true", ids, True)
