"""Store exceptions: corruption, misuse. Expected outcomes are status enums (results.py)."""

from __future__ import annotations


class StoreError(Exception):
    """Root of every exception the store raises on purpose (OS errors propagate as OSError)."""


class StoreCorruptError(StoreError):
    """On-disk data that cannot be repaired automatically."""

    def __init__(self, path: str, offset: int, reason: str) -> None:
        super().__init__(f"{path} @ {offset}: {reason}")
        self.path = path
        self.offset = offset
        self.reason = reason


class IllegalStateError(StoreError):
    """The store was used in a state that does not allow the call (e.g. a put after shutdown)."""


class StoreLockedError(StoreError):
    """Another process holds the store directory's lock file."""
