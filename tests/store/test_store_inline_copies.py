"""Every hot-path inline copy in the store against the reference it copies.

The copies carry a one-line marker ``# inline of <module>.<function>``; this file checks the
derived record layout (``log.layout``) against ``RECORD_PREFIX_STRUCTS``, the index key hash
copies (``index.hash``, ``index.scan``) against ``topic_key_hash``, and the record prefix packs
(``CommitLog.put_message``, ``message_batch.encode_messages``, ``batch_encode``) against
``encode_message``. The reput copies (``dispatch.appended``) are compared with the decoding
path in test_store_fastpaths.py.
"""

from __future__ import annotations

import mmap
import pathlib
import re
import struct

import pytest

from pocketmq.remoting.protocol.message import (
    BORNHOST_V6_FLAG,
    RECORD_PREFIX_STRUCTS,
    TRANSACTION_PREPARED_TYPE,
    TRANSACTION_ROLLBACK_TYPE,
    MessageConst,
    encode_message,
    get_property,
    properties_to_string,
)
from pocketmq.store import MessageInner, MessageStore
from pocketmq.store.index.hash import topic_key_hash, topic_key_hashes
from pocketmq.store.index.scan import KeyHashCache, scan_keys
from pocketmq.store.log.batch_encode import ILLEGAL, TOO_LONG_PROPS, Encoded, encode_bodies, encode_items
from pocketmq.store.log.layout import (
    PUT_PREFIX_STRUCTS,
    RECORD_FIELD_INDEX,
    RECORD_INDEX_WALK_V4,
    RECORD_SCAN_V4,
    STORE_STAMP,
    STORE_TAIL_STRUCTS,
    STORE_TIMESTAMP_AT,
    SYSFLAG_AT,
    record_fields,
    record_offset,
    record_struct,
)

from .conftest import FakeClock, tiny_config

V4 = (b"\x0a\x00\x00\x01", 10911)
V6 = (bytes(range(16)), 40001)
HOSTS = [(V4, V4), (V6, V4), (V4, V6), (V6, V6)]
KEYS = ["order-1", "a", "ab", "键-é", "emoji-\U0001f600", "\U0001f600x", "k1  k2 k3", "", "x" * 40]
STORE_ROOT = pathlib.Path(__file__).parents[2] / "store"


# ---------------------------------------------------------------------------- record layout


@pytest.mark.parametrize("flags", list(RECORD_PREFIX_STRUCTS))
def test_record_field_table_is_the_protocols_prefix(flags):
    assert ">" + "".join(code for _, code in record_fields(flags)) == RECORD_PREFIX_STRUCTS[flags].format
    offsets = [record_offset(name, flags) for name, _ in record_fields(flags)]
    assert offsets == sorted(offsets) and offsets[0] == 0
    assert record_offset("BODYLENGTH", flags) + 4 == RECORD_PREFIX_STRUCTS[flags].size


def test_skipping_structs_read_the_named_fields_of_a_record():
    raw = encode_message(
        topic="T", body=b"body", properties="a\x01b", queue_id=3, flag=5, queue_offset=7,
        commit_log_offset=11, sys_flag=TRANSACTION_PREPARED_TYPE, born_timestamp=13,
        store_timestamp=17, reconsume_times=19, prepared_transaction_offset=23, body_crc_value=29,
    )  # fmt: skip
    full = RECORD_PREFIX_STRUCTS[0].unpack_from(raw)
    for st, names in (
        (RECORD_SCAN_V4, ["TOTALSIZE", "MAGICCODE", "BODYCRC", "QUEUEID", "QUEUEOFFSET", "PHYSICALOFFSET",
                          "SYSFLAG", "STORETIMESTAMP", "PREPARED_TRANSACTION_OFFSET", "BODYLENGTH"]),
        (RECORD_INDEX_WALK_V4, ["TOTALSIZE", "MAGICCODE", "SYSFLAG", "STORETIMESTAMP", "BODYLENGTH"]),
    ):  # fmt: skip
        assert st.size == RECORD_PREFIX_STRUCTS[0].size
        assert st.unpack_from(raw) == tuple(full[RECORD_FIELD_INDEX[n]] for n in names)
    # the structs the scans used before they were derived: the same bytes read
    assert struct.calcsize(RECORD_INDEX_WALK_V4.format) == struct.calcsize(">ii28xi16xq20xi")
    assert RECORD_INDEX_WALK_V4.format == ">ii28xi16xq20xi"
    assert record_struct("TOTALSIZE").format == ">i84x"


