"""``PullRequest.ext_fields``: a push consumer's PULL_MESSAGE header, rendered once per queue and
copied with its two offsets: the same fields, order and bytes as the header object's."""

from __future__ import annotations

from pocketmq.client.consumer.process_queue import ProcessQueue
from pocketmq.client.consumer.pull_service import PullRequest
from pocketmq.client.consumer.subscription import new_subscription
from pocketmq.client.message import MessageQueue
from pocketmq.remoting.protocol.command import RemotingCommand
from pocketmq.remoting.protocol.headers import PullMessageRequestHeader


def rendered(req: PullRequest, sub, flag: int, commit: int, batch: int, suspend: int) -> dict[str, str]:
    return PullMessageRequestHeader(
        consumer_group=req.consumer_group,
        topic=req.message_queue.topic,
        queue_id=req.message_queue.queue_id,
        queue_offset=req.next_offset,
        max_msg_nums=batch,
        sys_flag=flag,
        commit_offset=commit,
        suspend_timeout_millis=suspend,
        subscription=sub.sub_string,
        sub_version=sub.sub_version,
        expression_type=sub.expression_type,
    ).to_ext_fields()


def frame(ext: dict[str, str]) -> bytes:
    return RemotingCommand(11, 7, 0, None, ext, None).encode()


def test_the_copied_fields_are_the_rendered_ones_byte_for_byte() -> None:
    req = PullRequest("CG", MessageQueue("T", "broker-a", 3), ProcessQueue(), 0)
    sub = new_subscription("T", "TagA || TagB", "TAG")
    cases = [
        (sub, 3, 0, 32, 15000, 0),
        (sub, 3, 17, 32, 15000, 18),  # the offsets move: the template is copied
        (sub, 3, 10**12, 32, 15000, 10**12 + 1),
        (sub, 2, 5, 32, 15000, 6),  # another flag: rendered again
        (new_subscription("T", "*", "TAG"), 2, 5, 64, 20000, 6),  # a new subscription, settings
    ]
    for sub_, flag, commit, batch, suspend, offset in cases:
        req.next_offset = offset
        got = req.ext_fields(sub_, flag, commit, batch, suspend)
        want = rendered(req, sub_, flag, commit, batch, suspend)
        assert list(got.items()) == list(want.items())
        assert frame(got) == frame(want)


def test_each_pull_gets_its_own_dict() -> None:
    req = PullRequest("CG", MessageQueue("T", "broker-a", 0), ProcessQueue(), 1)
    sub = new_subscription("T", "*", "TAG")
    first = req.ext_fields(sub, 3, 0, 32, 15000)
    req.next_offset = 2
    second = req.ext_fields(sub, 3, 1, 32, 15000)
    assert first["queueOffset"] == "1" and first["commitOffset"] == "0"
    assert second["queueOffset"] == "2" and second["commitOffset"] == "1"
