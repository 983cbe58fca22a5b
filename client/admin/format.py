"""Human and JSON output of ``mqadmin`` (pure: strings in, strings out; no I/O, no clock).

Human output keeps RocketMQ's shapes so runbooks and habits carry over: tables whose header
cells start with ``#`` (``#Topic``, ``#Diff``...), ``key : value`` dumps (brokerStatus),
``key = value`` dumps (getBrokerConfig) and ``Label: value`` message details. Columns are as
wide as their widest cell (Java pads to fixed widths such as 64 characters).

JSON output (``--json``) is one document per command, written by :func:`dumps_json`; the keys
are documented in :mod:`pocketmq.client.admin.model` and the command docstrings.

Times: RocketMQ prints ``yyyy-MM-dd HH:mm:ss,SSS`` in local time (:func:`human_time`) and reads
``yyyy-MM-dd#HH:mm:ss:SSS``, epoch milliseconds or ``now`` (:func:`parse_time`).
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import orjson

from pocketmq.client.admin.model import (
    BrokerConsumeRow,
    BrokerRuntime,
    ConsumerConnectionInfo,
    GroupProgress,
    GroupSummary,
    ResetResult,
    StatsRow,
    TopicStatus,
    version_desc,
)
from pocketmq.remoting.protocol.route import PermName, TopicConfig, TopicRouteData

__all__ = [
    "broker_config_dump",
    "broker_consume_stats_table",
    "broker_status_dump",
    "cluster_list_table",
    "consumer_connection_text",
    "dumps_json",
    "group_progress_text",
    "group_summary_table",
    "human_time",
    "kv_lines",
    "parse_time",
    "perm_text",
    "producer_connection_table",
    "reset_table",
    "stats_all_table",
    "table",
    "topic_config_text",
    "topic_route_table",
    "topic_status_table",
]

_MS_PER_HOUR = 3_600_000


# ------------------------------------------------------------------------------------ basics
def table(headers: Sequence[str], rows: Iterable[Sequence[object]]) -> str:
    """Left-aligned columns, two spaces apart; the last column is not padded."""
    cells = [[str(c) for c in row] for row in rows]
    widths = [len(h) for h in headers]
    for row in cells:
        for i, cell in enumerate(row[: len(widths)]):
            widths[i] = max(widths[i], len(cell))
    last = len(headers) - 1

    def line(items: Sequence[str]) -> str:
        return "  ".join(c if i == last else c.ljust(widths[i]) for i, c in enumerate(items)).rstrip()

    return "\n".join([line(list(headers)), *(line(r) for r in cells)]) + "\n"


def kv_lines(items: Iterable[tuple[str, object]], sep: str = ": ", width: int = 0, cap: int = 48) -> str:
    """``key<sep>value`` lines; keys padded to the longest key (at most ``cap``) or to ``width``."""
    pairs = [(k, str(v)) for k, v in items]
    width = width or min(cap, max((len(k) for k, _ in pairs), default=0))
    return "".join(f"{k.ljust(width)}{sep}{v}\n" for k, v in pairs)


def dumps_json(doc: Any) -> str:
    """Indented JSON; non-string keys (broker ids) become strings."""
    return orjson.dumps(doc, option=orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS).decode() + "\n"


def human_time(ms: int, tz: _dt.tzinfo | None = None) -> str:
    """``yyyy-MM-dd HH:mm:ss,SSS`` (Java ``UtilAll.timeMillisToHumanString2``); ``N/A`` for 0."""
    if ms <= 0:
        return "N/A"
    t = _dt.datetime.fromtimestamp(ms / 1000, tz) if tz is not None else _dt.datetime.fromtimestamp(ms / 1000)
    return t.strftime("%Y-%m-%d %H:%M:%S,") + f"{ms % 1000:03d}"


def parse_time(text: str, now_ms: int, tz: _dt.tzinfo | None = None) -> int:
    """Epoch ms from ``now``, a number of ms, or ``yyyy-MM-dd#HH:mm:ss:SSS`` (local time).

    Raises:
        ValueError: none of the three forms (the message shows the accepted ones).
    """
    s = text.strip()
    if s.lower() == "now":
        return now_ms
    if s.lstrip("-").isdigit():
        return int(s)
    for fmt in ("%Y-%m-%d#%H:%M:%S:%f", "%Y-%m-%d#%H:%M:%S", "%Y-%m-%d %H:%M:%S,%f", "%Y-%m-%d %H:%M:%S"):
        try:
            t = _dt.datetime.strptime(s, fmt)
        except ValueError:
            continue
        if tz is not None:
            t = t.replace(tzinfo=tz)
        return int(t.timestamp() * 1000)
    raise ValueError(f"bad time {text!r}: use 'now', epoch milliseconds or yyyy-MM-dd#HH:mm:ss:SSS")


def perm_text(perm: int) -> str:
    return PermName.perm_to_string(perm)


# ------------------------------------------------------------------------------------ topics
def topic_config_text(cfg: TopicConfig) -> str:
    """Java ``TopicConfig.toString()``."""
    return (
        f"TopicConfig [topicName={cfg.topic_name}, readQueueNums={cfg.read_queue_nums}, "
        f"writeQueueNums={cfg.write_queue_nums}, perm={perm_text(cfg.perm)}, "
        f"topicFilterType={cfg.topic_filter_type.value}, topicSysFlag={cfg.topic_sys_flag}, "
        f"order={str(cfg.order).lower()}]"
    )


def topic_route_table(route: TopicRouteData) -> str:
    """``topicRoute -l``: one line per broker group plus totals."""
    clusters = {bd.broker_name: bd for bd in route.broker_datas}
    rows: list[list[object]] = []
    total_r = total_w = 0
    for qd in sorted(route.queue_datas, key=lambda q: q.broker_name):
        bd = clusters.get(qd.broker_name)
        addrs = "{" + ", ".join(f"{k}={v}" for k, v in sorted((bd.broker_addrs if bd else {}).items())) + "}"
        rows.append(
            [bd.cluster if bd else "", qd.broker_name, addrs, qd.read_queue_nums, qd.write_queue_nums,
             perm_text(qd.perm)]
        )  # fmt: skip
        total_r += qd.read_queue_nums
        total_w += qd.write_queue_nums
    rows.append(["Total:", len(rows), "", total_r, total_w, ""])
    return table(["#ClusterName", "#BrokerName", "#BrokerAddrs", "#ReadQueue", "#WriteQueue", "#Perm"], rows)


def topic_status_table(status: TopicStatus) -> str:
    rows = [
        [q.broker_name, q.queue_id, q.min_offset, q.max_offset, human_time(q.last_update_timestamp)]
        for q in status.queues
    ]
    return table(["#Broker Name", "#QID", "#Min Offset", "#Max Offset", "#Last Updated"], rows)


# ---------------------------------------------------------------------------- cluster/broker
def _load(tps: float, size: int, wait: int) -> str:
    return f"{tps:.2f}({size},{wait}ms)"


def cluster_list_table(brokers: Sequence[BrokerRuntime], now_ms: int, more: bool = False) -> str:
    """clusterList (``-m``: yesterday's and today's in/out totals instead of the load columns)."""
    if more:
        headers = ["#Cluster Name", "#Broker Name", "#BID", "#Addr", "#InTotalYest", "#OutTotalYest",
                   "#InTotalToday", "#OutTotalToday"]  # fmt: skip
        rows: list[list[object]] = [
            [b.cluster, b.broker_name, b.broker_id, b.addr, b.in_total_yest, b.out_total_yest,
             b.in_total_today, b.out_total_today]
            for b in brokers
        ]  # fmt: skip
        return table(headers, rows)
    headers = ["#Cluster Name", "#Broker Name", "#BID", "#Addr", "#Version", "#InTPS(LOAD)", "#OutTPS(LOAD)",
               "#PCWait(ms)", "#Hour", "#SPACE"]  # fmt: skip
    rows = []
    for b in brokers:
        if b.error is not None:
            rows.append([b.cluster, b.broker_name, b.broker_id, b.addr, "ERROR", b.error, "", "", "", ""])
            continue
        j = b.to_json()
        rows.append(
            [b.cluster, b.broker_name, b.broker_id, b.addr, b.version,
             _load(b.in_tps, j["sendQueueSize"], j["sendQueueHeadWaitMs"]),
             _load(b.out_tps, j["pullQueueSize"], j["pullQueueHeadWaitMs"]),
             b.page_cache_lock_time, f"{b.hours(now_ms):.2f}", f"{b.disk_ratio:.4f}"]
        )  # fmt: skip
    return table(headers, rows)


def broker_status_dump(brokers: Sequence[BrokerRuntime]) -> str:
    """brokerStatus: ``key : value`` sorted by key; prefixed by the address for several brokers."""
    out: list[str] = []
    for b in brokers:
        if b.error is not None:
            out.append(f"{b.addr}  ERROR: {b.error}\n")
            continue
        items = sorted(b.stats.items())
        if len(brokers) == 1:
            out.append(kv_lines(items, ": "))
        else:
            out.append(kv_lines(((f"{b.addr}  {k}", v) for k, v in items), ": "))
    return "".join(out)


def broker_config_dump(addr: str, config: Mapping[str, str]) -> str:
    """getBrokerConfig: ``====addr====`` then ``key = value`` in the broker's order."""
    return f"============{addr}============\n" + kv_lines(config.items(), "  =  ")


