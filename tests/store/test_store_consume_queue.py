"""ConsumeQueue units under rolling, get_message statuses and limits, filters, offset-by-time, delay tagsCode."""

from __future__ import annotations

import os
import pathlib
import struct

from pocketmq.remoting.protocol.message import decode_message, decode_messages, java_string_hash
from pocketmq.store import GetMessageStatus, MessageInner
from pocketmq.store.log.layout import CQ_UNIT, SCHEDULE_TOPIC, file_name_of
from pocketmq.store.results import GetResult, MissedGetResult

from .conftest import make_msg, pull_all


def _cq_units(store, topic, qid):
    d = os.path.join(store.config.consume_queue_dir, topic, str(qid))
    data = b"".join(pathlib.Path(d, n).read_bytes() for n in sorted(os.listdir(d)))
    return [u for u in CQ_UNIT.iter_unpack(data) if u[1] > 0]


def test_units_match_the_commitlog_across_cq_and_commitlog_rolling(open_store):
    store = open_store()
    expected: dict[int, list[tuple[int, int, int]]] = {0: [], 1: [], 2: []}
    for i in range(600):
        q = i % 3
        r = store.put_message(make_msg(i, queue_id=q, body_size=150, tags=f"T{i % 5}"))
        a = r.append
        expected[q].append((a.wrote_offset, a.wrote_bytes, java_string_hash(f"T{i % 5}")))  # type: ignore[union-attr]
    store.do_reput()
    assert len(os.listdir(store.config.commit_log_dir)) > 1
    for q in range(3):
        assert _cq_units(store, "TopicA", q) == expected[q]  # the 20-byte units, byte for byte
        names = sorted(os.listdir(os.path.join(store.config.consume_queue_dir, "TopicA", str(q))))
        assert names == [file_name_of(i * 200) for i in range(20)]
        msgs = pull_all(store, "TopicA", q)
        assert [m.queue_offset for m in msgs] == list(range(200))
        assert [m.commit_log_offset for m in msgs] == [u[0] for u in expected[q]]


def test_get_message_statuses_follow_java(open_store):
    store = open_store()
    g = store.get_message("g", "Nope", 0, 0, 32)
    assert (g.status, g.next_begin_offset, g.min_offset, g.max_offset) == (
        GetMessageStatus.NO_MESSAGE_IN_QUEUE,
        0,
        0,
        0,
    )
    for i in range(25):
        store.put_message(make_msg(i))
    store.do_reput()
    g = store.get_message("g", "TopicA", 0, 25, 32)
    assert (g.status, g.next_begin_offset, g.max_offset) == (GetMessageStatus.OFFSET_OVERFLOW_ONE, 25, 25)
    g = store.get_message("g", "TopicA", 0, 99, 32)
    assert (g.status, g.next_begin_offset) == (GetMessageStatus.OFFSET_OVERFLOW_BADLY, 0)  # min == 0 -> min
    g = store.get_message("g", "TopicA", 0, 3, 4)
    assert (g.status, g.message_count, g.next_begin_offset) == (GetMessageStatus.FOUND, 4, 7)
    assert [m.queue_offset for m in decode_messages(g.body)] == [3, 4, 5, 6]
    assert not g.suggest_pulling_from_slave
    # cut the queue's start as cleanup would: OFFSET_TOO_SMALL, and BADLY now points at max
    cq = store.cq_table.find("TopicA", 0)
    cq.min_logic_offset = 10
    g = store.get_message("g", "TopicA", 0, 2, 32)
    assert (g.status, g.next_begin_offset) == (GetMessageStatus.OFFSET_TOO_SMALL, 10)
    g = store.get_message("g", "TopicA", 0, 40, 32)
    assert (g.status, g.next_begin_offset) == (GetMessageStatus.OFFSET_OVERFLOW_BADLY, 25)


def test_offset_found_null_when_the_cq_file_is_gone(open_store):
    store = open_store()
    for i in range(25):
        store.put_message(make_msg(i))
    store.do_reput()
    cq = store.cq_table.find("TopicA", 0)
    first = cq.mfq.delete_first(1)[0]
    first.destroy()
    g = store.get_message("g", "TopicA", 0, 3, 32)
    assert (g.status, g.next_begin_offset) == (GetMessageStatus.OFFSET_FOUND_NULL, 10)


