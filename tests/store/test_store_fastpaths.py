"""The write-path fast paths give byte-for-byte what the plain paths give.

Reput dispatches records this process appended without decoding them; recovery re-dispatches
without building requests; a batch is encoded in one write. Each is checked here against the
straightforward implementation it replaces (index hashes from cached heads and tails: in
test_index_key_hashes.py).
"""

from __future__ import annotations

import os
import random

import pytest

from pocketmq.remoting.protocol.message import (
    MessageConst,
    UniqIdGenerator,
    decode_message,
    encode_message,
    get_property,
    properties_to_string,
    tags_hash,
)
from pocketmq.store import MessageInner, MessageStore, PutMessageStatus
from pocketmq.store.dispatch.dispatcher import dispatch_fields, tags_code_of
from pocketmq.store.log.layout import CQ_UNIT_SIZE
from pocketmq.store.log.records import CORRUPT, END, INCOMPLETE, validate_record

from .conftest import BORN_HOST, STORE_HOST, FakeClock, crash, make_msg, pull_all, tiny_config

FAR = 2**62


def _files(root: str, sub: str) -> dict[str, bytes]:
    out: dict[str, bytes] = {}
    top = os.path.join(root, sub)
    for d, _, names in os.walk(top):
        for n in names:
            with open(os.path.join(d, n), "rb") as f:
                out[os.path.relpath(os.path.join(d, n), top)] = f.read()
    return out


def _mixed_messages(n: int) -> list[MessageInner]:
    """Tags or none, several keys, non-ASCII and astral keys, UNIQ_KEYs, delays, transactions."""
    gen = UniqIdGenerator(ip=b"\x0a\x00\x00\x05", pid=7)
    out = []
    for i in range(n):
        props: dict[str, str] = {MessageConst.UNIQ_KEY: gen.create()}
        if i % 5:
            props[MessageConst.TAGS] = ["TagA", "TagB", "标签"][i % 3]
        props[MessageConst.KEYS] = [f"order-{i}", f"k{i} shared  x", "键-é", "emoji-\U0001f600", "ab"][i % 5]
        if i % 11 == 0:
            props[MessageConst.DELAY] = "3"
        topic = "SCHEDULE_TOPIC_XXXX" if i % 11 == 0 else ("TopicA" if i % 2 else "TopicB")
        sys_flag = [0, 0, 0, 0x4, 0x8, 0xC][i % 6]  # none, prepared, commit, rollback
        out.append(
            MessageInner(
                topic=topic,
                body=os.urandom(50 + i % 300),
                queue_id=i % 3,
                flag=i,
                properties=props if i % 2 else properties_to_string(props),
                sys_flag=sys_flag,
                born_timestamp=1,
                born_host=BORN_HOST,
                store_host=STORE_HOST,
            )  # fmt: skip
        )
    return out


def _fill(
    root: str, msgs: list[MessageInner], *, decode: bool, index: bool = True, every: int = 25
) -> MessageStore:
    """``msgs`` put (every seventh as a batch of two) and dispatched every ``every`` puts."""
    clock = FakeClock()
    store = MessageStore(tiny_config(root, max_index_num=200, message_index_enable=index), clock=clock)
    store.load()
    for k, m in enumerate(msgs):
        if k % 7 == 6:
            store.put_messages([m, m])  # a small batch (same topic/queue)
        else:
            store.put_message(m)
        clock.advance(37)
        if decode:
            store.commitlog.appended.clear()  # force the decoding reput path
        if k % every == every - 1:
            store.do_reput()
    store.do_reput()
    return store


def _assert_fast_units_and_index_equal_decoded(tmp_path, msgs: list[MessageInner], every: int = 25) -> None:
    """The ConsumeQueue and index files of ``msgs`` put and dispatched by the fast reput equal
    the decoding reput's, byte for byte (dispatched every ``every`` puts)."""
    fast = _fill(str(tmp_path / "fast"), msgs, decode=False, every=every)
    slow = _fill(str(tmp_path / "slow"), msgs, decode=True, every=every)
    fast.close()
    slow.close()
    for sub in ("consumequeue", "index"):
        got = _files(str(tmp_path / "fast"), sub)
        assert got and got == _files(str(tmp_path / "slow"), sub)


@pytest.mark.parametrize("index", [True, False])
def test_fast_reput_writes_exactly_what_decoding_reput_writes(tmp_path, index):
    msgs = _mixed_messages(300)
    fast = _fill(str(tmp_path / "fast"), msgs, decode=False, index=index)
    slow = _fill(str(tmp_path / "slow"), msgs, decode=True, index=index)
    assert fast.dispatcher.last_dispatched_timestamp == slow.dispatcher.last_dispatched_timestamp
    fast.close()
    slow.close()
    assert _files(str(tmp_path / "fast"), "commitlog") == _files(str(tmp_path / "slow"), "commitlog")
    fq = _files(str(tmp_path / "fast"), "consumequeue")
    assert fq and fq == _files(str(tmp_path / "slow"), "consumequeue")
    fi = _files(str(tmp_path / "fast"), "index")
    assert fi == _files(str(tmp_path / "slow"), "index")
    assert len(fi) > 1 if index else not fi  # (on: rolled at least once)


