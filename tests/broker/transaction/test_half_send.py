"""The send processor's half branch (``SendMessageProcessor.process``'s fast path, which skips the stored-
properties step) answers and stores exactly what the general path does, for sends it takes and
for every send it leaves to the general path: both are run on the same requests, over the wire,
and their replies and stored records compared field by field."""

from __future__ import annotations

import random
from typing import Any

from pocketmq.broker.controller import BrokerController
from pocketmq.remoting.protocol.codes import ResponseCode
from pocketmq.remoting.protocol.command import RemotingCommand
from pocketmq.remoting.protocol.message import decode_offset_msg_id
from tests.broker.helpers import Wire, broker_and_wire

#: request properties: a producer's usual ones, and what the fast path must leave to the
#: general path (DELAY, TRAN_MSG not "true", a CLUSTER of its own, odd entries, a value ending in
#: the name/value separator, an empty WAIT, long strings, no TRAN_MSG entry but its name in a value)
CASES = [
    "TRAN_MSG\x01true\x02PGROUP\x01PG\x02UNIQ_KEY\x01U1",
    "KEYS\x01k\x02TAGS\x01a\x02WAIT\x01true\x02TRAN_MSG\x01true\x02PGROUP\x01PG\x02UNIQ_KEY\x01U2",
    "WAIT\x01false\x02TRAN_MSG\x01true\x02PGROUP\x01PG",
    "WAIT\x01FALSE\x02TRAN_MSG\x01TRUE\x02PGROUP\x01PG",
    "WAIT\x01\x02TRAN_MSG\x01true\x02PGROUP\x01PG",
    "TRAN_MSG\x01false\x02PGROUP\x01PG",
    "TRAN_MSG\x01yes\x02PGROUP\x01PG",
    "TRAN_MSG\x01true\x02PGROUP\x01PG\x02DELAY\x013",
    "TRAN_MSG\x01true\x02PGROUP\x01PG\x02CLUSTER\x01Other",
    "TRAN_MSG\x01true\x02PGROUP\x01PG\x02",
    "TRAN_MSG\x01true\x02odd\x02PGROUP\x01PG",
    "TRAN_MSG\x01true\x02PGROUP\x01PG\x02k\x01v\x01",
    "TRAN_MSG\x01true\x02TRAN_PREPARED_QUEUE_OFFSET\x017\x02PGROUP\x01PG",
    "KEYS\x01TRAN_MSG\x01true\x02PGROUP\x01PG",
    "TRAN_MSG\x01true\x02PGROUP\x01PG\x02XWAIT\x01false",
    "TRAN_MSG\x01true\x02PGROUP\x01PG\x02big\x01" + "x" * 32_700,
    "TRAN_MSG\x01true\x02PGROUP\x01PG\x02big\x01" + "\u00e9" * 17_000,
]


def general_only(broker: BrokerController) -> None:
    """The processor's half branch declines every send: the general path takes them all."""
    processor: Any = broker.send_processor
    processor._s.half_fast_max_props = -1  # (every request's properties are longer)


async def outcome(broker: BrokerController, wire: Wire, topic: str, props: str, **header: str) -> tuple[Any, ...]:
    """The reply's code, remark and queue id, and the stored record's fields (None: refused)."""
    r: RemotingCommand = await wire.send(topic, b"body", properties=props, **header)
    if r.code != ResponseCode.SUCCESS:
        return r.code, r.remark, None
    _, _, phy = decode_offset_msg_id(r.ext("msgId") or "")
    m = broker.store.look_message_by_offset(phy)
    assert m is not None
    recent = broker.transactional_message_service.recent.get(phy)
    return (
        r.code, r.ext("queueId"), m.topic, m.queue_id, m.properties_str, m.sys_flag, m.flag, m.body,
        m.reconsume_times, None if recent is None else recent[1:],
    )  # fmt: skip


async def test_same_replies_and_records_as_the_general_path(tmp_path) -> None:
    rnd = random.Random(7)
    sends: list[tuple[str, str, dict[str, str]]] = []
    for props in CASES:
        # (a prepared sysFlag or none: the DELAY rewrite only applies to the latter; a
        # reconsumed send with a DELAY is no half)
        for topic, sys_flag, reconsumed in (("TxT", "4", "0"), ("TxT", "0", "1"), ("%RETRY%G", "4", "1")):
            sends.append((topic, props, {"sysFlag": sys_flag, "reconsumeTimes": reconsumed}))
    # the producer shape many times, queues picked by the broker, reconsumed, MULTI_TAG-free
    for i in range(20):
        props = f"TAGS\x01T{i % 3}\x02UNIQ_KEY\x01U{i}\x02TRAN_MSG\x01true\x02PGROUP\x01PG"
        sends.append(("TxT", props, {"sysFlag": "4", "queueId": str(rnd.choice([-1, 0, 1])), "reconsumeTimes": str(i % 2)}))
    got: dict[bool, list[tuple[Any, ...]]] = {}
    for fast in (True, False):
        async with broker_and_wire(str(tmp_path / str(fast)), autoCreateSubscriptionGroup=True) as (b, w):
            if not fast:
                general_only(b)
            got[fast] = [await outcome(b, w, topic, props, **header) for topic, props, header in sends]
    for send, a, b_ in zip(sends, got[True], got[False], strict=True):
        if send[2].get("queueId") == "-1":  # the broker picks the queue at random: compare the rest
            a, b_ = _without_queue(a), _without_queue(b_)
        assert a == b_, send[1][:80]
    taken = [o for o in got[True] if o[2] == "RMQ_SYS_TRANS_HALF_TOPIC"]
    assert len(taken) > 20


def _without_queue(o: tuple[Any, ...]) -> tuple[Any, ...]:
    if o[2] is None:
        return o
    props = "\x02".join(e for e in o[4].split("\x02") if not e.startswith("REAL_QID\x01"))
    return (o[0], o[2], props, *o[5:9])
