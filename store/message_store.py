"""``MessageStore``: the façade the broker uses (see the package docstring for the API contract)."""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

from pocketmq.remoting.protocol.message import MessageConst, MessageDecodeError, MessageExt, decode_message
from pocketmq.store.clock import now_ms
from pocketmq.store.config import BrokerRole, FlushDiskType, MessageStoreConfig
from pocketmq.store.dispatch.dispatcher import Dispatcher
from pocketmq.store.errors import IllegalStateError
from pocketmq.store.ha import HA_REPUT_BATCH, HAMaster, HASlave
from pocketmq.store.index.file import IndexService
from pocketmq.store.listener import MessageArrivingListener, MessageFilter, ReplicationWaiter
from pocketmq.store.log.batch_encode import BatchItem, BatchPut, HalfCopy
from pocketmq.store.log.commitlog import EVERY_PUT, NO_SERVICES, AppendedRecord, CommitLog, no_wakeup
from pocketmq.store.log.layout import CQ_UNIT, SCHEDULE_TOPIC
from pocketmq.store.log.mapped_file import MappedFile
from pocketmq.store.log.syscalls import disk_usage_ratio, physical_memory
from pocketmq.store.message_inner import MessageInner
from pocketmq.store.queue.cq_table import ConsumeQueueTable
from pocketmq.store.queue.pull import select_messages
from pocketmq.store.recovery.checkpoint import (
    StoreCheckpoint,
    StoreLock,
    abort_file_exists,
    create_abort_file,
    remove_abort_file,
)
from pocketmq.store.recovery.recover import recover
from pocketmq.store.results import (
    ConsumeQueueRead,
    GetMessageStatus,
    GetResult,
    MissedGetResult,
    PutMessageStatus,
    PutResult,
    QueryMessageResult,
)
from pocketmq.store.services import StoreServices
from pocketmq.store.services.policy import PutPolicy
from pocketmq.store.services.reput import ReadEnd
from pocketmq.store.stats import StoreStats

if TYPE_CHECKING:
    from pocketmq.store.services.flush import RoundCallback, RoundFuture

logger = logging.getLogger(__name__)


_REFUSED = PutResult(PutMessageStatus.SERVICE_NOT_AVAILABLE)
# enum members as module constants: a member read is an attribute lookup (~80 ns) per put
_FLUSH_DISK_TIMEOUT = PutMessageStatus.FLUSH_DISK_TIMEOUT

_NO_MESSAGE_IN_QUEUE = GetMessageStatus.NO_MESSAGE_IN_QUEUE
_OFFSET_TOO_SMALL = GetMessageStatus.OFFSET_TOO_SMALL
_OFFSET_OVERFLOW_ONE = GetMessageStatus.OFFSET_OVERFLOW_ONE
_OFFSET_OVERFLOW_BADLY = GetMessageStatus.OFFSET_OVERFLOW_BADLY
_OFFSET_FOUND_NULL = GetMessageStatus.OFFSET_FOUND_NULL


