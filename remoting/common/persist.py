"""Atomic, crash-safe persistence of small metadata files (topics.json, consumerOffset.json, ...).

Write protocol for ``path`` (tidwall/wal ``atomicWrite`` + RocketMQ's ``.bak``):

1. write the new content to ``path.tmp`` and ``fsync`` it;
2. if ``path`` exists, make ``path.bak`` the previous version: hard-link ``path`` to
   ``path.bak.tmp`` and rename that over ``path.bak`` (a copy when hard links are unsupported);
3. ``rename(path.tmp, path)`` (atomic on POSIX) and ``fsync`` the directory.

At every instant ``path`` holds either the complete old or the complete new content; unlike
RocketMQ's ``MixAll.string2File`` (which deletes the file before renaming), there is no window in
which ``path`` is missing.

Load protocol: read ``path`` and parse it; when it is missing, empty or fails to parse, fall back
to ``path.bak`` (logging why). Both unusable → :class:`PersistCorruptError`; neither present →
``None`` (first start).

These are blocking calls (``fsync``). Callers on the event loop should take the snapshot
(serialise) on the loop and run :func:`atomic_write_bytes` in the default executor.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
from collections.abc import Callable
from typing import Any, TypeVar

from pocketmq.remoting.protocol import fastjson

logger = logging.getLogger(__name__)

T = TypeVar("T")

BAK_SUFFIX = ".bak"
TMP_SUFFIX = ".tmp"

__all__ = [
    "BAK_SUFFIX",
    "TMP_SUFFIX",
    "PersistCorruptError",
    "atomic_write_bytes",
    "atomic_write_json",
    "atomic_write_text",
    "fsync_dir",
    "load_bytes",
    "load_json",
    "load_text",
]


class PersistCorruptError(ValueError):
    """Neither the file nor its ``.bak`` could be parsed."""

    def __init__(self, path: str, reasons: list[str]) -> None:
        super().__init__(f"cannot load {path}: " + "; ".join(reasons))
        self.path = path
        self.reasons = reasons


def fsync_dir(directory: str | os.PathLike[str]) -> None:
    """``fsync`` a directory so a rename inside it is durable (no-op where unsupported)."""
    try:
        fd = os.open(directory, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:  # pragma: no cover - platforms without directory fds
        return
    try:
        with contextlib.suppress(OSError):
            os.fsync(fd)
    finally:
        os.close(fd)


def _write_and_sync(path: str, data: bytes, fsync: bool) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        view = memoryview(data)
        while view:
            written = os.write(fd, view)
            view = view[written:]
        if fsync:
            os.fsync(fd)
    finally:
        os.close(fd)


def _refresh_backup(path: str, fsync: bool) -> None:
    bak = path + BAK_SUFFIX
    bak_tmp = bak + TMP_SUFFIX
    with contextlib.suppress(FileNotFoundError):
        os.unlink(bak_tmp)
    try:
        # A hard link makes the current inode the backup without copying or a missing-file window.
        os.link(path, bak_tmp)
    except FileNotFoundError:
        return
    except OSError:
        shutil.copyfile(path, bak_tmp)
        if fsync:
            with open(bak_tmp, "rb") as f:
                os.fsync(f.fileno())
    os.replace(bak_tmp, bak)


def atomic_write_bytes(
    path: str | os.PathLike[str], data: bytes, *, keep_backup: bool = True, fsync: bool = True
) -> None:
    """Replace ``path`` with ``data`` atomically; the previous content becomes ``path.bak``.

    Parent directories are created. ``fsync=False`` skips the syncs (tests, throwaway data).

    Raises:
        OSError: the write, a sync or the rename failed (the old file is left intact).
    """
    path = os.fspath(path)
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    tmp = path + TMP_SUFFIX
    try:
        _write_and_sync(tmp, data, fsync)
        if keep_backup:
            _refresh_backup(path, fsync)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    if fsync:
        fsync_dir(directory)


def atomic_write_text(
    path: str | os.PathLike[str], text: str, *, keep_backup: bool = True, fsync: bool = True
) -> None:
    """:func:`atomic_write_bytes` of UTF-8 text."""
    atomic_write_bytes(path, text.encode("utf-8"), keep_backup=keep_backup, fsync=fsync)


def atomic_write_json(
    path: str | os.PathLike[str],
    obj: Any,
    *,
    pretty: bool = True,
    quote_int_keys: bool = True,
    keep_backup: bool = True,
    fsync: bool = True,
) -> None:
    """Serialise ``obj`` with :func:`fastjson.dumpb` (fastjson-compatible) and write it atomically."""
    data = fastjson.dumpb(obj, pretty=pretty, quote_int_keys=quote_int_keys)
    atomic_write_bytes(path, data, keep_backup=keep_backup, fsync=fsync)


def _read(path: str) -> bytes | None:
    try:
        with open(path, "rb") as f:
            return f.read()
    except FileNotFoundError:
        return None


def load_bytes(path: str | os.PathLike[str], parse: Callable[[bytes], T]) -> T | None:
    """Load and parse ``path``, falling back to ``path.bak`` when the main file is unusable.

    A missing or empty main file, or one ``parse`` rejects (any ``Exception``), counts as
    unusable. Returns ``None`` when neither file exists (or both are empty).

    Raises:
        PersistCorruptError: a file exists but neither it nor the backup parses.
        OSError: a file exists but cannot be read.
    """
    path = os.fspath(path)
    reasons: list[str] = []
    found = False
    for candidate in (path, path + BAK_SUFFIX):
        data = _read(candidate)
        if data is None:
            continue
        found = True
        if not data.strip():
            reasons.append(f"{candidate} is empty")
            continue
        try:
            value = parse(data)
        except Exception as exc:
            reasons.append(f"{candidate}: {exc}")
            continue
        if candidate != path:
            logger.warning(
                "loaded %s from its backup %s (%s)", path, candidate, "; ".join(reasons) or "main missing"
            )
        return value
    if not found or all(r.endswith(" is empty") for r in reasons):
        return None
    raise PersistCorruptError(path, reasons)


def load_text(path: str | os.PathLike[str], parse: Callable[[str], T]) -> T | None:
    """:func:`load_bytes` for UTF-8 text files."""
    return load_bytes(path, lambda data: parse(data.decode("utf-8")))


def load_json(path: str | os.PathLike[str]) -> Any | None:
    """Load a fastjson-written file leniently (unquoted int keys, object keys) with ``.bak`` fallback.

    Raises:
        PersistCorruptError: neither the file nor its backup parses.
    """
    return load_bytes(path, fastjson.loads)
