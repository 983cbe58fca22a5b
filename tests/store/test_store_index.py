"""IndexFile / IndexService: key queries, hash collisions, rolling, time windows, crash re-adoption."""

from __future__ import annotations

import os

from pocketmq.remoting.protocol.message import decode_message, java_string_hash
from pocketmq.store.index.file import IndexFile, index_key_hash
from pocketmq.store.log.layout import INDEX_ENTRY, INDEX_HEADER

from .conftest import crash, make_msg

FAR = 2**62


def _keys(result):
    return sorted(decode_message(r).keys for r in result.messages)


def test_index_key_hash_is_abs_java_hash():
    assert index_key_hash("TagA") == 2598919
    assert index_key_hash("polygenelubricants") == 0  # abs(Integer.MIN_VALUE) overflows -> 0
    k = "TopicTest#7F0000011234ABCDEF0123456789ABCDEF"
    assert index_key_hash(k) == abs(java_string_hash(k))
    assert index_key_hash(k) == index_key_hash(k)  # cached prefix path


def test_query_by_key_and_uniq_key(open_store, clock):
    store = open_store(clock=clock)
    for i in range(30):
        store.put_message(make_msg(i, keys=f"order-{i % 10} shared"))
        clock.advance(10)
    store.do_reput()
    r = store.query_message("TopicA", "order-3", 32, 0, FAR)
    assert _keys(r) == ["order-3 shared"] * 3
    assert len(store.query_message("TopicA", "shared", 64, 0, FAR).messages) == 30
    assert len(store.query_message("TopicA", "shared", 5, 0, FAR).messages) == 5
    uniq = make_msg(17).properties["UNIQ_KEY"]  # type: ignore[index]
    r = store.query_message("TopicA", uniq, 32, 0, FAR)
    assert [decode_message(x).queue_offset for x in r.messages] == [17]
    assert store.query_message("OtherTopic", "order-3", 32, 0, FAR).messages == []
    assert r.index_last_update_timestamp == clock.now - 10
    assert r.index_last_update_phyoffset == store.get_commit_log_offset_in_queue("TopicA", 0, 29)


def test_hash_collisions_never_leak(open_store):
    # one slot: every key shares a bucket; "Aa"/"BB" also share the Java hash itself
    store = open_store(max_hash_slot_num=1, max_index_num=200)
    assert java_string_hash("TopicA#Aa") == java_string_hash("TopicA#BB")
    for i in range(40):
        store.put_message(make_msg(i, keys=["Aa", "BB", f"k{i}"][i % 3]))
    store.do_reput()
    assert len(store.query_message("TopicA", "Aa", 64, 0, FAR).messages) == 14
    assert len(store.query_message("TopicA", "BB", 64, 0, FAR).messages) == 13
    assert _keys(store.query_message("TopicA", "k5", 64, 0, FAR)) == ["k5"]
    assert store.query_message("TopicA", "zz", 64, 0, FAR).messages == []


def test_index_files_roll_and_queries_span_them(open_store, clock):
    store = open_store(clock=clock, max_index_num=16)  # 15 usable entries per file
    for i in range(100):
        store.put_message(make_msg(i, keys=f"k{i % 7}"))
        clock.advance(1)
    store.do_reput()
    names = sorted(os.listdir(store.config.index_dir))
    assert len(names) >= 13 and all(len(n) == 17 and n.isdigit() for n in names)
    for k in range(7):
        r = store.query_message("TopicA", f"k{k}", 64, 0, FAR)
        assert len(r.messages) == len(range(k, 100, 7))
        assert {decode_message(x).keys for x in r.messages} == {f"k{k}"}


def test_time_window_uses_store_time(open_store, clock):
    store = open_store(clock=clock)
    t0 = clock.now
    for i in range(10):
        store.put_message(make_msg(i, keys="k"))
        clock.advance(1500)
    store.do_reput()
    window = store.query_message("TopicA", "k", 64, t0 + 3000, t0 + 7500)
    assert sorted(decode_message(x).queue_offset for x in window.messages) == [2, 3, 4, 5]
    assert store.query_message("TopicA", "k", 64, t0 + 100_000, t0 + 200_000).messages == []


def test_rollback_records_are_not_indexed_prepared_are(open_store):
    store = open_store()
    store.put_message(make_msg(0, keys="tx", sys_flag=0xC))
    store.put_message(make_msg(1, keys="tx", sys_flag=0x4))
    store.do_reput()
    r = store.query_message("TopicA", "tx", 64, 0, FAR)
    assert [decode_message(x).sys_flag for x in r.messages] == [0x4]


def test_index_disabled(open_store):
    store = open_store(message_index_enable=False)
    store.put_message(make_msg(0, keys="k"))
    store.do_reput()
    assert store.query_message("TopicA", "k", 64, 0, FAR).messages == []
    assert not os.path.exists(store.config.index_dir)


