"""Broker statistics (pure): sample windows, lazy sampling, midnight records, formatting helpers."""

from __future__ import annotations

import datetime

import pytest

from pocketmq.broker.stats import (
    BROKER_GET_NUMS,
    BROKER_PUT_NUMS,
    GROUP_GET_LATENCY,
    GROUP_GET_NUMS,
    GROUP_GET_SIZE,
    SNDBCK_PUT_NUMS,
    TOPIC_PUT_NUMS,
    TOPIC_PUT_SIZE,
    BrokerStats,
    BrokerStatsManager,
    StatsItem,
    human_readable_byte_count,
    version_desc,
)
from pocketmq.remoting.common.clock import FakeClock

T0 = 1_700_000_000_000  # a multiple of 10 s, 10 min and 1 h


def test_minute_window_rate_matches_java_sampling():
    item = StatsItem(T0)
    # 100 msgs/s for 80 s, in 1 s steps; Java samples every 10 s and keeps the last 7
    for s in range(80):
        item.add(T0 + s * 1000, 100, 1)
    snap = item.minute(T0 + 80_000)
    # samples at T0+20s..T0+80s: values 2000..8000 -> 6000 over 60 s
    assert snap.sum == 6000
    assert snap.tps == pytest.approx(100.0)
    assert snap.avgpt == pytest.approx(100.0)  # value per call


def test_single_sample_gives_zeros_not_nan():
    item = StatsItem(T0 + 1)
    item.add(T0 + 2, 5)
    assert item.minute(T0 + 9_000).tps == 0.0  # no boundary passed yet
    assert item.minute(T0 + 10_000).sum == 0  # one sample only


def test_idle_gap_is_filled_lazily_with_unchanged_values():
    item = StatsItem(T0)
    item.add(T0 + 500, 10)
    # an hour of silence, then a read: the minute window is all equal samples -> no traffic
    snap = item.minute(T0 + 3_600_000 + 5_000)
    assert (snap.sum, snap.tps) == (0, 0.0)
    # the hour window saw the 10 messages between its first and last samples? no: all samples
    # were taken after the add, so the hour's sum is 0 as well
    assert item.hour(T0 + 3_600_000 + 5_000).sum == 0
    # the day window, sampled on the hour, has T0+1h (value 10) only -> one sample -> 0
    assert item.day(T0 + 3_600_000 + 5_000).sum == 0
    item.add(T0 + 3_600_000 + 6_000, 30)
    assert item.day(T0 + 2 * 3_600_000).sum == 30
    assert item.day(T0 + 2 * 3_600_000).tps == pytest.approx(30 / 3600)


def test_hour_and_day_windows():
    item = StatsItem(T0)
    for minute in range(130):  # 2h10m, 60 per minute
        item.add(T0 + minute * 60_000, 60, 1)
    now = T0 + 130 * 60_000
    hour = item.hour(now)
    assert hour.sum == 3600  # the last 7 ten-minute samples span 60 minutes
    assert hour.tps == pytest.approx(1.0)
    day = item.day(now)
    assert day.sum == 3600 and day.tps == pytest.approx(1.0)  # samples at T0+1h and T0+2h


def test_manager_feeds_java_named_sets_and_keys():
    clock = FakeClock(wall_ms=T0)
    m = BrokerStatsManager("C1", clock.now_ms)
    for _ in range(30):
        m.on_put("T", 2, 100)
        m.on_get("G", "T", 1, 50)
        clock.advance(1)
    assert m.get_stats_item(TOPIC_PUT_NUMS, "T").value == 60
    assert m.get_stats_item(TOPIC_PUT_SIZE, "T").value == 3000
    assert m.get_stats_item(GROUP_GET_NUMS, "T@G").value == 30
    broker_put = m.get_stats_item(BROKER_PUT_NUMS, "C1")
    assert (broker_put.value, broker_put.times) == (60, 0)  # Java adds value only
    assert m.tps_group_get_nums("G", "T") == pytest.approx(1.0)
    assert m.tps_topic_put_nums("T") == pytest.approx(2.0)
    assert m.tps_group_get_nums("other", "T") == 0.0
    assert m.get_stats_item("NO_SUCH", "T") is None and m.get_stats_item(TOPIC_PUT_NUMS, "x") is None
    # without store counters the midnight totals come from the broker-wide sets
    assert m.broker_stats.msg_put_total_today_now == 60
    assert m.broker_stats.msg_get_total_today_now == 30


