"""Offsets canonicalisation and option validation (no Spark, no sockets)."""

from __future__ import annotations

import json

import pytest

from pocketmq.remoting.protocol.heartbeat import MessageQueue
from pocketmq.spark.errors import InvalidOptionError
from pocketmq.spark.offsets import EARLIEST, LATEST, from_json_dict, to_json, to_json_dict
from pocketmq.spark.options import DEFAULT_PULL_GROUP, canonical_options, parse_options

NS = "127.0.0.1:9876"


# ----------------------------------------------------------------------------- offsets


def test_canonical_dict_has_sorted_keys_whatever_the_input_order() -> None:
    a = {
        MessageQueue("T", "broker-b", 10): 5,
        MessageQueue("T", "broker-a", 2): 7,
        MessageQueue("S", "broker-a", 0): 1,
    }
    b = dict(reversed(list(a.items())))
    assert json.dumps(to_json_dict(a)) == json.dumps(to_json_dict(b))
    # json.dumps of the dict (what Spark does) equals the sort_keys rendering
    assert json.dumps(to_json_dict(a)) == json.dumps(to_json_dict(a), sort_keys=True) == to_json(b)
    assert to_json_dict(a) == {
        "S": {"broker-a": {"0": 1}},
        "T": {"broker-a": {"2": 7}, "broker-b": {"10": 5}},
    }
    # queue ids sort as strings, like sort_keys does
    many = {MessageQueue("T", "b", q): q for q in (2, 10, 1)}
    assert list(to_json_dict(many)["T"]["b"]) == ["1", "10", "2"]


def test_json_round_trip_and_int_keys() -> None:
    offsets = {MessageQueue("T", "broker-a", q): q * 100 for q in range(12)}
    text = to_json(offsets)
    assert from_json_dict(json.loads(text)) == offsets
    # int queue keys (a dict built in Python) are accepted and become the same map
    assert from_json_dict({"T": {"broker-a": {3: 9}}}) == {MessageQueue("T", "broker-a", 3): 9}


@pytest.mark.parametrize(
    ("obj", "fragment"),
    [
        ([1, 2], "expected a JSON object"),
        ({"T": 5}, "must map broker names"),
        ({"T": {"b": [1]}}, "must map queue ids"),
        ({"T": {"b": {"x": 1}}}, "queue id 'x'"),
        ({"T": {"b": {"-1": 1}}}, "queue id '-1'"),
        ({"T": {"b": {"0": "7"}}}, "must be an integer"),
        ({"T": {"b": {"0": True}}}, "must be an integer"),
        ({"T": {"b": {"0": -3}}}, "must be >= 0"),
        ({"T": {"": {"0": 1}}}, "broker names"),
    ],
)
def test_bad_offset_json_is_rejected(obj: object, fragment: str) -> None:
    with pytest.raises(InvalidOptionError, match="startingOffsets") as err:
        from_json_dict(obj, what="startingOffsets")
    assert fragment in str(err.value)


def test_specials_only_where_allowed() -> None:
    assert from_json_dict({"T": {"b": {"0": -2, "1": -1}}}, allow_special=True) == {
        MessageQueue("T", "b", 0): EARLIEST,
        MessageQueue("T", "b", 1): LATEST,
    }
    with pytest.raises(InvalidOptionError):
        from_json_dict({"T": {"b": {"0": -2}}})


# ----------------------------------------------------------------------------- options


def test_defaults_stream_and_batch() -> None:
    s = parse_options({"nameserver": NS, "TOPIC": "T1, T2,T1"}, "stream")
    assert s.name_servers == (NS,)
    assert s.topics == ("T1", "T2")
    assert s.start.default == "latest" and not s.start.deterministic
    assert s.fail_on_data_loss and s.pull_batch_size == 32 and s.sub_expression == "*"
    assert s.pull_group == DEFAULT_PULL_GROUP and not s.filtered
    assert s.max_trigger_delay_ms == 15 * 60 * 1000
    b = parse_options({"nameServer": f"{NS};10.0.0.1:9876", "topic": "T"}, "batch")
    assert b.start.default == "earliest" and b.start.deterministic and b.end is None
    assert b.name_servers == (NS, "10.0.0.1:9876")


def test_all_options_parse() -> None:
    o = parse_options(
        {
            "nameServer": NS,
            "topic": "T",
            "startingOffsets": '{"T": {"broker-a": {"0": 5, "1": -2}}}',
            "endingOffsets": '{"T": {"broker-a": {"0": 9}}}',
            "minPartitions": "4",
            "maxRecordsPerPartition": "1000",
            "failOnDataLoss": "FALSE",
            "subExpression": "TagA || TagB",
            "includeProperties": "true",
            "pullBatchSize": "256",
            "pullTimeoutMs": "2500",
            "fetchOffset.numRetries": "0",
            "fetchOffset.retryIntervalMs": "10",
        },
        "batch",
    )
    assert o.start.offsets == {
        MessageQueue("T", "broker-a", 0): 5,
        MessageQueue("T", "broker-a", 1): EARLIEST,
    }
    assert o.start.default == "earliest" and o.start.deterministic
    assert o.end == {MessageQueue("T", "broker-a", 0): 9}
    assert (o.min_partitions, o.max_records_per_partition, o.pull_batch_size, o.pull_timeout_ms) == (
        4,
        1000,
        256,
        2500,
    )
    assert not o.fail_on_data_loss and o.include_properties and o.filtered
    assert (o.fetch_retries, o.fetch_retry_interval_ms) == (0, 10)
    s = parse_options(
        {
            "nameServer": NS,
            "topic": "T",
            "maxOffsetsPerTrigger": "100",
            "minOffsetsPerTrigger": "10",
            "maxTriggerDelay": "30s",
        },
        "stream",
    )
    assert (s.max_offsets_per_trigger, s.min_offsets_per_trigger, s.max_trigger_delay_ms) == (100, 10, 30_000)
    g = parse_options(
        {"nameServer": NS, "topic": "T", "group": "CG", "startingOffsets": "earliest"}, "stream"
    )
    assert g.start.group == "CG" and g.start.default == "earliest" and g.pull_group == "CG"
    t = parse_options({"nameServer": NS, "topic": "T", "startingTimestamp": "1700000000000"}, "stream")
    assert t.start.timestamp == 1_700_000_000_000 and not t.start.deterministic


