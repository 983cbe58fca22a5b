"""remoting.protocol.message: golden records (built from the reference byte table), round trips,
Java hash/CRC agreement, msgIds, batches, and garbage input."""

from __future__ import annotations

import json
import pathlib
import struct
import time
import zlib

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from pocketmq.remoting.protocol import message as m
from pocketmq.remoting.protocol.message import (
    BLANK_MAGIC_CODE,
    BORNHOST_V6_FLAG,
    MESSAGE_MAGIC_CODE,
    MessageConst,
    MessageDecodeError,
    body_crc,
    create_offset_msg_id,
    create_uniq_id,
    decode_batch,
    decode_message,
    decode_messages,
    decode_offset_msg_id,
    encode_batch,
    encode_message,
    get_property,
    java_string_hash,
    properties_to_string,
    string_to_properties,
    tags_hash,
)

DATA = pathlib.Path(__file__).resolve().parents[1] / "data" / "messages"


def _naive_java_hash(s: str) -> int:
    """String.hashCode exactly as Java's loop: 31*h + c over UTF-16 code units, int32 wrap."""
    raw = s.encode("utf-16-be")
    h = 0
    for i in range(0, len(raw), 2):
        h = (31 * h + int.from_bytes(raw[i : i + 2], "big")) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def _golden(name: str) -> tuple[bytes, dict]:
    return (DATA / f"{name}.bin").read_bytes(), json.loads((DATA / f"{name}.json").read_text())


def _encode_from_fields(f: dict) -> bytes:
    return encode_message(
        topic=f["topic"],
        body=bytes.fromhex(f["body_hex"]),
        properties=f["properties"],
        queue_id=f["queue_id"],
        flag=f["flag"],
        queue_offset=f["queue_offset"],
        commit_log_offset=f["commit_log_offset"],
        sys_flag=f["sys_flag"],
        born_timestamp=f["born_timestamp"],
        born_host=(bytes.fromhex(f["born_ip_hex"]), f["born_port"]),
        store_timestamp=f["store_timestamp"],
        store_host=(bytes.fromhex(f["store_ip_hex"]), f["store_port"]),
        reconsume_times=f["reconsume_times"],
        prepared_transaction_offset=f["prepared_transaction_offset"],
    )


# ---------------------------------------------------------------- constants and hashes


def test_magic_codes_are_the_signed_java_ints():
    assert struct.pack(">i", MESSAGE_MAGIC_CODE) == bytes.fromhex("DAA320A7")
    assert struct.pack(">i", BLANK_MAGIC_CODE) == bytes.fromhex("CBD43194")
    assert MESSAGE_MAGIC_CODE == -626843481 and BLANK_MAGIC_CODE == -875286124


def test_property_keys_match_java_message_const():
    assert MessageConst.UNIQ_KEY == "UNIQ_KEY"
    assert MessageConst.WAIT == "WAIT"
    assert MessageConst.DELAY == "DELAY"
    assert MessageConst.REAL_QID == "REAL_QID"
    assert MessageConst.TRAN_MSG == "TRAN_MSG"
    assert MessageConst.CONSUME_START_TIME == "CONSUME_START_TIME"
    assert MessageConst.TRACE_ON == "TRACE_ON"


@pytest.mark.parametrize(
    ("s", "expected"),
    [
        ("", 0),
        ("TagA", 2598919),
        ("hello", 99162322),
        ("Aa", 2112),
        ("BB", 2112),  # the classic Java collision
        ("polygenelubricants", -2147483648),  # Integer.MIN_VALUE
        ("中文", 646394),  # 0x4E2D*31 + 0x6587
        ("😀", 1772899),  # surrogate pair D83D DE00: 55357*31 + 56832
    ],
)
def test_java_string_hash_known_values(s, expected):
    assert java_string_hash(s) == expected
    assert _naive_java_hash(s) == expected


@given(st.text(max_size=1500))
@settings(max_examples=300)
def test_java_string_hash_matches_the_java_loop(s):
    assert java_string_hash(s) == _naive_java_hash(s)


def test_tags_hash_is_zero_without_a_tag():
    assert tags_hash(None) == 0
    assert tags_hash("") == 0
    assert tags_hash("TagA") == 2598919


