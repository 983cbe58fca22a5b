"""pocketmq.store: RocketMQ 4.x's message store (CommitLog, ConsumeQueue, IndexFile), in Python.

On-disk formats are RocketMQ's own (byte tables in ``log/layout.py`` and
``pocketmq.remoting.protocol.message``). The core is synchronous and loop-agnostic; only
``store.services`` (flush, group commit, reput, allocation, cleanup, the put waits) uses
asyncio, and the façade's async methods delegate to it.

Public API (``from pocketmq.store import ...``)
===============================================

``MessageStore(config, *, arriving_listener=None, clock=now_ms)``
    ``config``: :class:`MessageStoreConfig`; ``clock``: ``() -> int`` wall-clock ms (store
    timestamps, index file names, retention). ``arriving_listener`` can also be set later
    through the ``arriving_listener`` attribute (before ``start``).

Lifecycle
    ``load()``               lock ``root/lock`` (:class:`StoreLockedError` if taken), map files,
                             recover (abnormal when ``root/abort`` exists), create ``abort``.
                             ``last_shutdown_clean`` tells which recovery ran.
    ``await start()``        start the services (reput, flush or group commit, CQ/index/checkpoint
                             flush, segment preallocation, cleanup, stats sampling).
    ``await shutdown()``     stop services, dispatch the rest, fsync everything, write the
                             checkpoint, delete ``abort``, release the lock.
    ``close()``              the same, synchronously, for use without ``start`` (tools, tests).

Writes (on the loop thread; the store is single-writer and takes no locks)
    ``put_message(msg: MessageInner) -> PutResult``        append now + wake reput. Never waits.
    ``await put_message_async(msg) -> PutResult``          + flush policy: SYNC_FLUSH waits for the
                             group commit (``syncFlushTimeout`` → FLUSH_DISK_TIMEOUT), unless the
                             message's ``WAIT`` property is false; SYNC_MASTER waits on
                             ``store.replication_waiter`` (HA seam, :class:`ReplicationWaiter`).
    ``put_messages(msgs)`` / ``await put_messages_async(msgs)``   a batch sharing topic and queue:
                             consecutive queue offsets, one segment; ``append.msg_id`` is the
                             comma-separated offset msgIds, ``append.msg_num`` the count.
    ``put_batch(template, items)`` / ``await put_batch_async(...)``   the same batch given as
                             the shared fields once (``template``: a ``MessageInner`` whose body,
                             flag and properties are ignored) + ``(flag, body, properties str)``
                             items (``BatchItem``; body may be a memoryview); same bytes on disk.
                             ``put_batch_async`` always applies the flush policy (WAIT is the
                             caller's: for a batch, the request header's).
    ``append_to_commit_log(start_offset, data) -> bool``    HA slave: raw replicated bytes at the
                             current max phy offset (False on mismatch); reput dispatches them.
    Refusals: SERVICE_NOT_AVAILABLE (not open, SLAVE role, disk full), MESSAGE_ILLEGAL (topic
    empty or > 127 bytes, body > maxMessageSize, record larger than a segment, mixed batch),
    PROPERTIES_SIZE_EXCEEDED (> 32767 bytes), CREATE_MAPEDFILE_FAILED (e.g. ENOSPC creating a
    segment; writes resume once space is available). ``PutResult.status.is_ok`` means stored.

``MessageInner`` fields: topic, body, queue_id, flag, properties (dict or the encoded
``k\\x01v\\x02`` string, passed through verbatim), sys_flag, born_timestamp, born_host,
store_host (``(packed ip bytes 4|16, port)``), reconsume_times, prepared_transaction_offset,
tags_code (informational: the CQ tagsCode is derived from the stored TAGS, or for
``SCHEDULE_TOPIC_XXXX`` from DELAY + ``messageDelayLevel``: store time + level delay). The
store does not rewrite DELAY messages into the schedule topic; the broker does.

``PutResult``: ``status: PutMessageStatus``, ``append: AppendResult | None`` with
``wrote_offset`` (phy offset), ``wrote_bytes``, ``msg_id`` (offset msgId, lazy), ``store_timestamp``,
``logics_offset`` (queue offset of the first record), ``msg_num``.

Reads
    ``get_message(group, topic, queue_id, offset, max_nums, max_bytes=None, message_filter=None)
    -> GetResult``: ``status: GetMessageStatus`` (FOUND, NO_MATCHED_MESSAGE,
    MESSAGE_WAS_REMOVING, OFFSET_FOUND_NULL, OFFSET_OVERFLOW_BADLY, OFFSET_OVERFLOW_ONE,
    OFFSET_TOO_SMALL, NO_MATCHED_LOGIC_QUEUE, NO_MESSAGE_IN_QUEUE), ``next_begin_offset``,
    ``min_offset``, ``max_offset``, ``body`` (ONE bytes object: the complete records, ready to
    be the pull response body), ``message_count``, ``suggest_pulling_from_slave``,
    ``message_offsets``. Limits as Java: maxMsgNums, 32 msgs / 256 KiB in memory, 8 / 64 KiB
    "on disk", at most one CQ file per call; ``max_bytes`` caps further. ``message_filter``
    implements :class:`MessageFilter` (``is_matched_by_consume_queue(tags_code)``,
    ``is_matched_by_commit_log(record_bytes)``). A queue that never existed reports
    NO_MESSAGE_IN_QUEUE (as Java, which creates it on lookup).
    ``look_message_by_offset(phy, size=None) -> MessageExt | None``
    ``get_message_bytes_by_offset(phy, size=None) -> bytes | None``   (VIEW_MESSAGE_BY_ID)
    ``get_max_offset_in_queue / get_min_offset_in_queue(topic, queue_id) -> int``
    ``get_offset_in_queue_by_time(topic, queue_id, ts_ms) -> int``   first offset stored >= ts
    ``get_message_store_timestamp(topic, queue_id, offset)``, ``get_earliest_message_time(topic=None, queue_id=None)``
    ``get_commit_log_offset_in_queue(topic, queue_id, offset) -> int``
    ``query_message(topic, key, max_num, begin_ms, end_ms) -> QueryMessageResult`` (``messages``:
    raw records, verified against KEYS/UNIQ_KEY so hash collisions never leak; ``body``;
    ``index_last_update_timestamp``; ``index_last_update_phyoffset``). max_num ≤ maxMsgsNumBatch.
    ``get_max_phy_offset() / get_min_phy_offset()``, ``get_commit_log_data(offset, max_size)`` (HA master).
    ``dispatch_behind_bytes``, ``runtime_info() -> dict[str, str]`` (putTps, getFoundTps, getMissTps,
    getTotalTps, getTransferedTps, putMessageTimesTotal, putMessageSizeTotal, commitLogDiskRatio,
    consumeQueueDiskRatio, commitLogMinOffset, commitLogMaxOffset, dispatchBehindBytes, ...).

Admin
    ``delete_topics(topics) -> int``, ``clean_unused_topics(retain) -> int`` (DELETE_TOPIC_IN_BROKER),
    ``clean_expired_consume_queues() -> int``, ``delete_expired_commit_log_now(rounds) -> bool``,
    ``read_consume_queue(topic, queue_id, index, count) -> ConsumeQueueRead | None``,
    ``queue_counts() -> dict[str, int]`` (every topic with ConsumeQueues → highest queue id + 1;
    the broker restores configs missing from topics.json with it),
    ``put_times_total`` and ``transferred_msg_count`` (the counters behind BrokerStats),
    ``disk_full`` (set by the cleaner above ``diskSpaceWarningLevelRatio``), ``do_reput()`` and
    ``flush()`` for synchronous use.

Seams (``store/listener.py``): :class:`MessageArrivingListener` ``arriving(topic, queue_id,
logic_offset, tags_code, store_timestamp, filter_bit_map, properties)`` is called by reput on
the loop after each record reaches its ConsumeQueue (``logic_offset`` = queue offset + 1, as
Java); :class:`MessageFilter`; :class:`ReplicationWaiter`.

Index process (``indexProcessEnable``, pocketmq's own key, default off): ``start`` hands the
IndexFiles to a child process (``index.process.main``, started after recovery; ``index.process.control`` is the
store's side) so the index is built on another core; reput then writes ConsumeQueues only.
Messages are consumable as soon as reput dispatched them and findable by key once the child
indexed them; ``dispatch_behind_bytes`` counts both. Queries, cleanup and the checkpoint's
indexMsgTimestamp follow the child; ``shutdown`` lets it finish. Same files, same bytes.

Layout (internal; the broker imports only this facade)
    ``log/``       mapped files and their queue, CommitLog, batch encoding, record layout
                   (``log/layout.py``), record validation, CRC, syscalls
    ``queue/``     ConsumeQueue, the queue table, the pull selection over CQ units
    ``index/``     IndexFile and IndexService, the key hash, the record scan, and ``process/``
                   (the index child process: its program, the store's control of it, shared state)
    ``dispatch/``  reput: the dispatcher, the appended-record fast path, property field parsing
    ``recovery/``  CommitLog/ConsumeQueue/index recovery, the checkpoint, abort and lock files
    ``services/``  the asyncio services (reput, flush, group commit, allocation, cleanup, the
                   index-process watch, the fsync helper process, the flush-policy waits)
    top level      the facade (``message_store``) and its public small modules: ``config``,
                   ``results``, ``message_inner``, ``listener``, ``errors``, ``clock``, ``stats``

Errors: expected outcomes are statuses; :class:`StoreError` subclasses for corruption that
cannot be repaired, misuse (:class:`IllegalStateError`) and the lock; ``OSError`` propagates.
"""

