"""CLI driving the REAL C++ RocketMQ client (librocketmq bundled in the PyPI wheel ``rocketmq==0.4.4``).

Run with the project venv's python (the wheel is installed there):

    .venv/bin/python tests/interop/cpp_driver.py produce --namesrv 127.0.0.1:9876 --group PG --topic T \
        --count 10 [--tags TagA] [--keys-prefix k] [--body-size 64] [--prop k=v ...] [--orderly-key K]
        [--batch] [--oneway] [--delay-level L] [--linger S]
    .venv/bin/python tests/interop/cpp_driver.py consume --namesrv ... --group CG --topic T \
        --expect N --timeout S [--expr "TagA || TagB"] [--broadcast] [--orderly] [--fail-first K]
        [--prop-key KEY ...] [--linger S]

stdout carries ONLY JSON lines (one object per line, flushed at once); everything the library or
Python prints goes to stderr (fd 1 is re-pointed at fd 2 before the library loads). Events:

* ``{"event": "started", "client": "cpp", "role": ..., "pid": ..., "log_dir": ...}``
* produce: ``{"event": "sent", "index", "status", "msg_id", "queue_offset", "queue_id"?, ...}`` per
  message (per batch with ``--batch``), ``{"event": "send_error", "index", "error"}`` on failure;
* consume: ``{"event": "message", "msg_id", "uniq_key", "identity", "topic", "tags", "keys", "body"
  | "body_b64", "properties", "queue_id", "queue_offset", "commit_log_offset", "reconsume_times",
  "delivery", "acked"}`` per delivery;
* last line ``{"event": "summary", "ok": bool, ...}``.

Exit codes: 0 success; 1 send failure / consume timeout; 2 bad usage. SIGTERM/SIGINT stop a
consumer early (exit code 1 unless the expectation was already met).

librocketmq writes logs under ``$HOME/logs/rocketmq-cpp``; this driver sets HOME to ``--log-dir``
(default: a fresh temp dir) *before* loading the library so nothing lands in the repo or real home.
"""

from __future__ import annotations

import argparse
import base64
import ctypes
import faulthandler
import json
import os
import signal
import sys
import tempfile
import threading
import time
import zlib
from collections.abc import Callable
from typing import Any, TextIO

# Properties librocketmq 1.x cannot enumerate (the C API only has GetMessageProperty(key)), so the
# consumer reports this fixed set plus any --prop-key names.
_KNOWN_PROPS = (
    "UNIQ_KEY",
    "KEYS",
    "TAGS",
    "WAIT",
    "DELAY",
    "RETRY_TOPIC",
    "REAL_TOPIC",
    "REAL_QID",
    "ORIGIN_MESSAGE_ID",
    "RECONSUME_TIME",
    "MAX_RECONSUME_TIMES",
    "MIN_OFFSET",
    "MAX_OFFSET",
    "CLUSTER",
    "TRAN_MSG",
    "PGROUP",
)

_OUT: TextIO = sys.stdout
_OUT_LOCK = threading.Lock()


def emit(obj: dict[str, Any]) -> None:
    line = json.dumps(obj, ensure_ascii=False, sort_keys=True)
    with _OUT_LOCK:
        _OUT.write(line + "\n")
        _OUT.flush()


def _isolate_stdout() -> None:
    """Keep stdout for JSON only: the C library and stray prints go to stderr."""
    global _OUT
    sys.stdout.flush()
    json_fd = os.dup(1)
    os.dup2(2, 1)
    _OUT = os.fdopen(json_fd, "w", buffering=1, encoding="utf-8")
    sys.stdout = sys.stderr


def _prepare_home(log_dir: str | None) -> str:
    path = log_dir or tempfile.mkdtemp(prefix="pocketmq-cpp-")
    os.makedirs(path, exist_ok=True)
    # librocketmq resolves its log/snapshot dir from $HOME when a client is created.
    os.environ["HOME"] = path
    return path


def _make_body(index: int, size: int | None) -> bytes:
    base = f"msg-{index}".encode()
    if size is None:
        return base
    if size <= len(base):
        return base[:size]
    return base + b"-" + b"x" * (size - len(base) - 1)


