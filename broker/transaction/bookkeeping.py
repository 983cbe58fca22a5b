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
    persisted progress: a restart re-reads from there and never skips one.

Open transactions and what is forgotten (issue 17: memory and startup bounded)
    The *open* transactions are those of the copies stored at or past the half progress
    (:class:`OpenTransactions`: each copy's ``TRAN_PREPARED_QUEUE_OFFSET`` ``Y``, counted until
    the progress passes the copy). A transaction whose first half ``Y`` is below the half
    progress and which is not open is over: the progress passed each of its halves, the last one
    because it was resolved, discarded or expired (a copied one left a copy, which keeps it
    open). So

    * the resolved set keeps only offsets at or past the half progress and open transactions
      (:func:`keeps_resolved`), whatever the history's length;
    * END_TRANSACTION naming a half below the half progress of a transaction that is not open
      is answered as for a resolved one (:func:`is_over`): never a second copy;
    * the op progress passes an op record once all the offsets it names are below the half
      progress and none is an open transaction (:func:`advance_op_progress`), and a restart
      reads the op queue from there only: what it skips names only transactions that are over.
      A transaction resolved while open keeps its records (its ``Y`` is named) until the
      progress passes its last copy, one check run later.
"""

from __future__ import annotations

import enum
from collections import deque
from collections.abc import Container
from typing import Protocol

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


#: what an op record names: one half offset (nearly every record), or several, or none
Named = int | tuple[int, ...]


class NamedByOffset(Protocol):
    def get(self, offset: int, /) -> Named | None: ...


def advance_op_progress(
    op_progress: int,
    op_named: NamedByOffset,
    half_progress: int,
    open_txs: Container[int],
    limit: int | None = None,
) -> int:
    """The op progress after passing every op record that names only transactions that are over:
    offsets below ``half_progress`` that are not in ``open_txs`` (module docstring).

    ``op_named`` maps the op-queue offsets read so far (from ``op_progress`` on) to the half
    offset each names (an int: one, what nearly every record names) or offsets (a tuple); the
    walk stops at the first op still needed, at the first offset not read yet, or after passing
    ``limit`` records (a record of a transaction resolved while open can hold the progress for a
    check run's worth of records: the check run passes them a slice at a time).
    """
    end = -1 if limit is None else op_progress + limit
    while op_progress != end:
        named = op_named.get(op_progress)
        if named is None:
            return op_progress
        if isinstance(named, int):
            if named >= half_progress or named in open_txs:
                return op_progress
        else:
            for offset in named:
                if offset >= half_progress or offset in open_txs:
                    return op_progress
        op_progress += 1
    return op_progress


def keeps_resolved(offset: int, half_progress: int, open_txs: Container[int]) -> bool:
    """Whether the resolved set must remember ``offset``: the scan will still meet it (at or past
    the progress) or it is an open transaction (its copies past the progress name it)."""
    return offset >= half_progress or offset in open_txs


def is_over(queue_offset: int, tx_offset: int, half_progress: int, open_txs: Container[int]) -> bool:
    """Whether the half at ``queue_offset`` of transaction ``tx_offset`` belongs to a transaction
    that is over (resolved, discarded or expired) though the resolved set may have forgotten it:
    the progress passed the half and the transaction is not open (module docstring)."""
    return queue_offset < half_progress and tx_offset not in open_txs


class OpenTransactions:
    """The transactions of the copies stored at or past the half progress (module docstring):
    ``Y in open`` while a copy of ``Y`` is there. Copies are added in queue-offset order (each
    check copy goes to the half queue's tail; a restart adds what it finds from the progress on,
    in order) and forgotten, from the oldest, once the progress passes them."""

    __slots__ = ("_copies", "counts")

    def __init__(self) -> None:
        #: (queue offset, transaction offset) of each copy, oldest first
        self._copies: deque[tuple[int, int]] = deque()
        #: transaction offset -> its copies at or past the progress (``in`` it: open)
        self.counts: dict[int, int] = {}

    def add(self, queue_offset: int, tx_offset: int) -> None:
        """A copy of transaction ``tx_offset`` stored at ``queue_offset`` (a first half, whose
        transaction is itself, is not a copy: nothing to remember)."""
        if tx_offset != queue_offset:
            self._copies.append((queue_offset, tx_offset))
            count = self.counts
            count[tx_offset] = count.get(tx_offset, 0) + 1

    def pass_below(self, half_progress: int) -> list[int]:
        """Forget the copies the half progress has passed; the transactions no longer open."""
        copies, count = self._copies, self.counts
        closed: list[int] = []
        while copies and copies[0][0] < half_progress:
            _, tx = copies.popleft()
            left = count[tx] - 1
            if left:
                count[tx] = left
            else:
                del count[tx]
                closed.append(tx)
        return closed

    def __contains__(self, tx_offset: object) -> bool:
        return tx_offset in self.counts

    def __len__(self) -> int:
        """How many transactions are open."""
        return len(self.counts)

    def copies(self) -> int:
        """How many copies are remembered."""
        return len(self._copies)

    def clear(self) -> None:
        self._copies.clear()
        self.counts.clear()


class OpNames:
    """What each op record names (:data:`Named`), by op-queue offset, from the op progress on
    (:func:`advance_op_progress`): a list from ``base``, records being read in queue order.

    A dict of them rehashed every entry on the loop each time it grew (a minute of
    END_TRANSACTIONs at 33k/s: a million entries, tens of ms); a list appends, and forgets its
    head once the passed part is half of it (a move of the rest, amortised).
    """

    __slots__ = ("_dead", "base", "names")

    def __init__(self) -> None:
        #: the op-queue offset of ``names[0]``
        self.base = 0
        #: None: a record not read (removed by retention), as a missing key of a dict
        self.names: list[Named | None] = []
        #: entries at the head below the offset passed to :meth:`drop_below`
        self._dead = 0

    def get(self, offset: int) -> Named | None:
        i = offset - self.base
        if self._dead <= i < len(self.names):
            return self.names[i]
        return None

    def put(self, offset: int, named: Named) -> None:
        names = self.names
        i = offset - self.base
        if i == len(names):
            names.append(named)
        elif not names:
            self.base, self._dead = offset, 0
            names.append(named)
        elif i > len(names):  # (records between were not read)
            names.extend([None] * (i - len(names)))
            names.append(named)
        elif i >= self._dead:
            names[i] = named

    def drop_below(self, offset: int) -> None:
        """Forget the records below ``offset`` (their values freed now, the list's head moved
        off once it is half of it: freeing a million ints at once took tens of ms)."""
        names = self.names
        dead = offset - self.base
        if dead <= self._dead:
            return
        if dead >= len(names):
            names.clear()
            self.base, self._dead = offset, 0
            return
        names[self._dead : dead] = [None] * (dead - self._dead)
        if 2 * dead >= len(names):
            del names[:dead]
            self.base, self._dead = offset, 0
        else:
            self._dead = dead

    def clear(self) -> None:
        self.names.clear()
        self.base = self._dead = 0

    def __len__(self) -> int:
        return len(self.names) - self._dead