def test_body_crc_is_java_crc32_masked():
    # CRC-32/IEEE of "123456789" is 0xCBF43926; masking drops the top bit
    assert body_crc(b"123456789") == 0xCBF43926 & 0x7FFFFFFF
    assert body_crc(b"") == 0
    assert body_crc(b"Hello RocketMQ") == zlib.crc32(b"Hello RocketMQ") & 0x7FFFFFFF


# ---------------------------------------------------------------- properties


def test_properties_to_string_java_form():
    s = properties_to_string({"TAGS": "A", "KEYS": "k1 k2", "SKIP": None})  # type: ignore[dict-item]
    assert s == "TAGS\x01A\x02KEYS\x01k1 k2"
    assert properties_to_string({}) == ""


def test_string_to_properties_tolerates_trailing_separator_and_junk():
    assert string_to_properties("TAGS\x01A\x02KEYS\x01k\x02") == {"TAGS": "A", "KEYS": "k"}
    assert string_to_properties("\x02junk\x02\x01v\x02A\x01\x02B\x01x\x01y") == {"A": "", "B": "x\x01y"}
    assert string_to_properties("") == {}


def test_get_property_matches_only_whole_keys():
    s = "XKEYS\x01no\x02KEYS\x01yes\x02UNIQ_KEY\x01U"
    assert get_property(s, "KEYS") == "yes"
    assert get_property(s, "UNIQ_KEY") == "U"
    assert get_property(s, "XKEYS") == "no"
    assert get_property(s, "TAGS") is None
    assert get_property("", "TAGS") is None


@given(
    st.dictionaries(
        st.text(alphabet=st.characters(blacklist_characters="\x01\x02"), min_size=1),
        st.text(alphabet=st.characters(blacklist_characters="\x02")),
    )
)
def test_properties_round_trip(props):
    s = properties_to_string(props)
    assert string_to_properties(s) == props
    for k, v in props.items():
        assert get_property(s, k) == v


# ---------------------------------------------------------------- golden records


@pytest.mark.parametrize("name", ["record_v4", "record_born_v6", "record_utf8"])
def test_golden_record_decodes_and_reencodes_byte_identically(name):
    raw, f = _golden(name)
    msg = decode_message(raw)
    assert msg.store_size == len(raw)
    assert msg.magic == MESSAGE_MAGIC_CODE
    assert msg.body_crc == zlib.crc32(bytes.fromhex(f["body_hex"])) & 0x7FFFFFFF
    assert msg.queue_id == f["queue_id"] and msg.flag == f["flag"]
    assert msg.queue_offset == f["queue_offset"] and msg.commit_log_offset == f["commit_log_offset"]
    assert msg.sys_flag == f["sys_flag"]
    assert msg.born_timestamp == f["born_timestamp"] and msg.store_timestamp == f["store_timestamp"]
    assert msg.born_host[1] == f["born_port"] and msg.store_host[1] == f["store_port"]
    assert msg.reconsume_times == f["reconsume_times"]
    assert msg.body == bytes.fromhex(f["body_hex"])
    assert msg.topic == f["topic"]
    assert msg.properties == string_to_properties(f["properties"])
    assert _encode_from_fields(f) == raw


def test_golden_v4_field_details():
    raw, _ = _golden("record_v4")
    msg = decode_message(raw)
    assert msg.born_host == ("192.168.1.5", 53412)
    assert msg.store_host == ("10.0.0.1", 10911)
    assert msg.tags == "TagA"
    assert msg.keys == "order-1 order-2"
    assert msg.uniq_key == "7F00000100002A9F0000000000000001"
    # offset msgId = store ip + port + commit-log offset
    assert msg.msg_id == "0A00000100002A9F00000000075BCD15"
    assert len(raw) == 91 + 14 + len("TopicTest") + len(msg.properties_str.encode())


def test_golden_born_v6_layout():
    raw, _ = _golden("record_born_v6")
    msg = decode_message(raw)
    assert msg.sys_flag & BORNHOST_V6_FLAG
    assert msg.born_host == ("2001:db8::1", 53412)
    assert len(raw) == 91 + 12 + 3 + len("%RETRY%g1")
    assert msg.properties == {}


