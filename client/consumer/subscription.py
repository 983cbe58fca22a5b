"""Subscriptions: tag expressions → ``SubscriptionData`` (pure; Java ``FilterAPI``).

``"*"`` or an empty expression subscribes to every tag; otherwise tags are separated by
``||`` and trimmed. ``code_set`` holds Java ``String.hashCode`` of each tag: brokers filter
ConsumeQueue units by it, and because hashes collide the client re-filters by exact tag.
``sub_version`` is the creation time in ms; brokers reject pulls whose version is newer than
the heartbeat they hold (SUBSCRIPTION_NOT_LATEST).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from pocketmq.client.errors import MessageValidationError
from pocketmq.remoting.protocol.message import MessageExt, tags_hash

SUB_ALL = "*"
EXPRESSION_TAG = "TAG"
EXPRESSION_SQL92 = "SQL92"


@dataclass(slots=True)
class SubscriptionData:
    topic: str
    sub_string: str = SUB_ALL
    tags_set: set[str] = field(default_factory=set)
    code_set: set[int] = field(default_factory=set)
    sub_version: int = field(default_factory=lambda: time.time_ns() // 1_000_000)
    expression_type: str = EXPRESSION_TAG
    class_filter_mode: bool = False

    @property
    def matches_all(self) -> bool:
        return self.expression_type == EXPRESSION_TAG and (not self.tags_set or self.sub_string == SUB_ALL)

    def to_json(self) -> dict[str, Any]:
        return {
            "classFilterMode": self.class_filter_mode,
            "codeSet": sorted(self.code_set),
            "expressionType": self.expression_type,
            "subString": self.sub_string,
            "subVersion": self.sub_version,
            "tagsSet": sorted(self.tags_set),
            "topic": self.topic,
        }

    def filter(self, msgs: list[MessageExt]) -> list[MessageExt]:
        """Client-side exact-tag re-filter (hash collisions pass the broker's filter)."""
        if self.matches_all or self.expression_type != EXPRESSION_TAG:
            return msgs
        tags = self.tags_set
        return [m for m in msgs if m.tags in tags]


def build_subscription(
    topic: str, expression: str | None, expression_type: str = EXPRESSION_TAG
) -> SubscriptionData:
    """Parse a tag expression ("TagA || TagB", "*") or keep an SQL92 one verbatim.

    Raises:
        MessageValidationError: an unknown expression type, or an expression with no tag.
    """
    if expression_type not in (EXPRESSION_TAG, EXPRESSION_SQL92):
        raise MessageValidationError(f"unknown expression type {expression_type!r}")
    expr = (expression or "").strip()
    if expression_type == EXPRESSION_SQL92:
        if not expr:
            raise MessageValidationError("an SQL92 subscription needs an expression")
        return SubscriptionData(topic, expr, expression_type=EXPRESSION_SQL92)
    if not expr or expr == SUB_ALL:
        return SubscriptionData(topic, SUB_ALL)
    tags = {t.strip() for t in expr.split("||") if t.strip()}
    if not tags:
        raise MessageValidationError(f"subscription expression {expression!r} names no tag")
    return SubscriptionData(topic, expr, tags, {tags_hash(t) for t in tags})