def test_deleting_topics_and_groups_drops_their_items():
    m = BrokerStatsManager("C1", FakeClock(wall_ms=T0).now_ms)
    m.on_put("T", 1, 1)
    m.on_put("U", 1, 1)
    m.on_get("G", "T", 1, 1)
    m.on_get("H", "U", 1, 1)
    m.on_send_back("G", "T")
    m.on_get_latency("G", "T", 0, 5)
    m.on_topic_deleted("T")
    assert m.get_stats_item(TOPIC_PUT_NUMS, "T") is None and m.get_stats_item(TOPIC_PUT_NUMS, "U")
    assert m.get_stats_item(GROUP_GET_NUMS, "T@G") is None and m.get_stats_item(GROUP_GET_NUMS, "U@H")
    assert m.get_stats_item(SNDBCK_PUT_NUMS, "T@G") is None
    assert m.get_stats_item(GROUP_GET_LATENCY, "0@T@G") is None
    m.on_group_deleted("H")
    assert m.get_stats_item(GROUP_GET_NUMS, "U@H") is None


def test_a_pull_after_its_topic_or_group_was_deleted_counts_in_new_items():
    """``on_get``'s cached (nums, size) pairs go with a deleted topic or group: later pulls feed
    the items the stats table holds, from zero."""
    m = BrokerStatsManager("C1", FakeClock(wall_ms=T0).now_ms)
    for deleted in (lambda: m.on_topic_deleted("T"), lambda: m.on_group_deleted("G")):
        m.on_get("G", "T", 2, 200)
        m.on_get("G", "T", 1, 100)
        deleted()
        assert m.get_stats_item(GROUP_GET_NUMS, "T@G") is None
        m.on_get("G", "T", 3, 30)
        nums, size = m.get_stats_item(GROUP_GET_NUMS, "T@G"), m.get_stats_item(GROUP_GET_SIZE, "T@G")
        assert nums is not None and size is not None
        assert (nums.value, nums.times, size.value, size.times) == (3, 1, 30, 1)
        deleted()


def test_the_broker_get_count_keeps_deleted_topics_and_groups_messages():
    """BROKER_GET_NUMS (folded from the GROUP_GET_NUMS items when read) counts every pulled
    message, those of items dropped with their topic or group too, and its minute window
    samples it as an added-to item would; its times stay 0 (Java adds to the value only)."""
    clock = FakeClock(wall_ms=T0)
    m = BrokerStatsManager("C1", clock.now_ms)
    m.on_get("G", "T", 2, 20)
    m.on_get("H", "T", 3, 30)
    m.on_get("G", "U", 5, 50)
    clock.set_wall_ms(T0 + 10_000)
    m.on_topic_deleted("T")
    m.on_get("G", "U", 7, 70)
    m.on_group_deleted("G")
    m.on_get("H", "V", 11, 110)
    clock.set_wall_ms(T0 + 20_000)
    m.on_get("H", "V", 13, 130)
    item = m.get_stats_item(BROKER_GET_NUMS, "C1")
    assert item is not None and (item.value, item.times) == (41, 0)
    assert m.record_day().msg_get_total_today_now == 41
    assert item.minute(T0 + 20_000).sum == 28 - 10  # the samples at +10 s (10) and +20 s (28)


def test_a_pull_size_items_times_are_its_nums_items_and_sampled_with_them():
    """GROUP_GET_SIZE's times are its GROUP_GET_NUMS item's (one count a found pull): equal
    after pulls, and its minute window samples them at the 10 s boundaries, so its avgpt (bytes
    per pull) is exact, across the cached pair's drop by a deletion too."""
    clock = FakeClock(wall_ms=T0)
    m = BrokerStatsManager("C1", clock.now_ms)
    m.on_get("G", "T", 2, 200)
    clock.set_wall_ms(T0 + 10_000)
    m.on_get("G", "T", 1, 100)
    m.on_get("G", "T", 4, 400)
    m.on_group_deleted("H")  # (drops the cached pairs: the items stay)
    m.on_get("G", "T", 3, 600)
    clock.set_wall_ms(T0 + 20_000)
    nums, size = m.get_stats_item(GROUP_GET_NUMS, "T@G"), m.get_stats_item(GROUP_GET_SIZE, "T@G")
    assert nums is not None and size is not None
    assert (nums.times, size.times, size.value) == (4, 4, 1300)
    snap = size.minute(T0 + 20_000)  # samples at +10 s (1 pull, 200) and +20 s (4, 1300)
    assert (snap.sum, snap.avgpt) == (1100, 1100 / 3)
    assert nums.minute(T0 + 20_000).avgpt == 8 / 3


