"""Subscriptions on the client side: a checked, time-stamped protocol ``SubscriptionData`` and the
exact-tag re-filter of pulled messages.

The subscription body itself (tags, their Java ``String.hashCode`` codes, the JSON) is the
protocol's :class:`~pocketmq.remoting.protocol.heartbeat.SubscriptionData`, built by its ``build``
classmethod (Java ``FilterAPI.buildSubscriptionData``). The client adds two things:

* it rejects expressions that name no tag (or an empty SQL92 one, or one that does not compile)
  with :class:`MessageValidationError` before building (:func:`check_expression`);
* ``sub_version`` is the creation time in ms, as Java's ``SubscriptionData`` constructor sets it:
  brokers reject pulls whose version is newer than the heartbeat they hold
  (SUBSCRIPTION_NOT_LATEST).

Brokers filter ConsumeQueue units by tag hash code, and hashes collide, so the client re-filters
pulled messages by exact tag (:func:`filter_by_tags`, Java ``PullAPIWrapper.processPullResult``:
only when the subscription has tags). SQL92 subscriptions are evaluated by the broker alone.

:class:`MessageSelector` is Java's ``MessageSelector``: ``MessageSelector.by_sql("a > 5")`` or
``MessageSelector.by_tag("TagA || TagB")``, accepted wherever a consumer takes an expression.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from pocketmq.client.errors import MessageValidationError
from pocketmq.remoting.protocol.filter import SqlFilterError, compile_sql
from pocketmq.remoting.protocol.heartbeat import SUB_ALL, ExpressionType, SubscriptionData
from pocketmq.remoting.protocol.message import MessageExt

__all__ = [
    "SUB_ALL",
    "MessageSelector",
    "SubscriptionData",
    "check_expression",
    "filter_by_tags",
    "new_subscription",
]

_TAG = ExpressionType.TAG.value
_SQL92 = ExpressionType.SQL92.value


@dataclass(frozen=True, slots=True)
class MessageSelector:
    """What a consumer subscribes with: a tag expression or an SQL92 one (Java ``MessageSelector``)."""

    expression_type: str
    expression: str

    @classmethod
    def by_sql(cls, sql: str) -> MessageSelector:
        """An SQL92 property filter (``"region IN ('eu', 'us') AND a > 50"``), evaluated by the
        broker (which needs ``enablePropertyFilter=true``). Raises MessageValidationError when it
        does not compile (with the position and the reason)."""
        check_expression(sql, _SQL92)
        return cls(_SQL92, sql.strip())

    @classmethod
    def by_tag(cls, tag: str | None) -> MessageSelector:
        """A tag expression (``"TagA || TagB"``; ``None``, empty or ``"*"``: every tag)."""
        check_expression(tag, _TAG)
        return cls(_TAG, (tag or "").strip() or SUB_ALL)


def selector_parts(expression: str | MessageSelector | None, expression_type: str = _TAG) -> tuple[str, str]:
    """``(expression, type)`` of a plain expression or a :class:`MessageSelector`."""
    if isinstance(expression, MessageSelector):
        return expression.expression, expression.expression_type
    return (expression or ""), expression_type


def check_expression(expression: str | None, expression_type: str = _TAG) -> None:
    """Raise :class:`MessageValidationError` for an unknown expression type, an SQL92 subscription
    without an expression or that does not compile, or a tag expression with no tag (``"||"``)."""
    if expression_type not in (_TAG, _SQL92):
        raise MessageValidationError(f"unknown expression type {expression_type!r}")
    expr = (expression or "").strip()
    if expression_type == _SQL92:
        if not expr:
            raise MessageValidationError("an SQL92 subscription needs an expression")
        try:
            compile_sql(expr)
        except SqlFilterError as exc:
            raise MessageValidationError(f"invalid SQL92 expression {expr!r:.200}: {exc}") from None
    elif expr and expr != SUB_ALL and not any(t.strip() for t in expr.split("||")):
        raise MessageValidationError(f"subscription expression {expression!r} names no tag")


def new_subscription(
    topic: str, expression: str | MessageSelector | None, expression_type: str = _TAG
) -> SubscriptionData:
    """A subscription to ``topic`` (tag expression ``"TagA || TagB"``/``"*"``, SQL92 verbatim, or
    a :class:`MessageSelector`), versioned with the current time.

    Raises:
        MessageValidationError: see :func:`check_expression`.
    """
    expression, expression_type = selector_parts(expression, expression_type)
    check_expression(expression, expression_type)
    return SubscriptionData.build(
        topic,
        (expression or "").strip(),
        sub_version=time.time_ns() // 1_000_000,
        expression_type=expression_type,
    )


def filter_by_tags(sub: SubscriptionData, msgs: list[MessageExt]) -> list[MessageExt]:
    """Keep the messages whose tag the subscription names exactly (hash collisions pass the
    broker's filter); every message when the subscription has no tags (``*``, SQL92)."""
    tags = sub.tags_set
    if not tags or sub.class_filter_mode:
        return msgs
    return [m for m in msgs if m.tags in tags]
