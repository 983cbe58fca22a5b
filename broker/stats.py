"""Broker statistics: RocketMQ's ``BrokerStatsManager`` / ``StatsItem`` / ``BrokerStats``, lite.

Rules (Java ``StatsItem``, ``StatsItemSet``, ``BrokerStatsManager``, ``BrokerStats``):

* a stats *set* is named (``TOPIC_PUT_NUMS``, ``GROUP_GET_NUMS``, ...) and holds one item per
  key (``topic``, ``topic@group``, the cluster name for broker-wide sets); an item counts a
  ``value`` and a number of ``times``;
* every item keeps three sample windows, taken on wall-clock boundaries: every 10 s (last 7
  samples = one minute), every 10 min (last 7 = one hour) and every hour (last 25 = one day).
  A window's snapshot is ``sum = last.value - first.value``, ``tps = sum * 1000 / (last.ts -
  first.ts)`` and ``avgpt = sum / (last.times - first.times)``: exactly Java's
  ``computeStatsData``, except that a single sample gives 0 instead of Java's NaN;
* samples are taken lazily instead of by a timer: values only change through :meth:`StatsItem.add`,
  so before a change (or a read) the boundaries passed since the last one are filled in with the
  unchanged values. That is exactly what a timer would have recorded, with no task to run;
* ``msgPutTotal*``/``msgGetTotal*`` of GET_BROKER_RUNTIME_INFO come from the store's counters
  (put times, transferred messages) recorded at local midnight (``BrokerStats.record``), also
  lazily: :meth:`BrokerStats.maybe_record` runs on every stats update and runtime-info read.

Pure: time is an argument or an injected ``now_ms`` function (the broker's SystemClock one is
read inline, the same reading); nothing here does I/O.
"""

from __future__ import annotations

import datetime
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from pocketmq.remoting.common.clock import SystemClock

# Java BrokerStatsManager names.
TOPIC_PUT_NUMS = "TOPIC_PUT_NUMS"
TOPIC_PUT_SIZE = "TOPIC_PUT_SIZE"
GROUP_GET_NUMS = "GROUP_GET_NUMS"
GROUP_GET_SIZE = "GROUP_GET_SIZE"
SNDBCK_PUT_NUMS = "SNDBCK_PUT_NUMS"
BROKER_PUT_NUMS = "BROKER_PUT_NUMS"
BROKER_GET_NUMS = "BROKER_GET_NUMS"
GROUP_GET_FROM_DISK_NUMS = "GROUP_GET_FROM_DISK_NUMS"
GROUP_GET_FROM_DISK_SIZE = "GROUP_GET_FROM_DISK_SIZE"
BROKER_GET_FROM_DISK_NUMS = "BROKER_GET_FROM_DISK_NUMS"
BROKER_GET_FROM_DISK_SIZE = "BROKER_GET_FROM_DISK_SIZE"
GROUP_GET_LATENCY = "GROUP_GET_LATENCY"
SNDBCK2DLQ_TIMES = "SNDBCK2DLQ_TIMES"

STATS_NAMES = (
    TOPIC_PUT_NUMS, TOPIC_PUT_SIZE, GROUP_GET_NUMS, GROUP_GET_SIZE, SNDBCK_PUT_NUMS, BROKER_PUT_NUMS,
    BROKER_GET_NUMS, GROUP_GET_FROM_DISK_NUMS, GROUP_GET_FROM_DISK_SIZE, BROKER_GET_FROM_DISK_NUMS,
    BROKER_GET_FROM_DISK_SIZE, GROUP_GET_LATENCY, SNDBCK2DLQ_TIMES,
)  # fmt: skip

_time_ns = time.time_ns
_MINUTE_STEP, _MINUTE_KEEP = 10_000, 7
_HOUR_STEP, _HOUR_KEEP = 600_000, 7
_DAY_STEP, _DAY_KEEP = 3_600_000, 25


def stats_key(topic: str, group: str) -> str:
    """``topic@group`` (Java ``buildStatsKey``)."""
    return f"{topic}@{group}"


@dataclass(frozen=True, slots=True)
class StatsSnapshot:
    sum: int = 0
    tps: float = 0.0
    avgpt: float = 0.0

    def to_json(self) -> dict[str, float | int]:
        return {"avgpt": self.avgpt, "sum": self.sum, "tps": self.tps}