# ------------------------------------------------------------------------------------ groups
def group_progress_text(progress: GroupProgress, show_client_ip: bool = False) -> str:
    """consumerProgress -g: per queue offsets and lag, then TPS and totals."""
    headers = ["#Topic", "#Broker Name", "#QID", "#Broker Offset", "#Consumer Offset"]
    if show_client_ip:
        headers.append("#Client IP")
    headers += ["#Diff", "#LastTime"]
    rows: list[list[object]] = []
    for r in progress.rows:
        row: list[object] = [r.topic, r.broker_name, r.queue_id, r.broker_offset, r.consumer_offset]
        if show_client_ip:
            row.append(r.client_ip or "N/A")
        row += [r.diff, human_time(r.last_timestamp)]
        rows.append(row)
    return (
        table(headers, rows)
        + f"\nConsume TPS: {progress.consume_tps:.2f}\nConsume Diff Total: {progress.diff_total}\n"
    )


def group_summary_table(groups: Sequence[GroupSummary]) -> str:
    rows = [
        [g.group, g.count, g.version or "OFFLINE", g.consume_type, g.message_model, f"{g.consume_tps:.2f}",
         g.diff_total]
        for g in groups
    ]  # fmt: skip
    return table(["#Group", "#Count", "#Version", "#Type", "#Model", "#TPS", "#Diff Total"], rows)


