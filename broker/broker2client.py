"""``Broker2Client``: requests the broker sends to clients over their own connections.

NOTIFY_CONSUMER_IDS_CHANGED (40) goes oneway to every channel of a consumer group whose
membership changed, so Java and C++ consumers rebalance at once (ali-ons ignores it and
rebalances on its 10 s timer). A failed write only logs: the client's periodic rebalance
catches up.

CHECK_TRANSACTION_STATE (39) goes oneway to one live channel of a producer group (the
transaction check service's ``send_check``).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from pocketmq.remoting.protocol.codes import LanguageCode, RequestCode
from pocketmq.remoting.protocol.command import RemotingCommand

if TYPE_CHECKING:
    from pocketmq.broker.client_manager import ConsumerManager, ProducerManager
    from pocketmq.broker.state import BrokerState
    from pocketmq.remoting.protocol.headers import CheckTransactionStateRequestHeader
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
    #: producer channels (CHECK_TRANSACTION_STATE); None: no checks are sent
    producers: ProducerManager | None = None

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

    def check_transaction_state(
        self, group: str, header: CheckTransactionStateRequestHeader, body: bytes
    ) -> bool:
        """CHECK_TRANSACTION_STATE to a live producer of ``group``; False when none could be written."""
        info = self.producers.get_available_channel(group) if self.producers is not None else None
        if info is None:
            logger.warning("no live producer of group %s to check transaction %s", group, header.msg_id)
            return False
        request = RemotingCommand.request(
            RequestCode.CHECK_TRANSACTION_STATE,
            header.to_ext_fields(),
            body,
            language=LanguageCode.JAVA,
            oneway=True,
        )
        try:
            self.server.invoke_oneway(info.conn, request)
        except Exception as exc:
            logger.info("check transaction state to %s failed: %s", info.remote_addr or info.client_id, exc)
            return False
        return True
