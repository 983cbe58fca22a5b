from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pocketmq.remoting.common import properties
from pocketmq.remoting.common.properties import PropertiesError, PropertyEntry

BROKER_CONF = """\
# comment
! bang comment
brokerClusterName = DefaultCluster
brokerName=broker-a
brokerId:0
deleteWhen  04
fileReservedTime = 48   \t
brokerRole=ASYNC_MASTER
flushDiskType = ASYNC_FLUSH

   storePathRootDir=/data/store
namesrvAddr=10.0.0.1:9876;\\
    10.0.0.2:9876
"""


def test_rocketmq_broker_conf() -> None:
    props = properties.loads(BROKER_CONF)
    assert props == {
        "brokerClusterName": "DefaultCluster",
        "brokerName": "broker-a",
        "brokerId": "0",
        "deleteWhen": "04",
        "fileReservedTime": "48",
        "brokerRole": "ASYNC_MASTER",
        "flushDiskType": "ASYNC_FLUSH",
        "storePathRootDir": "/data/store",
        "namesrvAddr": "10.0.0.1:9876;10.0.0.2:9876",
    }


def test_entries_keep_line_numbers_and_duplicates() -> None:
    entries = properties.parse_entries("a=1\n#x\n\nb=2\\\n  3\nc=4\na=5\n")
    assert entries == [
        PropertyEntry("a", "1", 1),
        PropertyEntry("b", "23", 4),
        PropertyEntry("c", "4", 6),
        PropertyEntry("a", "5", 7),
    ]
    assert properties.loads("a=1\na=5\n") == {"a": "5"}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("key=value", {"key": "value"}),
        ("key:value", {"key": "value"}),
        ("key value", {"key": "value"}),
        ("key\t=\tvalue", {"key": "value"}),
        ("key = a=b:c", {"key": "a=b:c"}),
        ("key", {"key": ""}),
        ("key=", {"key": ""}),
        ("  key  ", {"key": ""}),
        ("k\\ e\\=y\\:=v", {"k e=y:": "v"}),
        ("key=\\u00e9t\\u00E9", {"key": "été"}),
        ("key=tab\\there\\nnl", {"key": "tab\there\nnl"}),
        ("key=\\q", {"key": "q"}),
        ("key=a\\\\", {"key": "a\\"}),
        ("key=a\\ ", {"key": "a "}),
        ("key=a\\\\ ", {"key": "a\\"}),
        ("key=\\uD83D\\uDE00", {"key": "\U0001f600"}),
        ("a=1\r\nb=2\rc=3", {"a": "1", "b": "2", "c": "3"}),
        ("a=x\\\n# not a comment\n", {"a": "x# not a comment"}),
        ("#a=1\\\nb=2", {"b": "2"}),
        ("a=1\\", {"a": "1"}),
        ("a=\\\n\nb=2", {"a": "", "b": "2"}),
    ],
)
def test_java_properties_syntax(text: str, expected: dict[str, str]) -> None:
    assert properties.loads(text) == expected


@pytest.mark.parametrize("bad", ["k=\\u12", "k=\\uZZZZ", "\\u00=1"])
def test_malformed_unicode_escape(bad: str) -> None:
    with pytest.raises(PropertiesError) as info:
        properties.loads("ok=1\n" + bad)
    assert info.value.line == 2
    assert "line 2" in str(info.value)


def test_bytes_are_utf8() -> None:
    assert properties.loads("k=caf\u00e9".encode()) == {"k": "café"}
    with pytest.raises(UnicodeDecodeError):
        properties.loads(b"k=\xff")


def test_dumps_escapes_what_needs_escaping() -> None:
    text = properties.dumps({"a key": " lead", "x=y": "a:b#c!", "t": "x\ty\n", "u": "é", "e": ""})
    assert text.splitlines() == [
        "a\\ key=\\ lead",
        "x\\=y=a\\:b\\#c\\!",
        "t=x\\ty\\n",
        "u=\\u00E9",
        "e=",
    ]
    assert properties.dumps({}, header="none") == "#none\n"
    assert properties.dumps({}) == ""
    assert properties.dumps({"k": "v"}, header="h1\nh2") == "#h1\n#h2\nk=v\n"


text_chars = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=30)


@given(st.dictionaries(text_chars.filter(bool), text_chars, max_size=8))
def test_roundtrip(props: dict[str, str]) -> None:
    assert properties.loads(properties.dumps(props)) == props


def test_file_load_and_dump(tmp_path: Path) -> None:
    path = tmp_path / "x.conf"
    properties.dump({"listenPort": "9876", "name": "é"}, path, header="generated")
    assert properties.load(path) == {"listenPort": "9876", "name": "é"}
    path.write_bytes(b"\xef\xbb\xbfa=1\n")  # BOM from Windows editors
    assert properties.load(path) == {"a": "1"}
