"""The web console in a real browser (Debian's chromium, driven by Playwright; issue 20).

One in-process cluster, the console on an ephemeral port, a PushConsumer and headless Chromium
share this test's event loop. The test creates a topic, sends a message from the topic page,
finds it by key and by id, watches a group's lag fall while its consumer runs, resets the group's
offset (the consumer receives the messages again) and visits every page; the browser must log no
error. Screenshots of the main pages go to test-artifacts/console/ (ignored by git).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from pocketmq.client import CONSUME_SUCCESS, ConsumeFromWhere, Message, Producer, PushConsumer
from pocketmq.deploy.console.server import ConsoleServer
from pocketmq.testing import Cluster, cluster
from tests.waiting import wait_until

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
SHOTS = ROOT / "test-artifacts" / "console"
CHROMIUM = os.environ.get("POCKETMQ_CHROMIUM", "/usr/bin/chromium")
#: no network beyond loopback, nothing fetched, nothing left behind (a fresh profile per run)
FLAGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]  # fmt: skip


def _chromium_or_skip() -> str:
    if not (os.path.exists(CHROMIUM) or shutil.which(CHROMIUM)):
        pytest.skip(f"{CHROMIUM} not installed (Debian package 'chromium'; `make test-deps` installs it)")
    try:
        import playwright.async_api  # noqa: F401
    except ImportError:
        pytest.skip("the playwright package is not installed (dev extra)")
    return CHROMIUM


class Browser:
    """A page of a fresh Chromium profile that records console errors and accepts dialogs."""

    def __init__(self, page: Any, base: str) -> None:
        self.page = page
        self.base = base
        self.errors: list[str] = []
        self.dialogs: list[str] = []
        self.console: Any = None
        page.on("console", lambda m: m.type == "error" and self.errors.append(f"{page.url}: {m.text}"))
        page.on("pageerror", lambda e: self.errors.append(f"{page.url}: {e}"))
        page.on("dialog", self._dialog)

    async def _dialog(self, dialog: Any) -> None:
        self.dialogs.append(dialog.message)
        if dialog.type == "prompt":
            await dialog.accept(dialog.default_value)
        else:
            await dialog.accept()

    async def goto(self, hash_: str, page_name: str) -> None:
        await self.page.goto(self.base + hash_)
        await self.page.wait_for_selector(f'#view[data-page="{page_name}"]', timeout=15_000)

    async def shot(self, name: str) -> None:
        SHOTS.mkdir(parents=True, exist_ok=True)
        await self.page.screenshot(path=str(SHOTS / f"{name}.png"), full_page=True)

    async def text(self, selector: str) -> str:
        return str(await self.page.inner_text(selector))


async def _browser(tmp: Path, base: str) -> AsyncIterator[Browser]:
    from playwright.async_api import async_playwright

    async with async_playwright() as p:
        context = await p.chromium.launch_persistent_context(
            str(tmp / "profile"), executable_path=_chromium_or_skip(), headless=True, args=FLAGS,
            viewport={"width": 1280, "height": 900},
        )  # fmt: skip
        try:
            yield Browser(context.pages[0] if context.pages else await context.new_page(), base)
        finally:
            await context.close()


async def _send_many(c: Cluster, topic: str, n: int) -> None:
    async with Producer("WebPG", namesrv=c.namesrv_addr) as producer:
        for i in range(n):
            await producer.send(Message(topic, f"m{i}".encode(), keys=f"bulk-{i}"))


@contextlib.asynccontextmanager
async def console_in_chromium(c: Cluster, tmp: Path, **options: Any) -> AsyncIterator[Browser]:
    """The console of ``c`` (``ConsoleServer`` ``options``) on an ephemeral port, opened in a
    fresh Chromium profile; ``Browser.console`` is the server."""
    console = ConsoleServer(c.namesrv_addr, **options)
    await console.start(host="127.0.0.1", port=0)
    try:
        agen = _browser(tmp, console.url)
        b = await agen.__anext__()
        b.console = console
        try:
            yield b
        finally:
            await agen.aclose()
    finally:
        await console.stop()


async def test_console_pages_in_chromium(tmp_path: Path) -> None:
    _chromium_or_skip()
    async with cluster(tmp_path / "c") as c, console_in_chromium(c, tmp_path) as b:
        await _drive(c, b)
    assert not b.errors, b.errors


async def _drive(c: Cluster, b: Browser) -> None:
    page = b.page
    # -- cluster page: the broker, its role and runtime figures
    await b.goto("#/cluster", "cluster")
    await page.wait_for_selector("#brokers >> text=broker-a")
    assert "MASTER" in await b.text("#brokers")
    await page.click("#brokers button:has-text('Status')")
    await page.wait_for_selector("#broker-status >> text=putTps")
    await page.wait_for_selector("#cluster-tps svg polyline", state="attached")
    await b.shot("cluster")

    # -- topics: create one through the form (confirmed), then find it in the filtered list
    await b.goto("#/topics", "topics")
    await page.fill("#new-topic", "WebTopic")
    await page.fill("#topic-form input[name=readQueueNums]", "2")
    await page.fill("#topic-form input[name=writeQueueNums]", "2")
    await page.click("#topic-submit")
    await page.wait_for_selector("#status.ok >> text=topic WebTopic written")
    assert any("Create or update topic WebTopic" in d for d in b.dialogs)
    await page.fill("#topic-filter", "webtop")
    await page.wait_for_selector("#topics >> text=WebTopic")
    await page.check("#kind-RETRY")
    await b.shot("topics")

    # -- topic page: status, route, and a test message sent from the browser
    await page.click("#topics a:has-text('WebTopic')")
    await page.wait_for_selector('#view[data-page="topic"]')
    assert "broker-a" in await b.text("#topic-route")
    await page.fill("#send-keys", "order-1")
    await page.fill("#send-body", "hello from the console")
    await page.click("#send-submit")
    await page.wait_for_selector("#send-result-table >> text=SEND_OK")
    # the status table is refreshed: one message in the topic now
    await page.wait_for_function(
        "() => [...document.querySelectorAll('#topic-status tbody tr')]"
        ".some(r => r.children[3].textContent === '1')"
    )
    result = await b.text("#send-result-table")
    msg_id = next(line.split()[-1] for line in result.splitlines() if line.startswith("msgId"))
    await b.shot("topic")

    # -- messages: by key, by id, then the detail page with the body
    await b.goto("#/messages", "messages")
    await page.fill("#key-topic", "WebTopic")
    await page.fill("#key-key", "order-1")
    await page.click("#by-key button")
    await page.wait_for_selector(f"#messages >> text={msg_id}")
    await page.fill("#id-topic", "WebTopic")
    await page.fill("#id-id", msg_id)
    await page.click("#by-id button")
    await page.wait_for_selector("#messages-result >> text=1 message(s)")
    await page.click(f"#messages a:has-text('{msg_id}')")
    await page.wait_for_selector('#view[data-page="message"]')
    assert await b.text("#message-body") == "hello from the console"
    await b.shot("message")
    # by time range (the last hour, in the browser's time zone)
    await b.goto("#/messages", "messages")
    an_hour_ago = await page.evaluate(
        "() => { const d = new Date(Date.now() - 3600e3); d.setMinutes(d.getMinutes() - d.getTimezoneOffset());"
        " return d.toISOString().slice(0, 16); }"
    )
    await page.fill("#time-topic", "WebTopic")
    await page.fill("#by-time input[name=begin]", an_hour_ago)
    await page.click("#by-time button")
    await page.wait_for_selector(f"#messages >> text={msg_id}")

    # -- a consumer group: lag appears, falls while the consumer runs, then an offset reset
    await _send_many(c, "WebTopic", 20)
    release = asyncio.Event()
    received: list[bytes] = []

    async def listener(msgs: list[Any], ctx: Any) -> Any:
        await release.wait()
        received.extend(m.body for m in msgs)
        return CONSUME_SUCCESS

    consumer = PushConsumer(
        "WebGroup", namesrv=c.namesrv_addr, listener=listener,
        consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET, persist_consumer_offset_interval=500,
    )  # fmt: skip
    consumer.subscribe("WebTopic", "*")
    async with consumer:
        await b.goto("#/group/WebGroup", "group")
        await page.wait_for_selector("#clients >> text=@")  # the online client (clientId ip@pid)
        await wait_until(lambda: _lag(b), timeout=30)  # offsets committed: lag > 0 while held
        before = await _lag(b)
        assert before is not None and before > 0
        await b.shot("group-lagging")
        release.set()
        await wait_until(lambda: _lag_is(b, 0), timeout=30)
        assert len(received) >= 21
        series = await page.get_attribute("#group-lag polyline[data-series=lag]", "points")
        assert series is not None and len(series.split()) >= 2
        await b.shot("group")
        # reset to the oldest message: the online consumer is told and receives them again
        got = len(received)
        await page.fill("#reset-topic", "WebTopic")
        await page.click("#reset-submit")
        await page.wait_for_selector("#status.ok >> text=offsets reset")
        assert any("Reset the offsets of group WebGroup" in d for d in b.dialogs)
        await wait_until(lambda: len(received) >= got + 21, timeout=30)

        # -- every other page renders
        await b.goto("#/groups", "groups")
        await page.wait_for_selector("#groups >> text=WebGroup")
        await page.click("#groups th:has-text('lag')")
        await b.shot("groups")
        # add a group through the form (confirmed): written to the broker as asked
        await page.fill("#group-form input[name=group]", "WebGroup2")
        await page.fill("#group-form input[name=retryMaxTimes]", "3")
        await page.uncheck("#group-form input[name=consumeEnable]")
        await page.click("#group-form button[type=submit]")
        await page.wait_for_selector("#status.ok >> text=group WebGroup2 written")
        sgc = c.brokers[0].subscription_group_manager.subscription_group_table["WebGroup2"]
        assert (sgc.retry_max_times, sgc.consume_enable, sgc.consume_broadcast_enable) == (3, False, True)
        await b.goto("#/producers", "producers")
        await b.goto("#/trace", "trace")
        await b.shot("trace")

    # delete a topic from its page (the cluster is asked for, then confirmed)
    await c.create_topic("WebTemp", queues=1)
    await b.goto("#/topic/WebTemp", "topic")
    await page.click("#delete-topic")
    await page.wait_for_selector('#view[data-page="topics"]')
    assert any("Really delete topic WebTemp?" in d for d in b.dialogs)
    await page.fill("#topic-filter", "WebT")
    await page.wait_for_selector("#topics >> text=WebTopic")
    assert "WebTemp" not in await b.text("#topics")


async def _lag(b: Browser) -> int | None:
    text = (await b.text("#group-lag-now")).strip()
    return int(text) if text.isdigit() and int(text) > 0 else None


async def _lag_is(b: Browser, want: int) -> bool:
    text = (await b.text("#group-lag-now")).strip()
    return text.isdigit() and int(text) == want


async def test_trace_page_shows_the_send_and_consume_hops(tmp_path: Path) -> None:
    from tests.integration.test_trace import traced_send_and_consume

    _chromium_or_skip()
    async with cluster(tmp_path / "c", broker_config={"traceTopicEnable": "true"}) as c:
        msg_id, _ = await traced_send_and_consume(c)
        async with console_in_chromium(c, tmp_path) as b:
            await b.goto(f"#/trace?id={msg_id}", "trace")
            await b.page.wait_for_selector("#trace-hops >> text=SubAfter")
            hops = await b.text("#trace-hops")
            assert "Pub" in hops and "TracePG" in hops and "TraceCG" in hops and "SUCCESS" in hops
            assert await b.page.locator("#trace-timeline rect").count() == 3
            await b.shot("trace-hops")
    assert not b.errors, b.errors
