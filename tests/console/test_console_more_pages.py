"""The console's Dashboard, DLQ and ACL pages in a real browser (Debian's chromium through
Playwright; issue 20), plus their JSON routes' error answers.

Dashboard: the per-day table and the per-sample history count exactly the messages sent while the
console watched. DLQ: a poison message lands in ``%DLQ%<group>`` (write-only, as RocketMQ creates
it); the page grants read, lists it with its original topic, resends it to that topic (the
consumer receives it again) and pushes it to the group's online client. ACL: against a broker
with ``aclEnable=true``, the console (signed with an admin account) lists the accounts, adds one,
sets the global white list and deletes the account; ``plain_acl.yml`` changes each time. The same
console reads the topic page and sends a test message, signed.
Screenshots: test-artifacts/console/dashboard.png, dlq.png, acl.png.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
import yaml

from pocketmq.client import (
    CONSUME_SUCCESS,
    RECONSUME_LATER,
    ConsumeFromWhere,
    Message,
    Producer,
    PushConsumer,
)
from pocketmq.deploy.console.api_more import COLLECTOR_KEY, user_properties
from pocketmq.testing import cluster
from tests.acl_support import acl_cluster
from tests.console.test_console_api import console_api
from tests.console.test_console_browser import _chromium_or_skip, console_in_chromium
from tests.waiting import wait_until

pytestmark = pytest.mark.integration


async def test_dashboard_and_dlq_pages_in_chromium(tmp_path: Path) -> None:
    _chromium_or_skip()
    async with cluster(tmp_path / "c") as c:
        await c.create_topic("DashTopic", queues=2)
        await c.create_topic("PoisonTopic", queues=1)
        async with console_in_chromium(c, tmp_path, collect_interval=0.3) as b:
            collector = b.console.app[COLLECTOR_KEY]
            await collector.sampled.wait()  # the baseline sample counts DashTopic's 0 messages
            async with Producer("DashPG", namesrv=c.namesrv_addr) as producer:
                for i in range(7):
                    await producer.send(Message("DashTopic", b"d%d" % i))
            await _dashboard(b)
            await _dlq(c, b)
    assert not b.errors, b.errors


async def _dashboard(b: Any) -> None:
    page = b.page
    await b.goto("#/dashboard", "dashboard")
    # the history counts exactly the 7 messages put since the baseline, in the chart and the bars
    await page.wait_for_selector(
        '#dash-topic-volume polyline[data-series=DashTopic][data-sum="7"]', state="attached", timeout=30_000
    )
    await page.wait_for_selector(
        '#dash-topic-bars rect[data-label=DashTopic][data-value="7"]', state="attached"
    )
    await page.wait_for_selector("#dash-broker-tps polyline[data-series=broker-a]", state="attached")
    rows = await b.text("#dash-broker-table")
    assert "broker-a" in rows
    # today's put total of the broker: the 7 messages (and nothing else was sent)
    put_today = await page.inner_text("#dash-broker-table tbody tr td:nth-child(3)")
    assert int(put_today) == 7
    assert "DashTopic" in await b.text("#dash-topic-table")
    await b.shot("dashboard")


async def _dlq(c: Any, b: Any) -> None:
    page = b.page
    deliveries: list[tuple[bytes, int]] = []
    poisoned = asyncio.Event()

    async def listener(msgs: list[Any], ctx: Any) -> Any:
        deliveries.extend((m.body, m.reconsume_times) for m in msgs)
        if any(m.body == b"poison" for m in msgs) and not poisoned.is_set():
            poisoned.set()
            ctx.delay_level_when_next_consume = -1  # straight to the DLQ
            return RECONSUME_LATER
        return CONSUME_SUCCESS

    consumer = PushConsumer(
        "DlqGroup", namesrv=c.namesrv_addr, listener=listener,
        consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
    )  # fmt: skip
    consumer.subscribe("PoisonTopic", "*")
    async with consumer, Producer("DlqPG", namesrv=c.namesrv_addr) as producer:
        await producer.send(Message("PoisonTopic", b"poison", keys="bad-1", properties={"biz": "7"}))
        await poisoned.wait()
        tcm = c.brokers[0].topic_config_manager
        await wait_until(lambda: tcm.select_topic_config("%DLQ%DlqGroup") is not None, timeout=30)
        await wait_until(
            lambda: c.brokers[0].store.get_max_offset_in_queue("%DLQ%DlqGroup", 0) == 1, timeout=30
        )

        await b.goto("#/dlq?group=DlqGroup", "dlq")
        # write-only, as the broker creates it: the page offers to grant read (confirmed)
        await page.click("#dlq-grant")
        assert any("Grant read permission on %DLQ%DlqGroup" in d for d in b.dialogs)
        await page.wait_for_selector("#dlq-messages >> text=PoisonTopic")
        assert "bad-1" in await b.text("#dlq-messages")
        await b.shot("dlq")
        # resend to the original topic: the consumer gets it again, as a new message of PoisonTopic
        await page.click("#dlq-messages button.dlq-resend")
        await page.wait_for_selector("#status.ok >> text=resent to PoisonTopic: SEND_OK")
        assert any("resend message" in d and "to topic PoisonTopic" in d for d in b.dialogs)
        await wait_until(
            lambda: [d for d in deliveries if d[0] == b"poison"] == [(b"poison", 0)] * 2, timeout=30
        )
        resent = await _resent_properties(c)
        assert resent.get("biz") == "7" and "RETRY_TOPIC" not in resent and resent.get("ORIGIN_MESSAGE_ID")
        # push to the online client (consume message directly): its listener runs once more
        await page.wait_for_selector("#dlq-client option", state="attached")
        await page.click("#dlq-messages button.dlq-push")
        await page.wait_for_selector("#status.ok >> text=CR_SUCCESS")
        assert len([d for d in deliveries if d[0] == b"poison"]) == 3


async def _resent_properties(c: Any) -> dict[str, str]:
    """The properties of PoisonTopic's second message (the resent one)."""
    from pocketmq.client.admin import MQAdmin

    async with MQAdmin(c.namesrv_addr) as admin:
        ranges = await admin.read_messages("PoisonTopic", begin_ms=0, end_ms=admin.now_ms() + 60_000)
    msgs = sorted((m for r in ranges for m in r.messages), key=lambda m: m.queue_offset)
    assert len(msgs) == 2, msgs
    return dict(msgs[1].properties)


