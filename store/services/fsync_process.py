"""fdatasync in a small helper process, for SYNC_FLUSH group commit (``FsyncProcess``) and
for the periodic flushes (``FsyncPipe``).

Why not a thread: the worker thread needs the GIL to start each fsync and again to report it,
and while the event loop is busy putting, CPython hands the GIL over only every switch
interval, so each fsync waited up to two intervals on top of the disk. Why not Linux AIO
(``IOCB_CMD_FDSYNC``): the kernel runs it in a kworker bound to the submitting CPU, which a
busy loop thread starves until its time slice ends: measured 4 ms per fsync instead of 0.2 ms.
A separate process has neither problem and runs on the other core; one request costs the loop
a ``send`` and a ``recv`` (~2 µs each).

Protocol over a ``SOCK_SEQPACKET`` socket pair (message boundaries kept, one request at a time):

    request  := file ("\\n" file)*          the files to fdatasync
    file     := path ["\\0" inode]           UTF-8 path (``MappedFile.sync_key``: with its inode)
    response := result (" " result)*        one per file: "0", or the errno as decimal
    policy   := "\\1" ("1" | "0")           not answered: run SCHED_FIFO from now on, or normal

The group commit asks for real-time priority for the fsync of a lone put (one send in flight)
only: the helper then does not wait for a CPU behind other processes after its wake-up (its
run-queue wait was 130-720 µs per message under load). Where that is not permitted (no
``CAP_SYS_NICE``, no ``RLIMIT_RTPRIO``) the helper stays at normal priority.

After each response the helper also bumps a one-byte answer count in a page shared with the
parent (``memfd``): :meth:`FsyncProcess.answered` reads it without a syscall, so the loop can
collect an answer from its put path while a long turn holds it from the socket's readiness.

The helper opens each path once and keeps the fd while the path is asked for (and names the
same file: a path deleted and made again is opened again); an fd not asked for in a request is
closed (a deleted segment's blocks are freed). A file named with its inode is checked against
the inode of the fd kept for it, with no syscall; one named by its path alone costs an
``fstat`` and a ``stat`` per request (measured with ``perf trace`` on the group commit's helper
under load: two ``newfstatat`` of 11-23 us per fsync). A path that no longer exists
(deleted meanwhile) counts as synced, as ``EBADF`` does for the thread. A request equal to
the last one whose files were all named with their inodes, kept and synced (the group
commit's every request while one segment is written) is answered from those fds without
parsing it again: 21,348 -> 8,871 instructions of the helper per request (callgrind, one
file). The helper exits when the socket closes, which also happens when the broker is killed.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import mmap
import os
import socket
import subprocess
import sys
from collections import deque

__all__ = ["FsyncHelperGone", "FsyncPipe", "FsyncProcess", "results_error"]

logger = logging.getLogger(__name__)

#: the helper's whole program (``python -S -c``: no site, no imports beyond the stdlib core)
_CHILD = r"""
import mmap, os, socket, sys
s = socket.socket(fileno=int(sys.argv[1]))
flag = mmap.mmap(int(sys.argv[2]), mmap.PAGESIZE)
answered = 0
fds = {}
last = None
kept_fds = ()
one = -1
while True:
    try:
        req = s.recv(1 << 16)
    except OSError:
        break
    if not req:
        break
    if req[:1] == b"\1":
        # a scheduling change, unanswered: "\1" + "1" real-time (SCHED_FIFO), "0" normal
        try:
            if req[1:] == b"1":
                os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(1))
            else:
                os.sched_setscheduler(0, os.SCHED_OTHER, os.sched_param(0))
        except OSError:
            pass  # not permitted (no CAP_SYS_NICE, no real-time budget): normal priority
        continue
    if req == last:
        # the same files (paths with inodes) as the last request, all kept then
        if one >= 0:
            # one file (the group commit's every request while one segment is written): the
            # answer sent without a list and a join between the fdatasync and the send
            try:
                os.fdatasync(one)
                ans = b"0"
            except OSError as e:
                ans = str(e.errno or 5).encode()
                last = None
        else:
            out = []
            for fd in kept_fds:
                try:
                    os.fdatasync(fd)
                    out.append(b"0")
                except OSError as e:
                    out.append(str(e.errno or 5).encode())
                    last = None
            ans = b" ".join(out)
        try:
            s.send(ans)
        except OSError:
            break
        answered = (answered + 1) & 255
        flag[0] = answered
        continue
    last = None
    files = [f.partition(b"\0") for f in req.split(b"\n")]
    paths = {p for p, _, _ in files}
    for p in [p for p in fds if p not in paths]:
        os.close(fds.pop(p)[0])
    out = []
    for p, _, ino in files:
        try:
            kept = fds.get(p)
            if kept is not None and (int(ino) if ino else os.stat(p).st_ino) != kept[1]:
                os.close(fds.pop(p)[0])  # deleted and made again: sync the file there now
                kept = None
            if kept is None:
                fd = os.open(p, os.O_RDONLY | os.O_CLOEXEC)
                kept = fds[p] = (fd, os.fstat(fd).st_ino)
            os.fdatasync(kept[0])
            out.append(b"0")
        except FileNotFoundError:
            out.append(b"0")
        except OSError as e:
            out.append(str(e.errno or 5).encode())
    if all(ino for _, _, ino in files) and all(p in fds for p, _, _ in files) and out.count(b"0") == len(out):
        last, kept_fds = req, [fds[p][0] for p, _, _ in files]
        one = kept_fds[0] if len(kept_fds) == 1 else -1
    try:
        s.send(b" ".join(out))
    except OSError:
        break
    answered = (answered + 1) & 255
    flag[0] = answered  # after the send: a parent that sees it finds the answer to read
