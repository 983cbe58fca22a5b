"""The console's Dashboard page: message volume per broker and per topic, per day and per minute.

rocketmq-dashboard's Dashboard page reads files a background job writes every minute (broker put
TPS, topic put counts). The console does the same in memory: :class:`VolumeCollector` samples the
cluster every ``interval`` seconds (``pocketmq console --collect-interval``, default 60 as the
dashboard's cron) and keeps the last ``keep`` samples of each series (a day of minutes):

* per broker: put / get TPS (GET_BROKER_RUNTIME_INFO's ``putTps`` / ``getTransferedTps``);
* per topic: messages put since the previous sample (the growth of the sum of its queues' max
  offsets, which is exact and needs no broker-side window to fill).

The per-day figures need no history: each broker reports today's and yesterday's put / get totals
(``msgPutTotalTodayNow`` minus ``msgPutTotalTodayMorning`` ...), and VIEW_BROKER_STATS_DATA gives
each topic's puts over the last 24 hours (``statsDay``), as ``mqadmin statsAll`` prints them.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from pocketmq.client.admin import MQAdmin, MQAdminError
from pocketmq.client.errors import MQClientError
from pocketmq.remoting.protocol.errors import RemotingError, ResponseError
from pocketmq.remoting.protocol.topics import is_dlq_topic, is_retry_topic, is_system_topic

__all__ = ["VolumeCollector", "normal_topics"]

logger = logging.getLogger(__name__)

#: what a failed sample may raise: it is logged and the next one tries again
_FAILURES = (ResponseError, MQAdminError, MQClientError, RemotingError, OSError)


async def normal_topics(admin: MQAdmin) -> list[str]:
    """The user topics (no retry, DLQ, system, cluster- or broker-named topics), sorted."""
    info = await admin.cluster_info()
    skip = set(info.cluster_addr_table) | set(info.broker_addr_table)
    return sorted(
        t
        for t in await admin.topic_list()
        if t not in skip
        and not (is_retry_topic(t) or is_dlq_topic(t) or is_system_topic(t) or t.endswith("_REPLY_TOPIC"))
    )


@dataclass(eq=False, kw_only=True)
class VolumeCollector:
    """Rolling per-broker TPS and per-topic put counts, sampled by :meth:`run`."""

    admin: MQAdmin
    #: seconds between samples
    interval: float = 60.0
    #: samples kept per series (1440: a day at one a minute)
    keep: int = 1440
    #: broker name -> [(epoch ms, put TPS, get TPS)]
    brokers: dict[str, deque[tuple[int, float, float]]] = field(default_factory=dict)
    #: topic -> [(epoch ms, messages put since the previous sample)]
    topics: dict[str, deque[tuple[int, int]]] = field(default_factory=dict)
    #: topic -> sum of its queues' max offsets at the last sample
    _last_total: dict[str, int] = field(default_factory=dict)
    #: set after each sample (tests and the page wait on it, never on time)
    sampled: asyncio.Event = field(default_factory=asyncio.Event)

    async def run(self) -> None:
        """Sample now, then every ``interval`` seconds, until cancelled."""
        while True:
            try:
                await self.sample()
            except _FAILURES as exc:
                logger.warning("dashboard sample failed: %s", exc)
            await asyncio.sleep(self.interval)

    async def sample(self) -> None:
        """One sample of every broker's TPS and every user topic's put count."""
        now = self.admin.now_ms()
        for b in await self.admin.cluster_list():
            if b.broker_id == 0:
                series = self.brokers.setdefault(b.broker_name, deque(maxlen=self.keep))
                series.append((now, b.in_tps, b.out_tps))
        topics = await normal_topics(self.admin)
        statuses = await asyncio.gather(*(self.admin.topic_status(t) for t in topics), return_exceptions=True)
        for topic, status in zip(topics, statuses, strict=True):
            if isinstance(status, BaseException):
                if not isinstance(status, _FAILURES):
                    raise status
                continue  # deleted between the listing and now
            total = sum(max(0, q.max_offset) for q in status.queues)
            previous = self._last_total.get(topic)
            self._last_total[topic] = total
            if previous is None:
                continue  # the first sample only sets the baseline
            self.topics.setdefault(topic, deque(maxlen=self.keep)).append((now, max(0, total - previous)))
        self.sampled.set()

    def history(self) -> dict[str, Any]:
        return {
            "interval": self.interval,
            "brokers": {name: [list(p) for p in s] for name, s in self.brokers.items()},
            "topics": {name: [list(p) for p in s] for name, s in self.topics.items()},
        }


def _sum_day(stats: dict[str, Any] | None) -> int:
    return int((stats or {}).get("statsDay", {}).get("sum", 0) or 0)


async def dashboard(admin: MQAdmin, collector: VolumeCollector | None) -> dict[str, Any]:
    """``GET /api/dashboard``: today's and yesterday's totals per broker, each topic's stored
    messages and 24-hour puts, and the collected per-minute history."""
    brokers = [
        {
            "broker": b.broker_name,
            "addr": b.addr,
            "putToday": b.in_total_today,
            "getToday": b.out_total_today,
            "putYesterday": b.in_total_yest,
            "getYesterday": b.out_total_yest,
        }
        for b in await admin.cluster_list()
        if b.broker_id == 0
    ]

    async def one(topic: str) -> dict[str, Any] | None:
        route = await admin.topic_route_or_none(topic)
        if route is None:
            return None
        masters = [addr for _, addr in admin.route_masters(route)]
        days = await asyncio.gather(*(admin.broker_stats(a, "TOPIC_PUT_NUMS", topic) for a in masters))
        try:
            status = await admin.topic_status(topic)
        except _FAILURES:
            return None  # deleted meanwhile
        stored = sum(max(0, q.max_offset - max(0, q.min_offset)) for q in status.queues)
        return {"topic": topic, "put24h": sum(_sum_day(d) for d in days), "stored": stored}

    rows = await asyncio.gather(*(one(t) for t in await normal_topics(admin)))
    topics = [r for r in rows if r is not None]
    history = collector.history() if collector is not None else {"interval": 0, "brokers": {}, "topics": {}}
    return {"brokers": brokers, "topics": topics, "history": history}
