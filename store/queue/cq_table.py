"""``ConsumeQueueTable``: every (topic, queueId) ConsumeQueue of a store, created on first write."""

from __future__ import annotations

import logging
import os
import shutil
from collections.abc import Iterator

from pocketmq.store.log.mapped_file_queue import Allocator
from pocketmq.store.queue.consume_queue import ConsumeQueue

logger = logging.getLogger(__name__)


class ConsumeQueueTable:
    def __init__(self, root: str, file_size: int, *, allocator: Allocator | None = None) -> None:
        self.root = root
        self.file_size = file_size
        self.allocator = allocator
        self.queues: dict[str, dict[int, ConsumeQueue]] = {}
        #: (topic, queue id) -> queue; read directly by the reput fast path
        self.flat: dict[tuple[str, int], ConsumeQueue] = {}

    def load(self) -> list[ConsumeQueue]:
        """Map every queue on disk; returns the queues with a missing file in the middle."""
        broken: list[ConsumeQueue] = []
        if not os.path.isdir(self.root):
            return broken
        for topic in sorted(os.listdir(self.root)):
            tdir = os.path.join(self.root, topic)
            if not os.path.isdir(tdir):
                continue
            for qname in sorted(os.listdir(tdir)):
                if not qname.isdigit():
                    continue
                cq = self.find_or_create(topic, int(qname))
                if not cq.load():
                    logger.error("consume queue %s/%s has a missing file; it will be rebuilt", topic, qname)
                    broken.append(cq)
        return broken

    def find(self, topic: str, queue_id: int) -> ConsumeQueue | None:
        return self.flat.get((topic, queue_id))

    def find_or_create(self, topic: str, queue_id: int) -> ConsumeQueue:
        cq = self.flat.get((topic, queue_id))
        if cq is None:
            cq = ConsumeQueue(topic, queue_id, self.root, self.file_size, allocator=self.allocator)
            self.flat[(topic, queue_id)] = cq
            self.queues.setdefault(topic, {})[queue_id] = cq
        return cq

    def __iter__(self) -> Iterator[ConsumeQueue]:
        return iter(list(self.flat.values()))

    def __len__(self) -> int:
        return len(self.flat)

    def topics(self) -> list[str]:
        return list(self.queues)

    def max_offsets(self) -> dict[tuple[str, int], int]:
        return {k: cq.max_offset for k, cq in self.flat.items() if cq.max_offset > 0}

    def reset_queue(self, cq: ConsumeQueue) -> ConsumeQueue:
        """Delete a queue's files and return a fresh, empty queue object in its place."""
        cq.destroy()
        del self.flat[(cq.topic, cq.queue_id)]
        del self.queues[cq.topic][cq.queue_id]
        return self.find_or_create(cq.topic, cq.queue_id)

    def delete_topic(self, topic: str) -> bool:
        queues = self.queues.pop(topic, None)
        if queues is None:
            return False
        for qid, cq in queues.items():
            cq.destroy()
            del self.flat[(topic, qid)]
        shutil.rmtree(os.path.join(self.root, topic), ignore_errors=True)
        return True

    def flush(self) -> None:
        for cq in self:
            cq.flush()

    def close(self) -> None:
        for cq in self:
            cq.close()
        self.queues.clear()
        self.flat.clear()