"""


class FsyncProcess:
    """The helper process and the parent's end of its socket (non-blocking).

    :meth:`request` sends one request; the owner watches :attr:`fd` (``loop.add_reader``) and
    calls :meth:`results` when it is readable.
    """

    def __init__(self) -> None:
        shared = os.memfd_create("pocketmq-fsync-answers", os.MFD_CLOEXEC)
        try:
            os.ftruncate(shared, mmap.PAGESIZE)
            self.answers = mmap.mmap(shared, mmap.PAGESIZE)
            parent, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
            try:
                self._proc = subprocess.Popen(
                    [sys.executable, "-S", "-c", _CHILD, str(child.fileno()), str(shared)],
                    pass_fds=(child.fileno(), shared),
                    stdin=subprocess.DEVNULL,
                    close_fds=True,
                )
            except BaseException:
                parent.close()
                raise
            finally:
                child.close()
        finally:
            os.close(shared)  # (the mapping keeps the page)
        parent.setblocking(False)
        self._sock: socket.socket | None = parent
        self.fd = parent.fileno()
        #: the helper's answer count, mod 256, in ``answers[0]`` (a shared page), and the answers
        #: read so far, mod 256: they differ while an answer waits (``answered``; the group
        #: commit's poll compares them itself, a Python call fewer a put)
        self.answers_read = 0
        #: the helper's scheduling as last asked for (``request``)
        self._realtime = False

    @property
    def pid(self) -> int:
        return self._proc.pid

    def request(self, paths: list[str], realtime: bool = False) -> None:
        """Ask for an fdatasync of each file (a path, or a ``MappedFile.sync_key``), by the
        helper at real-time priority (``SCHED_FIFO``, where permitted) or normal. Raises
        OSError if the helper is gone."""
        self.send_request("\n".join(paths).encode(), realtime)

    def send_request(self, request: bytes, realtime: bool = False) -> None:
        """:meth:`request` of files already encoded as the protocol's ``request`` (the group
        commit keeps the bytes of its one segment's request)."""
        sock = self._sock
        if sock is None:
            raise OSError(errno.EPIPE, "fsync process closed")
        if realtime is not self._realtime:  # (a message of its own: requests stay equal)
            sock.send(b"\1" + (b"1" if realtime else b"0"))
            self._realtime = realtime
        sock.send(request)

    def answered(self) -> bool:
        """An answer is waiting to be read (no syscall: the shared answer count)."""
        return self.answers[0] != self.answers_read

    def results(self) -> list[int] | None:
        """The answer to the last request: 0 or an errno per path; None if the helper is gone
        (exited or killed), [] if nothing has arrived yet."""
        sock = self._sock
        if sock is None:
            return None
        try:
            data = sock.recv(1 << 12)
        except BlockingIOError:
            return []
        except OSError:
            return None
        if not data:
            return None
        self.answers_read = (self.answers_read + 1) & 255
        if data == b"0":  # one file synced: the group commit's every answer, without a list comp
            return [0]
        return [int(x) for x in data.split(b" ")]

    def close(self) -> None:
        """Close the socket (the helper exits on its own) and reap the helper."""
        sock, self._sock = self._sock, None
        if sock is not None:
            sock.close()
        try:
            self._proc.wait(timeout=2.0)
        except subprocess.TimeoutExpired:  # pragma: no cover - stuck in an fsync of a dead disk
            logger.warning("fsync process %d did not exit: killing it", self._proc.pid)
            self._proc.kill()
            self._proc.wait()


