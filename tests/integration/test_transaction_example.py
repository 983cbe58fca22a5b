"""examples/transactions.py (the blocking facade's transactions) runs against a real cluster."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

import pytest

from pocketmq.testing import cluster
from tests.integration.support import loop_clean_at_exit  # noqa: F401 - autouse fixture

pytestmark = pytest.mark.integration
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "transactions.py"


async def test_transaction_example_runs(tmp_path: Path) -> None:
    fast = {"transactionCheckInterval": 200, "transactionTimeOut": 1000}
    async with cluster(tmp_path / "c", broker_config=fast) as c:
        await c.create_topic("OrderTopic", queues=2)
        env = {**os.environ, "NAMESRV_ADDR": c.namesrv_addr, "HOME": str(tmp_path)}
        proc = await asyncio.create_subprocess_exec(
            sys.executable, str(EXAMPLE), "--wait", "60", env=env,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        out, err = await asyncio.wait_for(proc.communicate(), 100)
        text = out.decode()
        assert proc.returncode == 0, f"{text}\n{err.decode()[-3000:]}"
        assert "order A: half message" in text and "-> COMMIT_MESSAGE" in text
        assert "order B: half message" in text and "-> ROLLBACK_MESSAGE" in text
        assert "order C: half message" in text and "-> UNKNOW" in text
        assert "broker checked order C: paid" in text
        assert "consumed order A" in text and "consumed order C" in text and "consumed order B" not in text
