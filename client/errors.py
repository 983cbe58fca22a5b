"""Exceptions of the client SDK (docs/development.md).

``MQClientError`` is the root of everything the SDK raises itself. Broker and name server
replies other than SUCCESS surface as the remoting layer's :class:`ResponseError` subclasses
(``TopicNotExistError``, ``SystemBusyError`` ...), which carry the ``retriable`` and
``refresh_route`` flags the producer's retry loop reads; they are re-exported here so users
catch everything from one module. Transport failures are ``RemotingTimeoutError`` (a
``TimeoutError``) and ``RemotingConnectError`` (a ``ConnectionError``).
"""

from __future__ import annotations

from pocketmq.remoting.protocol.errors import (
    RemotingConnectError,
    RemotingError,
    RemotingTimeoutError,
    RemotingTooMuchRequestError,
    ResponseError,
    error_from_response,
    for_code,
)


class MQClientError(Exception):
    """Root of the errors the SDK raises on its own."""


class ClientClosedError(MQClientError, RuntimeError):
    """The producer/consumer is not started, or was shut down."""


class ClientStateError(MQClientError, RuntimeError):
    """An operation that the client's current state does not allow (e.g. start twice)."""


class MessageValidationError(MQClientError, ValueError):
    """A message or argument rejected before anything is sent (size, topic, tags...)."""


class TopicRouteNotFoundError(MQClientError):
    """The name servers know no route for the topic (and auto-creation did not apply)."""

    def __init__(self, topic: str, detail: str = "") -> None:
        self.topic = topic
        super().__init__(f"no route info of topic {topic!r}" + (f": {detail}" if detail else ""))


class BrokerNotFoundError(MQClientError):
    """No address is known for the broker name in the route table."""

    def __init__(self, broker_name: str) -> None:
        self.broker_name = broker_name
        super().__init__(f"the broker[{broker_name}] does not exist")


class SendFailedError(MQClientError):
    """Every attempt of a send failed; ``errors`` lists each attempt's exception in order."""

    def __init__(self, topic: str, errors: list[BaseException]) -> None:
        self.topic = topic
        self.errors = errors
        last = errors[-1] if errors else None
        super().__init__(f"send to topic {topic!r} failed after {len(errors)} attempt(s): {last}")


class ConsumeTimeoutError(MQClientError, TimeoutError):
    """A listener call ran longer than ``consume_timeout`` and was cancelled."""


__all__ = [
    "BrokerNotFoundError",
    "ClientClosedError",
    "ClientStateError",
    "ConsumeTimeoutError",
    "MQClientError",
    "MessageValidationError",
    "RemotingConnectError",
    "RemotingError",
    "RemotingTimeoutError",
    "RemotingTooMuchRequestError",
    "ResponseError",
    "SendFailedError",
    "TopicRouteNotFoundError",
    "error_from_response",
    "for_code",
]