def _decode_body(raw: bytes | None) -> dict[str, str]:
    raw = raw or b""
    try:
        return {"body": raw.decode("utf-8")}
    except UnicodeDecodeError:
        return {"body_b64": base64.b64encode(raw).decode()}


def _text(value: bytes | str | None) -> str:
    if value is None:
        return ""
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else value


def _orderly_arg(key: str) -> int:
    # The wheel's queue selector takes an int: numeric keys map to themselves, others to a CRC.
    return int(key) if key.lstrip("-").isdigit() else zlib.crc32(key.encode()) & 0x7FFFFFFF


# ---- produce -----------------------------------------------------------------------------------


def cmd_produce(args: argparse.Namespace) -> int:
    from rocketmq.client import Message, Producer
    from rocketmq.ffi import dll

    props = _parse_props(args.prop)
    producer = Producer(args.group, timeout=args.send_timeout_ms)
    producer.set_namesrv_addr(args.namesrv)
    if args.access_key:
        producer.set_session_credentials(args.access_key, args.secret_key or "", "ALIYUN")
    if args.instance:
        dll.SetProducerInstanceName.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
        dll.SetProducerInstanceName(producer._handle, args.instance.encode())
    t0 = time.monotonic()
    producer.start()
    emit(
        {"event": "started", "client": "cpp", "role": "producer", "pid": os.getpid(), "log_dir": args.log_dir}
    )

    def build(i: int) -> Any:
        msg = Message(args.topic)
        if args.tags:
            msg.set_tags(args.tags)
        if args.keys_prefix:
            msg.set_keys(f"{args.keys_prefix}{i}")
        for k, v in props.items():
            msg.set_property(k, v)
        if args.delay_level:
            msg.set_delay_time_level(args.delay_level)
        body = _make_body(i, args.body_size)
        dll.SetByteMessageBody(msg._handle, body, len(body))
        return msg

    sent = failed = 0
    chosen: dict[str, int] = {}

    def selector(mq_size: int, _msg: Any, arg: Any) -> int:
        index = int(ctypes.cast(arg, ctypes.POINTER(ctypes.c_int))[0]) % mq_size
        chosen["queue_index"], chosen["mq_size"] = index, mq_size
        return index

    try:
        if args.batch:
            batch = [build(i) for i in range(args.count)]
            try:
                res = producer.send_batch(batch)
                sent = args.count
                emit(_sent_line(0, res, count=args.count))
            except Exception as exc:
                failed = args.count
                emit({"event": "send_error", "index": 0, "error": str(exc), "count": args.count})
        else:
            for i in range(args.count):
                msg = build(i)
                try:
                    if args.oneway:
                        producer.send_oneway(msg)
                        emit({"event": "sent", "index": i, "status": "ONEWAY"})
                    elif args.orderly_key is not None:
                        res = producer.send_orderly(
                            msg, _orderly_arg(args.orderly_key), queue_selector=selector
                        )
                        emit(_sent_line(i, res, queue_id=chosen.get("queue_index")))
                    else:
                        emit(_sent_line(i, producer.send_sync(msg)))
                    sent += 1
                except Exception as exc:
                    failed += 1
                    emit({"event": "send_error", "index": i, "error": str(exc)})
                    if not args.keep_going:
                        break
        if args.linger:
            time.sleep(args.linger)
    finally:
        producer.shutdown()
    ok = failed == 0 and sent == args.count
    emit({"event": "summary", "ok": ok, "sent": sent, "failed": failed, "elapsed": time.monotonic() - t0})
    return 0 if ok else 1


def _sent_line(index: int, res: Any, **extra: Any) -> dict[str, Any]:
    line: dict[str, Any] = {
        "event": "sent",
        "index": index,
        "status": res.status.name,
        "msg_id": res.msg_id,
        "queue_offset": res.offset,
    }
    line.update({k: v for k, v in extra.items() if v is not None})
    return line


