"""mqadmin on transactional state: topicStatus of the half topic, the check service's progress
(consumerProgress of CID_RMQ_SYS_TRANS: the half-queue lag is the pending backlog), brokerStatus."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from pocketmq.client import Message, Producer, TransactionState
from pocketmq.testing import cluster

if str(Path(__file__).resolve().parents[2]) not in sys.path:
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from tests.client.admin.cli_helpers import arun_cli  # noqa: E402
from tests.integration.support import loop_clean_at_exit  # noqa: E402, F401 - autouse fixture
from tests.waiting import wait_until  # noqa: E402

pytestmark = pytest.mark.integration


async def test_half_topic_backlog_in_mqadmin(tmp_path: Path) -> None:
    async with cluster(tmp_path / "c") as c:  # default check settings: nothing is checked here
        await c.create_topic("TxAdm", queues=2)
        ns = ["-n", c.namesrv_addr]

        async def unknown(msg: Message, result: Any) -> TransactionState:
            return TransactionState.UNKNOW

        async def commit(msg: Message, result: Any) -> TransactionState:
            return TransactionState.COMMIT_MESSAGE

        async with Producer("TxAdmPG", namesrv=c.namesrv_addr) as producer:
            for i in range(5):
                await producer.send_in_transaction(
                    Message("TxAdm", b"x", keys=str(i)), unknown if i < 3 else commit
                )
        broker = c.brokers[0]
        await wait_until(lambda: broker.transactional_message_service.counters.committed == 2)

        async def half_route() -> bool:
            r = await arun_cli("topicRoute", *ns, "-t", "RMQ_SYS_TRANS_HALF_TOPIC", "--json")
            return r.code == 0

        await wait_until(half_route)
        status = (await arun_cli("topicStatus", *ns, "-t", "RMQ_SYS_TRANS_HALF_TOPIC", "--json")).json()
        [queue] = status["queues"]
        assert queue["queueId"] == 0 and queue["minOffset"] == 0 and queue["maxOffset"] == 5
        # the check service has not run yet (60 s interval): its progress is 0, the lag the 5 halves
        table = await arun_cli("consumerProgress", *ns, "-g", "CID_RMQ_SYS_TRANS")
        rows = {
            line.split()[0]: line.split() for line in table.out.splitlines() if line.startswith("RMQ_SYS")
        }
        assert rows["RMQ_SYS_TRANS_HALF_TOPIC"][3:6] == ["5", "0", "5"], table.out  # broker, consumer, diff
        assert rows["RMQ_SYS_TRANS_OP_HALF_TOPIC"][3:6] == ["2", "0", "2"], table.out
        # brokerStatus carries the transaction counters
        r = await arun_cli("brokerStatus", *ns, "-b", broker.broker_addr)
        assert "transactionCommitCount" in r.out and "transactionPreparedCount" in r.out, r.out