ACL = {"accounts": [{"accessKey": "consoleAdmin", "secretKey": "consoleSecret1", "admin": True}]}


async def test_acl_page_in_chromium(tmp_path: Path) -> None:
    _chromium_or_skip()
    plain = tmp_path / "home" / "conf" / "plain_acl.yml"

    def accounts() -> dict[str, dict[str, Any]]:
        return {a["accessKey"]: a for a in yaml.safe_load(plain.read_text())["accounts"]}

    async with acl_cluster(tmp_path, ACL, ("AclTopic",), queues=1) as c:
        creds = {"access_key": "consoleAdmin", "secret_key": "consoleSecret1"}
        async with console_in_chromium(c, tmp_path, **creds) as b:
            page = b.page
            # every request is signed: the topic page reads the ACL broker and sends a test message
            await b.goto("#/topic/AclTopic", "topic")
            await page.fill("#send-body", "signed")
            await page.click("#send-submit")
            await page.wait_for_selector("#send-result-table >> text=SEND_OK")
            await b.goto("#/acl", "acl")
            await page.wait_for_selector("#acl-accounts >> text=consoleAdmin")
            await page.fill("#acl-ak", "webUser")
            await page.fill("#acl-sk", "webSecret12")
            await page.select_option("#acl-form select[name=defaultTopicPerm]", "DENY")
            await page.fill("#acl-topics", "Orders=PUB\nAudit=SUB")
            await page.click("#acl-submit")
            await page.wait_for_selector("#status.ok >> text=account webUser written")
            assert any("Create or update ACL account webUser" in d for d in b.dialogs)
            await page.wait_for_selector("#acl-accounts >> text=webUser")
            user = accounts()["webUser"]
            assert user["secretKey"] == "webSecret12" and user["defaultTopicPerm"] == "DENY"
            assert user["topicPerms"] == ["Orders=PUB", "Audit=SUB"]
            await page.fill("#acl-white-input", "10.10.103.*")
            await page.click("#acl-white-form button")
            await page.wait_for_selector(".acl-white >> text=10.10.103.*")
            assert yaml.safe_load(plain.read_text())["globalWhiteRemoteAddresses"] == ["10.10.103.*"]
            await b.shot("acl")
            await page.click('button.acl-delete[data-key="webUser"]')
            await page.wait_for_selector("#status.ok >> text=account webUser deleted")
            assert "webUser" not in accounts()
            await page.wait_for_function(
                "() => !document.querySelector('#acl-accounts').textContent.includes('webUser')"
            )
        assert not b.errors, b.errors
        # without credentials the broker refuses, and the page says so per broker (no crash)
        async with console_in_chromium(c, tmp_path / "anon") as anon:
            await anon.goto("#/acl", "acl")
            await anon.page.wait_for_selector(".acl-error")
        assert not anon.errors, anon.errors


async def test_more_routes_answer_bad_input_clearly(tmp_path: Path) -> None:
    async with cluster(tmp_path / "c") as c, console_api(c.namesrv_addr, collect_interval=3600) as call:
        assert (await call("/api/dlq"))[0] == 400
        status, none = await call("/api/dlq?group=NoSuchGroup")
        assert status == 200 and none["messages"] == [] and "no dead-letter queue" in none["note"]
        assert (await call("/api/dlq/resend", "POST", {"group": "G"}))[0] == 400
        assert (await call("/api/dlq/readable", "POST", {"group": "NoSuchGroup"}))[0] == 404
        assert (await call("/api/acl", "POST", {"secretKey": "x"}))[0] == 400
        assert (await call("/api/acl", "POST", {"accessKey": "a", "topicPerms": "nonsense"}))[0] == 400
        # a broker without aclEnable refuses the ACL codes: shown per broker, not a failure
        status, acl = await call("/api/acl")
        assert status == 200 and acl["brokers"] and acl["brokers"][0]["error"]
        status, dash = await call("/api/dashboard")
        assert status == 200 and [b["broker"] for b in dash["brokers"]] == ["broker-a"]


def test_user_properties_drop_the_system_ones() -> None:
    props = {"biz": "1", "RETRY_TOPIC": "T", "UNIQ_KEY": "u", "KEYS": "k", "TAGS": "t", "__SHARDINGKEY": "s"}
    assert user_properties(props) == {"biz": "1"}
