"""CommitLog appends: stored bytes, rolling with BLANK, batches, refusals, HA seam."""

from __future__ import annotations

import os
import struct

import pytest

from pocketmq.remoting.protocol.message import (
    BLANK_MAGIC_CODE,
    MessageConst,
    decode_message,
    encode_message,
    properties_to_string,
)
from pocketmq.store import GetMessageStatus, MessageInner, PutMessageStatus
from pocketmq.store.log.layout import file_name_of
from pocketmq.store.results import AppendResult, PutResult

from .conftest import BORN_HOST, STORE_HOST, make_msg, pull_all


def test_stored_record_is_exactly_the_reference_layout(open_store, clock):
    store = open_store(clock=clock)
    msg = make_msg(7, queue_id=2, extra={"X": "y"})
    r = store.put_message(msg)
    assert r.status is PutMessageStatus.PUT_OK
    a = r.append
    assert a is not None and a.wrote_offset == 0 and a.logics_offset == 0 and a.msg_num == 1
    assert a.store_timestamp == clock.now
    raw = store.get_message_bytes_by_offset(0)
    expected = encode_message(
        topic="TopicA", body=msg.body, properties=properties_to_string(msg.properties), queue_id=2,  # type: ignore[arg-type]
        flag=7, queue_offset=0, commit_log_offset=0, born_timestamp=msg.born_timestamp, born_host=BORN_HOST,
        store_timestamp=clock.now, store_host=STORE_HOST,
    )  # fmt: skip
    assert raw == expected
    assert a.wrote_bytes == len(expected)
    assert a.msg_id == "0A00000100002A9F0000000000000000"
    ext = store.look_message_by_offset(0)
    assert ext is not None and ext.msg_id == a.msg_id and ext.properties["X"] == "y"
    # put_message fills the result's slots itself: every field set, equal to what __init__ builds;
    # the stored put is its own append (one object), read as a PutResult
    assert r == AppendResult.of(0, len(expected), clock.now, 0, 1, STORE_HOST)
    assert r.__class__ is AppendResult and r.append is r and r.is_ok and isinstance(r, PutResult)
    assert r != AppendResult.of(0, len(expected), clock.now, 1, 1, STORE_HOST)
    assert "logics_offset=0" in repr(r)
    wrapped = PutResult(PutMessageStatus.FLUSH_DISK_TIMEOUT, r)  # (a flush timeout's)
    assert (
        wrapped.append is r and wrapped.is_ok and wrapped == PutResult(PutMessageStatus.FLUSH_DISK_TIMEOUT, r)
    )


@pytest.mark.parametrize("flush", ["ASYNC_FLUSH", "SYNC_FLUSH"])
def test_properties_length_field_around_the_table_bound(open_store, clock, tmp_path, flush):
    """``put_message`` takes the 2-byte properties length from ``PROPS_LENS`` below 1024 bytes
    and packs it above: both give encode_message's record, mapped and written through."""
    store = open_store(str(tmp_path / flush), clock=clock, flush_disk_type=flush)
    lens = set()
    for pad in (0, 900, 1000, 1023 - 60, 1100, 5000):
        msg = make_msg(1, extra={"P": "x" * pad})
        props = properties_to_string(msg.properties)  # type: ignore[arg-type]
        lens.add(len(props.encode()))
        r = store.put_message(msg)
        assert r.status is PutMessageStatus.PUT_OK and r.append is not None
        expected = encode_message(
            topic="TopicA", body=msg.body, properties=props, queue_id=0, flag=1,
            queue_offset=r.append.logics_offset, commit_log_offset=r.append.wrote_offset,
            born_timestamp=msg.born_timestamp, born_host=BORN_HOST, store_timestamp=clock.now, store_host=STORE_HOST,
        )  # fmt: skip
        assert store.get_message_bytes_by_offset(r.append.wrote_offset) == expected
    assert min(lens) < 1024 < max(lens)


