"""``haKeepWarmMillis``: the replication link's idle strategy runs only while traffic flows."""

from __future__ import annotations

import asyncio
import threading

import pytest

from pocketmq.store.config import MessageStoreConfig
from pocketmq.store.ha import keepwarm
from pocketmq.store.ha.keepwarm import KeepWarm


def keepwarm_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "ha-keepwarm"]


async def test_touch_keeps_the_loop_waking_until_the_linger_passes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(keepwarm, "LINGER_S", 0.2)
    kw = KeepWarm(1)
    assert kw._timer is None and kw._thread is None  # nothing before the first traffic
    ticks = 0
    tick = kw._tick

    def counted() -> None:
        nonlocal ticks
        ticks += 1
        tick()

    kw._tick = counted  # type: ignore[method-assign]
    kw.touch()
    assert kw._timer is not None and kw._wake.is_set()
    await asyncio.sleep(0.1)
    assert ticks >= 10  # about one a millisecond (a loaded machine runs fewer)
    await asyncio.sleep(0.4)  # silence past the linger: the timer and the thread go idle
    assert kw._timer is None and not kw._wake.is_set()
    idle = ticks
    await asyncio.sleep(0.05)
    assert ticks == idle
    kw.touch()  # traffic again: awake again
    assert kw._timer is not None and kw._wake.is_set()
    kw.stop()
    assert kw._timer is None and kw._thread is None
    assert not keepwarm_threads()


async def test_stop_before_any_traffic_and_touch_after_stop_are_harmless() -> None:
    kw = KeepWarm(1)
    kw.stop()
    kw.touch()
    assert kw._timer is None and kw._thread is None


def test_the_key_defaults_to_one_millisecond_and_zero_turns_it_off() -> None:
    assert MessageStoreConfig().ha_keep_warm_millis == 1
    assert MessageStoreConfig(haKeepWarmMillis=0).ha_keep_warm_millis == 0
    with pytest.raises(ValueError):
        MessageStoreConfig(haKeepWarmMillis=-1)


async def test_replication_traffic_warms_both_sides_and_shutdown_ends_their_threads(open_store, tmp_path) -> None:  # type: ignore[no-untyped-def]
    from tests.store.conftest import make_msg
    from tests.store.ha.test_replication import _master, _slave, _until

    master = await _master(open_store, str(tmp_path / "m"), broker_role="SYNC_MASTER")
    slave = await _slave(open_store, str(tmp_path / "s"), master)
    try:
        await _until(lambda: master.ha_master.slave_count() == 1)
        rs = await asyncio.gather(*(master.put_message_async(make_msg(i)) for i in range(20)))
        assert all(r.status.name == "PUT_OK" for r in rs)
        for side in (master.ha_master.keep_warm, slave.ha_slave.keep_warm):
            assert side is not None and side._timer is not None and side._wake.is_set()
        assert len(keepwarm_threads()) == 2
    finally:
        await slave.shutdown()
        await master.shutdown()
    assert not keepwarm_threads()


async def test_zero_turns_it_off(open_store, tmp_path) -> None:  # type: ignore[no-untyped-def]
    from tests.store.ha.test_replication import _master, _slave

    master = await _master(open_store, str(tmp_path / "m"), ha_keep_warm_millis=0)
    slave = await _slave(open_store, str(tmp_path / "s"), master, ha_keep_warm_millis=0)
    try:
        assert master.ha_master.keep_warm is None and slave.ha_slave.keep_warm is None
    finally:
        await slave.shutdown()
        await master.shutdown()
