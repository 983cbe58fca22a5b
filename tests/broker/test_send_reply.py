"""A send's reply and the shape-read send (``SendMessageProcessor.process``'s tail and its
learnt-shape path) against a real in-process broker: the SEND_OK rendered from kept texts is the
general encoding's bytes, counted as ``on_put`` counts, and a shape-read send is stored and
answered as the same send decoded typed."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from pocketmq.broker.processor.message_props import stored_properties
from pocketmq.remoting.protocol.codes import RequestCode, ResponseCode
from pocketmq.remoting.protocol.message import (
    encode_batch,
    properties_to_string,
)
from pocketmq.remoting.protocol.route import TopicConfig
from pocketmq.store import MessageInner
from tests.broker.test_send import pull_all


class _PutAnswers:
    """The store's put seam answering one given result (no held pull: no dispatch)."""

    dispatch_behind_bytes = 0

    def __init__(self, result: object) -> None:
        self.put_now = lambda inner: result


async def sent_reply(broker, request, result, queue_id: int, topic: str):
    """process's reply to ``request`` (made a SEND_MESSAGE_V2 of ``topic`` and ``queue_id``)
    whose put gives ``result``: the SEND_OK rendering (process's tail) of any offset, queue
    offset, opaque and store host, without storing anything."""
    from inspect import isawaitable

    proc = broker.send_processor
    # (set in the table, not by update_topic_config: the store would make 70,001 queue dirs)
    broker.topic_config_manager.topic_config_table.setdefault(topic, TopicConfig(topic, 70001, 70001))
    request.ext_fields = {"a": "G", "b": topic, "c": "TBW102", "d": "4", "e": f"{queue_id}", "f": "0",
                          "g": "0", "h": "0", "i": "KEYS\x01k", "j": "0", "k": "false", "m": "false"}  # fmt: skip
    request.body = b"x"
    conn = type("Conn", (), {"attrs": {"born_host": (bytes([127, 0, 0, 1]), 5555)}, "remote_addr": "c"})()
    store, proc.store = proc.store, _PutAnswers(result)
    try:
        reply = proc.process(conn, request)
        if isawaitable(reply):  # (the topic's write to topics.json awaited)
            reply = await reply
    finally:
        proc.store = store
    return reply


# ("R" * 1000: a header past send_ok_texts.REPLY_PREFIXES' 1024 lengths, its prefix packed)
@pytest.mark.parametrize(
    "region", ["DefaultRegion", 'a%b"\\é\x01\u2028', "@@pocketmq-slot-0@@", "", "R" * 1000]
)
async def test_send_ok_reply_head_is_byte_identical_to_the_general_encoding(broker, region):
    """SEND_OK replies carry a head rendered from a template (command.EncodedReply): the same
    bytes as encoding the reply's fields the general way, whatever the region's characters."""
    from pocketmq.remoting.protocol.command import EncodedReply, RemotingCommand
    from pocketmq.store import AppendResult, PutMessageStatus, PutResult

    broker.state.config = broker.state.config.model_copy(update={"region_id": region})
    proc = broker.send_processor
    proc._settings()  # the new config's (a send reads it first)
    for opaque, queue_id, offset, batch in (
        (7, 3, 0, None),
        (2**31 - 1, 0, 10**12, [5, 900]),
        (-5, 1, 1, None),
        (8, 1023, 2, None),  # the last queue id of remoting.protocol.message.QUEUE_ID_TEXT
        (9, 1024, 3, None),  # past it: formatted
        (10, 70000, 4, None),
    ):
        request = RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, {})
        request.opaque = opaque
        wrote = 4096 + abs(opaque) * 0xABCDEF  # (hex digits a-f: the msgId's are upper case)
        append = AppendResult.of(wrote, 100, 1, offset, 1, broker.store_host, batch)
        reply = await sent_reply(broker, request, PutResult(PutMessageStatus.PUT_OK, append), queue_id, "T")
        # a stored put's result is its AppendResult itself (commitlog.put_message): same reply
        assert (
            await sent_reply(broker, request, append, queue_id, "T")
        ).encode_header() == reply.encode_header()
        assert reply.ext_fields["MSG_REGION"] == region
        assert reply.ext_fields["msgId"].endswith("%016X" % (batch[-1] if batch else wrote))
        general = RemotingCommand.encode_header(reply)
        assert reply.encode_header() == general
        assert (len(general) > 1024 + 8) == (len(region) == 1000)
        if region != "@@pocketmq-slot-0@@":
            assert type(reply) is EncodedReply
        reply.opaque += 1  # changed after it was built: encoded the general way
        assert reply.encode_header() == RemotingCommand.encode_header(reply) != general