_EMPTY = StatsSnapshot()


class _Window:
    """Samples ``(ts, times, value)`` on multiples of ``step`` ms, the last ``keep`` of them."""

    __slots__ = ("next_ts", "samples", "step")

    def __init__(self, step: int, keep: int, now_ms: int) -> None:
        self.step = step
        self.samples: deque[tuple[int, int, int]] = deque(maxlen=keep)
        self.next_ts = now_ms - now_ms % step + step

    def catch_up(self, now_ms: int, times: int, value: int) -> None:
        if now_ms < self.next_ts:
            return
        step = self.step
        last = now_ms - now_ms % step
        # only the last `keep` boundaries can survive in the deque
        start = max(self.next_ts, last - step * ((self.samples.maxlen or 1) - 1))
        for ts in range(start, last + 1, step):
            self.samples.append((ts, times, value))
        self.next_ts = last + step

    def snapshot(self) -> StatsSnapshot:
        if len(self.samples) < 2:
            return _EMPTY
        t0, n0, v0 = self.samples[0]
        t1, n1, v1 = self.samples[-1]
        total = v1 - v0
        times = n1 - n0
        return StatsSnapshot(total, total * 1000.0 / (t1 - t0), total / times if times > 0 else 0.0)


class StatsItem:
    """One counter (value + times) with minute, hour and day sample windows."""

    __slots__ = ("_day", "_hour", "_minute", "times", "value")

    def __init__(self, now_ms: int) -> None:
        self.value = 0
        self.times = 0
        self._open_windows(now_ms)

    def _open_windows(self, now_ms: int) -> None:
        self._minute = _Window(_MINUTE_STEP, _MINUTE_KEEP, now_ms)
        self._hour = _Window(_HOUR_STEP, _HOUR_KEEP, now_ms)
        self._day = _Window(_DAY_STEP, _DAY_KEEP, now_ms)

    def add(self, now_ms: int, value: int, times: int = 1) -> None:
        if now_ms >= self._minute.next_ts:
            self.catch_up(now_ms)
        self.value += value
        self.times += times

    def catch_up(self, now_ms: int) -> None:
        """Take the samples of every boundary passed up to ``now_ms`` (values unchanged since)."""
        times, value = self.times, self.value
        self._minute.catch_up(now_ms, times, value)
        self._hour.catch_up(now_ms, times, value)
        self._day.catch_up(now_ms, times, value)

    def minute(self, now_ms: int) -> StatsSnapshot:
        self.catch_up(now_ms)
        return self._minute.snapshot()

    def hour(self, now_ms: int) -> StatsSnapshot:
        self.catch_up(now_ms)
        return self._hour.snapshot()

    def day(self, now_ms: int) -> StatsSnapshot:
        self.catch_up(now_ms)
        return self._day.snapshot()


class PutCounts:
    """A topic's put counters, the one object a send adds to (``BrokerStatsManager.topic_put``):
    ``times`` puts, ``size`` bytes and ``extra`` messages beyond one a put (batches), so a
    plain send does two adds and a compare where a TOPIC_PUT_NUMS and a TOPIC_PUT_SIZE item
    took four adds and the broker-wide item a fifth (~0.3k instructions each, callgrind).
    Its items (:class:`_TopicPutNums`, :class:`_TopicPutSize`) and the broker's
    (:class:`_BrokerPutNums`) fold them when read."""

    __slots__ = ("extra", "size", "times")

    def __init__(self) -> None:
        self.times = 0
        self.size = 0
        self.extra = 0


class _FoldedItem(StatsItem):
    """A StatsItem whose ``value``/``times`` are read from counters kept elsewhere (no ``add``)."""

    __slots__ = ("counts",)

    def __init__(self, now_ms: int, counts: PutCounts) -> None:  # (StatsItem's sets value/times)
        self.counts = counts
        self._open_windows(now_ms)

    @property
    def times(self) -> int:  # type: ignore[override]
        return self.counts.times


