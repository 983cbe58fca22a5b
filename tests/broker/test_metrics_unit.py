"""The metrics pieces without sockets: the put-latency buckets, the metricsLabel and
metricsExporterType rules, and the exporter's label stamping (issue 20)."""

from __future__ import annotations

import pytest
from prometheus_client.core import GaugeMetricFamily

from pocketmq.broker.config import BrokerConfig
from pocketmq.broker.metrics import PutLatency
from pocketmq.namesrv.config import NamesrvConfig
from pocketmq.remoting.common.config import ConfigError
from pocketmq.remoting.common.metrics_http import check_exporter_type, parse_metrics_label, with_labels


def test_put_latency_buckets_are_powers_of_two_microseconds() -> None:
    lat = PutLatency()
    # bucket i holds durations below 1024 * 2**i ns
    for dt in (0, 1023, 1024, 5000, 3_000_000):
        lat.bits[dt.bit_length()] += 1
        lat.sum_ns += dt
    buckets = dict(lat.buckets())
    assert buckets[repr(1024 / 1e9)] == 2  # 0 and 1023 ns
    assert buckets[repr(2048 / 1e9)] == 3  # + 1024 ns
    assert buckets[repr(8192 / 1e9)] == 4  # + 5 µs
    assert buckets["+Inf"] == 5 and lat.count == 5
    assert lat.quantile_ms(0.5) == 2048 / 1e6
    assert lat.quantile_ms(1.0) == (1024 << 12) / 1e6  # 3 ms lands below 4.19 ms


def test_put_latency_counts_are_the_shifted_buckets_of_the_bit_lengths() -> None:
    """A put lands in ``bits[dt.bit_length()]``; ``counts`` reads exactly the buckets
    ``(dt >> 10).bit_length()`` would have counted, on and around every boundary."""
    lat = PutLatency()
    want = [0] * 64
    times = [0, 1, 1023, 1024, 1025, 2047, 2048, 5000, 3_000_000, (1 << 40) - 1, 1 << 40, (1 << 64) - 1]
    times += [(1024 << i) + d for i in range(54) for d in (-1, 0, 1)]
    for dt in times:
        lat.bits[dt.bit_length()] += 1
        want[(dt >> 10).bit_length()] += 1
    assert lat.counts == want and len(lat.counts) == 64
    assert lat.count == len(times) == dict(lat.buckets())["+Inf"]
    timed = lat.wrap(lambda a: a)  # the wrapper's puts land in the same buckets
    assert timed(7) == 7 and lat.count == len(times) + 1 and sum(lat.counts) == lat.count


def test_put_latency_wrap_times_calls_and_returns_their_result() -> None:
    lat = PutLatency()
    timed = lat.wrap(lambda a, b: a + b)
    assert timed(2, 3) == 5 and timed(1, 1) == 2
    assert lat.count == 2 and lat.max_ns >= 0
    one = lat.wrap(lambda a: a * 2)  # (the one-argument wrapper: no argument tuple)
    assert one(4) == 8 and lat.count == 3 and lat.sum_ns >= lat.max_ns


def test_metrics_label_pairs() -> None:
    assert parse_metrics_label("") == {}
    assert parse_metrics_label("instance_id:a, uid:b") == {"instance_id": "a", "uid": "b"}
    for bad in ("novalue", ":x", "bad-name:x", "1x:y"):
        with pytest.raises(ValueError):
            parse_metrics_label(bad)


def test_exporter_type_names() -> None:
    assert check_exporter_type("prom") == "PROM" and check_exporter_type(" disable ") == "DISABLE"
    with pytest.raises(ValueError, match="one of DISABLE, OTLP_GRPC, PROM, LOG"):
        check_exporter_type("statsd")


def test_config_keys_default_off_and_bad_values_name_the_key() -> None:
    cfg = BrokerConfig()
    assert (cfg.metrics_exporter_type, cfg.metrics_prom_exporter_port, cfg.metrics_prom_exporter_host) == (
        "DISABLE",
        5557,
        "",
    )
    assert NamesrvConfig().metrics_exporter_type == "DISABLE"
    with pytest.raises(ConfigError, match="metricsLabel"):
        cfg.with_updates({"metricsLabel": "oops"})
    with pytest.raises(ConfigError, match="metricsExporterType"):
        cfg.with_updates({"metricsExporterType": "statsd"})
    assert cfg.with_updates({"metricsExporterType": "prom"}).metrics_exporter_type == "PROM"


def test_with_labels_stamps_every_sample() -> None:
    class One:
        def collect(self):
            g = GaugeMetricFamily("x", "doc", labels=["a"])
            g.add_metric(["1"], 2.0)
            yield g

    fams = list(with_labels(One(), {"env": "prod"}).collect())  # type: ignore[arg-type]
    assert [s.labels for s in fams[0].samples] == [{"a": "1", "env": "prod"}]
