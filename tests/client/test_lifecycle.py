from __future__ import annotations

import pytest

from pocketmq.client import LitePullConsumer, Producer, PushConsumer
from pocketmq.client.errors import ClientClosedError, ClientStateError
from pocketmq.client.lifecycle import CREATED, RUNNING, SHUTDOWN, TRANSITIONS, Lifecycle


def test_transitions_table() -> None:
    life = Lifecycle("producer", "PG")
    assert life.state is CREATED and RUNNING in TRANSITIONS[CREATED]
    with pytest.raises(ClientClosedError, match=r"^producer PG is not running \(CREATED\)$"):
        life.check_running()
    assert life.move(RUNNING) is CREATED
    life.check_running()
    with pytest.raises(ClientStateError, match=r"^producer PG cannot start in state RUNNING$"):
        life.move(RUNNING)
    assert life.move(SHUTDOWN) is RUNNING
    assert life.move(SHUTDOWN) is SHUTDOWN  # shutting down again is allowed
    with pytest.raises(ClientStateError, match=r"^producer PG cannot start in state SHUTDOWN$"):
        life.check(RUNNING)


async def test_clients_share_the_lifecycle_messages() -> None:
    for client, kind in (
        (Producer("G1"), "producer"),
        (PushConsumer("G2"), "consumer"),
        (LitePullConsumer("G3"), "consumer"),
    ):
        with pytest.raises(ClientClosedError, match=rf"^{kind} G\d is not running \(CREATED\)$"):
            client.instance  # noqa: B018
        await client.shutdown()
        with pytest.raises(ClientStateError, match=rf"^{kind} G\d cannot start in state SHUTDOWN$"):
            await client.start()
