"""Prometheus /metrics of a real broker and name server after a scripted workload (issue 20)."""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import urllib.request
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio
from prometheus_client.parser import text_string_to_metric_families

from pocketmq.client import CONSUME_SUCCESS, Message, MessageQueue, Producer, PushConsumer
from pocketmq.client.admin import MQAdmin
from pocketmq.testing import Cluster, cluster
from tests.waiting import wait_until

pytestmark = pytest.mark.integration

PROM = {"metricsExporterType": "PROM", "metricsPromExporterPort": 0, "metricsPromExporterHost": "127.0.0.1"}


@pytest_asyncio.fixture
async def pmq(tmp_path: Path) -> AsyncIterator[Cluster]:
    async with cluster(
        tmp_path / "c", broker_config={**PROM, "metricsLabel": "env:ci"}, namesrv_config=PROM
    ) as c:
        yield c


async def scrape(port: int) -> str:
    def get() -> str:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
            assert r.headers["Content-Type"].startswith("text/plain; version=0.0.4")
            return r.read().decode()

    return await asyncio.to_thread(get)


def samples(text: str) -> dict[str, list[tuple[dict[str, str], float]]]:
    out: dict[str, list[tuple[dict[str, str], float]]] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out.setdefault(s.name, []).append((s.labels, s.value))
    return out


def value(found: dict[str, list[tuple[dict[str, str], float]]], name: str, **labels: str) -> float:
    rows = [v for lab, v in found.get(name, []) if all(lab.get(k) == want for k, want in labels.items())]
    assert len(rows) == 1, f"{name}{labels}: {rows} in {found.get(name)}"
    return rows[0]


async def workload(c: Cluster) -> None:
    """10 messages (6 on queue 0, 4 on queue 1); group MG commits offset 2 on queue 0 only."""
    await c.create_topic("MT", queues=2)
    async with Producer("MPG", namesrv=c.namesrv_addr) as producer:
        for i in range(10):
            queue = MessageQueue("MT", "broker-a", 0 if i < 6 else 1)
            await producer.send(Message("MT", b"x" * 100, keys=f"k{i}"), queue=queue)
    async with MQAdmin(c.namesrv_addr) as admin:
        await admin.api.update_consumer_offset(
            c.brokers[0].broker_addr, "MG", MessageQueue("MT", "broker-a", 0), 2
        )


