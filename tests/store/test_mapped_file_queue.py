"""MappedFileQueue's flush plan and commit: they start at the segment ``flushed_where`` is in."""

from __future__ import annotations

from pathlib import Path

from pocketmq.store.log.mapped_file_queue import MappedFileQueue

SIZE = 4096


def _queue(tmp_path: Path, segments: int) -> MappedFileQueue:
    mfq = MappedFileQueue(str(tmp_path), SIZE)
    for _ in range(segments):
        mf = mfq.last_for_append()
        mf.write(0, b"x" * SIZE, True)
        mf.wrote_position = SIZE
    return mfq


def test_plan_and_commit_cover_every_dirty_segment_then_only_the_live_one(tmp_path: Path) -> None:
    mfq = _queue(tmp_path, 3)
    assert [mf.file_from_offset for mf, _ in mfq.flush_plan()] == [0, SIZE, 2 * SIZE]
    assert mfq.flush() == 3 * SIZE
    assert all(mf.flushed_position == SIZE for mf in mfq.files)
    live = mfq.last_for_append()
    live.write(0, b"y" * 100, True)
    live.wrote_position = 100
    plan = mfq.flush_plan()
    assert plan == [(live, 100)]
    mfq.commit_flush(plan)
    assert mfq.flushed_where == 3 * SIZE + 100
    assert mfq.flush_plan() == []
    live.wrote_position = 300
    assert mfq.flush_plan() == [(live, 300)]
    assert mfq.flush() == 3 * SIZE + 300


def test_plan_after_a_partial_commit_keeps_the_unflushed_segment(tmp_path: Path) -> None:
    mfq = _queue(tmp_path, 2)
    first, second = mfq.files
    mfq.commit_flush([(first, 1000)])  # an fsync that covered part of the first segment only
    assert mfq.flushed_where == 1000
    assert mfq.flush_plan() == [(first, SIZE), (second, SIZE)]
    mfq.commit_flush(mfq.flush_plan())
    assert mfq.flushed_where == 2 * SIZE


def test_plan_sees_the_last_segment_cut_below_a_loaded_flushed_where(tmp_path: Path) -> None:
    _queue(tmp_path, 2).close()
    mfq = MappedFileQueue(str(tmp_path), SIZE)
    assert mfq.load() == []
    assert mfq.flushed_where == 2 * SIZE
    last = mfq.files[-1]
    last.set_positions(512)  # recovery's cut of the last segment (ConsumeQueue truncation)
    last.wrote_position = 1024
    assert mfq.flush_plan() == [(last, 1024)]
    mfq.commit_flush(mfq.flush_plan())
    assert mfq.flushed_where == SIZE + 1024


def test_plan_after_the_first_segments_were_deleted(tmp_path: Path) -> None:
    mfq = _queue(tmp_path, 3)
    mfq.files[0].flushed_position = SIZE
    mfq.delete_first(2)  # flushed_where (0) is now below the first segment kept
    assert mfq.flushed_where == 0
    assert mfq.flush_plan() == [(mfq.files[0], SIZE)]
    mfq.commit_flush(mfq.flush_plan())
    assert mfq.flushed_where == 3 * SIZE