@pytest.mark.parametrize(("born", "store"), HOSTS)
def test_store_timestamp_offsets(born, store, tmp_path):
    raw = encode_message(topic="T", body=b"x", born_host=born, store_host=store, store_timestamp=123456789)
    flags = int.from_bytes(raw[SYSFLAG_AT : SYSFLAG_AT + 4], "big")
    at = STORE_TIMESTAMP_AT[flags & BORNHOST_V6_FLAG]
    assert int.from_bytes(raw[at : at + 8], "big") == 123456789
    s = MessageStore(tiny_config(str(tmp_path)), clock=FakeClock())
    s.load()
    try:
        r = s.put_message(MessageInner(topic="T", body=b"x", born_host=born, store_host=store))
        assert r.append is not None
        assert s.commitlog.pickup_store_timestamp(r.append.wrote_offset) == r.append.store_timestamp
    finally:
        s.close()


# ---------------------------------------------------------------------------- index key hash


def test_topic_key_hashes_inline_equals_topic_key_hash():
    for topic in ("TopicA", "主题"):
        for _ in range(2):  # cold tables, then warm
            for uniq in (None, "", "UNIQ0001", "u"):
                for keys in KEYS + [None]:
                    expected = [topic_key_hash(topic, uniq)] if uniq else []
                    expected += [topic_key_hash(topic, k) for k in (keys or "").split(" ") if k]
                    assert topic_key_hashes(topic, uniq, keys) == expected


def _records(topic: str) -> tuple[bytes, list[int], list[int]]:
    """Records with UNIQ_KEY/KEYS in every position and host family, and the index hashes
    (``topic_key_hash`` of what ``get_property`` finds) reput would write for them."""
    out: list[bytes] = []
    hashes: list[int] = []
    phys: list[int] = []
    pos = 0
    variants: list[str] = []
    for k in KEYS:
        variants += [
            properties_to_string({MessageConst.UNIQ_KEY: f"UNIQ{k}", MessageConst.KEYS: k}),
            properties_to_string({MessageConst.KEYS: k, "a": "b", MessageConst.UNIQ_KEY: f"{k}U"}),
            properties_to_string({"XKEYS": "no", MessageConst.TAGS: "t", MessageConst.KEYS: k}),
            properties_to_string({"XUNIQ_KEY": "no"}),
        ]
    variants += ["", "KEYS\x01", "UNIQ_KEY\x01\x02KEYS\x01 "]
    for i, props in enumerate(variants):
        born, store = HOSTS[i % 4]
        sys_flag = TRANSACTION_ROLLBACK_TYPE if i % 7 == 3 else 0
        raw = encode_message(
            topic=topic, body=b"b" * (i % 5), properties=props, born_host=born, store_host=store,
            sys_flag=sys_flag, commit_log_offset=pos, store_timestamp=1000 + i,
        )  # fmt: skip
        if props and not sys_flag:
            uniq = get_property(props, MessageConst.UNIQ_KEY)
            keys = get_property(props, MessageConst.KEYS)
            for k in ([uniq] if uniq else []) + [k for k in (keys or "").split(" ") if k]:
                hashes.append(topic_key_hash(topic, k))
                phys.append(pos)
        out.append(raw)
        pos += len(raw)
    return b"".join(out), hashes, phys


