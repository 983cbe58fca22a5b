"""Pull-side message filters (pure): tag-hash matching over ConsumeQueue units.

``ExpressionMessageFilter.isMatchedByConsumeQueue``: a unit matches when
there is no subscription, the subscription is class-filter mode or ``*``, or its tagsCode is in
the subscription's code set. Code sets are always recomputed server-side from the tags
(:meth:`SubscriptionData.build`, the protocol's one builder): C++ sends garbage codes. Hash collisions are possible; clients
re-filter by exact tag string.

SQL92 is not evaluated: a SQL92 subscription is rejected unless ``enablePropertyFilter``, and
then every unit matches at the queue level (the commit-log check accepts everything too).
"""

from __future__ import annotations

from pocketmq.remoting.protocol.bodies import ExpressionType, SubscriptionData

__all__ = ["TagMessageFilter"]


class TagMessageFilter:
    """Implements the store's ``MessageFilter`` protocol for TAG subscriptions."""

    __slots__ = ("codes", "subscription")

    def __init__(self, subscription: SubscriptionData | None) -> None:
        self.subscription = subscription
        if subscription is None or subscription.class_filter_mode or subscription.is_all:
            self.codes: frozenset[int] | None = None
        elif subscription.expression_type != ExpressionType.TAG.value:
            self.codes = None
        else:
            self.codes = frozenset(subscription.code_set)

    @property
    def accepts_all(self) -> bool:
        return self.codes is None

    def is_matched_by_consume_queue(self, tags_code: int) -> bool:
        codes = self.codes
        if codes is None:
            return True
        # The ConsumeQueue stores the int32 hash sign-extended to int64; codes are int32.
        return tags_code in codes

    def is_matched_by_commit_log(self, buf: bytes) -> bool:
        return True
