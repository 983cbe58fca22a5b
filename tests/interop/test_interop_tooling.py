"""The interop drivers work end-to-end against the capture fake (tooling self-test, not a server test).

The fake is a tiny in-memory namesrv+broker (tests/interop/capture.py); these tests only prove that
cpp_driver.py / js/driver.js / drivers.py start the REAL clients, move messages, report them as
JSON lines, honour --fail-first / --expr, stop cleanly and never leave processes behind.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from typing import Any

import pytest

from tests.interop import drivers
from tests.interop.capture import FakeCluster, fake_cluster_in_thread

pytestmark = pytest.mark.interop

CLIENTS: list[drivers.Client] = ["cpp", "js"]


@pytest.fixture
async def fake() -> AsyncIterator[FakeCluster]:
    cluster = FakeCluster(None)
    await cluster.start()
    yield cluster
    await cluster.close()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie still answers kill(0); check its state
    with open(f"/proc/{pid}/stat") as fh:
        return fh.read().split(")")[-1].split()[0] != "Z"


def test_prerequisites_report_versions() -> None:
    assert drivers.cpp_available() == "0.4.4"
    assert drivers.node_available().startswith("v")


@pytest.mark.parametrize("producer", CLIENTS)
@pytest.mark.parametrize("consumer", CLIENTS)
async def test_roundtrip_every_pair(
    fake: FakeCluster, producer: drivers.Client, consumer: drivers.Client, tmp_path: Any
) -> None:
    sent = (
        await drivers.produce_async(
            producer, fake.addr, "T", 3, tags="TagA", keys_prefix="key-", props={"color": "red"},
            log_dir=tmp_path / "p",
        )
    ).sent  # fmt: skip
    assert [s["status"] for s in sent] in (["OK"] * 3, ["SEND_OK"] * 3)
    handle = await drivers.start_consumer_async(
        consumer, fake.addr, "T", expect=3, timeout=30, from_where="first" if consumer == "js" else None,
        prop_keys=["color"] if consumer == "cpp" else (), log_dir=tmp_path / "c",
    )  # fmt: skip
    result = await handle.wait()
    assert result.ok, result.describe()
    bodies = sorted(m["body"] for m in result.messages)
    assert bodies == ["msg-0", "msg-1", "msg-2"]
    for m in result.messages:
        assert m["topic"] == "T"
        assert m["tags"] == "TagA"
        assert m["keys"] == f"key-{m['body'][-1]}"
        assert m["properties"]["color"] == "red"
        assert m["reconsume_times"] == 0
    assert handle.proc is not None and not _alive(handle.proc.pid)


@pytest.mark.parametrize("client", CLIENTS)
async def test_fail_first_redelivers_through_send_back(fake: FakeCluster, client: drivers.Client) -> None:
    await drivers.produce_async(client, fake.addr, "TF", 2, tags="TagA")
    handle = await drivers.start_consumer_async(
        client,
        fake.addr,
        "TF",
        expect=2,
        timeout=30,
        fail_first=1,
        from_where="first" if client == "js" else None,
    )
    result = await handle.wait()
    assert result.ok, result.describe()
    acked = [m for m in result.messages if m["acked"]]
    assert sorted(m["body"] for m in acked) == ["msg-0", "msg-1"]
    assert all(m["reconsume_times"] == 1 and m["delivery"] == 2 for m in acked)
    assert all(m["topic"] == "TF" for m in result.messages)  # clients restore the original topic
    assert any(f["code"] == 36 for f in fake.frames)  # CONSUMER_SEND_MSG_BACK


@pytest.mark.parametrize("client", CLIENTS)
async def test_tag_expression_filters(fake: FakeCluster, client: drivers.Client) -> None:
    await drivers.produce_async(client, fake.addr, "TT", 2, tags="TagA")
    await drivers.produce_async(client, fake.addr, "TT", 2, tags="TagC")
    await drivers.produce_async(client, fake.addr, "TT", 2, tags="TagB")
    handle = await drivers.start_consumer_async(
        client, fake.addr, "TT", expect=4, timeout=30, expr="TagA || TagB",
        from_where="first" if client == "js" else None, linger=1.0,
    )  # fmt: skip
    result = await handle.wait()
    assert result.ok, result.describe()
    assert sorted(m["tags"] for m in result.messages) == ["TagA", "TagA", "TagB", "TagB"]


@pytest.mark.parametrize("client", CLIENTS)
async def test_stop_is_clean_and_reports_signal(fake: FakeCluster, client: drivers.Client) -> None:
    handle = await drivers.start_consumer_async(client, fake.addr, "TS", expect=1, timeout=120)
    await handle.wait_started(30)
    assert handle.proc is not None
    pid = handle.proc.pid
    result = await handle.stop(30)
    assert result.returncode == 1, result.describe()  # expectation not met
    assert result.summary is not None and result.summary["signal"] in (15, "SIGTERM"), result.describe()
    assert any(f["code"] == 35 for f in fake.frames), [f["name"] for f in fake.frames]  # UNREGISTER_CLIENT
    assert not _alive(pid)


@pytest.mark.parametrize("client", CLIENTS)
def test_sync_api_with_threaded_fake(client: drivers.Client) -> None:
    with fake_cluster_in_thread() as fc:
        sent = drivers.produce(client, fc.addr, "TY", 2, tags="TagA").sent
        assert len(sent) == 2
        with drivers.start_consumer(
            client, fc.addr, "TY", expect=2, timeout=30, from_where="first" if client == "js" else None
        ) as handle:
            msgs = handle.wait_messages(2, timeout=30)
            assert sorted(m["body"] for m in msgs) == ["msg-0", "msg-1"]
        assert handle.proc.poll() is not None


@pytest.mark.parametrize("client", CLIENTS)
async def test_unreachable_namesrv_fails_fast(client: drivers.Client, tmp_path: Any) -> None:
    result = await drivers.produce_async(
        client, "127.0.0.1:1", "TX", 1, check=False, timeout=60, log_dir=tmp_path
    )
    assert result.returncode == 1
    assert result.of("send_error"), result.describe()
    with pytest.raises(drivers.DriverError, match="produce failed"):
        await drivers.produce_async(client, "127.0.0.1:1", "TX", 1, timeout=60, log_dir=tmp_path)


async def test_ali_ons_rejects_what_it_cannot_do(fake: FakeCluster) -> None:
    for flag in ("batch", "oneway"):
        opts: dict[str, Any] = {flag: True}
        result = await drivers.produce_async("js", fake.addr, "TZ", 1, check=False, **opts)
        assert result.returncode == 2, result.describe()
    handle = await drivers.start_consumer_async("js", fake.addr, "TZ", expect=1, timeout=10, orderly=True)
    result = await handle.wait(30)
    assert result.returncode == 2
    assert "orderly" in str(result.summary)


async def test_cpp_batch_and_orderly(fake: FakeCluster) -> None:
    batch = await drivers.produce_async("cpp", fake.addr, "TB", 3, tags="TagA", batch=True)
    assert batch.summary is not None and batch.summary["sent"] == 3
    orderly = (await drivers.produce_async("cpp", fake.addr, "TB", 2, tags="TagA", orderly_key="6")).sent
    assert {s["queue_id"] for s in orderly} == {6 % fake.queues}
    handle = await drivers.start_consumer_async("cpp", fake.addr, "TB", expect=5, timeout=30, orderly=True)
    result = await handle.wait()
    assert result.ok, result.describe()
    assert {41, 42} <= {f["code"] for f in fake.frames}  # LOCK_BATCH_MQ / UNLOCK_BATCH_MQ
