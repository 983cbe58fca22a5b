"""The name server's Prometheus metrics, read from its route tables at scrape time.

Served on ``/metrics`` when ``metricsExporterType=PROM`` (keys in
``pocketmq.remoting.common.metrics_http``). Labels follow RocketMQ 5.x (``node_type`` =
``nameserver``, ``node_id`` = the server's address):

* ``rocketmq_namesrv_brokers`` {cluster, broker, role}: 1 per live broker address (``role`` is
  ``master`` for broker id 0, else ``slave``);
* ``rocketmq_namesrv_clusters``, ``rocketmq_namesrv_topics``: table sizes;
* ``rocketmq_namesrv_broker_last_update_seconds`` {broker_addr}: seconds since the broker's last
  REGISTER_BROKER or QUERY_DATA_VERSION (what the liveness scan compares with
  ``brokerChannelExpiredTime``);
* ``rocketmq_connections``: open remoting connections.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from prometheus_client.metrics_core import Metric

    from pocketmq.namesrv.route_info import RouteInfoManager

__all__ = ["NamesrvMetrics"]


@dataclass(eq=False, kw_only=True)
class NamesrvMetrics:
    """The name server's collector (``prometheus_client``'s custom-collector protocol)."""

    routes: RouteInfoManager
    #: the address this name server advertises
    addr: Callable[[], str]
    connections: Callable[[], int]
    #: the clock the liveness table is kept in (monotonic ms)
    monotonic_ms: Callable[[], int]

    def collect(self) -> Iterator[Metric]:
        from prometheus_client.core import GaugeMetricFamily

        node_labels = ["node_type", "node_id"]
        node = ["nameserver", self.addr()]
        routes = self.routes
        brokers = GaugeMetricFamily(
            "rocketmq_namesrv_brokers",
            "live broker addresses",
            labels=[*node_labels, "cluster", "broker", "role"],
        )
        cluster_of = {b: c for c, names in routes.cluster_addr_table.items() for b in names}
        for name, data in list(routes.broker_addr_table.items()):
            for broker_id in sorted(data.broker_addrs):
                role = "master" if broker_id == 0 else "slave"
                brokers.add_metric([*node, cluster_of.get(name, data.cluster), name, role], 1)
        yield brokers
        for metric, doc, value in (
            ("rocketmq_namesrv_clusters", "clusters", len(routes.cluster_addr_table)),
            ("rocketmq_namesrv_topics", "topics with routes", len(routes.topic_queue_table)),
            ("rocketmq_connections", "open remoting connections", self.connections()),
        ):
            family = GaugeMetricFamily(metric, doc, labels=node_labels)
            family.add_metric(node, value)
            yield family
        seen = GaugeMetricFamily(
            "rocketmq_namesrv_broker_last_update_seconds",
            "seconds since the broker's last registration or data-version query",
            labels=[*node_labels, "broker_addr"],
        )
        now = self.monotonic_ms()
        for addr, live in list(routes.broker_live_table.items()):
            seen.add_metric([*node, addr], max(0, now - live.last_update_ms) / 1000)
        yield seen
