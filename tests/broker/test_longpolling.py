"""The long-polling table (pure, times as arguments) and its service (real loop, no sockets)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

from pocketmq.broker.filter import TagMessageFilter
from pocketmq.broker.longpolling import HeldPull, PullRequestHoldService, PullRequestTable
from pocketmq.remoting.protocol.bodies import SubscriptionData
from pocketmq.remoting.protocol.command import RemotingCommand
from pocketmq.remoting.protocol.message import java_string_hash


class FakeConn:
    is_active = True


def held(topic="T", qid=0, offset=5, deadline=1000, expr=None, conn=None) -> HeldPull:
    flt = TagMessageFilter(SubscriptionData.build(topic, expr)) if expr else None
    return HeldPull.of(conn or FakeConn(), RemotingCommand(11), topic, qid, offset, deadline, flt)


@contextlib.asynccontextmanager
async def running_hold(*args: Any, **kw: Any) -> AsyncIterator[PullRequestHoldService]:
    """A started :class:`PullRequestHoldService`, stopped on the way out."""
    svc = PullRequestHoldService(*args, **kw)
    svc.start()
    try:
        yield svc
    finally:
        await svc.stop()


def test_arrival_wakes_only_requests_below_the_new_max():
    t = PullRequestTable()
    a, b = held(offset=5), held(offset=7)
    assert t.hold(a) and t.hold(b)
    assert t.take_arrived("T", 0, 6) == [a]
    assert t.held("T", 0) == [b]
    assert t.take_arrived("T", 1, 100) == []  # other queue
    assert t.take_arrived("T", 0, 8) == [b]
    assert not t


def test_woken_pulls_do_not_pile_up_in_the_deadline_heap():
    """A pull answered by a message leaves a stale deadline entry; at a steady message rate
    they are compacted away instead of piling up until the first deadline (then popped in one
    loop turn), and expiry still answers exactly the requests still held."""
    t = PullRequestTable()
    for i in range(10_000):
        req = held(qid=i % 8, offset=i, deadline=15_000 + i)
        assert t.hold(req)
        if i >= 8:  # the pull held 8 messages ago is answered by this one's arrival
            assert len(t.take_arrived("T", (i - 8) % 8, i - 7)) == 1
        assert len(t._deadlines) <= 2 * 8 + 2 * 64
    assert len(t) == 8
    assert t.next_deadline() == 15_000 + 9_992
    expired = t.take_expired(15_000 + 9_995)
    assert sorted(r.pull_from_offset for r in expired) == [9_992, 9_993, 9_994, 9_995]
    assert len(t) == 4 and t.next_deadline() == 15_000 + 9_996
    assert t._stale == sum(1 for e in t._deadlines if e[2].done)


def test_stale_notification_asks_the_store_again():
    t = PullRequestTable()
    a = held(offset=5)
    t.hold(a)
    assert t.take_arrived("T", 0, 5, current_max_offset=lambda topic, q: 5) == []
    assert t.take_arrived("T", 0, 5, current_max_offset=lambda topic, q: 6) == [a]


def test_tag_filter_decides_on_arrival_and_sweep_ignores_it():
    t = PullRequestTable()
    a = held(expr="TagA || TagB")
    t.hold(a)
    assert t.take_arrived("T", 0, 6, java_string_hash("TagC")) == []
    assert t.take_arrived("T", 0, 6, java_string_hash("TagB")) == [a]
    t.hold(b := held(expr="TagA"))
    assert t.take_arrived("T", 0, 6, None) == [b]  # the safety sweep has no tag: re-execute


def test_deadlines_expire_in_order_and_skip_answered():
    t = PullRequestTable()
    a, b, c = held(deadline=300), held(deadline=100), held(offset=9, deadline=200)
    for r in (a, b, c):
        t.hold(r)
    assert t.next_deadline() == 100
    assert t.take_expired(99) == []
    assert t.take_expired(200) == [b, c]
    t.take_arrived("T", 0, 6)  # answers a
    assert t.next_deadline() is None
    assert t.take_expired(10_000) == []


def test_bound_per_queue_and_connection_drop():
    t = PullRequestTable(max_per_queue=2)
    conn = FakeConn()
    assert t.hold(held(conn=conn)) and t.hold(held())
    assert not t.hold(held())
    assert t.hold(held(qid=1, conn=conn))
    assert t.drop_connection(conn) == 2
    assert len(t) == 1


def test_connection_counts_follow_every_way_out():
    # a close looks only at its own count (no scan of every held pull): the count must follow
    # arrivals, deadlines, drops and take_all, or a close would miss a held request
    t = PullRequestTable()
    a, b = FakeConn(), FakeConn()
    assert t.hold(held(conn=a, offset=5)) and t.hold(held(conn=a, qid=1)) and t.hold(held(conn=b))
    assert t.drop_connection(FakeConn()) == 0  # never held anything
    t.take_arrived("T", 1, 10)  # a's request on queue 1 answered
    assert t.drop_connection(a) == 1 and t.drop_connection(a) == 0
    assert t.hold(held(conn=a, qid=2))
    assert t.take_expired(10**15) != [] and len(t) == 0
    assert t.drop_connection(a) == 0 and t.drop_connection(b) == 0
    assert t.hold(held(conn=b)) and len(t.take_all()) == 1
    assert t.drop_connection(b) == 0
    assert t.hold(held(conn=b)) and t.drop_connection(b) == 1 and len(t) == 0


async def test_service_wakes_on_arrival_and_on_deadline():
    answered: list[tuple[str, HeldPull]] = []
    max_offsets = {("T", 0): 5}
    async with running_hold(lambda r: answered.append(("run", r)), lambda t, q: max_offsets[(t, q)]) as svc:
        now = svc.now_ms()
        a = held(offset=5, deadline=now + 60_000)
        b = held(offset=5, deadline=now + 50)
        assert svc.suspend(a) and svc.suspend(b)
        svc.arriving("T", 0, 6, 0, 0, None, {})
        assert answered == [("run", a), ("run", b)]
        answered.clear()
        c = held(offset=6, deadline=svc.now_ms() + 50)
        svc.suspend(c)
        await asyncio.sleep(0.2)
        assert answered == [("run", c)]


async def test_service_stop_answers_everything():
    answered: list[HeldPull] = []
    svc = PullRequestHoldService(answered.append, lambda t, q: 0)
    svc.start()
    r = held(deadline=svc.now_ms() + 60_000)
    svc.suspend(r)
    await svc.stop()
    assert answered == [r]


async def test_service_safety_sweep_catches_missed_notifications():
    answered: list[HeldPull] = []
    current = {"max": 5}
    async with running_hold(answered.append, lambda t, q: current["max"], check_interval=0.05) as svc:
        r = held(offset=5, deadline=svc.now_ms() + 60_000)
        svc.suspend(r)
        await asyncio.sleep(0.12)
        assert answered == []
        current["max"] = 6
        await asyncio.sleep(0.15)
        assert answered == [r]


async def test_a_failing_execute_does_not_break_the_service():
    calls: list[HeldPull] = []

    def boom(r: HeldPull) -> None:
        calls.append(r)
        raise RuntimeError("boom")

    async with running_hold(boom, lambda t, q: 0) as svc:
        svc.suspend(a := held(offset=1, deadline=svc.now_ms() + 60_000))
        svc.suspend(b := held(offset=1, deadline=svc.now_ms() + 60_000))
        svc.notify_message_arriving("T", 0, 2)
        assert calls == [a, b]


async def test_service_arriving_batch_wakes_by_each_records_offset_and_tag():
    answered: list[HeldPull] = []
    async with running_hold(answered.append, lambda t, q: 9) as svc:
        now = svc.now_ms()
        tag_b = held(offset=5, deadline=now + 60_000, expr="TagB")
        tag_c = held(offset=5, deadline=now + 60_000, expr="TagC")
        svc.arriving_batch("T", 0, 6, [], 0)  # empty batch: nothing
        svc.arriving_batch("T", 1, 6, [java_string_hash("TagB")], 0)  # other queue
        assert svc.suspend(tag_b) and svc.suspend(tag_c)
        svc.arriving_batch("T", 0, 6, [java_string_hash("TagA"), java_string_hash("TagB")], 0)
        assert answered == [tag_b]  # TagC still held: no record of the batch matched it


async def test_held_queues_view_answers_as_is_held():
    """The send processor's ``key in held_queues`` is an inline of ``is_held``: same answers."""
    svc = PullRequestHoldService(None, lambda t, q: 0)
    view = svc.held_queues  # taken once, as the send processor does; must stay live
    svc.start()
    try:
        keys = [("T", 0), ("T", 1), ("U", 0)]
        assert all((k in view) is svc.is_held(*k) is False for k in keys)
        assert not view  # (the send processor tests it first: empty, no key built)
        svc.suspend(held("T", 1, deadline=svc.now_ms() + 60_000))
        assert [k in view for k in keys] == [svc.is_held(*k) for k in keys] == [False, True, False]
        assert view
        svc.execute = lambda r: None
        svc.notify_message_arriving("T", 1, 100)
        assert [k in view for k in keys] == [svc.is_held(*k) for k in keys] == [False, False, False]
        assert not view
    finally:
        await svc.stop()


