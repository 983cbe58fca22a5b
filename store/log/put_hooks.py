"""What ``CommitLog``'s puts report to: the put-time sink and the reput wake-up gate (and the
queue-offset table's key cache, :func:`queue_key`).

A put is timed into a :class:`LatencySink` (``broker.metrics.PutLatency``) and then wakes reput
through ``after_put`` unless its :class:`WakeGate` says a wake-up is already scheduled. Before
the store's services start and after they stop, ``after_put`` is :func:`no_wakeup` behind
:data:`NO_SERVICES`.
"""

from __future__ import annotations

from typing import Protocol

__all__ = ["EVERY_PUT", "NO_SERVICES", "Gate", "LatencySink", "WakeGate", "no_wakeup", "queue_key"]


class LatencySink(Protocol):
    """Where put times go (``broker.metrics.PutLatency``): ``bits[ns.bit_length()]`` counts
    one put (65 entries), ``sum_ns`` and ``max_ns`` their total and maximum."""

    bits: list[int]
    sum_ns: int
    max_ns: int


class WakeGate(Protocol):
    """What ``put_message`` tests before calling ``after_put`` (``services.reput.ReputService``,
    or a fixed ``Gate``): while ``scheduled`` is True the call would do nothing, so it is not
    made (a Python call per put is ~0.6k instructions)."""

    @property
    def scheduled(self) -> bool: ...


class Gate:
    """A fixed ``WakeGate``."""

    __slots__ = ("scheduled",)

    def __init__(self, scheduled: bool) -> None:
        self.scheduled = scheduled


#: no services (before start, after shutdown): ``after_put`` is ``no_wakeup``, never called
NO_SERVICES = Gate(True)
#: ``after_put`` does more than wake reput (SYNC_FLUSH's poll): called after every put
EVERY_PUT = Gate(False)


def no_wakeup() -> None:
    """``after_put`` while no services run."""


def queue_key(
    keys: dict[str, dict[int, tuple[str, int]]], table: dict[tuple[str, int], int], topic: str, queue_id: int
) -> tuple[str, int]:
    """A queue's ``(topic, queue id)`` key of ``table`` (``CommitLog.topic_queue_table``), made
    once and kept in ``keys`` (topic -> queue id -> key), with the queue's entry in ``table``
    moved under it: a put's two lookups then match it by identity instead of building, hashing
    and comparing a tuple (~0.45k instructions a put, callgrind). Any equal tuple stays a valid
    key, so an entry deleted or a table rebuilt elsewhere only costs those compares again."""
    if len(keys) > 100_000:
        keys.clear()
    key = keys.setdefault(topic, {})[queue_id] = (topic, queue_id)
    if key in table:
        table[key] = table.pop(key)
    return key