@pytest.mark.parametrize("prefill", [True, False])
@pytest.mark.parametrize("topic", ["TopicA", "主题"])
def test_index_scan_inline_hash_equals_topic_key_hash(prefill, topic):
    data, expected, expected_phys = _records(topic)
    mm = mmap.mmap(-1, len(data) + 8)
    try:
        mm[: len(data)] = data
        cache = KeyHashCache()
        if prefill:
            cache.prefill()
        for _ in range(2):  # misses fill the cache, then the inline path hits
            hashes: list[int] = []
            phys: list[int] = []
            tss: list[int] = []
            end, _ts = scan_keys(mm, 0, 0, len(data), cache, hashes, phys, tss)
            assert end == len(data)
            assert hashes == expected
            assert phys == expected_phys
    finally:
        mm.close()


# ---------------------------------------------------------------------------- record prefix pack


def _msg(i: int, born, store, sys_flag: int = 0) -> MessageInner:
    return MessageInner(
        topic="TopicP", body=bytes([i]) * (i * 37 % 700), queue_id=2, flag=i, sys_flag=sys_flag,
        properties={MessageConst.KEYS: f"k{i}", "n": str(i)}, born_timestamp=1_700_000_000_000 + i,
        born_host=born, store_host=store, reconsume_times=i % 3,
        prepared_transaction_offset=i * 1000 if sys_flag else 0,
    )  # fmt: skip


def _reference(m: MessageInner, qoff: int, phy: int, now: int) -> bytes:
    return encode_message(
        topic=m.topic, body=bytes(m.body), properties=m.properties_string(), queue_id=m.queue_id,
        flag=m.flag, queue_offset=qoff, commit_log_offset=phy, sys_flag=m.sys_flag,
        born_timestamp=m.born_timestamp, born_host=m.born_host, store_timestamp=now,
        store_host=m.store_host, reconsume_times=m.reconsume_times,
        prepared_transaction_offset=m.prepared_transaction_offset,
    )  # fmt: skip


@pytest.mark.parametrize("path", ["put_message", "batch", "mixed", "items", "run"])
@pytest.mark.parametrize(("born", "store"), HOSTS)
def test_record_prefix_packs_equal_encode_message(path, born, store, tmp_path):
    clock = FakeClock()
    s = MessageStore(tiny_config(str(tmp_path), mapped_file_size_commit_log=1 << 20), clock=clock)
    s.load()
    try:
        s.put_message(_msg(0, V4, V4))  # every path starts mid-segment
        msgs = [_msg(i, born, store) for i in range(1, 8)]
        if path == "put_message":
            results = [s.put_message(m) for m in msgs]
        elif path == "run":  # IPv4 hosts only: put_run refuses others (its callers put them singly)
            start = s.get_max_phy_offset()
            if s.put_run(msgs):
                _check_records(s, msgs, start, 1, clock.now)
            else:
                assert (born, store) != (V4, V4) and s.get_max_phy_offset() == start
            return
        elif path == "batch":
            results = [s.put_messages(msgs)]
        elif path == "mixed":  # hosts and sysFlag differ from the first record on
            msgs[3] = _msg(4, V4 if born is V6 else V6, store)
            msgs[5] = _msg(6, born, store, TRANSACTION_PREPARED_TYPE)
            results = [s.put_messages(msgs)]
        else:  # items share the template's born time and reconsume times
            for m in msgs:
                m.born_timestamp, m.reconsume_times = msgs[0].born_timestamp, msgs[0].reconsume_times
            items = [(m.flag, memoryview(bytes(m.body)), m.properties_string()) for m in msgs]
            results = [s.put_batch(msgs[0], items)]
        assert all(r.is_ok for r in results)
        assert results[0].append is not None
        _check_records(s, msgs, results[0].append.wrote_offset, results[0].append.logics_offset, clock.now)
    finally:
        s.close()


