"""The broker's loop-lag monitor: ``loopLagWarnMillis`` and the exported metrics."""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path

import pytest

from pocketmq.broker.config import BrokerConfig, ConfigError
from pocketmq.testing import cluster
from tests.integration.test_metrics import PROM, samples, scrape, value
from tests.waiting import wait_until


def test_key_default_and_validation() -> None:
    cfg = BrokerConfig()
    assert cfg.loop_lag_warn_millis == 50
    assert cfg.with_updates({"loopLagWarnMillis": "0"}).loop_lag_warn_millis == 0
    for bad in ("-1", "x", "60001"):
        with pytest.raises(ConfigError, match="loopLagWarnMillis"):
            cfg.with_updates({"loopLagWarnMillis": bad})


def stall_the_broker_loop() -> None:
    time.sleep(0.3)


@pytest.mark.integration
async def test_a_stall_is_counted_and_exported(tmp_path: Path) -> None:
    async with cluster(tmp_path / "c", broker_config={**PROM, "loopLagWarnMillis": 100}) as c:
        broker = c.brokers[0]
        monitor = broker.loop_monitor
        assert monitor is not None and monitor.warn_ms == 100
        # start-up itself may have been slow (lazy imports on a loaded machine): count from here
        before = monitor.slow_turns
        asyncio.get_running_loop().call_soon(stall_the_broker_loop)
        await wait_until(lambda: monitor.slow_turns > before, timeout=30)
        assert monitor.last_slow is not None and "stall_the_broker_loop" in monitor.last_slow[1]
        found = samples(await scrape(broker.metrics_exporter.port))
        node = {"cluster": "DefaultCluster", "node_type": "broker", "node_id": "broker-a"}
        assert value(found, "rocketmq_loop_slow_turns_total", **node) >= 1
        assert value(found, "rocketmq_loop_lag_max_seconds", **node) >= 0.1
        assert value(found, "rocketmq_loop_lag_seconds_count", **node) >= 1


@pytest.mark.integration
async def test_zero_turns_the_monitor_off(tmp_path: Path) -> None:
    async with cluster(tmp_path / "c", broker_config={"loopLagWarnMillis": 0}) as c:
        assert c.brokers[0].loop_monitor is None


@pytest.mark.integration
async def test_a_new_8_queue_topics_first_sends_create_no_file_on_the_loop(
    tmp_path: Path, monkeypatch
) -> None:
    """UPDATE_AND_CREATE_TOPIC prepares the topic's ConsumeQueue files in the store's prepare
    thread; the first sends to each queue then take them (issue 21)."""
    from pocketmq.client import Message, MessageQueue, Producer
    from pocketmq.client.admin import MQAdmin
    from pocketmq.remoting.protocol.route import TopicConfig
    from pocketmq.store.log import mapped_file

    made: list[tuple[str, int]] = []
    real = mapped_file._extend

    def spy(fd: int, size: int) -> None:
        made.append((threading.current_thread().name, size))
        real(fd, size)

    async with cluster(tmp_path / "c") as c:
        broker = c.brokers[0]
        cq_size = broker.store.config.cq_file_size
        monkeypatch.setattr(mapped_file, "_extend", spy)
        async with MQAdmin(c.namesrv_addr) as admin:
            await admin.create_topic(TopicConfig("T8", 8, 8), broker_addr=broker.broker_addr)
        async with Producer("PG8", namesrv=c.namesrv_addr) as producer:
            for q in range(8):
                await producer.send(Message("T8", b"x" * 100), queue=MessageQueue("T8", "broker-a", q))
        await wait_until(lambda: all(broker.store.get_max_offset_in_queue("T8", q) == 1 for q in range(8)))
        threads = [name for name, size in made if size == cq_size]
        assert len(threads) == 8, made
        assert all(name.startswith("store-prepare") for name in threads), threads
