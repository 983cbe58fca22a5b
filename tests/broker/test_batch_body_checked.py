"""checked_body: a batch body for the store without an item per message, or batch_items' outcome.

Whatever it returns, the store writes the same bytes, CQ units and index entries as for
batch_items' list (one store per way, compared byte for byte), reput gets the same stored
properties strings, and a body batch_items refuses raises the same error."""

from __future__ import annotations

import struct

import pytest

from pocketmq.broker.processor.batch_body import ITEM_HEAD, batch_items, checked_body
from pocketmq.remoting.protocol.errors import MessageIllegalError
from pocketmq.remoting.protocol.message import encode_batch
from pocketmq.store import BatchBody, FlushDiskType, MessageInner, MessageStore, PutMessageStatus

from ..store.conftest import FakeClock, pull_all, tiny_config

HEADER = "WAIT\x01x\x02CLUSTER\x01C"
BORN = (b"\x0a\x00\x00\x01", 4321)
STORE_HOST = (b"\x7f\x00\x00\x01", 10911)


def _template(queue_id: int = 1) -> MessageInner:
    return MessageInner("TopicA", b"", queue_id, 0, "", 0x40, 1_700_000_000_123, BORN, STORE_HOST, 2)


def _item(flag: int, body: bytes, props: bytes, *, plen: int | None = None) -> bytes:
    size = ITEM_HEAD.size + len(body) + 2 + len(props)
    head = ITEM_HEAD.pack(size, 0, 0, flag, len(body))
    return head + body + struct.pack(">h", len(props) if plen is None else plen) + props


def _uniq(i: int) -> str:
    return f"UNIQ_KEY\x017F0000010001{i:020X}"


BODIES = {
    # every item's properties without a last separator (the SDK's), then all with one (an
    # older Java client's): BatchBody
    "plain": (encode_batch([(i, b"b%d" % i * (1 + 9 * i), _uniq(i)) for i in range(40)]), True),
    "trailing": (encode_batch([(i, b"x" * 600, f"KEYS\x01k{i} j{i}\x02{_uniq(i)}\x02") for i in range(9)]), True),
    "one": (encode_batch([(7, b"", "TAGS\x01t")]), True),
    "utf8": (encode_batch([(0, "é".encode() * 300, "TAGS\x01ü\x02KEYS\x01ß€") for _ in range(5)]), True),
    # properties lengths that change, repeat, come back and pass 1024 (the 2-byte length
    # is packed, not from the table) within one batch: the topic-and-length part is remade
    "lengths": (
        encode_batch([(i, b"v" * i, f"KEYS\x01{'k' * (i // 2 * 700 % 1500)}\x02{_uniq(i)}") for i in range(12)]),
        True,
    ),
    # equal items (an SDK batch of equal bodies: one unpack, batch_body._uniform_items), with
    # flags that differ; then equal sizes but one item's properties ending with a separator
    # (batch_items' list)
    "uniform": (encode_batch([(i % 3, b"%04d" % i * 16, _uniq(i)) for i in range(16)]), True),
    "uniform, one trailing": (encode_batch([(0, b"x" * 9, "K\x01ab"), (0, b"y" * 9, "K\x01a\x02")]), False),
    # batch_items' list: mixed last separators, empty properties, a NUL inside properties
    "mixed": (encode_batch([(1, b"a", "TAGS\x01t"), (3, b"ccc", "K\x01v\x02")]), False),
    "empty props": (encode_batch([(1, b"a", "TAGS\x01t"), (2, b"", "")]), False),
    "nul": (encode_batch([(1, b"a", "K\x01v\x00w"), (2, b"b", "K\x01v")]), False),
}


