from __future__ import annotations

import enum
import json
from typing import Any

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from pocketmq.remoting.protocol import fastjson
from pocketmq.remoting.protocol.bodies import MessageQueue
from pocketmq.remoting.protocol.fastjson import BodyFormatError, FrozenDict


def test_valid_json_takes_the_fast_path() -> None:
    assert fastjson.loads(b'{"a":[1,2.5,true,null,"x"]}') == {"a": [1, 2.5, True, None, "x"]}
    assert fastjson.loads('"\\u00e9"') == "é"


def test_unquoted_integer_keys() -> None:
    assert fastjson.loads('{0:"10.0.0.1:10911",1:"10.0.0.2:10911"}') == {
        0: "10.0.0.1:10911",
        1: "10.0.0.2:10911",
    }
    assert fastjson.loads(b'{"offsetTable":{"T@G":{0:100,1:37}}}') == {
        "offsetTable": {"T@G": {0: 100, 1: 37}}
    }
    assert fastjson.loads("{-1:2, 1.5:3}") == {-1: 2, 1.5: 3}


def test_object_as_key() -> None:
    text = '{"offsetTable":{{"brokerName":"b","queueId":0,"topic":"t"}:{"minOffset":1},{"brokerName":"b","queueId":1,"topic":"t"}:{"minOffset":2}}}'
    table = fastjson.loads(text)["offsetTable"]
    key = FrozenDict({"brokerName": "b", "queueId": 0, "topic": "t"})
    assert table[key] == {"minOffset": 1}
    assert len(table) == 2
    assert hash(key) == hash(FrozenDict({"topic": "t", "queueId": 0, "brokerName": "b"}))
    assert key == {"brokerName": "b", "queueId": 0, "topic": "t"}
    assert MessageQueue.from_json(key) == MessageQueue("t", "b", 0)


def test_nested_and_array_keys_are_frozen() -> None:
    out = fastjson.loads('{{"a":{"b":[1,2]}}:1, [1,[2]]:2}')
    keys = list(out)
    assert isinstance(keys[0], FrozenDict)
    assert isinstance(keys[0]["a"], FrozenDict)
    assert keys[0]["a"]["b"] == (1, 2)
    assert keys[1] == (1, (2,))


def test_whitespace_and_bom() -> None:
    assert fastjson.loads(' \n\t{ 0 : "a" , 1:"b" } \r\n') == {0: "a", 1: "b"}
    assert fastjson.loads("\ufeff{0:1}") == {0: 1}


@pytest.mark.parametrize(
    "bad",
    [
        "",
        "{",
        "{0:}",
        "{0 1}",
        "[1,2",
        '{"a":1}}',
        "{0:1,}",
        "01",
        "nul",
        "{'a':1}",
        '"unterminated',
        b"\xff\xfe{0:1}",
        "{0:1} trailing",
    ],
)
def test_garbage_is_a_value_error(bad: str | bytes) -> None:
    with pytest.raises(ValueError):
        fastjson.loads(bad)


def test_limits() -> None:
    with pytest.raises(ValueError, match="exceeds"):
        fastjson.loads(b"[" + b"1," * 100 + b"1]", max_size=50)
    deep = "{0:" * 150 + "1" + "}" * 150
    with pytest.raises(ValueError, match="nesting"):
        fastjson.loads(deep)
    assert fastjson.loads("{0:" * 20 + "1" + "}" * 20, max_depth=25) is not None
    very_deep = "[" * 100_000 + "]" * 100_000
    with pytest.raises(ValueError):
        fastjson.loads(very_deep)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200))
def test_random_bytes_never_hang_or_crash(data: bytes) -> None:
    try:
        fastjson.loads(data)
    except ValueError:
        pass


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet='{}[]:,"0123456789-.eEtrufalsn \\abc', max_size=80))
def test_json_alphabet_garbage_never_hangs(text: str) -> None:
    try:
        fastjson.loads(text)
    except ValueError:
        pass


json_scalars = st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | st.text(max_size=10)
json_values = st.recursive(
    json_scalars,
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(st.text(max_size=6) | st.integers(-1000, 1000), children, max_size=4)
    ),
    max_leaves=20,
)