async def test_send_ok_msg_id_across_offset_blocks_and_store_hosts(broker):
    """A SEND_OK's offset msgId is made from the 64 KiB block of offsets kept from the last
    send (send._block) and a table of four hex digits: %016X after the store host's prefix for
    offsets in, at the edges of and across blocks, backwards, past 2**32 and up to 2**63 - 1,
    and with another store host (whose prefix the kept block must not keep); byte for byte."""
    from pocketmq.remoting.protocol.command import EncodedReply, RemotingCommand
    from pocketmq.store import AppendResult

    other = (bytes([10, 0, 0, 7]), 10911)
    offsets = [0, 1, 0xFFFF, 0x10000, 0x1FFFF, 0x10ABC, 0xABCD, 2**32 - 1, 2**32, 2**32 + 0xFEDC,
               0xABCDEF0123, 0xABCDEF0124, 2**63 - 1, 2**63 - 0x10000, 5]  # fmt: skip
    for n, (host, offset) in enumerate(
        [(broker.store_host, off) for off in offsets]
        + [(other, 0xABCDEF0125), (other, 7), (broker.store_host, 8)]
    ):
        prefix = (host[0] + host[1].to_bytes(4, "big", signed=True)).hex().upper()
        request = RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, {})
        request.opaque = n
        reply = await sent_reply(broker, request, AppendResult.of(offset, 100, 1, n, 1, host, None), 3, "T")
        assert type(reply) is EncodedReply, offset
        assert reply.ext_fields["msgId"] == f"{prefix}{offset:016X}", offset
        assert reply.encode_header() == RemotingCommand.encode_header(reply)


async def test_send_ok_numbers_across_their_blocks_queues_and_configs(broker):
    """A SEND_OK's queue offset and opaque are made from their block of 1000 kept from the last
    send (the queue's; send._number_block) and a table of their last three digits, the
    template's parts joined to both: byte for byte against the general encoding for numbers
    in, at the edges of and across blocks, backwards, below 1000, queue ids past 1023, a
    negative opaque (the general path) and a region changed between sends."""
    from pocketmq.remoting.protocol.command import EncodedReply, RemotingCommand
    from pocketmq.store import AppendResult

    proc = broker.send_processor
    numbers = [
        0,
        7,
        999,
        1000,
        1001,
        1999,
        2000,
        999_999,
        1_000_000,
        1_000_999,
        12,
        2**31 - 1,
        2**40 + 5,
        10**18,
    ]
    n = 0
    for region in ("DefaultRegion", "R2", "DefaultRegion"):
        broker.state.config = broker.state.config.model_copy(update={"region_id": region})
        for queue_id in (3, 0, 1023, 1024, 70000, 3):
            for k, number in enumerate(numbers):
                request = RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, {})
                request.opaque = numbers[-1 - k] % 2**31 if k % 5 else -number - 1
                append = AppendResult.of(4096 * n, 100, 1, number, 1, broker.store_host, None)
                proc._settings()  # (what a send does first)
                reply = await sent_reply(broker, request, append, queue_id, "T")
                assert type(reply) is EncodedReply  # (a negative opaque's: rendered from msg_id)
                ext = reply.ext_fields
                assert (ext["queueId"], ext["queueOffset"], ext["MSG_REGION"]) == (
                    f"{queue_id}",
                    f"{number}",
                    region,
                )
                assert reply.encode_header() == RemotingCommand.encode_header(reply)
                n += 1