def test_held_pull_fields_and_identity() -> None:
    """HeldPull has no Python __init__ (the pull processor fills its slots): ``of`` sets every
    field, a new one is not done, and two equal ones are told apart (a table removes by identity)."""
    a, b = held(offset=7, deadline=99), held(offset=7, deadline=99)
    assert (a.topic, a.queue_id, a.pull_from_offset, a.deadline_ms) == ("T", 0, 7, 99)
    assert (a.message_filter, a.header, a.done) == (None, None, False)
    assert a != b and "pull_from_offset=7" in repr(a)
    t = PullRequestTable()
    assert t.hold(a) and t.hold(b)
    assert t.take_arrived("T", 0, 8) == [a, b] and a.done and b.done


def test_take_arrived_all_or_part_of_a_queue() -> None:
    """An arrival that answers every held request of a queue drops the queue's list whole; one
    that answers part of it keeps the rest held (and counted per connection)."""
    conn = FakeConn()
    t = PullRequestTable()
    a, b, c = held(offset=3, conn=conn), held(offset=9, conn=conn), held(qid=1, conn=conn)
    for r in (a, b, c):
        assert t.hold(r)
    assert t.take_arrived("T", 0, 5) == [a]
    assert t.held("T", 0) == [b] and not b.done and len(t) == 2
    assert t.take_arrived("T", 0, 10) == [b] and t.queues() == [("T", 1)]
    assert t.drop_connection(conn) == 1 and not t and c.done
