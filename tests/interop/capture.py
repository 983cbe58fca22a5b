"""Frame capture server: a fake name server + broker on ONE port that records every inbound frame.

Capture tooling only -- never used to test our servers. It answers just enough of the protocol
for the real C++ client and ali-ons to walk through route lookup,
heartbeat, send, rebalance, offset queries, pull (with a tiny in-memory store so that messages
actually flow), send-back to ``%RETRY%<group>``, orderly locks and unregister.

Every inbound frame is written verbatim (4-byte length prefix included) to
``<out>/<seq>_c<conn>_<code>_<NAME>.bin`` and indexed in ``<out>/index.jsonl``.

Run:  .venv/bin/python -m tests.interop.capture --out /tmp/cap [--port 0] [--queues 4]
It prints one JSON line ``{"event": "listening", "port": P}`` and serves until SIGINT/SIGTERM.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.interop.wire import (
    MAX_FRAME,
    Frame,
    decode_batch,
    decode_frame,
    encode_response,
    encode_stored_message,
    offset_msg_id,
    parse_properties,
    request_name,
)

BROKER_NAME = "fake-broker"
CLUSTER = "FakeCluster"


@dataclass(slots=True)
class StoredMessage:
    topic: str
    queue_id: int
    queue_offset: int
    physical_offset: int
    tags: str
    record: bytes
    body: bytes
    properties: dict[str, str]
    flag: int
    reconsume_times: int


@dataclass(slots=True)
class SendMeta:
    sys_flag: int
    born_timestamp: int
    born_host: tuple[str, int]
    reconsume_times: int


@dataclass(slots=True)
class Conn:
    conn_id: int
    peer: tuple[str, int]
    writer: asyncio.StreamWriter
    groups: dict[str, str] = field(default_factory=dict)  # consumer group -> clientID


class FakeCluster:
    """In-memory fake namesrv+broker. ``port`` is valid after ``start()``."""

    def __init__(
        self, out_dir: Path | None, queues: int = 4, max_hold: float = 2.0, offset_not_found: bool = False
    ) -> None:
        self.out_dir = out_dir
        # True: QUERY_CONSUMER_OFFSET answers 22 for unknown offsets, so clients fall back to
        # GET_MAX_OFFSET / SEARCH_OFFSET_BY_TIMESTAMP (lets us capture those requests).
        self.offset_not_found = offset_not_found
        self.queues = queues
        self.max_hold = max_hold  # cap on long-poll hold so shutdowns stay quick
        self.port = 0
        self._server: asyncio.Server | None = None
        self._seq = 0
        self._conn_seq = 0
        self._conns: dict[int, Conn] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._queues: dict[tuple[str, int], list[StoredMessage]] = {}
        self._by_phys: dict[int, StoredMessage] = {}
        self._phys = 0
        self._offsets: dict[tuple[str, str, int], int] = {}
        # Replaced on every arrival; waiters hold the old one (no Condition: a cancelled
        # wait_for(Condition.wait()) can dead-lock the loop's shutdown on 3.11).
        self._arrival = asyncio.Event()
        self.frames: list[dict[str, Any]] = []  # index entries, also kept in memory
        if out_dir is not None:
            out_dir.mkdir(parents=True, exist_ok=True)

    # ---- lifecycle -------------------------------------------------------------------------
    async def start(self, port: int = 0) -> None:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", port)
        self.port = self._server.sockets[0].getsockname()[1]

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
        for conn in list(self._conns.values()):
            conn.writer.close()
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        if self._server is not None:
            with contextlib.suppress(Exception):
                await self._server.wait_closed()

    @property
    def addr(self) -> str:
        return f"127.0.0.1:{self.port}"

    # ---- connection loop -------------------------------------------------------------------
    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._conn_seq += 1
        peer = writer.get_extra_info("peername") or ("127.0.0.1", 0)
        conn = Conn(self._conn_seq, (str(peer[0]), int(peer[1])), writer)
        self._conns[conn.conn_id] = conn
        try:
            while True:
                prefix = await reader.readexactly(4)
                length = int.from_bytes(prefix, "big", signed=True)
                if length < 4 or length > MAX_FRAME:
                    break  # framing garbage: drop the connection like the Java decoder does
                raw = prefix + await reader.readexactly(length)
                frame = self._record(conn, raw)
                if frame is None or frame.flag & 1:
                    continue  # replies to broker-initiated requests: nothing to do
                task = asyncio.create_task(self._dispatch(conn, frame))
                self._tasks.add(task)
                task.add_done_callback(self._tasks.discard)
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            self._conns.pop(conn.conn_id, None)
            writer.close()

    def _record(self, conn: Conn, raw: bytes) -> Frame | None:
        self._seq += 1
        entry: dict[str, Any] = {"seq": self._seq, "conn": conn.conn_id, "peer": list(conn.peer)}
        entry["t"] = round(time.time(), 3)
        frame: Frame | None = None
        try:
            frame = decode_frame(raw)
        except (ValueError, UnicodeDecodeError) as exc:
            entry.update(code=-1, name="UNDECODABLE", error=str(exc))
        if frame is not None:
            entry.update(code=frame.code, name=request_name(frame.code), flag=frame.flag)
            entry.update(language=frame.header.get("language"), version=frame.header.get("version"))
            entry["opaque"] = frame.opaque
        entry["len"] = len(raw)
        if self.out_dir is not None:
            name = f"{self._seq:05d}_c{conn.conn_id}_{entry['code']}_{entry['name']}.bin"
            (self.out_dir / name).write_bytes(raw)
            entry["file"] = name
            with (self.out_dir / "index.jsonl").open("a") as fh:
                fh.write(json.dumps(entry) + "\n")
        self.frames.append(entry)
        return frame

    async def _dispatch(self, conn: Conn, frame: Frame) -> None:
        handler = _HANDLERS.get(frame.code)
        try:
            if handler is None:
                reply = encode_response(3, frame.opaque, remark=f" request type {frame.code} not supported")
            else:
                reply = await handler(self, conn, frame)
        except Exception as exc:  # capture tooling: report, keep serving
            reply = encode_response(1, frame.opaque, remark=f"fake broker error: {exc!r}")
        if not conn.writer.is_closing():
            conn.writer.write(reply)

    # ---- handlers --------------------------------------------------------------------------
    async def _route(self, conn: Conn, f: Frame) -> bytes:
        topic = f.ext_str("topic")
        perm = 7 if topic == "TBW102" else 6
        route = {
            "brokerDatas": [{"brokerAddrs": {"0": self.addr}, "brokerName": BROKER_NAME, "cluster": CLUSTER}],
            "filterServerTable": {},
            "queueDatas": [
                {
                    "brokerName": BROKER_NAME,
                    "perm": perm,
                    "readQueueNums": self.queues,
                    "topicSysFlag": 0,
                    "writeQueueNums": self.queues,
                }
            ],
        }
        return encode_response(0, f.opaque, body=json.dumps(route).encode())

    async def _heartbeat(self, conn: Conn, f: Frame) -> bytes:
        data = json.loads(f.body.decode("utf-8")) if f.body else {}
        for consumer in data.get("consumerDataSet") or []:
            conn.groups[str(consumer.get("groupName"))] = str(data.get("clientID"))
        return encode_response(0, f.opaque)

    async def _unregister(self, conn: Conn, f: Frame) -> bytes:
        conn.groups.pop(f.ext_str("consumerGroup"), None)
        return encode_response(0, f.opaque)

    async def _consumer_list(self, conn: Conn, f: Frame) -> bytes:
        group = f.ext_str("consumerGroup")
        ids = sorted({c.groups[group] for c in self._conns.values() if group in c.groups})
        if not ids:
            return encode_response(1, f.opaque, remark=f"no consumer for this group, {group}")
        return encode_response(0, f.opaque, body=json.dumps({"consumerIdList": ids}).encode())

    async def _send(self, conn: Conn, f: Frame) -> bytes:
        names = _V2_NAMES if f.code != 10 else _V1_NAMES

        def key(short: str) -> str:
            return names[short]

        topic = f.ext_str(key("b"))
        queue_id = f.ext_int(key("e"), 0)
        if queue_id < 0 or queue_id >= self.queues:
            queue_id = 0
        props = parse_properties(f.ext_str(key("i")))
        meta = SendMeta(
            f.ext_int(key("f")), f.ext_int(key("g"), int(time.time() * 1000)), conn.peer, f.ext_int(key("j"))
        )
        if f.ext_str(key("m")) in ("true", "1") or f.code == 320:  # C++ 1.x sends "1"
            stored = [
                self._append(topic, queue_id, it.body, {**it.properties, **props}, it.flag, meta)
                for it in decode_batch(f.body)
            ]
        else:
            stored = [self._append(topic, queue_id, f.body, props, f.ext_int(key("h")), meta)]
        await self._notify()
        ext = {
            "msgId": ",".join(offset_msg_id(("127.0.0.1", self.port), m.physical_offset) for m in stored),
            "queueId": queue_id,
            "queueOffset": stored[0].queue_offset,
            "MSG_REGION": "DefaultRegion",
            "TRACE_ON": "true",
        }
        return encode_response(0, f.opaque, ext)

    def _append(
        self,
        topic: str,
        queue_id: int,
        body: bytes,
        props: dict[str, str],
        flag: int,
        meta: SendMeta,
    ) -> StoredMessage:
        queue = self._queues.setdefault((topic, queue_id), [])
        props = {**props, "CLUSTER": CLUSTER}
        props.pop("WAIT", None)
        record = encode_stored_message(
            topic=topic,
            queue_id=queue_id,
            queue_offset=len(queue),
            physical_offset=self._phys,
            flag=flag,
            sys_flag=meta.sys_flag,
            born_timestamp=meta.born_timestamp,
            born_host=meta.born_host,
            store_timestamp=int(time.time() * 1000),
            store_host=("127.0.0.1", self.port),
            reconsume_times=meta.reconsume_times,
            body=body,
            properties=props,
        )
        msg = StoredMessage(
            topic, queue_id, len(queue), self._phys, props.get("TAGS", ""), record, body, props, flag,
            meta.reconsume_times,
        )  # fmt: skip
        queue.append(msg)
        self._by_phys[self._phys] = msg
        self._phys += len(record)
        return msg

    async def _notify(self) -> None:
        self._arrival.set()
        self._arrival = asyncio.Event()

    async def _pull(self, conn: Conn, f: Frame) -> bytes:
        topic, queue_id = f.ext_str("topic"), f.ext_int("queueId")
        offset, max_nums = f.ext_int("queueOffset"), max(1, f.ext_int("maxMsgNums", 32))
        group = f.ext_str("consumerGroup")
        sys_flag = f.ext_int("sysFlag")
        if sys_flag & 0x1:
            self._offsets[(group, topic, queue_id)] = f.ext_int("commitOffset")
        tags = _parse_expr(f.ext_str("subscription", "*"))
        hold = min(f.ext_int("suspendTimeoutMillis", 15000) / 1000.0, self.max_hold)
        deadline = time.monotonic() + (hold if sys_flag & 0x2 else 0.0)
        while True:
            queue = self._queues.get((topic, queue_id), [])
            found: list[StoredMessage] = []
            nxt = offset
            for msg in queue[offset:]:
                if len(found) >= max_nums:
                    break
                nxt = msg.queue_offset + 1
                if tags is None or msg.tags in tags:
                    found.append(msg)
            ext = {"suggestWhichBrokerId": 0, "minOffset": 0, "maxOffset": len(queue)}
            if found:
                body = b"".join(m.record for m in found)
                return encode_response(0, f.opaque, {**ext, "nextBeginOffset": nxt}, body, "FOUND")
            if nxt != offset:
                ext["nextBeginOffset"] = nxt
                return encode_response(20, f.opaque, ext, remark="NO_MATCHED_MESSAGE")
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                ext["nextBeginOffset"] = min(offset, len(queue))
                return encode_response(19, f.opaque, ext, remark="OFFSET_OVERFLOW_ONE")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._arrival.wait(), remaining)

    async def _query_offset(self, conn: Conn, f: Frame) -> bytes:
        key = (f.ext_str("consumerGroup"), f.ext_str("topic"), f.ext_int("queueId"))
        if key not in self._offsets and self.offset_not_found:
            return encode_response(
                22, f.opaque, remark="Not found, V3_0_6_SNAPSHOT maybe this group consumer boot first"
            )
        # Java broker answers offset 0 for a young queue with no committed offset.
        return encode_response(0, f.opaque, {"offset": self._offsets.get(key, 0)})

    async def _update_offset(self, conn: Conn, f: Frame) -> bytes:
        key = (f.ext_str("consumerGroup"), f.ext_str("topic"), f.ext_int("queueId"))
        self._offsets[key] = f.ext_int("commitOffset")
        return encode_response(0, f.opaque)

    async def _max_offset(self, conn: Conn, f: Frame) -> bytes:
        queue = self._queues.get((f.ext_str("topic"), f.ext_int("queueId")), [])
        return encode_response(0, f.opaque, {"offset": len(queue)})

    async def _zero_offset(self, conn: Conn, f: Frame) -> bytes:
        return encode_response(0, f.opaque, {"offset": 0})

    async def _send_back(self, conn: Conn, f: Frame) -> bytes:
        orig = self._by_phys.get(f.ext_int("offset"))
        if orig is None:
            return encode_response(1, f.opaque, remark="look message by offset failed")
        group = f.ext_str("group")
        times = orig.reconsume_times + 1
        max_times = f.ext_int("maxReconsumeTimes", 16) or 16
        topic = f"%DLQ%{group}" if times > max_times else f"%RETRY%{group}"
        props = dict(orig.properties)
        props.setdefault("RETRY_TOPIC", orig.topic)
        props.setdefault("ORIGIN_MESSAGE_ID", f.ext_str("originMsgId"))
        props["DELAY"] = str(f.ext_int("delayLevel") or 3 + times)  # recorded only: fake never delays
        self._append(
            topic, 0, orig.body, props, orig.flag,
            SendMeta(0, int(time.time() * 1000), conn.peer, times),
        )  # fmt: skip
        await self._notify()
        return encode_response(0, f.opaque)

    async def _lock(self, conn: Conn, f: Frame) -> bytes:
        req = json.loads(f.body.decode("utf-8")) if f.body else {}
        return encode_response(0, f.opaque, body=json.dumps({"lockOKMQSet": req.get("mqSet", [])}).encode())

    async def _ok(self, conn: Conn, f: Frame) -> bytes:
        return encode_response(0, f.opaque)

    async def _not_found(self, conn: Conn, f: Frame) -> bytes:
        return encode_response(22, f.opaque, remark="No config item")


def _parse_expr(expr: str) -> set[str] | None:
    if expr.strip() in ("", "*"):
        return None
    return {t.strip() for t in expr.split("||") if t.strip()}


_V2_NAMES = {c: c for c in "abcdefghijklm"}
_V1_FIELDS = (
    "producerGroup topic defaultTopic defaultTopicQueueNums queueId sysFlag bornTimestamp flag properties"
    " reconsumeTimes unitMode maxReconsumeTimes batch"
)
_V1_NAMES = dict(zip("abcdefghijklm", _V1_FIELDS.split(" "), strict=True))

_HANDLERS = {
    105: FakeCluster._route,
    34: FakeCluster._heartbeat,
    35: FakeCluster._unregister,
    38: FakeCluster._consumer_list,
    10: FakeCluster._send,
    310: FakeCluster._send,
    320: FakeCluster._send,
    11: FakeCluster._pull,
    14: FakeCluster._query_offset,
    15: FakeCluster._update_offset,
    30: FakeCluster._max_offset,
    31: FakeCluster._zero_offset,
    29: FakeCluster._zero_offset,
    36: FakeCluster._send_back,
    41: FakeCluster._lock,
    42: FakeCluster._ok,
    17: FakeCluster._ok,
    101: FakeCluster._not_found,
}


async def _main(args: argparse.Namespace) -> None:
    cluster = FakeCluster(
        Path(args.out) if args.out else None, args.queues, args.max_hold, args.offset_not_found
    )
    await cluster.start(args.port)
    print(json.dumps({"event": "listening", "port": cluster.port}), flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    await cluster.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", help="directory for raw frames + index.jsonl (omit: do not record)")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--queues", type=int, default=4)
    parser.add_argument("--max-hold", type=float, default=2.0, help="cap on pull long-poll hold (s)")
    parser.add_argument("--offset-not-found", action="store_true", help="answer 22 to unknown offsets")
    asyncio.run(_main(parser.parse_args()))


if __name__ == "__main__":
    main()