class MessageStore:
    def __init__(
        self,
        config: MessageStoreConfig,
        *,
        arriving_listener: MessageArrivingListener | None = None,
        clock: Callable[[], int] = now_ms,
    ) -> None:
        self.config = config
        self.clock = clock
        self.stats = StoreStats(clock())
        self.commitlog = CommitLog(config, clock, allocator=self._allocate)
        self.commitlog.on_disk_full = self._on_disk_full
        self.cq_table = ConsumeQueueTable(
            config.consume_queue_dir, config.cq_file_size, allocator=self._allocate_queue_file
        )
        self.index = IndexService(config.index_dir, config.max_hash_slot_num, config.max_index_num, clock)
        self.dispatcher = Dispatcher(self.commitlog, self.cq_table, self.index, config, arriving_listener)
        self.checkpoint: StoreCheckpoint | None = None
        self.replication_waiter: ReplicationWaiter | None = None
        #: the HA side :meth:`start_ha` started: the master's listener, or the slave's client
        self.ha_master: HAMaster | None = None
        self.ha_slave: HASlave | None = None
        self.last_shutdown_clean = True
        self._is_slave = config.broker_role is BrokerRole.SLAVE
        self._disk_full = False
        #: the put gate, kept equal to ``_refuse() is False`` by the two setters below
        self._writable = False
        self._lock: StoreLock | None = None
        self._services: StoreServices | None = None
        #: the broker's servers' end of read (set before ``start``): reput's slice runs there
        self.read_end: ReadEnd | None = None
        self._state = "new"  # new -> loaded -> running -> closed
        self._memory_limit = physical_memory() * config.access_message_in_memory_max_ratio // 100
        self.commitlog.on_failed = self._count_failed
        self._sync_flush = config.flush_disk_type is FlushDiskType.SYNC_FLUSH
        self._sync_master = config.broker_role is BrokerRole.SYNC_MASTER
        self._policy = PutPolicy(
            sync_flush=self._sync_flush, sync_master=self._sync_master, flush_now=self.commitlog.mfq.flush
        )

    # ================================================================ lifecycle

    @property
    def _state(self) -> str:
        return self._state_value

    @_state.setter
    def _state(self, value: str) -> None:
        self._state_value = value
        self._set_writable()

    @property
    def disk_full(self) -> bool:
        """Set by the cleaner above ``diskSpaceWarningLevelRatio``: puts are refused while True."""
        return self._disk_full

    @disk_full.setter
    def disk_full(self, value: bool) -> None:
        self._disk_full = value
        self._set_writable()

    def _on_disk_full(self, reason: str) -> None:
        """The CommitLog could not (ENOSPC) or should not (past ``diskSpaceWarningLevelRatio``)
        reserve more disk: refuse puts (14) now, not at the cleaner's next run; the cleaner
        accepts them again once it measures space."""
        if not self._disk_full:
            logger.error("%s: puts refused (SERVICE_NOT_AVAILABLE) until space is freed", reason)
            self.disk_full = True

    @property
    def arriving_listener(self) -> MessageArrivingListener | None:
        return self.dispatcher.listener

    @arriving_listener.setter
    def arriving_listener(self, listener: MessageArrivingListener | None) -> None:
        self.dispatcher.listener = listener

    def load(self) -> None:
        """Lock the directory, map every file and recover (abnormal if ``abort`` exists).

        Raises:
            StoreLockedError: another process has the store open.
            StoreCorruptError / OSError: files cannot be opened.
        """
        if self._state != "new":
            raise IllegalStateError(f"load() in state {self._state}")
        cfg = self.config
        os.makedirs(cfg.store_path_root_dir, exist_ok=True)
        self._lock = StoreLock(cfg.lock_path)
        try:
            self._load_locked()
        except BaseException:
            self._lock.release()
            self._lock = None
            raise

    def _load_locked(self) -> None:
        cfg = self.config
        abnormal = abort_file_exists(cfg.abort_path)
        self.last_shutdown_clean = not abnormal
        self.checkpoint = StoreCheckpoint(cfg.checkpoint_path)
        self.commitlog.mfq.load()
        self.index.load(adopt=not cfg.index_process_enable)
        started = time.monotonic()
        recover(
            self.commitlog,
            self.cq_table,
            self.index,
            self.checkpoint,
            self.dispatcher,
            cfg,
            abnormal=abnormal,
        )
        logger.info(
            "store %s recovered (%s) in %.3f s: commitlog [%d, %d), %d queues",
            cfg.store_path_root_dir, "abnormal" if abnormal else "normal", time.monotonic() - started,
            self.commitlog.min_offset, self.commitlog.max_offset, len(self.cq_table),
        )  # fmt: skip
        create_abort_file(cfg.abort_path)
        self._state = "loaded"

    async def start(self) -> None:
        """Start flush / group commit / reput / allocation / cleanup / checkpoint services."""
        if self._state != "loaded":
            raise IllegalStateError(f"start() in state {self._state}")
        services = self._services = StoreServices(self)
        services.reput.read_end = self.read_end
        services.start()
        cl = self.commitlog
        cl.after_put = services.after_put
        # ASYNC_FLUSH: the hook is reput's wakeup alone, called once per loop turn, not per put
        cl.wake_gate = services.reput if services.after_put == services.reput.wakeup else EVERY_PUT
        self._policy.group_commit = services.group_commit if self._sync_flush else None
        self._state = "running"

    async def start_ha(self, *, host: str = "0.0.0.0", port: int | None = None) -> None:
        """Start replication (after :meth:`start`): a master listens for slaves on ``host:port``
        (default ``haListenPort``; 0 picks a free port, read it back from ``ha_master.port``), and
        a SYNC_MASTER's puts wait on its ``GroupTransfer``; a slave follows ``haMasterAddress``
        or the address given to :meth:`update_ha_master_address`.

        Raises:
            OSError: the HA port cannot be bound.
        """
        if self._state != "running":
            raise IllegalStateError(f"start_ha() in state {self._state}")
        cfg = self.config
        if self._services is not None:
            # a dispatch slice holds the loop: a slave's acknowledgement (a SYNC_MASTER send)
            # and a master's transfer wait behind it, so replicating stores dispatch in short slices
            self._services.reput.batch = HA_REPUT_BATCH
        if self._is_slave:
            slave = HASlave(
                self,
                master_address=cfg.ha_master_address,
                heartbeat_ms=cfg.ha_send_heartbeat_interval,
                housekeeping_ms=cfg.ha_housekeeping_interval,
                keep_warm_ms=cfg.ha_keep_warm_millis,
            )
            slave.start()
            self.ha_slave = slave
            return
        master = HAMaster(
            self,
            host=host,
            port=cfg.ha_listen_port if port is None else port,
            segment_size=cfg.mapped_file_size_commit_log,
            batch_size=cfg.ha_transfer_batch_size,
            heartbeat_ms=cfg.ha_send_heartbeat_interval,
            housekeeping_ms=cfg.ha_housekeeping_interval,
            slave_timeout_ms=cfg.slave_timeout,
            fallbehind_max=cfg.ha_slave_fallbehind_max,
            keep_warm_ms=cfg.ha_keep_warm_millis,
        )
        await master.start()
        self.ha_master = master
        if self._services is not None:
            # ASYNC_MASTER replication follows reput (one call per dispatch batch, not per put);
            # SYNC_MASTER puts also wake the transfer themselves (GroupTransfer.wait_replicated)
            self._services.after_dispatch = master.wakeup
        if self._sync_master:
            self.replication_waiter = master.group_transfer

    def update_ha_master_address(self, addr: str | None) -> None:
        """A slave learned its master's HA address (REGISTER_BROKER reply): follow it, unless
        ``haMasterAddress`` is configured (as RocketMQ)."""
        if self.ha_slave is not None and not self.config.ha_master_address:
            self.ha_slave.update_master_address(addr)

    async def _stop_ha(self) -> None:
        master, self.ha_master = self.ha_master, None
        slave, self.ha_slave = self.ha_slave, None
        if master is not None:
            if self._services is not None:
                self._services.after_dispatch = None
            await master.stop()
        if slave is not None:
            await slave.stop()

    async def shutdown(self) -> None:
        """Stop services, dispatch what is left, flush everything, write the checkpoint, drop ``abort``."""
        if self._state == "closed":
            return
        await self._stop_ha()
        self._state = "stopping"
        services, self._services = self._services, None
        self.commitlog.after_put, self.commitlog.wake_gate = no_wakeup, NO_SERVICES
        self._policy.group_commit = None
        if services is not None:
            await services.stop()
        self.close(flush=services is None)

    def close(self, *, flush: bool = True) -> None:
        """Synchronous clean close (also usable without ``start``): dispatch, flush, checkpoint."""
        if self._state == "closed":
            return
        if self._state == "new":
            self._state = "closed"
            return
        self.dispatcher.do_reput()
        self.dispatcher.write_index_backlog()
        if flush:
            self.flush()
        self.commitlog.mfq.close()
        self.cq_table.close()
        self.index.close()
        if self.checkpoint is not None:
            self.checkpoint.close()
        remove_abort_file(self.config.abort_path)
        if self._lock is not None:
            self._lock.release()
        self._state = "closed"

    def flush(self) -> None:
        """Synchronous fsync of CommitLog, ConsumeQueues, index and checkpoint (blocking)."""
        cl_ts = self.commitlog.mfq.last.last_store_timestamp if self.commitlog.mfq.last else 0
        self.commitlog.mfq.flush()
        logics_ts = self.dispatcher.last_dispatched_timestamp
        self.cq_table.flush()
        self.index.flush()
        cp = self.checkpoint
        if cp is not None:
            if cl_ts:
                cp.physic_msg_timestamp = max(cp.physic_msg_timestamp, cl_ts)
            if logics_ts:
                cp.logics_msg_timestamp = max(cp.logics_msg_timestamp, logics_ts)
                cp.index_msg_timestamp = max(cp.index_msg_timestamp, self.dispatcher.index_timestamp())
            cp.flush()

    def do_reput(self, *, index: bool = True) -> int:
        """Dispatch everything appended so far (services do this on their own once started).
        ``index=False`` leaves the index entries reput's fast path collects pending until a run of
        them is written (``Dispatcher.write_index_backlog``): the send path's dispatch for a
        waiting pull, per message."""
        n = self.dispatcher.do_reput()
        if index:
            self.dispatcher.write_index_backlog()
        return n

    # ================================================================ writes

    def _refuse(self) -> bool:
        return self._state_value not in ("loaded", "running") or self._is_slave or self._disk_full

    def _set_writable(self) -> None:
        """``_writable`` from ``_refuse``; ``put_message`` is the CommitLog's own while writable
        (an instance attribute: no call level per put, ~0.6k instructions), else ``_refused``.
        So is ``put_now``, for ``put = store.put_now; put(msg)``: a read 3.11 specializes (unlike
        one of a name the class has as a method, or any ``store.attr(msg)`` call: ~0.4k each)."""
        w = self._writable = not self._refuse()
        self.put_message = self.put_now = self.commitlog.put_message if w else self._refused  # type: ignore[method-assign]

    def put_message(self, msg: MessageInner) -> PutResult:
        """Append one message now; the flush/replication wait is ``put_message_async``'s job. The
        CommitLog wakes reput, times the put (``commitlog.latency``) and counts a failure."""
        return self.commitlog.put_message(msg) if self._writable else self._refused(msg)

    def _refused(self, msg: MessageInner) -> PutResult:
        self.commitlog.record_latency(0)  # (timed as taking no time)
        self.stats.put_message_failed_times += 1
        return _REFUSED

    def _count_failed(self) -> None:
        self.stats.put_message_failed_times += 1

    def put_message_pair(
        self, first: MessageInner, second: MessageInner
    ) -> tuple[PutResult, PutResult | None]:
        """``put_message(first)``, then, if it was stored, ``put_message(second)``, in one call:
        END_TRANSACTION's committed copy and op record (one reput wake-up; each put timed as
        ``put_message``'s). ``second``'s result is None when ``first`` was not stored."""
        if not self._writable:
            self.commitlog.record_latency(0)
            self.stats.put_message_failed_times += 1
            return _REFUSED, None
        put = self.commitlog.put_message  # (it wakes reput and counts a failure)
        result = put(first)
        return (result, None) if result.append is None else (result, put(second))

    def put_run(
        self,
        msgs: Sequence[MessageInner],
        template: MessageInner | None = None,
        items: Sequence[BatchItem] = (),
        bodies: Sequence[bytes] = (),
        copies: Sequence[HalfCopy] = (),
    ) -> list[AppendedRecord] | None:
        """``CommitLog.put_run``: all of ``msgs`` (then ``copies``, ``items`` or ``bodies``) in one
        append (one reput wake-up), their ``AppendedRecord`` each in order; None: none stored (the
        caller puts them singly)."""
        appended = self.commitlog.put_run(msgs, template, items, bodies, copies) if self._writable else None
        if appended is not None:
            self.commitlog.after_put()
        return appended

    def put_messages(self, msgs: Sequence[MessageInner]) -> PutResult:
        """Append a batch (same topic and queue, consecutive queue offsets, one segment)."""
        return self._track(self.commitlog.put_messages(msgs) if self._writable else _REFUSED)

    def _track(self, result: PutResult) -> PutResult:  # a batch put's: wake reput or count the failure
        if result.append is not None:
            self.commitlog.after_put()
        else:
            self.stats.put_message_failed_times += 1
        return result

    def put_batch(self, template: MessageInner, items: BatchPut) -> PutResult:
        """``put_messages`` of ``(flag, body, properties)`` items sharing ``template``'s other
        fields (``batch_encode``): no ``MessageInner`` per message, bodies copied once."""
        return self._track(self.commitlog.put_batch(template, items) if self._writable else _REFUSED)

    def flush_waiter(self, result: PutResult, direct: RoundCallback | None = None) -> RoundFuture | None:
        """The shared future (``asyncio.Future[bool]``) of the SYNC_FLUSH group-commit round
        covering ``result``'s end offset: True once flushed, False on ``syncFlushTimeout``.
        Puts of a burst share it (register the highest end offset once). None when no wait
        applies: ASYNC_FLUSH, store not started, failed put. Not SYNC_MASTER replication.
        ``direct``: called with the future as the round is resolved (``wait_flushed``)."""
        append = result.append
        gc = self._policy.group_commit
        if append is None or gc is None:
            return None
        return gc.wait_flushed(append.wrote_offset + append.wrote_bytes, direct)

    async def put_message_async(self, msg: MessageInner) -> PutResult:
        """``put_message`` + the flush policy (SYNC_FLUSH group commit unless WAIT=false)."""
        result = self.put_message(msg)
        append = result.append
        if append is None or not (self._sync_flush or self._sync_master) or not msg.wait_store_msg_ok:
            return result
        gc = self._policy.group_commit
        if gc is not None and not self._sync_master:
            # the common SYNC_FLUSH case without an extra coroutine frame (PutPolicy.wait's)
            if await gc.wait_flushed(append.wrote_offset + append.wrote_bytes):
                return result
            return PutResult(_FLUSH_DISK_TIMEOUT, append)
        return await self._policy.wait(result, self.replication_waiter)

    async def put_messages_async(self, msgs: Sequence[MessageInner]) -> PutResult:
        result = self.put_messages(msgs)
        if result.append is None or not msgs[0].wait_store_msg_ok:
            return result
        return await self._policy.wait(result, self.replication_waiter)

    async def put_batch_async(self, template: MessageInner, items: BatchPut) -> PutResult:
        """``put_batch`` + the flush/replication policy (the caller has checked ``WAIT``)."""
        result = self.put_batch(template, items)
        if result.append is None:
            return result
        return await self._policy.wait(result, self.replication_waiter)

    def replicate_then(
        self, result: PutResult, resolve: Callable[[Any, PutMessageStatus], None], arg: Any
    ) -> PutMessageStatus | None:
        """SYNC_MASTER without a task per put: the replication status of ``result`` (a stored put)
        now (PUT_OK, SLAVE_NOT_AVAILABLE), or None and later ``resolve(arg, status)`` on the
        loop (PUT_OK once a slave acknowledged its end offset, FLUSH_SLAVE_TIMEOUT after
        ``slaveTimeout``). PUT_OK when no replication applies (not a SYNC_MASTER, HA not started).
        """
        append = result.append
        master = self.ha_master
        if append is None or master is None or not self._sync_master:
            return PutMessageStatus.PUT_OK
        return master.group_transfer.add(append.wrote_offset + append.wrote_bytes, resolve, arg)

    def append_to_commit_log(self, start_offset: int, data: bytes | memoryview) -> bool:
        """HA slave seam: append replicated bytes at ``start_offset`` (== max phy offset); False on
        an offset mismatch. Reput dispatches the new records. OSError: no segment could be made."""
        if self._state not in ("loaded", "running"):
            raise IllegalStateError("store is not open")
        ok = self.commitlog.append_data(start_offset, data)
        if ok:
            self.commitlog.after_put()
        return ok

    def get_commit_log_data(self, offset: int, max_size: int) -> bytes | None:
        """HA master seam: raw CommitLog bytes from ``offset`` within its segment."""
        return self.commitlog.get_data(offset, max_size)

    # ================================================================ reads

    def _correct(self, old: int, new: int) -> int:
        if not self._is_slave or self.config.offset_check_in_slave:
            return new
        return old

    def get_message(
        self,
        group: str,
        topic: str,
        queue_id: int,
        offset: int,
        max_nums: int,
        max_bytes: int | None = None,
        message_filter: MessageFilter | None = None,
    ) -> GetResult:
        """Read up to ``max_nums`` messages from a queue (Java ``DefaultMessageStore.getMessage``).
        (Run twice per delivery at one send in flight, held then woken: see GetResult.)"""
        stats = self.stats
        stats.get_total_times += 1
        cq = self.cq_table.flat.get((topic, queue_id))  # inline of queue.cq_table.ConsumeQueueTable.find
        min_o, max_o, units = cq.pull_window(offset, max_nums) if cq is not None else (0, 0, None)
        if cq is None or max_o == 0:  # (max_o is 0)
            status, nxt, min_o = _NO_MESSAGE_IN_QUEUE, self._correct(offset, 0), 0
        elif offset < min_o:
            status, nxt = _OFFSET_TOO_SMALL, self._correct(offset, min_o)
        elif offset == max_o:
            status, nxt = _OFFSET_OVERFLOW_ONE, offset  # (_correct(offset, offset))
        elif offset > max_o:
            status, nxt = _OFFSET_OVERFLOW_BADLY, self._correct(offset, min_o if min_o == 0 else max_o)
        elif units is None:
            status, nxt = _OFFSET_FOUND_NULL, self._correct(offset, cq.roll_next_file(offset))
        else:
            max_phy = self.commitlog.max_offset  # (read only here: a held pull's read has no use for it)
            status, scanned, body, count, max_phy_pulling, offsets = select_messages(
                units, max_nums, max_bytes, message_filter, self.commitlog.mfq, self.config,
                self._memory_limit, max_phy,
            )  # fmt: skip
            if count:
                stats.get_found_times += 1
                stats.get_transferred_msg_count += count
            else:
                stats.get_miss_times += 1
            r = GetResult()  # (nextBeginOffset not corrected: Java corrects only the out-of-range cases)
            r.status, r.next_begin_offset, r.min_offset, r.max_offset = status, offset + scanned, min_o, max_o
            r.body, r.message_count, r.message_offsets = body, count, offsets
            r.suggest_pulling_from_slave = max_phy - max_phy_pulling > self._memory_limit
            return r
        stats.get_miss_times += 1
        r = MissedGetResult()
        r.status, r.next_begin_offset, r.min_offset, r.max_offset = status, nxt, min_o, max_o
        return r

    def look_message_by_offset(self, phy_offset: int, size: int | None = None) -> MessageExt | None:
        """Decode the record at a CommitLog offset; None if absent or not a valid record."""
        raw = self.get_message_bytes_by_offset(phy_offset, size)
        if raw is None:
            return None
        try:
            return decode_message(raw)
        except MessageDecodeError:
            return None

    def get_message_bytes_by_offset(self, phy_offset: int, size: int | None = None) -> bytes | None:
        """Raw record at a CommitLog offset (VIEW_MESSAGE_BY_ID); size read from the record if None."""
        if size is None:
            head = self.commitlog.get_message(phy_offset, 4)  # the record's TOTALSIZE
            if head is None:
                return None
            size = int.from_bytes(head, "big", signed=True)
            if size < 91:  # smaller than any record (empty body, 1-byte topic, no properties)
                return None
        return self.commitlog.get_message(phy_offset, size)

    def get_max_offset_in_queue(self, topic: str, queue_id: int) -> int:
        cq = self.cq_table.find(topic, queue_id)
        return cq.max_offset if cq is not None else 0

    def get_min_offset_in_queue(self, topic: str, queue_id: int) -> int:
        cq = self.cq_table.find(topic, queue_id)
        return cq.min_offset if cq is not None else 0

    def get_commit_log_offset_in_queue(self, topic: str, queue_id: int, cq_offset: int) -> int:
        cq = self.cq_table.find(topic, queue_id)
        unit = cq.get_unit(cq_offset) if cq is not None else None
        return unit[0] if unit is not None else 0

    def get_offset_in_queue_by_time(self, topic: str, queue_id: int, timestamp: int) -> int:
        """First queue offset whose message was stored at or after ``timestamp`` (ms)."""
        cq = self.cq_table.find(topic, queue_id)
        if cq is None:
            return 0
        return cq.offset_by_time(timestamp, self.commitlog.pickup_store_timestamp, self.commitlog.min_offset)

    def get_message_store_timestamp(self, topic: str, queue_id: int, cq_offset: int) -> int:
        phy = self.get_commit_log_offset_in_queue(topic, queue_id, cq_offset)
        cq = self.cq_table.find(topic, queue_id)
        if cq is None or cq.get_unit(cq_offset) is None:
            return -1
        return self.commitlog.pickup_store_timestamp(phy)

    def get_earliest_message_time(self, topic: str | None = None, queue_id: int | None = None) -> int:
        """Store time of the oldest message (of one queue, or of the whole CommitLog); -1 if none."""
        if topic is None or queue_id is None:
            return self.commitlog.pickup_store_timestamp(self.commitlog.min_offset)
        return self.get_message_store_timestamp(
            topic, queue_id, self.get_min_offset_in_queue(topic, queue_id)
        )

    def query_message(self, topic: str, key: str, max_num: int, begin: int, end: int) -> QueryMessageResult:
        """Messages of ``topic`` whose KEYS (or UNIQ_KEY) contain ``key``, stored within [begin, end] ms."""
        max_num = min(max_num, self.config.max_msgs_num_batch)
        found: list[bytes] = []
        seen: set[int] = set()
        self.dispatcher.write_index_backlog()  # (an OSError here fails the query, as a read would)
        # ask for more candidates than wanted: collisions and duplicates are filtered below
        for phy in self.index.query(topic, key, min(max_num * 4, 4096), begin, end):
            if phy in seen:
                continue
            seen.add(phy)
            raw = self.get_message_bytes_by_offset(phy)
            if raw is None:
                continue
            try:
                msg = decode_message(raw, read_body=False)
            except MessageDecodeError:
                continue
            keys = (msg.get_property(MessageConst.KEYS) or "").split(" ")
            if msg.topic != topic or (key not in keys and msg.uniq_key != key):
                continue  # hash collision or a stale entry
            if not begin <= msg.store_timestamp <= end:
                continue
            found.append(raw)
            if len(found) >= max_num:
                break
        return QueryMessageResult(found, self.index.last_update_timestamp, self.index.last_update_phy_offset)

    def get_max_phy_offset(self) -> int:
        return self.commitlog.max_offset

    def get_min_phy_offset(self) -> int:
        return self.commitlog.min_offset

    @property
    def dispatch_behind_bytes(self) -> int:
        return self.dispatcher.behind

    def runtime_info(self) -> dict[str, str]:
        """RocketMQ runtime-info keys (``putTps``, ``commitLogDiskRatio``, ...), values as strings."""
        cl = self.commitlog
        cfg = self.config
        info = self.stats.runtime_info(cl.put_times_total, cl.put_size_total)
        try:
            cl_ratio = disk_usage_ratio(cfg.commit_log_dir)
            cq_ratio = disk_usage_ratio(cfg.store_path_root_dir)
        except OSError:
            cl_ratio = cq_ratio = -1.0
        info.update(
            {
                "commitLogDiskRatio": f"{cl_ratio}",
                f"commitLogDiskRatio_{cfg.commit_log_dir}": f"{cl_ratio}",
                "consumeQueueDiskRatio": f"{cq_ratio}",
                "commitLogMinOffset": str(cl.min_offset),
                "commitLogMaxOffset": str(cl.max_offset),
                "dispatchBehindBytes": str(self.dispatch_behind_bytes),
                "remainHowManyDataToFlush": str(cl.mfq.dirty_bytes()),
                "remainTransientStoreBufferNumbs": "0",
                "earliestMessageTimeStamp": str(self.get_earliest_message_time()),
                "pageCacheLockTimeMills": "0",
            }
        )
        info.update(self.ha_runtime_info())
        return info

    def ha_runtime_info(self) -> dict[str, str]:
        """pocketmq's HA figures (RocketMQ 4.x has no runtime keys for them): on a master the
        connected slaves, each one's acknowledged offset and the lag behind the put offset; on a
        slave the master followed and the offset last reported to it."""
        master, slave = self.ha_master, self.ha_slave
        put_where = self.commitlog.max_offset
        if master is not None:
            slaves = master.slaves()
            best = max((ack for _, ack in slaves), default=-1)
            return {
                "haListenPort": str(master.port),
                "haSlaveCount": str(len(slaves)),
                "haSlaves": ",".join(f"{addr}={ack}" for addr, ack in slaves),
                "haSlaveAckOffset": str(best),
                "haSlaveFallBehind": str(put_where - best) if slaves else "-1",
            }
        if slave is not None:
            return {
                "haMasterAddress": slave.master_address or "",
                "haConnected": "true" if slave.connected else "false",
                "haReportedOffset": str(slave.reported_offset),
            }
        return {}

    # ================================================================ admin

    def delete_topics(self, topics: Iterable[str]) -> int:
        """Drop the ConsumeQueues (and queue-offset counters) of ``topics``; returns how many existed."""
        n = 0
        table = self.commitlog.topic_queue_table
        for topic in list(topics):
            if self._services is not None:
                self._services.prepare.discard(os.path.join(self.config.consume_queue_dir, topic))
            if self.cq_table.delete_topic(topic):
                n += 1
            for key in [k for k in table if k[0] == topic]:
                del table[key]
        return n

    def prepare_topic(self, topic: str, queue_nums: int) -> None:
        """A topic was created: make the first ConsumeQueue file of each of its queues that has
        none yet, off the loop (``services.prepare``), so its first messages find them ready.
        A no-op before :meth:`start`."""
        services = self._services
        if services is None:
            return
        root = self.config.consume_queue_dir
        dirs = []
        for q in range(queue_nums):
            cq = self.cq_table.find(topic, q)
            if cq is None or not cq.mfq.files:
                dirs.append(os.path.join(root, topic, str(q)))
        services.prepare.prepare_queues(dirs)

    def queue_counts(self) -> dict[str, int]:
        """Every topic with ConsumeQueues (after :meth:`load`) → its queue count (highest queue id + 1)."""
        return {topic: max(queues) + 1 for topic, queues in self.cq_table.queues.items() if queues}

    def clean_unused_topics(self, retain: Iterable[str]) -> int:
        """Delete the queues of every topic not in ``retain`` (system topics are kept)."""
        keep = set(retain) | {SCHEDULE_TOPIC, "RMQ_SYS_TRANS_OP_HALF_TOPIC"}
        return self.delete_topics([t for t in self.cq_table.topics() if t not in keep])

    def clean_expired_consume_queues(self) -> int:
        """Java ``cleanExpiredConsumerQueue`` plus the CQ file sweep of the clean service.

        Files whose units all point below the CommitLog's first offset are deleted; a queue whose
        last unit points below it holds nothing readable and is dropped with its offset counter (the
        next write starts it again at 0, as in Java). The schedule topic is left alone (its queues
        hold the delay progress). Returns the number of files and queues removed.
        """
        min_phy = self.get_min_phy_offset()
        removed = 0
        counters = self.commitlog.topic_queue_table
        cq_table = self.cq_table
        for cq in list(cq_table):
            if cq.topic == SCHEDULE_TOPIC:
                continue
            removed += cq.delete_expired(min_phy)
            last = cq.get_unit(cq.max_offset - 1) if cq.max_offset > 0 else None
            if last is None or last[0] + last[1] >= min_phy:
                continue  # empty (maybe created just now) or still readable
            logger.info(
                "consume queue %s/%d is expired (last unit %d < %d); removing",
                cq.topic,
                cq.queue_id,
                last[0],
                min_phy,
            )
            cq_table.reset_queue(cq)
            counters.pop((cq.topic, cq.queue_id), None)
            removed += 1
        return removed

    def delete_expired_commit_log_now(self, rounds: int) -> bool:
        """Java ``executeDeleteFilesManually``: the clean service deletes expired CommitLog
        segments on its next ``rounds`` runs even before the deletion hour. False when the
        services are not running (nothing scheduled)."""
        services = self._services
        if services is None:
            return False
        services.clean.manual_delete_rounds = rounds
        services.clean.wakeup()
        return True

    def read_consume_queue(
        self, topic: str, queue_id: int, index: int, count: int
    ) -> ConsumeQueueRead | None:
        """Raw ConsumeQueue units for QUERY_CONSUME_QUEUE: None when the queue does not exist;
        ``units`` is None when ``index`` is not stored (below the minimum or past the end)."""
        cq = self.cq_table.find(topic, queue_id)
        if cq is None:
            return None
        units: list[tuple[int, int, int]] | None = []
        if count > 0:
            raw = cq.units_from(index, count) if index >= cq.min_offset else None
            units = None if raw is None else list(CQ_UNIT.iter_unpack(bytes(raw)))
        return ConsumeQueueRead(cq.min_offset, cq.max_offset, units)

    @property
    def put_times_total(self) -> int:
        """Messages stored since start (Java ``putMessageTimesTotal``)."""
        return int(self.commitlog.put_times_total)

    @property
    def transferred_msg_count(self) -> int:
        """Messages returned by ``get_message`` since start (Java ``getTransferedMsgCount``)."""
        return int(self.stats.get_transferred_msg_count)

    # ================================================================ allocation seam

    def _allocate(self, directory: str, offset: int, size: int) -> MappedFile | None:
        services = self._services
        return services.allocate.take(directory, offset, size) if services is not None else None

    def _allocate_queue_file(self, directory: str, offset: int, size: int) -> MappedFile | None:
        services = self._services
        return services.prepare.take(directory, offset, size) if services is not None else None