def _check_records(s: MessageStore, msgs: list[MessageInner], phy: int, qoff: int, now: int) -> None:
    """``msgs`` stored from ``phy`` on (queue offsets from ``qoff``) as ``encode_message`` encodes them."""
    for q, m in enumerate(msgs, qoff):
        expected = _reference(m, q, phy, now)
        assert s.get_message_bytes_by_offset(phy) == expected
        phy += len(expected)
    assert phy == s.get_max_phy_offset()


def test_every_inline_marker_names_a_reference_that_exists():
    """``# inline of <module>.<function>`` (or ``<module>.<Class>.<method>``) names something
    that exists; modules are relative to ``pocketmq.store`` unless they start with ``remoting``."""
    import importlib

    pattern = re.compile(r"# inline of ([\w.]+)")
    found = 0
    for path in STORE_ROOT.rglob("*.py"):
        for ref in pattern.findall(path.read_text()):
            parts = ref.split(".")
            root = "pocketmq" if parts[0] == "remoting" else "pocketmq.store"
            for cut in range(len(parts) - 1, 0, -1):  # the longest importable module prefix
                try:
                    obj = importlib.import_module(".".join([root, *parts[:cut]]))
                except ModuleNotFoundError:
                    continue
                for attr in parts[cut:]:
                    obj = getattr(obj, attr)
                assert callable(obj), (path, ref)
                break
            else:
                raise AssertionError((path, ref))
            found += 1
    assert found >= 16


def test_put_time_inline_is_the_store_clock(tmp_path):
    """With the default clock (``clock.now_ms``) the CommitLog reads the time itself."""
    from pocketmq.store.clock import now_ms

    s = MessageStore(tiny_config(str(tmp_path)))
    s.load()
    try:
        before = now_ms()
        results = [
            s.put_message(_msg(1, V4, V4)),
            s.put_messages([_msg(2, V4, V4)]),
            s.put_batch(_msg(3, V4, V4), [(0, b"x", "")]),
        ]
        after = now_ms()
        for r in results:
            assert r.append is not None and before <= r.append.store_timestamp <= after
    finally:
        s.close()


# ---------------------------------------------------------------------------- index entry time


@pytest.mark.parametrize("how", ["put_entries", "put_hashes"])
def test_index_time_diff_inlines_equal_time_diff(how, tmp_path):
    """Entries before the file's begin time, within it and past Integer.MAX_VALUE seconds
    carry ``time_diff``'s value whichever writer put them."""
    from pocketmq.store.index.file import IndexFile, time_diff

    begin = 1_700_000_000_000
    stamps = [begin, begin - 5000, begin + 1999, begin + (0x7FFFFFFF + 10) * 1000, begin + 61_000]
    files = {}
    for name in ("ref", how):
        f = IndexFile(str(tmp_path / name), 8, 64, create=True)
        f.put_hashed(7, 100, begin)  # the first entry sets beginTimestamp
        for k, ts in enumerate(stamps):
            hashes, phy = [k * 3 + 1, k * 3 + 2], 1000 + k
            if name == "ref":
                for h in hashes:
                    assert f.put_hashed(h, phy, ts)
            elif how == "put_entries":
                assert f.put_entries(hashes, phy, ts) == 2
            else:
                assert f.put_hashes(hashes, [phy, phy], [ts, ts])
        f.write_header()
        files[name] = bytes(f.mf.mm)
        f.mf.close()
    assert files["ref"] == files[how]
    assert [time_diff(ts, begin) for ts in stamps] == [0, 0, 1, 0x7FFFFFFF, 61]
    assert time_diff(begin, 0) == 0


