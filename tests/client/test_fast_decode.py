from __future__ import annotations

import pytest

from pocketmq.client.consumer.fast_decode import PulledMessageExt, decode_pull_body
from pocketmq.remoting.protocol.message import MessageDecodeError, decode_messages, encode_message


def fields(msgs):
    return [
        (m.store_size, m.magic, m.body_crc, m.queue_id, m.flag, m.queue_offset, m.commit_log_offset, m.sys_flag,
         m.born_timestamp, m.born_host, m.store_timestamp, m.store_host, m.reconsume_times,
         m.prepared_transaction_offset, m.body, m.topic, m.properties_str, m.msg_id)
        for m in msgs
    ]  # fmt: skip


def sample() -> bytes:
    recs = [
        encode_message(topic="T", body=b"a" * 10, queue_offset=1, commit_log_offset=2**40, properties={"TAGS": "x"},
                       born_host=(b"\x0a\x00\x00\x01", 5555), store_host=(b"\xc0\xa8\x01\x02", 10911)),
        encode_message(topic="Tö", body=b"", queue_offset=2, properties="K\x01v\x02"),
        encode_message(topic="T6", body=b"v6", born_host=(b"\x00" * 15 + b"\x01", 1), store_host=(b"\x7f\x00\x00\x01", 2)),
        encode_message(topic="T", body=b"z" * 3000, reconsume_times=3, sys_flag=1, flag=-7),
    ]  # fmt: skip
    return b"".join(recs)


def test_same_result_as_the_shared_decoder() -> None:
    body = sample()
    assert fields(decode_pull_body(body)) == fields(decode_messages(body))
    assert fields(decode_pull_body(body)) == fields(decode_messages(body))  # caches warm
    assert decode_pull_body(b"") == []


@pytest.mark.parametrize("cut", [1, 8, 50, 95, -1])
def test_truncated_or_garbage_raises(cut: int) -> None:
    body = sample()
    with pytest.raises(MessageDecodeError):
        decode_pull_body(body[:cut] if cut > 0 else body + b"\x00\x00\x00\x10junk")
    bad = bytearray(body)
    bad[4] ^= 0xFF  # magic
    with pytest.raises(MessageDecodeError):
        decode_pull_body(bytes(bad))


def test_values_that_change_between_records() -> None:
    # The decoder reuses the previous record's topic/hosts when they repeat: alternate them.
    hosts = [(b"\x0a\x00\x00\x01", 5555), (b"\x0a\x00\x00\x02", 5555), (b"\x0a\x00\x00\x02", 6666)]
    recs = [
        encode_message(
            topic=("A", "BB", "A", "")[i % 4], body=b"%d" % i, queue_offset=i, commit_log_offset=(i << 33) + 7,
            born_host=hosts[i % 3], store_host=hosts[(i // 2) % 3], properties={"UNIQ_KEY": f"U{i}"},
        )
        for i in range(24)
    ]  # fmt: skip
    body = b"".join(recs)
    assert fields(decode_pull_body(body)) == fields(decode_messages(body))
    assert fields(decode_pull_body(body)) == fields(decode_messages(body))


def test_inflate_compressed_bodies_on_both_paths() -> None:
    import zlib

    v6 = (b"\x00" * 15 + b"\x01", 1)
    body = b"".join(
        [
            encode_message(topic="T", body=zlib.compress(b"fast" * 100), sys_flag=1, queue_offset=1),
            encode_message(
                topic="T", body=zlib.compress(b"slow" * 100), sys_flag=1, born_host=v6, queue_offset=2
            ),
            encode_message(topic="T", body=b"plain", queue_offset=3),
        ]
    )
    assert [m.body for m in decode_pull_body(body, inflate=True)] == [b"fast" * 100, b"slow" * 100, b"plain"]
    assert decode_pull_body(body)[0].body == zlib.compress(b"fast" * 100)  # default: as stored


def test_whole_objects_equal_the_shared_decoders() -> None:
    # The fast path builds MessageExt field by field: every field (the dataclass's equality
    # covers them all, _properties included) must match the shared decoder's object.
    body = sample() + b"".join(
        encode_message(topic="BenchDrain", body=b"x" * 1024, queue_offset=i, commit_log_offset=i * 1200,
                       properties={"UNIQ_KEY": f"U{i}", "WAIT": "true"})
        for i in range(8)
    )  # fmt: skip
    fast = decode_pull_body(body)
    assert fast == decode_messages(body) and decode_messages(body) == fast
    assert type(fast[-1]) is PulledMessageExt and fast[-1] != decode_messages(body)[0]
    assert all(m.properties == s.properties for m, s in zip(fast, decode_messages(body), strict=True))
    assert fast[-1].uniq_key == "U7"


def test_msg_id_made_on_first_read_and_settable() -> None:
    rec = encode_message(topic="T", body=b"b", commit_log_offset=0x1234_5678_9ABC,
                         store_host=(b"\xc0\xa8\x01\x02", 10911))  # fmt: skip
    (m,) = decode_pull_body(rec)
    (s,) = decode_messages(rec)
    assert m.msg_id == s.msg_id == "C0A8010200002A9F0000123456789ABC"
    assert repr(m).endswith(repr(s)[len("MessageExt") :])
    m.msg_id = "X"
    assert m.msg_id == "X" and m != s


def test_properties_length_over_a_short_is_rejected() -> None:
    # PROPERTIES length is a signed short: a record whose length bytes read 0x8000+ is garbage.
    rec = bytearray(encode_message(topic="T", body=b"b", properties="K\x01v\x02"))
    at = len(rec) - len("K\x01v\x02") - 2
    rec[at] = 0x80
    with pytest.raises(MessageDecodeError):
        decode_pull_body(bytes(rec))


def test_pulled_message_copies_pickles_and_replaces() -> None:
    import copy
    import dataclasses
    import pickle

    rec = encode_message(topic="T", body=b"b", commit_log_offset=77)
    decode_pull_body(rec)  # the topic's first record goes through the shared decoder
    (m,) = decode_pull_body(rec)
    assert type(m) is PulledMessageExt
    for c in (pickle.loads(pickle.dumps(m)), copy.copy(m), copy.deepcopy(m)):
        assert type(c) is PulledMessageExt and c == m and c.msg_id == m.msg_id
    r = dataclasses.replace(m, queue_offset=5)
    assert r.msg_id == m.msg_id and r.queue_offset == 5
