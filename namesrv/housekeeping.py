"""Broker liveness: the periodic expiry scan and the closed-connection hook.

Two ways a broker leaves the route tables without unregistering:

1. **Expiry.** :class:`BrokerLivenessService` runs every ``scanNotActiveBrokerInterval`` ms
   (RocketMQ 4.x: 10 s, first run after 5 s) and drops every broker whose last REGISTER_BROKER or
   unchanged QUERY_DATA_VERSION is older than ``brokerChannelExpiredTime`` (120 s); the broker's
   connection is closed, as Java does.
2. **Closed connection.** :class:`ChannelCloseHook` is registered as a transport ``on_close``
   callback; when a connection that carried a registration closes, that broker is removed at once.
   Only connections marked with :data:`BROKER_ADDR_ATTR` (set by the REGISTER_BROKER handler) are
   looked at, so the many short client connections cost nothing when they close.

Both log one ``key=value`` line per removed broker and call ``on_change`` (the processor's route
cache invalidation) when something was removed.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from pocketmq.namesrv.route_info import RemovedBroker, RouteInfoManager
from pocketmq.remoting.common.service import Service
from pocketmq.remoting.transport.connection import RemotingConnection

logger = logging.getLogger(__name__)

__all__ = ["BROKER_ADDR_ATTR", "BrokerLivenessService", "ChannelCloseHook", "FIRST_SCAN_DELAY"]

#: ``RemotingConnection.attrs`` key: the broker address registered over that connection.
BROKER_ADDR_ATTR = "namesrv.broker_addr"
#: RocketMQ's first scan runs 5 s after start-up (shorter when the interval is shorter).
FIRST_SCAN_DELAY = 5.0


def _close_channel(channel: object | None) -> None:
    close = getattr(channel, "close", None)
    if callable(close):
        close()


class BrokerLivenessService(Service):
    """Every ``scan_not_active_broker_interval`` ms: expire silent brokers and close their channels.

    Args:
        route_info: the tables; their config supplies the interval and the expiry time, so an
            UPDATE_NAMESRV_CONFIG takes effect once :meth:`refresh_interval` is called.
        on_change: called after a scan that removed something.
    """

    def __init__(self, route_info: RouteInfoManager, on_change: Callable[[], None]) -> None:
        interval = route_info.config.scan_not_active_broker_interval / 1000
        super().__init__(
            interval=interval, initial_delay=min(FIRST_SCAN_DELAY, interval), name="namesrv-liveness"
        )
        self.route_info = route_info
        self.on_change = on_change

    def refresh_interval(self) -> None:
        """Pick up a changed ``scanNotActiveBrokerInterval`` (from the next wait on)."""
        self.interval = self.route_info.config.scan_not_active_broker_interval / 1000

    async def run_once(self) -> None:
        self.scan()

    def scan(self, now_ms: int | None = None) -> list[RemovedBroker]:
        """One scan (also callable directly); returns what was removed."""
        removed = self.route_info.scan_not_active_brokers(now_ms)
        if not removed:
            return removed
        limit = self.route_info.broker_channel_expired_ms
        for item in removed:
            logger.warning(
                "broker expired addr=%s broker=%s id=%s silent_over_ms=%d name_removed=%s",
                item.broker_addr,
                item.broker_name,
                item.broker_id,
                limit,
                item.broker_name_removed,
            )
            _close_channel(item.channel)
        self.on_change()
        return removed


class ChannelCloseHook:
    """``on_close`` callback: a closed broker connection removes that broker at once."""

    def __init__(self, route_info: RouteInfoManager, on_change: Callable[[], None]) -> None:
        self.route_info = route_info
        self.on_change = on_change

    def __call__(self, conn: RemotingConnection) -> None:
        if BROKER_ADDR_ATTR not in conn.attrs:
            return
        removed = self.route_info.on_channel_destroy(conn.remote_addr, conn)
        if removed is None:
            return
        logger.info(
            "broker connection closed addr=%s broker=%s id=%s name_removed=%s remote=%s",
            removed.broker_addr,
            removed.broker_name,
            removed.broker_id,
            removed.broker_name_removed,
            conn.remote_addr,
        )
        self.on_change()