def consumer_connection_text(info: ConsumerConnectionInfo) -> str:
    rows = [
        [f"{i:03d}", c.client_id, c.client_addr, c.language, version_desc(c.version)]
        for i, c in enumerate(info.connections, 1)
    ]
    out = table(["#Index", "#ClientId", "#ClientAddr", "#Language", "#Version"], rows)
    out += "\nBelow is subscription:\n"
    out += table(
        ["#Index", "#Topic", "#SubExpression", "#ExpressionType"],
        [[f"{i:03d}", t, e, info.expression_type(t)] for i, (t, e) in enumerate(info.subscriptions, 1)],
    )
    out += f"\nConsumeType: {info.consume_type or 'N/A'}\n"
    out += f"MessageModel: {info.message_model or 'N/A'}\n"
    out += f"ConsumeFromWhere: {info.consume_from_where or 'N/A'}\n"
    return out


def producer_connection_table(connections: Sequence[Any]) -> str:
    rows = [
        [f"{i:03d}", c.client_id, c.client_addr, c.language, version_desc(c.version)]
        for i, c in enumerate(connections, 1)
    ]
    return table(["#Index", "#ClientId", "#ClientAddr", "#Language", "#Version"], rows)


def reset_table(result: ResetResult) -> str:
    """resetOffsetByTime / skipAccumulatedMessage (dry run: current and new offsets)."""
    if result.dry_run:
        rows = [[r.broker_name, r.queue_id, r.consumer_offset, r.offset] for r in result.rows]
        return (
            table(["#brokerName", "#queueId", "#consumerOffset", "#newOffset"], rows)
            + "dry run: no offset was changed\n"
        )
    return table(
        ["#brokerName", "#queueId", "#offset"], [[r.broker_name, r.queue_id, r.offset] for r in result.rows]
    )


def broker_consume_stats_table(rows: Sequence[BrokerConsumeRow]) -> str:
    body = table(
        ["#Topic", "#Group", "#Broker Name", "#QID", "#Broker Offset", "#Consumer Offset", "#Diff", "#LastTime"],
        [
            [r.topic, r.group, r.broker_name, r.queue_id, r.broker_offset, r.consumer_offset, r.diff,
             human_time(r.last_timestamp)]
            for r in rows
        ],
    )  # fmt: skip
    return body + f"\nDiff Total: {sum(r.diff for r in rows)}\n"


def stats_all_table(rows: Sequence[StatsRow]) -> str:
    return table(
        ["#Topic", "#Consumer Group", "#Accumulation", "#InTPS", "#OutTPS", "#InMsg24Hour", "#OutMsg24Hour"],
        [
            [r.topic, r.consumer_group or "", r.accumulation, f"{r.in_tps:.2f}",
             f"{r.out_tps:.2f}" if r.consumer_group else "", r.in_msg_24h,
             r.out_msg_24h if r.consumer_group else "NO_CONSUMER"]
            for r in rows
        ],
    )  # fmt: skip


def hours_since(ms: int, now_ms: int) -> float:
    return (now_ms - ms) / _MS_PER_HOUR if ms > 0 else 0.0
