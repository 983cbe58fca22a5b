"""fdatasync in a small helper process, for SYNC_FLUSH group commit.

Why not a thread: the worker thread needs the GIL to start each fsync and again to report it,
and while the event loop is busy putting, CPython hands the GIL over only every switch
interval, so each fsync waited up to two intervals on top of the disk. Why not Linux AIO
(``IOCB_CMD_FDSYNC``): the kernel runs it in a kworker bound to the submitting CPU, which a
busy loop thread starves until its time slice ends: measured 4 ms per fsync instead of 0.2 ms.
A separate process has neither problem and runs on the other core; one request costs the loop
a ``send`` and a ``recv`` (~2 µs each).

Protocol over a ``SOCK_SEQPACKET`` socket pair (message boundaries kept, one request at a time):

    request  := path ("\\n" path)*          UTF-8 paths of the segments to fdatasync
    response := result (" " result)*        one per path: "0", or the errno as decimal

The helper opens each path once and keeps the fd while the path is asked for; an fd not asked
for in a request is closed (a deleted segment's blocks are freed). A path that no longer exists
(deleted meanwhile) counts as synced, as ``EBADF`` does for the thread. The helper exits when
the socket closes, which also happens when the broker is killed.
"""

from __future__ import annotations

import errno
import logging
import socket
import subprocess
import sys

__all__ = ["FsyncProcess"]

logger = logging.getLogger(__name__)

#: the helper's whole program (``python -S -c``: no site, no imports beyond the stdlib core)
_CHILD = r"""
import os, socket, sys
s = socket.socket(fileno=int(sys.argv[1]))
fds = {}
while True:
    try:
        req = s.recv(1 << 16)
    except OSError:
        break
    if not req:
        break
    paths = req.split(b"\n")
    for p in [p for p in fds if p not in paths]:
        os.close(fds.pop(p))
    out = []
    for p in paths:
        try:
            fd = fds.get(p)
            if fd is None:
                fd = fds[p] = os.open(p, os.O_RDONLY | os.O_CLOEXEC)
            os.fdatasync(fd)
            out.append(b"0")
        except FileNotFoundError:
            out.append(b"0")
        except OSError as e:
            out.append(str(e.errno or 5).encode())
    try:
        s.send(b" ".join(out))
    except OSError:
        break
"""


class FsyncProcess:
    """The helper process and the parent's end of its socket (non-blocking).

    :meth:`request` sends one request; the owner watches :attr:`fd` (``loop.add_reader``) and
    calls :meth:`results` when it is readable.
    """

    def __init__(self) -> None:
        parent, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            self._proc = subprocess.Popen(
                [sys.executable, "-S", "-c", _CHILD, str(child.fileno())],
                pass_fds=(child.fileno(),),
                stdin=subprocess.DEVNULL,
                close_fds=True,
            )
        except BaseException:
            parent.close()
            raise
        finally:
            child.close()
        parent.setblocking(False)
        self._sock: socket.socket | None = parent
        self.fd = parent.fileno()

    @property
    def pid(self) -> int:
        return self._proc.pid

    def request(self, paths: list[str]) -> None:
        """Ask for an fdatasync of each path. Raises OSError if the helper is gone."""
        sock = self._sock
        if sock is None:
            raise OSError(errno.EPIPE, "fsync process closed")
        sock.send("\n".join(paths).encode())

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