def test_header_layout_and_entry_chain(tmp_path):
    f = IndexFile(str(tmp_path / "20240101000000000"), 4, 8, create=True)
    assert f.put_key("a", 100, 1_000_000)
    assert f.put_key("a", 200, 1_002_500)
    f.write_header()
    mm = f.mf.mm
    assert INDEX_HEADER.unpack_from(mm, 0) == (1_000_000, 1_002_500, 100, 200, 1, 3)
    h = index_key_hash("a")
    base = 40 + 4 * 4
    assert INDEX_ENTRY.unpack_from(mm, base + 20) == (h, 100, 0, 0)
    assert INDEX_ENTRY.unpack_from(mm, base + 40) == (h, 200, 2, 1)  # seconds, prev = entry 1
    out: list[int] = []
    f.select_phy_offsets("a", 10, 0, FAR, out)
    assert out == [200, 100]
    for i in range(5):
        assert f.put_key(f"x{i}", 300 + i, 1_003_000)
    assert not f.put_key("full", 999, 1_003_000)  # indexCount reached maxIndexNum
    f.mf.close()


def test_entries_written_after_the_last_header_are_adopted_after_a_crash(open_store, tmp_path):
    root = str(tmp_path / "s")
    store = open_store(root)
    for i in range(10):
        store.put_message(make_msg(i, keys=f"k{i}"))
    store.do_reput()  # writes the header
    for i in range(10, 14):
        store.put_message(make_msg(i, keys=f"k{i}"))
    f = store.index.files[-1]
    # dispatch without the end-of-batch header write, then die
    while store.dispatcher.reput_from_offset < store.get_max_phy_offset():
        from pocketmq.store.dispatch.dispatcher import check_message

        mf = store.commitlog.mfq.last
        pos = store.dispatcher.reput_from_offset - mf.file_from_offset
        size, req = check_message(
            mf.mm,
            pos,
            mf.wrote_position,
            store.dispatcher.reput_from_offset,
            check_crc=False,
            delay_levels=[1000],
        )
        store.dispatcher.dispatch(req)
        store.dispatcher.reput_from_offset += size
    assert INDEX_HEADER.unpack_from(f.mf.mm, 0)[5] == 21  # header still counts 10 messages x 2 keys (+1)
    crash(store)
    again = open_store(root)
    for i in range(14):
        assert len(again.query_message("TopicA", f"k{i}", 8, 0, FAR).messages) == 1, i


