"""Output schema and the columnar decoder that turns pull bodies into Arrow record batches.

A pull body is a run of CommitLog records (layout in :mod:`pocketmq.remoting.protocol.message`,
reference §4.1). The generic ``decode_messages`` builds one object per message; this hot path
instead walks the records once with the shared precompiled prefix ``Struct`` and appends each
field straight to a column list (STYLE.md §3.8), then :meth:`Columns.to_batch` makes one Arrow
``RecordBatch`` per few thousand rows (yielding Arrow is about 4x faster than tuples, pitfall 12).

Rows (``properties`` only with ``includeProperties=true``)::

    column           Spark type            from
    ---------------- --------------------- ----------------------------------------------
    topic            string                the partition's topic
    brokerName       string                the partition's broker name
    queueId          int                   QUEUEID
    queueOffset      bigint                QUEUEOFFSET
    body             binary                BODY, inflated when SYSFLAG bit 0 is set
    keys             string                property KEYS (space-separated), null if absent
    tags             string                property TAGS, null if absent
    msgId            string                property UNIQ_KEY, else the offset msgId (as the
                                           Java consumer's MessageExt.getMsgId)
    commitLogOffset  bigint                PHYSICALOFFSET
    bornTimestamp    timestamp             BORNTIMESTAMP (ms)
    storeTimestamp   timestamp             STORETIMESTAMP (ms)
    bornHost         string                BORNHOST as ip:port ([ip]:port for IPv6)
    storeHost        string                STOREHOST as ip:port
    reconsumeTimes   int                   RECONSUMETIMES
    flag             int                   FLAG
    sysFlag          int                   SYSFLAG
    properties       map<string,string>    every property

Offset checks happen in the same pass: queue offsets must be strictly increasing and not
below the requested offset; a jump without a tag filter is reported through ``on_gap``.
"""

from __future__ import annotations

import array
import itertools
import struct
import zlib
from collections.abc import Callable
from typing import Any

import pyarrow as pa

from pocketmq.remoting.protocol.message import (
    COMPRESSED_FLAG,
    HOST_FLAGS_MASK,
    MESSAGE_MAGIC_CODE,
    NAME_VALUE_SEPARATOR,
    PROPERTY_SEPARATOR,
    PROPS_LEN,
    RECORD_MIN_SIZE,
    RECORD_PREFIX_STRUCTS,
    RECORD_PREFIX_V4,
    format_host_ip,
    string_to_properties,
)
from pocketmq.spark.errors import ReadError

COLUMNS = (
    ("topic", "STRING"),
    ("brokerName", "STRING"),
    ("queueId", "INT"),
    ("queueOffset", "BIGINT"),
    ("body", "BINARY"),
    ("keys", "STRING"),
    ("tags", "STRING"),
    ("msgId", "STRING"),
    ("commitLogOffset", "BIGINT"),
    ("bornTimestamp", "TIMESTAMP"),
    ("storeTimestamp", "TIMESTAMP"),
    ("bornHost", "STRING"),
    ("storeHost", "STRING"),
    ("reconsumeTimes", "INT"),
    ("flag", "INT"),
    ("sysFlag", "INT"),
)
PROPERTIES_COLUMN = ("properties", "MAP<STRING, STRING>")

#: Rows per Arrow batch handed to Spark.
BATCH_ROWS = 4096

_TS = pa.timestamp("us", tz="UTC")  # what pyspark's to_arrow_schema makes of TimestampType
_TS_MS = pa.timestamp("ms", tz="UTC")


def schema_ddl(include_properties: bool) -> str:
    cols = COLUMNS + ((PROPERTIES_COLUMN,) if include_properties else ())
    return ", ".join(f"{name} {kind}" for name, kind in cols)


def arrow_schema(include_properties: bool) -> pa.Schema:
    """Exactly ``pyspark.sql.pandas.types.to_arrow_schema(schema, timezone="UTC")``."""
    kinds = {
        "STRING": pa.string(),
        "INT": pa.int32(),
        "BIGINT": pa.int64(),
        "BINARY": pa.binary(),
        "TIMESTAMP": _TS,
    }
    fields = [pa.field(name, kinds[kind]) for name, kind in COLUMNS]
    if include_properties:
        fields.append(pa.field("properties", pa.map_(pa.string(), pa.string())))
    return pa.schema(fields)


_MSGID_TAIL = struct.Struct(">iq")
_TAGS = "TAGS" + NAME_VALUE_SEPARATOR
_KEYS = "KEYS" + NAME_VALUE_SEPARATOR
_UNIQ = "UNIQ_KEY" + NAME_VALUE_SEPARATOR
_V4_SIZE = RECORD_PREFIX_V4.size


def _prop(props: str, needle: str) -> str | None:
    """One property value from the encoded string (needle = key + separator)."""
    if props.startswith(needle):
        start = len(needle)
    else:
        i = props.find(PROPERTY_SEPARATOR + needle)
        if i < 0:
            return None
        start = i + 1 + len(needle)
    end = props.find(PROPERTY_SEPARATOR, start)
    return props[start:] if end < 0 else props[start:end]


