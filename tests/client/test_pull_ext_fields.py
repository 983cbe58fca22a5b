"""``PullRequest.ext_fields``: a push consumer's PULL_MESSAGE header, rendered once per queue and
copied with its two offsets: the same fields, order and bytes as the header object's."""

from __future__ import annotations

from pocketmq.client.consumer.process_queue import ProcessQueue
from pocketmq.client.consumer.pull_service import PullRequest
from pocketmq.client.consumer.subscription import new_subscription
from pocketmq.client.message import MessageQueue
from pocketmq.remoting.protocol.command import RemotingCommand
from pocketmq.remoting.protocol.headers import PullMessageRequestHeader


def frame(ext: dict[str, str]) -> bytes:
    return RemotingCommand(11, 7, 0, None, ext, None).encode()


def test_the_copied_fields_are_the_rendered_ones_byte_for_byte() -> None:
    req = PullRequest("CG", MessageQueue("T", "broker-a", 3), ProcessQueue(), 0)
    sub = new_subscription("T", "TagA || TagB", "TAG")
    other = new_subscription("T", "*", "TAG")
    cases = [
        (sub, 3, 0, 32, 15000, 0),
        (sub, 3, 17, 32, 15000, 18),  # the offsets move: the template is copied
        (sub, 3, 10**12, 32, 15000, 10**12 + 1),
        (sub, 2, 5, 32, 15000, 6),  # another flag: rendered again
        (other, 2, 5, 64, 20000, 6),  # a new subscription, other settings
    ]
    for sub_, flag, commit, batch, suspend, offset in cases:
        req.next_offset = offset
        got = req.ext_fields(sub_, flag, commit, batch, suspend)
        # the wire names in the header class's order (Java's PullMessageRequestHeader)
        assert list(got.items()) == [
            ("consumerGroup", "CG"),
            ("topic", "T"),
            ("queueId", "3"),
            ("queueOffset", str(offset)),
            ("maxMsgNums", str(batch)),
            ("sysFlag", str(flag)),
            ("commitOffset", str(commit)),
            ("suspendTimeoutMillis", str(suspend)),
            ("subscription", sub_.sub_string),
            ("subVersion", str(sub_.sub_version)),
            ("expressionType", "TAG"),
        ]
        # and what the header object renders for the same values, to the byte
        assert frame(got) == frame(PullMessageRequestHeader.from_ext_fields(got).to_ext_fields())


def test_each_pull_gets_its_own_dict() -> None:
    req = PullRequest("CG", MessageQueue("T", "broker-a", 0), ProcessQueue(), 1)
    sub = new_subscription("T", "*", "TAG")
    first = req.ext_fields(sub, 3, 0, 32, 15000)
    req.next_offset = 2
    second = req.ext_fields(sub, 3, 1, 32, 15000)
    assert first["queueOffset"] == "1" and first["commitOffset"] == "0"
    assert second["queueOffset"] == "2" and second["commitOffset"] == "1"
