"""The interop drivers work end-to-end (tooling self-test) against a real in-process cluster.

The servers are ``pocketmq.testing``'s (a name server and one broker, in this event loop, or on a
thread of their own for the drivers' blocking API); what the broker receives is recorded with
``Cluster.record_requests``. These tests prove that cpp_driver.py / js/driver.js / drivers.py
start the REAL clients, move messages, report them as JSON lines, honour --fail-first / --expr,
stop cleanly and never leave processes behind. The broker semantics themselves are tested by the
other interop tests. One test keeps the frame-capture fake (tests/interop/capture.py, used by
capture_golden.py) honest: it still records what a real client sends.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from pocketmq.remoting.protocol.codes import RequestCode, code_name
from pocketmq.remoting.protocol.command import RemotingCommand
from pocketmq.testing import cluster, cluster_in_thread
from tests.interop import drivers
from tests.interop.capture import FakeCluster
from tests.pids import pid_alive

pytestmark = pytest.mark.interop

CLIENTS: list[drivers.Client] = ["cpp", "js"]
#: Queues of every topic the tests use (created up front: orderly sends pick queue key % QUEUES).
QUEUES = 4
TOPICS = ("T", "TF", "TT", "TS", "TB", "TZ", "TY")


@dataclass
class Servers:
    """What a test needs of the cluster: the address clients start from, what the broker got."""

    addr: str
    requests: list[RemotingCommand]

    def codes(self) -> set[int]:
        return {r.code for r in self.requests}

    def names(self) -> list[str]:
        return [code_name(r.code, response=False) for r in self.requests]


@pytest.fixture
async def servers(tmp_path: Path) -> AsyncIterator[Servers]:
    async with cluster(tmp_path / "cluster") as c:
        for topic in TOPICS:
            await c.create_topic(topic, queues=QUEUES)
        yield Servers(c.namesrv_addr, c.record_requests())


def test_prerequisites_report_versions() -> None:
    assert drivers.cpp_available() == "0.4.4"
    assert drivers.node_available().startswith("v")


@pytest.mark.parametrize("producer", CLIENTS)
@pytest.mark.parametrize("consumer", CLIENTS)
async def test_roundtrip_every_pair(
    servers: Servers, producer: drivers.Client, consumer: drivers.Client, tmp_path: Any
) -> None:
    sent = (
        await drivers.produce_async(
            producer, servers.addr, "T", 3, tags="TagA", keys_prefix="key-", props={"color": "red"},
            log_dir=tmp_path / "p",
        )
    ).sent  # fmt: skip
    assert [s["status"] for s in sent] in (["OK"] * 3, ["SEND_OK"] * 3)
    handle = await drivers.start_consumer_async(
        consumer, servers.addr, "T", expect=3, timeout=30, from_where="first" if consumer == "js" else None,
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
    assert handle.proc is not None and not pid_alive(handle.proc.pid)


@pytest.mark.parametrize("client", CLIENTS)
async def test_fail_first_redelivers_through_send_back(servers: Servers, client: drivers.Client) -> None:
    await drivers.produce_async(client, servers.addr, "TF", 2, tags="TagA")
    handle = await drivers.start_consumer_async(
        client,
        servers.addr,
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
    assert RequestCode.CONSUMER_SEND_MSG_BACK in servers.codes()


@pytest.mark.parametrize("client", CLIENTS)
async def test_tag_expression_filters(servers: Servers, client: drivers.Client) -> None:
    await drivers.produce_async(client, servers.addr, "TT", 2, tags="TagA")
    await drivers.produce_async(client, servers.addr, "TT", 2, tags="TagC")
    await drivers.produce_async(client, servers.addr, "TT", 2, tags="TagB")
    handle = await drivers.start_consumer_async(
        client, servers.addr, "TT", expect=4, timeout=30, expr="TagA || TagB",
        from_where="first" if client == "js" else None, linger=1.0,
    )  # fmt: skip
    result = await handle.wait()
    assert result.ok, result.describe()
    assert sorted(m["tags"] for m in result.messages) == ["TagA", "TagA", "TagB", "TagB"]


@pytest.mark.parametrize("client", CLIENTS)
async def test_stop_is_clean_and_reports_signal(servers: Servers, client: drivers.Client) -> None:
    handle = await drivers.start_consumer_async(client, servers.addr, "TS", expect=1, timeout=120)
    await handle.wait_started(30)
    assert handle.proc is not None
    pid = handle.proc.pid
    result = await handle.stop(30)
    assert result.returncode == 1, result.describe()  # expectation not met
    assert result.summary is not None and result.summary["signal"] in (15, "SIGTERM"), result.describe()
    assert RequestCode.UNREGISTER_CLIENT in servers.codes(), servers.names()
    assert not pid_alive(pid)


@pytest.mark.parametrize("client", CLIENTS)
def test_sync_api_with_a_threaded_cluster(client: drivers.Client, tmp_path: Path) -> None:
    with cluster_in_thread(tmp_path / "cluster") as t:
        t.run(t.cluster.create_topic("TY", queues=QUEUES))
        sent = drivers.produce(client, t.namesrv_addr, "TY", 2, tags="TagA").sent
        assert len(sent) == 2
        with drivers.start_consumer(
            client, t.namesrv_addr, "TY", expect=2, timeout=30, from_where="first" if client == "js" else None
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


async def test_ali_ons_rejects_what_it_cannot_do(servers: Servers) -> None:
    for flag in ("batch", "oneway"):
        opts: dict[str, Any] = {flag: True}
        result = await drivers.produce_async("js", servers.addr, "TZ", 1, check=False, **opts)
        assert result.returncode == 2, result.describe()
    handle = await drivers.start_consumer_async("js", servers.addr, "TZ", expect=1, timeout=10, orderly=True)
    result = await handle.wait(30)
    assert result.returncode == 2
    assert "orderly" in str(result.summary)


async def test_cpp_batch_and_orderly(servers: Servers) -> None:
    batch = await drivers.produce_async("cpp", servers.addr, "TB", 3, tags="TagA", batch=True)
    assert batch.summary is not None and batch.summary["sent"] == 3
    orderly = (await drivers.produce_async("cpp", servers.addr, "TB", 2, tags="TagA", orderly_key="6")).sent
    assert {s["queue_id"] for s in orderly} == {6 % QUEUES}
    handle = await drivers.start_consumer_async("cpp", servers.addr, "TB", expect=5, timeout=30, orderly=True)
    result = await handle.wait()
    assert result.ok, result.describe()
    assert {RequestCode.LOCK_BATCH_MQ, RequestCode.UNLOCK_BATCH_MQ} <= servers.codes(), servers.names()


async def test_capture_fake_still_records_what_a_real_client_sends(tmp_path: Path) -> None:
    fake = FakeCluster(tmp_path / "frames")
    await fake.start()
    try:
        sent = (
            await drivers.produce_async("cpp", fake.addr, "T", 2, tags="TagA", log_dir=tmp_path / "p")
        ).sent
    finally:
        await fake.close()
    assert [s["status"] for s in sent] in (["OK"] * 2, ["SEND_OK"] * 2)
    codes = [f["code"] for f in fake.frames]
    assert RequestCode.GET_ROUTEINFO_BY_TOPIC in codes
    assert sum(code in (RequestCode.SEND_MESSAGE, RequestCode.SEND_MESSAGE_V2) for code in codes) == 2
    assert (tmp_path / "frames" / "index.jsonl").read_text().count("\n") == len(codes)
