"""``AllocateService``: prepares the next CommitLog segment in a worker thread (etcd file_pipeline).

Creating a segment means open + ``posix_fallocate`` + mmap + prefault (``madvise`` through
ctypes, so the GIL is released); done inline it would stall the puts on the first touches of a
fresh segment. When the writer rolls, ``take`` hands over the prepared file (waiting for it if
the worker is still busy, as Java's ``AllocateMappedFileService`` does, however long it takes:
creating it inline meanwhile would race the worker for the same path) and requests the next
one. A failed preparation (e.g. ENOSPC) makes ``take`` return None, so the queue creates the
segment inline and reports the error as a put status.

Prefaulting runs a window ahead of the writer (``advance``, called after each reput batch)
rather than over the whole 1 GiB at once: populating a segment's page tables costs ~1 s of
kernel CPU, which on a small machine competes with the loop, and most of it would be for
pages a lightly loaded broker does not write for hours.

Disk blocks are reserved here too, ``RESERVE_WINDOW`` ahead of the writer (``MappedFile.reserve``,
one ``fallocate``, requested once the writer is half way through the last window). The
CommitLog reserves blocks itself a step (4 MiB) ahead of its writes so a full disk is a refused
put, not a SIGBUS; done on the loop, that ``fallocate`` took up to 57 ms (sum 37-77 ms per
256 MiB written, measured under load: ext4 waits on its journal while the flush thread
fsyncs). With the blocks reserved ahead, the writer's check finds them there and makes no
syscall. The ``diskSpaceWarningLevelRatio`` check that followed each reservation runs on the
loop after each window (``check_disk``). A failed reservation (ENOSPC) is left to the writer,
whose own ``ensure`` then fails and refuses the put. The window is small (8 MiB) so segments
stay sparse past what is written (issue 23).

With SYNC_FLUSH the segment being written is mapped ``MADV_RANDOM``: with mmap readahead the kernel fills the
page cache with large folios (ext4, seen on Linux 6.18), dirty state is kept per folio, and every
SYNC_FLUSH fdatasync then wrote back whole large folios for a few KB of new messages: 18x the
bytes (1.27 GB for 69 MB of appends) and 1-1.5 ms per fsync instead of 0.25 ms. Random advice
makes faults allocate single pages. Once the writer has moved on, the full segment gets
``MADV_NORMAL`` back, so consumers catching up from disk still get readahead. ASYNC_FLUSH keeps
the default: its flushes are large and rare, and with random advice the loop pays instead of the
prefault thread (broker, 128 sends in flight, ~550 MB written: prefault thread 1.48 -> 0.69 s of
sys, but the loop's minor faults 17.6k -> 147.6k, one per page, and its sys 0.75 -> 1.17 s).

Most of the prefault thread's kernel CPU (~10 us per 4 KiB page, ~3 us per 1 KiB message at 128
sends in flight on the 2-core test VM) is not the prefault's own work but the first touch of
memory the guest had given back to its host: this VM runs free page reporting (virtio-balloon,
``page_reporting.page_reporting_order=11`` on the kernel command line), which hands free 8 MiB
blocks to the host; the first write to such a page afterwards faults on the host, which the
guest sees as a slow ``memset``
(ext4 readahead zeroing the new, unwritten-extent folios). Measured with a bare mapping:
populating 256 MiB cost 9.3 us per page after 6 s idle, 0.5 us when rerun at once on the memory
just freed; writes without any prefault paid the same 9-10 us per page (1.9 once reused); anon
THP memory 10.6 us per 4 KiB, order-0 anon pages 1.6-1.8 (small free fragments, not reported).
MADV_POPULATE_WRITE or READ, with a writer close behind, far away or absent, all cost the same
~10 us per page after idle. Every page a new CommitLog segment caches is fresh memory while the
box has free RAM to spare (19 of 24 GB here); once the page cache fills RAM, reclaimed pages
should be reused, as in the 0.5 us rerun (not measured in a broker). Prefaulting keeps that
cost off the loop, which would otherwise pay it in its write faults.

With SYNC_FLUSH the prefault window is also written as zeros and synced (``_zero_step``), as
Java's ``warmMappedFile`` does under SYNC_FLUSH (zeros through the mapping, forced every 16
pages). Blocks from ``fallocate`` are *unwritten* extents: the first writeback into each converts
it, and on ext4 that conversion runs in a kworker (``ext4-rsv-conversion``) before the page's
writeback counts as done, then dirties extent metadata the fdatasync writes as well. Measured
on this VM's ext4 (1 KiB mapped write + fdatasync, interleaved, 2,400 each): a fallocated region
averaged 137-238 us (p90 201-304), one written with zeros and synced beforehand 126-181 (p90
161-220); with both cores busy 362-875 against 254-464, as the kworker (nice 0) waits for a
core. In the broker (perf, 128 sends in flight): 1,826 conversions per 1,046 group-commit
fsyncs before, 69 (one per zeroed MiB, off the commits) after; store_bench SYNC_FLUSH with one
waiter, loaded box: loop CPU 162-205 -> 123-126 us per put (not attributed yet; the write
faults into unwritten extents are the likely share). Zeros are written only a window ahead of
the writer, so segments stay sparse past what is written (issue 23); a window the writer has
already passed is skipped. Each step is read into the page cache (``fadvise(WILLNEED)``) before
its populate: under MADV_RANDOM every page was otherwise a cache miss served in the fault and
counted as a major fault (4,096 per window, the broker's majflt under SYNC_FLUSH).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
from collections.abc import Callable, Iterable
from concurrent.futures import Future, ThreadPoolExecutor

from pocketmq.store.log import syscalls
from pocketmq.store.log.mapped_file import MappedFile

logger = logging.getLogger(__name__)

#: a writer still waiting for a file being prepared after this long logs a warning (and waits on)
TAKE_TIMEOUT_S = 5.0
#: how far ahead of the writer pages are prefaulted; the next window is requested when the
#: writer is half way through the current one. 16 MiB, not 64: a window is a burst of kernel
#: CPU and GIL hand-offs in the prefault thread, and at 2,000 msg/s (bench/e2e_latency.py) a
#: fresh store's first put prefaulted two at once (the first segment's and the next one's),
#: 128 MiB: 200-250 ms of CPU over ~1 s, during which a thread sleeping 0.5 ms at a time woke
#: up to 66-92 ms late (8-27 ms without it; 16 MiB: 16-26 ms), and every run's deliveries
#: over p99 were all in its first second; later windows fell into a round every ~14 s. Paced,
#: 16 MiB still stays ahead of a writer at hundreds of MB/s (8 MiB of headroom when requested).
PREFAULT_WINDOW = 16 << 20
#: how far ahead of the writer disk blocks are reserved (the next window is requested when the
#: writer is half way through the current one)
RESERVE_WINDOW = 8 << 20
#: bytes populated per madvise call, and the pause after each as a multiple of its duration
#: (see ``_prefault_range``)
PREFAULT_STEP = 1 << 20
PREFAULT_PAUSE = 1.0
#: ... except while the writer, at its pace over the last step, would reach the end of the step
#: just prefaulted within this many seconds: a writer that fast would otherwise outrun the paced
#: prefault and take the first touches of fresh memory in its own write faults (``_prefault_range``)
PREFAULT_CATCH_UP_S = 0.05
#: SYNC_FLUSH: bytes of zeros written and synced per step (Java forces every 16 pages; one
#: step per MiB keeps the thread's GIL hand-offs as few as the prefault's)
ZERO_STEP = PREFAULT_STEP
#: madvise advice values (linux/mman.h)
MADV_NORMAL = 0
MADV_RANDOM = 1


def _advise(mf: MappedFile, advice: int) -> None:
    """Readahead advice for the whole mapping (best effort: a no-op where unsupported)."""
    if not mf.closed:
        syscalls.madvise(mf.mm, 0, mf.file_size, advice)


def _create(
    directory: str, offset: int, size: int, prefault: bool, warm_write: bool, random: bool
) -> MappedFile:
    os.makedirs(directory, exist_ok=True)
    mf = MappedFile.in_dir(directory, offset, size, create=True, preallocate=warm_write)
    if random:
        _advise(mf, MADV_RANDOM)  # before the prefault, which would otherwise read ahead
    _reserve_quietly(mf, RESERVE_WINDOW)
    if prefault:
        _prefault_range(mf, 0, PREFAULT_WINDOW, warm_write, random)
    return mf


def _reserve_quietly(mf: MappedFile, end: int) -> bool:
    try:
        mf.reserve(end)
    except OSError as exc:  # ENOSPC: the writer's own ensure fails and refuses the put
        logger.debug("reserving %s up to %d: %s", mf.path, end, exc)
        return False
    return True


class AllocateService:
    name = "allocate"

    def __init__(
        self,
        executor: ThreadPoolExecutor,
        *,
        prefault: bool,
        warm_write: bool,
        random_writer: bool = False,
        check_disk: Callable[[], None] | None = None,
        reserve_executor: ThreadPoolExecutor | None = None,
    ) -> None:
        self.executor = executor
        #: where block reservations run: not behind a window prefault in ``executor``
        self.reserve_executor = reserve_executor or executor
        #: the CommitLog's ``diskSpaceWarningLevelRatio`` check, run on the loop after a window
        #: was reserved ahead (the writer's own reservation, which ran it, is then skipped)
        self.check_disk = check_disk
        self.prefault = prefault
        self.warm_write = warm_write
        #: map the segment being written MADV_RANDOM (SYNC_FLUSH, see the module docstring)
        self.random_writer = random_writer
        self._pending: dict[tuple[str, int], Future[MappedFile]] = {}
        #: paths of segments this service prepared (already prefaulted)
        self._prepared: set[str] = set()
        self._stopped = False
        #: the segment being written (mapped MADV_RANDOM until the next one takes over)
        self._writing: MappedFile | None = None

    def request(self, directory: str, offset: int, size: int) -> None:
        key = (directory, offset)
        if self._stopped or key in self._pending or os.path.exists(os.path.join(directory, f"{offset:020d}")):
            return
        self._pending[key] = self.executor.submit(
            _create, directory, offset, size, self.prefault, self.warm_write, self.random_writer
        )

    def take(self, directory: str, offset: int, size: int) -> MappedFile | None:
        """Called by the queue when it needs segment ``offset``."""
        fut = self._pending.pop((directory, offset), None)
        mf: MappedFile | None = None
        if fut is not None:
            mf = wait_prepared(fut, f"CommitLog segment {offset}")
            if mf is not None and mf.file_size != size:
                mf.destroy()
                mf = None
        if mf is not None:
            self._prepared.add(mf.path)
            mf.reserving = RESERVE_WINDOW
            mf.prefaulted = min(PREFAULT_WINDOW, mf.file_size) if self.prefault else mf.file_size
            mf.advance_at = 0
        return mf

    def on_created(self, mf: MappedFile) -> None:
        """The queue added segment ``mf``: prepare the one after it (and, if ``mf`` was made
        inline, e.g. the very first one, prefault the window ahead of the writer)."""
        if mf.path not in self._prepared:
            if self.random_writer:
                _advise(mf, MADV_RANDOM)
            mf.prefaulted, mf.advance_at = mf.wrote_position, 0
            self.advance(mf)
        if self.random_writer:
            prev, self._writing = self._writing, mf
            if prev is not None and prev is not mf:
                _advise(prev, MADV_NORMAL)
        self._prepared.discard(mf.path)
        self.request(os.path.dirname(mf.path), mf.file_end_offset, mf.file_size)

    def advance(self, mf: MappedFile) -> None:
        """Reserve blocks for / prefault the next window of ``mf`` once the writer is half way
        through the current one. Called after every reput slice (a send's, at one in flight):
        until the writer reaches ``mf.advance_at``, where the next request is due, one compare."""
        wrote = mf.wrote_position
        if wrote < mf.advance_at or self._stopped:
            return
        size = mf.file_size
        reserving = mf.reserving
        if reserving < size and wrote + RESERVE_WINDOW // 2 >= reserving:
            reserving = mf.reserving = max(reserving, wrote) + RESERVE_WINDOW
            fut = self.reserve_executor.submit(_reserve_range, mf, reserving)
            if self.check_disk is not None:
                loop = asyncio.get_running_loop()
                check = self.check_disk
                fut.add_done_callback(lambda _f: loop.call_soon_threadsafe(check))
        # (past the file's end: nothing is due again in this file)
        due = reserving - RESERVE_WINDOW // 2 if reserving < size else size + 1
        if self.prefault:
            mark = mf.prefaulted
            if mark < size and wrote + PREFAULT_WINDOW // 2 >= mark:
                start = max(mark, wrote)
                mark = mf.prefaulted = start + PREFAULT_WINDOW
                self.executor.submit(
                    _prefault_range, mf, start, start + PREFAULT_WINDOW, self.warm_write, self.random_writer
                )
            if mark < size:
                due = min(due, mark - PREFAULT_WINDOW // 2)
        mf.advance_at = due

    async def stop(self) -> None:
        """Wait for preparations in flight, then remove segments prepared but never used
        (nothing touches the directory after the store has shut down)."""
        self._stopped = True
        pending, self._pending = self._pending, {}
        await destroy_unused(pending.values())


async def destroy_unused(futures: Iterable[Future[MappedFile]]) -> None:
    """Wait for files being prepared and remove them (nobody took them)."""
    for fut in futures:
        try:
            mf = await asyncio.wrap_future(fut)
        except Exception:  # a failed preparation left nothing behind
            continue
        mf.destroy()


def _prefault_range(mf: MappedFile, start: int, end: int, warm_write: bool, zero: bool = False) -> None:
    """Prefault ``[start, end)`` at most half the time (``PREFAULT_PAUSE``), a step at a time;
    with ``zero`` (SYNC_FLUSH) write it as zeros and sync it too (``_zero_step``).

    A 64 MiB window cost 6-170 ms of kernel CPU (measured under load), and an HA master and
    its slave cross the same offsets at the same moment: in one call, both threads competed
    with both loops for the two cores at once (ha_bench lag, load 4-5: the replication-lag
    spikes of 40-250 ms fell on the windows, every ~3 s at 20k msg/s). The thread is not niced:
    descheduled while holding the GIL between two steps, it would hold up the loop.
    (The pause follows the faults' time only, not the zeros' disk wait.)

    The pause is skipped while the writer closes in (``PREFAULT_CATCH_UP_S``): fresh memory
    costs ~8 us a page on this VM (module docstring), so paced at half time the prefault covers
    ~250 MB/s, and 64-message batches (~250-290 MB/s of records) outran it: the loop's own
    write faults, nearly all the zeroing of fresh pages (perf), took 28 % of its time. Unpaced
    while the writer is that close (live broker, SDK producer, 4 batches in flight, 1M messages,
    5 alternated runs each, quiet VM): 216-277k -> 244-301k msg/s (the lowest of each the first
    run after an idle spell, on memory the VM had handed back), the loop 3.0-3.4 -> 2.7-2.8 us a
    message. A writer in another file, or a slow one (2,000 msg/s moves ~100 KB in 50 ms),
    leaves the pacing as it was; 128 single sends in flight (~90 MB/s) did not change.
    """
    sync_fd = _open_for_zeros(mf) if zero else -1
    prev_t, prev_wrote = time.monotonic(), mf.wrote_position
    try:
        for pos in range(start, end, PREFAULT_STEP):
            if mf.closed:
                return
            stop = min(end, pos + PREFAULT_STEP)
            if sync_fd < 0:
                t0 = time.monotonic()
                mf.prefault(write=warm_write, start=pos, end=stop)
                busy = time.monotonic() - t0
            elif stop <= mf.wrote_position:
                continue  # the writer is past it
            elif (zeroed := _zero_step(mf, sync_fd, pos, stop)) is not None:
                busy = zeroed
            else:
                os.close(sync_fd)
                sync_fd = -1  # the rest of the window is only prefaulted
                continue
            now, wrote = time.monotonic(), mf.wrote_position
            # pause unless the writer's pace would bring it to ``stop`` within PREFAULT_CATCH_UP_S
            # ((stop - wrote) / pace > PREFAULT_CATCH_UP_S, without a division)
            if (stop - wrote) * (now - prev_t) > (wrote - prev_wrote) * PREFAULT_CATCH_UP_S:
                time.sleep(busy * PREFAULT_PAUSE)
                now, wrote = time.monotonic(), mf.wrote_position
            prev_t, prev_wrote = now, wrote
    finally:
        if sync_fd >= 0:
            os.close(sync_fd)


def _open_for_zeros(mf: MappedFile) -> int:
    """An fd of the zeroing thread's own: an error its syncs report (errseq, per open file)
    must not be consumed for the fd a SYNC_FLUSH fsync uses (the thread fallback's)."""
    try:
        return os.open(mf.path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError as exc:  # deleted meanwhile
        logger.debug("not zeroing %s: %s", mf.path, exc)
        return -1


def _zero_step(mf: MappedFile, sync_fd: int, start: int, end: int) -> float | None:
    """Read ``[start, end)`` into the page cache, dirty it through the mapping (MADV_POPULATE_WRITE: pages the writer has
    filled keep their bytes; a fault never changes a file's contents), write it back and
    fdatasync it, so its extents are written ones before the writer reaches them. Returns
    the seconds the faults took (the pacing's share), None if a step failed (ENOSPC, EIO:
    logged; the writer's own reservation and fsync meet it too)."""
    try:
        t0 = time.monotonic()
        # The step's pages into the page cache first (readahead of fallocated blocks or holes
        # fills zeros, no disk read; it allocates single pages, not mmap readahead's large
        # folios): the populate then maps cached pages. Without it, under MADV_RANDOM each
        # page was a cache miss served in its fault, counted as a major fault: 4,096 per
        # 16 MiB window, all the broker's majflt under SYNC_FLUSH (this thread's, none on the
        # loop), and ~15 % more of this thread's CPU (5.5 -> 4.7 us per page).
        with contextlib.suppress(OSError):  # best effort: the populate reads what it misses
            os.posix_fadvise(sync_fd, start, end - start, os.POSIX_FADV_WILLNEED)
        mf.prefault(write=True, start=start, end=end)
        busy = time.monotonic() - t0
        syscalls.write_back(sync_fd, start, end - start)
        os.fdatasync(sync_fd)  # the extents' new state, so no later fsync carries it
    except (OSError, ValueError) as exc:  # (ValueError: the mapping closed meanwhile)
        logger.debug("zeroing %s [%d, %d): %s", mf.path, start, end, exc)
        return None
    return busy


def _reserve_range(mf: MappedFile, end: int) -> None:
    if not mf.closed:
        _reserve_quietly(mf, end)


def wait_prepared(fut: Future[MappedFile], what: str) -> MappedFile | None:
    """The file ``fut`` prepares, or None if its preparation failed: it then left nothing
    behind, and the caller creates the file inline. A slow preparation is waited for however
    long it takes, never raced: a file created inline at the same path would be deleted by the
    late preparation's clean-up."""
    try:
        return fut.result(timeout=TAKE_TIMEOUT_S)
    except TimeoutError:
        logger.warning("%s still being prepared after %.0f s: waiting for it", what, TAKE_TIMEOUT_S)
    except Exception as exc:  # ENOSPC...
        logger.warning("%s could not be prepared (%s): creating it inline", what, exc)
        return None
    try:
        return fut.result()
    except Exception as exc:
        logger.warning("%s could not be prepared (%s): creating it inline", what, exc)
        return None