def test_decoder_triad_whole_trailing_and_concatenated():
    raws = [_golden(n)[0] for n in ("record_v4", "record_born_v6", "record_utf8")]
    body = b"".join(raws)
    msgs = decode_messages(body)
    assert [x.topic for x in msgs] == ["TopicTest", "%RETRY%g1", "主题"]
    # a record followed by trailing bytes decodes and leaves them alone
    assert decode_message(raws[0] + b"\x00garbage").store_size == len(raws[0])
    # every strict prefix is rejected with the codec's error
    for cut in range(len(raws[0])):
        with pytest.raises(MessageDecodeError):
            decode_message(raws[0][:cut])
    with pytest.raises(MessageDecodeError):
        decode_messages(body + b"\x00\x00")


def test_decode_without_body():
    raw, _ = _golden("record_v4")
    msg = decode_message(raw, read_body=False)
    assert msg.body == b"" and msg.topic == "TopicTest"


def test_decode_at_position_in_bigger_buffer():
    raw, _ = _golden("record_utf8")
    buf = b"\xff" * 13 + raw
    assert decode_message(memoryview(buf), 13).topic == "主题"
    assert decode_message(bytearray(buf), 13).body == bytes.fromhex("e4bda0e5a5bd")


@pytest.mark.parametrize(
    ("offset", "patch", "reason"),
    [
        (4, b"\x00\x00\x00\x00", "magic"),
        (0, struct.pack(">i", 10), "total size"),
        (0, struct.pack(">i", 10_000), "total size"),
        (84, struct.pack(">i", -1), "body length"),
        (84, struct.pack(">i", 1 << 30), "body length"),
    ],
)
def test_decode_rejects_inconsistent_fields(offset, patch, reason):
    raw = bytearray(_golden("record_v4")[0])
    raw[offset : offset + len(patch)] = patch
    with pytest.raises(MessageDecodeError, match=reason):
        decode_message(bytes(raw))


def test_decode_rejects_bad_topic_and_properties_lengths():
    raw = bytearray(_golden("record_v4")[0])
    topic_at = 88 + 14
    bad = bytearray(raw)
    bad[topic_at] = 0x80  # negative signed byte
    with pytest.raises(MessageDecodeError):
        decode_message(bytes(bad))
    bad = bytearray(raw)
    props_at = topic_at + 1 + len("TopicTest")
    bad[props_at : props_at + 2] = struct.pack(">h", 5)
    with pytest.raises(MessageDecodeError, match="properties length"):
        decode_message(bytes(bad))


@given(st.binary(max_size=400))
@settings(max_examples=500)
def test_random_bytes_only_raise_the_codec_error(data):
    try:
        decode_messages(data)
    except MessageDecodeError:
        pass


@given(st.binary(min_size=1, max_size=64), st.integers(0, 195))
@settings(max_examples=300)
def test_corrupted_golden_record_never_crashes(noise, at):
    raw = bytearray(_golden("record_v4")[0])
    raw[at : at + len(noise)] = noise
    try:
        msg = decode_message(bytes(raw))
    except MessageDecodeError:
        return
    assert msg.store_size <= len(raw)


@given(
    topic=st.text(min_size=1, max_size=40),
    body=st.binary(max_size=300),
    props=st.dictionaries(
        st.sampled_from(["TAGS", "KEYS", "UNIQ_KEY", "x"]), st.text(alphabet="abc 中", max_size=8)
    ),
    queue_id=st.integers(0, 2**31 - 1),
    offsets=st.tuples(st.integers(0, 2**63 - 1), st.integers(0, 2**63 - 1)),
    v6=st.booleans(),
)
def test_encode_decode_round_trip(topic, body, props, queue_id, offsets, v6):
    assume(len(topic.encode()) <= 127)
    born = (bytes(range(16)) if v6 else b"\x01\x02\x03\x04", 1234)
    raw = encode_message(
        topic=topic,
        body=body,
        properties=props,
        queue_id=queue_id,
        queue_offset=offsets[0],
        commit_log_offset=offsets[1],
        born_host=born,
        store_host=(b"\x0a\x00\x00\x02", 10911),
    )
    msg = decode_message(raw)
    assert (msg.topic, msg.body, msg.properties, msg.queue_id) == (topic, body, props, queue_id)
    assert (msg.queue_offset, msg.commit_log_offset) == offsets
    assert msg.body_crc == body_crc(body)
    assert bool(msg.sys_flag & BORNHOST_V6_FLAG) == v6


def test_encoder_rejects_oversized_topic_and_properties():
    with pytest.raises(ValueError):
        encode_message(topic="t" * 128, body=b"")
    with pytest.raises(ValueError):
        encode_message(topic="t", body=b"", properties={"k": "v" * 40000})