def test_queue_offsets_are_per_topic_and_queue(open_store):
    store = open_store()
    got = [store.put_message(make_msg(i, topic=t, queue_id=q)).append.logics_offset for i, (t, q) in
           enumerate([("A", 0), ("A", 0), ("A", 1), ("B", 0), ("A", 0), ("B", 0)])]  # type: ignore[union-attr]  # fmt: skip
    assert got == [0, 1, 0, 0, 2, 1]


def test_queue_offsets_survive_the_key_cache_deleted_entries_and_a_rebuilt_table(open_store):
    # puts look their queue's counter up by a cached key tuple (put_hooks.queue_key): the
    # table holds that very tuple, and an entry deleted or a table rebuilt elsewhere (with
    # other, equal tuples) still counts right
    store = open_store()
    cl = store.commitlog
    offs = [store.put_message(make_msg(i, topic=t, queue_id=q)).append.logics_offset for i, (t, q) in
            enumerate([("A", 0), ("A", 0), ("A", 1), ("A", 0)])]  # type: ignore[union-attr]  # fmt: skip
    assert offs == [0, 1, 0, 2]
    (key,) = [k for k in cl.topic_queue_table if k == ("A", 0)]
    assert key is cl._queue_keys["A"][0]
    # a counter set under another equal tuple before the queue's first put is moved under its key
    cl.topic_queue_table[("B", 3)] = 7
    assert store.put_message(make_msg(9, topic="B", queue_id=3)).append.logics_offset == 7  # type: ignore[union-attr]
    (key,) = [k for k in cl.topic_queue_table if k == ("B", 3)]
    assert key is cl._queue_keys["B"][3] and cl.topic_queue_table[key] == 8
    store.delete_topics(["A"])
    assert ("A", 0) not in cl.topic_queue_table
    assert store.put_message(make_msg(5, queue_id=0, topic="A")).append.logics_offset == 0  # type: ignore[union-attr]
    cl.rebuild_topic_queue_table({("A", 0): 40, ("A", 1): 9})
    got = [store.put_message(make_msg(i, topic="A", queue_id=q)).append.logics_offset for i, q in
           enumerate([0, 1, 0, 2])]  # type: ignore[union-attr]  # fmt: skip
    assert got == [40, 9, 41, 0]
    assert cl.topic_queue_table == {("A", 0): 42, ("A", 1): 10, ("A", 2): 1}


def test_rolling_writes_a_blank_and_continues_in_the_next_segment(open_store):
    store = open_store()
    size = 64 * 1024
    offsets = []
    for i in range(400):
        r = store.put_message(make_msg(i, body_size=500))
        assert r.status is PutMessageStatus.PUT_OK
        offsets.append((r.append.wrote_offset, r.append.wrote_bytes))  # type: ignore[union-attr]
    files = sorted(os.listdir(store.config.commit_log_dir))
    assert files == [file_name_of(i * size) for i in range(len(files))] and len(files) >= 3
    for (off, n), (nxt, _) in zip(offsets, offsets[1:], strict=False):
        if nxt != off + n:  # rolled: the next record starts a new segment
            assert nxt % size == 0 and nxt == off - off % size + size
            tail = size - (off + n) % size
            blank = store.commitlog.get_message(off + n, 8)
            assert struct.unpack(">ii", blank) == (tail, BLANK_MAGIC_CODE)
            assert tail < n + 8
    # every record is readable by offset and a scan across segments sees them all
    for i, (off, _) in enumerate(offsets):
        assert store.look_message_by_offset(off).queue_offset == i  # type: ignore[union-attr]
    store.do_reput()
    assert store.get_max_offset_in_queue("TopicA", 0) == 400