def test_index_put_hashes_of_mixed_times_equals_put_hashed(tmp_path):
    """One ``put_hashes`` run whose store times cross seconds, go back and clamp writes what
    ``put_hashed`` per entry writes (its timeDiffs are computed once per run when they agree)."""
    from tests.store.test_store_index import index_bytes

    begin = 1_700_000_000_000
    runs = [
        [begin + 10, begin + 20, begin + 999],  # one second: one timeDiff for all
        [begin + 1500, begin + 900, begin + 2100, begin - 5000, begin + (0x7FFFFFFF + 10) * 1000],
        # in order within one second (first and last agree: one timeDiff), out of order within
        # one, in order across two, in order before the begin time (clamped), past the clamp
        [begin + 3000, begin + 3001, begin + 3001, begin + 3500, begin + 3999],
        [begin + 4100, begin + 4000, begin + 4999],
        [begin + 5999, begin + 6000, begin + 6001],
        [begin + 6500, begin + 6999, begin + 6999, begin + 6998, begin + 6999],
        [begin - 3000, begin - 2500],
        [begin + (0x7FFFFFFF + 10) * 1000, begin + (0x7FFFFFFF + 10) * 1000 + 1],
    ]
    written = [
        (
            [r * 100 + k * 7 + 1 for k in range(len(stamps))],
            [1000 * (r + 1) + k for k in range(len(stamps))],
            stamps,
        )
        for r, stamps in enumerate(runs)
    ]
    # the first entry sets beginTimestamp
    ref = index_bytes(str(tmp_path / "ref"), 8, 64, (7, 100, begin), written, True)
    assert ref == index_bytes(str(tmp_path / "run"), 8, 64, (7, 100, begin), written, False)


def test_batch_items_sharing_one_properties_string_encode_as_encode_message(tmp_path):
    """``encode_items`` encodes a properties string object once for the items that share it
    (op records): every record still carries it whole, as ``encode_message`` encodes it."""
    clock = FakeClock()
    s = MessageStore(tiny_config(str(tmp_path), mapped_file_size_commit_log=1 << 20), clock=clock)
    s.load()
    try:
        s.put_message(_msg(0, V4, V4))
        shared = properties_to_string({"TAGS": "d", "n": "é"})
        msgs = [_msg(i, V4, V4) for i in range(1, 6)]
        for k, m in enumerate(msgs):
            m.properties = shared if k != 2 else properties_to_string({"x": "y"})
            m.born_timestamp, m.reconsume_times = msgs[0].born_timestamp, msgs[0].reconsume_times
        result = s.put_batch(msgs[0], [(m.flag, m.body, m.properties) for m in msgs])
        assert result.append is not None
        _check_records(s, msgs, result.append.wrote_offset, result.append.logics_offset, clock.now)
    finally:
        s.close()


@pytest.mark.parametrize(("born", "store"), HOSTS)
def test_encode_bodies_encodes_as_encode_items(born, store):
    """``encode_bodies`` (END_TRANSACTION's op records: the template's flag and properties)
    writes the bytes ``encode_items`` writes for the same ``(flag, body, properties)`` items."""
    head = b"\x05TopXq"
    props = properties_to_string({"TAGS": "d", "n": "é"})
    template = MessageInner("TopXq", b"", 3, 7, props, 0, 1_700_000_000_123, born, store, 2)
    for bodies in ([b"%d" % n for n in (0, 9, 10, 123456789012)], [b"x" * 600, b"y" * 512], [b""]):
        got = encode_bodies(template, bodies, head, 1 << 33, 41, 1_700_000_000_456, 1 << 20)
        want = encode_items(
            template, [(7, b, props) for b in bodies], head, 1 << 33, 41, 1_700_000_000_456, 1 << 20
        )
        assert isinstance(got, Encoded) and isinstance(want, Encoded)
        assert b"".join(got.parts) == b"".join(want.parts)
        assert (got.sizes, got.props, got.total, got.flags) == (
            want.sizes,
            want.props,
            want.total,
            want.flags,
        )
    assert encode_bodies(template, [b"x" * 11], head, 0, 0, 1, 10) == ILLEGAL
    template.properties = "a\x01" + "b" * 40000
    assert encode_bodies(template, [b"1"], head, 0, 0, 1, 10) == TOO_LONG_PROPS