async def test_batch_msg_id_is_each_offsets_msg_id_joined(broker):
    """A batch's SEND_OK msgId (send._msg_id: the offsets packed and hex-split in one pass) is
    the offset msgId of each message, %016X after the store host's prefix, comma-joined."""
    from pocketmq.store import AppendResult

    proc = broker.send_processor
    host = broker.store_host
    prefix = (host[0] + host[1].to_bytes(4, "big", signed=True)).hex().upper()
    for offsets in (
        [0],
        [5, 900],
        [0xABCDEF, 2**32 - 1, 2**32, 2**40 + 0xFA],
        [2**63 - 1],
        list(range(0, 64 * 1100, 1100)),
    ):
        append = AppendResult.of(offsets[0], 100, 1, 0, len(offsets), host, offsets)
        assert proc._msg_id(append) == ",".join(f"{prefix}{off:016X}" for off in offsets)


def test_send_single_sets_every_message_inner_field():
    """process builds its MessageInner slot by slot (no __init__): a field added to
    MessageInner must be set there too."""
    import dataclasses
    import inspect
    import re

    from pocketmq.broker.processor.send import SendMessageProcessor

    source = inspect.getsource(SendMessageProcessor.process)
    assigned = set(re.findall(r"^\s+inner\.(\w+) = ", source, re.MULTILINE))
    assert assigned >= {f.name for f in dataclasses.fields(MessageInner)}


async def test_a_batch_template_has_every_message_inner_field(broker, wire, monkeypatch):
    """_send_batch fills its template slot by slot (no __init__): every MessageInner field is
    set, to what the dataclass's __init__ would have made of the header."""
    import dataclasses

    seen = []
    put_batch = broker.store.put_batch
    monkeypatch.setattr(broker.store, "put_batch", lambda t, items: seen.append(t) or put_batch(t, items))
    body = encode_batch([(0, b"a", ""), (0, b"b", "")])
    r = await wire.call(RequestCode.SEND_BATCH_MESSAGE, {"a": "P", "b": "Tpl", "c": "TBW102", "d": "4",
                                                        "e": "2", "f": "0", "g": "1700000000123", "h": "0",
                                                        "j": "3", "m": "true"}, body)  # fmt: skip
    assert r.code == ResponseCode.SUCCESS, r.remark
    (t,) = seen
    got = {f.name: getattr(t, f.name) for f in dataclasses.fields(MessageInner)}
    assert got == {
        "topic": "Tpl", "body": b"", "queue_id": 2, "flag": 0, "properties": "", "sys_flag": 0,
        "born_timestamp": 1700000000123, "born_host": t.born_host, "store_host": broker.store_host,
        "reconsume_times": 3, "prepared_transaction_offset": 0, "tags_code": 0,
    }  # fmt: skip
    assert t.born_host[1] > 0


@pytest.mark.parametrize(
    "sent",
    [
        "UNIQ_KEY\x01ABC",
        "TAGS\x01t\x02UNIQ_KEY\x01ABC",
        "A\x01b\x02",
        "XWAIT\x01a",
        "CLUSTER\x01old\x02A\x01b",
        "",
    ],
)
async def test_sdk_form_properties_stored_as_stored_properties_makes_them(broker, wire, sent):
    """Sends without WAIT (the SDK's form) take an inline path in process: stored the same."""
    ext = {"a": "PG", "b": "SdkForm", "c": "TBW102", "d": "4", "e": "0", "f": "0", "g": "1700000000000",
           "h": "0", "i": sent, "j": "0", "k": "false"}  # fmt: skip
    r = await wire.call(RequestCode.SEND_MESSAGE_V2, ext, b"body")
    assert r.code == ResponseCode.SUCCESS, r.remark
    msgs = await pull_all(wire, "SdkForm", 0, int(r.ext_fields["queueOffset"]))
    expected, _ = stored_properties(sent, "DefaultCluster")
    assert properties_to_string(msgs[0].properties) == expected