def test_message_was_removing_when_commitlog_segment_deleted(open_store):
    store = open_store()
    for i in range(300):
        store.put_message(make_msg(i, body_size=600))
    store.do_reput()
    first = store.commitlog.mfq.delete_first(1)[0]
    first.destroy()
    g = store.get_message("g", "TopicA", 0, 0, 32)
    assert g.status is GetMessageStatus.MESSAGE_WAS_REMOVING
    assert g.next_begin_offset == 10 and g.body == b""
    # a consumer following next_begin_offset gets every surviving message
    survivors = pull_all(store, "TopicA", 0)
    assert survivors and survivors[0].commit_log_offset >= 64 * 1024
    assert [m.queue_offset for m in survivors] == list(range(survivors[0].queue_offset, 300))


class TagFilter:
    def __init__(self, *tags):
        self.codes = {java_string_hash(t) for t in tags}
        self.cl_calls = 0

    def is_matched_by_consume_queue(self, tags_code):
        return tags_code in self.codes

    def is_matched_by_commit_log(self, buf):
        self.cl_calls += 1
        return decode_message(buf).queue_offset % 2 == 0  # a property-style second stage


def test_filters_on_consume_queue_and_commit_log(open_store):
    store = open_store(mapped_file_size_consume_queue=100 * 20)
    for i in range(60):
        store.put_message(make_msg(i, tags="A" if i % 3 == 0 else "B"))
    store.do_reput()
    f = TagFilter("A")
    g = store.get_message("g", "TopicA", 0, 0, 32, message_filter=f)
    assert g.status is GetMessageStatus.FOUND
    assert [m.queue_offset for m in decode_messages(g.body)] == [i for i in range(60) if i % 6 == 0]
    assert g.next_begin_offset == 60 and f.cl_calls == 20
    g = store.get_message("g", "TopicA", 0, 0, 32, message_filter=TagFilter("C"))
    assert (g.status, g.next_begin_offset, g.body) == (GetMessageStatus.NO_MATCHED_MESSAGE, 60, b"")


def test_transfer_limits_count_and_bytes(open_store):
    store = open_store(mapped_file_size_consume_queue=100 * 20)
    for i in range(60):
        store.put_message(make_msg(i, body_size=1000))
    store.do_reput()
    g = store.get_message("g", "TopicA", 0, 0, 64)
    assert g.message_count == 32  # maxTransferCountOnMessageInMemory
    g = store.get_message("g", "TopicA", 0, 0, 64, max_bytes=5000)
    assert g.message_count == 4 and len(g.body) <= 5000
    g = store.get_message("g", "TopicA", 0, 0, 64, max_bytes=10)
    assert g.message_count == 1  # the first message always goes
    store2_limits = store.config.model_copy(update={"max_transfer_bytes_on_message_in_memory": 3000})
    store.config = store2_limits
    g = store.get_message("g", "TopicA", 0, 0, 64)
    assert g.message_count == 2 and g.next_begin_offset == 2


def test_body_is_one_contiguous_copy_of_records(open_store):
    store = open_store()
    for i in range(20):
        store.put_message(make_msg(i, queue_id=i % 2))
    store.do_reput()
    g = store.get_message("g", "TopicA", 1, 0, 32)
    assert isinstance(g.body, bytes)
    raws = [store.get_message_bytes_by_offset(o) for o in g.message_offsets]
    assert g.body == b"".join(raws)  # type: ignore[arg-type]


def test_offset_in_queue_by_time_is_a_lower_bound(open_store, clock):
    store = open_store(clock=clock)
    stamps = []
    for i in range(45):
        stamps.append(clock.now)
        store.put_message(make_msg(i))
        clock.advance(1000 if i % 5 == 4 else 0)
    store.do_reput()
    by_time = store.get_offset_in_queue_by_time
    assert by_time("TopicA", 0, 0) == 0
    assert by_time("TopicA", 0, stamps[0]) == 0
    assert by_time("TopicA", 0, stamps[7]) == 5  # first of that second
    assert by_time("TopicA", 0, stamps[7] + 1) == 10
    assert by_time("TopicA", 0, stamps[-1] + 1) == 45
    assert by_time("Other", 0, 5) == 0
    assert store.get_earliest_message_time("TopicA", 0) == stamps[0]
    assert store.get_message_store_timestamp("TopicA", 0, 12) == stamps[12]
    assert store.get_message_store_timestamp("TopicA", 0, 99) == -1


