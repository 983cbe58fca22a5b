"""The broker's flow control: which requests are answered SYSTEM_BUSY (2) for waiting too long.

RocketMQ's ``BrokerFastFailure`` scans its processors' thread-pool queues every 10 ms and answers
a request that waited longer than its queue's key, so the client retries elsewhere
(``[TIMEOUT_CLEAN_QUEUE]``), and empties the send queue while the put lock has been held longer
than ``osPageCacheBusyTimeOutMills`` (``[PCBUSY_CLEAN_QUEUE]``). pocketmq has no thread pools:
a request waits in its connection's backlog between its read and its handling, and the one
event loop is the put lock. The table below maps each RocketMQ queue to the request codes its
thread pool served; :class:`~pocketmq.remoting.transport.limits.QueueWait` applies it.

=================================  =====================================================  =======
key (default)                      request codes                                          remark
=================================  =====================================================  =======
``waitTimeMillsInSendQueue``       SEND_MESSAGE, SEND_MESSAGE_V2, SEND_BATCH_MESSAGE,     both
(200)                              CONSUMER_SEND_MSG_BACK
``waitTimeMillsInPullQueue``       PULL_MESSAGE                                           timeout
(5000)
``waitTimeMillsInHeartbeatQueue``  HEART_BEAT                                             timeout
(31000)
``waitTimeMillsInTransactionQueue``  END_TRANSACTION                                      timeout
(3000)
=================================  =====================================================  =======

``brokerFastFailureEnable=false`` turns all of it off (requests wait as long as it takes). The keys
are live: UPDATE_BROKER_CONFIG applies them to connections already open.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pocketmq.remoting.protocol.codes import RequestCode
from pocketmq.remoting.transport.limits import QueueWait

if TYPE_CHECKING:
    from pocketmq.broker.config import BrokerConfig

__all__ = ["SEND_CODES", "apply_config", "queue_wait_of"]

#: the codes RocketMQ's send thread pool serves (``waitTimeMillsInSendQueue``, page-cache busy)
SEND_CODES = frozenset(
    int(c)
    for c in (
        RequestCode.SEND_MESSAGE,
        RequestCode.SEND_MESSAGE_V2,
        RequestCode.SEND_BATCH_MESSAGE,
        RequestCode.CONSUMER_SEND_MSG_BACK,
    )
)


def queue_wait_of(cfg: BrokerConfig) -> QueueWait:
    """The broker's :class:`QueueWait` (one, shared by its servers)."""
    queue_wait = QueueWait({})
    apply_config(queue_wait, cfg)
    return queue_wait


def apply_config(queue_wait: QueueWait, cfg: BrokerConfig) -> None:
    """Set ``queue_wait`` from the keys (at start and on UPDATE_BROKER_CONFIG: the keys are live)."""
    if not cfg.broker_fast_failure_enable:
        queue_wait.update({}, held_limit=float("inf"), pc_codes=frozenset())
        return
    limits = dict.fromkeys(SEND_CODES, cfg.wait_time_mills_in_send_queue / 1000)
    limits[int(RequestCode.PULL_MESSAGE)] = cfg.wait_time_mills_in_pull_queue / 1000
    limits[int(RequestCode.HEART_BEAT)] = cfg.wait_time_mills_in_heartbeat_queue / 1000
    limits[int(RequestCode.END_TRANSACTION)] = cfg.wait_time_mills_in_transaction_queue / 1000
    held = cfg.store.os_page_cache_busy_time_out_mills / 1000
    queue_wait.update(limits, held_limit=held, pc_codes=SEND_CODES)
