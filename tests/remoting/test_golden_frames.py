"""Frames captured from the real C++ client (rocketmq 0.4.4 wheel) and ali-ons 3.12.0.

Each file under tests/data/frames/ is one request frame, byte for byte as the client wrote it
(tests/interop/capture.py made them). We must decode every one exactly (all bytes consumed,
the header fields the client meant), parse the typed header it carries, and our reply to it
must re-encode byte-stably.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest

from pocketmq.remoting.protocol import headers as h
from pocketmq.remoting.protocol.codes import LanguageCode, RequestCode, ResponseCode
from pocketmq.remoting.protocol.command import RemotingCommand
from pocketmq.remoting.protocol.frame import FrameDecoder

FRAMES = Path(__file__).resolve().parents[1] / "data" / "frames"
ALL = sorted(FRAMES.glob("*.bin"))

# request code -> header class it must parse into
HEADER_OF = {
    RequestCode.GET_ROUTEINFO_BY_TOPIC: h.GetRouteInfoRequestHeader,
    RequestCode.SEND_MESSAGE: h.SendMessageRequestHeader,
    RequestCode.PULL_MESSAGE: h.PullMessageRequestHeader,
    RequestCode.QUERY_CONSUMER_OFFSET: h.QueryConsumerOffsetRequestHeader,
    RequestCode.UPDATE_CONSUMER_OFFSET: h.UpdateConsumerOffsetRequestHeader,
    RequestCode.GET_MAX_OFFSET: h.GetMaxOffsetRequestHeader,
    RequestCode.CONSUMER_SEND_MSG_BACK: h.ConsumerSendMsgBackRequestHeader,
    RequestCode.GET_CONSUMER_LIST_BY_GROUP: h.GetConsumerListByGroupRequestHeader,
    RequestCode.UNREGISTER_CLIENT: h.UnregisterClientRequestHeader,
}


def decode_one(path: Path) -> RemotingCommand:
    data = path.read_bytes()
    (length,) = struct.unpack_from(">i", data)
    assert length == len(data) - 4, "the capture holds exactly one frame"
    dec = FrameDecoder()
    (cmd,) = dec.feed(data)
    assert dec.buffered == 0
    return cmd


def test_both_clients_captured() -> None:
    names = {p.name for p in ALL}
    assert "cpp_get_routeinfo_by_topic.bin" in names
    assert "alions_get_routeinfo_by_topic.bin" in names
    assert len(ALL) >= 20


@pytest.mark.parametrize("path", ALL, ids=lambda p: p.stem)
def test_every_capture_decodes_and_parses(path: Path) -> None:
    cmd = decode_one(path)
    assert not cmd.is_response
    header_cls = HEADER_OF.get(cmd.code)
    if cmd.code == RequestCode.SEND_MESSAGE_V2:
        parsed = h.SendMessageRequestHeader.from_ext_fields_v2(cmd.ext_fields)
        assert parsed.topic
    elif header_cls is not None:
        header_cls.from_ext_fields(cmd.ext_fields)
    if path.name.startswith("cpp_"):
        assert cmd.language == LanguageCode.CPP
        # C++ sends empty credentials; they must not survive decoding.
        assert "AccessKey" not in (cmd.ext_fields or {})
    else:
        assert cmd.language == LanguageCode.JAVA and cmd.version == 121
    if cmd.body and cmd.code in (
        RequestCode.HEART_BEAT,
        RequestCode.LOCK_BATCH_MQ,
        RequestCode.UNLOCK_BATCH_MQ,
    ):
        json.loads(cmd.body)


def test_cpp_route_request_exact_fields() -> None:
    cmd = decode_one(FRAMES / "cpp_get_routeinfo_by_topic.bin")
    assert cmd.code == RequestCode.GET_ROUTEINFO_BY_TOPIC
    assert cmd.flag == 0 and cmd.remark is None or cmd.remark == ""
    assert cmd.ext_fields is not None and cmd.ext_fields["topic"] == "TopicTest"
    assert cmd.ext_fields["OnsChannel"] == "ALIYUN"


def test_alions_route_request_exact_fields() -> None:
    cmd = decode_one(FRAMES / "alions_get_routeinfo_by_topic.bin")
    assert (cmd.code, cmd.opaque, cmd.flag, cmd.version) == (105, 1, 0, 121)
    assert cmd.ext_fields == {"topic": "TopicTest"}


def test_cpp_numbers_in_ext_fields_become_java_strings() -> None:
    cmd = decode_one(FRAMES / "cpp_pull_message.bin")
    assert cmd.ext_fields is not None
    assert cmd.ext_fields["maxMsgNums"] == "32" and cmd.ext_fields["sysFlag"] == "6"
    pull = h.PullMessageRequestHeader.from_ext_fields(cmd.ext_fields)
    assert pull.max_msg_nums == 32 and pull.suspend_timeout_millis == 15000


def test_cpp_batch_flag_is_one() -> None:
    cmd = decode_one(FRAMES / "cpp_send_message_batch.bin")
    header = h.SendMessageRequestHeader.from_ext_fields(cmd.ext_fields)
    assert header.batch is True and header.unit_mode is False


@pytest.mark.parametrize("path", ALL, ids=lambda p: p.stem)
def test_reply_reencodes_byte_stably(path: Path) -> None:
    request = decode_one(path)
    reply = RemotingCommand.response_to(
        request, ResponseCode.SUCCESS, None, {"msgId": "7F00000100002A9F0000000000000000", "queueOffset": "0"}
    )
    wire = reply.encode()
    (again,) = FrameDecoder().feed(wire)
    assert again.encode() == wire
    header = json.loads(wire[8:])
    assert header["opaque"] == request.opaque and header["flag"] == 1
    assert all(isinstance(v, str) for v in header["extFields"].values())