def test_batch_put_assigns_consecutive_offsets_in_one_segment(open_store):
    store = open_store()
    store.put_message(make_msg(0))
    batch = [make_msg(i) for i in range(1, 33)]
    r = store.put_messages(batch)
    assert r.status is PutMessageStatus.PUT_OK
    a = r.append
    assert a is not None and a.msg_num == 32 and a.logics_offset == 1
    ids = a.msg_id.split(",")
    assert len(ids) == 32 and ids[0].endswith(f"{a.wrote_offset:016X}")
    store.do_reput()
    g = store.get_message("g", "TopicA", 0, 1, 32)
    assert g.status is GetMessageStatus.FOUND and g.message_count == 9  # to the end of the 10-unit CQ file
    assert g.next_begin_offset == 10
    msgs = pull_all(store, "TopicA", 0, 1)
    assert [m.queue_offset for m in msgs] == list(range(1, 33))
    assert [m.body for m in msgs] == [m.body for m in batch]
    assert sum(m.store_size for m in msgs) == a.wrote_bytes


def test_batch_that_does_not_fit_rolls_whole(open_store):
    store = open_store()
    while store.commitlog.max_offset < 60 * 1024:
        store.put_message(make_msg(0, body_size=1000))
    r = store.put_messages([make_msg(i, body_size=1000) for i in range(8)])
    assert r.append is not None and r.append.wrote_offset == 64 * 1024
    assert len({o // (64 * 1024) for o in r.append.batch_offsets}) == 1  # type: ignore[union-attr]


def test_refusals_have_clear_statuses(open_store):
    store = open_store(max_message_size=1000)
    cases = [
        (make_msg(0, topic="t" * 128), PutMessageStatus.MESSAGE_ILLEGAL),
        (make_msg(0, topic=""), PutMessageStatus.MESSAGE_ILLEGAL),
        (make_msg(0, body_size=1001), PutMessageStatus.MESSAGE_ILLEGAL),
        (make_msg(0, extra={"big": "x" * 40000}), PutMessageStatus.PROPERTIES_SIZE_EXCEEDED),
    ]
    for msg, status in cases:
        assert store.put_message(msg).status is status
        assert not store.put_message(msg).is_ok
    assert (
        store.put_messages([make_msg(0, queue_id=0), make_msg(1, queue_id=1)]).status
        is PutMessageStatus.MESSAGE_ILLEGAL
    )
    assert store.put_messages([]).status is PutMessageStatus.MESSAGE_ILLEGAL
    assert store.get_max_phy_offset() == 0  # nothing was written


def test_record_larger_than_a_segment_is_illegal(open_store):
    store = open_store(max_message_size=1 << 20)
    assert store.put_message(make_msg(0, body_size=70_000)).status is PutMessageStatus.MESSAGE_ILLEGAL


def test_slave_role_refuses_puts(open_store):
    store = open_store(broker_role="SLAVE")
    assert store.put_message(make_msg(0)).status is PutMessageStatus.SERVICE_NOT_AVAILABLE
    assert store.put_now(make_msg(0)).status is PutMessageStatus.SERVICE_NOT_AVAILABLE


def test_put_now_follows_put_message_when_writability_changes(open_store):
    # put_now (the send processor's put) is put_message's twin: the CommitLog's put while
    # writable, the refusal while disk-full, the put again once space is back
    store = open_store()
    assert store.put_now(make_msg(0)).is_ok
    store.disk_full = True
    assert store.put_now(make_msg(1)).status is PutMessageStatus.SERVICE_NOT_AVAILABLE
    assert store.put_message(make_msg(1)).status is PutMessageStatus.SERVICE_NOT_AVAILABLE
    store.disk_full = False
    r = store.put_now(make_msg(2))
    assert r.is_ok and r.append is not None and r.append.logics_offset == 1


def test_properties_string_passes_through_verbatim(open_store):
    store = open_store()
    props = "TAGS\x01T\x02KEYS\x01a b\x02"  # C++/ali-ons style trailing separator
    store.put_message(MessageInner(topic="S", body=b"x", properties=props))
    raw = store.get_message_bytes_by_offset(0)
    assert raw is not None and raw.endswith(props.encode())
    assert decode_message(raw).keys == "a b"


def test_prepared_transaction_records_are_not_queued(open_store):
    store = open_store()
    half = make_msg(0, sys_flag=0x4)
    r = store.put_message(half)
    assert r.append.logics_offset == 0  # type: ignore[union-attr]
    store.put_message(make_msg(1))
    store.do_reput()
    assert store.get_max_offset_in_queue("TopicA", 0) == 1
    g = store.get_message("g", "TopicA", 0, 0, 10)
    assert decode_message(g.body).uniq_key == make_msg(1).properties[MessageConst.UNIQ_KEY]  # type: ignore[index]


def test_ipv6_hosts_set_the_flags(open_store):
    store = open_store()
    msg = make_msg(0)
    msg.born_host = (bytes(15) + b"\x01", 5)
    store.put_message(msg)
    ext = store.look_message_by_offset(0)
    assert ext is not None and ext.born_host == ("::1", 5) and ext.sys_flag & 0x10


@pytest.mark.parametrize("slave_flush", ["ASYNC_FLUSH", "SYNC_FLUSH"])  # (mapped / pwrite writes)
def test_ha_append_seam_replicates_byte_for_byte(open_store, tmp_path, slave_flush):
    master = open_store()
    for i in range(300):
        master.put_message(make_msg(i, queue_id=i % 3, body_size=300))
    master.do_reput()
    slave = open_store(str(tmp_path / "slave"), broker_role="SLAVE", flush_disk_type=slave_flush)
    assert slave.commitlog.write_through is (slave_flush == "SYNC_FLUSH")
    off = 0
    while off < master.get_max_phy_offset():
        chunk = master.get_commit_log_data(off, 777)  # odd chunks cut records anywhere
        assert chunk
        assert slave.append_to_commit_log(off, chunk)
        slave.do_reput()
        off += len(chunk)
    assert not slave.append_to_commit_log(off + 1, b"x")  # offset mismatch
    for q in range(3):
        assert slave.get_max_offset_in_queue("TopicA", q) == 100
        a = master.get_message("g", "TopicA", q, 0, 32)
        b = slave.get_message("g", "TopicA", q, 0, 32)
        assert a.body == b.body and a.message_count == b.message_count > 0


def test_segments_from_walks_the_files_from_an_offset_up_to_a_bound(open_store):
    store = open_store()
    size = 64 * 1024
    for i in range(300):  # about 180 KiB: more than two segments
        assert store.put_message(make_msg(i, body_size=500)).status is PutMessageStatus.PUT_OK
    mfq = store.commitlog.mfq
    starts = [mf.file_from_offset for mf in mfq.files]
    assert len(starts) >= 3
    assert [mf.file_from_offset for mf in mfq.segments_from(0)] == starts
    assert [mf.file_from_offset for mf in mfq.segments_from(size + 17)] == starts[1:]
    assert [mf.file_from_offset for mf in mfq.segments_from(10, stop=size)] == starts[:1]
    assert [mf.file_from_offset for mf in mfq.segments_from(10, stop=size + 1)] == starts[:2]
    assert list(mfq.segments_from(len(starts) * size)) == []


def test_properties_ending_in_nul_are_refused_so_a_torn_tail_is_recognisable(open_store):
    # recovery takes a last record whose properties end in zeros for a torn write (T3, issue 23);
    # a put never stores such a record, so no real one is ever cut
    store = open_store()
    msg = make_msg(0, extra={"K": "v\x00"})
    assert store.put_message(msg).status is PutMessageStatus.PROPERTIES_SIZE_EXCEEDED
    assert store.put_messages([make_msg(1), make_msg(2, extra={"K": "\x00"})]).status is (
        PutMessageStatus.PROPERTIES_SIZE_EXCEEDED
    )
    assert store.put_message(make_msg(3, extra={"K": "v"})).is_ok


def test_sync_flush_writes_through_the_fd_the_same_bytes_as_the_mapping(open_store, clock, tmp_path):
    """SYNC_FLUSH puts ``pwrite`` to the segment's fd (``CommitLog.write_through``): the
    segments hold the same bytes as ASYNC_FLUSH's mapped writes, across rolls (BLANK) and
    batch puts, and reads through the mapping see them at once."""
    stores = [
        open_store(str(tmp_path / name), clock=clock, flush_disk_type=flush)
        for name, flush in (("mapped", "ASYNC_FLUSH"), ("fd", "SYNC_FLUSH"))
    ]
    assert [s.commitlog.write_through for s in stores] == [False, True]
    read_back: list[list[bytes | None]] = [[], []]
    for store, seen in zip(stores, read_back, strict=True):
        for i in range(200):
            msg = make_msg(i, queue_id=i % 3, body_size=500 + i)
            if i % 10 == 9:
                assert (
                    store.put_messages([msg, make_msg(i, queue_id=i % 3)]).status is PutMessageStatus.PUT_OK
                )
            else:
                r = store.put_message(msg)
                assert r.status is PutMessageStatus.PUT_OK
                assert r.append is not None
                seen.append(store.get_message_bytes_by_offset(r.append.wrote_offset))
    dirs = [s.config.commit_log_dir for s in stores]
    names = [sorted(os.listdir(d)) for d in dirs]
    assert names[0] == names[1] and len(names[0]) >= 3
    for name in names[0]:
        with open(os.path.join(dirs[0], name), "rb") as a, open(os.path.join(dirs[1], name), "rb") as b:
            assert a.read() == b.read()
    assert read_back[0] == read_back[1] and None not in read_back[1]


class _Latency:
    """What ``CommitLog.latency`` is given (``broker.metrics.PutLatency``'s fields)."""

    def __init__(self) -> None:
        self.bits = [0] * 65
        self.sum_ns = 0
        self.max_ns = 0


def test_every_put_message_is_timed_and_failures_counted_once(open_store):
    """``put_message`` is the CommitLog's own method while the store is writable: it times each
    put (stored, failed, or refused by the store) and counts each failure once."""
    store = open_store(max_message_size=1000)
    lat = store.commitlog.latency = _Latency()
    failed = store.stats.put_message_failed_times
    assert store.put_message(make_msg(0)).is_ok
    assert store.put_message(make_msg(0, body_size=1001)).status is PutMessageStatus.MESSAGE_ILLEGAL
    first, second = store.put_message_pair(make_msg(1), make_msg(2))
    assert first.is_ok and second is not None and second.is_ok
    assert (sum(lat.bits), store.stats.put_message_failed_times - failed) == (4, 1)
    assert lat.max_ns <= lat.sum_ns and lat.sum_ns >= 0
    store.disk_full = True  # refused by the store: timed as taking no time, counted failed
    assert store.put_message(make_msg(3)).status is PutMessageStatus.SERVICE_NOT_AVAILABLE
    assert (sum(lat.bits), lat.bits[0] >= 1, store.stats.put_message_failed_times - failed) == (
        5,
        True,
        2,
    )
    store.disk_full = False
    assert store.put_message(make_msg(3)).is_ok and sum(lat.bits) == 6


@pytest.mark.parametrize("flush", ["ASYNC_FLUSH", "SYNC_FLUSH"])  # (mapped / pwrite writes)
def test_put_prefix_of_every_host_family_and_prepared_offset_is_the_reference_layout(
    open_store, clock, tmp_path, flush
):
    """``put_message``'s record prefix is encode_message's for every host family, a prepared
    offset 0, positive or negative, the same host object again and another store host, mapped
    and written through (the put packs the prefix inline: the byte-for-byte guard for any
    change of how it packs those fields)."""
    store = open_store(str(tmp_path / flush), clock=clock, flush_disk_type=flush)
    v6 = (bytes(15) + b"\x01", 7)
    other = (b"\x0a\x00\x00\x02", -2)
    cases = [
        (BORN_HOST, STORE_HOST, 0, 0),
        (BORN_HOST, STORE_HOST, 123_456_789_012, 0),  # the same host object again
        (BORN_HOST, other, 0, 0),  # another host
        (v6, STORE_HOST, -5, 0),
        (BORN_HOST, v6, 0, 1),  # an IPv6 store host
        (v6, (bytes(16), 10911), 1 << 40, 0),
        (BORN_HOST, STORE_HOST, 0, 1),
        (BORN_HOST, STORE_HOST, 0, 0),
    ]
    for i, (born, stored, prepared, step) in enumerate(cases):
        clock.advance(step)
        msg = make_msg(i, extra={"I": str(i)})
        msg.born_host, msg.store_host, msg.prepared_transaction_offset = born, stored, prepared
        msg.reconsume_times = i
        r = store.put_message(msg)
        assert r.status is PutMessageStatus.PUT_OK and r.append is not None
        expected = encode_message(
            topic="TopicA", body=msg.body, properties=properties_to_string(msg.properties), queue_id=0,  # type: ignore[arg-type]
            flag=i, queue_offset=r.append.logics_offset, commit_log_offset=r.append.wrote_offset,
            born_timestamp=msg.born_timestamp, born_host=born, store_timestamp=clock.now, store_host=stored,
            reconsume_times=i, prepared_transaction_offset=prepared,
        )  # fmt: skip
        assert store.get_message_bytes_by_offset(r.append.wrote_offset) == expected, i


@pytest.mark.parametrize("flush", ["ASYNC_FLUSH", "SYNC_FLUSH"])
def test_record_shapes_and_shapes_past_the_cap_store_encode_message_bytes(
    open_store, clock, tmp_path, flush, monkeypatch
):
    """``put_message`` packs a record with one Struct per (prefix, topic head, body length,
    properties length) shape put twice in a row (``layout.put_shape``; a shape seen once, as
    bodies of ever new sizes, makes none and is joined); past ``PUT_SHAPES_MAX`` shapes it packs the
    prefix and joins the rest; writing through, it gathers the parts. All give encode_message's bytes
    for empty to 16 KiB bodies, properties around the 1024-byte table bound, IPv6 hosts, topics
    of other lengths, a shape seen again (the last put's kept: ``_shape_rec``), shapes that
    differ from the last only in properties length or only in topic; the cap holds."""
    from pocketmq.store.log import layout

    layout.PUT_SHAPES.clear()
    store = open_store(str(tmp_path / flush), clock=clock, flush_disk_type=flush)
    v6 = (bytes(15) + b"\x01", 7)
    cases = [
        ("TopicA", 100, 0, BORN_HOST), ("TopicA", 100, 0, BORN_HOST), ("T", 0, 0, BORN_HOST),
        ("TopicA", 1, 1100, v6), ("Topic" * 20, 16384, 0, BORN_HOST), ("TopicA", 1024, 960, BORN_HOST),
        ("TopicA", 1024, 961, BORN_HOST), ("TopicC", 1024, 961, BORN_HOST),  # only plen, then only the topic
    ]  # fmt: skip
    for cap in (64, 0):  # every shape kept, then none (a shape already kept still packs by its Struct)
        monkeypatch.setattr(layout, "PUT_SHAPES_MAX", cap)
        for i, (topic, size, pad, born) in enumerate(cases + [("TopicB", 333 + cap, 5, BORN_HOST)] * 2):
            msg = make_msg(i, topic=topic, body_size=size, extra={"P": "x" * pad})
            msg.born_host = born
            r = store.put_message(msg)
            assert r.status is PutMessageStatus.PUT_OK and r.append is not None
            expected = encode_message(
                topic=topic, body=msg.body, properties=properties_to_string(msg.properties), queue_id=0,  # type: ignore[arg-type]
                flag=i, queue_offset=r.append.logics_offset, commit_log_offset=r.append.wrote_offset,
                born_timestamp=msg.born_timestamp, born_host=born, store_timestamp=clock.now, store_host=STORE_HOST,
            )  # fmt: skip
            assert store.get_message_bytes_by_offset(r.append.wrote_offset) == expected, (cap, i)
        # a Struct only for the shapes put twice in a row (the first two puts', then TopicB's
        # while the cap allows); writing through packs none
        assert len(layout.PUT_SHAPES) == (2 if flush == "ASYNC_FLUSH" else 0)
