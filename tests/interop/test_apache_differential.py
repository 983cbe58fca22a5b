"""Differential test: the same requests to pocketmq and to Apache RocketMQ 4.9.7 (the oracle).

Every difference must be listed, with its reason, in docs/differences-apache.md (the table's
first column is the case name); a difference not listed fails the test with both observations.
The module also runs pocketmq's SDK and mqadmin against Apache's broker.
"""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pocketmq.testing.procs import Servers
from tests.interop import differential as diff
from tests.interop.apache_servers import ApacheServers, apache_available, apache_servers

DOC = Path(__file__).resolve().parents[2] / "docs" / "differences-apache.md"


def listed_differences() -> set[str]:
    """Case names in the first column of the doc's differential table (rows like ``| `name` | ...``)."""
    return set(re.findall(r"^\| `([a-z0-9_]+)` \|", DOC.read_text(), flags=re.M))


@pytest.fixture(scope="module")
def apache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ApacheServers]:
    apache_available()
    with apache_servers(tmp_path_factory.mktemp("apache")) as a:
        a.create_topics([diff.TOPIC], 4)
        yield a


@pytest.fixture(scope="module")
def pocketmq(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Servers]:
    s = Servers(tmp_path_factory.mktemp("pocketmq"))
    s.precreate_topic(diff.TOPIC, 4)
    s.start()
    try:
        yield s
    finally:
        s.stop()


def test_same_requests_same_answers_or_a_listed_reason(apache: ApacheServers, pocketmq: Servers) -> None:
    theirs = diff.observe(apache.broker_addr, apache.namesrv_addr)
    ours = diff.observe(pocketmq.broker.addr, pocketmq.namesrv.addr)
    differences = diff.compare(ours, theirs)
    unexplained = {k: v for k, v in differences.items() if k not in listed_differences()}
    report = "\n".join(
        f"{name}:\n  pocketmq {json.dumps(o, sort_keys=True)}\n  apache   {json.dumps(t, sort_keys=True)}"
        for name, (o, t) in sorted(unexplained.items())
    )
    assert not unexplained, f"differences from Apache not listed in {DOC.name}:\n{report}"
    # the doc stays true the other way too: a listed case that no longer differs leaves the table
    stale = sorted((listed_differences() & set(ours)) - set(differences))
    assert not stale, f"{DOC.name} lists differences that are gone: {stale}"


def _mqadmin(namesrv: str, *args: str) -> Any:
    argv = [str(Path(sys.executable).parent / "mqadmin"), *args, "-n", namesrv, "--json"]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, f"{' '.join(args)}: {proc.stdout[-1500:]}{proc.stderr[-1500:]}"
    return json.loads(proc.stdout)


def test_pocketmq_sdk_and_mqadmin_against_apache(apache: ApacheServers) -> None:
    from pocketmq.client import CONSUME_SUCCESS, ConsumeFromWhere, Message, Producer, PushConsumer

    topic = "SdkOnApache"
    created = _mqadmin(
        apache.namesrv_addr, "updateTopic", "-c", "DefaultCluster", "-t", topic, "-r", "4", "-w", "4"
    )
    assert created
    assert topic in json.dumps(_mqadmin(apache.namesrv_addr, "topicList"))
    route = json.dumps(_mqadmin(apache.namesrv_addr, "topicRoute", "-t", topic))
    assert apache.broker_addr in route
    assert "broker-a" in json.dumps(_mqadmin(apache.namesrv_addr, "clusterList"))

    async def round_trip() -> set[bytes]:
        got: set[bytes] = set()
        done = asyncio.Event()

        async def listener(msgs: Any, context: Any) -> Any:
            got.update(m.body for m in msgs)
            if len(got) >= 200:
                done.set()
            return CONSUME_SUCCESS

        async with Producer("SdkOnApacheProducer", namesrv=apache.namesrv_addr) as producer:
            for i in range(200):
                await producer.send(Message(topic, b"m%d" % i, tags="TagA", keys=f"k{i}"))
        consumer = PushConsumer(
            "SdkOnApacheConsumer",
            namesrv=apache.namesrv_addr,
            listener=listener,
            consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
        )
        consumer.subscribe(topic, "*")
        async with consumer:
            await asyncio.wait_for(done.wait(), 60)
        return got

    assert len(asyncio.run(round_trip())) == 200
    status = json.dumps(_mqadmin(apache.namesrv_addr, "topicStatus", "-t", topic))
    assert "broker-a" in status
    progress = json.dumps(_mqadmin(apache.namesrv_addr, "consumerProgress", "-g", "SdkOnApacheConsumer"))
    assert topic in progress
