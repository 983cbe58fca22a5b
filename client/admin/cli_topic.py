"""Topic commands: updateTopic, deleteTopic, topicList, topicRoute, topicStatus, topicClusterList,
updateTopicPerm, updateOrderConf.

JSON documents:

* updateTopic: ``{"topicConfig": {order, perm, readQueueNums, topicFilterType, topicName,
  topicSysFlag, writeQueueNums}, "brokers": [addr]}``
* deleteTopic: ``{"topic", "clusters": [..], "brokers": [addr], "namesrvs": [addr]}``
* topicList: ``{"topics": [..]}``; with ``-c`` also ``"rows": [{"cluster", "topic", "consumerGroup"}]``
* topicRoute: ``{"topic", "brokerDatas": [{"brokerAddrs": {"0": addr}, "brokerName", "cluster"}],
  "queueDatas": [{"brokerName", "perm", "readQueueNums", "topicSysFlag", "writeQueueNums"}],
  "filterServerTable", "orderTopicConf"?}``
* topicStatus: ``{"topic", "queues": [{brokerName, queueId, minOffset, maxOffset,
  lastUpdateTimestamp}], "totalMessages"}``
* topicClusterList: ``{"topic", "clusters": [..]}``
* updateTopicPerm: ``{"topic", "perm", "brokers": [{"addr", "oldPerm", "newPerm"}]}``
* updateOrderConf: ``{"topic", "method", "orderConf"}``
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

from pocketmq.client.admin.cli_common import Opts, admin_command, bool_option, emit, run_admin

if TYPE_CHECKING:
    from pocketmq.client.admin.admin import MQAdmin

_PERM = click.IntRange(0, 15)


@admin_command("updateTopic", "Update or create topic.")
@click.option("-b", "--brokerAddr", "broker_addr", help="create topic to which broker")
@click.option("-c", "--clusterName", "cluster", help="create topic to which cluster")
@click.option("-t", "--topic", "topic", required=True, help="topic name")
@click.option(
    "-r", "--readQueueNums", "read_queue_nums", type=click.IntRange(1), default=8, show_default=True
)
@click.option(
    "-w", "--writeQueueNums", "write_queue_nums", type=click.IntRange(1), default=8, show_default=True
)
@click.option("-p", "--perm", "perm", type=_PERM, default=6, show_default=True, help="2 W, 4 R, 6 RW")
@bool_option("-o", "--order", "order", default=False, help="set topic's order (true|false)")
@bool_option("-u", "--unit", "unit", default=False, help="is unit topic (true|false)")
@bool_option("-s", "--hasUnitSub", "has_unit_sub", default=False, help="has unit sub (true|false)")
def update_topic(
    opts: Opts, broker_addr: str | None, cluster: str | None, topic: str, read_queue_nums: int,
    write_queue_nums: int, perm: int, order: bool, unit: bool, has_unit_sub: bool,
) -> None:  # fmt: skip
    from pocketmq.client.admin.format import topic_config_text
    from pocketmq.remoting.protocol.route import TopicConfig, TopicSysFlag

    if not broker_addr and not cluster:
        raise click.UsageError("give a broker address (-b) or a cluster name (-c)")
    config = TopicConfig(
        topic, read_queue_nums, write_queue_nums, perm,
        topic_sys_flag=TopicSysFlag.build(unit, has_unit_sub), order=order,
    )  # fmt: skip
    addrs = run_admin(opts, lambda a: a.create_topic(config, broker_addr=broker_addr, cluster=cluster))
    text = "".join(f"create topic to {addr} success.\n" for addr in addrs) + topic_config_text(config) + "\n"
    emit(opts, {"topicConfig": config.to_json(), "brokers": addrs}, text)


@admin_command("deleteTopic", "Delete topic from broker and NameServer.")
@click.option("-t", "--topic", "topic", required=True)
@click.option(
    "-c",
    "--clusterName",
    "cluster",
    help="delete topic from which cluster (default: every cluster hosting it)",
)
def delete_topic(opts: Opts, topic: str, cluster: str | None) -> None:
    async def job(admin: MQAdmin) -> tuple[list[str], list[str], list[str]]:
        addrs, clusters = await admin.delete_topic(topic, cluster)
        return addrs, clusters, admin.namesrv_addrs

    addrs, clusters, namesrvs = run_admin(opts, job)
    text = "".join(f"delete topic [{topic}] from cluster [{c}] success.\n" for c in clusters)
    text += f"delete topic [{topic}] from NameServer success.\n"
    emit(opts, {"topic": topic, "clusters": clusters, "brokers": addrs, "namesrvs": namesrvs}, text)


@admin_command("topicList", "Fetch all topic list from name server.")
@click.option(
    "-c",
    "--clusterModel",
    "cluster_model",
    is_flag=True,
    help="with the cluster and consumer groups of each topic",
)
def topic_list(opts: Opts, cluster_model: bool) -> None:
    from pocketmq.client.admin.format import table
    from pocketmq.remoting.protocol.route import is_dlq_topic, is_retry_topic

    async def job(admin: MQAdmin) -> tuple[list[str], list[list[str]]]:
        topics = await admin.topic_list()
        rows: list[list[str]] = []
        if cluster_model:
            for topic in topics:
                if is_retry_topic(topic) or is_dlq_topic(topic):
                    continue
                try:
                    clusters = await admin.topic_clusters(topic)
                    groups = await admin.topic_groups(topic)
                except Exception:  # a topic deleted meanwhile: list it without details
                    clusters, groups = [], []
                for c in clusters or [""]:
                    rows += [[c, topic, g] for g in groups or [""]]
        return topics, rows

    topics, rows = run_admin(opts, job)
    doc: dict[str, Any] = {"topics": topics}
    if cluster_model:
        doc["rows"] = [{"cluster": c, "topic": t, "consumerGroup": g} for c, t, g in rows]
        emit(opts, doc, lambda: table(["#Cluster Name", "#Topic", "#Consumer Group"], rows))
    else:
        emit(opts, doc, "".join(f"{t}\n" for t in topics))


@admin_command("topicRoute", "Examine topic route info.")
@click.option("-t", "--topic", "topic", required=True)
@click.option("-l", "--list", "as_list", is_flag=True, help="a table instead of the route JSON")
def topic_route(opts: Opts, topic: str, as_list: bool) -> None:
    from pocketmq.client.admin.format import dumps_json, topic_route_table

    route = run_admin(opts, lambda a: a.topic_route(topic))
    doc = {"topic": topic, **route.to_json()}
    emit(opts, doc, lambda: topic_route_table(route) if as_list else dumps_json(route.to_json()))


@admin_command("topicStatus", "Examine topic Status info.")
@click.option("-t", "--topic", "topic", required=True)
@click.option("-c", "--cluster", "cluster", help="accepted for compatibility (the route names the brokers)")
def topic_status(opts: Opts, topic: str, cluster: str | None) -> None:
    from pocketmq.client.admin.format import topic_status_table

    status = run_admin(opts, lambda a: a.topic_status(topic))
    emit(opts, status.to_json(), lambda: topic_status_table(status))


@admin_command("topicClusterList", "Get cluster info for topic.")
@click.option("-t", "--topic", "topic", required=True)
def topic_cluster_list(opts: Opts, topic: str) -> None:
    clusters = run_admin(opts, lambda a: a.topic_clusters(topic))
    emit(opts, {"topic": topic, "clusters": clusters}, "".join(f"{c}\n" for c in clusters))


@admin_command("updateTopicPerm", "Update topic perm.")
@click.option("-t", "--topic", "topic", required=True)
@click.option("-b", "--brokerAddr", "broker_addr", help="update topic perm on this broker")
@click.option("-c", "--clusterName", "cluster", help="update topic perm on every master of this cluster")
@click.option("-p", "--perm", "perm", type=_PERM, required=True, help="2 W, 4 R, 6 RW")
def update_topic_perm(
    opts: Opts, topic: str, broker_addr: str | None, cluster: str | None, perm: int
) -> None:
    from pocketmq.client.admin.format import perm_text

    if not broker_addr and not cluster:
        raise click.UsageError("give a broker address (-b) or a cluster name (-c)")
    done = run_admin(
        opts, lambda a: a.update_topic_perm(topic, perm, broker_addr=broker_addr, cluster=cluster)
    )
    text = "".join(
        f"update topic perm from {perm_text(old)} to {perm_text(new)} in {addr} success.\n"
        for addr, old, new in done
    )
    brokers = [{"addr": a, "oldPerm": o, "newPerm": n} for a, o, n in done]
    emit(opts, {"topic": topic, "perm": perm, "brokers": brokers}, text)


@admin_command("updateOrderConf", "Create or update or delete order conf.")
@click.option("-t", "--topic", "topic", required=True)
@click.option("-m", "--method", "method", type=click.Choice(["put", "get", "delete"]), required=True)
@click.option("-v", "--orderConf", "order_conf", help="brokerA:num;brokerB:num (for put)")
def update_order_conf(opts: Opts, topic: str, method: str, order_conf: str | None) -> None:
    from pocketmq.remoting.protocol.route import NAMESPACE_ORDER_TOPIC_CONFIG as NS

    if method == "put" and not order_conf:
        raise click.UsageError("-v orderConf is required with -m put")

    async def job(admin: MQAdmin) -> str | None:
        if method == "put":
            assert order_conf is not None
            await admin.put_kv_config(NS, topic, order_conf)
            return order_conf
        if method == "get":
            return await admin.api.get_kv_config(NS, topic)
        await admin.delete_kv_config(NS, topic)
        return None

    conf = run_admin(opts, job)
    text = {
        "put": f"update orderConf success. topic=[{topic}], orderConf=[{conf}]\n",
        "get": f"get orderConf success. topic=[{topic}], orderConf=[{conf}]\n",
        "delete": f"delete orderConf success. topic=[{topic}]\n",
    }[method]
    emit(opts, {"topic": topic, "method": method, "orderConf": conf}, text)
