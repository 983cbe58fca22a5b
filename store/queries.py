"""Helpers of ``MessageStore`` that are not on a hot path: key queries, records by offset,
runtime info, topic deletion."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from pocketmq.remoting.protocol.message import MessageConst, MessageDecodeError, MessageExt, decode_message
from pocketmq.store.log.layout import SCHEDULE_TOPIC
from pocketmq.store.log.syscalls import disk_usage_ratio
from pocketmq.store.results import QueryMessageResult

if TYPE_CHECKING:
    from pocketmq.store.message_store import MessageStore


def query_message(
    store: MessageStore, topic: str, key: str, max_num: int, begin: int, end: int
) -> QueryMessageResult:
    """Messages of ``topic`` whose KEYS (or UNIQ_KEY) contain ``key``, stored within [begin, end] ms."""
    max_num = min(max_num, store.config.max_msgs_num_batch)
    found: list[bytes] = []
    seen: set[int] = set()
    # ask for more candidates than wanted: collisions and duplicates are filtered below
    for phy in store.index.query(topic, key, min(max_num * 4, 4096), begin, end):
        if phy in seen:
            continue
        seen.add(phy)
        raw = store.get_message_bytes_by_offset(phy)
        if raw is None:
            continue
        try:
            msg = decode_message(raw, read_body=False)
        except MessageDecodeError:
            continue
        keys = (msg.get_property(MessageConst.KEYS) or "").split(" ")
        if msg.topic != topic or (key not in keys and msg.uniq_key != key):
            continue  # hash collision or a stale entry
        if not begin <= msg.store_timestamp <= end:
            continue
        found.append(raw)
        if len(found) >= max_num:
            break
    return QueryMessageResult(found, store.index.last_update_timestamp, store.index.last_update_phy_offset)


def runtime_info(store: MessageStore) -> dict[str, str]:
    """RocketMQ runtime-info keys (``putTps``, ``commitLogDiskRatio``, ...), values as strings."""
    cl = store.commitlog
    info = store.stats.runtime_info(cl.put_times_total, cl.put_size_total)
    try:
        cl_ratio = disk_usage_ratio(store.config.commit_log_dir)
        cq_ratio = disk_usage_ratio(store.config.store_path_root_dir)
    except OSError:
        cl_ratio = cq_ratio = -1.0
    info.update(
        {
            "commitLogDiskRatio": f"{cl_ratio}",
            f"commitLogDiskRatio_{store.config.commit_log_dir}": f"{cl_ratio}",
            "consumeQueueDiskRatio": f"{cq_ratio}",
            "commitLogMinOffset": str(cl.min_offset),
            "commitLogMaxOffset": str(cl.max_offset),
            "dispatchBehindBytes": str(store.dispatch_behind_bytes),
            "remainHowManyDataToFlush": str(cl.mfq.dirty_bytes()),
            "remainTransientStoreBufferNumbs": "0",
            "earliestMessageTimeStamp": str(store.get_earliest_message_time()),
            "pageCacheLockTimeMills": "0",
        }
    )
    return info


def look_message_by_offset(store: MessageStore, phy_offset: int, size: int | None) -> MessageExt | None:
    raw = message_bytes_by_offset(store, phy_offset, size)
    if raw is None:
        return None
    try:
        return decode_message(raw)
    except MessageDecodeError:
        return None


def message_bytes_by_offset(store: MessageStore, phy_offset: int, size: int | None) -> bytes | None:
    if size is None:
        head = store.commitlog.get_message(phy_offset, 4)  # the record's TOTALSIZE
        if head is None:
            return None
        size = int.from_bytes(head, "big", signed=True)
        if size < 91:  # smaller than any record (empty body, 1-byte topic, no properties)
            return None
    return store.commitlog.get_message(phy_offset, size)


def delete_topics(store: MessageStore, topics: Iterable[str]) -> int:
    n = 0
    table = store.commitlog.topic_queue_table
    for topic in list(topics):
        if store.cq_table.delete_topic(topic):
            n += 1
        for key in [k for k in table if k[0] == topic]:
            del table[key]
    return n


def clean_unused_topics(store: MessageStore, retain: Iterable[str]) -> int:
    keep = set(retain) | {SCHEDULE_TOPIC, "RMQ_SYS_TRANS_OP_HALF_TOPIC"}
    return delete_topics(store, [t for t in store.cq_table.topics() if t not in keep])
