"""Cluster, broker and name-server commands: clusterList, brokerStatus, getBrokerConfig,
updateBrokerConfig, getNamesrvConfig, wipeWritePerm, addWritePerm, brokerConsumeStats, statsAll.

JSON documents:

* clusterList: ``{"brokers": [BrokerRuntime]}`` (keys in :mod:`.model`; ``stats`` is the raw
  runtime table with RocketMQ's key names: putTps, getTransferedTps, msgPutTotalTodayNow ...)
* brokerStatus: ``{"brokers": [{"addr", "stats": {...}, "error"}]}``
* getBrokerConfig: ``{"brokers": [{"addr", "config": {...}}]}``
* updateBrokerConfig: ``{"key", "value", "brokers": [addr]}``
* getNamesrvConfig: ``{"namesrvs": [{"addr", "config": {...}}]}``
* wipeWritePerm / addWritePerm: ``{"brokerName", "namesrvs": [{"addr", "topicCount"}]}``
* brokerConsumeStats: ``{"brokerAddr", "diffTotal", "queues": [BrokerConsumeRow]}``
* statsAll: ``{"rows": [StatsRow]}``
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

import click

from pocketmq.client.admin.cli_common import Opts, admin_command, bool_option, emit, now_ms, run_admin

if TYPE_CHECKING:
    from pocketmq.client.admin.admin import MQAdmin
    from pocketmq.client.admin.model import StatsRow


def _need_target(broker_addr: str | None, cluster: str | None) -> None:
    if not broker_addr and not cluster:
        raise click.UsageError("give a broker address (-b) or a cluster name (-c)")


@admin_command("clusterList", "List cluster infos.")
@click.option("-c", "--clusterName", "cluster", help="only this cluster")
@click.option("-m", "--moreStats", "more", is_flag=True, help="yesterday's and today's in/out message totals")
@click.option(
    "-i", "--interval", "interval", type=click.IntRange(1), help="repeat every N seconds (Ctrl-C stops)"
)
def cluster_list(opts: Opts, cluster: str | None, more: bool, interval: int | None) -> None:
    from pocketmq.client.admin.format import cluster_list_table

    while True:
        brokers = run_admin(opts, lambda a: a.cluster_list(cluster))
        text = cluster_list_table(brokers, now_ms(), more) if not opts.json else ""
        emit(opts, {"brokers": [b.to_json() for b in brokers]}, text)
        if interval is None:
            return
        time.sleep(interval)


@admin_command("brokerStatus", "Fetch broker runtime status data.")
@click.option("-b", "--brokerAddr", "broker_addr", help="broker address")
@click.option("-c", "--clusterName", "cluster", help="every master of this cluster")
def broker_status(opts: Opts, broker_addr: str | None, cluster: str | None) -> None:
    from pocketmq.client.admin.format import broker_status_dump

    _need_target(broker_addr, cluster)

    async def job(admin: MQAdmin) -> list:  # type: ignore[type-arg]
        return await admin.brokers_runtime(await admin.targets(broker_addr, cluster))

    brokers = run_admin(opts, job)
    doc = {
        "brokers": [
            {"addr": b.addr, "stats": dict(sorted(b.stats.items())), "error": b.error} for b in brokers
        ]
    }
    emit(opts, doc, lambda: broker_status_dump(brokers))
    if all(b.error is not None for b in brokers):
        raise click.exceptions.Exit(3)


@admin_command("getBrokerConfig", "Get broker config by cluster or special broker.")
@click.option("-b", "--brokerAddr", "broker_addr", help="broker address")
@click.option("-c", "--clusterName", "cluster", help="every master of this cluster")
def get_broker_config(opts: Opts, broker_addr: str | None, cluster: str | None) -> None:
    from pocketmq.client.admin.format import broker_config_dump

    _need_target(broker_addr, cluster)

    async def job(admin: MQAdmin) -> list[tuple[str, dict[str, str]]]:
        addrs = await admin.targets(broker_addr, cluster)
        return [(addr, await admin.broker_config(addr)) for addr in addrs]

    configs = run_admin(opts, job)
    doc = {"brokers": [{"addr": a, "config": c} for a, c in configs]}
    emit(opts, doc, lambda: "".join(broker_config_dump(a, c) for a, c in configs))


@admin_command("updateBrokerConfig", "Update broker's config.")
@click.option("-b", "--brokerAddr", "broker_addr", help="broker address")
@click.option("-c", "--clusterName", "cluster", help="every master of this cluster")
@click.option("-k", "--key", "key", required=True, help="config key, e.g. brokerPermission")
@click.option("-v", "--value", "value", required=True, help="config value")
@click.option("-a", "--updateAllBroker", "with_slaves", is_flag=True, help="with -c: slaves too")
def update_broker_config(
    opts: Opts, broker_addr: str | None, cluster: str | None, key: str, value: str, with_slaves: bool
) -> None:
    _need_target(broker_addr, cluster)

    async def job(admin: MQAdmin) -> list[str]:
        addrs = await admin.targets(broker_addr, cluster, with_slaves=with_slaves)
        await admin.update_broker_config(addrs, key, value)
        return addrs

    addrs = run_admin(opts, job)
    text = "".join(f"update broker config success, {addr}\n" for addr in addrs)
    emit(opts, {"key": key, "value": value, "brokers": addrs}, text)


@admin_command("getNamesrvConfig", "Get configs of name server.")
def get_namesrv_config(opts: Opts) -> None:
    from pocketmq.client.admin.format import kv_lines

    configs = run_admin(opts, lambda a: a.namesrv_configs())
    doc = {"namesrvs": [{"addr": a, "config": c} for a, c in configs.items()]}
    emit(
        opts, doc,
        lambda: "".join(f"============{a}============\n" + kv_lines(c.items(), "  =  ") for a, c in configs.items()),
    )  # fmt: skip


def _write_perm(opts: Opts, broker_name: str, wipe: bool) -> None:
    results = run_admin(
        opts, lambda a: a.wipe_write_perm(broker_name) if wipe else a.add_write_perm(broker_name)
    )
    verb = "wipe" if wipe else "add"
    text = "".join(
        f"{verb} write perm of broker[{broker_name}] in name server[{ns}] OK, {n}\n" for ns, n in results
    )
    doc = {"brokerName": broker_name, "namesrvs": [{"addr": ns, "topicCount": n} for ns, n in results]}
    emit(opts, doc, text)


@admin_command("wipeWritePerm", "Wipe write perm of broker in all name server you defined in the -n param.")
@click.option("-b", "--brokerName", "broker_name", required=True, help="broker name")
def wipe_write_perm(opts: Opts, broker_name: str) -> None:
    _write_perm(opts, broker_name, wipe=True)


@admin_command("addWritePerm", "Add write perm of broker in all name server you defined in the -n param.")
@click.option("-b", "--brokerName", "broker_name", required=True, help="broker name")
def add_write_perm(opts: Opts, broker_name: str) -> None:
    _write_perm(opts, broker_name, wipe=False)


@admin_command("brokerConsumeStats", "Fetch broker consume stats data.")
@click.option("-b", "--brokerAddr", "broker_addr", required=True, help="broker address")
@click.option("-t", "--timeoutMillis", "timeout_millis", type=click.IntRange(1), help="request timeout in ms")
@click.option(
    "-l",
    "--level",
    "level",
    type=int,
    default=0,
    show_default=True,
    help="only queues with at least this diff",
)
@bool_option("-o", "--order", "is_order", default=False, help="only ordered topics")
def broker_consume_stats(
    opts: Opts, broker_addr: str, timeout_millis: int | None, level: int, is_order: bool
) -> None:
    from pocketmq.client.admin.format import broker_consume_stats_table

    if timeout_millis:
        opts.timeout_ms = timeout_millis
    rows = run_admin(opts, lambda a: a.broker_consume_stats(broker_addr, is_order=is_order, diff_level=level))
    doc = {
        "brokerAddr": broker_addr,
        "diffTotal": sum(r.diff for r in rows),
        "queues": [r.to_json() for r in rows],
    }
    emit(opts, doc, lambda: broker_consume_stats_table(rows))


@admin_command("statsAll", "Topic and Consumer tps stats.")
@click.option(
    "-a", "--activeTopic", "active", is_flag=True, help="only topics with traffic in the last 24 hours"
)
@click.option("-t", "--topic", "topic", help="only this topic")
def stats_all(opts: Opts, active: bool, topic: str | None) -> None:
    from pocketmq.client.admin.format import stats_all_table

    rows = run_admin(opts, lambda a: _stats_all_with_progress(a, opts, topic, active))
    emit(opts, {"rows": [r.to_json() for r in rows]}, lambda: stats_all_table(rows))


async def _stats_all_with_progress(a: MQAdmin, opts: Opts, topic: str | None, active: bool) -> list[StatsRow]:
    """``stats_all`` topic by topic (concurrently), with a progress bar on a terminal."""
    import asyncio

    from pocketmq.client.progress import ProgressBar
    from pocketmq.remoting.protocol.route import is_dlq_topic, is_retry_topic

    if topic:
        return await a.stats_all(topic, active_only=active)
    topics = [t for t in await a.topic_list() if not (is_retry_topic(t) or is_dlq_topic(t))]
    with ProgressBar(
        "statsAll", len(topics), enabled=None if not opts.json else False, unit=" topics"
    ) as bar:

        async def one(t: str) -> list[StatsRow]:
            rows = await a.stats_all(t, active_only=active)
            bar.advance()
            return rows

        return [row for rows in await asyncio.gather(*(one(t) for t in topics)) for row in rows]
