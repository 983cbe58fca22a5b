"""``dispatch.appended.reput_run``: a reput slice of single sends of the SDK's shape (UNIQ_KEY
then the broker's CLUSTER part) dispatched at once -- units per queue by one ``pack_into``,
UNIQ_KEY hashes by C-level maps -- writes the ConsumeQueue and index bytes the decoding reput
writes, and leaves any other slice to the per-record path."""

from __future__ import annotations

import os
import random

import pytest

from pocketmq.remoting.protocol.message import MessageConst
from pocketmq.store import MessageInner, MessageStore
from pocketmq.store.dispatch import dispatcher as dispatcher_mod

from .conftest import BORN_HOST, STORE_HOST, FakeClock, tiny_config
from .test_store_fastpaths import _files

FAR = 2**62
CLUSTER = f"\x02{MessageConst.CLUSTER}\x01DefaultCluster"
#: a UNIQ_KEY's first 24 characters (producer prefix and part of the millisecond)
HEAD = "7F0000010A6B18B4AAC22794"


def _key(i: int, per_ms: int) -> str:
    """The ``i``-th key of a producer sending ``per_ms`` a millisecond (32 hex characters)."""
    return f"{HEAD}{0x2C + i // per_ms:04X}{i & 0xFFFF:04X}"


def _msg(i: int, props: str, queue_id: int, topic: str = "TopicR", sys_flag: int = 0) -> MessageInner:
    return MessageInner(
        topic=topic, body=os.urandom(30 + i % 40), queue_id=queue_id, properties=props,
        sys_flag=sys_flag, born_timestamp=1, born_host=BORN_HOST, store_host=STORE_HOST,
    )  # fmt: skip


def _fill(
    root: str, msgs: list[MessageInner], *, decode: bool, every: int, listener: object, index: bool
) -> MessageStore:
    """``msgs`` put one by one, dispatched every ``every`` puts (``decode``: by the decoding path)."""
    clock = FakeClock()
    store = MessageStore(tiny_config(root, max_index_num=200, message_index_enable=index), clock=clock)
    store.load()
    if listener is not None:
        store.arriving_listener = listener
    for k, m in enumerate(msgs):
        assert store.put_message(m).is_ok
        clock.advance(1 + k % 3)
        if decode:
            store.commitlog.appended.clear()
        if k % every == every - 1:
            store.do_reput()
    store.do_reput()
    return store


def _same_as_decoded(
    tmp_path, msgs: list[MessageInner], every: int, listener: object = None, *, index: bool = True
) -> list[int]:
    """Asserts the fast path's units and index entries (``index``: the index is on) equal the
    decoding path's; returns what each ``reput_run`` call dispatched."""
    runs: list[int] = []
    real = dispatcher_mod.reput_run
    mp = pytest.MonkeyPatch()
    mp.setattr(dispatcher_mod, "reput_run", lambda d, pending: runs.append(real(d, pending)) or runs[-1])
    try:
        fast = _fill(str(tmp_path / "fast"), msgs, decode=False, every=every, listener=listener, index=index)
    finally:
        mp.undo()
    slow = _fill(str(tmp_path / "slow"), msgs, decode=True, every=every, listener=listener, index=index)
    keys = [m.properties_string().partition("UNIQ_KEY\x01")[2].partition("\x02")[0] for m in msgs[-5:]]
    try:
        for key in keys:
            assert len(fast.query_message("TopicR", key, 8, 0, FAR).messages) == index
        assert fast.dispatcher.reput_from_offset == fast.get_max_phy_offset()
    finally:
        fast.close()
        slow.close()
    for sub in ("consumequeue", "index") if index else ("consumequeue",):
        got = _files(str(tmp_path / "fast"), sub)
        assert got and got == _files(str(tmp_path / "slow"), sub), sub
    return runs


