"""``sent_half_properties`` (the prepare's one-pass path from the sender's properties) gives
the bytes of the general path -- the send path's stored string (``stored_properties``) through
``java_half_properties`` (the map path, checked against Apache 4.9.7) -- and the ``PGROUP`` and
``TRAN_PREPARED_QUEUE_OFFSET`` values read from them, the ``TRAN_MSG`` value the general path
reads and the sender's ``WAIT``, or declines (None)."""

from __future__ import annotations

import random

import pytest

from pocketmq.broker.processor.message_props import java_half_properties, stored_properties
from pocketmq.broker.transaction import half_props
from pocketmq.broker.transaction.half_props import sent_half_properties
from pocketmq.remoting.protocol.message import MessageConst, get_property
from tests.broker.transaction.test_half_properties import random_props

#: values of a send's own names (one ending in the name/value separator: Java keeps it in the value)
SENT_VALUES = ["v", "true", "7", "x\x01", "\x01y"]


def general_path(
    sent: str, cluster: str, topic: str, queue_id: int
) -> tuple[str, str | None, str | None, str | None, str | None]:
    stored, _ = stored_properties(sent, cluster)
    half = java_half_properties(stored, get_property(sent, MessageConst.WAIT), topic, queue_id)
    return (
        half,
        get_property(half, MessageConst.PGROUP),
        get_property(half, MessageConst.TRAN_PREPARED_QUEUE_OFFSET),
        # the values the send processor's half branch checks: what it reads from the stored string
        get_property(stored, MessageConst.TRAN_MSG),
        get_property(sent, MessageConst.WAIT),
    )


@pytest.mark.parametrize("seed", range(4))
def test_same_bytes_as_the_general_path_or_declined(seed: int) -> None:
    rnd = random.Random(seed)
    taken = 0
    for _ in range(5000):
        sent = random_props(rnd)
        if rnd.random() < 0.3:  # a send's own names more often (the shapes the fast path takes)
            sent = "\x02".join(n + "\x01" + rnd.choice(SENT_VALUES) for n in rnd.sample(
                ["TAGS", "KEYS", "UNIQ_KEY", "TRAN_MSG", "PGROUP", "WAIT", "TRAN_PREPARED_QUEUE_OFFSET", "k"],
                rnd.randrange(1, 8)))  # fmt: skip
        topic, qid = rnd.choice(["T", "BenchTx"]), rnd.randrange(0, 20)
        sent_half_properties(sent, "C", topic, qid)  # a shape is compiled on its second send
        got = sent_half_properties(sent, "C", topic, qid)
        if got is not None:
            taken += 1
            assert got == general_path(sent, "C", topic, qid), sent
    assert taken > 1000


def test_a_producer_shape_repeated() -> None:
    for i in range(4):
        for sent in (
            f"TRAN_MSG\x01true\x02PGROUP\x01PG\x02UNIQ_KEY\x01U{i}\x02WAIT\x01true",
            f"TAGS\x01TagA\x02KEYS\x01order-{i}\x02UNIQ_KEY\x01U{i}\x02TRAN_MSG\x01true\x02PGROUP\x01PG",
        ):
            got = sent_half_properties(sent, "DefaultCluster", "BenchTx", i)
            if got is None:  # a shape's first send takes the general path (compiled on its second)
                assert i == 0
                continue
            assert got == general_path(sent, "DefaultCluster", "BenchTx", i)


@pytest.mark.parametrize("queue_id", [0, 7, 1023, 1024, 65535, 2**31 - 1])
def test_real_qid_of_any_queue_id(queue_id: int) -> None:
    """``REAL_QID``'s text comes from ``remoting.protocol.message.QUEUE_ID_TEXT`` (0..1023), else formatted."""
    sent = "TRAN_MSG\x01true\x02PGROUP\x01PG\x02UNIQ_KEY\x01U1"
    sent_half_properties(sent, "C", "T", queue_id)  # a shape is compiled on its second send
    got = sent_half_properties(sent, "C", "T", queue_id)
    assert got == general_path(sent, "C", "T", queue_id)
    assert got is not None and get_property(got[0], MessageConst.REAL_QID) == str(queue_id)


