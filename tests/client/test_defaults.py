"""The consumer and producer defaults that client/README.md's "Defaults and their trade-offs"
table documents: RocketMQ 4.9's, except the lite-pull pull batch (measured, see the table)."""

from __future__ import annotations

from pocketmq.client import LitePullConsumerConfig, ProducerConfig, PushConsumerConfig


def test_push_consumer_defaults_are_rocketmq_s() -> None:
    c = PushConsumerConfig()
    assert c.consume_message_batch_max_size == 1  # consumeMessageBatchMaxSize
    assert c.pull_batch_size == 32  # pullBatchSize
    assert c.pull_threshold_for_queue == 1000  # pullThresholdForQueue
    assert c.pull_threshold_size_for_queue == 100  # pullThresholdSizeForQueue, MiB
    assert c.consume_thread_max == 20  # consumeThreadMin / consumeThreadMax
    assert c.consume_concurrently_max_span == 2000  # consumeConcurrentlyMaxSpan


def test_lite_pull_defaults() -> None:
    c = LitePullConsumerConfig()
    assert c.pull_batch_size == 32  # RocketMQ's DefaultLitePullConsumer: 10 (documented difference)
    assert c.pull_threshold_for_all == 10_000 and c.pull_threshold_for_queue == 1000


def test_producer_async_window_default_is_the_java_semaphore() -> None:
    assert ProducerConfig().max_in_flight == 65_535  # clientAsyncSemaphoreValue
