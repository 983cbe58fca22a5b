"""broker.filter's SQL92 pieces without sockets: property picking from stored records (against
the full decode), the filter objects and the compile cache."""

from __future__ import annotations

import pytest

from pocketmq.broker.filter import (
    RetrySqlMessageFilter,
    SqlFilterCache,
    SqlMessageFilter,
    _Picker,
    record_properties,
)
from pocketmq.remoting.protocol.filter import SqlFilterError, compile_sql
from pocketmq.remoting.protocol.message import encode_message, pack_host_ip

V4 = (pack_host_ip("10.0.0.1"), 10911)
V6 = (pack_host_ip("::1"), 10911)


def record(props: dict[str, str] | str, *, body: bytes = b"body", v6: bool = False) -> bytes:
    return encode_message(
        topic="T", body=body, properties=props, queue_id=0, queue_offset=0, commit_log_offset=0,
        born_timestamp=1, store_timestamp=2, born_host=V6 if v6 else V4, store_host=V6 if v6 else V4,
    )  # fmt: skip


@pytest.mark.parametrize(
    "props",
    [
        {},
        {"a": "1"},
        {"TAGS": "x", "a": "5", "region": "eu"},
        {"aa": "1", "xa": "2", "a_": "3", "b": "a\x01b"},  # names that contain others; \x01 in a value
        {"a": "", "b": "é東"},
        "a\x011\x02a\x012",  # duplicate name: the last wins, as in a map
        "a\x011\x02junk\x02b\x012",  # an entry without \x01 is skipped
        "a\x011\x02",  # trailing separator
    ],
)
@pytest.mark.parametrize("v6", [False, True])
def test_picker_agrees_with_the_full_decode(props: dict[str, str] | str, v6: bool) -> None:
    buf = record(props, v6=v6, body=b"\x02a\x01trap")  # the body never counts
    full = record_properties(buf)
    names = frozenset({"a", "b", "aa", "region", "TAGS", "missing", "junk"})
    assert _Picker(names)(buf) == {k: v for k, v in full.items() if k in names}


def test_sql_message_filter_matches_only_true() -> None:
    f = SqlMessageFilter(compile_sql("a > 3"))
    assert f.is_matched_by_consume_queue(12345) and not f.accepts_all
    assert f.is_matched_by_commit_log(record({"a": "4"}))
    assert not f.is_matched_by_commit_log(record({"a": "3"}))  # FALSE
    assert not f.is_matched_by_commit_log(record({}))  # NULL
    assert not f.is_matched_by_commit_log(record({"a": "x"}))  # evaluation error
    assert not f.is_matched_by_commit_log(record({"a": "4"})[:60])  # a cut record: skipped, no crash


def test_retry_filter_uses_the_original_topics_expression() -> None:
    exprs = {"T": compile_sql("a > 3")}
    f = RetrySqlMessageFilter(exprs.get)
    assert f.is_matched_by_commit_log(record({"RETRY_TOPIC": "T", "a": "9"}))
    assert not f.is_matched_by_commit_log(record({"RETRY_TOPIC": "T", "a": "1"}))
    assert f.is_matched_by_commit_log(record({"RETRY_TOPIC": "Other", "a": "1"}))  # no SQL92 there
    assert f.is_matched_by_commit_log(record({"a": "1"}))  # no RETRY_TOPIC


def test_cache_keeps_filters_and_errors_bounded() -> None:
    cache = SqlFilterCache(max_entries=3)
    first = cache.get("g", "t", "a > 1")
    assert cache.get("g", "t", "a > 1") is first
    for _ in range(2):
        with pytest.raises(SqlFilterError, match="column 4"):
            cache.get("g", "t", "a >")
    assert len(cache) == 2
    cache.get("g", "t", "b > 1")
    cache.get("g", "t", "c > 1")  # full: cleared, then this one
    assert len(cache) == 1


def test_cache_is_bounded_by_expression_text_too() -> None:
    cache = SqlFilterCache(max_entries=100, max_chars=25)
    cache.get("g", "t", "a > 1")  # 5 chars
    cache.get("g", "t", "region IN ('eu', 'us')")  # 22 more: over 25, cleared first
    assert len(cache) == 1