async def test_scrape_after_workload_shows_counters_and_lag(pmq: Cluster) -> None:
    await workload(pmq)
    # lag in time is "now - store time of the oldest unconsumed message": let a few ms pass
    await asyncio.sleep(0.02)
    found = samples(await scrape(pmq.brokers[0].metrics_exporter.port))
    node = {"cluster": "DefaultCluster", "node_type": "broker", "node_id": "broker-a", "env": "ci"}
    # 5.x names: totals and per-queue lag
    assert value(found, "rocketmq_messages_in_total", topic="MT", **node) == 10
    assert value(found, "rocketmq_throughput_in_total", topic="MT", **node) > 10 * 100
    assert value(found, "rocketmq_consumer_lag_messages", topic="MT", consumer_group="MG", **node) == 8
    assert (
        value(found, "rocketmq_consumer_queue_lag_messages", topic="MT", consumer_group="MG", queue_id="0")
        == 4
    )
    assert (
        value(found, "rocketmq_consumer_queue_lag_messages", topic="MT", consumer_group="MG", queue_id="1")
        == 4
    )
    assert value(found, "rocketmq_consumer_lag_latency", topic="MT", consumer_group="MG") > 0
    # rocketmq-exporter names and labels
    exp = {"cluster": "DefaultCluster", "broker": "broker-a"}
    assert value(found, "rocketmq_producer_offset", topic="MT", **exp) == 10
    assert (
        value(
            found, "rocketmq_group_diff", group="MG", topic="MT", count_of_online_consumers="0", msg_model="1"
        )
        == 8
    )
    assert value(found, "rocketmq_consumer_offset", topic="MT", group="MG", **exp) == 10
    assert value(found, "rocketmq_group_consume_total_offset", topic="MT", group="MG", **exp) == 2
    assert value(found, "rocketmq_group_get_latency_by_storetime", topic="MT", group="MG", **exp) > 0
    assert value(found, "rocketmq_brokeruntime_putmessage_times_total", cluster="DefaultCluster") == 10
    assert value(found, "rocketmq_brokeruntime_msg_put_total_today_now", cluster="DefaultCluster") == 10
    assert 0 <= value(found, "rocketmq_brokeruntime_commitlog_disk_ratio", cluster="DefaultCluster") <= 1
    assert value(found, "rocketmq_producer_tps", topic="MT", **exp) >= 0
    # the put latency histogram counted every append
    assert value(found, "rocketmq_put_latency_seconds_count", **node) == 10
    assert value(found, "rocketmq_put_latency_seconds_sum", **node) > 0
    assert value(found, "rocketmq_put_latency_seconds_bucket", le="+Inf", **node) == 10
    assert value(found, "rocketmq_storage_dispatch_behind_bytes", **node) >= 0
    assert value(found, "rocketmq_topic_number", **node) >= 1
    assert value(found, "rocketmq_connections", **node) >= 0  # the clients above have closed
    assert value(found, "rocketmq_group_consumers", group="MG", caddr="", localaddr="") == 0  # none online

    ns = samples(await scrape(pmq.namesrv.metrics_exporter.port))
    assert (
        value(ns, "rocketmq_namesrv_brokers", cluster="DefaultCluster", broker="broker-a", role="master") == 1
    )
    assert value(ns, "rocketmq_namesrv_topics") >= 1


async def promtool_check(text: str, *, skip: bool = True) -> tuple[int, list[str]]:
    """``promtool check metrics`` on ``text``: its exit code and remark lines. Without promtool
    the test skips (``skip``) or this answers ``(0, [])``."""
    promtool = shutil.which("promtool")
    if promtool is None:
        if not skip:
            return 0, []
        pytest.skip("promtool not installed (Debian package 'prometheus'; `make test-deps` installs it)")
    proc = await asyncio.to_thread(
        subprocess.run,
        [promtool, "check", "metrics"],
        input=text,
        capture_output=True,
        text=True,
        check=False,
    )
    return proc.returncode, [line for line in (proc.stdout + proc.stderr).splitlines() if line.strip()]


async def test_promtool_accepts_the_output(pmq: Cluster) -> None:
    """Broker and name server scrapes after a workload are lint-clean: promtool exits 0."""
    await workload(pmq)
    broker_text = await scrape(pmq.brokers[0].metrics_exporter.port)
    for port in (pmq.brokers[0].metrics_exporter.port, pmq.namesrv.metrics_exporter.port):
        code, remarks = await promtool_check(await scrape(port))
        assert (code, remarks) == (0, []), remarks
    found = samples(broker_text)
    # the exporter's series names dashboards query are still there, with snake_case labels
    assert (
        value(
            found, "rocketmq_group_diff", group="MG", topic="MT", count_of_online_consumers="0", msg_model="1"
        )
        == 8
    )
    assert value(found, "rocketmq_brokeruntime_putmessage_times_total", cluster="DefaultCluster") == 10
    assert value(found, "rocketmq_brokeruntime_put_message_size_total", cluster="DefaultCluster") > 1000
    assert value(found, "rocketmq_brokeruntime_msg_puttotal_todaymorning", cluster="DefaultCluster") >= 0
    assert value(found, "rocketmq_brokeruntime_commitlogdir_capacity_bytes", cluster="DefaultCluster") > 0
    [(labels, _)] = found["rocketmq_broker_tps"]
    assert labels.keys() >= {"cluster", "broker_ip", "broker"}
    assert "# TYPE rocketmq_brokeruntime_putmessage_times_total counter" in broker_text