class _TopicPutNums(_FoldedItem):
    """TOPIC_PUT_NUMS: messages = puts + the batches' extra messages."""

    __slots__ = ()

    @property
    def value(self) -> int:  # type: ignore[override]
        counts = self.counts
        return counts.times + counts.extra


class _TopicPutSize(_FoldedItem):
    """TOPIC_PUT_SIZE: bytes, one time per put (the NUMS item's)."""

    __slots__ = ()

    @property
    def value(self) -> int:  # type: ignore[override]
        return self.counts.size


class _GetSize(StatsItem):
    """GROUP_GET_SIZE: bytes pulled; its ``times`` (one a found pull) are its GROUP_GET_NUMS
    item's, which ``on_get`` counts, so a pull adds to one ``times`` (~0.12k instructions)."""

    __slots__ = ("nums",)

    def __init__(self, now_ms: int, nums: StatsItem) -> None:  # (StatsItem's sets times)
        self.value = 0
        self.nums = nums
        self._open_windows(now_ms)

    @property
    def times(self) -> int:  # type: ignore[override]
        return self.nums.times


class _FoldedTotal(StatsItem):
    """A broker-wide item whose value is folded, when read, from counters the feeding paths
    keep elsewhere (``_fold``) plus those of deleted keys (``deleted``); ``times`` stays 0
    (Java adds to the value only)."""

    __slots__ = ("deleted",)

    def __init__(self, now_ms: int) -> None:  # (a subclass sets what _fold reads first)
        self.deleted = 0
        super().__init__(now_ms)

    def _fold(self) -> int:
        raise NotImplementedError

    @property
    def value(self) -> int:
        return self.deleted + self._fold()

    @value.setter
    def value(self, value: int) -> None:  # (StatsItem.__init__'s 0)
        self.deleted = value - self._fold()


class _BrokerPutNums(_FoldedTotal):
    """BROKER_PUT_NUMS: the messages of every topic's :class:`PutCounts` plus those of deleted
    topics."""

    __slots__ = ("topics",)

    def __init__(self, now_ms: int, topics: dict[str, PutCounts]) -> None:
        self.topics = topics
        super().__init__(now_ms)

    def _fold(self) -> int:
        return sum(c.times + c.extra for c in self.topics.values())


class _BrokerGetNums(_FoldedTotal):
    """BROKER_GET_NUMS: the messages of every GROUP_GET_NUMS item (``items``: a pull adds its
    messages there alone) plus those of deleted ones."""

    __slots__ = ("items",)

    def __init__(self, now_ms: int, items: dict[str, StatsItem]) -> None:
        self.items = items
        super().__init__(now_ms)

    def _fold(self) -> int:
        return sum(item.value for item in self.items.values())


class StatsItems(dict[str, StatsItem]):
    """Items by key; ``items[key]`` creates a missing one, started at the clock's time.

    The one get-or-create of the feeding paths: a present key costs a plain dict lookup (the
    per-send and per-pull counters need no ``get`` call and no ``None`` test).
    """

    __slots__ = ("now_ms",)

    def __init__(self, now_ms: Callable[[], int]) -> None:
        super().__init__()
        self.now_ms = now_ms

    def __missing__(self, key: str) -> StatsItem:
        item = self[key] = StatsItem(self.now_ms())
        return item


class StatsItemSet:
    """Items of one stats name, by key."""

    __slots__ = ("items", "name")

    def __init__(self, name: str, now_ms: Callable[[], int]) -> None:
        self.name = name
        self.items = StatsItems(now_ms)

    def get(self, key: str) -> StatsItem | None:
        return self.items.get(key)

    def remove_where(self, pred: Callable[[str], bool]) -> int:
        keys = [k for k in self.items if pred(k)]
        for k in keys:
            del self.items[k]
        return len(keys)


def _next_local_midnight(now_ms: int) -> int:
    day = datetime.datetime.fromtimestamp(now_ms / 1000).date() + datetime.timedelta(days=1)
    return int(datetime.datetime.combine(day, datetime.time()).timestamp() * 1000)


