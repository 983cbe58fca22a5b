"""Seams the store calls out through (implemented by the broker; the store imports no broker code)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

from pocketmq.store.results import PutMessageStatus


class MessageArrivingListener(Protocol):
    """Called by the reput dispatcher on the loop thread after a record reached its ConsumeQueue.

    ``logic_offset`` is the queue's new max offset (the record's queue offset + 1), as Java's
    ``notifyMessageArriving`` passes it. ``properties`` parses lazily. Must not block.
    A listener whose ``needs_properties`` attribute is false gets an empty mapping instead
    (saves an object per dispatched message).

    Optional: a listener with ``needs_properties`` false may also define
    ``arriving_batch(topic, queue_id, first_logic_offset, tags_codes, store_timestamp)``; the
    fast reput path then calls it once per batch put (records ``k`` of the batch: logic offset
    ``first_logic_offset + k``, tagsCode ``tags_codes[k]``, no bitmap) instead of ``arriving``
    per record (~0.2 µs per message when nothing is held). And one with a ``held_queues``
    attribute (a live, sized view of what it waits on; ``arriving`` does nothing while it is
    empty) is not called per record by that path while the view is empty.
    """

    def arriving(
        self,
        topic: str,
        queue_id: int,
        logic_offset: int,
        tags_code: int,
        store_timestamp: int,
        filter_bit_map: bytes | None,
        properties: Mapping[str, str],
    ) -> None: ...


class MessageFilter(Protocol):
    """Pull-side filter (tag hash / SQL92), evaluated by ``MessageStore.get_message``."""

    def is_matched_by_consume_queue(self, tags_code: int) -> bool: ...

    def is_matched_by_commit_log(self, buf: bytes) -> bool:
        """``buf`` is one complete stored record."""
        ...


class ReplicationWaiter(Protocol):
    """SYNC_MASTER seam (implemented by the HA service): wait until a slave acked ``end_offset``.

    Returns PUT_OK, FLUSH_SLAVE_TIMEOUT or SLAVE_NOT_AVAILABLE.
    """

    async def wait_replicated(self, end_offset: int) -> PutMessageStatus: ...