@pytest.mark.parametrize("flush", [FlushDiskType.ASYNC_FLUSH, FlushDiskType.SYNC_FLUSH])
@pytest.mark.parametrize("name", sorted(BODIES))
def test_a_checked_body_stores_what_batch_items_list_stores(tmp_path, name, flush):
    data, fast = BODIES[name]
    got = checked_body(data, HEADER, 1 << 20, "too long", "TopicA")
    assert isinstance(got, BatchBody) is fast
    items = batch_items(data, HEADER, 1 << 20, "too long", "TopicA")
    if fast:
        assert isinstance(got, BatchBody)
        assert got.strings == [props for _, _, props in items]
    stores = []
    for way in ("items", "body"):
        store = MessageStore(tiny_config(str(tmp_path / way), flush_disk_type=flush), clock=FakeClock())
        store.load()
        stores.append(store)
    a, b = stores
    for round_ in range(12):  # several 64 KiB segments for the big bodies: rolls re-encode
        t = _template(queue_id=1 + round_ % 2)
        ra = a.put_batch(t, items)
        rb = b.put_batch(t, checked_body(data, HEADER, 1 << 20, "too long", "TopicA"))
        assert ra.is_ok and rb.is_ok
        assert ra.append.batch_offsets == rb.append.batch_offsets  # type: ignore[union-attr]
        assert ra.append.logics_offset == rb.append.logics_offset  # type: ignore[union-attr]
    a.do_reput()
    b.do_reput()
    assert a.get_max_phy_offset() == b.get_max_phy_offset()
    for fa, fb in zip(a.commitlog.mfq.files, b.commitlog.mfq.files, strict=True):
        assert bytes(fa.mm[: fa.wrote_position]) == bytes(fb.mm[: fb.wrote_position])
    for q in (1, 2):
        assert pull_all(a, "TopicA", q) == pull_all(b, "TopicA", q)
    ka = a.query_message("TopicA", "k3", 10, 0, 1 << 62)
    kb = b.query_message("TopicA", "k3", 10, 0, 1 << 62)
    assert ka.messages == kb.messages
    for s in stores:
        s.close()


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"\x00\x00\x00\x05garbage",
        _item(0, b"x", b"a\x01b") + b"\x00\x00",
        _item(0, b"x", b"a\x01b") + _item(0, b"xyz", b"a\x01b", plen=2),
        _item(0, b"x", b"a\x01b") + _item(0, b"x", b"a\x01b", plen=2),  # equal sizes, one length wrong
        _item(0, b"x", b"a\x01b") * 3 + b"\x00\x00\x00\x05garb",  # equal items, then a short one
        _item(0, b"x", b"a\x01b") * 2 + _item(0, b"x", b"a\x01b", plen=3 + 256),  # a length's high byte
        _item(0, b"x", b"a\x01b") + _item(0, b"x", b"a\x01b")[:16] + b"\x01\x00\x00\x01x\x00\x03a\x01b",
        _item(0, b"x", b"a\x01b", plen=-1),
        _item(0, b"x", b"a\x01b") + _item(0, b"x", b"\xff\xfe"),
        _item(0, b"x", b"a\x01b") + _item(0, b"x", b"\x81b"),
        struct.pack(">iiiii", 30, 0, 0, 0, -5) + b"\x00" * 10,
    ],
)
def test_what_batch_items_refuses_raises_the_same_error(data):
    with pytest.raises(MessageIllegalError) as want:
        batch_items(data, HEADER, 1024, "too long", "T")
    with pytest.raises(MessageIllegalError) as got:
        checked_body(data, HEADER, 1024, "too long", "T")
    assert got.value.remark == want.value.remark


def test_stored_size_limits_are_batch_items_and_the_stores():
    one = encode_batch([(0, b"x" * 100, _uniq(0))])
    stored = 91 + 1 + 100 + len(_uniq(0)) + 1 + len(HEADER)
    assert isinstance(checked_body(one, HEADER, stored, "too long", "T"), BatchBody)
    with pytest.raises(MessageIllegalError, match="too long"):
        checked_body(one, HEADER, stored - 1, "too long", "T")
    two = encode_batch([(0, b"x" * 100, _uniq(0)), (0, b"x" * 100, _uniq(1))])
    assert isinstance(checked_body(two, HEADER, 2 * stored, "too long", "T"), BatchBody)
    with pytest.raises(MessageIllegalError, match="too long"):
        checked_body(two, HEADER, 2 * stored - 1, "too long", "T")