@pytest.mark.parametrize(
    ("order", "per_ms", "every", "taken"),
    [
        ("turn", 64, 32, "most"),
        ("random", 64, 40, "most"),
        ("turn", 300, 128, "most"),
        ("turn", 20, 48, "some"),
        ("random", 48, 64, "some"),
        ("turn", 1, 32, "none"),
    ],
)
def test_a_slice_of_single_sends_is_written_whole_as_the_decoding_path_writes(
    tmp_path, order, per_ms, every, taken
):
    """Queues in turn (every p-th record) or at random (the sort), one head in a slice, two or
    more, the ConsumeQueue's 10-unit files filling mid-slice (``put`` one by one) and the
    index's 200-entry files rolling, a queue's first record within a slice: the bytes equal
    the decoding path's. Most slices are taken whole with a head or two; some with more (the
    middle record's head the first's or the last's); none with a new millisecond every record
    (a head each: the per-record path is cheaper)."""
    rnd = random.Random(per_ms * every)
    msgs = []
    for i in range(900):
        qid = i % 4 if order == "turn" else rnd.randrange(5)
        if i >= 300 and order == "turn":
            qid = i % 5  # (queue 4's first record mid-slice)
        msgs.append(_msg(i, f"UNIQ_KEY\x01{_key(i, per_ms)}{CLUSTER}", qid))
    runs = _same_as_decoded(tmp_path, msgs, every)
    if taken == "most":
        assert sum(runs) > len(msgs) // 2  # (not: the first slice, one over a CommitLog file end)
    elif taken == "some":
        assert any(runs)
    else:
        assert runs and not any(runs)


def _odd_props(i: int, shape: int) -> tuple[str, int]:
    """A record that shares the length of the others but not their shape, and its sys flag."""
    key = _key(i, 64)
    return [
        (f"UNIQ_KEY\x01{key[:-4]}\x02T\x01a{CLUSTER}", 0),  # a separator in the key
        (f"UNIQ_KEY\x01{key[:-4]}\x00\x00\x00\x00{CLUSTER}", 0),  # NULs of its own
        (f"UNIQ_KEY\x01{key[:-4]}{CLUSTER}", 0),  # a shorter key
        (f"TAGS\x01t\x02UNIQ_KEY\x01{key[9:]}{CLUSTER}", 0),  # TAGS first
        (f"UNIQ_KEY\x01{key}\x02CLUSTER\x01OtherCluster", 0),  # another CLUSTER part
        (f"UNIQ_KEY\x01{key}{CLUSTER}", 0x8),  # a committed transaction record
        (f"UNIQ_KEY\x01é{key[1:]}{CLUSTER}", 0),  # not ASCII
        (f"UNIQ_KEY\x01{key[:-2]}\x02a{CLUSTER}", 0),  # a separator in the key's tail (its head the others')
        (f"UNIQ_KEY\x01{key[:-1]}\x02{CLUSTER}", 0),  # a separator as the key's last character
    ][shape]


@pytest.mark.parametrize("shape", range(9))
def test_a_slice_holding_another_shape_is_left_to_the_per_record_path(tmp_path, shape):
    """One record of another shape in each slice: the slice is not taken whole (``reput_run``
    returns 0) and the bytes equal the decoding path's."""
    msgs = []
    for i in range(200):
        props, flag = _odd_props(i, shape) if i % 16 == 7 else (f"UNIQ_KEY\x01{_key(i, 64)}{CLUSTER}", 0)
        msgs.append(_msg(i, props, i % 4, sys_flag=flag))
    runs = _same_as_decoded(tmp_path, msgs, 16)
    assert runs and not any(runs)


def test_a_slice_with_a_pull_held_is_left_to_the_per_record_path(tmp_path):
    """A held pull (the listener's ``held_queues`` not empty) is told of each record: such a
    slice takes the per-record path, each notice after its unit."""
    seen: list[tuple[int, int]] = []

    class Held:
        needs_properties = False
        held_queues = {("TopicR", 1): 1}.keys()

        def arriving(self, topic, queue_id, logic_offset, tags_code, store_ts, bitmap, props):
            seen.append((logic_offset, queue_id))

    msgs = [_msg(i, f"UNIQ_KEY\x01{_key(i, 64)}{CLUSTER}", i % 4) for i in range(64)]
    runs = _same_as_decoded(tmp_path, msgs, 16, listener=Held())
    assert not any(runs)
    assert len(seen) == 2 * 64  # (both stores' records, each once)


def test_a_slice_is_written_whole_with_the_index_off(tmp_path):
    """The index off: the units alone, the same bytes, the slices taken whole."""
    msgs = [_msg(i, f"UNIQ_KEY\x01{_key(i, 64)}{CLUSTER}", i % 4) for i in range(400)]
    runs = _same_as_decoded(tmp_path, msgs, 32, index=False)
    assert sum(runs) > len(msgs) // 2