def _parse_props(items: list[str]) -> dict[str, str]:
    props: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise SystemExit(f"--prop expects k=v, got {item!r}")
        props[key] = value
    return props


# ---- consume -----------------------------------------------------------------------------------


class _ConsumeState:
    def __init__(self, expect: int, fail_first: int) -> None:
        self.expect = expect
        self.fail_first = fail_first
        self.lock = threading.Lock()
        self.done = threading.Event()
        self.deliveries: dict[str, int] = {}
        self.acked: set[str] = set()
        self.total = 0


def cmd_consume(args: argparse.Namespace) -> int:
    from rocketmq.client import PushConsumer, RecvMessage
    from rocketmq.ffi import MessageModel, dll

    model = MessageModel.BROADCASTING if args.broadcast else MessageModel.CLUSTERING
    consumer = PushConsumer(args.group, orderly=args.orderly, message_model=model)
    consumer.set_namesrv_addr(args.namesrv)
    if args.access_key:
        consumer.set_session_credentials(args.access_key, args.secret_key or "", "ALIYUN")
    if args.instance:
        consumer.set_instance_name(args.instance)
    if args.threads:
        consumer.set_thread_count(args.threads)
    state = _ConsumeState(args.expect, args.fail_first)
    prop_keys = tuple(dict.fromkeys((*_KNOWN_PROPS, *args.prop_key)))

    def on_message(_consumer: Any, handle: Any) -> int:
        msg = RecvMessage(handle)
        props = {k: _text(msg.get_property(k)) for k in prop_keys}
        props = {k: v for k, v in props.items() if v}
        msg_id = _text(msg.id)
        identity = props.get("UNIQ_KEY") or props.get("ORIGIN_MESSAGE_ID") or msg_id
        with state.lock:
            delivery = state.deliveries.get(identity, 0) + 1
            state.deliveries[identity] = delivery
            state.total += 1
            acked = delivery > state.fail_first
            if acked:
                state.acked.add(identity)
            reached = len(state.acked) >= state.expect
        line = {
            "event": "message",
            "msg_id": msg_id,
            "uniq_key": props.get("UNIQ_KEY"),
            "identity": identity,
            "topic": _text(msg.topic),
            "tags": _text(msg.tags),
            "keys": _text(msg.keys),
            "properties": props,
            "queue_id": msg.queue_id,
            "queue_offset": msg.queue_offset,
            "commit_log_offset": msg.commit_log_offset,
            "reconsume_times": msg.reconsume_times,
            "born_timestamp": msg.born_timestamp,
            "store_timestamp": msg.store_timestamp,
            "delivery": delivery,
            "acked": acked,
        }
        line.update(_decode_body(msg.body))
        emit(line)
        if reached:
            state.done.set()
        return 0 if acked else 1  # CONSUME_SUCCESS / RECONSUME_LATER

    dll.Subscribe(consumer._handle, args.topic.encode(), args.expr.encode())
    consumer._register_callback(on_message)

    stopped = {"signal": 0}

    def on_signal(signum: int, _frame: Any) -> None:
        # A plain assignment only: CPython runs this on the main thread between bytecodes, possibly
        # while that thread holds a threading lock (inside Event.wait) -- Event.set() here can and
        # did dead-lock the driver.
        stopped["signal"] = signum

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    t0 = time.monotonic()
    consumer.start()
    emit(
        {"event": "started", "client": "cpp", "role": "consumer", "pid": os.getpid(), "log_dir": args.log_dir}
    )
    _wait_polling(lambda: state.done.is_set() or bool(stopped["signal"]), args.timeout)
    met = len(state.acked) >= state.expect
    if met and args.linger and not stopped["signal"]:
        # keep consuming: lets tests observe duplicates / offset commits (a signal cuts it short)
        _wait_polling(lambda: bool(stopped["signal"]), args.linger)
    _shutdown_with_watchdog(consumer.shutdown, args.shutdown_timeout)
    with state.lock:
        summary = {
            "event": "summary",
            "ok": bool(met),
            "distinct": len(state.acked),
            "deliveries": state.total,
            "expect": state.expect,
            "signal": stopped["signal"],
            "elapsed": time.monotonic() - t0,
        }
    emit(summary)
    return 0 if met else 1