from pocketmq.store.clock import now_ms
from pocketmq.store.config import BrokerRole, FlushDiskType, MessageStoreConfig, parse_delay_levels
from pocketmq.store.errors import IllegalStateError, StoreCorruptError, StoreError, StoreLockedError
from pocketmq.store.listener import MessageArrivingListener, MessageFilter, ReplicationWaiter
from pocketmq.store.log.batch_encode import BatchBody, BatchItem
from pocketmq.store.message_inner import MessageInner
from pocketmq.store.message_store import MessageStore
from pocketmq.store.results import (
    AppendMessageStatus,
    AppendResult,
    ConsumeQueueRead,
    GetMessageStatus,
    GetResult,
    PutMessageStatus,
    PutResult,
    QueryMessageResult,
)

__all__ = [
    "AppendMessageStatus",
    "AppendResult",
    "BatchBody",
    "BatchItem",
    "BrokerRole",
    "ConsumeQueueRead",
    "FlushDiskType",
    "GetMessageStatus",
    "GetResult",
    "IllegalStateError",
    "MessageArrivingListener",
    "MessageFilter",
    "MessageInner",
    "MessageStore",
    "MessageStoreConfig",
    "PutMessageStatus",
    "PutResult",
    "QueryMessageResult",
    "ReplicationWaiter",
    "StoreCorruptError",
    "StoreError",
    "StoreLockedError",
    "now_ms",
    "parse_delay_levels",
]