def test_fast_reput_of_uniq_key_then_cluster_writes_what_decoding_reput_writes(tmp_path):
    """Properties of UNIQ_KEY then at most CLUSTER (reput_appended's shortcut, no parse) and
    look-alikes that must take the parse (a longer name ending in UNIQ_KEY, other properties
    after it), empty and 1-char keys, a trailing separator: the units and index entries equal
    the decoding path's."""
    gen = UniqIdGenerator(ip=b"\x0a\x00\x00\x05", pid=9)
    shapes = [
        lambda: f"UNIQ_KEY\x01{gen.create()}",
        lambda: "UNIQ_KEY\x01",
        lambda: "UNIQ_KEY\x01z",
        lambda: f"XUNIQ_KEY\x01{gen.create()}",
        lambda: f"UNIQ_KEY\x01{gen.create()}\x02TAGS\x01t",
        lambda: f"UNIQ_KEY\x01{gen.create()}\x02",
        lambda: f"UNIQ_KEY\x01a\x01b{gen.create()}",
        lambda: f"UNIQ_KEY\x01{gen.create()}\x02CLUSTER\x01DefaultCluster",
        lambda: f"UNIQ_KEY\x01{gen.create()}\x02CLUSTER\x01c\x02KEYS\x01k1 k2",
        lambda: f"UNIQ_KEY\x01{gen.create()}\x02CLUSTERX\x01c",
        lambda: f"UNIQ_KEY\x01{gen.create()}\x02CLUSTER\x01",
        lambda: "UNIQ_KEY\x01\x02CLUSTER\x01c",
    ]
    msgs = [
        MessageInner(
            topic="TopicU", body=os.urandom(40 + i), queue_id=i % 2, properties=shapes[i % len(shapes)](),
            born_timestamp=1, born_host=BORN_HOST, store_host=STORE_HOST,
        )  # fmt: skip
        for i in range(120)
    ]
    _assert_fast_units_and_index_equal_decoded(tmp_path, msgs)


@pytest.mark.parametrize(("seed", "every"), [(1, 25), (2, 25), (3, 25), (4, 1), (5, 1)])
def test_fast_reput_of_a_learnt_cluster_tail_and_kept_heads_writes_what_decoding_writes(
    tmp_path, seed, every
):
    """reput_appended's learnt CLUSTER part (UNIQ_KEY, then the part the record before ended
    with) and its head kept from the record before: records that end with that part but hold
    more (a separator in the key's place, TAGS or KEYS before it), other cluster names, empty,
    1- and 2-char keys, keys whose head repeats with another tail (non-ASCII, astral), two
    topics interleaved (one head, two hashes): the units and index entries equal the decoding
    path's. ``every`` 1: a reput call per put, one new record a call (``reput_one``'s case, one
    send in flight)."""
    rnd = random.Random(seed)
    head = "7F00000100011B4AAC2" + "0123456789AB"
    tails = ["00", "01", "Z9", "é1", "\U0001f600", "a", ""]
    shapes = [
        lambda k: f"UNIQ_KEY\x01{k}\x02CLUSTER\x01DefaultCluster",
        lambda k: f"UNIQ_KEY\x01{k}\x02CLUSTER\x01OtherCluster",
        lambda k: f"UNIQ_KEY\x01{k}\x02TAGS\x01t\x02CLUSTER\x01DefaultCluster",
        lambda k: f"UNIQ_KEY\x01{k}\x02KEYS\x01a b\x02CLUSTER\x01DefaultCluster",
        lambda k: f"UNIQ_KEY\x01{k[:3]}\x02{k[3:]}\x02CLUSTER\x01DefaultCluster",
        lambda k: f"UNIQ_KEY\x01{k}\x02CLUSTER\x01DefaultCluster\x02",
        lambda k: f"TAGS\x01x\x02UNIQ_KEY\x01{k}\x02CLUSTER\x01DefaultCluster",
        lambda k: f"UNIQ_KEY\x01{k}",
    ]
    weights = [12, 2, 1, 1, 1, 1, 1, 1]
    msgs = []
    for i in range(400):
        key = (head[: rnd.choice([0, 1, 30])] if rnd.random() < 0.1 else f"{head}{i // 9:02X}") + rnd.choice(tails)
        props = rnd.choices(shapes, weights)[0](key)
        topic = "TopicU" if rnd.random() < 0.8 else "TopicV"
        msgs.append(
            MessageInner(
                topic=topic, body=os.urandom(40 + i % 50), queue_id=i % 2, properties=props,
                born_timestamp=1, born_host=BORN_HOST, store_host=STORE_HOST,
            )  # fmt: skip
        )
    _assert_fast_units_and_index_equal_decoded(tmp_path, msgs, every)


