"""Pure decisions of the transaction services: op records, resolved halves, due halves.

No store, no clock, no I/O: the services feed these functions what they read, and the tests
drive them with tables (``tests/broker/transaction/test_bookkeeping.py``).

Identity of a transaction
    A half message is first stored at half-queue offset ``Y`` (the prepare). Each check-back
    appends a *copy* of it at a new offset ``X`` carrying ``TRAN_PREPARED_QUEUE_OFFSET=Y``, so
    every copy of one transaction names the same ``Y``: :func:`transaction_offset`.

Op record (``RMQ_SYS_TRANS_OP_HALF_TOPIC`` queue 0, tag ``d``)
    body = one half-queue offset, decimal (what RocketMQ 4.x writes and reads). Resolving a later
    copy ``X`` of transaction ``Y`` writes two records, ``"X"`` and ``"Y"`` (:func:`op_bodies`).
    Bodies naming several offsets separated by commas (RocketMQ 5.x's batched op records) are
    read too (:func:`parse_op_body`). A half at ``X`` with transaction offset ``Y`` is resolved
    when ``X`` or ``Y`` is named by an op record (:func:`is_resolved`): committing any copy
    resolves every copy.

Progress (consumer offsets of ``CID_RMQ_SYS_TRANS``)
    The half progress passes a half only once it is resolved, copied for a check, discarded or
    expired (:func:`half_action`), so every unresolved transaction keeps a copy at or beyond the
    persisted progress: a restart re-reads from there and never skips one. The op progress
    passes an op record once all the offsets it names are below the half progress
    (:func:`advance_op_progress`).
"""

from __future__ import annotations

import enum
from collections.abc import Container, Mapping

#: RocketMQ ``TransactionalMessageUtil.REMOVETAG``: the tag of op records
OP_TAG = "d"
#: RocketMQ 5.x ``TransactionalMessageUtil.OFFSET_SEPARATOR`` (batched op records)
OFFSET_SEPARATOR = ","


def op_bodies(half_offset: int, tx_offset: int) -> list[bytes]:
    """The op record bodies resolving the half at ``half_offset`` of transaction ``tx_offset``."""
    if half_offset == tx_offset:
        return [str(half_offset).encode()]
    return [str(half_offset).encode(), str(tx_offset).encode()]


def parse_op_body(body: bytes) -> list[int]:
    """The half offsets an op record names; tokens that are not non-negative integers are skipped."""
    out: list[int] = []
    for token in body.decode("utf-8", "replace").split(OFFSET_SEPARATOR):
        token = token.strip()
        if token.isascii() and token.isdigit():
            out.append(int(token))
    return out


def transaction_offset(queue_offset: int, prepared_queue_offset: str | None) -> int:
    """The transaction a half belongs to: its ``TRAN_PREPARED_QUEUE_OFFSET``, else its own offset."""
    if (
        prepared_queue_offset is not None
        and prepared_queue_offset.isascii()
        and prepared_queue_offset.isdigit()
    ):
        return int(prepared_queue_offset)
    return queue_offset


def is_resolved(queue_offset: int, tx_offset: int, done: Container[int]) -> bool:
    """Whether an op record resolves this half (itself or any copy of its transaction)."""
    return queue_offset in done or tx_offset in done


def check_times(raw: str | None) -> int:
    """``TRANSACTION_CHECK_TIMES`` as a count (absent or garbage: 0)."""
    if raw is not None and raw.isascii() and raw.isdigit():
        return int(raw)
    return 0


def immunity_ms(raw: str | None, transaction_timeout_ms: int) -> int:
    """How old a half must be before its first check (RocketMQ ``getImmunityTime``).

    ``CHECK_IMMUNITY_TIME_IN_SECONDS`` times 1000 when it is a number, else ``transactionTimeOut``.
    """
    if raw is not None:
        text = raw.strip()
        if text.isascii() and text.isdigit():
            return int(text) * 1000
    return transaction_timeout_ms


class HalfAction(enum.Enum):
    """What the check run does with the half at its progress (``half_action``)."""

    #: an op record resolves it: pass it
    RESOLVED = "resolved"
    #: checked ``transactionCheckMax`` times: move it to ``TRANS_CHECK_MAX_TIME_TOPIC``, pass it
    DISCARD = "discard"
    #: older than the CommitLog retention (``fileReservedTime``): pass it unchecked
    EXPIRED = "expired"
    #: stored after this run began (a copy made by this run, or a new prepare): stop the run
    NEW = "new"
    #: not old enough yet: stop the run (later halves are younger)
    WAIT = "wait"
    #: not old enough, but its own immunity is longer than ``transactionTimeOut``: copy it to the
    #: tail unchanged so it does not hold back the halves behind it
    DEFER = "defer"
    #: due: copy it with one more check counted, then ask its producer group
    CHECK = "check"


def half_action(
    *,
    resolved: bool,
    times: int,
    check_max: int,
    now_ms: int,
    born_ms: int,
    store_ms: int,
    run_start_ms: int,
    timeout_ms: int,
    immunity_raw: str | None,
    file_reserved_ms: int,
) -> HalfAction:
    """RocketMQ 4.9 ``TransactionalMessageServiceImpl.check``'s decision for one half.

    Order: resolved; ``times >= check_max`` (discard); older than retention (expired); stored
    since the run began (stop); younger than its immunity (stop, or defer when the message asked
    for a longer immunity); else check. A born time in the future (the producer's clock is
    ahead) counts as due, as RocketMQ's ``valueOfCurrentMinusBorn <= -1``.
    """
    if resolved:
        return HalfAction.RESOLVED
    if times >= check_max:
        return HalfAction.DISCARD
    age = now_ms - born_ms
    if age > file_reserved_ms:
        return HalfAction.EXPIRED
    if store_ms >= run_start_ms:
        return HalfAction.NEW
    if age < 0:
        return HalfAction.CHECK
    limit = immunity_ms(immunity_raw, timeout_ms)
    if age < limit:
        return HalfAction.DEFER if limit > timeout_ms else HalfAction.WAIT
    return HalfAction.CHECK


def advance_op_progress(op_progress: int, op_max_half: Mapping[int, int], half_progress: int) -> int:
    """The op progress after passing every op record whose offsets are all below ``half_progress``.

    ``op_max_half`` maps the op-queue offsets read so far (from ``op_progress`` on) to the highest
    half offset each names (-1 for a record naming none); the walk stops at the first op still
    needed or at the first offset not read yet.
    """
    while True:
        highest = op_max_half.get(op_progress)
        if highest is None or highest >= half_progress:
            return op_progress
        op_progress += 1
