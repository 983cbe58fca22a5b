"""``Broker2Client``: requests the broker sends to clients over their own connections.

NOTIFY_CONSUMER_IDS_CHANGED (40) goes oneway to every channel of a consumer group whose
membership changed, so Java and C++ consumers rebalance at once (ali-ons ignores it and
rebalances on its 10 s timer). A failed write only logs: the client's periodic rebalance
catches up.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from pocketmq.remoting.protocol.codes import LanguageCode, RequestCode
from pocketmq.remoting.protocol.command import RemotingCommand

if TYPE_CHECKING:
    from pocketmq.broker.client_manager import ConsumerManager
    from pocketmq.broker.state import BrokerState
    from pocketmq.remoting.transport.connection import RemotingConnection

logger = logging.getLogger(__name__)


class OnewaySender(Protocol):
    """Writes a request without waiting for a reply (the broker's ``RemotingServer``)."""

    def invoke_oneway(self, conn: RemotingConnection, request: RemotingCommand) -> None: ...


@dataclass(eq=False, kw_only=True)
class Broker2Client:
    consumers: ConsumerManager
    server: OnewaySender
    state: BrokerState

    def notify_consumer_ids_changed(self, group: str) -> int:
        """Tell every consumer of ``group`` to rebalance; returns how many were told."""
        if not self.state.config.notify_consumer_ids_changed_enable:
            return 0
        cgi = self.consumers.get_consumer_group_info(group)
        if cgi is None:
            return 0
        sent = 0
        for conn in cgi.all_channels():
            if not getattr(conn, "is_active", False):
                continue
            request = RemotingCommand.request(
                RequestCode.NOTIFY_CONSUMER_IDS_CHANGED, {"consumerGroup": group}, language=LanguageCode.JAVA
            )
            try:
                self.server.invoke_oneway(conn, request)
                sent += 1
            except Exception as exc:
                logger.info("notify consumer ids changed to %s failed: %s", conn.remote_addr, exc)
        return sent