def test_fast_path_index_entries_wait_for_a_run_but_never_for_a_reader(open_store, clock):
    # reput's fast path writes index entries once INDEX_RUN are pending; until then the
    # checkpoint's index time stays behind them, and queries and the decoding path write them
    from pocketmq.store.dispatch.appended import INDEX_RUN

    store = open_store(clock=clock)
    d = store.dispatcher
    for i in range(3):
        store.put_message(make_msg(i, keys=f"order-{i}"))
        clock.advance(10)
    store.do_reput(index=False)
    assert d.index_backlog is not None and len(d.index_backlog[0]) == 6  # UNIQ_KEY + KEYS each
    assert d.last_dispatched_timestamp == 0 and store.index.files == []
    r = store.query_message("TopicA", "order-1", 32, 0, FAR)
    assert _keys(r) == ["order-1"]
    assert d.index_backlog is None and d.last_dispatched_timestamp == clock.now - 10
    f = store.index.files[-1]
    assert INDEX_HEADER.unpack_from(f.mf.mm, 0)[5] == 7  # header written with the entries (+1)
    # a run is written by reput itself
    for i in range(3, 3 + INDEX_RUN // 2):
        store.put_message(make_msg(i, keys=f"order-{i}"))
    store.do_reput(index=False)
    assert d.index_backlog is None
    assert sum(x.index_count - 1 for x in store.index.files) == 6 + INDEX_RUN
    # the store's own do_reput (and close) leave nothing pending
    store.put_message(make_msg(999, keys="last"))
    store.do_reput()
    assert d.index_backlog is None and _keys(store.query_message("TopicA", "last", 32, 0, FAR)) == ["last"]


def index_bytes(
    path: str, slot_num: int, index_num: int, first: tuple[int, int, int], runs: list, per_key: bool
) -> bytes:
    """The bytes of a new IndexFile after the entry ``first`` (hash, phy, time) and ``runs``
    of ``(hashes, phys, tss[, bad])`` written by ``put_hashed`` per key (``per_key``) or by
    ``put_hashes`` per run; ``bad``: (slot, value) set in the slot table before the run."""
    f = IndexFile(path, slot_num, index_num, create=True)
    f.put_hashed(*first)
    for hashes, phys, tss, *bad in runs:
        for s, v in bad[0] if bad else ():
            f.mf.mm[40 + 4 * s : 44 + 4 * s] = v.to_bytes(4, "big", signed=True)
        if per_key:
            for h, p, t in zip(hashes, phys, tss, strict=True):
                assert f.put_hashed(h, p, t)
        else:
            assert f.put_hashes(hashes, phys, tss)
    f.write_header()
    out = bytes(f.mf.mm)
    f.mf.close()
    return out


def test_put_hashes_runs_write_what_put_hashed_writes(tmp_path) -> None:
    """``put_hashes`` (its C-level slot path and its in-order path) writes byte for byte what
    ``put_hashed`` per key writes: runs of 1 and 64 entries on 8, 1021 and 100,003 slots (slots shared
    within a run and with earlier runs), hash 0 and hashes near 2^31, slots holding a negative
    value or one at / past the first entry of a run (left by a killed writer), and through
    ``IndexService.put_hashes`` a run that fills a file and rolls to the next."""
    import random

    from pocketmq.store.index.file import IndexService

    rnd = random.Random(23)
    for slot_num in (8, 1021, 100_003):
        runs = []
        idx = 2
        for r in range(40):
            n = 1 if r % 3 == 0 else 64
            hashes = [rnd.choice((0, 0x7FFFFFFF, 0x7FFFFFFE, rnd.randrange(1 << 31))) for _ in range(n)]
            if r % 5 == 1 and slot_num > n:  # distinct slots, some used by earlier runs
                hashes = [s + slot_num * rnd.randrange(1000) for s in rnd.sample(range(slot_num // 8), n)]
            phys = [10_000 * (r + 1) + k for k in range(n)]
            # corrupt slots: negative, at the run's first entry, past it
            bad = (
                [(rnd.randrange(slot_num), v) for v in (-1, -(1 << 31), idx, idx + 5, 1 << 30)]
                if r % 4 == 2
                else []
            )
            bad += [(hashes[k] % slot_num, v) for k, v in enumerate((-1, idx + 1)) if r % 4 == 2 and k < n]
            runs.append((hashes, phys, [1_700_000_000_000 + r * 700] * n, bad))
            idx += n
        ref = index_bytes(
            str(tmp_path / f"ref{slot_num}"), slot_num, 4000, (5, 1, 1_700_000_000_000), runs, True
        )
        run = index_bytes(
            str(tmp_path / f"run{slot_num}"), slot_num, 4000, (5, 1, 1_700_000_000_000), runs, False
        )
        assert ref == run

    # a file roll within a run: per record (build_index's put_entries) vs. put_hashes
    out = {}
    for name in ("ref", "run"):
        svc = IndexService(str(tmp_path / f"svc{name}"), 16, 100, clock=lambda: 1_700_000_000_000)
        hs = [rnd.randrange(1 << 31) for _ in range(64)] if name == "ref" else out["hs"]
        out["hs"] = hs
        for b in range(5):
            phys = [1000 * b + k for k in range(64)]
            part = hs[:]
            if name == "ref":
                for h, p in zip(part, phys, strict=True):
                    f = svc.files[-1] if svc.files else svc._new_file()
                    if not f.put_entries([h], p, 1_700_000_000_000 + b):
                        svc._new_file().put_entries([h], p, 1_700_000_000_000 + b)
                svc._dirty = True
            else:
                svc.put_hashes(part, phys, [1_700_000_000_000 + b] * 64)
        svc.close()
        d = tmp_path / f"svc{name}"
        out[name] = [(d / n).read_bytes() for n in sorted(p.name for p in d.iterdir())]
    assert len(out["ref"]) == 4 and out["ref"] == out["run"]


def test_put_hashes_store_times_and_long_runs_write_what_put_hashed_writes(tmp_path) -> None:
    """``put_hashes`` against ``put_hashed`` per key, byte for byte, in what the test above
    leaves out: runs of 2 to 600 entries (past 256, the pack's run), store times equal, in
    order within a second, crossing seconds, out of order, before the file's begin (timeDiff
    0) and with a begin of 0, CommitLog offsets past 2^32 and near 2^63, a slot shared within
    a run."""
    import random

    rnd = random.Random(26)
    t0 = 1_700_000_000_000
    for begin in (t0, 0):
        runs = []
        phy = (1 << 32) - 5000
        for r, n in enumerate((2, 3, 600, 64, 300, 257, 5, 128, 2)):
            hashes = [rnd.randrange(1 << 31) for _ in range(n)]
            if r % 2:
                hashes[n // 2] = hashes[0] + 1021 * rnd.randrange(50)  # a slot shared in the run
            phys = [phy + 1000 * k for k in range(n)]
            phy += 1000 * n
            if r == 7:
                phys = [(1 << 63) - 10_000 + k for k in range(n)]
            kind = r % 4
            if kind == 0:
                tss = [t0 + 5_000 * r] * n
            elif kind == 1:  # in order, within one second
                tss = [t0 + 5_000 * r + k * 300 // n for k in range(n)]
            elif kind == 2:  # in order across seconds
                tss = [t0 + 5_000 * r + k * 4_000 // n for k in range(n)]
            else:  # out of order, some before the begin
                tss = [t0 + rnd.randrange(-3_000, 9_000) for _ in range(n)]
            runs.append((hashes, phys, tss))
        for slot_num in (1021, 100_003):
            got = {}
            for per_key in (True, False):
                path = str(tmp_path / f"{begin}-{slot_num}-{per_key}")
                got[per_key] = index_bytes(path, slot_num, 3000, (5, 1, begin), runs, per_key)
            assert got[True] == got[False]