@pytest.mark.parametrize(
    ("phy", "qoff"),
    [
        (0, 0),
        ((1 << 32) - 300, 5),  # a run that may cross 2^32: the general struct
        ((1 << 32) - (1 << 21), 5),  # below the bound: the low struct, high bytes 0
        (1 << 32, (1 << 32) - 2),  # queue offsets past 2^32 - 1: the general struct
        ((7 << 32) + 12345, (1 << 32) - 6),  # the low struct, high bytes 7
        ((1 << 62) + 99, 1 << 40),
    ],
)
def test_encode_bodies_offsets_near_2_to_the_32_encode_as_encode_items(phy, qoff):
    """``encode_bodies`` packs the offsets' low 4 bytes as ``I`` when the run allows: the same
    bytes as ``encode_items``' ``q`` fields at any offset, a run crossing 2^32 included."""
    head = b"\x05TopXq"
    props = properties_to_string({"TAGS": "d"})
    template = MessageInner("TopXq", b"", 0, 0, props, 0, 1_700_000_000_123, V4, V4, 0)
    bodies = [b"%d" % n for n in range(100, 105)]
    got = encode_bodies(template, bodies, head, phy, qoff, 1_700_000_000_456, 1 << 10)
    want = encode_items(
        template, [(0, b, props) for b in bodies], head, phy, qoff, 1_700_000_000_456, 1 << 10
    )
    assert isinstance(got, Encoded) and isinstance(want, Encoded)
    assert b"".join(got.parts) == b"".join(want.parts)
    assert (got.sizes, got.total) == (want.sizes, want.total)


@pytest.mark.parametrize("where", ["same segment", "older segment"])
@pytest.mark.parametrize(("born", "store"), [*HOSTS, ((b"\x0b\x01\x02\x03", 4242), V4)])
def test_put_run_copies_encode_as_encode_message(where, born, store, tmp_path):
    """``put_run``'s ``copies`` (END_TRANSACTION's committed copies of halves ``put_message``
    stored) are the records ``encode_message`` makes of the copy: the half's body, flag,
    properties, hosts, born time and reconsume times, the real topic and queue, sysFlag's
    transaction type COMMIT, PREPARED_TRANSACTION_OFFSET the half's offset. A half in the
    current segment gives its magic code and body CRC bytes; one in an older segment has them
    computed (short and long bodies: both CRC functions); the born and store hosts of a half
    in the current segment are its record's bytes (distinct hosts and ports, reconsume times
    and born times: a field read from the wrong place differs). IPv6 hosts: refused, nothing
    written."""
    clock = FakeClock()
    s = MessageStore(tiny_config(str(tmp_path)), clock=clock)
    s.load()
    try:
        s.put_message(_msg(0, V4, V4))
        halves, offsets = [], []
        for i in (1, 2, 14, 15):  # bodies of 37, 74, 518 and 555 bytes
            half = _msg(i, born, store, TRANSACTION_PREPARED_TYPE)
            half.topic, half.queue_id = "RMQ_SYS_TRANS_HALF_TOPIC", 0
            half.properties = half.properties_string() + "\x02REAL_TOPIC\x01TopicC\x02REAL_QID\x011"
            result = s.put_message(half)
            assert result.append is not None
            halves.append(half)
            offsets.append(result.append.wrote_offset)
        first_segment = s.commitlog.mfq.files[-1]
        if where == "older segment":
            while s.commitlog.mfq.files[-1] is first_segment:
                s.put_message(_msg(3, V4, V4))
        copies = [
            (h, h.properties, "TopicC", 1 + k % 2, o)
            for k, (h, o) in enumerate(zip(halves, offsets, strict=True))
        ]
        start = s.get_max_phy_offset()
        entries = s.put_run((), copies=copies)  # type: ignore[arg-type]
        if len(born[0]) != 4 or len(store[0]) != 4:
            assert entries is None and s.get_max_phy_offset() == start
            return
        assert entries is not None and len(entries) == len(copies)
        phy, next_qoff = start, {1: 0, 2: 0}
        for (half, props, topic, queue_id, offset), got in zip(copies, entries, strict=True):
            expected = encode_message(
                topic=topic, body=bytes(half.body), properties=props, queue_id=queue_id, flag=half.flag,
                queue_offset=next_qoff[queue_id], commit_log_offset=phy,
                sys_flag=(half.sys_flag & ~TRANSACTION_ROLLBACK_TYPE) | 8, born_timestamp=half.born_timestamp,
                born_host=half.born_host, store_timestamp=clock.now, store_host=half.store_host,
                reconsume_times=half.reconsume_times, prepared_transaction_offset=offset,
            )  # fmt: skip
            assert s.get_message_bytes_by_offset(phy) == expected
            assert got[:5] == (phy, len(expected), topic, queue_id, next_qoff[queue_id])
            next_qoff[queue_id] += 1
            phy += len(expected)
        assert phy == s.get_max_phy_offset()
    finally:
        s.close()