def test_recovery_redispatch_repairs_units_and_rebuilds_the_index(tmp_path):
    root = str(tmp_path / "s")
    store = _fill(root, _mixed_messages(120), decode=False)
    store.close()
    cq = _files(root, "consumequeue")
    index = _files(root, "index")
    # crash with damage: a unit's tagsCode flipped, the last unit zeroed, the index gone
    qdir = os.path.join(root, "consumequeue", "TopicA", "1")
    for name in (min(os.listdir(qdir)), max(os.listdir(qdir))):  # an older file and the last one
        with open(os.path.join(qdir, name), "r+b") as f:
            f.seek(12)
            f.write(b"\xff" * 8)
    qdir = os.path.join(root, "consumequeue", "TopicB", "0")
    with open(os.path.join(qdir, max(os.listdir(qdir))), "r+b") as f:
        data = f.read()
        last = max(i for i in range(0, len(data), CQ_UNIT_SIZE) if any(data[i : i + CQ_UNIT_SIZE]))
        f.seek(last)
        f.write(bytes(CQ_UNIT_SIZE))
    with open(os.path.join(root, "abort"), "w"):
        pass
    os.unlink(os.path.join(root, "checkpoint"))
    for name in os.listdir(os.path.join(root, "index")):
        os.unlink(os.path.join(root, "index", name))
    again = MessageStore(tiny_config(root, max_index_num=200), clock=FakeClock())
    again.load()
    assert not again.last_shutdown_clean
    again.close()
    assert _files(root, "consumequeue") == cq
    assert len(_files(root, "index")) == len(index)  # entries rebuilt (names follow the clock)
    again = MessageStore(tiny_config(root, max_index_num=200))
    again.load()
    first = again.look_message_by_offset(0)
    assert first is not None and first.uniq_key
    assert len(again.query_message(first.topic, first.uniq_key, 4, 0, FAR).messages) == 1
    assert len(again.query_message("TopicA", "x", 64, 0, FAR).messages) > 0
    again.close()


def test_recovery_detects_missing_units_and_rebuilds_the_queue(tmp_path):
    root = str(tmp_path / "s")
    store = MessageStore(tiny_config(root))
    store.load()
    for i in range(30):
        store.put_message(make_msg(i, queue_id=0))
    store.do_reput()
    crash(store)
    path = os.path.join(root, "consumequeue", "TopicA", "0", f"{0:020d}")
    os.truncate(path, 3 * CQ_UNIT_SIZE)  # units 3.. lost, but the CommitLog has them
    os.unlink(os.path.join(root, "checkpoint"))
    again = MessageStore(tiny_config(root))
    again.load()
    assert again.get_max_offset_in_queue("TopicA", 0) == 30
    assert again.get_commit_log_offset_in_queue("TopicA", 0, 29) > 0
    again.close()


PROPS_CASES = [
    "",
    "TAGS\x01a",
    "TAGS\x01",
    "KEYS\x01k1 k2\x02TAGS\x01t\x02UNIQ_KEY\x01U",
    "XTAGS\x01no\x02TAGS\x01yes",
    "TAGS\x01first\x02TAGS\x01second",
    "UNIQ_KEY\x01u\x02",
    "A\x01b\x02KEYS\x01\x02UNIQ_KEY\x01\x02TAGS\x01x\x02",
    "TAGSX\x01n\x02KEYSX\x01n",
    "TAGS\x01a\x01b\x02KEYS\x01c",
]


@pytest.mark.parametrize("props", PROPS_CASES)
def test_dispatch_fields_agree_with_get_property(props):
    tags = get_property(props, "TAGS")
    assert dispatch_fields(props) == (tags, get_property(props, "KEYS"), get_property(props, "UNIQ_KEY"))
    assert tags_code_of(props) == (tags_hash(tags) if tags else 0)


def test_dispatch_fields_random_property_strings():
    rnd = random.Random(5)
    alphabet = ["TAGS", "KEYS", "UNIQ_KEY", "WAIT", "X", "é", "\x01", "\x02", "a b", ""]
    for _ in range(3000):
        s = "".join(rnd.choice(alphabet) for _ in range(rnd.randrange(12)))
        tags = get_property(s, "TAGS")
        assert dispatch_fields(s) == (tags, get_property(s, "KEYS"), get_property(s, "UNIQ_KEY")), repr(s)
        assert tags_code_of(s) == (tags_hash(tags) if tags else 0), repr(s)