def test_one_prefix_struct_per_host_family():
    assert m.RECORD_PREFIX_V4.size == 88
    assert m.RECORD_PREFIX_STRUCTS[BORNHOST_V6_FLAG].size == 100
    assert m.RECORD_MIN_SIZE == 91


# ---------------------------------------------------------------- message ids


def test_offset_msg_id_round_trip_v4_and_v6():
    mid = create_offset_msg_id(b"\x0a\x00\x00\x01", 10911, 123456789)
    assert mid == "0A00000100002A9F00000000075BCD15"
    assert decode_offset_msg_id(mid) == ("10.0.0.1", 10911, 123456789)
    assert decode_offset_msg_id(mid.lower()) == ("10.0.0.1", 10911, 123456789)
    mid6 = create_offset_msg_id(bytes.fromhex("20010db8000000000000000000000001"), 10911, 5)
    assert len(mid6) == 56
    assert decode_offset_msg_id(mid6) == ("2001:db8::1", 10911, 5)


@pytest.mark.parametrize(
    "garbage", ["", "XYZ", "0A000001", "G" * 32, "0A00000100002A9F00000000075BCD1", "€" * 32]
)
def test_decode_offset_msg_id_rejects_garbage(garbage):
    with pytest.raises(ValueError):
        decode_offset_msg_id(garbage)


def test_uniq_ids_from_several_threads_are_unique():
    # create_uniq_id is called from whichever thread a client's loop runs on: each thread has
    # its own generator (one generator's counter is not safe to share), so ids never repeat
    import threading

    per_thread: list[list[str]] = [[] for _ in range(4)]

    def make(out: list[str]) -> None:
        out.extend(create_uniq_id() for _ in range(20_000))

    threads = [threading.Thread(target=make, args=(out,)) for out in per_thread]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    every = [i for out in per_thread for i in out]
    assert len(set(every)) == len(every) == 80_000
    assert len({out[0][:20] for out in per_thread}) == 4  # a prefix (random hash) per thread


def test_uniq_ids_are_unique_32_hex_with_java_layout():
    ids = {create_uniq_id() for _ in range(5000)}
    assert len(ids) == 5000
    one = next(iter(ids))
    assert len(one) == 32 and one == one.upper() and bytes.fromhex(one)
    gen = m.UniqIdGenerator(ip=b"\x0a\x00\x00\x07", pid=0x12345)
    a, b = gen.create(), gen.create()
    assert a[:8] == "0A000007" and a[8:12] == "2345"  # ip + pid low 16 bits
    assert a[:20] == b[:20]  # fixed prefix (ip, pid, hash)
    assert (int(b[-4:], 16) - int(a[-4:], 16)) % 65536 == 1  # counter
    # bytes 10..13: milliseconds since the start of the month, plausible (< 32 days)
    assert 0 <= int(a[20:28], 16) < 32 * 86_400_000


def test_pack_host_ip():
    assert m.pack_host_ip("192.168.0.1") == b"\xc0\xa8\x00\x01"
    assert m.pack_host_ip("::1") == bytes(15) + b"\x01"
    with pytest.raises(ValueError):
        m.pack_host_ip("300.1.1.1")
    with pytest.raises(ValueError):
        m.pack_host_ip("nonsense")


# ---------------------------------------------------------------- batches


def test_golden_batch_decodes_and_reencodes():
    raw = (DATA / "batch.bin").read_bytes()
    items = json.loads((DATA / "batch.json").read_text())
    decoded = decode_batch(raw)
    assert [(i.flag, i.body.hex(), i.properties_str) for i in decoded] == [
        (x["flag"], x["body_hex"], x["properties"]) for x in items
    ]
    assert encode_batch([(x["flag"], bytes.fromhex(x["body_hex"]), x["properties"]) for x in items]) == raw
    assert (
        encode_batch([(0, b"m1", {"UNIQ_KEY": "AAAA", "WAIT": "true"})])
        == raw[: struct.unpack(">i", raw[:4])[0]]
    )