async def test_send_reply_counts_the_put_as_on_put_does(broker, wire):
    """The reply's inline copy of ``BrokerStatsManager.on_put``: the same items, values and times."""
    from pocketmq.broker.stats import BROKER_PUT_NUMS, TOPIC_PUT_NUMS, TOPIC_PUT_SIZE, BrokerStatsManager

    stats = broker.broker_stats_manager
    reference = BrokerStatsManager(broker.config.broker_cluster_name, stats.now_ms)
    before = broker.store.get_max_phy_offset()
    for i in range(3):
        ext = {"a": "PG", "b": "StatsT", "c": "TBW102", "d": "4", "e": "0", "f": "0", "g": "1700000000000",
               "h": "0", "i": f"UNIQ_KEY\x01U{i}", "j": "0", "k": "false"}  # fmt: skip
        r = await wire.call(RequestCode.SEND_MESSAGE_V2, ext, b"x" * (10 + i))
        assert r.code == ResponseCode.SUCCESS, r.remark
        size = broker.store.get_max_phy_offset() - before
        before += size
        reference.on_put("StatsT", 1, size)
    for name, key in ((TOPIC_PUT_NUMS, "StatsT"), (TOPIC_PUT_SIZE, "StatsT")):
        got, want = stats.get_stats_item(name, key), reference.get_stats_item(name, key)
        assert got is not None and want is not None
        assert (got.value, got.times) == (want.value, want.times) == (want.value, 3)
    cluster = broker.config.broker_cluster_name
    assert stats.get_stats_item(BROKER_PUT_NUMS, cluster).value == 3  # type: ignore[union-attr]


@pytest.mark.parametrize("batch", [False, True])
async def test_shape_read_send_replies_as_a_typed_one(broker, batch):
    """A SEND_MESSAGE_V2 read by its header's shape (send_raw.SendRawRequest, whose code and
    serialize type process does not read: class attributes) is stored and answered as the same
    send decoded typed: the SEND_OK head byte for byte (but its msgId and queue offset), a
    batch (``m=true``) through the batch path."""
    from argparse import Namespace

    from pocketmq.remoting.protocol.command import RemotingCommand, SendV2Request
    from pocketmq.remoting.protocol.frame import FrameDecoder
    from pocketmq.remoting.protocol.send_raw import SendRawRequest

    proc = broker.send_processor
    conn = Namespace(attrs={}, remote_addr="127.0.0.1:5555")
    body = encode_batch([(0, b"b0", "KEYS\x01x0"), (0, b"b1", "")]) if batch else b"x" * 100
    frames = []
    for i in range(4):
        uniq = f"7F0000010A6B18B4AAC22794EB2C{i:04X}"
        ext = {"a": "PG", "b": "RawShape", "c": "TBW102", "d": "4", "e": "1", "f": "0", "g": "1700000000000",
               "h": "0", "i": f"UNIQ_KEY\x01{uniq}", "j": "0", "k": "false", "m": "true" if batch else "false"}  # fmt: skip
        frames.append(
            RemotingCommand(
                code=RequestCode.SEND_MESSAGE_V2, ext_fields=ext, body=body, opaque=100 + i
            ).encode()
        )
    decoder = FrameDecoder()
    commands = decoder.feed(b"".join(frames[:2])) + decoder.feed(
        b"".join(frames[2:])
    )  # (learnt, then read by it)
    assert [type(c) for c in commands[2:]] == [SendRawRequest, SendRawRequest]
    assert type(commands[0]) in (SendV2Request, RemotingCommand)
    heads = []
    for command in commands:
        reply = proc.process(conn, command)
        reply = reply if isinstance(reply, RemotingCommand) else await reply
        assert reply.code == ResponseCode.SUCCESS
        assert reply.opaque == command.opaque
        assert reply.encode_header() == RemotingCommand.encode_header(reply)
        ext = reply.ext_fields
        heads.append(reply.encode_header().replace(ext["msgId"].encode(), b"M").replace(b'"queueOffset":"%s"' % ext["queueOffset"].encode(), b"Q").replace(b"%d" % reply.opaque, b"O"))  # fmt: skip
        assert ext["queueId"] == "1"
        assert int(ext["queueOffset"]) == len(heads) * (2 if batch else 1) - (2 if batch else 1)
        assert len(ext["msgId"].split(",")) == (2 if batch else 1)
    assert len(set(heads)) == 1