def test_pulls_count_in_their_topic_at_group_items():
    """``on_get`` caches its pairs by group, then topic: each pull feeds the ``topic@group``
    items of the stats table (a group's several topics, a topic's several groups), and two
    pairs spelling the same ``topic@group`` share its items, as Java's buildStatsKey does."""
    m = BrokerStatsManager("C1", FakeClock(wall_ms=T0).now_ms)
    pulls = [
        ("G", "T", 1, 10),
        ("G", "U", 2, 20),
        ("H", "T", 4, 40),
        ("b@c", "a", 8, 80),
        ("c", "a@b", 16, 160),
    ]
    for _ in range(2):
        for group, topic, nums, size in pulls:
            m.on_get(group, topic, nums, size)
    for key, nums, size in (("T@G", 1, 10), ("U@G", 2, 20), ("T@H", 4, 40), ("a@b@c", 24, 240)):
        n, s = m.get_stats_item(GROUP_GET_NUMS, key), m.get_stats_item(GROUP_GET_SIZE, key)
        assert n is not None and s is not None
        times = 4 if key == "a@b@c" else 2
        assert (n.value, n.times, s.value, s.times) == (2 * nums, times, 2 * size, times)
    broker_get = m.get_stats_item(BROKER_GET_NUMS, "C1")
    assert broker_get is not None and broker_get.value == 2 * 31


def test_a_pull_with_the_system_clock_is_sampled_at_the_wall_clock_time(monkeypatch):
    """With the broker's clock (SystemClock.now_ms) on_get reads the wall clock inline
    (time.time_ns, no Python call): pulls across 10 s boundaries are sampled there, as with any
    injected clock (which is still called)."""
    import pocketmq.broker.stats as stats_mod
    from pocketmq.remoting.common.clock import SystemClock

    wall = [T0 * 1_000_000]
    import time

    monkeypatch.setattr(stats_mod, "_time_ns", lambda: wall[0])  # (on_get's inline read)
    monkeypatch.setattr(time, "time_ns", lambda: wall[0])  # (SystemClock.now_ms's)
    m = BrokerStatsManager("C1", SystemClock().now_ms)
    fake = FakeClock(wall_ms=T0)
    other = BrokerStatsManager("C1", fake.now_ms)
    for ms in (T0 + 1, T0 + 10_000, T0 + 20_000):
        wall[0] = ms * 1_000_000
        fake.set_wall_ms(ms)
        for mgr in (m, other):
            mgr.on_get("G", "T", 3, 30)
    for mgr in (m, other):
        item = mgr.get_stats_item(GROUP_GET_NUMS, "T@G")
        assert item is not None
        assert item.minute(T0 + 20_000).sum == 3  # the samples at +10 s (3) and +20 s (6)


def test_a_put_after_its_topic_was_deleted_counts_in_new_items():
    """``on_put``'s cached (nums, size) pair goes with the topic: a later put feeds the items
    the stats table (statsAll, metrics) reads, not the dropped ones."""
    m = BrokerStatsManager("C1", FakeClock(wall_ms=T0).now_ms)
    m.on_put("T", 2, 100)
    m.on_put("U", 1, 10)
    old = m.get_stats_item(TOPIC_PUT_NUMS, "T")
    m.on_topic_deleted("T")
    assert "T" not in m.topic_put and m.get_stats_item(TOPIC_PUT_NUMS, "T") is None
    m.on_put("T", 3, 30)
    nums, size = m.get_stats_item(TOPIC_PUT_NUMS, "T"), m.get_stats_item(TOPIC_PUT_SIZE, "T")
    assert nums is not None and size is not None and nums is not old
    assert (nums.value, nums.times, size.value, size.times) == (3, 1, 30, 1)
    # the broker-wide count keeps the deleted topic's messages (Java: it is a separate item)
    broker_put = m.get_stats_item(BROKER_PUT_NUMS, "C1")
    assert broker_put is not None and (broker_put.value, broker_put.times) == (2 + 1 + 3, 0)
    assert m.record_day().msg_put_total_today_now == 6


