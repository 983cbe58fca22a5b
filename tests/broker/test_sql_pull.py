"""SQL92 subscriptions on the broker, over the wire: the case table, heartbeat and carried
subscriptions, errors (23 with the position), enablePropertyFilter, filterSupportRetry and an
expression that changes while the consumer runs."""

from __future__ import annotations

import json

from pocketmq.remoting.protocol.codes import RequestCode, ResponseCode
from pocketmq.remoting.protocol.message import decode_messages
from pocketmq.remoting.protocol.route import TopicConfig
from tests.broker.helpers import Wire, broker_and_wire
from tests.broker.test_pull import wait_dispatched
from tests.remoting.sql_cases import CASES

NO_SUSPEND = 0x4  # FLAG_SUBSCRIPTION only
HEARTBEAT_SUB = 0x0  # no flag: the heartbeat's subscription


async def put(broker, wire: Wire, topic: str, props_list: list[dict[str, str]]) -> None:
    if broker.topic_config_manager.select_topic_config(topic) is None:
        broker.topic_config_manager.update_topic_config(TopicConfig(topic, 1, 1))
    base = broker.store.get_max_offset_in_queue(topic, 0)
    for i, props in enumerate(props_list):
        r = await wire.send(topic, str(base + i).encode(), props=props)
        assert r.code == ResponseCode.SUCCESS, r.remark
    await wait_dispatched(broker, topic, base + len(props_list))


async def pull_all(wire: Wire, topic: str, expression: str, *, group: str = "SQLG", flag: int = NO_SUSPEND,
                   sub_version: int = 0) -> tuple[int, list[int], str]:  # fmt: skip
    """Every matching body (as ints) from offset 0 to the end, or the first error's code and remark."""
    offset, found = 0, []
    while True:
        r = await wire.pull(topic, 0, offset, group=group, sys_flag=flag, subscription=expression,
                            expression_type="SQL92", sub_version=sub_version)  # fmt: skip
        if r.code == ResponseCode.SUCCESS:
            found += [int(m.body) for m in decode_messages(r.body)]
        elif r.code not in (ResponseCode.PULL_RETRY_IMMEDIATELY, ResponseCode.PULL_NOT_FOUND):
            return r.code, found, r.remark or ""
        nxt = int(r.ext_fields["nextBeginOffset"])
        if nxt == offset or r.code == ResponseCode.PULL_NOT_FOUND:
            return ResponseCode.SUCCESS, found, ""
        offset = nxt


async def test_case_table_over_the_wire(tmp_path) -> None:
    prop_sets: list[dict[str, str]] = []
    for _, props, _ in CASES:
        if props not in prop_sets:
            prop_sets.append(props)
    by_expression: dict[str, dict[int, object]] = {}
    for expression, props, expected in CASES:
        by_expression.setdefault(expression, {})[prop_sets.index(props)] = expected
    async with broker_and_wire(str(tmp_path / "s"), enablePropertyFilter=True) as (broker, wire):
        await put(broker, wire, "SQLT", prop_sets)
        for expression, rows in by_expression.items():
            code, found, remark = await pull_all(wire, "SQLT", expression)
            if "invalid" in rows.values():
                assert code == ResponseCode.SUBSCRIPTION_PARSE_FAILED, expression
                assert "parse the consumer's subscription failed" in remark and "line 1, column" in remark
                continue
            assert code == ResponseCode.SUCCESS, (expression, remark)
            for index, expected in rows.items():
                assert (index in found) is (expected is True), (expression, prop_sets[index], expected)


async def test_heartbeat_subscription_filters_and_a_bad_one_does_not_stop_others(tmp_path) -> None:
    async with broker_and_wire(str(tmp_path / "s"), enablePropertyFilter=True) as (broker, wire):
        await put(broker, wire, "HB1", [{"a": str(i), "region": "eu" if i % 2 else "us"} for i in range(20)])
        ok = await wire.heartbeat("c1", consumer_group="G1", topics={"HB1": "a BETWEEN 10 AND 19"},
                                  expression_type="SQL92")  # fmt: skip
        assert ok.code == ResponseCode.SUCCESS
        bad = await wire.heartbeat("c2", consumer_group="G2", topics={"HB1": "a BETWEEN 10 AND"},
                                   expression_type="SQL92")  # fmt: skip
        assert bad.code == ResponseCode.SUCCESS  # like RocketMQ: heartbeats do not compile
        code, found, _ = await pull_all(wire, "HB1", "ignored", group="G1", flag=HEARTBEAT_SUB, sub_version=1)
        assert (code, sorted(found)) == (ResponseCode.SUCCESS, list(range(10, 20)))
        code, _, remark = await pull_all(
            wire, "HB1", "ignored", group="G2", flag=HEARTBEAT_SUB, sub_version=1
        )
        assert code == ResponseCode.SUBSCRIPTION_PARSE_FAILED
        assert "line 1, column 17" in remark and "end of expression" in remark
        code, found, _ = await pull_all(wire, "HB1", "region = 'eu'", group="G3")
        assert sorted(found) == list(range(1, 20, 2))  # the other groups keep working


