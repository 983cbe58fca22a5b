"""``TopicConfigManager``: the broker's topic table (``config/topics.json``), pure and lock-free.

Rules (RocketMQ ``TopicConfigManager``):

* built-in topics are put in the table at construction: ``SELF_TEST_TOPIC``,
  ``TBW102`` (when ``autoCreateTopicEnable``; perm 7), ``BenchmarkTest``, the cluster-name and
  broker-name topics (perm INHERIT, +RW when enabled), ``OFFSET_MOVED_EVENT``,
  ``SCHEDULE_TOPIC_XXXX`` (18 queues), ``<cluster>_REPLY_TOPIC`` and the trace topic if enabled;
  the file then overrides them;
* every change bumps the ``DataVersion`` and marks the table dirty; ``on_change`` is called
  after changes that name servers must learn about (the controller re-registers at once);
* auto-create on send: the template (``defaultTopic``, normally TBW102) must exist and carry
  PERM_INHERIT; the new topic gets ``min(clientDefaultTopicQueueNums, template.writeQueueNums)``
  queues and the template's perm minus INHERIT.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from pocketmq.broker.config_file import VersionedConfigFile
from pocketmq.remoting.protocol.route import (
    AUTO_CREATE_TOPIC_KEY_TOPIC,
    RMQ_SYS_BENCHMARK_TOPIC,
    RMQ_SYS_OFFSET_MOVED_EVENT,
    RMQ_SYS_SCHEDULE_TOPIC,
    RMQ_SYS_SELF_TEST_TOPIC,
    PermName,
    TopicConfig,
    TopicConfigSerializeWrapper,
    is_system_topic,
    reply_topic,
    topic_error,
)

logger = logging.getLogger(__name__)

SCHEDULE_QUEUE_NUMS = 18


class TopicConfigManager(VersionedConfigFile[TopicConfig, TopicConfigSerializeWrapper]):
    file_name = "topics.json"

    def __init__(
        self,
        config_dir: str | None,
        *,
        broker_name: str,
        cluster_name: str,
        now_ms: Callable[[], int],
        auto_create_topic_enable: bool = True,
        default_topic_queue_nums: int = 8,
        cluster_topic_enable: bool = True,
        broker_topic_enable: bool = True,
        trace_topic_enable: bool = False,
        trace_topic_name: str = "RMQ_SYS_TRACE_TOPIC",
        fsync: bool = True,
    ) -> None:
        #: the table (the base's ``table``)
        self.topic_config_table: dict[str, TopicConfig] = {}
        super().__init__(config_dir, self.topic_config_table, now_ms=now_ms, fsync=fsync)
        self.auto_create_topic_enable = auto_create_topic_enable
        #: Called after a change name servers must learn about (new or updated topic).
        self.on_change: Callable[[], None] | None = None
        self.system_topics: set[str] = set()

        def builtin(name: str, queues: int, perm: int = PermName.DEFAULT) -> None:
            self.topic_config_table[name] = TopicConfig(name, queues, queues, perm)
            self.system_topics.add(name)

        builtin(RMQ_SYS_SELF_TEST_TOPIC, 1)
        if auto_create_topic_enable:
            builtin(
                AUTO_CREATE_TOPIC_KEY_TOPIC,
                default_topic_queue_nums,
                PermName.DEFAULT | PermName.PERM_INHERIT,
            )
        builtin(RMQ_SYS_BENCHMARK_TOPIC, 1024)
        cluster_perm = PermName.PERM_INHERIT | (PermName.DEFAULT if cluster_topic_enable else 0)
        builtin(cluster_name, 16, cluster_perm)
        broker_perm = PermName.PERM_INHERIT | (PermName.DEFAULT if broker_topic_enable else 0)
        builtin(broker_name, 1, broker_perm)
        builtin(RMQ_SYS_OFFSET_MOVED_EVENT, 1)
        builtin(RMQ_SYS_SCHEDULE_TOPIC, SCHEDULE_QUEUE_NUMS)
        if trace_topic_enable:
            builtin(trace_topic_name, 1)
        builtin(reply_topic(cluster_name), 1)

    # -- lookups ---------------------------------------------------------------------------------
    def select_topic_config(self, topic: str) -> TopicConfig | None:
        return self.topic_config_table.get(topic)

    def is_order_topic(self, topic: str) -> bool:
        tc = self.topic_config_table.get(topic)
        return tc is not None and tc.order

    def is_system_topic(self, topic: str) -> bool:
        return topic in self.system_topics or is_system_topic(topic)

    # -- changes ---------------------------------------------------------------------------------
    def _changed(self, notify: bool) -> None:
        self.bump_version()
        if notify and self.on_change is not None:
            self.on_change()

    def create_topic_in_send_message_method(
        self, topic: str, default_topic: str | None, client_default_queue_nums: int, topic_sys_flag: int = 0
    ) -> TopicConfig | None:
        """Auto-create ``topic`` from the template ``default_topic``; None when not allowed."""
        existing = self.topic_config_table.get(topic)
        if existing is not None:
            return existing
        template = self.topic_config_table.get(default_topic) if default_topic else None
        if template is None:
            logger.warning("create topic %s: template topic %s does not exist", topic, default_topic)
            return None
        perm = template.perm
        if default_topic == AUTO_CREATE_TOPIC_KEY_TOPIC and not self.auto_create_topic_enable:
            perm = PermName.DEFAULT
        if not PermName.is_inherited(perm):
            logger.warning(
                "create topic %s: template %s has no inherit permission (%d)", topic, default_topic, perm
            )
            return None
        nums = max(0, min(client_default_queue_nums, template.write_queue_nums))
        tc = TopicConfig(
            topic,
            nums,
            nums,
            perm & ~PermName.PERM_INHERIT,
            template.topic_filter_type,
            topic_sys_flag,
        )
        self.topic_config_table[topic] = tc
        logger.info("auto-created topic %s from %s: %d queues, perm %d", topic, default_topic, nums, tc.perm)
        self._changed(True)
        self.persist_soon()
        return tc

    def create_topic_in_send_message_back_method(
        self, topic: str, queue_nums: int, perm: int, topic_sys_flag: int = 0
    ) -> TopicConfig:
        """Create (if absent) a retry or DLQ topic."""
        existing = self.topic_config_table.get(topic)
        if existing is not None:
            return existing
        tc = TopicConfig(topic, queue_nums, queue_nums, perm, topic_sys_flag=topic_sys_flag)
        self.topic_config_table[topic] = tc
        logger.info("created topic %s: %d queues, perm %d", topic, queue_nums, perm)
        self._changed(True)
        self.persist_soon()
        return tc

    def update_topic_config(self, tc: TopicConfig) -> None:
        """Create or replace (UPDATE_AND_CREATE_TOPIC)."""
        old = self.topic_config_table.get(tc.topic_name)
        self.topic_config_table[tc.topic_name] = tc
        if old != tc:
            logger.info("topic %s %s: %s", tc.topic_name, "updated" if old else "created", tc)
        self._changed(True)

    def update_order_topic_config(self, order_topics: set[str]) -> None:
        """Set ``order`` on exactly the topics of ``order_topics`` (namesrv's ORDER_TOPIC_CONFIG)."""
        changed = False
        for name, tc in list(self.topic_config_table.items()):
            want = name in order_topics
            if tc.order != want:
                self.topic_config_table[name] = TopicConfig(
                    tc.topic_name, tc.read_queue_nums, tc.write_queue_nums, tc.perm,
                    tc.topic_filter_type, tc.topic_sys_flag, want,
                )  # fmt: skip
                changed = True
        if changed:
            self._changed(False)

    def delete_topic_config(self, topic: str) -> TopicConfig | None:
        tc = self.pop(topic)
        if tc is not None:
            logger.info("deleted topic %s", topic)
        return tc

    def restore_missing(self, queue_counts: dict[str, int]) -> list[str]:
        """Give a config to every stored topic that has none (its messages would be orphaned).

        ``queue_counts`` maps the store's topics to their queue counts; a missing topic gets that
        many read and write queues, perm RW, one warning each. Returns the restored names.
        """
        restored = []
        for topic, nums in sorted(queue_counts.items()):
            if topic in self.topic_config_table or topic_error(topic) is not None:
                continue
            self.topic_config_table[topic] = TopicConfig(topic, nums, nums, PermName.DEFAULT)
            logger.warning(
                "topic %s has %d consume queues on disk but no config in %s: restored with %d queues, perm RW",
                topic, nums, self.file_name, nums,
            )  # fmt: skip
            restored.append(topic)
        if restored:
            self._changed(True)
        return restored

    # -- the wrapper (registration and persistence) ----------------------------------------------
    wrapper_type = TopicConfigSerializeWrapper
    table_key = "topicConfigTable"

    @staticmethod
    def unwrap(wrapper: TopicConfigSerializeWrapper) -> dict[str, TopicConfig]:
        return wrapper.topic_config_table
