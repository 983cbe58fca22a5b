"""Recovery: find the last valid CommitLog record, cut everything after it, make queues agree.

Order:

1. ConsumeQueues are loaded and each finds its own end (last three files). A queue with a
   missing file in the middle is marked for rebuild.
2. The CommitLog scan start is the third-last segment after a clean shutdown, or - after a
   crash (``abort`` file present) - the newest segment whose first record was stored before
   the checkpoint's ``min(physic, logics) - 3 s``; the first segment if none qualifies (e.g. the
   checkpoint was lost).
3. Every record from there is validated (magic, sizes, PHYSICALOFFSET, CRC when
   ``checkCRCOnRecover``) and re-dispatched. Re-dispatch is idempotent: existing units are
   compared (and repaired if they disagree), missing units and index entries are added. A record
   whose queue offset lies beyond its queue's end reveals lost ConsumeQueue data; that queue
   is marked for rebuild.
4. The CommitLog is truncated at the first invalid record (the stale tail is zeroed so it can
   never be revived); ConsumeQueue units and index ends beyond that point are dropped.
5. Queues marked for rebuild are recreated from a scan of the whole CommitLog.
6. The CommitLog's queue-offset table is rebuilt from the ConsumeQueues' max offsets.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from pocketmq.remoting.protocol.message import (
    TRANSACTION_PREPARED_TYPE,
    TRANSACTION_ROLLBACK_TYPE,
)
from pocketmq.store.config import MessageStoreConfig
from pocketmq.store.dispatch.dispatcher import (
    Dispatcher,
    DispatchRequest,
    check_message,
    dispatch_fields,
    is_dispatched_to_queue,
    make_request,
    tags_code_of,
)
from pocketmq.store.index.file import IndexService
from pocketmq.store.index.scan import settle_last_files
from pocketmq.store.log.commitlog import CommitLog
from pocketmq.store.log.layout import SCHEDULE_TOPIC
from pocketmq.store.log.records import END, validate_record
from pocketmq.store.queue.cq_table import ConsumeQueueTable
from pocketmq.store.recovery.checkpoint import StoreCheckpoint

logger = logging.getLogger(__name__)

_TX_MASK = TRANSACTION_ROLLBACK_TYPE
_ROLLBACK = TRANSACTION_ROLLBACK_TYPE
_UNQUEUED = (TRANSACTION_PREPARED_TYPE, TRANSACTION_ROLLBACK_TYPE)


def scan_commit_log(
    commitlog: CommitLog,
    start_offset: int,
    on_record: Callable[[DispatchRequest], None] | None,
    *,
    check_crc: bool,
    delay_levels: list[int],
    stop_offset: int | None = None,
) -> int:
    """Walk records from ``start_offset``; returns the offset just past the last valid one."""
    off = start_offset
    for mf in commitlog.mfq.segments_from(start_offset, stop_offset):
        base = mf.file_from_offset
        pos = off - base
        mm = mf.mm
        file_size = mf.file_size
        while pos < file_size:
            size, req = check_message(
                mm, pos, file_size, base + pos, check_crc=check_crc, delay_levels=delay_levels
            )
            if req is not None:
                if on_record is not None:
                    on_record(req)
                pos += size
            elif size > 0:
                pos = file_size
            else:
                if size != 0:
                    logger.warning("CommitLog %s: invalid record at %d (code %d)", mf.path, base + pos, size)
                return base + pos
        off = base + file_size
    return off


def redispatch_scan(
    commitlog: CommitLog,
    start_offset: int,
    cq_table: ConsumeQueueTable,
    index: IndexService,
    dispatcher: Dispatcher,
    rebuild: set[tuple[str, int]],
    *,
    check_crc: bool,
    delay_levels: list[int],
    index_enable: bool,
) -> int:
    """Step 3: validate every record from ``start_offset`` and re-dispatch it idempotently.

    What ``scan_commit_log`` + ``Dispatcher.dispatch`` do, in one loop without a
    ``DispatchRequest`` per record: recovery of a 1 GiB CommitLog is ~900,000 records, most of
    them already in their ConsumeQueue and index (then it costs a unit compare and no
    properties parsing). A queue whose units are missing is added to ``rebuild``. Returns the
    offset just past the last valid record.
    """
    queues = cq_table.flat
    is_indexed = index.is_indexed
    off = start_offset
    last_ts = 0
    try:
        for mf in commitlog.mfq.segments_from(start_offset):
            base = mf.file_from_offset
            pos = off - base
            file_size = mf.file_size
            mm = mf.mm
            view = memoryview(mm)  # CRCs without copies; released before the file can be closed
            try:
                while pos < file_size:
                    phy = base + pos
                    size, fields = validate_record(mm, pos, file_size, phy, check_crc, view)
                    if fields is None:
                        if size > 0:  # BLANK: continue in the next segment
                            pos = file_size
                            continue
                        if size != END:
                            logger.warning("CommitLog %s: invalid record at %d (code %d)", mf.path, phy, size)
                        return phy
                    pos += size
                    topic, qid, qoff, sys_flag, ts, _prepared, props = fields
                    last_ts = ts
                    tx = sys_flag & _TX_MASK
                    key = (topic, qid)
                    if tx not in _UNQUEUED and key not in rebuild:
                        tags_code = _tags_code(topic, props, ts, delay_levels)
                        cq = queues.get(key)
                        if cq is None and qoff > 0:
                            _lost_units(key, 0, qoff, rebuild)
                        else:
                            if cq is None:
                                cq = cq_table.find_or_create(topic, qid)
                            if not cq.redispatch(phy, size, tags_code, qoff, ts):
                                _lost_units(key, cq.max_offset, qoff, rebuild)
                    # the index does not depend on the queue (a rebuilt queue's records too)
                    if index_enable and tx != _ROLLBACK and props and not is_indexed(phy):
                        _tags, keys, uniq = dispatch_fields(props)
                        if uniq or keys:
                            index.build_index(topic, phy, ts, uniq, keys)
            finally:
                view.release()
            off = base + file_size
        return off
    finally:
        if last_ts:
            dispatcher.last_dispatched_timestamp = last_ts


def _tags_code(topic: str, props: str, store_ts: int, delay_levels: list[int]) -> int:
    """The ConsumeQueue tagsCode of a record, exactly as ``make_request`` computes it."""
    if topic == SCHEDULE_TOPIC:
        return make_request(topic, 0, 0, 0, store_ts, 0, 0, 0, props, delay_levels).tags_code
    return tags_code_of(props) if props else 0


def _lost_units(key: tuple[str, int], have: int, qoff: int, rebuild: set[tuple[str, int]]) -> None:
    logger.error(
        "consume queue %s/%d ends at %d but the CommitLog holds offset %d; rebuilding it",
        key[0], key[1], have, qoff,
    )  # fmt: skip
    rebuild.add(key)


def _abnormal_start(commitlog: CommitLog, checkpoint: StoreCheckpoint, config: MessageStoreConfig) -> int:
    files = commitlog.mfq.files
    # the index process may lag reput: its flushed time bounds what the scan must re-index
    index_safe = config.message_index_safe or config.index_process_enable
    min_ts = checkpoint.min_timestamp(index_safe=index_safe and config.message_index_enable)
    levels = config.delay_levels_ms
    for i in range(len(files) - 1, -1, -1):
        mf = files[i]
        _, req = check_message(
            mf.mm, 0, mf.file_size, mf.file_from_offset, check_crc=True, delay_levels=levels
        )
        if req is not None and 0 < req.store_timestamp <= min_ts:
            logger.info("abnormal recovery starts at %s", mf.path)
            return i
    logger.info("abnormal recovery: no segment predates the checkpoint; scanning from the first")
    return 0


def recover(
    commitlog: CommitLog,
    cq_table: ConsumeQueueTable,
    index: IndexService,
    checkpoint: StoreCheckpoint,
    dispatcher: Dispatcher,
    config: MessageStoreConfig,
    *,
    abnormal: bool,
) -> int:
    """Run steps 1-6 (module docstring); returns the CommitLog's recovered max offset."""
    # a crash inside a slice can leave slots pointing past the last entry written, or the
    # last record of a full file half-indexed (then redone: it is recent, so in the scan)
    redo = settle_last_files(index.files)
    broken = cq_table.load()
    for cq in cq_table:
        if cq not in broken:
            cq.recover()
    rebuild: set[tuple[str, int]] = {(cq.topic, cq.queue_id) for cq in broken}
    for cq in broken:
        cq_table.reset_queue(cq)

    files = commitlog.mfq.files
    levels = config.delay_levels_ms
    if files:
        start_idx = _abnormal_start(commitlog, checkpoint, config) if abnormal else max(0, len(files) - 3)
        start = files[start_idx].file_from_offset
        redo_file = commitlog.mfq.find_by_offset(redo) if redo is not None else None
        if redo_file is not None and redo_file.file_from_offset < start:
            start = redo_file.file_from_offset

        process = redispatch_scan(
            commitlog, start, cq_table, index, dispatcher, rebuild,
            check_crc=config.check_crc_on_recover, delay_levels=levels,
            index_enable=config.message_index_enable,
        )  # fmt: skip
    else:
        process = 0
    for mf in commitlog.mfq.truncate_dirty(process):
        # normally an empty segment that was preallocated ahead of the writer
        logger.info("deleting CommitLog segment %s beyond the last valid record", mf.path)
        mf.destroy()
    if not commitlog.mfq.files:
        commitlog.mfq.reset_to(process - process % commitlog.file_size)
    for cq in cq_table:
        cq.truncate_dirty(process)
    index.truncate_phy(process)

    if rebuild:
        _rebuild_queues(commitlog, cq_table, rebuild, process, levels)

    min_phy = commitlog.min_offset
    for cq in cq_table:
        cq.correct_min_offset(min_phy)
    commitlog.rebuild_topic_queue_table(cq_table.max_offsets())
    dispatcher.reput_from_offset = process
    index.write_headers()
    return process


def _rebuild_queues(
    commitlog: CommitLog,
    cq_table: ConsumeQueueTable,
    keys: set[tuple[str, int]],
    stop: int,
    levels: list[int],
) -> None:
    logger.warning("rebuilding %d consume queue(s) from the whole CommitLog", len(keys))
    for topic, qid in keys:
        cq = cq_table.find(topic, qid)
        if cq is not None:
            cq_table.reset_queue(cq)

    def on_record(req: DispatchRequest) -> None:
        if (req.topic, req.queue_id) in keys and is_dispatched_to_queue(req.sys_flag):
            cq = cq_table.find_or_create(req.topic, req.queue_id)
            cq.put(
                req.commit_log_offset,
                req.msg_size,
                req.tags_code,
                req.consume_queue_offset,
                req.store_timestamp,
            )

    scan_commit_log(
        commitlog, commitlog.min_offset, on_record, check_crc=False, delay_levels=levels, stop_offset=stop
    )
