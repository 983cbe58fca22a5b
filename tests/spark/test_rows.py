"""Pull body -> Arrow rows: values, filtering, offset checks and the Spark schema (no Spark session)."""

from __future__ import annotations

import random
import zlib
from typing import Any

import pyarrow as pa
import pytest
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import (
    BinaryType,
    IntegerType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from pocketmq.remoting.protocol.message import (
    COMPRESSED_FLAG,
    HOST_FLAGS_MASK,
    RECORD_PREFIX_STRUCTS,
    create_offset_msg_id,
    decode_message,
    decode_messages,
    encode_message,
    get_property,
    pack_host_ip,
    string_to_properties,
)
from pocketmq.spark.errors import ReadError
from pocketmq.spark.rows import COLUMNS, PREFIX_FIELDS, Columns, arrow_schema, schema_ddl

STORE = (pack_host_ip("10.0.0.7"), 10911)


def rec(
    offset: int,
    body: bytes = b"hello",
    *,
    topic: str = "T",
    queue_id: int = 3,
    props: dict[str, str] | None = None,
    **kw: int,
) -> bytes:
    return encode_message(
        topic=topic, body=body, properties=props or {}, queue_id=queue_id, queue_offset=offset,
        commit_log_offset=1000 + offset * 200, born_timestamp=1_700_000_000_123 + offset,
        store_timestamp=1_700_000_000_500 + offset, born_host=(pack_host_ip("192.168.1.2"), 5555),
        store_host=STORE, **kw,
    )  # fmt: skip


@pytest.mark.parametrize("v6", [False, True])
def test_prefix_field_names_match_the_protocol_decoder(v6: bool) -> None:
    """PREFIX_FIELDS names the positions of every RECORD_PREFIX_STRUCTS tuple, as decode_message reads them."""
    born = (pack_host_ip("::1" if v6 else "192.168.1.2"), 5555)
    data = encode_message(
        topic="T", body=b"payload", properties={"A": "1"}, queue_id=3, flag=17, queue_offset=42,
        commit_log_offset=4242, born_timestamp=111, born_host=born, store_timestamp=222, store_host=STORE,
        reconsume_times=2, prepared_transaction_offset=99,
    )  # fmt: skip
    ref = decode_message(data)
    sys_flag = ref.sys_flag
    fields = dict(
        zip(PREFIX_FIELDS, RECORD_PREFIX_STRUCTS[sys_flag & HOST_FLAGS_MASK].unpack_from(data), strict=True)
    )
    assert (ref.store_size, ref.magic, ref.body_crc) == (
        fields["totalSize"],
        fields["magicCode"],
        fields["bodyCRC"],
    )
    assert (ref.queue_id, ref.flag, ref.queue_offset, ref.commit_log_offset, ref.sys_flag) == (
        fields["queueId"], fields["flag"], fields["queueOffset"], fields["physicalOffset"], fields["sysFlag"],
    )  # fmt: skip
    assert (ref.born_timestamp, ref.store_timestamp, ref.reconsume_times, ref.prepared_transaction_offset) == (
        fields["bornTimestamp"], fields["storeTimestamp"], fields["reconsumeTimes"], fields["preparedTransactionOffset"],
    )  # fmt: skip
    assert ref.born_host[1] == fields["bornHostPort"] and ref.store_host[1] == fields["storeHostPort"]
    assert (fields["bornHostIp"], fields["storeHostIp"]) == (born[0], STORE[0])
    assert fields["bodyLength"] == len(ref.body) == 7


def spark_type(kind: str) -> object:
    return {
        "STRING": StringType(),
        "INT": IntegerType(),
        "BIGINT": LongType(),
        "BINARY": BinaryType(),
        "TIMESTAMP": TimestampType(),
    }[kind]


@pytest.mark.parametrize("include", [False, True])
def test_arrow_schema_is_what_pyspark_expects(include: bool) -> None:
    fields = [StructField(name, spark_type(kind)) for name, kind in COLUMNS]  # type: ignore[arg-type]
    if include:
        fields.append(StructField("properties", MapType(StringType(), StringType())))
    assert arrow_schema(include).equals(to_arrow_schema(StructType(fields), timezone="UTC"))
    assert schema_ddl(include).startswith(
        "topic STRING, brokerName STRING, queueId INT, queueOffset BIGINT, body BINARY"
    )
    assert schema_ddl(include).endswith("MAP<STRING, STRING>") == include


def test_values_of_every_column() -> None:
    cols = Columns("T", "broker-a", 3, include_properties=True)
    body = rec(
        7,
        b"payload",
        props={"TAGS": "TagA", "KEYS": "k1 k2", "UNIQ_KEY": "ABC123", "x": "y"},
        flag=9,
        reconsume_times=2,
    )
    body += rec(8, b"second")  # no properties at all
    assert cols.decode(body, 7, 100, None) == 9
    batch = cols.to_batch()
    assert batch.schema.equals(arrow_schema(True)) and batch.num_rows == 2
    row = batch.to_pylist()[0]
    assert row["topic"] == "T" and row["brokerName"] == "broker-a" and row["queueId"] == 3
    assert (
        row["queueOffset"] == 7
        and row["body"] == b"payload"
        and row["flag"] == 9
        and row["reconsumeTimes"] == 2
    )
    assert (row["tags"], row["keys"], row["msgId"]) == ("TagA", "k1 k2", "ABC123")
    assert row["commitLogOffset"] == 1000 + 7 * 200
    assert int(row["bornTimestamp"].timestamp() * 1000) == 1_700_000_000_130
    assert int(row["storeTimestamp"].timestamp() * 1000) == 1_700_000_000_507
    assert row["bornHost"] == "192.168.1.2:5555" and row["storeHost"] == "10.0.0.7:10911"
    assert dict(row["properties"]) == {"TAGS": "TagA", "KEYS": "k1 k2", "UNIQ_KEY": "ABC123", "x": "y"}
    second = batch.to_pylist()[1]
    assert second["tags"] is None and second["keys"] is None and dict(second["properties"]) == {}
    # no UNIQ_KEY: the offset msgId (store host + commit-log offset), as the Java consumer shows
    assert second["msgId"] == create_offset_msg_id(STORE[0], STORE[1], 1000 + 8 * 200)
    assert len(cols) == 0  # to_batch cleared the columns


def test_compressed_body_is_inflated_and_ipv6_hosts_decode() -> None:
    raw = b"x" * 5000
    body = rec(0, zlib.compress(raw), sys_flag=COMPRESSED_FLAG)
    body += encode_message(
        topic="T",
        body=b"v6",
        queue_id=3,
        queue_offset=1,
        store_host=(pack_host_ip("::1"), 7),
        born_host=(pack_host_ip("fe80::2"), 8),
    )
    cols = Columns("T", "b", 3, include_properties=False)
    cols.decode(body, 0, 10, None)
    rows = cols.to_batch().to_pylist()
    assert rows[0]["body"] == raw and rows[0]["sysFlag"] & COMPRESSED_FLAG
    assert (
        rows[1]["body"] == b"v6"
        and rows[1]["storeHost"] == "[::1]:7"
        and rows[1]["bornHost"] == "[fe80::2]:8"
    )
    assert "properties" not in cols.to_batch().schema.names


def test_exact_tag_filter_and_until_cut() -> None:
    body = b"".join(rec(i, props={"TAGS": tag}) for i, tag in enumerate(["A", "B", "AB", "A", "A"]))
    cols = Columns("T", "b", 3, include_properties=False, tags_filter=frozenset({"A"}))
    # rows at offset >= until are cut; filtered rows still advance the expected offset
    assert cols.decode(body, 0, 4, None) == 4
    assert cols.to_batch().column("queueOffset").to_pylist() == [0, 3]


def test_gaps_are_reported_without_filter() -> None:
    body = rec(5) + rec(6) + rec(9)
    gaps: list[tuple[int, int]] = []
    cols = Columns("T", "b", 3, include_properties=False)
    assert cols.decode(body, 4, 100, lambda a, b: gaps.append((a, b))) == 10
    assert gaps == [(4, 5), (7, 9)]


@pytest.mark.parametrize(
    ("body", "expect", "fragment"),
    [
        (rec(5) + rec(5), 5, "offsets must increase"),
        (rec(3), 4, "where offset >= 4"),
        (rec(4, queue_id=2), 4, "queue 2"),
        (rec(4, topic="OTHER"), 4, "another topic"),
        (rec(4)[:-3], 4, "bad record"),
        (b"\x00" * 120, 4, "bad record"),
        (rec(4)[:50], 4, "truncated record"),
    ],
)
def test_inconsistent_bodies_raise(body: bytes, expect: int, fragment: str) -> None:
    with pytest.raises(ReadError, match=fragment):
        Columns("T", "b", 3, include_properties=False).decode(body, expect, 100, None)


def test_memoryview_input_and_many_rows() -> None:
    body = b"".join(rec(i, bytes([i % 256]) * 1024, props={"TAGS": "t"}) for i in range(500))
    cols = Columns("T", "b", 3, include_properties=False)
    cols.decode(memoryview(bytearray(body)), 0, 500, None)
    batch = cols.to_batch()
    assert batch.num_rows == 500 and batch.column("body")[499].as_py() == bytes([499 % 256]) * 1024
    assert isinstance(batch, pa.RecordBatch)


def reference_rows(body: bytes, tags: frozenset[str] | None) -> list[dict[str, object]]:
    """What every row must hold, from the generic record decoder (one object per message)."""
    out = []
    for m in decode_messages(body):
        tag = get_property(m.properties_str, "TAGS")
        if tags is not None and tag not in tags:
            continue
        uniq = get_property(m.properties_str, "UNIQ_KEY")

        def host(h: tuple[str, int]) -> str:
            return f"[{h[0]}]:{h[1]}" if ":" in h[0] else f"{h[0]}:{h[1]}"

        out.append({
            "queueOffset": m.queue_offset,
            "body": zlib.decompress(m.body) if m.sys_flag & COMPRESSED_FLAG else m.body,
            "keys": get_property(m.properties_str, "KEYS"), "tags": tag, "msgId": uniq or m.msg_id,
            "commitLogOffset": m.commit_log_offset, "bornHost": host(m.born_host), "storeHost": host(m.store_host),
            "reconsumeTimes": m.reconsume_times, "flag": m.flag, "sysFlag": m.sys_flag,
            "properties": sorted(string_to_properties(m.properties_str).items()),
        })  # fmt: skip
    return out


@pytest.mark.parametrize("seed", range(6))
def test_batches_match_the_generic_decoder(seed: int) -> None:
    """Random pulls (missing, empty and repeated keys, IPv6 hosts, compressed bodies, a tag
    filter) decoded into one batch give the generic decoder's values, row for row."""
    rnd = random.Random(seed)
    tags = frozenset({"A", "B"}) if seed % 2 else None
    cols = Columns("T", "b", 3, include_properties=True, tags_filter=tags)
    offset, pulls = 0, []
    for _ in range(rnd.randint(1, 6)):
        records = []
        for _ in range(rnd.randint(0, 40)):
            items = [f"{k}\x01{v}" for k, v in (
                ("TAGS", rnd.choice("ABC")), ("KEYS", f"k{offset} é"), ("UNIQ_KEY", f"U{offset}"),
                ("UNIQ_KEY", ""), ("a", "TAGS\x01Z"), ("MYTAGS", "Q"), ("TAGS", "B"), ("p", "é"),
            ) if rnd.random() < 0.4]  # fmt: skip
            kw: dict[str, Any] = {}  # host addresses and sysFlag, when not the defaults
            if rnd.random() < 0.05:
                kw = {"born_host": (pack_host_ip("fe80::2"), 8), "store_host": (pack_host_ip("::1"), 9)}
            elif rnd.random() < 0.5:
                kw = {"born_host": (pack_host_ip(f"10.0.0.{rnd.randint(1, 3)}"), 4000)}
            payload = rnd.randbytes(rnd.randint(0, 300))
            if rnd.random() < 0.03:
                payload, kw["sys_flag"] = zlib.compress(payload), COMPRESSED_FLAG
            records.append(
                encode_message(
                    topic="T",
                    body=payload,
                    properties="\x02".join(items),
                    queue_id=3,
                    queue_offset=offset,
                    commit_log_offset=offset * 97,
                    flag=rnd.randint(0, 5),
                    reconsume_times=offset % 3,
                    born_timestamp=1_700_000_000_000 + offset,
                    **kw,
                )
            )
            offset += 1
        pulls.append(b"".join(records))
    expect = 0
    for pull in pulls:
        expect = cols.decode(memoryview(pull), expect, 10**9, None)
    assert expect == offset
    got = cols.to_batch().to_pylist()
    for row in got:
        row["properties"] = sorted(row["properties"])
        assert row.pop("bornTimestamp").timestamp() * 1000 == 1_700_000_000_000 + row["queueOffset"]
        assert (row.pop("topic"), row.pop("brokerName"), row.pop("queueId")) == ("T", "b", 3)
        row.pop("storeTimestamp")
    assert got == reference_rows(b"".join(pulls), tags)


def test_properties_that_are_not_utf8_decode_with_replacement() -> None:
    cols = Columns("T", "b", 3, include_properties=False)
    body = encode_message(topic="T", body=b"x", properties="TAGS\x01\x7f\x02UNIQ_KEY\x01U", queue_id=3)
    raw = body.replace(b"\x01\x7f\x02", b"\x01\xff\x02")  # a byte that is not UTF-8, same length
    cols.decode(raw, 0, 10, None)
    row = cols.to_batch().to_pylist()[0]
    assert row["tags"] == "\ufffd" and row["msgId"] == "U"


def test_decoding_in_place_copies_every_value_out() -> None:
    """The reader decodes inside a connection's receive buffer, which the next reply overwrites."""
    pull = b"".join(
        rec(i, bytes([65 + i]) * 50, props={"TAGS": f"t{i}", "UNIQ_KEY": f"u{i}"}) for i in range(3)
    )
    frame = bytearray(b"HEAD" + pull + b"TAIL")
    cols = Columns("T", "b", 3, include_properties=True)
    assert cols.decode(frame, 0, 100, None, 4, 4 + len(pull)) == 3
    frame[:] = bytes(len(frame))  # the next reply lands in the same buffer
    rows = cols.to_batch().to_pylist()
    assert [(r["body"], r["tags"], r["msgId"]) for r in rows] == [
        (bytes([65 + i]) * 50, f"t{i}", f"u{i}") for i in range(3)
    ]
    # the checked path (a gap) works on the same bounds
    gaps: list[tuple[int, int]] = []
    frame = bytearray(b"xx" + rec(0) + rec(2) + b"yy")
    assert cols.decode(frame, 0, 100, lambda a, b: gaps.append((a, b)), 2, len(frame) - 2) == 3
    assert gaps == [(1, 2)] and cols.to_batch().column("queueOffset").to_pylist() == [0, 2]


def test_sql_filter_is_evaluated_on_each_rows_properties() -> None:
    regions = ["eu", "us", None, "eu", "ap"]
    body = b"".join(
        rec(i, props={"TAGS": "A" if i % 2 else "B", "a": str(i * 10)} | ({"region": r} if r else {}))
        for i, r in enumerate(regions)
    )
    cols = Columns("T", "b", 3, include_properties=False, sql_filter="region IN ('eu', 'us') OR a IS NULL")
    cols.decode(body, 0, 100, None)
    assert cols.to_batch().column("queueOffset").to_pylist() == [0, 1, 3]
    # with a tag filter too: both must hold; NULL and evaluation errors never match
    cols = Columns("T", "b", 3, include_properties=True, tags_filter=frozenset({"A"}), sql_filter="a > 5")
    cols.decode(body, 0, 100, None)
    rows = cols.to_batch().to_pylist()
    assert [r["queueOffset"] for r in rows] == [1, 3] and dict(rows[0]["properties"])["a"] == "10"
    cols = Columns("T", "b", 3, include_properties=False, sql_filter="region > 1")  # 'eu' is no number
    cols.decode(body, 0, 100, None)
    assert cols.to_batch().num_rows == 0