@pytest.mark.parametrize(
    "hosts",
    [(BORN_HOST, STORE_HOST), ((b"\x00" * 15 + b"\x01", 9), STORE_HOST), (BORN_HOST, (b"\xfe" * 16, 1))],
)
def test_validate_record_fields_and_every_truncation(hosts):
    born, store_host = hosts
    raw = encode_message(
        topic="TopicA", body=b"hello body", properties="TAGS\x01t\x02KEYS\x01k", queue_id=3, queue_offset=17,
        commit_log_offset=4096, sys_flag=0x8, born_host=born, store_timestamp=123, store_host=store_host,
        prepared_transaction_offset=55,
    )  # fmt: skip
    size, fields = validate_record(raw, 0, len(raw), 4096, True)
    assert size == len(raw)
    m = decode_message(raw)
    assert fields == (
        m.topic,
        m.queue_id,
        m.queue_offset,
        m.sys_flag,
        m.store_timestamp,
        55,
        m.properties_str,
    )
    view = memoryview(raw)
    assert validate_record(raw, 0, len(raw), 4096, True, view) == (size, fields)
    view.release()
    for cut in range(1, len(raw)):
        expected = INCOMPLETE if any(raw[:cut]) else END  # a cut inside a zero TOTALSIZE byte
        assert validate_record(raw[:cut], 0, cut, 4096, True) == (expected, None), cut
    assert validate_record(raw, 0, len(raw), 4097, True) == (CORRUPT, None)  # wrong PHYSICALOFFSET
    bad_crc = raw[:-30] + bytes([raw[-30] ^ 1]) + raw[-29:]
    if b"hello body" not in bad_crc:  # the flipped byte is in the body
        assert validate_record(bad_crc, 0, len(raw), 4096, True) == (CORRUPT, None)
        assert validate_record(bad_crc, 0, len(raw), 4096, False)[0] == len(raw)
    assert validate_record(bytes(200), 0, 200, 0, True) == (END, None)
    assert validate_record(b"\x00\x00\x00\x10" + b"\xcb\xd4\x31\x94" + bytes(8), 0, 16, 0, True) == (16, None)
    assert validate_record(b"\x00\x00\x00\x50\xda\xa3\x20\xa7" + bytes(92), 0, 100, 0, True) == (
        CORRUPT,
        None,
    )


def test_batch_is_one_write_of_reference_records(open_store, clock):
    store = open_store(clock=clock)
    store.put_message(make_msg(0))  # the batch starts mid-segment
    batch = [make_msg(i, queue_id=1, extra={"n": str(i)}) for i in range(1, 6)]
    r = store.put_messages(batch)
    a = r.append
    assert a is not None and a.msg_num == 5 and a.logics_offset == 0
    pos = a.wrote_offset
    for k, m in enumerate(batch):
        expected = encode_message(
            topic="TopicA", body=m.body, properties=properties_to_string(m.properties), queue_id=1,  # type: ignore[arg-type]
            flag=m.flag, queue_offset=k, commit_log_offset=pos, born_timestamp=m.born_timestamp,
            born_host=BORN_HOST, store_timestamp=clock.now, store_host=STORE_HOST,
        )  # fmt: skip
        assert store.get_message_bytes_by_offset(pos) == expected
        assert a.batch_offsets is not None and a.batch_offsets[k] == pos
        pos += len(expected)
    assert pos == a.wrote_offset + a.wrote_bytes == store.get_max_phy_offset()
    # an invalid member refuses the whole batch and writes nothing
    bad = [make_msg(9, queue_id=1), make_msg(10, queue_id=1, extra={"big": "x" * 40_000})]
    assert not store.put_messages(bad).is_ok
    assert store.get_max_phy_offset() == pos


def test_record_appended_at_the_cut_point_is_indexed(tmp_path):
    """Index entries may point past the last valid record (index pages reached disk, the
    record did not); the record appended there after recovery must still be indexed."""
    root = str(tmp_path / "s")
    store = MessageStore(tiny_config(root))
    store.load()
    for i in range(5):
        store.put_message(make_msg(i))
    store.do_reput()
    last = store.get_commit_log_offset_in_queue("TopicA", 0, 4)
    crash(store)
    os.truncate(os.path.join(root, "commitlog", f"{0:020d}"), last)  # the 5th record is lost
    again = MessageStore(tiny_config(root))
    again.load()
    assert again.get_max_phy_offset() == last
    again.put_message(make_msg(99, keys="fresh"))
    again.do_reput()
    assert len(again.query_message("TopicA", "fresh", 4, 0, FAR).messages) == 1
    again.close()


