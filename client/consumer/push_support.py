"""Less frequent duties of :class:`PushConsumer`, kept out of the pull/consume module:
ConsumerRunningInfo, CONSUME_MESSAGE_DIRECTLY, offset resets and sending failed messages back.

Send-back: CONSUMER_SEND_MSG_BACK asks the broker to re-store the message in ``%RETRY%group``
(or the DLQ); when that request fails, the message is re-sent to ``%RETRY%group`` by the
instance's inner producer with RECONSUME_TIME / MAX_RECONSUME_TIMES properties (Java's
fallback). Returns False only when both fail; the caller then retries locally.
"""

from __future__ import annotations

import inspect
import logging
import time
from typing import TYPE_CHECKING, Any

from pocketmq.client.consumer.listener import (
    ConsumeConcurrentlyContext,
    ConsumeConcurrentlyStatus,
    ConsumeOrderlyContext,
    ConsumeOrderlyStatus,
)
from pocketmq.client.consumer.rebalance import strategy_name
from pocketmq.client.message import Message, MessageQueue
from pocketmq.remoting.protocol.message import MessageConst, MessageExt

if TYPE_CHECKING:
    from pocketmq.client.consumer.push import PushConsumer

logger = logging.getLogger(__name__)


async def reset_offset(consumer: PushConsumer, topic: str, table: dict[MessageQueue, int]) -> None:
    """RESET_CONSUMER_CLIENT_OFFSET (Java ``MQClientInstance.resetOffset``).

    Each broker pushes only its own queues, one push after another, so a push touches only
    the queues it names: dropping the topic's other queues would also drop the ones the
    previous push already re-created, and a dropped queue left in the table is never
    pulled again. The work runs under the rebalance lock (Java: ``synchronized``) so no
    rebalance re-creates a queue from a pre-reset offset half-way through. The reset
    offsets win: the old process queues are dropped first (pull replies and consume
    results for them are discarded), the new offsets are written to the broker (waiting for
    the reply), then the queues leave the table and the rebalance re-creates them from the
    stored offsets.
    """
    rb = consumer.rebalance
    async with rb.table_lock:
        mine = [mq for mq in rb.process_queue_table if mq.topic == topic and mq in table]
        for mq in mine:
            pq = rb.process_queue_table[mq]
            pq.dropped = True
            pq.clear()
        store = consumer.offset_store
        for mq in mine:
            store.update_offset(mq, table[mq])
        try:
            await store.persist_all(mine, prune=False)
        except Exception as exc:
            logger.warning("%s: persisting reset offsets of %s: %s", consumer.group, topic, exc)
        for mq in mine:
            rb.process_queue_table.pop(mq, None)
        logger.info("%s: offsets of %d queue(s) of %s reset", consumer.group, len(mine), topic)
    inst = consumer._instance
    if inst is not None:
        inst.wakeup_rebalance()


def running_info(consumer: PushConsumer) -> dict[str, Any]:
    cfg = consumer.config
    rb = consumer._rebalance
    mq_table = {mq: pq.info() for mq, pq in (rb.process_queue_table.items() if rb else [])}
    return {
        "jstack": "",
        "mqTable": mq_table,
        "properties": {
            "PROP_CLIENT_VERSION": "V4_9_8",
            "PROP_CONSUMEORDERLY": str(consumer._orderly).lower(),
            "PROP_CONSUMER_START_TIMESTAMP": str(consumer._start_time),
            "PROP_CONSUME_TYPE": "CONSUME_PASSIVELY",
            "PROP_THREADPOOL_CORE_SIZE": str(cfg.consume_thread_max),
            "consumerGroup": consumer.group,
            "messageModel": cfg.message_model.value,
            "consumeFromWhere": cfg.consume_from_where.value,
            "allocateMessageQueueStrategy": strategy_name(consumer.allocate_strategy),
            "pullBatchSize": str(cfg.pull_batch_size),
            "consumeMessageBatchMaxSize": str(cfg.consume_message_batch_max_size),
            "maxReconsumeTimes": str(cfg.max_reconsume_times),
        },
        "statusTable": {topic: consumer.stats.snapshot() for topic in (rb.subscriptions if rb else {})},
        "subscriptionSet": [s.to_json() for s in consumer.subscriptions()],
    }


