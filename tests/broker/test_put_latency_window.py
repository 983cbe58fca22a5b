"""putLatency99 / putLatency999 without sockets: RocketMQ's per-minute window and its quantile
(``findPutMessageEntireTimePX``: rank ``int(total * q)`` placed proportionally inside its bucket)."""

from __future__ import annotations

from pocketmq.broker.metrics import PutLatency
from pocketmq.broker.processor.admin_broker import PutLatencyWindow
from pocketmq.remoting.common.clock import FakeClock


def _put(lat: PutLatency, dt_ns: int, times: int = 1) -> None:
    lat.bits[dt_ns.bit_length()] += times
    lat.max_ns = max(lat.max_ns, dt_ns)


def test_zero_until_a_minute_has_passed_then_the_previous_minute_only() -> None:
    clock = FakeClock()
    lat = PutLatency()
    _put(lat, 5_000_000, 10)  # before the window starts: never reported
    window = PutLatencyWindow(lat, clock.monotonic)
    _put(lat, 500, 99)
    _put(lat, 3_000_000)
    assert window.keys()["putLatency99"] == "0.00"
    clock.advance(59.9)
    assert window.quantile_ms(0.99) == 0.0
    clock.advance(0.1)
    # 100 puts: rank int(100 * 0.99) = 99 is the last of the 99 fast ones, in bucket 0 (0..1024 ns)
    assert window.quantile_ms(0.99) == 1024 * 99 / 99 / 1e6
    # rank int(100 * 0.999) = 99 as well; rank 100 is the 3 ms put, bucket 12 (2.10..4.19 ms)
    assert window.quantile_ms(1.0) == (1024 << 12) / 1e6
    keys = window.keys()
    assert keys == {"putLatency99": "0.00", "putLatency999": "0.00", "putMessageEntireTimeMax": "5"}
    _put(lat, 3_000_000, 1000)  # next minute: the slow puts dominate
    assert window.quantile_ms(0.99) == 1024 * 99 / 99 / 1e6  # still the previous window
    clock.advance(61)
    assert window.keys()["putLatency99"] == "4.17"  # rank 990 of 1000 in 2.10..4.19 ms


def test_interpolates_inside_the_bucket_like_rocketmq() -> None:
    clock = FakeClock()
    lat = PutLatency()
    window = PutLatencyWindow(lat, clock.monotonic)
    _put(lat, 1500, 50)  # bucket 1: 1024..2048 ns
    _put(lat, 6000, 50)  # bucket 3: 4096..8192 ns
    clock.advance(60)
    # rank 25 of bucket 1's 50: a half of the way from 1024 to 2048 ns
    assert window.quantile_ms(0.25) == (1024 + 1024 * 25 / 50) / 1e6
    assert window.quantile_ms(0.5) == 2048 / 1e6  # rank 50: the last of bucket 1
    # rank 99: the 49th of bucket 3's 50 (bucket 2 is empty)
    assert window.quantile_ms(0.99) == (4096 + 4096 * 49 / 50) / 1e6
    assert window.quantile_ms(0.0) == 0.0