def test_schedule_topic_tags_code_is_the_delivery_time(open_store, clock):
    store = open_store(clock=clock, message_delay_level="1s 5s 2m")
    cases = [("1", 1000), ("2", 5000), ("3", 120_000), ("9", 120_000)]  # levels above max clamp
    for i, (level, _) in enumerate(cases):
        msg = make_msg(i, topic=SCHEDULE_TOPIC, queue_id=0, tags="TagA", extra={"DELAY": level})
        store.put_message(msg)
    store.put_message(make_msg(9, topic=SCHEDULE_TOPIC, tags="TagA", extra={"DELAY": "x"}))  # bad level
    store.do_reput()
    units = _cq_units(store, SCHEDULE_TOPIC, 0)
    assert [u[2] for u in units[:4]] == [clock.now + d for _, d in cases]
    assert units[4][2] == java_string_hash("TagA")
    # a normal topic with DELAY keeps the tag hash: the broker rewrites delayed messages
    store.put_message(make_msg(10, topic="Plain", extra={"DELAY": "1"}))
    store.do_reput()
    assert _cq_units(store, "Plain", 0)[0][2] == java_string_hash("TagA")


def test_untagged_messages_have_tags_code_zero(open_store):
    store = open_store()
    store.put_message(MessageInner(topic="T", body=b"x"))
    store.do_reput()
    assert _cq_units(store, "T", 0) == [(0, store.get_max_phy_offset(), 0)]


def test_arriving_listener_is_called_after_dispatch(open_store):
    calls = []

    class L:
        def arriving(self, topic, queue_id, logic_offset, tags_code, store_timestamp, bitmap, properties):
            calls.append((topic, queue_id, logic_offset, tags_code, properties.get("KEYS")))

    store = open_store()
    store.arriving_listener = L()
    store.put_message(make_msg(0, queue_id=3))
    store.put_message(make_msg(1, queue_id=3, sys_flag=0x4))  # prepared: not queued, no call
    assert calls == []
    store.do_reput()
    assert calls == [("TopicA", 3, 1, java_string_hash("TagA"), "key-0")]


def test_commit_log_offset_in_queue_and_min_max(open_store):
    store = open_store()
    offs = [store.put_message(make_msg(i)).append.wrote_offset for i in range(5)]  # type: ignore[union-attr]
    store.do_reput()
    assert [store.get_commit_log_offset_in_queue("TopicA", 0, i) for i in range(5)] == offs
    assert store.get_commit_log_offset_in_queue("TopicA", 0, 5) == 0
    assert (store.get_min_offset_in_queue("TopicA", 0), store.get_max_offset_in_queue("TopicA", 0)) == (0, 5)
    assert store.get_min_phy_offset() == 0 and store.get_max_phy_offset() > offs[-1]


def test_delete_topics_drops_queues_and_counters(open_store):
    store = open_store()
    for i in range(5):
        store.put_message(make_msg(i, topic="Gone"))
        store.put_message(make_msg(i, topic="Kept"))
    store.do_reput()
    assert store.clean_unused_topics({"Kept"}) == 1
    assert not os.path.exists(os.path.join(store.config.consume_queue_dir, "Gone"))
    assert store.get_max_offset_in_queue("Gone", 0) == 0
    assert store.put_message(make_msg(9, topic="Gone")).append.logics_offset == 0  # type: ignore[union-attr]
    assert store.get_max_offset_in_queue("Kept", 0) == 5
    assert store.delete_topics(["Missing"]) == 0


def test_cq_unit_layout_is_big_endian_20_bytes():
    assert CQ_UNIT.size == 20
    assert CQ_UNIT.pack(1, 2, -3) == struct.pack(">qiq", 1, 2, -3)


