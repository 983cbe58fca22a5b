"""The base of the admin handler groups (``admin_*.py``): registration, the slave guard
(:func:`master_only`), replies.

Each group is built with exactly the collaborators its handlers use (managers, the store, the
stats manager, the broker's live :class:`~pocketmq.broker.state.BrokerState`); topic and
subscription-group mutations write their files before replying (:meth:`AdminBase.persist`) and
may re-register with the name servers first (:func:`register_now`).
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, TypeVar

from pocketmq.broker.state import HandlerTable
from pocketmq.remoting.protocol.bodies import MessageQueue
from pocketmq.remoting.protocol.codes import LanguageCode, ResponseCode
from pocketmq.remoting.protocol.command import RemotingCommand

if TYPE_CHECKING:
    from pocketmq.broker.state import BrokerState
    from pocketmq.broker.stats import BrokerStatsManager
    from pocketmq.remoting.transport.connection import RemotingConnection

logger = logging.getLogger("pocketmq.broker.processor.admin")

#: Java ``AdminBrokerProcessor.validateSlave`` remark.
SLAVE_REMARK = (
    "Can't modify topic or subscription group from slave broker, please execute it from master broker."
)
#: Sends REGISTER_BROKER to every name server now (the controller's ``register_broker_all``).
RegisterBroker = Callable[[], Awaitable[None]]


class Persistable(Protocol):
    """A config manager whose file can be written now (atomic temp+fsync+rename)."""

    async def persist_async(self) -> None: ...


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


@dataclass(eq=False, kw_only=True)
class AdminBase(HandlerTable):
    """One group of admin handlers (its ``HANDLERS`` table); ``register`` puts them on the broker's servers."""

    #: the broker's live config (``broker_name``, the slave guard)
    state: BrokerState
    #: the broker's stats manager
    stats: BrokerStatsManager

    @property
    def broker_name(self) -> str:
        return self.state.config.broker_name

    def mq(self, topic: str, queue_id: int) -> MessageQueue:
        return MessageQueue(topic, self.broker_name, queue_id)

    @staticmethod
    async def persist(*managers: Persistable) -> None:
        """Write the given config managers now (atomic temp+fsync+rename) before replying."""
        for mgr in managers:
            await mgr.persist_async()


_A = TypeVar("_A", bound=AdminBase)


def master_only(
    handler: Callable[[_A, RemotingConnection, RemotingCommand], Awaitable[RemotingCommand]],
) -> Callable[[_A, RemotingConnection, RemotingCommand], Awaitable[RemotingCommand]]:
    """The slave guard of a topic/group mutation (Java ``validateSlave``): on a slave the handler
    does not run and the reply is SYSTEM_ERROR with :data:`SLAVE_REMARK`."""

    @functools.wraps(handler)
    async def guarded(self: _A, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        if self.state.config.is_slave:
            return fail(request, ResponseCode.SYSTEM_ERROR, SLAVE_REMARK)
        return await handler(self, conn, request)

    return guarded


async def register_now(register_broker: RegisterBroker) -> None:
    """Register with every name server before replying (Java does it synchronously).

    A failure only logs: the change is already stored and the periodic registration
    (every ``registerNameServerPeriod``) carries it to the name servers later.
    """
    try:
        await register_broker()
    except Exception:
        logger.warning("registering with the name servers after an admin change failed", exc_info=True)
