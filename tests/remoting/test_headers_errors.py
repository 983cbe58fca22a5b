"""Typed headers (generated codecs vs the generic path) and the response-error registry."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pocketmq.remoting.protocol import errors, headers
from pocketmq.remoting.protocol.codes import ResponseCode
from pocketmq.remoting.protocol.errors import HeaderFieldError, ResponseError
from pocketmq.remoting.protocol.header_codec import CommandHeader, _generic_parse, header

ALL_HEADERS = [
    obj
    for obj in vars(headers).values()
    if isinstance(obj, type) and issubclass(obj, CommandHeader) and obj is not CommandHeader
]


def test_send_v2_short_names_roundtrip() -> None:
    ext = {
        "a": "PG",
        "b": "TopicTest",
        "c": "TBW102",
        "d": "4",
        "e": "3",
        "f": "0",
        "g": "1690000000000",
        "h": "0",
        "i": "TAGS\u0001TagA\u0002KEYS\u0001k1",
        "j": "0",
        "k": "false",
        "l": "16",
        "m": "false",
    }
    h = headers.SendMessageRequestHeader.from_ext_fields_v2(ext)
    assert h.producer_group == "PG" and h.topic == "TopicTest" and h.queue_id == 3
    assert h.born_timestamp == 1690000000000 and h.max_reconsume_times == 16 and h.batch is False
    assert h.to_ext_fields_v2() == ext
    v1 = h.to_ext_fields()
    assert v1["producerGroup"] == "PG" and v1["bornTimestamp"] == "1690000000000"
    assert headers.SendMessageRequestHeader.from_ext_fields(v1) == h


def test_java_boolean_and_optional_rules() -> None:
    h = headers.PullMessageRequestHeader.from_ext_fields(
        {
            "consumerGroup": "G",
            "topic": "T",
            "queueId": "0",
            "queueOffset": "-5",
            "maxMsgNums": "32",
            "sysFlag": "3",
            "commitOffset": "0",
            "suspendTimeoutMillis": "15000",
            "extra": "ignored",
        }
    )
    assert h.subscription is None and h.sub_version == 0 and h.queue_offset == -5
    assert "subscription" not in h.to_ext_fields()
    d = headers.DeleteSubscriptionGroupRequestHeader.from_ext_fields(
        {"groupName": "G", "removeOffset": "TRUE"}
    )
    assert d.remove_offset is True
    d = headers.DeleteSubscriptionGroupRequestHeader.from_ext_fields(
        {"groupName": "G", "removeOffset": "yes"}
    )
    assert d.remove_offset is False  # Boolean.parseBoolean
    d = headers.DeleteSubscriptionGroupRequestHeader.from_ext_fields({"groupName": "G", "removeOffset": "1"})
    assert d.remove_offset is True  # the C++ client writes booleans as 1/0


@pytest.mark.parametrize(
    ("ext", "fragment"),
    [
        ({"topic": "T"}, "queueId"),
        ({"topic": "T", "queueId": "x1"}, "not a number"),
        ({"topic": "T", "queueId": "2147483648"}, "out of range"),
        ({"topic": "T", "queueId": "1_0"}, "out of range"),
    ],
)
def test_bad_fields_name_the_field(ext: dict[str, str], fragment: str) -> None:
    with pytest.raises(HeaderFieldError) as info:
        headers.GetMaxOffsetRequestHeader.from_ext_fields(ext)
    assert fragment in str(info.value)
    assert info.value.response_code == ResponseCode.SYSTEM_ERROR


@pytest.mark.parametrize("cls", ALL_HEADERS, ids=lambda c: c.__name__)
def test_generated_codec_matches_generic_path(cls: type[CommandHeader]) -> None:
    sample: dict[str, str] = {}
    for _attr, name, _v2, kind, _req, _i32 in cls.FIELD_TABLE:
        sample[name] = {"int": "42", "bool": "true", "str": "s"}[kind]
    fast = cls.from_ext_fields(sample)
    slow = _generic_parse(cls, sample, v2=False)
    assert fast == slow
    assert fast.to_ext_fields() == sample
    assert CommandHeader.to_ext_fields(fast) == sample


def _outcome(parse: object, ext: dict[str, str]) -> object:
    try:
        return parse(ext)  # type: ignore[operator]
    except HeaderFieldError as exc:
        return str(exc)


@pytest.mark.parametrize(
    "text",
    ["0", "3", "-1", "-0", "007", "+3", " 3", "3 ", "1_0", "1023", "1024", "-2", "2147483648", "x", "",
     "true", "false", "TRUE", "1", "yes"],
)  # fmt: skip
def test_generated_int_and_bool_parsing_matches_generic_path(text: str) -> None:
    """The small-int table and the "true"/"false" shortcuts decide exactly as the checked path."""
    cls = headers.SendMessageRequestHeader
    base = {"a": "G", "b": "T", "c": "TBW102", "d": "4", "e": "3", "f": "0", "g": "1", "h": "0"}
    for key in ("d", "e", "g", "j", "k", "m"):
        ext = {**base, key: text}
        fast = _outcome(cls.from_ext_fields_v2, ext)
        slow = _outcome(lambda e: _generic_parse(cls, e, v2=True), ext)
        assert fast == slow, (key, text)
    missing = {k: v for k, v in base.items() if k != "e"}
    assert _outcome(cls.from_ext_fields_v2, missing) == _outcome(
        lambda e: _generic_parse(cls, e, v2=True), missing
    )


_FIELD_VALUES = st.one_of(
    st.sampled_from(["0", "7", "-1", "x", "", "1_0", "2147483648", "true", "false", "1", "s"]),
    st.none(),
    st.just(_ABSENT := object()),
)


@given(st.data())
def test_generated_parse_reports_the_first_bad_field_as_the_generic_path(data: st.DataObject) -> None:
    """Several missing, None or unparsable fields at once: the generated parser (required
    fields read together) fails on the same field, with the same text, as a field-by-field parse."""
    cls = data.draw(st.sampled_from(ALL_HEADERS))
    v2 = data.draw(st.booleans()) and any(row[2] for row in cls.FIELD_TABLE)
    ext: dict[str, str] = {}
    for _attr, name, v2name, _kind, _req, _i32 in cls.FIELD_TABLE:
        value = data.draw(_FIELD_VALUES)
        if value is not _ABSENT:
            ext[v2name if v2 and v2name else name] = value  # type: ignore[assignment]
    parse = cls.from_ext_fields_v2 if v2 else cls.from_ext_fields
    assert _outcome(parse, ext) == _outcome(lambda e: _generic_parse(cls, e, v2=v2), ext)


@given(st.integers(-(2**63), 2**63 - 1))
def test_long_fields_roundtrip(value: int) -> None:
    h = headers.ViewMessageRequestHeader(offset=value)
    assert headers.ViewMessageRequestHeader.from_ext_fields(h.to_ext_fields()).offset == value


def test_registry_maps_every_code_once() -> None:
    for code in ResponseCode:
        if code == ResponseCode.SUCCESS:
            continue
        cls = errors.for_code(code)
        assert cls is not errors.UnknownResponseError, code
        assert cls.code == code
    assert errors.for_code(12345) is errors.UnknownResponseError
    err = errors.error_from_response(12345, "strange", addr="1.2.3.4:10911")
    assert err.response_code == 12345 and "1.2.3.4:10911" in str(err)


def test_duplicate_code_is_rejected_at_definition() -> None:
    with pytest.raises(TypeError):

        class Dup(ResponseError):
            code = ResponseCode.TOPIC_NOT_EXIST


@pytest.mark.parametrize(
    ("code", "retriable", "refresh"),
    [
        (ResponseCode.SYSTEM_ERROR, True, False),
        (ResponseCode.SYSTEM_BUSY, True, False),
        (ResponseCode.TOPIC_NOT_EXIST, True, True),
        (ResponseCode.SERVICE_NOT_AVAILABLE, True, True),
        (ResponseCode.NO_PERMISSION, True, True),
        (ResponseCode.NO_BUYER_ID, True, False),
        (ResponseCode.NOT_IN_CURRENT_UNIT, True, False),
        (ResponseCode.FLOW_CONTROL, True, False),
        (ResponseCode.MESSAGE_ILLEGAL, False, False),
        (ResponseCode.REQUEST_CODE_NOT_SUPPORTED, False, False),
        (ResponseCode.FLUSH_DISK_TIMEOUT, False, False),
        (ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, False, False),
    ],
)
def test_policy_flags(code: int, retriable: bool, refresh: bool) -> None:
    cls = errors.for_code(code)
    assert (cls.retriable, cls.refresh_route) == (retriable, refresh)


def test_builtin_bases_for_generic_handlers() -> None:
    assert issubclass(errors.RemotingTimeoutError, TimeoutError)
    assert issubclass(errors.RemotingConnectError, ConnectionError)


def test_header_without_fields_parses() -> None:
    @header
    class Empty(CommandHeader):
        pass

    assert Empty.from_ext_fields({"x": "1"}) == Empty.from_ext_fields(None) == Empty()