def test_properties_over_the_stores_limit_take_batch_items_way(tmp_path):
    """Stored properties over 32767 bytes (the item's and the header's): batch_items' list,
    which the store refuses with PROPERTIES_SIZE_EXCEEDED; a body over maxMessageSize is
    refused by the store as for a list."""
    data = encode_batch([(0, b"x", "K\x01" + "v" * (32767 - 2 - len(HEADER)))])
    got = checked_body(data, HEADER, 1 << 20, "too long", "TopicA")
    assert not isinstance(got, BatchBody)
    store = MessageStore(tiny_config(str(tmp_path / "s")), clock=FakeClock())
    store.load()
    assert store.put_batch(_template(), got).status is PutMessageStatus.PROPERTIES_SIZE_EXCEEDED
    fits = encode_batch([(0, b"x", "K\x01" + "v" * (32767 - 3 - len(HEADER)))])
    assert isinstance(checked_body(fits, HEADER, 1 << 20, "too long", "TopicA"), BatchBody)
    big = encode_batch([(0, b"x" * (store.config.max_message_size + 1), "K\x01v")])
    body = checked_body(big, HEADER, 1 << 30, "too long", "TopicA")
    assert isinstance(body, BatchBody)
    assert store.put_batch(_template(), body).status is PutMessageStatus.MESSAGE_ILLEGAL
    store.close()


@pytest.mark.parametrize(
    ("phy", "qoff"),
    [
        (0, 0),
        ((5 << 32) + 123, 7),  # CommitLog offsets with high bytes, all in one 2^32 span
        ((1 << 32) - 5000, 1),  # the batch's records cross 2^32: the general (q) prefix
        (1 << 40, (1 << 32) - 3),  # queue offsets cross 2^32
        ((1 << 62) + 17, (1 << 40) + 9),  # neither below 2^32
    ],
)
@pytest.mark.parametrize("name", ["plain", "uniform", "lengths"])
def test_encode_body_packs_offsets_as_encode_items_does(phy, qoff, name):
    """encode_body's record prefixes (offsets as their low 4 bytes when the batch's share their
    high ones, else as q) are encode_items' bytes for the same items, wherever the batch lies."""
    from pocketmq.store.log.batch_encode import encode_body, encode_items

    data, _ = BODIES[name]
    body = checked_body(data, HEADER, 1 << 20, "too long", "TopicA")
    assert isinstance(body, BatchBody)
    items = batch_items(data, HEADER, 1 << 20, "too long", "TopicA")
    head = b"\x06TopicA"
    got = encode_body(_template(), body, head, phy, qoff, 1_700_000_000_999, 1 << 20)
    want = encode_items(_template(), items, head, phy, qoff, 1_700_000_000_999, 1 << 20)
    assert not isinstance(got, int) and not isinstance(want, int)
    assert got.joined() == b"".join(want.parts)
    assert (got.sizes, got.total, got.flags) == (want.sizes, want.total, want.flags)


@pytest.mark.parametrize("name", ["uniform", "trailing", "one", "utf8"])
def test_equal_items_are_read_in_one_unpack_with_the_loops_heads(name):
    """A body of equal-sized items is read by batch_body._uniform_items: each item's (TOTALSIZE,
    FLAG, BODYLENGTH) and properties bytes, as the item-by-item loop reads them."""
    from pocketmq.broker.processor import batch_body

    data, _ = BODIES[name]
    heads, props, bodies, pos = [], [], [], 0
    while pos < len(data):
        total, _, _, flag, blen = ITEM_HEAD.unpack_from(data, pos)
        heads.append((total, flag, blen))
        bodies.append(data[pos + ITEM_HEAD.size : pos + ITEM_HEAD.size + blen])
        props.append(data[pos + ITEM_HEAD.size + blen + 2 : pos + total])
        pos += total
    trailing = data[heads[0][0] - 1] == 2
    equal = (heads[0][0], heads[0][2], tuple(flag for _, flag, _ in heads), tuple(bodies))
    got_items = batch_body._uniform_items(data, len(data), heads[0][0], trailing, 30000)
    assert got_items == (props, equal)
    got = checked_body(data, HEADER, 1 << 20, "too long", "TopicA")
    assert isinstance(got, BatchBody) and (got.item_heads(), got.props, got.equal) == (heads, props, equal)


def test_a_body_of_many_equal_items_takes_the_loop():
    """Over _UNIFORM_MAX_ITEMS equal items no Struct is made (its size grows with the items):
    the item loop reads the body, the same BatchBody."""
    from pocketmq.broker.processor import batch_body

    n = batch_body._UNIFORM_MAX_ITEMS
    for count, uniform in ((n, True), (n + 1, False)):
        data = encode_batch([(0, b"x", _uniq(i)) for i in range(count)])
        total = ITEM_HEAD.unpack_from(data)[0]
        assert (batch_body._uniform_items(data, len(data), total, False, 30000) is not None) is uniform
        got = checked_body(data, HEADER, 1 << 20, "too long", "TopicA")
        assert isinstance(got, BatchBody) and len(got.item_heads()) == count


