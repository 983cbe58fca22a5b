"""Reput's dispatch of a checked batch body (``BodyStrings``: each record's own properties,
then the shared tail parsed once a batch) writes the ConsumeQueue and index files byte for byte
as the per-record parse of batch_items' list, whichever properties the items and the header
hold (UNIQ_KEY alone takes the own-part path, anything else the parse)."""

from __future__ import annotations

import os

import pytest

from pocketmq.broker.processor.batch_body import batch_items, checked_body
from pocketmq.remoting.protocol.message import encode_batch
from pocketmq.store import BatchBody, MessageInner, MessageStore

from ..store.conftest import FakeClock, tiny_config

BORN = (b"\x0a\x00\x00\x01", 4321)
STORE_HOST = (b"\x7f\x00\x00\x01", 10911)


def _uniq(i: int) -> str:
    return f"UNIQ_KEY\x017F0000010001{i:020X}"


HEADERS = {
    "cluster": "WAIT\x01true\x02CLUSTER\x01C",
    "tags": "TAGS\x01tagA\x02CLUSTER\x01C",
    "keys": "KEYS\x01k1 k2  k3\x02TAGS\x01t\x02CLUSTER\x01C",
    "uniq in header": "UNIQ_KEY\x01HEADERKEY\x02KEYS\x01x",
    "separator first": "\x02TAGS\x01t2",
}
ITEMS = {
    "uniq": [_uniq(i) for i in range(70)],
    "uniq trailing": [_uniq(i) + "\x02" for i in range(70)],
    # a counter crossing a multiple of 256 mid-batch: two heads, two runs
    "uniq two runs": [_uniq(0x1F0 + i) for i in range(70)],
    # heads that change every few records, back to an earlier one, non-ASCII tails
    "uniq heads": [_uniq(i * 61 % 700) for i in range(70)] + ["UNIQ_KEY\x01abcé€", "UNIQ_KEY\x01ab"],
    "empty uniq": ["UNIQ_KEY\x01"] * 3 + [_uniq(5)],
    "one-char uniq": ["UNIQ_KEY\x01z", _uniq(1)],
    "uniq then tags": [_uniq(1), _uniq(2) + "\x02TAGS\x01own"],
    "tags uniq": [f"TAGS\x01tg\x02{_uniq(i)}" for i in range(70)],
    "tags uniq trailing": [f"TAGS\x01tg\x02{_uniq(i)}\x02" for i in range(9)],
    "tags uniq other tags": [f"TAGS\x01tg\x02{_uniq(1)}", f"TAGS\x01th\x02{_uniq(2)}"],
    "tags only": ["TAGS\x01tg"] * 3,
    "tags, uniq, then tags only": [f"TAGS\x01tg\x02{_uniq(1)}", "TAGS\x01tg"],
    "empty tags": [f"TAGS\x01\x02{_uniq(i)}" for i in range(3)],
    "tags first": ["TAGS\x01own\x02" + _uniq(3), _uniq(4)],
    "no uniq": ["K\x01v", "KEYS\x01a"],
}


def _files(root: str, sub: str) -> dict[str, bytes]:
    out = {}
    for dirpath, _, names in os.walk(os.path.join(root, sub)):
        for name in names:
            with open(os.path.join(dirpath, name), "rb") as f:
                out[os.path.relpath(os.path.join(dirpath, name), root)] = f.read()
    return out


@pytest.mark.parametrize("indexed", [True, False])
@pytest.mark.parametrize("header", sorted(HEADERS))
@pytest.mark.parametrize("items", sorted(ITEMS))
def test_a_body_batch_dispatches_as_the_per_record_parse(tmp_path, header, items, indexed):
    head = HEADERS[header]
    data = encode_batch([(i, b"b%d" % i, p) for i, p in enumerate(ITEMS[items])])
    roots = [str(tmp_path / way) for way in ("items", "body")]
    conf = {"max_hash_slot_num": 64, "max_index_num": 4096, "message_index_enable": indexed}
    stores = [MessageStore(tiny_config(r, **conf), clock=FakeClock()) for r in roots]
    for s in stores:
        s.load()
    a, b = stores
    bodies = 0
    for round_ in range(6):
        t = MessageInner("TopicA", b"", round_ % 2, 0, "", 0, 1_700_000_000_123, BORN, STORE_HOST, 0)
        assert a.put_batch(t, batch_items(data, head, 1 << 20, "too long", "TopicA")).is_ok
        body = checked_body(data, head, 1 << 20, "too long", "TopicA")
        bodies += isinstance(body, BatchBody)
        assert b.put_batch(t, body).is_ok
        a.do_reput()
        b.do_reput()
    assert bodies == 6 or items in ("uniq then tags",)  # (mixed last separators: a list)
    for s in stores:
        s.close()
    for sub in ("consumequeue", "index"):
        fa, fb = _files(roots[0], sub), _files(roots[1], sub)
        assert fa == fb
        assert fa or sub == "index"  # (no key at all: no index file)