@pytest.mark.parametrize(
    "mutate",
    [
        lambda b: b[:-1],  # truncated
        lambda b: b"",  # empty
        lambda b: struct.pack(">i", 5) + b[4:],  # total size below the header
        lambda b: struct.pack(">i", 10_000) + b[4:],  # total size beyond the body
        lambda b: b[:16] + struct.pack(">i", -3) + b[20:],  # negative body length
        lambda b: b[:16] + struct.pack(">i", 50) + b[20:],  # body length past the item
    ],
)
def test_decode_batch_rejects_inconsistent_items(mutate):
    raw = (DATA / "batch.bin").read_bytes()
    with pytest.raises(MessageDecodeError):
        decode_batch(mutate(raw))


@given(st.binary(max_size=200))
@settings(max_examples=400)
def test_decode_batch_random_bytes(data):
    try:
        items = decode_batch(data)
    except MessageDecodeError:
        return
    assert sum(20 + len(i.body) + 2 + len(i.properties_str.encode()) for i in items) == len(data)


class _ReferenceUniqIds:
    """UniqIdGenerator.create as it was before its counter became a cycle of hex texts (one
    %08X head per millisecond, the counter's two bytes from a table): the reference bytes."""

    def __init__(self, gen: m.UniqIdGenerator, count: int) -> None:
        self.gen, self.count = gen, count

    def create(self, now: int) -> str:
        gen = self.gen
        start = gen._start_ms
        head = f"{gen._prefix}{(now - start) & 0xFFFFFFFF:08X}"
        count, self.count = self.count, self.count + 1
        return head + m._HEX2[(count >> 8) & 0xFF] + m._HEX2[count & 0xFF]


@pytest.mark.parametrize("count", [0, 1, 0xFF, 0x100, 0x1FF, 0xFFFE, 0xFFFF, 0x10000, 0xABCD])
def test_uniq_ids_same_bytes_as_the_reference(monkeypatch, count):
    """The same ids as the reference for the same clock and counter: across the counter's low
    byte and 16-bit wraps, ms steps (one id a ms, many a ms), the ms field's high half and a
    month roll."""
    gen = m.UniqIdGenerator(ip=b"\x0a\x00\x00\x07", pid=0x12345)
    gen._count_from(count)
    ref = _ReferenceUniqIds(gen, count)
    clock = [int(time.mktime((2026, 1, 31, 23, 58, 0, 0, 0, -1)) * 1000)]
    monkeypatch.setattr(m.time, "time_ns", lambda: clock[0] * 1_000_000)
    steps = [0] * 300 + [1] * 300 + [65_000, 1, 600, 0, 0, 1] * 40 + [120_000, 0, 0, 1] + [0] * 600
    for step in steps:
        clock[0] += step
        uid = gen.create()
        assert gen.last_ms == clock[0]
        assert uid == ref.create(clock[0]), (step, clock[0])
    assert gen._start_ms == int(time.mktime((2026, 2, 1, 0, 0, 0, 0, 0, -1)) * 1000)  # rolled



@pytest.mark.parametrize("joined", [False, True])
@pytest.mark.parametrize("count", [0, 1, 0xFE, 0xFF, 0xFFFF, 0xABCD])
def test_uniq_create_many_same_texts_as_the_reference(monkeypatch, count, joined):
    """A batch's ids (create_many, or create_text's comma-joined text): the reference's texts
    for the clock read at the start and again at each low-byte wrap of the counter (the clock
    moving 3 ms a read), across 16-bit wraps too."""
    gen = m.UniqIdGenerator(ip=b"\x0a\x00\x00\x07", pid=0x12345)
    gen._count_from(count)
    ref = _ReferenceUniqIds(gen, count)
    clock = [int(time.mktime((2026, 3, 5, 10, 0, 0, 0, 0, -1)) * 1000)]
    reads: list[int] = []

    def tick() -> int:
        clock[0] += 3
        reads.append(clock[0])
        return clock[0] * 1_000_000

    monkeypatch.setattr(m.time, "time_ns", tick)
    c = count
    for n in (1, 5, 300, 1000):
        reads.clear()
        text = gen.create_text(n) if joined else None
        ids = text.split(",") if text is not None else gen.create_many(n)
        expected, j = [], 0
        for _ in range(n):
            if c & 0xFF == 0:  # a low-byte wrap: the clock read again
                j += 1
            expected.append(ref.create(reads[j]))
            c += 1
        assert ids == expected
        assert j == len(reads) - 1 and gen.last_ms == reads[-1]
        assert len(set(ids)) == n
        if text is not None:  # create_text: the ids as one comma-joined text
            assert text == ",".join(expected)