@pytest.mark.parametrize(
    ("opts", "mode", "option", "fragment"),
    [
        ({"topic": "T"}, "stream", "nameServer", "is required"),
        ({"nameServer": "localhost", "topic": "T"}, "stream", "nameServer", "host:port"),
        ({"nameServer": NS}, "stream", "topic", "is required"),
        ({"nameServer": NS, "topic": "T,,U"}, "stream", "topic", "empty topic"),
        ({"nameServer": NS, "topic": "bad topic!"}, "stream", "topic", "illegal characters"),
        ({"nameServer": NS, "topic": "T", "topik": "T"}, "stream", "topik", "unknown option"),
        (
            {"nameServer": NS, "topic": "T", "maxOffsetsPerTrigger": "0"},
            "stream",
            "maxOffsetsPerTrigger",
            ">= 1",
        ),
        (
            {"nameServer": NS, "topic": "T", "maxOffsetsPerTrigger": "ten"},
            "stream",
            "maxOffsetsPerTrigger",
            "not an integer",
        ),
        (
            {"nameServer": NS, "topic": "T", "maxOffsetsPerTrigger": "10"},
            "batch",
            "maxOffsetsPerTrigger",
            "streaming",
        ),
        (
            {"nameServer": NS, "topic": "T", "endingOffsets": "latest"},
            "stream",
            "endingOffsets",
            "batch reads",
        ),
        (
            {"nameServer": NS, "topic": "T", "endingOffsets": "earliest"},
            "batch",
            "endingOffsets",
            "not allowed",
        ),
        (
            {"nameServer": NS, "topic": "T", "endingOffsets": '{"T": {"b": {"0": -2}}}'},
            "batch",
            "endingOffsets",
            "-2",
        ),
        (
            {"nameServer": NS, "topic": "T", "startingOffsets": "latest"},
            "batch",
            "startingOffsets",
            "not allowed",
        ),
        (
            {"nameServer": NS, "topic": "T", "startingOffsets": '{"T": {"b": {"0": -1}}}'},
            "batch",
            "startingOffsets",
            "-1",
        ),
        (
            {"nameServer": NS, "topic": "T", "startingOffsets": "{not json"},
            "stream",
            "startingOffsets",
            "not valid JSON",
        ),
        (
            {"nameServer": NS, "topic": "T", "startingOffsets": '{"U": {"b": {"0": 1}}}'},
            "stream",
            "startingOffsets",
            "not in the 'topic'",
        ),
        (
            {"nameServer": NS, "topic": "T", "failOnDataLoss": "yes"},
            "stream",
            "failOnDataLoss",
            "true or false",
        ),
        (
            {"nameServer": NS, "topic": "T", "pullBatchSize": "100000"},
            "stream",
            "pullBatchSize",
            "between 1 and 65536",
        ),
        (
            {"nameServer": NS, "topic": "T", "maxTriggerDelay": "soon"},
            "stream",
            "maxTriggerDelay",
            "duration",
        ),
        ({"nameServer": NS, "topic": "T", "subExpression": "||"}, "stream", "subExpression", "names no tag"),
        ({"nameServer": NS, "topic": "T", "filter": "a >"}, "stream", "filter", "line 1, column 4"),
        ({"nameServer": NS, "topic": "T", "filter": "(" * 10_000}, "batch", "filter", "nested deeper"),
        ({"nameServer": NS, "topic": "T", "group": "bad group"}, "stream", "group", "illegal"),
        ({"nameServer": NS, "topic": "T", "startingTimestamp": "-5"}, "stream", "startingTimestamp", ">= 0"),
        (
            {"nameServer": NS, "topic": "T", "startingTimestamp": "5", "group": "G"},
            "stream",
            "group",
            "conflicts with 'startingTimestamp'",
        ),
        (
            {
                "nameServer": NS,
                "topic": "T",
                "startingOffsets": '{"T": {"b": {"0": 1}}}',
                "startingTimestamp": "5",
            },
            "stream",
            "startingTimestamp",
            "conflicts with 'startingOffsets'",
        ),
    ],
)
def test_invalid_options_name_the_option(opts: dict[str, str], mode: str, option: str, fragment: str) -> None:
    with pytest.raises(InvalidOptionError) as err:
        parse_options(opts, mode)  # type: ignore[arg-type]
    assert err.value.option == option
    assert repr(option) in str(err.value) and fragment in str(err.value)


def test_option_names_are_case_insensitive_and_path_is_ignored() -> None:
    assert canonical_options({"NAMESERVER": NS, "maxoffsetspertrigger": "5", "path": "x"}) == {
        "nameServer": NS,
        "maxOffsetsPerTrigger": "5",
    }


def test_durations() -> None:
    for text, ms in (
        ("250", 250),
        ("500ms", 500),
        ("2s", 2000),
        ("3 min", 180_000),
        ("1h", 3_600_000),
        ("1d", 86_400_000),
    ):
        assert (
            parse_options(
                {"nameServer": NS, "topic": "T", "maxTriggerDelay": text}, "stream"
            ).max_trigger_delay_ms
            == ms
        )