class BrokerStats:
    """``msgPutTotal{YesterdayMorning,TodayMorning,TodayNow}`` and the ``msgGet`` triple."""

    __slots__ = (
        "_get_total",
        "_next_record",
        "_put_total",
        "msg_get_total_today_morning",
        "msg_get_total_yesterday_morning",
        "msg_put_total_today_morning",
        "msg_put_total_yesterday_morning",
    )

    def __init__(self, put_total: Callable[[], int], get_total: Callable[[], int], now_ms: int) -> None:
        self._put_total = put_total
        self._get_total = get_total
        self._next_record = _next_local_midnight(now_ms)
        self.msg_put_total_yesterday_morning = 0
        self.msg_put_total_today_morning = 0
        self.msg_get_total_yesterday_morning = 0
        self.msg_get_total_today_morning = 0

    def maybe_record(self, now_ms: int) -> None:
        """Record the midnight values if local midnight has passed since the last record."""
        if now_ms < self._next_record:
            return
        # more than one midnight passed unobserved: nothing changed meanwhile (every update
        # calls this), so today's morning value is also yesterday's
        skipped = now_ms >= self._next_record + 86_400_000
        put, get = self._put_total(), self._get_total()
        self.msg_put_total_yesterday_morning = put if skipped else self.msg_put_total_today_morning
        self.msg_get_total_yesterday_morning = get if skipped else self.msg_get_total_today_morning
        self.msg_put_total_today_morning = put
        self.msg_get_total_today_morning = get
        self._next_record = _next_local_midnight(now_ms)

    @property
    def msg_put_total_today_now(self) -> int:
        return self._put_total()

    @property
    def msg_get_total_today_now(self) -> int:
        return self._get_total()


