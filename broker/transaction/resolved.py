"""The resolved half-queue offsets (``TransactionalMessageService.done``), without a long rehash.

One ``set[int]`` of them grew by an offset per END_TRANSACTION (~35k a second, up to ~2M
between two check runs) and each doubling rehashed the whole table on the event loop: 38 ms at
~650k (issue 21; the loop-lag monitor named ``flush_ends``). :class:`ResolvedOffsets` keeps the
same offsets in sets of at most about ``SEAL`` each, so no table it grows or rehashes is larger:

* ``cur``: the newest offsets, every resolved offset at or above ``cur_lo`` (and maybe some
  below, added since the last seal). The hot paths test and fill it as they did the one set,
  at C speed (``q in cur``, ``cur |= ending``): a test of a half at or above ``cur_lo`` (a recent
  one, nearly always) reads nothing else;
* when it holds ``SEAL`` (:meth:`ResolvedOffsets.seal`, run by whoever filled it): the set
  moves to ``sealed`` (its range ``[cur_lo, max + 1)`` in ``bounds``; the few offsets below
  ``cur_lo`` to the set whose range holds them) and a new ``cur`` starts at ``max + 1``: a
  ``min`` and a ``max`` of ``SEAL`` offsets, never more;
* ``far``: the offsets below the first sealed range (open transactions the pruning passed).

Forgetting (the service's ``prune_step``, rule :func:`~.bookkeeping.keeps_resolved`) discards a
bounded range offset by offset as before, and drops a sealed set once the pruning passed its
range, moving the open transactions it holds to ``far`` (a C-speed intersection).

The sets hold the same int objects as the one set did; only the largest table is bounded.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Collection, Iterable, Iterator, Sequence

__all__ = ["SEAL", "ResolvedOffsets"]

#: ``cur`` is sealed when it holds this many: its ``min`` and ``max`` (~15 µs per 1k each) and a
#: table of 8k slots at most (a set's rehash costs ~35 ns an entry: 0.15 ms at most, against
#: 38 ms at 650k)
SEAL = 4096


class ResolvedOffsets:
    """A set of half-queue offsets (module docstring): ``in``, :meth:`add`, :meth:`discard`,
    :meth:`update`, iteration, ``len``; bounded forgetting by :meth:`forget` and
    :meth:`drop_below`."""

    __slots__ = ("bounds", "cur", "cur_lo", "far", "sealed")

    def __init__(self, offsets: Iterable[int] = ()) -> None:
        #: the newest offsets: every one at or above ``cur_lo`` (a new set after each seal: the
        #: hot paths read the attribute per use, not once)
        self.cur: set[int] = set()
        self.cur_lo = 0
        #: sealed sets, ``sealed[k]`` the offsets in ``[bounds[k], bounds[k + 1])`` (the last
        #: one up to ``cur_lo``)
        self.sealed: list[set[int]] = []
        self.bounds: list[int] = []
        #: the offsets below ``bounds[0]`` (open transactions the pruning passed)
        self.far: set[int] = set()
        self.update(offsets)

    def _home(self, offset: int) -> set[int]:
        """The set that holds ``offset`` when it is resolved, ``cur`` aside."""
        k = bisect_right(self.bounds, offset) - 1
        return self.far if k < 0 else self.sealed[k]

    def __contains__(self, offset: object) -> bool:
        if offset in self.cur:
            return True
        if not isinstance(offset, int) or offset >= self.cur_lo:
            return False
        k = bisect_right(self.bounds, offset) - 1  # (_home inline: the check scan's test per half)
        return offset in (self.far if k < 0 else self.sealed[k])

    def span(self, offset: int) -> tuple[int, int, set[int]]:
        """``(lo, hi, s)`` with ``offset`` in ``[lo, hi)``: every offset of that range, when
        resolved, is in ``s`` or in ``cur`` (the check scan's test, the set looked up once per
        range: ranges only go when :meth:`drop_below` drops them). At or above ``cur_lo``: an
        empty range (``cur`` is replaced by a seal)."""
        lo = self.cur_lo
        if offset >= lo:
            return offset, offset, self.far
        bounds = self.bounds
        k = bisect_right(bounds, offset) - 1
        if k < 0:
            return -1, bounds[0] if bounds else lo, self.far
        return bounds[k], bounds[k + 1] if k + 1 < len(bounds) else lo, self.sealed[k]

    def add(self, offset: int) -> None:
        cur = self.cur
        cur.add(offset)
        if len(cur) >= SEAL:
            self.seal()

    def update(self, offsets: Iterable[int]) -> None:
        for offset in offsets:
            self.add(offset)

    def seal(self) -> None:
        """Move ``cur`` to the sealed sets (module docstring); bounded: at most ``SEAL`` or so
        offsets copied at C speed, and a step per one below ``cur_lo``."""
        cur, lo = self.cur, self.cur_lo
        if not cur:
            return
        if min(cur) < lo:  # (added since the last seal below it: each to its range's set)
            below = [x for x in cur if x < lo]
            for x in below:
                self._home(x).add(x)
            cur.difference_update(below)
            if not cur:
                return
        hi = max(cur) + 1
        # (the set itself moves: no copy; holders of ``cur`` read it again after a seal)
        self.sealed.append(cur)
        self.bounds.append(lo)
        self.cur = set()
        self.cur_lo = hi

    def discard(self, offset: int) -> None:
        self.cur.discard(offset)
        if offset < self.cur_lo:
            self._home(offset).discard(offset)

    def clear(self) -> None:
        self.cur.clear()
        self.cur_lo = 0
        self.sealed.clear()
        self.bounds.clear()
        self.far.clear()

    def __len__(self) -> int:
        """Counted by a union (an offset added again below ``cur_lo`` is in ``cur`` and in its
        range's set until the next seal): tests and reporting, not the hot paths."""
        return len(self.cur.union(self.far, *self.sealed))

    def __iter__(self) -> Iterator[int]:
        return iter(sorted(self.cur.union(self.far, *self.sealed)))

    def __repr__(self) -> str:
        return f"ResolvedOffsets({list(self)!r})"

    # ------------------------------------------------------------------------ forgetting
    def forget(self, start: int, stop: int, keep: Collection[int] = ()) -> None:
        """Forget the offsets in ``[start, stop)`` but those in ``keep`` (the open
        transactions): from ``cur`` and from each set whose range the stretch overlaps, by
        ``difference_update`` at C speed (a set rebuilds its table once a quarter of it is
        deleted entries: at most ~``SEAL`` entries here). Work: the range's length, which the
        caller bounds."""
        if start >= stop:
            return
        xs: Sequence[int] = [x for x in range(start, stop) if x not in keep] if keep else range(start, stop)
        self.cur.difference_update(xs)
        lo = self.cur_lo
        if start >= lo:
            return
        bounds, sealed = self.bounds, self.sealed
        ranges: list[tuple[int, int, set[int]]] = []
        if start < (bounds[0] if bounds else lo):
            ranges.append((-1, bounds[0] if bounds else lo, self.far))
        for k in range(max(0, bisect_right(bounds, start) - 1), len(bounds)):  # (those overlapping)
            if bounds[k] >= stop:
                break
            ranges.append((bounds[k], bounds[k + 1] if k + 1 < len(bounds) else lo, sealed[k]))
        for a, b, s in ranges:
            if b > start and s:
                s.difference_update(
                    xs[bisect_left(xs, a) : bisect_left(xs, b)]
                    if keep
                    else range(max(start, a), min(stop, b))
                )

    def prune_all(self, below: int, keep: Collection[int]) -> None:
        """Forget every offset below ``below`` but those in ``keep``: one pass over each set
        (at load, before the port opens)."""
        for s in (self.cur, self.far, *self.sealed):
            s.difference_update([x for x in s if x < below and x not in keep])

    def drop_below(self, offset: int, keep: Collection[int]) -> None:
        """Drop the sealed sets whose range ends at or below ``offset`` (every offset below it
        may be forgotten but those in ``keep``, which move to ``far``)."""
        sealed, bounds = self.sealed, self.bounds
        n = 0
        while n < len(sealed) and (bounds[n + 1] if n + 1 < len(bounds) else self.cur_lo) <= offset:
            n += 1
        if not n:
            return
        far = self.far
        for s in sealed[:n]:
            if keep and s:
                far.update(s.intersection(keep))
        del sealed[:n], bounds[:n]

    def prune_far(self, below: int, keep: Collection[int]) -> None:
        """Forget the offsets of ``far`` below ``below`` but those in ``keep`` (one pass)."""
        self.far.difference_update([x for x in self.far if x < below and x not in keep])
