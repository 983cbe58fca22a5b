from __future__ import annotations

from pocketmq.client.consumer.process_queue import ProcessQueue
from pocketmq.remoting.protocol.message import decode_message, encode_message


def msg(offset: int, body: bytes = b"x" * 10):
    return decode_message(encode_message(topic="T", body=body, queue_offset=offset))


def test_put_and_remove_commit_the_smallest_in_flight() -> None:
    pq = ProcessQueue()
    ms = [msg(i) for i in range(10, 15)]
    assert pq.put_messages(ms) is True  # first put dispatches
    assert pq.put_messages([msg(15)]) is False  # still consuming
    assert pq.msg_count == 6 and pq.msg_size == 60
    assert pq.max_span() == 5
    assert pq.remove_messages([ms[1], ms[2]]) == 10  # 10 still in flight
    assert pq.remove_messages([ms[0]]) == 13
    assert pq.remove_messages([ms[3], ms[4], msg(15)]) == 16  # empty → max + 1
    assert pq.msg_count == 0 and pq.msg_size == 0
    assert pq.remove_messages([msg(1)]) == -1


def test_duplicates_are_ignored_and_out_of_order_inserts_resort() -> None:
    pq = ProcessQueue()
    pq.put_messages([msg(5), msg(6)])
    pq.put_messages([msg(6), msg(3)])
    assert list(pq.msg_tree) == [3, 5, 6]
    assert pq.msg_count == 3
    assert pq.min_offset() == 3


def test_orderly_take_commit_and_consume_again() -> None:
    pq = ProcessQueue()
    pq.put_messages([msg(i) for i in range(5)])
    batch = pq.take_messages(2)
    assert [m.queue_offset for m in batch] == [0, 1]
    pq.make_consume_again(batch)
    assert list(pq.msg_tree) == [0, 1, 2, 3, 4]
    batch = pq.take_messages(3)
    assert pq.commit() == 3
    assert pq.msg_count == 2
    assert [m.queue_offset for m in pq.take_messages(10)] == [3, 4]
    assert pq.commit() == 5
    assert pq.take_messages(1) == [] and pq.consuming is False
    assert pq.commit() == -1


def test_rollback_and_clear() -> None:
    pq = ProcessQueue()
    pq.put_messages([msg(i) for i in range(3)])
    pq.take_messages(2)
    pq.rollback()
    assert list(pq.msg_tree) == [0, 1, 2] and not pq.consuming_tree
    pq.clear()
    assert pq.msg_count == 0 and not pq.has_temp_message()


def test_expiry() -> None:
    pq = ProcessQueue(now_ms=1000)
    assert not pq.is_lock_expired(31_000)
    assert pq.is_lock_expired(31_001)
    assert not pq.is_pull_expired(121_000)
    assert pq.is_pull_expired(121_001)
    info = pq.info()
    assert info["cachedMsgCount"] == 0 and info["droped"] is False


def test_put_after_cached_ones_mixed_with_older_and_duplicates() -> None:
    # Offsets above every cached key take the append path; an older one, a duplicate within
    # the batch and one being consumed in order take the lookups (and a resort).
    pq = ProcessQueue()
    assert pq.put_messages([msg(5), msg(6)])
    assert not pq.put_messages([msg(7), msg(7), msg(3), msg(9)])
    assert list(pq.msg_tree) == [3, 5, 6, 7, 9]
    assert (pq.msg_count, pq.msg_size, pq.queue_offset_max) == (5, 50, 9)
    assert [m.queue_offset for m in pq.take_messages(2)] == [3, 5]
    pq.put_messages([msg(5), msg(10)])  # 5 is being consumed: not cached again
    assert list(pq.msg_tree) == [6, 7, 9, 10]
    assert list(pq.consuming_tree) == [3, 5]
    assert pq.msg_count == 6
