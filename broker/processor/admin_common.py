"""Helpers shared by the admin processors (``admin_*.py``): replies, slave guard, stats lookup."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from pocketmq.broker.stats import BrokerStatsManager
from pocketmq.remoting.protocol.bodies import MessageQueue
from pocketmq.remoting.protocol.codes import LanguageCode, ResponseCode
from pocketmq.remoting.protocol.command import RemotingCommand

if TYPE_CHECKING:
    from pocketmq.broker.controller import BrokerController

logger = logging.getLogger("pocketmq.broker.processor.admin")

#: Java ``AdminBrokerProcessor.validateSlave`` remark.
SLAVE_REMARK = (
    "Can't modify topic or subscription group from slave broker, please execute it from master broker."
)
#: Attribute under which the stats manager hangs off the controller.
STATS_ATTR = "broker_stats_manager"


def ok(
    request: RemotingCommand, body: bytes | None = None, ext: dict[str, str] | None = None
) -> RemotingCommand:
    return RemotingCommand.response_to(request, ResponseCode.SUCCESS, None, ext, body)


def fail(request: RemotingCommand, code: int, remark: str) -> RemotingCommand:
    return RemotingCommand.response_to(request, code, remark)


def language_name(code: int) -> str:
    """``LanguageCode`` name for a connection's language byte (``OTHER`` when unknown)."""
    try:
        return LanguageCode(code).name
    except ValueError:
        return LanguageCode.OTHER.name


class AdminBase:
    """One group of admin handlers; ``register`` puts them on the controller's servers."""

    #: request code → method name
    HANDLERS: dict[int, str] = {}

    def __init__(self, controller: BrokerController) -> None:
        self.c = controller

    def register(self) -> None:
        for code, name in self.HANDLERS.items():
            self.c.register_processor(code, getattr(self, name))

    @property
    def broker_name(self) -> str:
        return self.c.config.broker_name

    def mq(self, topic: str, queue_id: int) -> MessageQueue:
        return MessageQueue(topic, self.broker_name, queue_id)

    def refuse_on_slave(self, request: RemotingCommand) -> RemotingCommand | None:
        """SYSTEM_ERROR with Java's remark when this broker is a slave (topic/group mutations)."""
        if self.c.config.is_slave:
            return fail(request, ResponseCode.SYSTEM_ERROR, SLAVE_REMARK)
        return None

    @property
    def stats(self) -> BrokerStatsManager:
        return broker_stats_of(self.c)

    async def register_now(self) -> None:
        """Register with every name server before replying (Java does it synchronously).

        A failure only logs: the change is already stored and the periodic registration
        (every ``registerNameServerPeriod``) carries it to the name servers later.
        """
        try:
            await self.c.register_broker_all()
        except Exception:
            logger.warning("registering with the name servers after an admin change failed", exc_info=True)

    async def persist(self, *managers: Any) -> None:
        """Write the given config managers now (atomic temp+fsync+rename) before replying."""
        for mgr in managers:
            await mgr.persist_async()


def broker_stats_of(controller: BrokerController) -> BrokerStatsManager:
    """The controller's :class:`BrokerStatsManager` (``broker_stats_manager``); made if it has none.

    Its midnight counters read the store's put/transfer totals, as Java's ``BrokerStats`` does.
    """
    stats = getattr(controller, STATS_ATTR, None)
    if isinstance(stats, BrokerStatsManager):
        return stats
    store = controller.store
    stats = BrokerStatsManager(
        controller.config.broker_cluster_name,
        controller.clock.now_ms,
        put_total=lambda: store.put_times_total,
        get_total=lambda: store.transferred_msg_count,
    )
    setattr(controller, STATS_ATTR, stats)
    return stats