def test_build_index_writes_what_per_key_puts_write(tmp_path):
    """``build_index`` (cached hashes, a record's entries together) against plain per-key puts."""
    from pocketmq.store.index.file import IndexService, index_key_hash

    clock = FakeClock()
    fast = IndexService(str(tmp_path / "fast"), 16, 50, clock)
    ref = IndexService(str(tmp_path / "ref"), 16, 50, clock)
    rnd = random.Random(3)
    gen = UniqIdGenerator(ip=b"\x01\x02\x03\x04", pid=1)
    phy = 0
    for i in range(400):
        topic = rnd.choice(["TopicA", "TopicB"])
        uniq = gen.create() if rnd.random() < 0.9 else None
        keys = rnd.choice([f"order-{i}", f"k{i} k{i + 1}", "", None, "é€", f"x{i % 7}"])
        fast.build_index(topic, phy, clock.now, uniq, keys)
        # reference: one put per key, rolling to a new file when one is full
        if not (ref.files and ref.is_indexed(phy)):
            for k in ([uniq] if uniq else []) + [k for k in (keys or "").split(" ") if k]:
                f = ref.files[-1] if ref.files else ref._new_file()
                if not f.put_hashed(index_key_hash(f"{topic}#{k}"), phy, clock.now):
                    ref._new_file().put_hashed(index_key_hash(f"{topic}#{k}"), phy, clock.now)
        phy += 100 + i % 50
        clock.advance(rnd.choice([1, 400, 1500]))
    assert len(fast.files) > 3
    ref._dirty = True  # the reference bypassed build_index: have close() write its last header
    fast.close()
    ref.close()
    assert _files(str(tmp_path), "fast") == _files(str(tmp_path), "ref")


def _fill_batches(
    root: str, msgs: list[MessageInner], *, decode: bool, listener: object = None
) -> MessageStore:
    """Batch puts of 1..37 messages (same topic and queue within a batch), some singles."""
    clock = FakeClock()
    store = MessageStore(tiny_config(root, max_index_num=300), clock=clock)
    store.load()
    store.arriving_listener = listener  # type: ignore[assignment]
    rnd = random.Random(5)
    by_key: dict[tuple[str, int], list[MessageInner]] = {}
    for m in msgs:
        by_key.setdefault((m.topic, m.queue_id), []).append(m)
    groups = list(by_key.values())
    k = 0
    while any(groups):
        g = groups[k % len(groups)]
        k += 1
        take = rnd.choice([1, 2, 5, 13, 37])
        part, g[:] = g[:take], g[take:]
        if not part:
            continue
        r = store.put_messages(part) if take > 1 else store.put_message(part[0])
        assert r.is_ok
        clock.advance(rnd.choice([0, 1, 900]))
        if decode:
            store.commitlog.appended.clear()
        if k % 9 == 0:
            store.do_reput()
    store.do_reput()
    return store


def test_batch_reput_fast_path_writes_exactly_what_decoding_writes(tmp_path):
    """Batch entries (one ``appended`` entry per batch, one pack per ConsumeQueue run, index
    entries collected per slice) against decoding, with CQ and index files rolling inside
    batches, transaction batches, the schedule topic and every key shape."""
    msgs = _mixed_messages(900)
    for m in msgs[::4]:
        m.queue_id = 0  # long same-queue runs, so batches of 37 happen
    fast = _fill_batches(str(tmp_path / "fast"), msgs, decode=False)
    slow = _fill_batches(str(tmp_path / "slow"), msgs, decode=True)
    assert fast.dispatcher.last_dispatched_timestamp == slow.dispatcher.last_dispatched_timestamp
    assert fast.dispatcher.reput_from_offset == slow.dispatcher.reput_from_offset == fast.get_max_phy_offset()
    fast.close()
    slow.close()
    assert _files(str(tmp_path / "fast"), "commitlog") == _files(str(tmp_path / "slow"), "commitlog")
    fq = _files(str(tmp_path / "fast"), "consumequeue")
    assert len(fq) > 20 and fq == _files(str(tmp_path / "slow"), "consumequeue")
    fi = _files(str(tmp_path / "fast"), "index")
    assert len(fi) > 3 and fi == _files(str(tmp_path / "slow"), "index")


def test_batch_reput_notifies_the_listener_per_message(tmp_path):
    calls: list[tuple[str, int, int, int, str | None]] = []

    class L:
        def arriving(self, topic, queue_id, logic_offset, tags_code, store_timestamp, bitmap, properties):  # type: ignore[no-untyped-def]
            calls.append((topic, queue_id, logic_offset, tags_code, properties.get("KEYS")))

    store = MessageStore(tiny_config(str(tmp_path / "s")))
    store.load()
    store.arriving_listener = L()
    batch = [make_msg(i, queue_id=2, tags=["TagA", None, "TagB"][i % 3]) for i in range(5)]
    store.put_messages(batch)
    store.do_reput()
    codes = [tags_hash("TagA"), 0, tags_hash("TagB"), tags_hash("TagA"), 0]
    assert calls == [("TopicA", 2, i + 1, codes[i], f"key-{i}") for i in range(5)]
    store.close()


