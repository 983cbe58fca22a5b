from __future__ import annotations

import pytest

from pocketmq.client import LitePullConsumer, Producer, PushConsumer
from pocketmq.client.errors import ClientClosedError, ClientStateError
from pocketmq.client.lifecycle import CREATED, RUNNING, SHUTDOWN, TRANSITIONS, Lifecycle

from .fakes import as_any


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


async def test_producer_running_instance_reads_as_the_property() -> None:
    """``Producer.running_instance`` (the transaction path's) gives what ``instance`` gives and
    raises what it raises, before start and after shutdown."""
    producer = Producer("G1")
    with pytest.raises(ClientClosedError, match=r"^producer G1 is not running \(CREATED\)$"):
        producer.running_instance()
    inst = as_any(object())
    producer._sender.instance = inst
    assert producer.running_instance() is producer.instance is inst
    producer.detach()
    with pytest.raises(ClientClosedError, match=r"^producer G1 is not running \(SHUTDOWN\)$"):
        producer.running_instance()
    with pytest.raises(ClientClosedError, match=r"^producer G1 is not running \(SHUTDOWN\)$"):
        producer.instance  # noqa: B018
