"""``StoreCheckpoint`` (one mapped 4 KiB page, log/layout.py) plus the abort and lock files."""

from __future__ import annotations

import fcntl
import os

from pocketmq.store.errors import StoreLockedError
from pocketmq.store.log.layout import CHECKPOINT_SIZE, CHECKPOINT_STRUCT
from pocketmq.store.log.mapped_file import MappedFile


class StoreCheckpoint:
    def __init__(self, path: str) -> None:
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        self.mf = MappedFile(path, 0, CHECKPOINT_SIZE, create=True)
        values: tuple[int, int, int] = CHECKPOINT_STRUCT.unpack_from(self.mf.mm, 0)
        self.physic_msg_timestamp, self.logics_msg_timestamp, self.index_msg_timestamp = values

    def min_timestamp(self, *, index_safe: bool = False) -> int:
        """Store time before which everything was flushed, minus Java's 3 s safety margin."""
        ts = min(self.physic_msg_timestamp, self.logics_msg_timestamp)
        if index_safe:
            ts = min(ts, self.index_msg_timestamp)
        return ts - 3000

    def write(self) -> None:
        """Copy the in-memory values into the page (the durability fsync is ``flush``)."""
        CHECKPOINT_STRUCT.pack_into(
            self.mf.mm, 0, self.physic_msg_timestamp, self.logics_msg_timestamp, self.index_msg_timestamp
        )

    def flush(self) -> None:
        """Blocking write + fsync."""
        self.write()
        self.mf.fsync()

    def close(self) -> None:
        self.write()
        self.mf.close()


def abort_file_exists(path: str) -> bool:
    return os.path.exists(path)


def create_abort_file(path: str) -> None:
    fd = os.open(path, os.O_CREAT | os.O_WRONLY, 0o644)
    os.fsync(fd)
    os.close(fd)


def remove_abort_file(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


class StoreLock:
    """``flock`` on ``root/lock`` so two processes never open one store (released on exit/kill)."""

    def __init__(self, path: str) -> None:
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        self.fd = os.open(path, os.O_CREAT | os.O_RDWR, 0o644)
        try:
            fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            os.close(self.fd)
            raise StoreLockedError(f"store {os.path.dirname(path)} is locked by another process") from exc

    def release(self) -> None:
        if self.fd >= 0:
            fcntl.flock(self.fd, fcntl.LOCK_UN)
            os.close(self.fd)
            self.fd = -1