#: a request's paths are sent in chunks of at most this many bytes / paths (the helper reads
#: 64 KiB per request and the parent 4 KiB per answer, of up to 4 bytes per path)
_CHUNK_BYTES = 32 * 1024
_CHUNK_PATHS = 512


def results_error(results: list[int]) -> OSError | None:
    """The first failed fdatasync of a helper's answer (one errno per path, 0 = synced), or None."""
    for code in results:  # (a loop, not next() over a generator: one per group-commit fsync)
        if code:
            return OSError(code, f"fdatasync: {os.strerror(code)}")
    return None


class FsyncHelperGone(OSError):
    """The helper exited or could not be asked: nothing is known to be synced; sync in a thread."""


class FsyncPipe:
    """ASYNC_FLUSH's CommitLog flush and the ConsumeQueue/index/checkpoint flush, through one
    helper process, a request at a time (FIFO).

    Why: a worker thread takes the GIL to start each fdatasync, after each one and to report
    back; each time it takes the GIL from the busy loop, and on a loaded 2-core machine the loop
    then waits until that thread is scheduled again (measured with ``perf sched``: 68 such waits
    in 15 s of raw sends, up to 32 ms each). The helper needs no GIL; the loop reads its answer
    from a socket (``add_reader``).
    """

    def __init__(self) -> None:
        """Start the helper (raises OSError if it cannot be started); call on the loop."""
        self._loop = asyncio.get_running_loop()
        self._proc: FsyncProcess | None = FsyncProcess()
        self._loop.add_reader(self._proc.fd, self._on_answer)
        self._queue: deque[tuple[list[str], asyncio.Future[None]]] = deque()
        self._current: asyncio.Future[None] | None = None

    @property
    def alive(self) -> bool:
        return self._proc is not None

    async def fsync(self, paths: list[str]) -> None:
        """fdatasync each path (a deleted one counts as synced).

        Raises:
            FsyncHelperGone: the helper is gone (the caller syncs in a thread instead).
            OSError: an fdatasync failed (its errno, e.g. EIO).
        """
        chunk: list[str] = []
        size = 0
        for p in paths:
            n = len(p.encode()) + 1
            if chunk and (size + n > _CHUNK_BYTES or len(chunk) >= _CHUNK_PATHS):
                await self._one(chunk)
                chunk, size = [], 0
            chunk.append(p)
            size += n
        if chunk:
            await self._one(chunk)

    def _one(self, paths: list[str]) -> asyncio.Future[None]:
        fut: asyncio.Future[None] = self._loop.create_future()
        if self._proc is None:
            fut.set_exception(FsyncHelperGone(errno.EPIPE, "fsync process closed"))
            return fut
        self._queue.append((paths, fut))
        if self._current is None:
            self._next()
        return fut

    def _next(self) -> None:
        while self._queue and self._current is None and self._proc is not None:
            paths, fut = self._queue.popleft()
            if fut.done():  # its waiter was cancelled
                continue
            try:
                self._proc.request(paths)
            except OSError as exc:
                self._queue.appendleft((paths, fut))
                self._gone(f"request failed: {exc}")
                return
            self._current = fut

    def _on_answer(self) -> None:
        proc = self._proc
        if proc is None:
            return
        results = proc.results()
        if results == []:
            return  # spurious wake-up
        if results is None:
            self._gone("exited")
            return
        fut, self._current = self._current, None
        error = results_error(results)
        if fut is not None and not fut.done():
            if error is not None:
                fut.set_exception(error)
            else:
                fut.set_result(None)
        self._next()

    def _gone(self, why: str) -> None:
        proc, self._proc = self._proc, None
        if proc is None:
            return
        logger.error("fsync process %d %s: flushes sync in a thread from now on", proc.pid, why)
        self._loop.remove_reader(proc.fd)
        proc.close()
        waiting = [self._current] if self._current is not None else []
        waiting += [fut for _, fut in self._queue]
        self._current = None
        self._queue.clear()
        for fut in waiting:
            if not fut.done():
                fut.set_exception(FsyncHelperGone(errno.EPIPE, f"fsync process {why}"))

    def close(self) -> None:
        """Stop the helper (after the last flush); later ``fsync`` calls raise FsyncHelperGone."""
        proc, self._proc = self._proc, None
        if proc is not None:
            self._loop.remove_reader(proc.fd)
            proc.close()
        for fut in ([self._current] if self._current is not None else []) + [f for _, f in self._queue]:
            if not fut.done():
                fut.set_exception(FsyncHelperGone(errno.EPIPE, "fsync process closed"))
        self._current = None
        self._queue.clear()
