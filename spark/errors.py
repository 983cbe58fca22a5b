"""Exceptions of the Spark connector.

Every error the connector raises on purpose derives from :class:`RocketMQSourceError`, so a
failed query's message always names what went wrong (the option, the queue, the offsets).
"""

from __future__ import annotations


class RocketMQSourceError(Exception):
    """Root of the errors raised by the RocketMQ Spark source."""


class InvalidOptionError(RocketMQSourceError, ValueError):
    """An unknown option, or an option whose value does not parse or conflicts with another."""

    def __init__(self, option: str, detail: str) -> None:
        self.option = option
        super().__init__(f"rocketmq source option {option!r}: {detail}")


class UnknownTopicError(InvalidOptionError):
    """A topic named by the ``topic`` option is not known to the name servers."""


class DataLossError(RocketMQSourceError):
    """Offsets the query must read are gone (retention, a removed queue, a reset queue).

    Raised only when ``failOnDataLoss`` is true; otherwise the same event is logged and the
    reader skips to the earliest offset still available.
    """


class MetadataError(RocketMQSourceError):
    """The name server or a broker could not answer a route or offset request."""


class ReadError(RocketMQSourceError):
    """A partition's pull loop failed (broker unreachable, inconsistent offsets, timeout)."""
