"""The console's JSON API against a real cluster, without a browser (issue 20)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import urllib.error
import urllib.request
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from pocketmq.deploy.console.api import topic_kind
from pocketmq.deploy.console.server import ConsoleServer, static_dir
from pocketmq.testing import cluster

pytestmark = pytest.mark.integration


def _call(url: str, method: str = "GET", body: Any = None) -> tuple[int, Any]:
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method=method, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


Call = Callable[..., Awaitable[tuple[int, Any]]]


@contextlib.asynccontextmanager
async def console_api(namesrv_addr: str, **options: Any) -> AsyncIterator[Call]:
    """A console (``ConsoleServer`` ``options``) on an ephemeral port and ``call(path, method,
    body)`` answering ``(status, JSON)``."""
    console = ConsoleServer(namesrv_addr, **options)
    await console.start(host="127.0.0.1", port=0)
    base = console.url.rstrip("/")

    async def call(path: str, method: str = "GET", body: Any = None) -> tuple[int, Any]:
        return await asyncio.to_thread(_call, base + path, method, body)

    try:
        yield call
    finally:
        await console.stop()


async def test_api_routes_and_errors(tmp_path: Path) -> None:
    async with cluster(tmp_path / "c") as c, console_api(c.namesrv_addr) as call:
        status, created = await call(
            "/api/topics", "POST", {"topic": "ApiTopic", "cluster": "DefaultCluster", "readQueueNums": 2,
                                    "writeQueueNums": 2},
        )  # fmt: skip
        assert status == 200 and created["brokers"] == [c.brokers[0].broker_addr]
        status, listing = await call("/api/topics")
        kinds = {t["topic"]: t["kind"] for t in listing["topics"]}
        assert kinds["ApiTopic"] == "NORMAL" and kinds["TBW102"] == "SYSTEM" and kinds["broker-a"] == "SYSTEM"
        status, sent = await call("/api/topics/ApiTopic/send", "POST", {"body": "hi", "keys": "k1"})
        assert status == 200 and sent["sendStatus"] == "SEND_OK"
        status, detail = await call("/api/topics/ApiTopic")
        assert sum(q["maxOffset"] for q in detail["status"]["queues"]) == 1
        status, found = await call("/api/messages?topic=ApiTopic&key=k1")
        assert [m["msgId"] for m in found["messages"]] == [sent["msgId"]]
        status, msg = await call(f"/api/message?topic=ApiTopic&id={sent['offsetMsgId']}")
        assert status == 200 and msg["message"]["body"] == "hi"
        # bad input: a clear error, never a traceback
        assert (await call("/api/messages?topic=ApiTopic"))[0] == 400
        assert (await call("/api/topics", "POST", {"cluster": "DefaultCluster"}))[0] == 400
        assert (await call("/api/topics", "POST", {"topic": "T", "cluster": "C", "readQueueNums": "x"}))[
            0
        ] == 400
        status, err = await call("/api/topics/NoSuchTopic")
        assert status == 404 and "NoSuchTopic" in err["error"]
        status, err = await call("/api/message?topic=ApiTopic&id=00000000000000000000000000000000")
        assert status == 404
        status, deleted = await call("/api/topics/ApiTopic?cluster=DefaultCluster", "DELETE")
        assert status == 200 and deleted["brokers"]


def test_topic_kinds_and_packaged_pages() -> None:
    assert topic_kind("%RETRY%g", set(), set()) == "RETRY"
    assert topic_kind("%DLQ%g", set(), set()) == "DLQ"
    assert topic_kind("RMQ_SYS_TRACE_TOPIC", set(), set()) == "SYSTEM"
    assert topic_kind("DefaultCluster_REPLY_TOPIC", set(), set()) == "SYSTEM"
    assert topic_kind("Orders", {"DefaultCluster"}, {"broker-a"}) == "NORMAL"
    assert {p.name for p in static_dir().iterdir()} >= {
        "index.html",
        "console.js",
        "pages_more.js",
        "console.css",
    }


async def test_pocketmq_up_serves_the_console(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import asyncio
    import re

    from pocketmq.deploy.cli import run_up

    stop = asyncio.Event()
    ready = asyncio.Event()
    task = asyncio.create_task(
        run_up(
            str(tmp_path / "data"),
            "127.0.0.1",
            0,
            0,
            (),
            stop,
            ready=lambda ns, b: ready.set(),
            console_port=0,
        )
    )
    try:
        await asyncio.wait_for(ready.wait(), 60)
        match = re.search(r"web console (http://\S+)", capsys.readouterr().out)
        assert match, "pocketmq up did not print the console address"
        status, body = await asyncio.to_thread(_call, match.group(1) + "api/cluster")
        assert status == 200 and [b["brokerName"] for b in body["brokers"]] == ["broker-a"]
    finally:
        stop.set()
        await asyncio.wait_for(task, 60)


async def test_resend_pushes_the_message_to_an_online_client(tmp_path: Path) -> None:
    """POST /api/message/resend: consume message directly, through the broker, by one client."""
    import asyncio

    from pocketmq.client import CONSUME_SUCCESS, ConsumeFromWhere, Message, Producer, PushConsumer
    from tests.waiting import wait_until

    async with cluster(tmp_path / "c") as c:
        await c.create_topic("ResendTopic", queues=1)
        got: list[bytes] = []

        async def listener(msgs: list[Any], ctx: Any) -> Any:
            got.extend(m.body for m in msgs)
            return CONSUME_SUCCESS

        consumer = PushConsumer(
            "ResendCG", namesrv=c.namesrv_addr, listener=listener,
            consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
        )  # fmt: skip
        consumer.subscribe("ResendTopic", "*")
        console = ConsoleServer(c.namesrv_addr)
        await console.start(host="127.0.0.1", port=0)
        try:
            async with Producer("ResendPG", namesrv=c.namesrv_addr) as producer:
                sent = await producer.send(Message("ResendTopic", b"again"))
            async with consumer:
                await wait_until(lambda: got == [b"again"], timeout=30)
                body = {"topic": "ResendTopic", "id": sent.msg_id, "group": "ResendCG",
                        "clientId": consumer.instance.client_id}  # fmt: skip
                status, result = await asyncio.to_thread(
                    _call, console.url + "api/message/resend", "POST", body
                )
                assert status == 200, result
                assert result["consumeResult"] == "CR_SUCCESS"
                assert got == [b"again", b"again"]
                bad = {**body, "clientId": ""}
                status, err = await asyncio.to_thread(_call, console.url + "api/message/resend", "POST", bad)
                assert status == 400 and "clientId" in err["error"]
        finally:
            await console.stop()


def test_console_command_checks_its_options() -> None:
    from click.testing import CliRunner

    from pocketmq.deploy.console.cli import console

    env = {"ROCKETMQ_ACCESS_KEY": "", "ROCKETMQ_SECRET_KEY": ""}
    r = CliRunner().invoke(console, ["--access-key", "ak"], env=env)
    assert r.exit_code == 2 and "--access-key and --secret-key go together" in r.output
    r = CliRunner().invoke(console, ["--collect-interval", "0"], env=env)
    assert r.exit_code == 2 and "--collect-interval" in r.output
