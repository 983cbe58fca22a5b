"""Issue 18's end-to-end acceptance with real processes (``mqnamesrv`` + ``mqbroker`` with
``enablePropertyFilter=true``): 100k messages with properties ``a`` (0-99, absent on 1 in 1000)
and ``region``; three SQL92 push consumers get exactly their matches (retried ones included,
filtered the same way), while a consumer with an invalid expression gets the error."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from pocketmq.client import (
    CONSUME_SUCCESS,
    RECONSUME_LATER,
    ConsumeFromWhere,
    Message,
    MessageQueue,
    MessageSelector,
    MessageValidationError,
    Producer,
    PushConsumer,
)
from pocketmq.remoting.protocol.codes import RequestCode, ResponseCode
from pocketmq.testing.procs import servers
from pocketmq.testing.wire import Wire
from tests.waiting import wait_until

pytestmark = pytest.mark.integration

N = 100_000
QUEUES = 4
REGIONS = ("eu", "us", "ap", "sa", None)
FIRST = ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET


def props_of(i: int) -> dict[str, str]:
    p = {} if i % 1000 == 999 else {"a": str(i % 100)}
    region = REGIONS[i % 5]
    return p | ({"region": region} if region else {})


CONSUMERS = {
    "SqlBetween": ("a BETWEEN 10 AND 19", lambda p: "a" in p and 10 <= int(p["a"]) <= 19),
    "SqlRegion": ("region IN ('eu','us') AND a > 50", lambda p: p.get("region") in ("eu", "us") and "a" in p
                  and int(p["a"]) > 50),
    "SqlNull": ("a IS NULL", lambda p: "a" not in p),
}  # fmt: skip


async def produce(namesrv: str) -> None:
    async with Producer("SqlProcP", namesrv=namesrv) as producer:
        for q in range(QUEUES):
            mq = MessageQueue("SqlProc", "broker-a", q)
            ids = list(range(q, N, QUEUES))
            for k in range(0, len(ids), 128):
                batch = [
                    Message("SqlProc", str(i).encode(), properties=props_of(i)) for i in ids[k : k + 128]
                ]
                await producer.send_batch(batch, queue=mq)


async def scenario(namesrv: str, broker: str) -> None:
    await produce(namesrv)
    got: dict[str, dict[int, int]] = {g: {} for g in CONSUMERS}
    retried = 0

    def listener_for(group: str):  # noqa: ANN202
        async def listener(msgs, ctx):
            nonlocal retried
            seen = got[group]
            for m in msgs:
                i = int(m.body)
                seen[i] = seen.get(i, 0) + 1
            # the first delivery of every 31st message fails: it comes back through %RETRY%
            if any(int(m.body) % 31 == 0 and m.reconsume_times == 0 for m in msgs):
                retried += 1
                ctx.delay_level_when_next_consume = 1
                return RECONSUME_LATER
            return CONSUME_SUCCESS

        return listener

    consumers = []
    for group, (sql, _) in CONSUMERS.items():
        c = PushConsumer(group, namesrv=namesrv, listener=listener_for(group), consume_from_where=FIRST,
                         consume_message_batch_max_size=1)  # fmt: skip
        c.subscribe("SqlProc", MessageSelector.by_sql(sql))
        consumers.append(c)
    want = {g: {i for i in range(N) if pred(props_of(i))} for g, (_, pred) in CONSUMERS.items()}
    # an invalid expression: the SDK refuses it at subscribe; a client that sends it anyway (as a
    # raw protocol client would) gets SUBSCRIPTION_PARSE_FAILED with the position, while the others run
    with pytest.raises(MessageValidationError, match="line 1, column 17"):
        MessageSelector.by_sql("a BETWEEN 10 AND")
    wire = Wire(broker)
    try:
        for c in consumers:
            await c.start()
        body = {"clientId": "raw", "group": "SqlBad",
                "subscriptionData": {"topic": "SqlProc", "subString": "a BETWEEN 10 AND", "expressionType": "SQL92"}}  # fmt: skip
        r = await wire.call(RequestCode.CHECK_CLIENT_CONFIG, None, json.dumps(body).encode())
        assert r.code == ResponseCode.SUBSCRIPTION_PARSE_FAILED and "column 17" in r.remark
        r = await wire.pull("SqlProc", 0, 0, group="SqlBad", sys_flag=0x4, subscription="a BETWEEN 10 AND",
                            expression_type="SQL92")  # fmt: skip
        assert r.code == ResponseCode.SUBSCRIPTION_PARSE_FAILED and "column 17" in r.remark

        def done() -> bool:
            return all(
                set(got[g]) >= want[g] and all(got[g][i] >= 2 for i in want[g] if i % 31 == 0)
                for g in CONSUMERS
            )

        await wait_until(done, timeout=240, step=0.2)
        await asyncio.sleep(1.0)  # nothing else arrives
    finally:
        for c in consumers:
            await c.shutdown()
        await wire.close()
    for g in CONSUMERS:
        assert set(got[g]) == want[g], g  # exactly the matches, retries included
        assert all(n == (2 if i % 31 == 0 else 1) for i, n in got[g].items()), g
    assert len(want["SqlBetween"]) == 10_000 and len(want["SqlNull"]) == 100
    assert all(any(i % 31 == 0 for i in want[g]) for g in CONSUMERS) and retried > 0


def test_sql92_consumers_against_real_processes(tmp_path: Path) -> None:
    keys = {"enablePropertyFilter": "true", "filterSupportRetry": "true"}
    with servers(tmp_path, broker_keys=keys, topics={"SqlProc": QUEUES}) as s:
        asyncio.run(scenario(s.namesrv.addr, s.broker.addr))