async def test_expression_changes_while_consuming(tmp_path) -> None:
    async with broker_and_wire(str(tmp_path / "s"), enablePropertyFilter=True) as (broker, wire):
        await put(broker, wire, "CH", [{"a": str(i)} for i in range(10)])
        await wire.heartbeat("c1", consumer_group="G", topics={"CH": "a < 3"}, expression_type="SQL92",
                             sub_version=1)  # fmt: skip
        _, found, _ = await pull_all(wire, "CH", "", group="G", flag=HEARTBEAT_SUB, sub_version=1)
        assert sorted(found) == [0, 1, 2]
        await wire.heartbeat("c1", consumer_group="G", topics={"CH": "a >= 7"}, expression_type="SQL92",
                             sub_version=2)  # fmt: skip
        _, found, _ = await pull_all(wire, "CH", "", group="G", flag=HEARTBEAT_SUB, sub_version=2)
        assert sorted(found) == [7, 8, 9]
        r = await wire.pull("CH", 0, 0, group="G", sys_flag=HEARTBEAT_SUB, sub_version=3)
        assert r.code == ResponseCode.SUBSCRIPTION_NOT_LATEST


async def test_property_filter_disabled_refuses_sql92(tmp_path) -> None:
    async with broker_and_wire(str(tmp_path / "s")) as (broker, wire):
        await put(broker, wire, "OFF", [{"a": "1"}])
        r = await wire.pull("OFF", 0, 0, sys_flag=NO_SUSPEND, subscription="a > 0", expression_type="SQL92")
        assert (r.code, r.remark) == (
            ResponseCode.SYSTEM_ERROR, "The broker does not support consumer to filter message by SQL92"
        )  # fmt: skip
        body = {"clientId": "c", "group": "G", "subscriptionData": {"topic": "OFF", "subString": "a > 0",
                                                                    "expressionType": "SQL92"}}  # fmt: skip
        r = await wire.call(RequestCode.CHECK_CLIENT_CONFIG, None, json.dumps(body).encode())
        assert r.code == ResponseCode.SYSTEM_ERROR and "SQL92" in r.remark


async def test_check_client_config_compiles(tmp_path) -> None:
    async with broker_and_wire(str(tmp_path / "s"), enablePropertyFilter=True) as (_, wire):
        for expression, code in (("a > 0", ResponseCode.SUCCESS), ("a > ", ResponseCode.SUBSCRIPTION_PARSE_FAILED),
                                 ("(" * 10_000 + "a", ResponseCode.SUBSCRIPTION_PARSE_FAILED)):  # fmt: skip
            body = {"clientId": "c", "group": "G",
                    "subscriptionData": {"topic": "T", "subString": expression, "expressionType": "SQL92"}}  # fmt: skip
            r = await wire.call(RequestCode.CHECK_CLIENT_CONFIG, None, json.dumps(body).encode())
            assert r.code == code, r.remark
            if code != ResponseCode.SUCCESS:
                assert r.remark.startswith("Invalid MessageSelector.") and "column" in r.remark


async def test_filter_support_retry(tmp_path) -> None:
    for support, want in ((True, [1]), (False, [0, 1, 2])):
        root = str(tmp_path / f"s{support}")
        async with broker_and_wire(root, enablePropertyFilter=True, filterSupportRetry=support) as (
            broker,
            wire,
        ):
            # the broker adds the %RETRY%RG "*" (TAG) subscription of a clustering push consumer
            await wire.heartbeat("c1", consumer_group="RG", topics={"RT": "a > 5"}, expression_type="SQL92")
            retry = "%RETRY%RG"
            await put(broker, wire, retry, [
                {"a": "1", "RETRY_TOPIC": "RT"}, {"a": "9", "RETRY_TOPIC": "RT"}, {"a": "9"},
            ])  # fmt: skip
            r = await wire.pull(retry, 0, 0, group="RG", sys_flag=HEARTBEAT_SUB, sub_version=1)
            assert r.code == ResponseCode.SUCCESS, r.remark
            # a message without RETRY_TOPIC has nothing to be filtered by: delivered
            assert sorted(int(m.body) for m in decode_messages(r.body)) == sorted({*want, 2}), support


async def test_64_kib_expression_over_the_wire(tmp_path) -> None:
    values = ", ".join(f"'v{i:05d}'" for i in range(8000))
    expression = f"a IN ({values}) OR a = 'x'"
    assert len(expression) > 64 * 1024
    async with broker_and_wire(str(tmp_path / "s"), enablePropertyFilter=True) as (broker, wire):
        await put(broker, wire, "BIG", [{"a": "v07999"}, {"a": "v8000"}, {"a": "x"}])
        code, found, _ = await pull_all(wire, "BIG", expression)
        assert (code, found) == (ResponseCode.SUCCESS, [0, 2])
        code, _, remark = await pull_all(wire, "BIG", expression + " OR")
        assert code == ResponseCode.SUBSCRIPTION_PARSE_FAILED
        assert f"line 1, column {len(expression) + 4}" in remark and len(remark) < 500


async def test_enable_property_filter_at_run_time(tmp_path) -> None:
    async with broker_and_wire(str(tmp_path / "s")) as (broker, wire):
        await put(broker, wire, "RT", [{"a": "1"}, {"a": "7"}])
        code, _, _ = await pull_all(wire, "RT", "a > 5")
        assert code == ResponseCode.SYSTEM_ERROR
        r = await wire.call(RequestCode.UPDATE_BROKER_CONFIG, None, b"enablePropertyFilter=true\n")
        assert r.code == ResponseCode.SUCCESS, r.remark
        assert await pull_all(wire, "RT", "a > 5") == (ResponseCode.SUCCESS, [1], "")
