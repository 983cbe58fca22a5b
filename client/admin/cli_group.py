"""Consumer-group and offset commands: updateSubGroup, deleteSubGroup, consumerProgress,
consumerStatus, consumerConnection, producerConnection, resetOffsetByTime,
skipAccumulatedMessage, cloneGroupOffset.

JSON documents:

* updateSubGroup: ``{"groupConfig": {brokerId, consumeBroadcastEnable, consumeEnable,
  consumeFromMinEnable, groupName, notifyConsumerIdsChangedEnable, retryMaxTimes,
  retryQueueNums, whichBrokerWhenConsumeSlowly}, "brokers": [addr]}``
* deleteSubGroup: ``{"group", "removeOffset", "brokers": [addr]}``
* consumerProgress -g: GroupProgress ``{"group", "consumeTps", "diffTotal", "queues": [...]}``;
  without -g: ``{"groups": [GroupSummary]}``
* consumerStatus: ``{"group", "clients": {clientId: ConsumerRunningInfo}, "errors": {clientId: msg},
  "subscriptionConsistent"}``
* consumerConnection: ConsumerConnectionInfo; producerConnection: ``{"group", "topic",
  "connections": [ConnectionRow]}``
* resetOffsetByTime / skipAccumulatedMessage: ResetResult ``{"group", "topic", "timestamp",
  "force", "dryRun", "queues": [{brokerName, queueId, consumerOffset, offset}]}``
* cloneGroupOffset: ``{"srcGroup", "destGroup", "topic", "brokers": [addr]}``
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

from pocketmq.client.admin.cli_common import Opts, admin_command, bool_option, emit, run_admin, time_value

if TYPE_CHECKING:
    from pocketmq.client.admin.admin import MQAdmin
    from pocketmq.client.admin.model import GroupSummary


@admin_command("updateSubGroup", "Update or create subscription group.")
@click.option("-b", "--brokerAddr", "broker_addr", help="create subscription group to which broker")
@click.option("-c", "--clusterName", "cluster", help="create subscription group to which cluster")
@click.option("-g", "--groupName", "group", required=True, help="consumer group name")
@bool_option("-s", "--consumeEnable", "consume_enable", default=True, help="consume enable")
@bool_option("-m", "--consumeFromMinEnable", "from_min", default=False, help="from min offset")
@bool_option("-d", "--consumeBroadcastEnable", "broadcast", default=False, help="broadcast")
@click.option(
    "-q", "--retryQueueNums", "retry_queue_nums", type=click.IntRange(0), default=1, show_default=True
)
@click.option(
    "-r", "--retryMaxTimes", "retry_max_times", type=click.IntRange(-1), default=16, show_default=True
)
@click.option("-i", "--brokerId", "broker_id", type=click.IntRange(0), default=0, show_default=True)
@click.option(
    "-w", "--whichBrokerWhenConsumeSlowly", "slowly", type=click.IntRange(0), default=1, show_default=True
)
@bool_option("-a", "--notifyConsumerIdsChanged", "notify", default=True, help="notify consumer ids changed")
def update_sub_group(
    opts: Opts, broker_addr: str | None, cluster: str | None, group: str, consume_enable: bool,
    from_min: bool, broadcast: bool, retry_queue_nums: int, retry_max_times: int, broker_id: int,
    slowly: int, notify: bool,
) -> None:  # fmt: skip
    from pocketmq.remoting.protocol.bodies import SubscriptionGroupConfig

    if not broker_addr and not cluster:
        raise click.UsageError("give a broker address (-b) or a cluster name (-c)")
    config = SubscriptionGroupConfig(
        group,
        consume_enable,
        from_min,
        broadcast,
        retry_queue_nums,
        retry_max_times,
        broker_id,
        slowly,
        notify,
    )
    addrs = run_admin(
        opts, lambda a: a.create_subscription_group(config, broker_addr=broker_addr, cluster=cluster)
    )
    fields = ", ".join(
        f"{k}={str(v).lower() if isinstance(v, bool) else v}" for k, v in config.to_json().items()
    )
    text = "".join(f"create subscription group to {a} success.\n" for a in addrs)
    emit(
        opts,
        {"groupConfig": config.to_json(), "brokers": addrs},
        text + f"SubscriptionGroupConfig [{fields}]\n",
    )


@admin_command("deleteSubGroup", "Delete subscription group from broker.")
@click.option("-b", "--brokerAddr", "broker_addr", help="delete subscription group from which broker")
@click.option("-c", "--clusterName", "cluster", help="delete subscription group from which cluster")
@click.option("-g", "--groupName", "group", required=True)
@bool_option("-r", "--removeOffset", "remove_offset", default=False, help="also remove the group's offsets")
def delete_sub_group(
    opts: Opts, broker_addr: str | None, cluster: str | None, group: str, remove_offset: bool
) -> None:
    if not broker_addr and not cluster:
        raise click.UsageError("give a broker address (-b) or a cluster name (-c)")
    addrs = run_admin(
        opts,
        lambda a: a.delete_subscription_group(
            group, broker_addr=broker_addr, cluster=cluster, remove_offset=remove_offset
        ),
    )
    text = "".join(f"delete subscription group [{group}] from broker [{a}] success.\n" for a in addrs)
    emit(opts, {"group": group, "removeOffset": remove_offset, "brokers": addrs}, text)


@admin_command("consumerProgress", "Query consumers's progress, speed.")
@click.option("-g", "--groupName", "group", help="consumer group (all groups when omitted)")
@click.option("-t", "--topicName", "topic", help="only this topic")
@bool_option(
    "-s", "--showClientIP", "show_ip", default=False, help="show the client each queue is assigned to"
)
def consumer_progress(opts: Opts, group: str | None, topic: str | None, show_ip: bool) -> None:
    from pocketmq.client.admin.format import group_progress_text, group_summary_table

    if group is None:
        groups = run_admin(opts, lambda a: _all_groups_with_progress(a, opts))
        emit(opts, {"groups": [g.to_json() for g in groups]}, lambda: group_summary_table(groups))
        return
    progress = run_admin(opts, lambda a: a.consumer_progress(group, topic, show_client_ip=show_ip))
    emit(opts, progress.to_json(), lambda: group_progress_text(progress, show_ip))


async def _all_groups_with_progress(a: MQAdmin, opts: Opts) -> list[GroupSummary]:
    """``all_groups_progress`` group by group (concurrently), with a progress bar on a terminal."""
    import asyncio

    from pocketmq.client.progress import ProgressBar
    from pocketmq.remoting.protocol.topics import RETRY_GROUP_TOPIC_PREFIX

    topics = await a.topic_list()
    groups = sorted(
        t[len(RETRY_GROUP_TOPIC_PREFIX) :] for t in topics if t.startswith(RETRY_GROUP_TOPIC_PREFIX)
    )
    with ProgressBar(
        "consumerProgress", len(groups), enabled=None if not opts.json else False, unit=" groups"
    ) as bar:

        async def one(g: str) -> GroupSummary:
            summary = await a._group_summary(g)
            bar.advance()
            return summary

        return list(await asyncio.gather(*(one(g) for g in groups)))


@admin_command("consumerStatus", "Query consumer's internal data structure.")
@click.option("-g", "--consumerGroup", "group", required=True)
@click.option("-i", "--clientId", "client_id", help="only this client, with its full detail")
@click.option(
    "-s",
    "--jstack",
    "jstack",
    is_flag=True,
    help="accepted for compatibility (Python clients have no jstack)",
)
@click.option("-b", "--brokerAddr", "broker_addr", help="accepted for compatibility")
def consumer_status(
    opts: Opts, group: str, client_id: str | None, jstack: bool, broker_addr: str | None
) -> None:
    from pocketmq.client.admin.format_msg import consumer_status_text

    infos, errors = run_admin(opts, lambda a: a.consumer_status(group, client_id))
    subs = {
        tuple(sorted((str(s.get("topic")), str(s.get("subString"))) for s in i.get("subscriptionSet", [])))
        for i in infos.values()
    }
    doc = {"group": group, "clients": infos, "errors": errors, "subscriptionConsistent": len(subs) <= 1}
    detail = client_id or (next(iter(sorted(infos))) if len(infos) == 1 else None)
    emit(opts, doc, lambda: consumer_status_text(group, infos, errors, detail))


@admin_command("consumerConnection", "Query consumer's socket connection, client version and subscription.")
@click.option("-g", "--consumerGroup", "group", required=True)
@click.option("-b", "--brokerAddr", "broker_addr", help="ask this broker")
def consumer_connection(opts: Opts, group: str, broker_addr: str | None) -> None:
    from pocketmq.client.admin.format import consumer_connection_text

    info = run_admin(opts, lambda a: a.consumer_connection(group, broker_addr))
    emit(opts, info.to_json(), lambda: consumer_connection_text(info))


@admin_command("producerConnection", "Query producer's socket connection and client version.")
@click.option("-g", "--producerGroup", "group", required=True)
@click.option("-t", "--topic", "topic", required=True)
def producer_connection(opts: Opts, group: str, topic: str) -> None:
    from pocketmq.client.admin.format import producer_connection_table

    conns = run_admin(opts, lambda a: a.producer_connection(group, topic))
    doc = {"group": group, "topic": topic, "connections": [c.to_json() for c in conns]}
    emit(opts, doc, lambda: producer_connection_table(conns))


def _reset(opts: Opts, group: str, topic: str, timestamp: int, force: bool, dry_run: bool) -> None:
    from pocketmq.client.admin.format import reset_table

    result = run_admin(
        opts, lambda a: a.reset_offset_by_time(group, topic, timestamp, force=force, dry_run=dry_run)
    )
    emit(opts, result.to_json(), lambda: reset_table(result))


@admin_command("resetOffsetByTime", "Reset consumer offset by timestamp (without client restart).")
@click.option("-g", "--group", "group", required=True)
@click.option("-t", "--topic", "topic", required=True)
@click.option(
    "-s", "--timestamp", "timestamp", required=True, help="now | epoch ms | yyyy-MM-dd#HH:mm:ss:SSS"
)
@bool_option("-f", "--force", "force", default=True, help="false: only move offsets backwards")
@bool_option("-c", "--cplus", "cplus", default=False, help="accepted for compatibility")
@click.option("--dry-run", "dry_run", is_flag=True, help="show current and new offsets, change nothing")
def reset_offset_by_time(
    opts: Opts, group: str, topic: str, timestamp: str, force: bool, cplus: bool, dry_run: bool
) -> None:
    ts = time_value(timestamp, "'-s' / '--timestamp'")
    assert ts is not None
    _reset(opts, group, topic, ts, force, dry_run)


@admin_command("skipAccumulatedMessage", "Skip all messages that are accumulated (not consumed) currently.")
@click.option("-g", "--group", "group", required=True)
@click.option("-t", "--topic", "topic", required=True)
@bool_option("-f", "--force", "force", default=True, help="set force")
@click.option("-c", "--cluster", "cluster", help="accepted for compatibility")
@click.option("--dry-run", "dry_run", is_flag=True, help="show current and new offsets, change nothing")
def skip_accumulated_message(
    opts: Opts, group: str, topic: str, force: bool, cluster: str | None, dry_run: bool
) -> None:
    _reset(opts, group, topic, -1, force, dry_run)


@admin_command("cloneGroupOffset", "Clone offset from other group.")
@click.option("-s", "--srcGroup", "src", required=True)
@click.option("-d", "--destGroup", "dest", required=True)
@click.option("-t", "--topic", "topic", required=True)
@bool_option("-o", "--offline", "offline", default=False, help="the source group is offline")
def clone_group_offset(opts: Opts, src: str, dest: str, topic: str, offline: bool) -> None:
    addrs = run_admin(opts, lambda a: a.clone_group_offset(src, dest, topic, offline))
    doc: dict[str, Any] = {"srcGroup": src, "destGroup": dest, "topic": topic, "brokers": addrs}
    emit(opts, doc, f"clone group offset success. srcGroup[{src}], destGroup={dest}, topic[{topic}]\n")