def test_batch_of_mixed_hosts_and_flags_is_stored_and_dispatched_per_record(tmp_path):
    store = MessageStore(tiny_config(str(tmp_path / "s")))
    store.load()
    v6 = (b"\x00" * 15 + b"\x01", 9876)
    batch = [make_msg(0, queue_id=1), make_msg(1, queue_id=1), make_msg(2, queue_id=1, sys_flag=0x4)]
    batch[1].born_host = v6
    r = store.put_messages(batch)
    assert r.is_ok and r.append is not None and r.append.msg_num == 3
    offs = r.append.batch_offsets
    assert offs is not None
    store.do_reput()
    # the prepared record takes a queue offset but gets no unit (as per-record puts do)
    assert store.get_max_offset_in_queue("TopicA", 1) == 2
    for k in (0, 1):
        got = decode_message(store.get_message_bytes_by_offset(offs[k]))  # type: ignore[arg-type]
        assert got.queue_offset == k and bool(got.sys_flag & 0x10) == (k == 1)  # BORNHOST_V6_FLAG
    assert store.get_commit_log_offset_in_queue("TopicA", 1, 1) == offs[1]
    store.close()


def test_index_write_failure_keeps_entries_and_retries_them(tmp_path, monkeypatch):
    """A new index file that cannot be created (ENOSPC) blocks reput's index writes; the
    entries are kept and written by the next reput, before anything newer."""
    import errno

    from pocketmq.store.index.file import IndexService

    store = MessageStore(tiny_config(str(tmp_path / "s"), max_index_num=21))  # 10 records a file
    store.load()
    real = IndexService._new_file
    fail = {"on": False}

    def new_file(self: IndexService, *args):  # type: ignore[no-untyped-def]
        if fail["on"]:
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(self, *args)

    monkeypatch.setattr(IndexService, "_new_file", new_file)
    for i in range(5):
        store.put_message(make_msg(i, keys=f"k{i}"))
    store.do_reput()
    fail["on"] = True
    store.put_messages([make_msg(i, keys=f"k{i}") for i in range(5, 30)])
    with pytest.raises(OSError):
        store.do_reput()
    assert store.dispatcher.index_backlog is not None
    with pytest.raises(OSError):
        store.do_reput()
    fail["on"] = False
    store.put_message(make_msg(30, keys="k30"))
    store.do_reput()
    assert store.dispatcher.index_backlog is None
    for i in range(31):
        assert len(store.query_message("TopicA", f"k{i}", 4, 0, FAR).messages) == 1, i
    store.close()


def test_wait_store_msg_ok_fast_check_agrees_with_get_property():
    rnd = random.Random(1)
    parts = ["WAIT", "XWAIT", "true", "TRUE", "false", "trueX", "a", "", "\x01", "\x02"]
    for _ in range(20_000):
        p = "".join(rnd.choice(parts) for _ in range(rnd.randint(0, 6)))
        value = get_property(p, "WAIT")
        expected = value is None or value.lower() == "true"
        assert MessageInner("t", b"", properties=p).wait_store_msg_ok == expected, repr(p)


@pytest.mark.parametrize("decode", [False, True])
def test_listener_without_needs_properties_gets_an_empty_mapping(tmp_path, decode):
    seen: list[tuple[int, int]] = []

    class L:
        needs_properties = False

        def arriving(self, topic, queue_id, logic_offset, tags_code, store_timestamp, bitmap, properties):  # type: ignore[no-untyped-def]
            seen.append((logic_offset, len(properties)))

    store = MessageStore(tiny_config(str(tmp_path / "s")))
    store.load()
    store.arriving_listener = L()
    store.put_message(make_msg(0))
    store.put_messages([make_msg(1), make_msg(2)])
    if decode:
        store.commitlog.appended.clear()
    store.do_reput()
    assert seen == [(1, 0), (2, 0), (3, 0)]
    store.close()