async def _outcomes(
    broker: Any, conn: Any, commands: Any, of_reply: Callable[[Any], Any], of_msg: Callable[[Any], Any]
) -> list[Any]:
    """What the send processor makes of each of ``commands``: the error's name and text (the
    server answers it with its code), else ``of_reply`` of its reply and, when it stored one,
    ``of_msg`` of the stored message."""
    from pocketmq.remoting.protocol.command import RemotingCommand

    out: list[Any] = []
    for command in commands:
        try:
            reply = broker.send_processor.process(conn, command)
            reply = reply if isinstance(reply, RemotingCommand) or reply is None else await reply
        except Exception as exc:
            out.append((type(exc).__name__, str(exc)))
            continue
        assert reply is not None
        out.append(of_reply(reply))
        ext = reply.ext_fields or {}
        if "msgId" in ext:
            msg = broker.store.look_message_by_offset(int(ext["msgId"][-16:], 16))
            assert msg is not None
            out.append(of_msg(msg))
    return out


_PLAIN_CASES = [
    "TAGS\x01A\x02UNIQ_KEY\x01{u}",
    "UNIQ_KEY\x01{u}",
    "TAGS\x01Tág \x02UNIQ_KEY\x01{u}\x02KEYS\x01ü",
    "TAGS\x01A\x02\x02UNIQ_KEY\x01{u}",  # (the plain ones above: the checks find nothing)
    "UNIQ_KEY\x01{u}\x02WAIT\x01true\x02TAGS\x01A",
    "WAIT\x01false\x02UNIQ_KEY\x01{u}",
    "CLUSTER\x01other\x02UNIQ_KEY\x01{u}",
    "DELAY\x013\x02UNIQ_KEY\x01{u}",
    "UNIQ_KEY\x01{u}\x02DELAY\x012",
    "UNIQ_KEY\x01{u}\x02DELAY\x01x",
    "UNIQ_KEY\x01{u}\x02TRAN_MSG\x01true\x02PGROUP\x01PG",
    "TRAN_MSG\x01false\x02UNIQ_KEY\x01{u}",
    "UNIQ_KEY\x01{u}\x02",
    "XWAIT\x01v\x02UNIQ_KEY\x01{u}\x02MYDELAY\x011",
]