@pytest.mark.parametrize(
    "shape",
    [
        "TRAN_MSG\x01true\x02PGROUP\x01PG\x02UNIQ_KEY\x01{u}",  # the SDK's half (UNIQ_KEY last)
        "UNIQ_KEY\x01{u}\x02TRAN_MSG\x01true\x02PGROUP\x01BenchTxPG",  # transaction_bench's
        "TRAN_MSG\x01true\x02UNIQ_KEY\x01{u}\x02PGROUP\x01PG\x02WAIT\x01false\x02TAGS\x01t",
        "TRAN_MSG\x01true\x02UNIQ_KEY\x01{u}\x02TRAN_PREPARED_QUEUE_OFFSET\x017\x02PGROUP\x01PG",
    ],
)
def test_the_repeat_of_sends_that_differ_in_uniq_key(shape: str) -> None:
    """A shape's plan keeps the text around its UNIQ_KEY value (``_compile``'s repeat): sends
    that differ only there, then sends whose other values, topic, queue, cluster or UNIQ_KEY
    value (empty, with an entry separator) differ, each give the general path's result."""
    rnd = random.Random(shape)
    cluster = "DefaultCluster"
    sends = [(shape.format(u=f"7F00000100{i:022X}"), cluster, "BenchTx", i % 4) for i in range(300)]
    odd = [
        (shape.format(u="x\x01y"), cluster, "T", 1),  # (a value may hold the name/value separator)
        (shape.format(u=""), cluster, "BenchTx", 0),  # Java drops an empty value: declined
        (shape.format(u="a\x02b\x01c"), cluster, "BenchTx", 0),  # another shape
        (shape.format(u="a\x02"), cluster, "BenchTx", 0),
        (
            shape.format(u="U").replace("\x01PG", "\x01PG2").replace("\x01BenchTxPG", "\x01PG2"),
            cluster,
            "T",
            2,
        ),
        (shape.format(u="U").replace("true", "TRUE"), cluster, "BenchTx", 2),
        (shape.format(u="U"), "".join(["Default", "Cluster"]), "BenchTx", 3),  # an equal cluster
        (shape.format(u="U"), "OtherCluster", "BenchTx", 3),
        (shape.format(u="U"), cluster, "Other", 5000),
        # the repeat's check (the send equals head + value + tail rebuilt): sends of the same
        # length as a repeated one that differ before or after the value, and cut ones
        (shape.format(u="7F00000100" + "0" * 22).replace("PG", "PH"), cluster, "BenchTx", 1),
        (shape.format(u="7F00000100" + "0" * 22).replace("true", "tRUE"), cluster, "BenchTx", 1),
        (shape.format(u="7F00000100" + "0" * 22)[:-3], cluster, "BenchTx", 1),
        (shape.format(u="7F00000100" + "0" * 22)[3:], cluster, "BenchTx", 1),
        (shape.format(u="7F00000100" + "0" * 22)[:20], cluster, "BenchTx", 1),
    ]
    mixed = [rnd.choice(odd if rnd.random() < 0.3 else sends) for _ in range(3000)]
    for n, (sent, c, topic, qid) in enumerate(sends + mixed):
        got = sent_half_properties(sent, c, topic, qid)
        assert got is None or got == general_path(sent, c, topic, qid), repr(sent)
        if (
            n
            and "\x01\x02" not in sent
            and not sent.endswith("\x01")
            and sent.count("\x02") == shape.count("\x02")
            and _names(sent) == _names(shape)
        ):
            assert got is not None, repr(sent)  # (the shape's first send: compiled on its second)


def _names(sent: str) -> list[str | None]:
    """The names of ``sent``'s entries (an entry without a separator: None, as no name)."""
    return [entry.split("\x01")[0] if "\x01" in entry else None for entry in sent.split("\x02")]


def test_a_new_shape_per_send_is_never_compiled() -> None:
    # a sender inventing property names per message: each shape seen once, none compiled
    plans = len(half_props._PLANS)
    for i in range(3000):
        assert sent_half_properties(f"TRAN_MSG\x01true\x02PGROUP\x01PG\x02n{i}\x01v", "C", "T", 0) is None
    assert len(half_props._PLANS) == plans


@pytest.mark.parametrize(
    "sent",
    [
        "",
        "TRAN_MSG\x01true\x02",  # trailing separator
        "TRAN_MSG\x01true\x02WAIT\x01",  # empty WAIT (Java's commit re-encodes it differently)
        "TRAN_MSG\x01\x02PGROUP\x01PG",  # empty value
        "TRAN_MSG\x01true\x02odd",  # no name/value separator
        "TRAN_MSG\x01true\x02TRAN_MSG\x01false",  # a repeated name
        "TRAN_MSG\x01true\x02CLUSTER\x01X",
        "TRAN_MSG\x01true\x02REAL_TOPIC\x01X",
        "TRAN_MSG\x01true\x02REAL_QID\x011",
    ],
)
def test_declined(sent: str) -> None:
    assert sent_half_properties(sent, "C", "T", 0) is None
