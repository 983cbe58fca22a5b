"""``ConsumerOffsetManager``: committed consumer offsets, ``"<topic>@<group>" → {queueId: offset}``.

Persisted as ``config/consumerOffset.json`` in the fastjson shape of a Java broker::

    {"offsetTable":{"TopicA@GroupA":{0:123,1:45}}}     (pretty-printed with tabs)

Inner keys are written bare (``{0:123}``), as fastjson writes ``Map<Integer,Long>``; the reader
accepts bare and quoted keys. The periodic flush (every ``flushConsumerOffsetInterval``) and
the shutdown flush are driven by the controller; a flush is skipped when nothing changed.
"""

from __future__ import annotations

from collections.abc import Iterator

from pocketmq.broker.config_file import ConfigFileManager
from pocketmq.remoting.protocol.bodies import ConsumerOffsetTable

TOPIC_GROUP_SEPARATOR = "@"


def offset_key(topic: str, group: str) -> str:
    return f"{topic}{TOPIC_GROUP_SEPARATOR}{group}"


class ConsumerOffsetManager(ConfigFileManager):
    file_name = "consumerOffset.json"

    def __init__(self, config_dir: str | None, *, fsync: bool = True) -> None:
        super().__init__(config_dir, fsync=fsync)
        self.offset_table: dict[str, dict[int, int]] = {}

    # -- updates ---------------------------------------------------------------------------------
    def commit_offset(self, group: str, topic: str, queue_id: int, offset: int) -> None:
        """Store a committed offset; a negative one is ignored.

        ali-ons commits ``-1`` every 5 s for queues it has no offset for yet (``offsetTable.get(key)
        || -1``): that must neither overwrite a real offset nor be stored as one (a stored -1
        would read as "no offset" anyway).
        """
        if offset < 0:
            return
        key = offset_key(topic, group)
        table = self.offset_table.get(key)
        if table is None:
            table = self.offset_table[key] = {}
        if table.get(queue_id) != offset:
            table[queue_id] = offset
            self.dirty = True

    def remove_group(self, group: str) -> int:
        """Forget every offset of ``group``; returns how many topics it had."""
        suffix = TOPIC_GROUP_SEPARATOR + group
        keys = [k for k in self.offset_table if k.endswith(suffix) and k[: -len(suffix)]]
        for k in keys:
            del self.offset_table[k]
        if keys:
            self.dirty = True
        return len(keys)

    def remove_topic(self, topic: str) -> int:
        prefix = topic + TOPIC_GROUP_SEPARATOR
        keys = [k for k in self.offset_table if k.startswith(prefix)]
        for k in keys:
            del self.offset_table[k]
        if keys:
            self.dirty = True
        return len(keys)

    def remove_offset(self, group: str, topic: str) -> None:
        if self.offset_table.pop(offset_key(topic, group), None) is not None:
            self.dirty = True

    def clone_offset(self, src_group: str, dest_group: str, topic: str) -> None:
        table = self.offset_table.get(offset_key(topic, src_group))
        if table is not None:
            self.offset_table[offset_key(topic, dest_group)] = dict(table)
            self.dirty = True

    # -- queries ---------------------------------------------------------------------------------
    def query_offset(self, group: str, topic: str, queue_id: int) -> int:
        """The committed offset, or -1 when the group never committed one for that queue.

        A negative value in a file written by a Java broker (which stores ali-ons' -1) also reads
        as -1: "no offset".
        """
        table = self.offset_table.get(offset_key(topic, group))
        if table is None:
            return -1
        offset = table.get(queue_id, -1)
        return offset if offset >= 0 else -1

    def query_offsets(self, group: str, topic: str) -> dict[int, int]:
        return dict(self.offset_table.get(offset_key(topic, group), {}))

    def _topic_groups(self) -> Iterator[tuple[str, str]]:
        """``(topic, group)`` of every ``topic@group`` key of the table."""
        for key in self.offset_table:
            topic, sep, group = key.rpartition(TOPIC_GROUP_SEPARATOR)
            if sep:
                yield topic, group

    def topics_of_group(self, group: str) -> set[str]:
        return {t for t, g in self._topic_groups() if g == group}

    def groups_of_topic(self, topic: str) -> set[str]:
        return {g for t, g in self._topic_groups() if t == topic}

    # -- persistence -----------------------------------------------------------------------------
    def encode(self) -> bytes:
        return ConsumerOffsetTable(self.offset_table).encode()

    def encode_plain(self) -> bytes:
        """Compact form (GET_ALL_CONSUMER_OFFSET body for slaves)."""
        return ConsumerOffsetTable(self.offset_table).encode(pretty=False)

    def decode(self, data: bytes) -> None:
        self.offset_table = ConsumerOffsetTable.decode(data).offset_table

    def replace_all(self, data: bytes) -> None:
        """Adopt a master's table (slave sync); raises ``BodyFormatError`` on a bad body."""
        self.offset_table = ConsumerOffsetTable.decode(data).offset_table
        self.dirty = True