#: what promtool says about rocketmq-exporter's own spellings (camelCase labels such as brokerIP /
#: countOfOnlineConsumers; gauges it named ``*_total`` and ``*_count``)
EXPORTER_LINT = (
    "label names should be written in 'snake_case' not 'camelCase'",
    'non-counter metrics should not have "_total" suffix',
    'non-histogram and non-summary metrics should not have "_count" suffix',
)


async def test_exporter_compat_key_gives_the_exporter_spellings(tmp_path: Path) -> None:
    """metricsRocketmqExporterCompat=true: the exporter's label names and gauge types verbatim;
    promtool's only remarks are about those spellings, never about the 5.x-style families."""
    config = {**PROM, "metricsRocketmqExporterCompat": "true"}
    async with cluster(tmp_path / "c", broker_config=config) as c:
        await workload(c)
        text = await scrape(c.brokers[0].metrics_exporter.port)
    found = samples(text)
    assert (
        value(found, "rocketmq_group_diff", group="MG", topic="MT", countOfOnlineConsumers="0", msgModel="1")
        == 8
    )
    [(labels, _)] = found["rocketmq_brokeruntime_put_tps10"]
    assert labels.keys() >= {"cluster", "brokerIP", "brokerHost", "des", "boottime", "broker_version"}
    assert "# TYPE rocketmq_brokeruntime_putmessage_times_total gauge" in text
    assert value(found, "rocketmq_brokeruntime_commitlogdir_capacity_total", cluster="DefaultCluster") > 0
    assert value(found, "rocketmq_group_count", group="MG") == 0
    code, remarks = await promtool_check(text)
    assert code == 3, remarks  # 3: parsed, lint remarks only (1 would be a parse error)
    assert remarks and all(r.startswith("rocketmq_") and r.endswith(EXPORTER_LINT) for r in remarks), remarks
    assert {r.split()[0] for r in remarks} <= {
        "rocketmq_group_diff",
        "rocketmq_group_retrydiff",
        "rocketmq_group_dlqdiff",
        "rocketmq_broker_tps",
        "rocketmq_broker_qps",
        "rocketmq_group_count",
        "rocketmq_producer_count",
    } | {r.split()[0] for r in remarks if r.startswith("rocketmq_brokeruntime_")}


async def test_online_clients_are_counted(pmq: Cluster) -> None:
    """Online consumers (with their addresses and client ids) and producer instances per group
    (rocketmq-exporter's rocketmq_group_count / _producer_count, lint-clean names by default)."""
    await pmq.create_topic("OnT", queues=1)

    async def listener(msgs: list[object], ctx: object) -> object:
        return CONSUME_SUCCESS

    consumer = PushConsumer("OnCG", namesrv=pmq.namesrv_addr, listener=listener)
    consumer.subscribe("OnT", "*")
    broker = pmq.brokers[0]
    async with Producer("OnPG", namesrv=pmq.namesrv_addr) as producer, consumer:
        await producer.send(Message("OnT", b"x"))  # the producer's heartbeat reaches the broker
        await wait_until(lambda: broker.consumer_manager.get_consumer_group_info("OnCG") is not None)
        await wait_until(lambda: "OnPG" in broker.producer_manager.table)
        found = samples(await scrape(broker.metrics_exporter.port))
        [(labels, online)] = [
            (lab, v) for lab, v in found["rocketmq_group_consumers"] if lab["group"] == "OnCG"
        ]
        assert online == 1 and labels["localaddr"] == consumer.instance.client_id and labels["caddr"]
        producers = {"cluster": "DefaultCluster", "broker": "broker-a", "group": "OnPG"}
        assert value(found, "rocketmq_producer_instances", **producers) == 1


async def test_metrics_off_by_default(tmp_path: Path) -> None:
    async with cluster(tmp_path / "c") as c:
        assert c.brokers[0].metrics_exporter is None and c.namesrv.metrics_exporter is None
        # the put methods carry only the put-latency timer every broker has (RocketMQ's
        # putLatency99/999 runtime keys): one wrapper, no exporter work
        broker = c.brokers[0]
        await c.create_topic("Off", queues=1)
        async with Producer("OffP", namesrv=c.namesrv_addr) as producer:
            await producer.send(Message("Off", b"x"))
        assert broker.put_latency.count == 1 and broker.metrics is None