def test_put_batch_items_store_the_same_bytes_as_put_messages(tmp_path):
    """put_batch (shared template + (flag, body, props) items, bodies as memoryviews) writes
    byte for byte what put_messages writes for the equivalent MessageInners, across segment
    rolls, and dispatches the same CQ units and index entries; oversize items are refused."""
    stores = []
    for name in ("messages", "items"):
        clock = FakeClock()
        store = MessageStore(tiny_config(str(tmp_path / name)), clock=clock)
        store.load()
        stores.append(store)
    a, b = stores
    for round_ in range(20):  # 20 x 10 x ~1 KiB: several 64 KiB segments, BLANKs included
        msgs = [make_msg(round_ * 10 + i, body_size=700 + 37 * i, queue_id=1) for i in range(10)]
        for m in msgs:
            m.sys_flag = 0x40
            m.born_timestamp = 1_700_000_000_123
            m.properties = properties_to_string(m.properties)  # type: ignore[arg-type]
        ra = a.put_messages(msgs)
        data = b"".join(m.body for m in msgs)
        view, pos, items = memoryview(data), 0, []
        for m in msgs:
            items.append((m.flag, view[pos : pos + len(m.body)], m.properties))
            pos += len(m.body)
        rb = b.put_batch(msgs[0], items)
        assert ra.is_ok and rb.is_ok
        assert ra.append.batch_offsets == rb.append.batch_offsets  # type: ignore[union-attr]
        assert ra.append.logics_offset == rb.append.logics_offset  # type: ignore[union-attr]
    a.do_reput()
    b.do_reput()
    assert len(a.commitlog.mfq.files) > 2
    assert a.get_max_phy_offset() == b.get_max_phy_offset()
    for fa, fb in zip(a.commitlog.mfq.files, b.commitlog.mfq.files, strict=True):
        assert bytes(fa.mm[: fa.wrote_position]) == bytes(fb.mm[: fb.wrote_position])
    assert pull_all(a, "TopicA", 1) == pull_all(b, "TopicA", 1)
    ka = a.query_message("TopicA", "key-57", 10, 0, 1 << 62)
    kb = b.query_message("TopicA", "key-57", 10, 0, 1 << 62)
    assert ka.messages == kb.messages and len(kb.messages) == 1
    big = b.put_batch(msgs[0], [(0, b"x" * (b.config.max_message_size + 1), "")])
    assert big.status is PutMessageStatus.MESSAGE_ILLEGAL
    props = b.put_batch(msgs[0], [(0, b"x", "K\x01" + "v" * 40000)])
    assert props.status is PutMessageStatus.PROPERTIES_SIZE_EXCEEDED
    assert b.put_batch(msgs[0], []).status is PutMessageStatus.MESSAGE_ILLEGAL
    for s in stores:
        s.close()


def test_a_batch_put_reaches_arriving_batch_once_with_every_records_offset_and_tags_code(tmp_path):
    """A listener with needs_properties False and arriving_batch gets one call per batch put
    (records' offsets first+k, their tagsCodes); single puts still come through arriving."""
    calls: list[tuple] = []

    class L:
        needs_properties = False

        def arriving(self, topic, queue_id, logic_offset, tags_code, store_ts, bitmap, props):
            calls.append(("one", topic, queue_id, logic_offset, tags_code))

        def arriving_batch(self, topic, queue_id, first, codes, store_ts):
            assert store_ts > 0
            calls.append(("batch", topic, queue_id, first, list(codes)))

    store = MessageStore(tiny_config(str(tmp_path / "s")))
    store.load()
    store.arriving_listener = L()
    store.put_message(make_msg(0, queue_id=2))
    store.put_messages([make_msg(i, queue_id=2, tags=t) for i, t in enumerate(("TagA", None, "TagB"), 1)])
    store.do_reput()
    assert calls == [
        ("one", "TopicA", 2, 1, tags_hash("TagA")),
        ("batch", "TopicA", 2, 2, [tags_hash("TagA"), 0, tags_hash("TagB")]),
    ]
    store.close()


def test_put_message_pair_stores_what_two_puts_store(tmp_path, clock):
    """END_TRANSACTION's committed copy and op record in one call: the same bytes and results
    as two ``put_message`` calls; the second is not stored when the first is refused."""
    stores = [MessageStore(tiny_config(str(tmp_path / name)), clock=clock) for name in ("pair", "two")]
    pair, two = stores
    for s in stores:
        s.load()
    try:
        for i in range(20):
            a, b = make_msg(i, topic="TopicA", queue_id=i % 2), make_msg(i, topic="TopicOp", tags="d")
            first, second = pair.put_message_pair(a, b)
            assert second is not None
            assert (first, second) == (two.put_message(a), two.put_message(b))
        pair.do_reput()
        two.do_reput()
        assert _files(str(tmp_path / "pair"), "commitlog") == _files(str(tmp_path / "two"), "commitlog")
        assert pull_all(pair, "TopicOp", 0) == pull_all(two, "TopicOp", 0)
        # a refused first put: nothing stored, and no second put
        huge = make_msg(99, body_size=pair.config.max_message_size + 1)
        end = pair.get_max_phy_offset()
        first, second = pair.put_message_pair(huge, make_msg(100, topic="TopicOp"))
        assert first.status is PutMessageStatus.MESSAGE_ILLEGAL and second is None
        assert pair.get_max_phy_offset() == end
    finally:
        for s in stores:
            s.close()


@pytest.mark.parametrize("held", [False, True])
def test_a_listener_whose_held_queues_is_empty_is_not_called_for_a_batch_put(tmp_path, held):
    """A listener's ``held_queues`` view empty: neither a batch put (``arriving_batch`` or
    ``arriving``) nor a single put reaches it; once it holds something, both do."""
    calls: list[tuple] = []

    class L:
        needs_properties = False

        def __init__(self) -> None:
            self.held: dict[tuple[str, int], int] = {("TopicA", 2): 1} if held else {}
            self.held_queues = self.held.keys()

        def arriving(self, topic, queue_id, logic_offset, tags_code, store_ts, bitmap, props):
            calls.append(("one", topic, queue_id, logic_offset))

        def arriving_batch(self, topic, queue_id, first, codes, store_ts):
            calls.append(("batch", topic, queue_id, first, len(codes)))

    class Lazy(L):
        needs_properties = True  # (no arriving_batch call: arriving per record)

    for name, cls in (("b", L), ("r", Lazy)):
        calls.clear()
        store = MessageStore(tiny_config(str(tmp_path / name)))
        store.load()
        store.arriving_listener = cls()
        store.put_message(make_msg(0, queue_id=2))
        store.put_messages([make_msg(i, queue_id=2) for i in range(1, 4)])
        store.do_reput()
        if not held:
            assert calls == []
        elif cls is L:
            assert calls == [("one", "TopicA", 2, 1), ("batch", "TopicA", 2, 2, 3)]
        else:
            assert calls == [("one", "TopicA", 2, k) for k in range(1, 5)]
        store.close()