def _normalise(value: Any) -> Any:
    """Quoted int keys come back as strings."""
    if isinstance(value, dict):
        return {str(k): _normalise(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_normalise(v) for v in value]
    return value


@settings(max_examples=200, deadline=None)
@given(json_values)
def test_roundtrip_all_forms(value: Any) -> None:
    if isinstance(value, dict) and any(isinstance(k, int) for k in value):
        # a dict mixing 1 and "1" cannot survive quoting; skip those shapes
        keys = [str(k) for k in value]
        assume(len(set(keys)) == len(keys))
    try:
        bare = fastjson.loads(fastjson.dumps(value, quote_int_keys=False))
    except ValueError:
        assume(False)  # nested duplicate keys after quoting, see above
    assert _normalise(bare) == _normalise(value)
    assert _normalise(fastjson.loads(fastjson.dumpb(value))) == _normalise(value)
    assert _normalise(fastjson.loads(fastjson.dumps(value, pretty=True))) == _normalise(value)


def test_dump_int_key_forms() -> None:
    addrs = {"brokerAddrs": {1: "b", 0: "a"}}
    assert fastjson.dumps(addrs) == '{"brokerAddrs":{"0":"a","1":"b"}}'
    assert fastjson.dumps(addrs, quote_int_keys=False) == '{"brokerAddrs":{0:"a",1:"b"}}'
    assert json.loads(fastjson.dumps(addrs)) == {"brokerAddrs": {"0": "a", "1": "b"}}


def test_dump_message_queue_keys_and_values() -> None:
    table = {MessageQueue("t", "b", 1): 5, MessageQueue("t", "b", 0): 4}
    expected = '{"offsetTable":{{"brokerName":"b","queueId":0,"topic":"t"}:4,{"brokerName":"b","queueId":1,"topic":"t"}:5}}'
    assert fastjson.dumps({"offsetTable": table}) == expected
    assert (
        fastjson.dumps({"mq": MessageQueue("t", "b", 0)})
        == '{"mq":{"brokerName":"b","queueId":0,"topic":"t"}}'
    )
    back = fastjson.loads(expected)["offsetTable"]
    assert {MessageQueue.from_json(k): v for k, v in back.items()} == table


def test_dump_misc_types() -> None:
    class Color(enum.Enum):
        RED = "RED"

    assert (
        fastjson.dumps({"c": Color.RED, "s": {3, 1}, "f": 0.0, "t": (1, 2)})
        == '{"c":"RED","f":0.0,"s":[1,3],"t":[1,2]}'
    )
    assert fastjson.dumps({"nan": float("nan")}, quote_int_keys=False) == '{"nan":null}'
    assert fastjson.dumps({"u": 'é\n"'}) == '{"u":"é\\n\\""}'
    with pytest.raises(TypeError):
        fastjson.dumps({"x": object()})
    with pytest.raises(TypeError):
        fastjson.dumps({"x": object()}, quote_int_keys=False)


def test_pretty_uses_tabs() -> None:
    assert fastjson.dumps({"a": [1], "b": {}}, pretty=True) == '{\n\t"a":[\n\t\t1\n\t],\n\t"b":{}\n}'


def test_field_readers() -> None:
    obj = {"i": "12", "f": "1.5", "b": "TRUE", "s": 7, "n": None, "l": [1], "d": {"k": 1}, "bad": [1]}
    assert fastjson.get_int(obj, "i") == 12
    assert fastjson.get_int(obj, "missing", 3) == 3
    assert fastjson.get_int({"x": 4.0}, "x") == 4
    assert fastjson.get_float(obj, "f") == 1.5
    assert fastjson.get_bool(obj, "b") is True
    assert fastjson.get_bool({"x": 0}, "x") is False
    assert fastjson.get_str(obj, "s") == "7"
    assert fastjson.get_str(obj, "n", "dflt") == "dflt"
    assert fastjson.get_list(obj, "l") == [1]
    assert fastjson.get_list(obj, "missing") == []
    assert fastjson.get_dict(obj, "d") == {"k": 1}
    assert fastjson.get_str({"old": "v"}, "new", aliases=("old",)) == "v"
    for call in (
        lambda: fastjson.get_int(obj, "bad"),
        lambda: fastjson.get_int({"x": "1.5"}, "x"),
        lambda: fastjson.get_int({"x": 5}, "x", max_value=4),
        lambda: fastjson.get_str(obj, "missing"),
        lambda: fastjson.get_str(obj, "bad"),
        lambda: fastjson.get_bool({"x": "yes"}, "x"),
        lambda: fastjson.get_float({"x": "abc"}, "x"),
        lambda: fastjson.get_list({"x": 1}, "x"),
        lambda: fastjson.get_dict({"x": []}, "x"),
    ):
        with pytest.raises(BodyFormatError):
            call()
    with pytest.raises(BodyFormatError) as info:
        fastjson.get_int({"queueId": "x"}, "queueId")
    assert info.value.field == "queueId"
    assert info.value.remark.startswith("queueId:")


def test_decode_object() -> None:
    assert fastjson.decode_object(b"{0:1}", "x") == {0: 1}
    with pytest.raises(BodyFormatError, match="unparseable"):
        fastjson.decode_object(b"{", "body")
    with pytest.raises(BodyFormatError, match="expected an object"):
        fastjson.decode_object(b"[1]", "body")