def test_recovery_truncates_a_full_last_file_behind_an_empty_prepared_one(tmp_path):
    """The preparer creates a queue's next file ahead of need; a crash can leave it empty behind
    a last file that is exactly full. Recovery must still cut that file's units past the
    CommitLog's end (T3 once kept 1,543 units pointing past it)."""
    from pocketmq.store.queue.consume_queue import ConsumeQueue

    size = 10 * CQ_UNIT.size
    cq = ConsumeQueue("T", 0, str(tmp_path), size)
    for i in range(20):  # two full files: units i -> (100 i, 100)
        cq.put(100 * i, 100, 0, i)
    cq.mfq.create_file(2 * size)  # the prepared next file, never written
    again = ConsumeQueue("T", 0, str(tmp_path), size)
    assert again.load()
    again.recover()
    again.truncate_dirty(1250)  # the CommitLog ends inside record 12
    assert [phy for _, phy, _, _ in again.iter_units()] == [100 * i for i in range(12)]
    assert again.max_offset == 12 and again.max_physic_offset == 1200


def test_put_run_writes_what_put_writes_unit_by_unit(tmp_path):
    """``ConsumeQueue.put_run`` (a batch put's units, one ``pack_into``) writes the bytes and
    state of ``put`` per unit; it refuses, writing nothing, a run that is not the next units of
    the last file or that would cross its end (the caller then puts them one by one)."""
    from pocketmq.store.queue.consume_queue import ConsumeQueue

    unit = CQ_UNIT.size
    sizes = [100, 2000, 7, 65_536, 1]
    codes = [0, -5, 0x7FFF_FFFF_FFFF_FFFF, -(2**63), 12345]
    queues = {}
    for name in ("put", "run"):
        cq = ConsumeQueue("T", 0, str(tmp_path / name), unit * 8)
        cq.put(10, 90, 3, 0, 7)  # the first unit creates the file
        phy = 1 << 40
        if name == "put":
            for k, (size, code) in enumerate(zip(sizes, codes, strict=True)):
                cq.put(phy, size, code, 1 + k, 99)
                phy += size
        else:
            assert not cq.put_run(phy, sizes, codes, 2, 99)  # not the next unit
            assert cq.put_run(phy, sizes, codes, 1, 99)
            assert not cq.put_run(phy + sum(sizes), [5, 5, 5], [0, 0, 0], 6, 99)  # past the file end
        mf = cq.mfq.files[-1]
        queues[name] = (bytes(mf.mm), mf.wrote_position, cq.max_physic_offset, cq.last_store_timestamp)
        cq.close()
    assert queues["run"] == queues["put"]
    assert queues["run"][1:] == (6 * unit, (1 << 40) + sum(sizes), 99)