class BrokerStatsManager:
    """The broker's named stats sets, fed by the send and pull paths.

    Feeding (hot path: one clock read, a compare and plain increments per call; every item is
    sampled at once when a 10 s boundary has passed): :meth:`on_put` after a stored message (or
    batch), :meth:`on_get` after a pull returned messages, :meth:`on_send_back` for
    CONSUMER_SEND_MSG_BACK, :meth:`on_send_back_dlq` when a message goes to the DLQ.
    """

    def __init__(
        self,
        cluster_name: str,
        now_ms: Callable[[], int],
        *,
        put_total: Callable[[], int] | None = None,
        get_total: Callable[[], int] | None = None,
    ) -> None:
        self.cluster_name = cluster_name
        self.now_ms = now_ms
        #: the broker's clock (its SystemClock's now_ms) is read inline by on_get (the same
        #: reading without a Python call per pull)
        self._system_clock = getattr(now_ms, "__func__", None) is SystemClock.now_ms
        now = now_ms()
        self.stats_table: dict[str, StatsItemSet] = {name: StatsItemSet(name, now_ms) for name in STATS_NAMES}
        t = self.stats_table
        self.topic_put_nums = t[TOPIC_PUT_NUMS].items
        self.topic_put_size = t[TOPIC_PUT_SIZE].items
        #: topic -> its PutCounts, what ``on_put`` adds to (public: the send processor's reply
        #: inlines it); its TOPIC_PUT_NUMS/TOPIC_PUT_SIZE items and BROKER_PUT_NUMS read them. An
        #: exact dict: its subscript is specialized, where StatsItems' (a dict subclass) goes
        #: through slot_mp_subscript and a Python-level ``dict.__getitem__`` call
        self.topic_put: dict[str, PutCounts] = {}
        #: group -> topic -> its (GROUP_GET_NUMS, GROUP_GET_SIZE) items, ``on_get``'s (the same
        #: way; keyed by the pull's own strings, whose hashes are cached, so a pull builds and
        #: hashes no ``topic@group`` key); emptied when a topic or group is deleted (rare:
        #: refilled on the next pulls)
        self._group_get: dict[str, dict[str, tuple[StatsItem, StatsItem]]] = {}
        self._group_get_nums = t[GROUP_GET_NUMS].items
        self._group_get_size = t[GROUP_GET_SIZE].items
        self.broker_put = t[BROKER_PUT_NUMS].items[cluster_name] = _BrokerPutNums(now, self.topic_put)
        self._broker_get = t[BROKER_GET_NUMS].items[cluster_name] = _BrokerGetNums(now, self._group_get_nums)
        self.next_roll = now - now % _MINUTE_STEP + _MINUTE_STEP
        self.broker_stats = BrokerStats(
            put_total or (lambda: self.broker_put.value), get_total or (lambda: self._broker_get.value), now
        )

    def roll(self, now: int) -> None:
        """Sample every item at the boundaries passed (values as they were before this update)."""
        self.broker_stats.maybe_record(now)
        for item_set in self.stats_table.values():
            for item in item_set.items.values():
                item.catch_up(now)
        self.next_roll = now - now % _MINUTE_STEP + _MINUTE_STEP

    def _add(self, items: StatsItems, key: str, value: int, times: int = 1) -> None:
        now = self.now_ms()
        if now >= self.next_roll:
            self.roll(now)
        item = items[key]
        item.value += value
        item.times += times

    # -- feeding -------------------------------------------------------------------------------
    # on_put/on_get run once per send/pull: one clock read for their two items (not one per _add)
    def on_put(self, topic: str, nums: int, size: int, now: int | None = None) -> None:
        """``incTopicPutNums`` + ``incTopicPutSize`` + ``incBrokerPutNums`` for one stored send;
        ``now``: a read of this clock the caller already has (the put's store time)."""
        if now is None:
            now = self.now_ms()
        if now >= self.next_roll:
            self.roll(now)
        try:
            counts = self.topic_put[topic]
        except KeyError:
            counts = self.put_counts(topic)
        counts.times += 1
        counts.size += size
        if nums != 1:
            counts.extra += nums - 1

    def put_counts(self, topic: str) -> PutCounts:
        """``topic``'s PutCounts, made with its TOPIC_PUT_NUMS and TOPIC_PUT_SIZE items (which
        read them), cached in ``topic_put`` (dropped with the items by :meth:`on_topic_deleted`)."""
        counts = self.topic_put[topic] = PutCounts()
        now = self.now_ms()
        self.topic_put_nums[topic] = _TopicPutNums(now, counts)
        self.topic_put_size[topic] = _TopicPutSize(now, counts)
        return counts

    def on_get(self, group: str, topic: str, nums: int, size: int) -> None:
        """``incGroupGetNums`` + ``incGroupGetSize`` + ``incBrokerGetNums`` for one found pull."""
        now = _time_ns() // 1_000_000 if self._system_clock else self.now_ms()
        if now >= self.next_roll:
            self.roll(now)
        try:  # (as topic_put: exact-dict subscripts for both items)
            item, size_item = self._group_get[group][topic]
        except KeyError:
            item, size_item = self._get_items(group, topic)
        item.value += nums
        item.times += 1  # (the size item's times too: _GetSize)
        size_item.value += size  # (BROKER_GET_NUMS folds the items' values when read)

    def _get_items(self, group: str, topic: str) -> tuple[StatsItem, StatsItem]:
        """The (GROUP_GET_NUMS, GROUP_GET_SIZE) items of ``topic@group``, created if missing,
        cached in ``_group_get``."""
        key = stats_key(topic, group)
        nums = self._group_get_nums[key]
        size = self._group_get_size.get(key)
        if size is None:  # (both items of a key are removed together: on_topic_deleted)
            size = self._group_get_size[key] = _GetSize(self.now_ms(), nums)
        pair = self._group_get.setdefault(group, {})[topic] = (nums, size)
        return pair

    def on_get_latency(self, group: str, topic: str, queue_id: int, latency_ms: int) -> None:
        self._add(self.stats_table[GROUP_GET_LATENCY].items, f"{queue_id}@{topic}@{group}", latency_ms)

    def on_send_back(self, group: str, topic: str) -> None:
        self._add(self.stats_table[SNDBCK_PUT_NUMS].items, stats_key(topic, group), 1)

    def on_send_back_dlq(self, group: str, topic: str) -> None:
        self._add(self.stats_table[SNDBCK2DLQ_TIMES].items, stats_key(topic, group), 1)

    # -- reading -------------------------------------------------------------------------------
    def get_stats_item(self, name: str, key: str) -> StatsItem | None:
        """The item for VIEW_BROKER_STATS_DATA; None for an unknown name or key."""
        item_set = self.stats_table.get(name)
        return item_set.get(key) if item_set is not None else None

    def tps_group_get_nums(self, group: str, topic: str) -> float:
        """Messages per second pulled by ``group`` from ``topic`` over the last minute."""
        item = self._group_get_nums.get(stats_key(topic, group))
        return item.minute(self.now_ms()).tps if item is not None else 0.0

    def tps_topic_put_nums(self, topic: str) -> float:
        item = self.topic_put_nums.get(topic)
        return item.minute(self.now_ms()).tps if item is not None else 0.0

    def record_day(self) -> BrokerStats:
        """The midnight counters, brought up to date."""
        self.broker_stats.maybe_record(self.now_ms())
        return self.broker_stats

    # -- cleanup (Java autoDeleteUnusedStats) ----------------------------------------------------
    def on_topic_deleted(self, topic: str) -> None:
        counts = self.topic_put.pop(topic, None)
        if counts is not None:  # (the broker-wide value keeps its messages)
            self.broker_put.deleted += counts.times + counts.extra
        self._group_get.clear()
        self.topic_put_nums.pop(topic, None)
        self.topic_put_size.pop(topic, None)
        prefix = topic + "@"
        self._keep_get_nums(lambda k: k.startswith(prefix))
        for name in (GROUP_GET_NUMS, GROUP_GET_SIZE, SNDBCK_PUT_NUMS, SNDBCK2DLQ_TIMES):
            self.stats_table[name].remove_where(lambda k: k.startswith(prefix))
        self.stats_table[GROUP_GET_LATENCY].remove_where(lambda k: k.split("@")[1:2] == [topic])

    def on_group_deleted(self, group: str) -> None:
        self._group_get.clear()
        suffix = "@" + group
        self._keep_get_nums(lambda k: k.endswith(suffix))
        for name in (GROUP_GET_NUMS, GROUP_GET_SIZE, SNDBCK_PUT_NUMS, SNDBCK2DLQ_TIMES, GROUP_GET_LATENCY):
            self.stats_table[name].remove_where(lambda k: k.endswith(suffix))

    def _keep_get_nums(self, pred: Callable[[str], bool]) -> None:
        """The broker-wide get count keeps the messages of the GROUP_GET_NUMS items about to be
        removed (those whose key ``pred`` accepts)."""
        self._broker_get.deleted += sum(item.value for k, item in self._group_get_nums.items() if pred(k))


