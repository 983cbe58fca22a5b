"""Builds the golden records field by field from RocketMQ's record and batch layouts (independent of the codec)."""

# Run from the repository root: .venv/bin/python tests/data/messages/build_golden.py
# ruff: noqa: C408, E401, E702, E501
import json
import pathlib
import struct
import zlib

out = pathlib.Path("tests/data/messages")


def be(fmt, v):
    return struct.pack(">" + fmt, v)


def record(f):
    body = bytes.fromhex(f["body_hex"])
    topic = f["topic"].encode()
    props = f["properties"].encode()
    born_ip = bytes.fromhex(f["born_ip_hex"])
    store_ip = bytes.fromhex(f["store_ip_hex"])
    parts = [
        be("i", f["magic"]),
        be("i", zlib.crc32(body) & 0x7FFFFFFF),
        be("i", f["queue_id"]),
        be("i", f["flag"]),
        be("q", f["queue_offset"]),
        be("q", f["commit_log_offset"]),
        be("i", f["sys_flag"]),
        be("q", f["born_timestamp"]),
        born_ip,
        be("i", f["born_port"]),
        be("q", f["store_timestamp"]),
        store_ip,
        be("i", f["store_port"]),
        be("i", f["reconsume_times"]),
        be("q", f["prepared_transaction_offset"]),
        be("i", len(body)),
        body,
        be("b", len(topic)),
        topic,
        be("h", len(props)),
        props,
    ]
    rest = b"".join(parts)
    return be("i", 4 + len(rest)) + rest


v4 = dict(
    magic=-626843481,
    queue_id=3,
    flag=7,
    queue_offset=42,
    commit_log_offset=123456789,
    sys_flag=0,
    born_timestamp=1700000000123,
    born_ip_hex="c0a80105",
    born_port=53412,
    store_timestamp=1700000000456,
    store_ip_hex="0a000001",
    store_port=10911,
    reconsume_times=2,
    prepared_transaction_offset=0,
    body_hex=b"Hello RocketMQ".hex(),
    topic="TopicTest",
    properties="TAGS\x01TagA\x02KEYS\x01order-1 order-2\x02UNIQ_KEY\x017F00000100002A9F0000000000000001\x02WAIT\x01true",
)
v6 = dict(
    v4,
    sys_flag=0x10 | 0x8,
    born_ip_hex="20010db8000000000000000000000001",
    queue_offset=0,
    commit_log_offset=987654321,
    body_hex="00ff10",
    topic="%RETRY%g1",
    properties="",
)
zh = dict(
    v4,
    topic="主题",
    properties="TAGS\x01标签\x02KEYS\x01键",
    body_hex="e4bda0e5a5bd",
    commit_log_offset=0,
    queue_offset=0,
)
for name, f in (("record_v4", v4), ("record_born_v6", v6), ("record_utf8", zh)):
    (out / f"{name}.bin").write_bytes(record(f))
    (out / f"{name}.json").write_text(json.dumps(f, indent=1, ensure_ascii=False) + "\n")
items = [
    dict(flag=0, body_hex=b"m1".hex(), properties="UNIQ_KEY\x01AAAA\x02WAIT\x01true"),
    dict(flag=5, body_hex="", properties=""),
    dict(flag=-1, body_hex=bytes(range(10)).hex(), properties="KEYS\x01k"),
]
blob = b""
for it in items:
    body = bytes.fromhex(it["body_hex"])
    props = it["properties"].encode()
    blob += (
        be("i", 20 + len(body) + 2 + len(props))
        + be("i", 0)
        + be("i", 0)
        + be("i", it["flag"])
        + be("i", len(body))
        + body
        + be("h", len(props))
        + props
    )
(out / "batch.bin").write_bytes(blob)
(out / "batch.json").write_text(json.dumps(items, indent=1) + "\n")
