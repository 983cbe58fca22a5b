"""The lifecycle every producer and consumer follows: one state enum, its allowed transitions as
data, and the checks that raise :class:`ClientStateError` / :class:`ClientClosedError`.

========  ==========================  ==============================================
from      allowed to                  refused with
========  ==========================  ==============================================
CREATED   RUNNING (start), SHUTDOWN   -
RUNNING   SHUTDOWN                    start: ClientStateError "cannot start in state"
SHUTDOWN  SHUTDOWN (shutdown again)   start: ClientStateError; a client is not restarted
========  ==========================  ==============================================

Using a client that is not RUNNING raises ``ClientClosedError("<kind> <name> is not running
(<STATE>)")``. Hot paths compare ``lifecycle.state is RUNNING`` (module names, not
``ClientState.RUNNING``: an enum member lookup costs ~80 ns on CPython 3.11).
"""

from __future__ import annotations

import enum
from abc import ABC, abstractmethod
from collections.abc import Mapping
from typing import Self

from pocketmq.client.errors import ClientClosedError, ClientStateError

__all__ = ["CREATED", "RUNNING", "SHUTDOWN", "TRANSITIONS", "AsyncClient", "ClientState", "Lifecycle"]


class ClientState(enum.Enum):
    CREATED = 0
    RUNNING = 1
    SHUTDOWN = 2


CREATED = ClientState.CREATED
RUNNING = ClientState.RUNNING
SHUTDOWN = ClientState.SHUTDOWN

#: state → the states it may move to
TRANSITIONS: Mapping[ClientState, frozenset[ClientState]] = {
    CREATED: frozenset({RUNNING, SHUTDOWN}),
    RUNNING: frozenset({SHUTDOWN}),
    SHUTDOWN: frozenset({SHUTDOWN}),
}
_VERBS = {CREATED: "be reset", RUNNING: "start", SHUTDOWN: "shut down"}


class Lifecycle:
    """The state of one client (``kind`` "producer"/"consumer", ``name`` its group)."""

    __slots__ = ("kind", "name", "state")

    def __init__(self, kind: str, name: str) -> None:
        self.kind = kind
        self.name = name
        self.state = CREATED

    def check(self, to: ClientState) -> None:
        """Raise ClientStateError unless the client may move to ``to`` now."""
        if to not in TRANSITIONS[self.state]:
            raise ClientStateError(f"{self.kind} {self.name} cannot {_VERBS[to]} in state {self.state.name}")

    def move(self, to: ClientState) -> ClientState:
        """Move to ``to`` (:meth:`check` first); returns the previous state."""
        self.check(to)
        prev, self.state = self.state, to
        return prev

    def closed_error(self) -> ClientClosedError:
        return ClientClosedError(f"{self.kind} {self.name} is not running ({self.state.name})")

    def check_running(self) -> None:
        """Raise ClientClosedError unless RUNNING."""
        if self.state is not RUNNING:
            raise self.closed_error()


class AsyncClient(ABC):
    """A producer or consumer: ``async with client:`` runs :meth:`start`, then :meth:`shutdown`."""

    @abstractmethod
    async def start(self) -> None: ...

    @abstractmethod
    async def shutdown(self) -> None: ...

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.shutdown()
