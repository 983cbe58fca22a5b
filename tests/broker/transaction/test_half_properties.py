"""``half_properties`` (the prepare's cached-shape path) stores the bytes ``java_half_properties``
(the map path, checked against Apache 4.9.7) does, for every input: repeated names, the three
added names already present, odd entries Java drops, trailing separators, empty WAIT."""

from __future__ import annotations

import random

import pytest

from pocketmq.broker.processor.message_props import java_half_properties
from pocketmq.broker.transaction.service import half_properties

NAMES = ["TAGS", "KEYS", "UNIQ_KEY", "TRAN_MSG", "PGROUP", "CLUSTER", "WAIT", "REAL_TOPIC", "REAL_QID",
         "DELAY", "a", "", "x\x01y", "CHECK_IMMUNITY_TIME_IN_SECONDS", "k1", "k2", "k3", "k4"]  # fmt: skip
VALUES = ["", "v", "true", "12", "a\x01b", "TagA"]
ODD = ["", "abc", "\x01", "z"]


def random_props(rnd: random.Random) -> str:
    parts = [
        rnd.choice(ODD) if rnd.random() < 0.05 else f"{rnd.choice(NAMES)}\x01{rnd.choice(VALUES)}"
        for _ in range(rnd.randrange(0, 18))
    ]
    return "\x02".join(parts) + ("\x02" if rnd.random() < 0.3 else "")


@pytest.mark.parametrize("seed", range(4))
def test_same_bytes_as_the_map_path(seed: int) -> None:
    rnd = random.Random(seed)
    for _ in range(5000):
        props = random_props(rnd)
        wait = rnd.choice([None, "", "true", "false", "x"])
        topic, qid = rnd.choice(["T", "BenchTx", "a%b"]), rnd.randrange(0, 20)
        assert half_properties(props, wait, topic, qid) == java_half_properties(props, wait, topic, qid), (
            props,
            wait,
        )


def test_a_producer_shape_repeated() -> None:
    # the common case: every prepare of a producer has the same names (the cached shape)
    for i in range(3):
        props = f"TAGS\x01TagA\x02KEYS\x01order-{i}\x02UNIQ_KEY\x01U{i}\x02TRAN_MSG\x01true\x02PGROUP\x01PG\x02CLUSTER\x01C"
        for wait in (None, "true"):
            assert half_properties(props, wait, "BenchTx", i) == java_half_properties(props, wait, "BenchTx", i)
