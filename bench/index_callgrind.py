"""The store's index step per record, counted by callgrind (instructions, not time).

Two runs of one workload under valgrind's callgrind, with ``messageIndexEnable`` on and off:
``--n`` records (1 KiB bodies, TAGS and a UNIQ_KEY as the SDK's producer sends them, ``--keys``
adds a KEYS token) are put into a fresh in-process ``MessageStore`` (loaded, not started: no
services, no sockets) before the window; the window is reput dispatching them through the
store's dispatcher in turns of ``--turn`` records (as a broker's reput runs between network
reads), then the index backlog written. Instructions per record with the index on, off, and the
difference: the index step (key parse, hash, entry and slot writes, header).

The UNIQ_KEYs are what ``UniqIdGenerator`` makes (20 hex chars of producer prefix, 8 of
milliseconds, 4 of counter), a new millisecond every ``--per-ms`` records, built from a counter
so every run counts the same work (the clock only gives the store times). ``--keep DIR`` keeps
the callgrind files (``callgrind_annotate --inclusive=yes DIR/callgrind.on.<pid>.1``).

Usage: ``python bench/index_callgrind.py [--n 10000] [--turn 16] [--per-ms 32] [--keys]``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

from pocketmq.store import MessageInner, MessageStore, MessageStoreConfig

HOST = (b"\x7f\x00\x00\x01", 10911)
PREFIX = "7F0000010A6B18B4AAC2"


def _self_callgrind(*args: str) -> None:
    """``callgrind_control`` on this process, waited for while this process keeps running
    (valgrind serves the request between its instructions, not in a wait)."""
    proc = subprocess.Popen(
        ["callgrind_control", *args, str(os.getpid())], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    while proc.poll() is None:
        time.sleep(0.02)


def _messages(n: int, per_ms: int, keys: bool) -> list[MessageInner]:
    body = bytes(range(256)) * 4
    out = []
    for i in range(n):
        uniq = f"{PREFIX}{0x2794EB2C + i // per_ms:08X}{i & 0xFFFF:04X}"
        props = f"TAGS\x01TagA\x02UNIQ_KEY\x01{uniq}\x02WAIT\x01true"
        if keys:
            props += f"\x02KEYS\x01order-{i}"
        msg = MessageInner(
            topic="IndexBench", body=body, queue_id=i % 8, properties=props,
            born_timestamp=1, born_host=HOST, store_host=HOST,
        )  # fmt: skip
        out.append(msg)
    return out


def child(index: bool, n: int, turn: int, per_ms: int, keys: bool) -> None:
    """The workload, run under callgrind: dumps ``window``."""
    root = tempfile.mkdtemp(prefix="pocketmq-idxcg-")
    try:
        store = MessageStore(MessageStoreConfig(store_path_root_dir=root, message_index_enable=index))
        store.load()
        warm = _messages(per_ms, per_ms, keys)  # the topic's queues and the index file created
        for m in warm:
            store.put_message(m)
        store.do_reput()
        msgs = _messages(n, per_ms, keys)
        for m in msgs:
            store.put_message(m)
        d = store.dispatcher
        _self_callgrind("-z")
        while d.do_reput(turn):
            pass
        d.write_index_backlog()
        _self_callgrind("-d", "window")
        assert d.reput_from_offset == store.commitlog.max_offset
        store.close()
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _window_instructions(out: str) -> tuple[int, str]:
    for name in os.listdir(os.path.dirname(out)):
        path = os.path.join(os.path.dirname(out), name)
        if not path.startswith(out + "."):
            continue
        with open(path, errors="replace") as f:
            text = f.read()
        if "Trigger: dump window" in text:
            for line in text.splitlines():
                if line.startswith(("summary:", "totals:")):
                    return int(line.split()[1]), path
    raise RuntimeError(f"no callgrind window dump next to {out}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=int, default=10_000)
    p.add_argument("--turn", type=int, default=16)
    p.add_argument("--per-ms", type=int, default=32)
    p.add_argument("--keys", action="store_true", help="a KEYS token per record too")
    p.add_argument("--keep", metavar="DIR", help="keep the callgrind files there")
    p.add_argument("--child", choices=("on", "off"), help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        child(args.child == "on", args.n, args.turn, args.per_ms, args.keys)
        return
    if shutil.which("valgrind") is None:
        # `make bench` runs every program here: say why there is no figure instead of a traceback
        print(json.dumps({"bench": "index_callgrind", "skipped": "valgrind is not installed"}))
        return
    tmp = args.keep or tempfile.mkdtemp(prefix="pocketmq-idxcg-out-")
    os.makedirs(tmp, exist_ok=True)
    per: dict[str, float] = {}
    files = {}
    try:
        for mode in ("on", "off"):
            out = os.path.join(tmp, f"callgrind.{mode}")
            cmd = [
                "valgrind", "--tool=callgrind", f"--callgrind-out-file={out}.%p", sys.executable,
                os.path.abspath(__file__), "--child", mode, "--n", str(args.n), "--turn", str(args.turn),
                "--per-ms", str(args.per_ms), *(["--keys"] if args.keys else []),
            ]  # fmt: skip
            subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            count, files[mode] = _window_instructions(out)
            per[mode] = count / args.n
        print(
            json.dumps(
                {
                    "bench": "index_callgrind", "records": args.n, "turn": args.turn,
                    "per_ms": args.per_ms, "keys": args.keys,
                    "instructions_per_record_index_on": round(per["on"]),
                    "instructions_per_record_index_off": round(per["off"]),
                    "index_instructions_per_record": round(per["on"] - per["off"]),
                    **({"files": files} if args.keep else {}),
                }
            ),
            flush=True,
        )  # fmt: skip
    finally:
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