@pytest.mark.parametrize("flags", list(RECORD_PREFIX_STRUCTS))
def test_put_prefix_with_the_store_tail_packs_the_records_prefix(flags):
    """``PUT_PREFIX_STRUCTS`` (STORETIMESTAMP to PREPARED_TRANSACTION_OFFSET as one part) pack
    the bytes ``RECORD_PREFIX_STRUCTS`` pack from the fields one by one."""
    store_ip = bytes(range(1, 17)) if flags & 0x20 else b"\x0a\x00\x00\x02"
    born_ip = bytes(range(20, 36)) if flags & BORNHOST_V6_FLAG else b"\x0a\x00\x00\x01"
    head = (-1, 2, 0x7FFFFFFF, 3, -4, 2**40 + 5, 2**33 + 6, flags, 2**41 + 7, born_ip, 65535)
    tail = STORE_STAMP.pack(2**42 + 8) + STORE_TAIL_STRUCTS[len(store_ip)].pack(store_ip, 10911, 16, -(2**50))
    expected = RECORD_PREFIX_STRUCTS[flags].pack(*head, 2**42 + 8, store_ip, 10911, 16, -(2**50), 1024)
    assert PUT_PREFIX_STRUCTS[flags].pack(*head, tail, 1024) == expected
    assert PUT_PREFIX_STRUCTS[flags].size == RECORD_PREFIX_STRUCTS[flags].size


@pytest.mark.parametrize("flush", ["ASYNC_FLUSH", "SYNC_FLUSH"])
def test_put_message_store_tail_cache_follows_each_puts_fields(flush, tmp_path):
    """put_message keeps the last IPv4 store host's tail (reconsume times and prepared offset 0):
    records stay encode_message's when the host changes (another tuple, an equal one, IPv6, an
    address of odd length), when reconsume times or the prepared offset are set, and back."""
    clock = FakeClock()
    s = MessageStore(tiny_config(str(tmp_path), flush_disk_type=flush, mapped_file_size_commit_log=1 << 20), clock=clock)  # fmt: skip
    s.load()
    other = (b"\x0a\x00\x00\x09", 10912)
    try:
        msgs = []
        for i, store in enumerate(
            [V4, V4, (bytes(V4[0]), V4[1]), other, V6, V4, b"\x01\x02\x03\x04\x05", V4, other, V4]
        ):
            for reconsume, prepared, sys_flag in (
                (0, 0, 0),
                (2, 0, 0),
                (0, 77, TRANSACTION_ROLLBACK_TYPE),
                (0, 0, 0),
            ):
                m = _msg(i + 1, V4, store if isinstance(store, tuple) else (store, 7), sys_flag)
                m.reconsume_times, m.prepared_transaction_offset = reconsume, prepared
                msgs.append(m)
        start = s.get_max_phy_offset()
        results = [s.put_message(m) for m in msgs]
        assert all(r.is_ok for r in results)
        phy = start
        for m, r in zip(msgs, results, strict=True):
            expected = _reference(m, r.append.logics_offset, phy, clock.now)
            assert s.get_message_bytes_by_offset(phy) == expected
            assert r.append.store_host is m.store_host
            phy += len(expected)
    finally:
        s.close()