async def test_replication_figures_on_master_and_slave(tmp_path: Path) -> None:
    """HA metrics (issue 20's seam, filled by issue 16): the master reports its slave and how far
    behind it is; the slave reports its link."""
    async with cluster(tmp_path / "ha", brokers=0) as c:
        master = await c.add_broker(PROM, store_overrides={"brokerRole": "SYNC_MASTER"})
        slave = await c.add_broker(
            {**PROM, "brokerName": "broker-a", "brokerId": 1}, store_overrides={"brokerRole": "SLAVE"}
        )
        await wait_until(
            lambda: master.store.ha_master is not None and master.store.ha_master.slave_count() == 1
        )
        await c.create_topic("HaM", queues=1)
        async with Producer("HaMP", namesrv=c.namesrv_addr) as producer:
            for i in range(5):
                await producer.send(Message("HaM", b"%d" % i))
        end = master.store.get_max_phy_offset()
        await wait_until(lambda: slave.store.get_max_phy_offset() == end)
        node = {"cluster": "DefaultCluster", "node_type": "broker", "node_id": "broker-a"}
        on_master = samples(await scrape(master.metrics_exporter.port))
        assert value(on_master, "rocketmq_ha_slaves", **node) == 1
        [(labels, acked)] = on_master["rocketmq_ha_slave_ack_offset"]
        assert acked == end and labels["slave"]
        assert value(on_master, "rocketmq_ha_slave_fall_behind_bytes", slave=labels["slave"], **node) == 0
        on_slave = samples(await scrape(slave.metrics_exporter.port))
        assert value(on_slave, "rocketmq_ha_connected", **node) == 1
        await wait_until(
            lambda: slave.store.ha_slave is not None and slave.store.ha_slave.reported_offset == end
        )
        slave_text = await scrape(slave.metrics_exporter.port)
        assert value(samples(slave_text), "rocketmq_ha_reported_offset", **node) == end
        # the replication families are lint-clean too (when promtool is installed)
        for text in (await scrape(master.metrics_exporter.port), slave_text):
            assert await promtool_check(text, skip=False) == (0, [])


#: run in a fresh interpreter (nothing imported yet): which exporter modules each server had
#: imported when its remoting port opened
_PRELOAD_PROBE = """
import asyncio, json, sys
from pocketmq.remoting.transport.server import RemotingServer
from pocketmq.testing import cluster

seen = []
opened = RemotingServer.start

async def start(self):
    seen.append([m in sys.modules for m in ("aiohttp.web", "prometheus_client.exposition")])
    await opened(self)

RemotingServer.start = start
PROM = {"metricsExporterType": "PROM", "metricsPromExporterPort": 0, "metricsPromExporterHost": "127.0.0.1"}

async def main():
    async with cluster(sys.argv[1], broker_config=PROM, namesrv_config=PROM) as c:
        assert c.brokers[0].metrics_exporter is not None
    print(json.dumps(seen))

asyncio.run(main())
"""


def test_exporter_imports_come_before_the_remoting_port_opens(tmp_path: Path) -> None:
    """With ``metricsExporterType=PROM`` the name server and the broker import the exporter's
    modules (aiohttp, prometheus_client: ~130 ms) before their remoting ports open, not on the
    loop while clients may already be connected (issue 21: no stall on the loop)."""
    import sys

    out = subprocess.run(
        [sys.executable, "-c", _PRELOAD_PROBE, str(tmp_path / "c")],
        capture_output=True, text=True, timeout=120, check=True,
    )  # fmt: skip
    seen = json.loads(out.stdout.strip().splitlines()[-1])
    assert len(seen) >= 2  # the name server's port, the broker's (and its VIP port)
    assert all(aio and prom for aio, prom in seen), seen
