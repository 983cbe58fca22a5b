from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from pocketmq.broker.controller import BrokerController
from tests.broker.helpers import Wire, running_broker


@pytest.fixture
async def broker(tmp_path) -> AsyncIterator[BrokerController]:
    async with running_broker(str(tmp_path / "store")) as b:
        yield b


@pytest.fixture
async def wire(broker: BrokerController) -> AsyncIterator[Wire]:
    w = Wire(broker.broker_addr)
    yield w
    await w.close()