def test_put_in_turn_writes_what_put_writes_unit_by_unit(tmp_path):
    """``consume_queue.put_in_turn`` (a reput slice's records going to p queues in turn, one
    ``pack_into`` a queue) writes each queue's bytes and state as ``put`` per record, with
    shares of unequal length (n not a multiple of p); it stops at the first queue missing or
    not at its next unit, returning how many it wrote before (a file's end: test_reput_run)."""
    from pocketmq.store.queue.consume_queue import ConsumeQueue, put_in_turn

    unit = CQ_UNIT.size
    p, n = 3, 11
    sizes = [100 + 7 * i for i in range(n)]
    phys = [(1 << 40) + sum(sizes[:i]) for i in range(n)]
    qoffs = [1 + i // p for i in range(n)]
    tss = [1000 + i for i in range(n)]
    states = {}
    for name in ("put", "turn"):
        cqs = [ConsumeQueue("T", q, str(tmp_path / name), unit * 8) for q in range(p)]
        for cq in cqs:
            cq.put(10, 90, 0, 0, 7)  # the first unit creates the file
        if name == "put":
            for i in range(n):
                cqs[i % p].put(phys[i], sizes[i], 0, qoffs[i], tss[i])
        else:
            assert put_in_turn([cqs[0], None, cqs[2]], phys, sizes, qoffs, tss) == 1  # a queue missing
            assert put_in_turn(cqs, phys, sizes, qoffs, tss) == 0  # queue 0's units written already
            assert put_in_turn(cqs[1:], phys[1:], sizes[1:], [q + 2 for q in qoffs[1:]], tss[1:]) == 0  # not the next
            assert put_in_turn(cqs[1:], [phys[i] for i in range(n) if i % p], [sizes[i] for i in range(n) if i % p],
                               [qoffs[i] for i in range(n) if i % p], [tss[i] for i in range(n) if i % p]) == 2  # fmt: skip
        states[name] = [
            (bytes(cq.mfq.files[-1].mm), cq.mfq.files[-1].wrote_position, cq.max_physic_offset, cq.last_store_timestamp)
            for cq in cqs
        ]
        for cq in cqs:
            cq.close()
    assert states["turn"] == states["put"]


def test_pull_window_is_min_max_and_units_from(tmp_path):
    """``ConsumeQueue.pull_window`` (get_message's one call a pull) answers what the queue's
    ``min_offset``, ``max_offset`` and ``units_from(offset, max(800, max_nums))`` answer: an
    empty queue, offsets below the first unit, in the first, a middle and the last file (and
    at their edges), at and past the end, a raised min offset."""
    from pocketmq.store.queue.consume_queue import ConsumeQueue

    unit = CQ_UNIT.size
    cq = ConsumeQueue("T", 0, str(tmp_path / "q"), unit * 8)

    def check(offsets, nums=(1, 32, 800, 1000)):
        for off in offsets:
            for n in nums:
                lo, hi = cq.min_offset, cq.max_offset
                want = cq.units_from(off, max(800, n)) if lo <= off < hi else None
                assert cq.pull_window(off, n) == (lo, hi, want), (off, n)

    check(range(-1, 3))  # no file yet
    cq.put(1000, 50, 7, 3)  # padded from 0: blank units 0..2
    for k in range(4, 29):
        cq.put(1000 + 50 * k, 50, k, k)
    assert len(cq.mfq.files) == 4
    check(range(-1, 32))
    cq.min_logic_offset = 10
    check(range(-1, 32))
    cq.close()


def test_one_unit_without_filter_selects_what_the_loop_selects(open_store):
    """``select_messages``' one-unit path (no filter: a woken pull's message) returns what its
    loop returns for the same unit (run through it with a filter that accepts everything): a
    record in the CommitLog's last file, in an earlier one, in a deleted one, past the written
    end, a blank unit; with limits of 0 and 1 message / byte."""
    from pocketmq.store.queue.pull import select_messages

    class All:
        def is_matched_by_consume_queue(self, tags_code):
            return True

        def is_matched_by_commit_log(self, buf):
            return True

    store = open_store()
    offs = [store.put_message(make_msg(i, body_size=150)).append.wrote_offset for i in range(900)]  # type: ignore[union-attr]
    store.do_reput()
    mfq = store.commitlog.mfq
    assert len(mfq.files) > 3
    last = mfq.files[-1].file_from_offset
    sizes = {phy: size for phy, size, _ in (u[1:] for u in store.cq_table.find("TopicA", 0).iter_units())}
    cases = [(phy, sizes[phy], 5) for phy in offs[::97]]
    cases += [(last + mfq.files[-1].wrote_position, 300, 0), (last + 10**7, 300, 0), (0, 0x7FFFFFFF, 0)]
    gone = mfq.files.pop(0)  # (its records now read as removed)
    cases += [(gone.file_from_offset, 200, 0)]
    for phy, size, tags in cases:
        units = CQ_UNIT.pack(phy, size, tags)
        for nums, nbytes in ((32, None), (1, 1), (0, 0)):
            args = (nums, nbytes)
            rest = (mfq, store.config, store._memory_limit, store.commitlog.max_offset)
            assert select_messages(units, *args, None, *rest) == select_messages(units, *args, All(), *rest)
    mfq.files.insert(0, gone)


def test_units_without_filter_select_what_the_loop_selects(open_store):
    """``select_messages``' path for several units without a filter (``_select_run``: a
    drain's pulls) returns what its loop returns for the same units (run with an accept-all
    filter): windows of 2 to 800 units, max_nums 0 to past the count limit, byte limits of
    none, below the first message and between, blank units at and after the limit, records
    in two CommitLog files and in a deleted one, one after another (one run) and not, within
    and across a CommitLog file's end, records on disk (a memory limit of 0)."""
    from pocketmq.store.log.layout import CQ_BLANK_SIZE
    from pocketmq.store.queue.pull import select_messages

    class All:
        def is_matched_by_consume_queue(self, tags_code):
            return True

        def is_matched_by_commit_log(self, buf):
            return True

    store = open_store(
        mapped_file_size_commit_log=256 * 1024,
        mapped_file_size_consume_queue=2000 * 20,
        max_transfer_count_on_message_in_memory=40,
        max_transfer_bytes_on_message_in_memory=9_000,
    )
    for i in range(1500):  # (from 750 on, queue 0's records follow each other: one run)
        store.put_message(make_msg(i, queue_id=i % 2 if i < 750 else 0, body_size=150 if i % 7 else 400))
    store.do_reput()
    mfq = store.commitlog.mfq
    assert len(mfq.files) == 2
    cq = store.cq_table.find("TopicA", 0)
    all_units = bytes(cq.mfq.files[0].mm[: cq.mfq.files[0].wrote_position])
    blank = CQ_UNIT.pack(0, CQ_BLANK_SIZE, 0)
    windows = []
    for start in (0, 3, 100, 150, 200, 300, 360, 600, 700, 740, 1000, 1100):
        for length in (2, 3, 6, 33, 34, 41, 800):
            w = all_units[start * 20 : (start + length) * 20]
            windows.append(w)
            if len(w) >= 4 * 20:
                windows.append(w[:60] + blank + w[80:])  # a blank unit among them
                windows.append(w[:20] + blank + w[40:])  # right after the first
    windows.append(all_units[: 40 * 20] + blank * 5 + all_units[45 * 20 : 60 * 20])  # at the count limit
    gone = None
    for removed in (False, True):
        if removed:
            gone = mfq.files.pop(0)
        for units in windows:
            for max_nums in (0, 1, 2, 5, 32, 39, 40, 41, 900):
                for max_bytes in (None, 1, 500, 5_000):
                    for mem_limit in (1 << 40, 0):
                        rest = (mfq, store.config, mem_limit, store.commitlog.max_offset)
                        want = select_messages(units, max_nums, max_bytes, All(), *rest)
                        assert select_messages(units, max_nums, max_bytes, None, *rest) == want
    mfq.files.insert(0, gone)


def test_get_result_fields_of_found_and_missed_reads(open_store):
    """GetResult has no Python __init__ (the store fills its slots): every field is set on a
    found read, and a missed read's empty fields read as before (b"", 0, False, no offsets)."""
    store = open_store()
    for i in range(3):
        store.put_message(make_msg(i))
    store.do_reput()
    g = store.get_message("g", "TopicA", 0, 0, 32)
    offsets = store.cq_table.find("TopicA", 0)
    assert g == GetResult.of(
        GetMessageStatus.FOUND, 3, 0, 3, g.body, 3, False, [offsets.get_unit(i)[0] for i in range(3)]
    )
    assert len(decode_messages(g.body)) == 3 and type(g) is GetResult
    for offset, status in (
        (3, GetMessageStatus.OFFSET_OVERFLOW_ONE),
        (9, GetMessageStatus.OFFSET_OVERFLOW_BADLY),
    ):
        m = store.get_message("g", "TopicA", 0, offset, 32)
        assert isinstance(m, MissedGetResult) and m.status is status
        assert (m.body, m.message_count, m.suggest_pulling_from_slave, list(m.message_offsets)) == (
            b"",
            0,
            False,
            [],
        )
        assert m == GetResult.of(status, m.next_begin_offset, 0, 3)
        assert repr(m).startswith(
            f"GetResult(status={status!r}, next_begin_offset={m.next_begin_offset}, min_offset=0"
        )
    none = store.get_message("g", "Nope", 0, 5, 32)
    assert none == GetResult.of(GetMessageStatus.NO_MESSAGE_IN_QUEUE, none.next_begin_offset, 0, 0)
    assert g != none and g.__eq__(object()) is NotImplemented