def test_put_message_sys_flags_table_and_past_it(tmp_path):
    """put_message's sysFlag table (0-255) and the values past it (negative, >= 256) clear
    the host bits of IPv4 records and count the queue offset of all but prepared and
    rolled-back records, as encode_message and RocketMQ do."""
    clock = FakeClock()
    s = MessageStore(tiny_config(str(tmp_path), mapped_file_size_commit_log=1 << 20), clock=clock)
    s.load()
    try:
        flags = [0, 0x30, 0x4, 0x8, 0xC, 0xFF, 0x134, 0x108, 1 << 40, -1, -5, 0x3, 0]
        msgs = [_msg(i + 1, V4, V4, f) for i, f in enumerate(flags)]
        for m in msgs:
            m.prepared_transaction_offset = 0
        phy, qoff = s.get_max_phy_offset(), 0
        for m, f in zip(msgs, flags, strict=True):
            if f == 1 << 40:  # not an int32: refused by pack_into, nothing written
                with pytest.raises(struct.error):
                    s.put_message(m)
                continue
            r = s.put_message(m)
            counted = (f & 0xC) not in (0x4, 0xC)
            expected = _reference(m, qoff if counted else 0, phy, clock.now)
            assert r.append.logics_offset == (qoff if counted else 0)
            assert s.get_message_bytes_by_offset(phy) == expected
            qoff += counted
            phy += len(expected)
        assert s.get_max_phy_offset() == phy
    finally:
        s.close()


@pytest.mark.parametrize("flush", ["ASYNC_FLUSH", "SYNC_FLUSH"])
def test_put_message_store_timestamp_packed_once_a_millisecond(flush, tmp_path, monkeypatch):
    """With the system clock, put_message packs STORETIMESTAMP with the store tail once a
    millisecond: puts within one ms share it, the next ms, a step back of the clock and another
    store host restamp; every record stays encode_message's and carries its put's ms."""
    from pocketmq.store.log import commitlog as commitlog_mod

    s = MessageStore(tiny_config(str(tmp_path), flush_disk_type=flush, mapped_file_size_commit_log=1 << 20))
    s.load()
    base = 1_764_290_000_123 * 1_000_000
    readings = iter(
        [base, base + 1, base + 999_999, base + 1_000_000, base + 1_500_000, base - 1, base - 1_000_001,
         base + 7, base + 8, base + 5_000_000, base + 5_000_001]
    )  # fmt: skip
    now_ns = [0]

    def fake_ns() -> int:
        now_ns[0] = next(readings)
        return now_ns[0]

    monkeypatch.setattr(commitlog_mod, "_time_ns", fake_ns)
    other = (b"\x0a\x00\x00\x09", 10912)
    try:
        start = phy = s.get_max_phy_offset()
        hosts = [V4, V4, V4, V4, V4, V4, V4, other, other, V4, V4]
        for i, host in enumerate(hosts):
            m = _msg(i + 1, V4, host, 0)
            m.reconsume_times = m.prepared_transaction_offset = 0
            r = s.put_message(m)
            assert r.is_ok
            ms = now_ns[0] // 1_000_000
            assert r.append.store_timestamp == ms
            expected = _reference(m, r.append.logics_offset, phy, ms)
            assert s.get_message_bytes_by_offset(phy) == expected
            phy += len(expected)
        assert phy > start
    finally:
        s.close()