@pytest.mark.parametrize(
    ("phy", "qoff", "one_pack"),
    [
        (0, 0, True),
        ((5 << 32) + 123, 7, True),
        ((1 << 32) - 5000, 1, False),  # the records cross 2^32: the item loop
        (1 << 40, (1 << 32) - 3, False),
    ],
)
@pytest.mark.parametrize("born_v6", [False, True])
def test_a_batch_of_equal_items_is_one_pack_of_encode_items_bytes(phy, qoff, one_pack, born_v6):
    """64 equal items of 1 KiB (the SDK's batch: the long-body CRC), flags that differ: one
    pack for the whole batch when its offsets share their high bytes, else the item
    loop's parts; the same bytes as encode_items either way, for IPv4 and IPv6 born hosts."""
    from pocketmq.store.log.batch_encode import encode_body, encode_items

    data = encode_batch([(i % 5, bytes([i]) * 1024, _uniq(i)) for i in range(64)])
    body = checked_body(data, HEADER, 1 << 20, "too long", "TopicA")
    assert isinstance(body, BatchBody) and body.equal is not None
    items = batch_items(data, HEADER, 1 << 20, "too long", "TopicA")
    t = _template()
    if born_v6:
        t.born_host = (bytes(range(16)), 4321)
    head = b"\x06TopicA"
    got = encode_body(t, body, head, phy, qoff, 1_700_000_000_999, 1 << 20)
    want = encode_items(t, items, head, phy, qoff, 1_700_000_000_999, 1 << 20)
    assert not isinstance(got, int) and not isinstance(want, int)
    assert (got.packed is not None) is one_pack
    assert got.joined() == b"".join(want.parts)
    assert (got.sizes, got.total, got.flags) == (want.sizes, want.total, want.flags)
    assert list(got.props) == want.props


def test_equal_batch_structs_are_kept_few_and_a_body_over_the_limit_is_refused():
    """Batches of many shapes (count, body length, properties length) each write encode_items'
    bytes while the Structs kept stay at _EQUAL_MAX; an equal batch whose bodies are over
    max_body is ILLEGAL."""
    from pocketmq.store.log import batch_encode

    head = b"\x06TopicA"
    for n in range(1, 2 * batch_encode._EQUAL_MAX + 3):
        data = encode_batch([(0, b"z" * (n * 37), f"K\x01{'v' * n}{i:03d}") for i in range(n)])
        body = checked_body(data, HEADER, 1 << 20, "too long", "TopicA")
        assert isinstance(body, BatchBody) and body.equal is not None
        items = batch_items(data, HEADER, 1 << 20, "too long", "TopicA")
        got = batch_encode.encode_body(_template(), body, head, 4096 * n, n, 1_700_000_000_999, 1 << 20)
        want = batch_encode.encode_items(_template(), items, head, 4096 * n, n, 1_700_000_000_999, 1 << 20)
        assert not isinstance(got, int) and not isinstance(want, int)
        assert got.packed is not None and got.joined() == b"".join(want.parts)
        assert len(batch_encode._EQUAL) <= batch_encode._EQUAL_MAX
    assert batch_encode.encode_body(_template(), body, head, 0, 0, 1, n * 37 - 1) == batch_encode.ILLEGAL


def test_equal_sizes_with_another_body_length_take_the_loop():
    """Items of one TOTALSIZE whose BODYLENGTHs differ (the properties make up for it) are not
    read as equal items: the item loop reads them, with their own heads."""
    from pocketmq.broker.processor import batch_body

    data = encode_batch([(0, b"x" * 10, "K\x01abcd"), (1, b"y" * 12, "K\x01ab"), (0, b"z" * 10, "K\x01efgh")])
    total = ITEM_HEAD.unpack_from(data)[0]
    assert batch_body._uniform_items(data, len(data), total, False, 30000) is None
    got = checked_body(data, HEADER, 1 << 20, "too long", "TopicA")
    assert isinstance(got, BatchBody) and got.equal is None
    assert got.heads == [(total, 0, 10), (total, 1, 12), (total, 0, 10)]