async def consume_message_directly(
    consumer: PushConsumer, msg: MessageExt, broker_name: str | None
) -> dict[str, Any]:
    assert consumer._listener is not None
    begin = time.monotonic()
    mq = MessageQueue(msg.topic, broker_name or "", msg.queue_id)
    try:
        if consumer._orderly:
            res: Any = consumer._listener([msg], ConsumeOrderlyContext(mq))  # type: ignore[arg-type]
        else:
            res = consumer._listener([msg], ConsumeConcurrentlyContext(mq))  # type: ignore[arg-type]
        if inspect.isawaitable(res):
            res = await res
        ok = res in (ConsumeConcurrentlyStatus.CONSUME_SUCCESS, ConsumeOrderlyStatus.SUCCESS)
        result, remark = ("CR_SUCCESS" if ok else "CR_LATER"), None
    except Exception as exc:
        result, remark = "CR_THROW_EXCEPTION", f"{type(exc).__name__}: {exc}"
    out: dict[str, Any] = {
        "autoCommit": True,
        "consumeResult": result,
        "order": consumer._orderly,
        "spentTimeMills": int((time.monotonic() - begin) * 1000),
    }
    if remark:
        out["remark"] = remark
    return out


async def send_message_back(
    consumer: PushConsumer, msg: MessageExt, delay_level: int, broker_name: str
) -> bool:
    """CONSUMER_SEND_MSG_BACK; on failure re-send to %RETRY%group ourselves (as Java)."""
    inst = consumer.instance
    max_times = consumer.config.effective_max_reconsume_times
    addr = inst.find_broker_addr_in_publish(broker_name) or f"{msg.store_host[0]}:{msg.store_host[1]}"
    try:
        await inst.api.consumer_send_message_back(
            addr, msg, consumer.group, delay_level, max_times, timeout=5.0
        )
        return True
    except Exception as exc:
        logger.warning(
            "%s: send back of %s failed (%s); re-sending to %s",
            consumer.group,
            msg.msg_id,
            exc,
            consumer.retry_topic,
        )
    try:
        props = dict(msg.properties)
        props.setdefault(MessageConst.RETRY_TOPIC, msg.topic)
        props[MessageConst.RECONSUME_TIME] = str(msg.reconsume_times + 1)
        # The broker's send path sends a %RETRY% message to the DLQ once its *new* reconsume
        # count reaches the max; send-back compares the *consumed* count. Max + 1 keeps the
        # number of deliveries the same on both paths (1 + max_reconsume_times).
        props[MessageConst.MAX_RECONSUME_TIMES] = str(max_times + 1)
        props.pop(MessageConst.DELAY, None)
        for key in (MessageConst.TAGS, MessageConst.KEYS):
            props.pop(key, None)
        props.setdefault(MessageConst.ORIGIN_MESSAGE_ID, msg.msg_id)
        retry = Message(
            consumer.retry_topic, msg.body, tags=msg.tags, keys=msg.keys, flag=msg.flag, properties=props
        )
        if delay_level > 0:
            retry.delay_level = delay_level
        elif delay_level == 0:
            retry.delay_level = 3 + msg.reconsume_times
        else:  # straight to the DLQ: the broker reroutes once reconsume times reach the max
            props[MessageConst.RECONSUME_TIME] = str(max_times + 1)
        producer = await inst.inner_producer()
        await producer.send(retry)
        return True
    except Exception as exc:
        logger.warning(
            "%s: re-sending %s to %s failed: %s", consumer.group, msg.msg_id, consumer.retry_topic, exc
        )
        return False
