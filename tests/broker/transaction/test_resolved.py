"""``ResolvedOffsets``: the resolved half offsets as one set would hold them, in sets of at most
about ``SEAL`` (no long rehash on the loop)."""

from __future__ import annotations

import random

from pocketmq.broker.transaction.resolved import SEAL, ResolvedOffsets


def check(done: ResolvedOffsets, model: set[int], probe: range) -> None:
    assert set(done) == model and len(done) == len(model) and list(done) == sorted(model)
    assert all(x in done for x in model)
    assert [x for x in probe if x in done] == sorted(x for x in model if x in probe)
    # every set bounded, ``cur`` holds every offset at or above ``cur_lo``
    assert all(len(s) <= SEAL + 64 for s in (done.cur, *done.sealed))
    assert all(x in done.cur for x in model if x >= done.cur_lo)


def test_as_a_set_through_seals_forgetting_and_drops() -> None:
    rng = random.Random(21)
    done, model = ResolvedOffsets(), set[int]()
    head, most_sealed = 0, 0
    for step in range(60_000):
        most_sealed = max(most_sealed, len(done.sealed))
        r = rng.random()
        if r < 0.8:  # mostly the next offsets, a few late or far below (a check copy's transaction)
            x = head + rng.randrange(-64, 64) if rng.random() < 0.98 else rng.randrange(head + 1)
            head += 1
            x = max(0, x)
            done.add(x)
            model.add(x)
        elif r < 0.9:
            x = rng.randrange(head + 1)
            done.discard(x)
            model.discard(x)
        elif r < 0.99 and step % 50 == 0:
            start = rng.randrange(head + 1)
            stop = start + rng.randrange(1, 300)
            keep = {rng.randrange(stop + 1) for _ in range(rng.randrange(20))}
            done.forget(start, stop, keep)
            model -= {x for x in range(start, stop) if x not in keep}
        elif step % 500 == 0:
            below = max(0, head - rng.randrange(SEAL, 4 * SEAL))
            keep = {x for x in model if x < below and rng.random() < 0.01}
            # (drop_below may only forget what keeps_resolved lets go: below it, the open ones)
            done.drop_below(below, keep)
            if rng.random() < 0.5:
                done.prune_far(below, keep)
            else:
                done.prune_all(below, keep)
            # what must stay stays, and nothing else appears (forgetting more is allowed)
            model = {x for x in model if x >= below or x in keep} | (model & set(done))
            assert model == set(done)
    assert most_sealed >= 3, "the test sealed too little"
    check(done, model, range(max(0, head - 5 * SEAL), head + 100))
    assert "1" not in done and None not in done


def test_seal_moves_cur_and_places_the_ones_below_it() -> None:
    done = ResolvedOffsets(range(SEAL - 1))
    assert not done.sealed and done.cur_lo == 0
    done.add(SEAL + 5)
    assert done.bounds == [0] and done.cur_lo == SEAL + 6 and not done.cur
    done.add(3 * SEAL)  # cur from cur_lo on
    done.add(SEAL - 1)  # below cur_lo: in cur until the next seal, then in the sealed set
    assert SEAL - 1 in done and SEAL - 1 in done.cur
    done.update(range(3 * SEAL + 1, 4 * SEAL))
    assert done.bounds == [0, SEAL + 6] and SEAL - 1 in done.sealed[0]
    assert SEAL - 1 in done and SEAL not in done and SEAL + 5 in done


def test_drop_below_moves_the_open_ones_to_far() -> None:
    done = ResolvedOffsets(range(3 * SEAL))
    assert done.bounds == [0, SEAL, 2 * SEAL]
    done.drop_below(2 * SEAL, keep={17, SEAL + 1, 3 * SEAL + 999})
    assert done.bounds == [2 * SEAL] and done.far == {17, SEAL + 1}
    assert 17 in done and SEAL + 1 in done and 18 not in done and 2 * SEAL in done
    done.add(40)  # (below them all: an END_TRANSACTION of an old open transaction)
    done.update(range(3 * SEAL, 4 * SEAL))  # (sealed: 40 goes to far)
    assert 40 in done.far and 40 in done
    done.prune_far(100, keep={17})
    assert {17, 40} & set(done) == {17}


def test_clear_keeps_cur_the_hot_paths_hold() -> None:
    done = ResolvedOffsets(range(2 * SEAL))
    cur = done.cur
    done.clear()
    assert done.cur is cur and len(done) == 0 and done.cur_lo == 0 and not done.sealed
    done.add(1)
    assert 1 in cur