# ---------------------------------------------------------------------------------------------
# formatting helpers shared by the runtime-info reply


def version_desc(ordinal: int) -> str:
    """``MQVersion.getVersionDesc``: the enum name of a version ordinal (409 → ``V4_9_8``)."""
    if ordinal < 0:
        return "HigherVersion"
    if ordinal < 16:
        names = ["SNAPSHOT", "ALPHA1", *(f"BETA{i}" for i in range(1, 6))]
        for i in range(6, 10):
            names += [f"BETA{i}_SNAPSHOT", f"BETA{i}"]
        return f"V3_0_0_{names[ordinal]}" if ordinal < 15 else "V3_0_0_FINAL"
    # then pairs (SNAPSHOT, release): 3.0.1-3.0.15, 3.1.0-3.2.9, 3.3.1-3.9.9, 4.0.0-5.9.9
    versions = [(3, 0, p) for p in range(1, 16)]
    versions += [(3, m, p) for m in (1, 2) for p in range(10)]
    versions += [(3, m, p) for m in range(3, 10) for p in range(1, 10)]
    versions += [(major, m, p) for major in (4, 5) for m in range(10) for p in range(10)]
    index, release = divmod(ordinal - 16, 2)
    if index < len(versions):
        major, minor, patch = versions[index]
        return f"V{major}_{minor}_{patch}" + ("" if release else "_SNAPSHOT")
    if index == len(versions) and not release:
        return "HIGHER_VERSION"
    return "HigherVersion"


def human_readable_byte_count(n: int) -> str:
    """``MixAll.humanReadableByteCount(bytes, false)``: ``"512 B"``, ``"1.5 KiB"``, ``"4.0 GiB"``."""
    if n < 1024:
        return f"{n} B"
    exp = 0
    value = float(n)
    while value >= 1024 and exp < 6:
        value /= 1024
        exp += 1
    return f"{value:.1f} {'KMGTPE'[exp - 1]}iB"