def test_the_listener_view_follows_the_listener_set_and_its_live_held_queues(tmp_path):
    """The dispatcher reads a listener's ``needs_properties`` and ``held_queues`` when it is
    set (not per reput slice): a replaced listener is read anew, None stops the calls, and the
    held view read then stays live (a queue held later is notified)."""
    calls: list[tuple] = []

    class Held:
        needs_properties = False

        def __init__(self) -> None:
            self.held: dict[tuple[str, int], int] = {}
            self.held_queues = self.held.keys()

        def arriving(self, topic, queue_id, logic_offset, tags_code, store_ts, bitmap, props):
            calls.append(("held", logic_offset, len(props)))

    class Reads:
        def arriving(self, topic, queue_id, logic_offset, tags_code, store_ts, bitmap, props):
            calls.append(("reads", logic_offset, props.get("KEYS")))

    store = MessageStore(tiny_config(str(tmp_path / "s")))
    store.load()
    try:
        held = Held()
        store.arriving_listener = held
        store.put_message(make_msg(0, queue_id=2))
        store.do_reput()
        assert calls == []  # nothing held
        held.held[("TopicA", 2)] = 1
        store.put_message(make_msg(1, queue_id=2))
        store.do_reput()
        assert calls == [("held", 2, 0)]
        store.arriving_listener = Reads()
        store.put_message(make_msg(2, queue_id=2))
        store.do_reput()
        assert calls[1:] == [("reads", 3, "key-2")]
        store.arriving_listener = None
        store.put_message(make_msg(3, queue_id=2))
        store.do_reput()
        assert len(calls) == 2 and store.dispatcher.reput_from_offset == store.get_max_phy_offset()
    finally:
        store.close()


def test_one_record_a_call_is_dispatched_by_reput_one_unit_before_notice(tmp_path, monkeypatch):
    """At one send in flight (a reput call per put) ``reput_one`` takes the SDK's common record
    (UNIQ_KEY then CLUSTER, a new millisecond per record): the held pull is told after its
    unit is written and readable; a notice that raised leaves the record to the next call,
    its unit and index entry once."""
    from pocketmq.store.dispatch import dispatcher as dispatcher_mod

    taken: list[bool] = []
    real = dispatcher_mod.reput_one

    def spy(d, pending):
        got = real(d, pending)
        taken.append(got)
        return got

    monkeypatch.setattr(dispatcher_mod, "reput_one", spy)
    seen: list[tuple[int, int]] = []
    fail = [False]

    class Held:
        needs_properties = False
        held_queues = {("TopicU", 1): 1}.keys()

        def arriving(self, topic, queue_id, logic_offset, tags_code, store_ts, bitmap, props):
            if fail[0]:
                fail[0] = False
                raise RuntimeError("listener failed")
            seen.append((logic_offset, store.get_max_offset_in_queue(topic, queue_id)))

    store = MessageStore(tiny_config(str(tmp_path / "s"), max_index_num=200))
    store.load()
    try:
        store.arriving_listener = Held()
        head = "7F00000100011B4AAC20123456789A"
        for i in range(40):
            fail[0] = i == 20
            key = f"{head}{i // 4:02X}{i % 4:02X}"
            props = f"UNIQ_KEY\x01{key}\x02CLUSTER\x01DefaultCluster"
            msg = MessageInner(
                topic="TopicU", body=b"x" * 64, queue_id=1, properties=props,
                born_timestamp=1, born_host=BORN_HOST, store_host=STORE_HOST,
            )  # fmt: skip
            assert store.put_message(msg).is_ok
            try:
                assert store.do_reput() == 1
            except RuntimeError:
                assert i == 20
                assert store.do_reput() == 1  # the record retried whole
        assert taken.count(True) >= 35
        assert seen == [(k, k) for k in range(1, 41)]  # each notice after its unit
        assert store.dispatcher.reput_from_offset == store.get_max_phy_offset()
        for i in range(40):
            key = f"{head}{i // 4:02X}{i % 4:02X}"
            assert len(store.query_message("TopicU", key, 8, 0, FAR).messages) == 1
    finally:
        store.close()