def test_put_counts_fold_into_the_items_windows():
    """Plain and batch puts kept in one PutCounts per topic read as TOPIC_PUT_NUMS (messages,
    puts), TOPIC_PUT_SIZE (bytes, puts) and BROKER_PUT_NUMS (messages, times 0), minute, hour
    and day windows included: as items fed by ``StatsItem.add`` would."""
    clock = FakeClock(wall_ms=T0)
    m = BrokerStatsManager("C1", clock.now_ms)
    ref_nums, ref_size, ref_broker = StatsItem(T0), StatsItem(T0), StatsItem(T0)
    for i in range(200):
        nums = 4 if i % 3 == 0 else 1
        now = clock.now_ms()
        m.on_put("T", nums, 100 * nums)
        ref_nums.add(now, nums)
        ref_size.add(now, 100 * nums)
        ref_broker.add(now, nums, 0)
        clock.advance_ms(7_000 if i < 150 else 400_000)
    now = clock.now_ms()
    got = (
        m.get_stats_item(TOPIC_PUT_NUMS, "T"),
        m.get_stats_item(TOPIC_PUT_SIZE, "T"),
        m.get_stats_item(BROKER_PUT_NUMS, "C1"),
    )
    for item, ref in zip(got, (ref_nums, ref_size, ref_broker), strict=True):
        assert item is not None
        assert (item.value, item.times) == (ref.value, ref.times)
        for window in ("minute", "hour", "day"):
            assert getattr(item, window)(now) == getattr(ref, window)(now)
    assert got[0].value == 67 * 4 + 133 and got[0].times == 200  # type: ignore[union-attr]


def _local_ms(y, mo, d, h=0, mi=0):
    return int(datetime.datetime(y, mo, d, h, mi).timestamp() * 1000)


def test_midnight_records_shift_today_to_yesterday():
    totals = {"put": 0, "get": 0}
    now = _local_ms(2024, 3, 10, 15)
    stats = BrokerStats(lambda: totals["put"], lambda: totals["get"], now)
    totals.update(put=100, get=40)
    stats.maybe_record(_local_ms(2024, 3, 10, 23, 59))
    assert (stats.msg_put_total_today_morning, stats.msg_put_total_yesterday_morning) == (0, 0)
    stats.maybe_record(_local_ms(2024, 3, 11, 0, 1))
    assert (stats.msg_put_total_today_morning, stats.msg_get_total_today_morning) == (100, 40)
    assert stats.msg_put_total_yesterday_morning == 0
    totals.update(put=250, get=90)
    stats.maybe_record(_local_ms(2024, 3, 12, 0, 0))
    assert (stats.msg_put_total_yesterday_morning, stats.msg_put_total_today_morning) == (100, 250)
    assert (stats.msg_get_total_yesterday_morning, stats.msg_get_total_today_morning) == (40, 90)
    assert stats.msg_put_total_today_now == 250
    # two midnights unobserved: nothing changed in between, both mornings equal the totals
    stats.maybe_record(_local_ms(2024, 3, 14, 9))
    assert stats.msg_put_total_yesterday_morning == stats.msg_put_total_today_morning == 250


@pytest.mark.parametrize(
    ("ordinal", "name"),
    [
        (0, "V3_0_0_SNAPSHOT"),
        (15, "V3_0_0_FINAL"),
        (37, "V3_0_11"),
        (62, "V3_1_8_SNAPSHOT"),
        (121, "V3_4_9"),
        (232, "V4_1_0_SNAPSHOT"),
        (333, "V4_6_0"),
        (401, "V4_9_4"),
        (409, "V4_9_8"),
        (612, "HIGHER_VERSION"),
        (5000, "HigherVersion"),
    ],
)
def test_version_desc_matches_mqversion_ordinals(ordinal, name):
    assert version_desc(ordinal) == name


@pytest.mark.parametrize(
    ("n", "text"),
    [(0, "0 B"), (1023, "1023 B"), (1024, "1.0 KiB"), (1536, "1.5 KiB"), (5 * 2**30, "5.0 GiB")],
)
def test_human_readable_byte_count_like_mixall(n, text):
    assert human_readable_byte_count(n) == text


def test_stats_items_create_missing_keys_at_the_clock_time():
    from pocketmq.broker.stats import StatsItems

    now = [1_000]
    items = StatsItems(lambda: now[0])
    assert items.get("k") is None and "k" not in items  # reading never creates
    first = items["k"]
    now[0] = 2_000
    assert items["k"] is first and len(items) == 1
    second = items["j"]
    assert (first.value, first.times, second.value) == (0, 0, 0)
    stats = BrokerStatsManager("c", lambda: now[0])
    stats.on_put("T", 3, 30)
    stats.on_put("T", 2, 20)
    item = stats.get_stats_item("TOPIC_PUT_NUMS", "T")
    size = stats.get_stats_item("TOPIC_PUT_SIZE", "T")
    assert item is not None and (item.value, item.times) == (5, 2)
    assert size is not None and (size.value, size.times) == (50, 2)