class Columns:
    """Column lists for one partition's rows, appended to by :meth:`decode`."""

    __slots__ = (
        "_hosts", "body", "born_host", "born_ts", "broker_name", "flag", "include_properties", "keys",
        "msg_id", "phy", "props", "qoff", "queue_id", "reconsume", "schema", "store_host", "store_ts",
        "sys_flag", "tags", "topic", "topic_bytes",
    )  # fmt: skip

    def __init__(self, topic: str, broker_name: str, queue_id: int, include_properties: bool) -> None:
        self.topic = topic
        self.topic_bytes = topic.encode()
        self.broker_name = broker_name
        self.queue_id = queue_id
        self.include_properties = include_properties
        self.schema = arrow_schema(include_properties)
        self._hosts: dict[tuple[bytes, int], str] = {}
        self._reset()

    def _reset(self) -> None:
        self.qoff: list[int] = []
        self.body: list[bytes] = []
        self.keys: list[str | None] = []
        self.tags: list[str | None] = []
        self.msg_id: list[str] = []
        self.phy: list[int] = []
        self.born_ts: list[int] = []
        self.store_ts: list[int] = []
        self.born_host: list[str] = []
        self.store_host: list[str] = []
        self.reconsume: list[int] = []
        self.flag: list[int] = []
        self.sys_flag: list[int] = []
        self.props: list[list[tuple[str, str]]] = []

    def __len__(self) -> int:
        return len(self.qoff)

    def _host(self, ip: bytes, port: int) -> str:
        key = (ip, port)
        text = self._hosts.get(key)
        if text is None:
            host = format_host_ip(ip)
            text = self._hosts[key] = f"[{host}]:{port}" if len(ip) == 16 else f"{host}:{port}"
        return text

    def decode(
        self,
        buf: bytes | bytearray | memoryview,
        expect: int,
        until: int,
        tags_filter: frozenset[str] | None,
        on_gap: Callable[[int, int], None] | None,
    ) -> int:
        """Append the records of ``buf`` with ``expect <= queueOffset < until``.

        Args:
            expect: the offset the pull asked for; records must start at or after it.
            tags_filter: exact tags to keep (``None`` keeps everything).
            on_gap: called with ``(expected, found)`` when an unfiltered read skips offsets.

        Returns:
            The next expected offset (last record's offset + 1, or ``expect`` when empty).

        Raises:
            ReadError: a malformed record, a foreign topic or queue, or offsets that do not increase.
        """
        # One copy of the whole body up front: bytes slicing, ``startswith`` and ``find`` are
        # much cheaper than the same operations on a memoryview.
        data = buf if isinstance(buf, bytes) else bytes(buf)
        n = len(data)
        pos = 0
        unpack_v4 = RECORD_PREFIX_V4.unpack_from
        props_len_of = PROPS_LEN.unpack_from
        topic_bytes = self.topic_bytes
        tlen = len(topic_bytes)
        my_qid = self.queue_id
        include_props = self.include_properties
        qoffs, bodies, keys, tags_col, ids, phys = (
            self.qoff,
            self.body,
            self.keys,
            self.tags,
            self.msg_id,
            self.phy,
        )
        born_ts, store_ts, born_h, store_h = self.born_ts, self.store_ts, self.born_host, self.store_host
        recs, flags, sysflags, props_col = self.reconsume, self.flag, self.sys_flag, self.props
        last_born: tuple[bytes, int, str] = (b"", -1, "")
        last_store: tuple[bytes, int, str] = (b"", -1, "")
        while pos < n:
            if n - pos < RECORD_MIN_SIZE:
                raise self._bad(f"truncated record at byte {pos}")
            (total, magic, _, qid, flag, qoff, phy, sys_flag, b_ts, b_ip, b_port, s_ts, s_ip, s_port, reconsume, _,
             body_len) = unpack_v4(data, pos)  # fmt: skip
            if magic != MESSAGE_MAGIC_CODE or total < RECORD_MIN_SIZE or total > n - pos:
                raise self._bad(f"bad record at byte {pos} (magic {magic & 0xFFFFFFFF:#x}, size {total})")
            if sys_flag & HOST_FLAGS_MASK:
                prefix = RECORD_PREFIX_STRUCTS[sys_flag & HOST_FLAGS_MASK]
                if total < prefix.size + 3:
                    raise self._bad(f"record at byte {pos} too small for its hosts")
                (_, _, _, qid, flag, qoff, phy, sys_flag, b_ts, b_ip, b_port, s_ts, s_ip, s_port, reconsume, _,
                 body_len) = prefix.unpack_from(data, pos)  # fmt: skip
                p = pos + prefix.size
            else:
                p = pos + _V4_SIZE
            end = pos + total
            if body_len < 0 or p + body_len + 3 > end:
                raise self._bad(f"body length {body_len} out of range at byte {pos}")
            if qoff >= until:
                return expect
            if qoff < expect or qid != my_qid:
                raise self._bad(
                    f"the broker returned queue {qid} offset {qoff} where offset >= {expect} was expected (offsets must increase)"
                )
            if qoff > expect and on_gap is not None:
                on_gap(expect, qoff)
            expect = qoff + 1
            body_start = p
            p += body_len
            if data[p] != tlen or not data.startswith(topic_bytes, p + 1):
                raise self._bad(f"offset {qoff} belongs to another topic")
            p += 1 + tlen
            (plen,) = props_len_of(data, p)
            p += 2
            if plen < 0 or p + plen != end:
                raise self._bad(f"offset {qoff}: properties length {plen} inconsistent with the record size")
            props = data[p:end].decode("utf-8", "replace")
            pos = end
            # TAGS / KEYS / UNIQ_KEY straight from the encoded string (key \x01 value \x02 ...)
            i = props.find(_TAGS)
            if i == 0 or (i > 0 and props[i - 1] == PROPERTY_SEPARATOR):
                j = props.find(PROPERTY_SEPARATOR, i + 5)
                tag: str | None = props[i + 5 :] if j < 0 else props[i + 5 : j]
            else:
                tag = None if i < 0 else _prop(props, _TAGS)
            if tags_filter is not None and tag not in tags_filter:
                continue
            body = data[body_start : body_start + body_len]
            if sys_flag & COMPRESSED_FLAG:
                try:
                    body = zlib.decompress(body)
                except zlib.error as exc:
                    raise self._bad(f"offset {qoff}: bad compressed body: {exc}") from None
            qoffs.append(qoff)
            bodies.append(body)
            tags_col.append(tag)
            keys.append(_prop(props, _KEYS) if "KEYS\x01" in props else None)
            i = props.find(_UNIQ)
            if i == 0 or (i > 0 and props[i - 1] == PROPERTY_SEPARATOR):
                j = props.find(PROPERTY_SEPARATOR, i + 9)
                ids.append(props[i + 9 :] if j < 0 else props[i + 9 : j])
            else:
                uniq = _prop(props, _UNIQ) if i > 0 else None
                ids.append(uniq if uniq else (s_ip + _MSGID_TAIL.pack(s_port, phy)).hex().upper())
            phys.append(phy)
            born_ts.append(b_ts)
            store_ts.append(s_ts)
            if b_port != last_born[1] or b_ip != last_born[0]:
                last_born = (b_ip, b_port, self._host(b_ip, b_port))
            born_h.append(last_born[2])
            if s_port != last_store[1] or s_ip != last_store[0]:
                last_store = (s_ip, s_port, self._host(s_ip, s_port))
            store_h.append(last_store[2])
            recs.append(reconsume)
            flags.append(flag)
            sysflags.append(sys_flag)
            if include_props:
                props_col.append(list(string_to_properties(props).items()))
        return expect

    def _bad(self, what: str) -> ReadError:
        return ReadError(f"queue {self.topic}/{self.broker_name}/{self.queue_id}: {what}")

    def to_batch(self) -> pa.RecordBatch:
        """The rows so far as one RecordBatch (matching :func:`arrow_schema`); then clears them."""
        n = len(self.qoff)
        bodies = self.body
        # binary column straight from one joined buffer + offsets (no per-value conversion)
        offsets = array.array("i", [0])
        offsets.extend(itertools.accumulate(map(len, bodies)))
        if offsets[-1] >= 2**31 - 1:
            body_arr = pa.array(bodies, pa.large_binary()).cast(pa.binary())  # fails loudly: too big
        else:
            body_arr = pa.Array.from_buffers(
                pa.binary(), n, [None, pa.py_buffer(offsets), pa.py_buffer(b"".join(bodies))]
            )
        arrays: list[Any] = [
            pa.repeat(pa.scalar(self.topic, pa.string()), n),
            pa.repeat(pa.scalar(self.broker_name, pa.string()), n),
            pa.repeat(pa.scalar(self.queue_id, pa.int32()), n),
            pa.array(self.qoff, pa.int64()),
            body_arr,
            pa.array(self.keys, pa.string()),
            pa.array(self.tags, pa.string()),
            pa.array(self.msg_id, pa.string()),
            pa.array(self.phy, pa.int64()),
            pa.array(self.born_ts, pa.int64()).cast(_TS_MS).cast(_TS),
            pa.array(self.store_ts, pa.int64()).cast(_TS_MS).cast(_TS),
            pa.array(self.born_host, pa.string()),
            pa.array(self.store_host, pa.string()),
            pa.array(self.reconsume, pa.int32()),
            pa.array(self.flag, pa.int32()),
            pa.array(self.sys_flag, pa.int32()),
        ]
        if self.include_properties:
            arrays.append(pa.array(self.props, pa.map_(pa.string(), pa.string())))
        batch = pa.RecordBatch.from_arrays(arrays, schema=self.schema)
        self._reset()
        return batch