@pytest.mark.parametrize("props", _PLAIN_CASES)
async def test_shape_read_send_stores_the_typed_ones_properties(broker, props):
    """A shape's ``plain`` flag (send_raw._plain: the processor then searches the properties for
    none of WAIT, CLUSTER, DELAY, TRAN_MSG) is set exactly when the processor's own checks would
    find none of them and no trailing separator; either way the shape-read send is answered and
    stored as the same send decoded typed (properties, topic, queue, sysFlag; the reply's code
    and remark), whatever keys its properties hold before or after the UNIQ_KEY."""
    from argparse import Namespace

    from pocketmq.broker.processor.message_props import CLUSTER_KEY, DELAY_KEY, TRAN_KEY, WAIT_KEY
    from pocketmq.remoting.protocol import send_raw
    from pocketmq.remoting.protocol.command import RemotingCommand, SendV2Request
    from pocketmq.remoting.protocol.frame import FrameDecoder
    from pocketmq.remoting.protocol.send_raw import SendRawRequest

    send_raw.SHAPES.clear()
    send_raw.OTHER_SHAPES.clear()
    send_raw._misses.clear()
    conn = Namespace(attrs={}, remote_addr="127.0.0.1:5555")
    frames = []
    for i in range(2):
        ext = {"a": "PG", "b": "RawProps", "c": "TBW102", "d": "4", "e": "1", "f": "0", "g": "1700000000000",
               "h": "0", "i": props.format(u=f"7F0000010A6B18B4AAC22794EB2C{i:04X}"), "j": "0", "k": "false",
               "m": "false"}  # fmt: skip
        frames.append(RemotingCommand(code=RequestCode.SEND_MESSAGE_V2, ext_fields=ext, body=b"x", opaque=100 + i).encode())  # fmt: skip
    decoder = FrameDecoder()
    typed, raw = decoder.feed(frames[0]) + decoder.feed(frames[1])  # (learnt, then read by it)
    assert type(typed) in (SendV2Request, RemotingCommand) and type(raw) is SendRawRequest
    sent = raw.send_header.properties
    keyless = all(key not in sent for key in (WAIT_KEY, CLUSTER_KEY, DELAY_KEY, TRAN_KEY))
    assert raw.plain == (keyless and not sent.endswith("\x02"))
    assert raw.plain == (props in _PLAIN_CASES[:4])
    stored = await _outcomes(
        broker,
        conn,
        (typed, raw),
        lambda reply: (reply.code, reply.remark, "msgId" in (reply.ext_fields or {})),
        lambda msg: (msg.topic, msg.queue_id, msg.sys_flag, repr(msg.properties).replace("2C0000", "2C0001")),
    )
    assert stored[: len(stored) // 2] == stored[len(stored) // 2 :]


_OWN_VALUE_CASES = [
    ("RawOwn", "2", "TAGS\x01A\x02UNIQ_KEY\x01{u}"),  # the plain fast path
    ("RawOwn", "2", "UNIQ_KEY\x01{u}\x02DELAY\x012\x02WAIT\x01false"),  # delay level, WAIT read
    ("RawOwn", "3", "UNIQ_KEY\x01{u}\x02TRAN_MSG\x01true\x02PGROUP\x01PG"),  # a half
    ("RawOwn", "7", "UNIQ_KEY\x01{u}"),  # past the topic's queues: check_send's remark
    ("%RETRY%PG", "0", "UNIQ_KEY\x01{u}\x02RETRY_TOPIC\x01RawOwn"),  # _retry_and_dlq
]


@pytest.mark.parametrize(("topic", "queue", "props"), _OWN_VALUE_CASES)
async def test_shape_read_send_takes_its_own_queue_born_time_and_properties(broker, topic, queue, props):
    """A shape-read send whose queue id, born timestamp and UNIQ_KEY differ from the header its
    shape was learnt from is stored or refused as the same send decoded typed (send_raw: those
    three are the request's, not the shape's header's), on the plain path, a delay level, a
    transaction half, check_send's queue id check and a %RETRY% topic's."""
    from argparse import Namespace

    from pocketmq.remoting.protocol import send_raw
    from pocketmq.remoting.protocol.command import RemotingCommand
    from pocketmq.remoting.protocol.frame import FrameDecoder
    from pocketmq.remoting.protocol.send_raw import SendRawRequest

    send_raw.SHAPES.clear()
    send_raw.OTHER_SHAPES.clear()
    send_raw._misses.clear()
    conn = Namespace(attrs={}, remote_addr="127.0.0.1:5555")
    exts = []
    for i, (e, g) in enumerate((("1", "1700000000000"), (queue, "1700000012345"))):
        exts.append({"a": "PG", "b": topic, "c": "TBW102", "d": "4", "e": e, "f": "0", "g": g, "h": "0",
                     "i": props.format(u=f"7F0000010A6B18B4AAC22794EB2C{i:04X}"), "j": "1", "k": "false",
                     "m": "false"})  # fmt: skip
    frames = [
        RemotingCommand(code=RequestCode.SEND_MESSAGE_V2, ext_fields=ext, body=b"x", opaque=100 + i).encode()
        for i, ext in enumerate(exts)
    ]
    decoder = FrameDecoder()
    decoder.feed(frames[0])  # (learnt)
    (raw,) = decoder.feed(frames[1])
    assert type(raw) is SendRawRequest and raw.shape_header.queue_id == 1
    typed = RemotingCommand(code=RequestCode.SEND_MESSAGE_V2, ext_fields=exts[1], body=b"x", opaque=101)
    outcomes = await _outcomes(
        broker,
        conn,
        (raw, typed),
        lambda reply: (reply.code, reply.remark, (reply.ext_fields or {}).get("queueId")),
        lambda msg: (
            msg.topic,
            msg.queue_id,
            msg.born_timestamp,
            msg.sys_flag,
            msg.reconsume_times,
            msg.properties,
        ),
    )
    assert 1700000012345 in outcomes[-1] or "queueId[7]" in str(outcomes[0])
    assert outcomes[: len(outcomes) // 2] == outcomes[len(outcomes) // 2 :]
    if queue == "7":
        assert "queueId[7]" in str(outcomes[0])