def _wait_polling(done: Callable[[], bool], timeout: float) -> bool:
    """Sleep in short slices until ``done()``: a signal may be delivered to one of librocketmq's
    threads, and CPython only runs the Python handler once the main thread wakes up."""
    deadline = time.monotonic() + timeout
    while not done():
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return False
        time.sleep(min(remaining, 0.05))
    return True


def _shutdown_with_watchdog(fn: Any, timeout: float) -> None:
    """librocketmq's shutdown joins its threads; never let a stuck join hang the test run."""

    def bail() -> None:
        emit({"event": "summary", "ok": False, "error": f"shutdown took more than {timeout}s"})
        os._exit(3)

    timer = threading.Timer(timeout, bail)
    timer.daemon = True
    timer.start()
    try:
        fn()
    finally:
        timer.cancel()


# ---- CLI ---------------------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description="drive the real C++ RocketMQ client (rocketmq wheel)")
    sub = parser.add_subparsers(dest="cmd", required=True)
    for name in ("produce", "consume"):
        p = sub.add_parser(name)
        p.add_argument("--namesrv", required=True, help="name server address ip:port (';'-separated list ok)")
        p.add_argument("--group", required=True)
        p.add_argument("--topic", required=True)
        p.add_argument("--log-dir", help="HOME/log dir for librocketmq (default: a fresh temp dir)")
        p.add_argument("--instance", help="instance name (clientID is pid-ip@instance)")
        p.add_argument("--linger", type=float, default=0.0, help="seconds to stay up before shutdown")
        p.add_argument("--shutdown-timeout", type=float, default=20.0)
        p.add_argument("--access-key", help="ACL access key (set_session_credentials, channel ALIYUN)")
        p.add_argument("--secret-key", help="ACL secret key")
    prod = sub.choices["produce"]
    prod.add_argument("--count", type=int, default=1)
    prod.add_argument("--tags")
    prod.add_argument("--keys-prefix")
    prod.add_argument("--body-size", type=int)
    prod.add_argument("--prop", action="append", default=[], metavar="K=V")
    prod.add_argument("--orderly-key", help="send_orderly; selector = key % queue count")
    prod.add_argument("--batch", action="store_true", help="send all --count messages as ONE batch")
    prod.add_argument("--oneway", action="store_true")
    prod.add_argument("--delay-level", type=int, default=0)
    prod.add_argument("--send-timeout-ms", type=int, default=3000)
    prod.add_argument("--keep-going", action="store_true", help="continue after a failed send")
    cons = sub.choices["consume"]
    cons.add_argument("--expr", default="*")
    cons.add_argument("--expect", type=int, required=True, help="distinct messages to ack before exit 0")
    cons.add_argument("--timeout", type=float, required=True)
    cons.add_argument("--broadcast", action="store_true")
    cons.add_argument("--orderly", action="store_true")
    cons.add_argument("--fail-first", type=int, default=0, help="RECONSUME_LATER for first K deliveries")
    cons.add_argument("--prop-key", action="append", default=[], help="extra property names to report")
    cons.add_argument("--threads", type=int, default=0)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    _isolate_stdout()
    # `kill -USR1 <pid>` dumps every Python thread's stack to stderr (debugging a stuck client).
    faulthandler.register(signal.SIGUSR1, all_threads=True)
    args.log_dir = _prepare_home(args.log_dir)
    try:
        return cmd_produce(args) if args.cmd == "produce" else cmd_consume(args)
    except Exception as exc:  # start failures etc.: one JSON line, non-zero exit
        emit({"event": "summary", "ok": False, "error": f"{type(exc).__name__}: {exc}"})
        return 1


if __name__ == "__main__":
    code = main()
    _OUT.flush()
    sys.stderr.flush()
    # The client is already shut down: skip interpreter finalization, where the wheel's __del__
    # would shut down/destroy it again and a late SIGTERM would kill us with the default action.
    os._exit(code)
