"""Transactional messages benchmark (issue 17), printed as JSON lines.

1. ``throughput``: a real ``mqnamesrv`` + ``mqbroker`` (separate processes, loopback, temp store)
   and one asyncio client (this process) keeping ``--inflight`` (64) operations in flight for
   ``--secs`` seconds each: plain sends and transactions (half send + local commit +
   END_TRANSACTION oneway), 1 KB bodies, in ``--rounds`` (4) alternating runs of a share each
   (the VM's speed drifts within minutes; the ratio of each round is printed too). Reported per run: operations per second (a transaction
   counts once it is committed on the broker: the run waits for the broker's
   ``transactionCommitCount``), and the broker's CPU per operation (``/proc/<pid>/stat``): user
   and system time of the whole process and of its loop (main) thread alone -- the rest is the
   store's threads, chiefly the CommitLog prefault's page zeroing, which grows with the bytes
   stored (a transaction stores ~2.4 times a plain send's) -- and its minor page faults. Each
   round's throughput ratio and broker CPU ratio (plain / transaction) are printed too. The
   issue's target: transactions at >= 50 % of plain sends.
2. ``check_scan``: the check service over a backlog of ``--halves`` (100k) half messages, in this
   process without sockets (a store in a temp dir, the broker's services as the broker builds
   them, CHECK_TRANSACTION_STATE handed to a counter): ``load`` (the op queue read into the
   resolved set at start), a run over halves that are all resolved (skipped), and a run over
   halves that are all due (each copied with its check count and a check encoded). CPU time of
   the process (``time.process_time``): the target is >= 100k halves/s scanned.

3. ``end_transaction``: the broker's own work per transaction, in this process without sockets
   (best of several rounds of ``time.process_time``, steadier than throughput on a shared
   machine): storing a half (``prepare_message``), an END_TRANSACTION commit through the
   processor (the half as prepare left it, ``transaction.recent``; or, every other round, read
   back from the CommitLog as after a restart; then the real message and the op record put) and
   the dispatch of the three records; next to a plain put and its dispatch (same body and keys).
   The oneway END_TRANSACTIONs are handed over ``--turn`` (16) per event-loop turn, as a broker
   reads several frames per turn with 64 in flight (their puts share one append per turn).
   ``n`` (4000, 1 KB bodies) stays under ``recent.MAX_ENTRIES`` and ``recent.MAX_BYTES``.

4. ``--callgrind SECS`` (instead of the above): ``throughput``'s two runs with the broker under
   valgrind's callgrind, its instruction counters zeroed when the measured window starts and
   dumped when it ends: broker instructions per plain send and per transaction, all threads, net
   of the broker's idle instructions per second (measured just before, over up to 5 s). A
   count, not a time, so it does not move with the machine's load (the broker runs ~50 times
   slower there, so more frames arrive per read than at full speed; ``brokerFastFailureEnable``
   is off, or requests would be refused for waiting).

5. ``--callgrind-offline N`` (instead of the above): the broker's work per plain send and per
   transaction in one process without sockets, counted by callgrind: ``N`` requests decoded from
   their frames (the bytes a producer sends, 1 KB bodies, ``--turn`` (16) a loop turn, each
   transaction's END_TRANSACTION in the next turn's frames; the real broker at 64 in flight reads
   ~25 requests a turn and dispatches ~40 records a reput batch), the send processor, each reply's header encoded,
   the END_TRANSACTION processor and its end-of-turn store, and reput after each turn. The
   same instructions every run (UNIQ_KEYs built from a counter, no clock in the workload), so
   it shows changes of a few thousand instructions that ``--callgrind``'s spread (several
   percent between runs of the same code: the pace under valgrind moves the work per read and
   the UNIQ_KEY hash-cache misses) hides; no socket or event-loop work is in it.

Usage: ``python bench/transaction_bench.py [--secs 10] [--rounds 4] [--halves 100000] [--turn 16] [--skip-throughput | --throughput-only]``
or ``python bench/transaction_bench.py --callgrind 10`` or ``... --callgrind-offline 2000``.
Numbers on a shared 2-core VM are noisy: the load average is printed with each result.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import client_common
from client_common import cluster

from pocketmq.broker.config import BrokerConfig
from pocketmq.broker.controller import BrokerController
from pocketmq.client import Message, Producer, TransactionState
from pocketmq.remoting.protocol.codes import RequestCode
from pocketmq.remoting.protocol.command import RemotingCommand, decode_command
from pocketmq.remoting.protocol.frame import FrameDecoder
from pocketmq.remoting.protocol.message import UniqIdGenerator, decode_offset_msg_id, properties_to_string
from pocketmq.remoting.protocol.registration import KVTable
from pocketmq.store import MessageInner
from pocketmq.testing.wire import Wire

HOST = (b"\x7f\x00\x00\x01", 10911)


#: what ``broker_counters`` reads: CPU seconds of the whole broker, of its loop (main) thread
#: alone (the rest is the store's threads: prefault, reservations, flush), and minor faults
COUNTERS = ("user", "sys", "loop_user", "loop_sys", "faults")


def broker_counters(pid: int) -> dict[str, float]:
    """``COUNTERS`` of ``pid`` (Linux ``/proc``): where a broker's CPU per operation goes."""

    def fields(path: str) -> list[str]:
        with open(path) as f:
            return f.read().rsplit(")", 1)[1].split()

    tck = os.sysconf("SC_CLK_TCK")
    whole, loop = fields(f"/proc/{pid}/stat"), fields(f"/proc/{pid}/task/{pid}/stat")
    return {"user": int(whole[11]) / tck, "sys": int(whole[12]) / tck, "loop_user": int(loop[11]) / tck,
            "loop_sys": int(loop[12]) / tck, "faults": int(whole[7])}  # fmt: skip


def load_avg() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


async def commit_count(addr: str) -> int:
    w = Wire(addr)
    try:
        r = await w.call(RequestCode.GET_BROKER_RUNTIME_INFO)
        return int(KVTable.decode(r.body or b"").table.get("transactionCommitCount", "0"))
    finally:
        await w.close()


async def _run(
    namesrv: str, addr: str, pid: int, secs: float, inflight: int, tx: bool, callgrind: bool = False
) -> dict[str, Any]:
    body = os.urandom(1024)
    done = 0

    async def commit(msg: Message, result: Any) -> TransactionState:
        return TransactionState.COMMIT_MESSAGE

    async with Producer("BenchTxPG" if tx else "BenchPG", namesrv=namesrv) as producer:
        topic = "BenchTx" if tx else "BenchPlain"
        await producer.send(Message(topic, b"warm-up"))  # route, connection, topic creation
        before_commits = await commit_count(addr) if tx else 0
        idle_s = window_at = 0.0
        if callgrind:
            # an idle stretch first: the broker's background work per second (timers, services),
            # which the window's count is net of (at valgrind's pace it would otherwise weigh
            # more per operation the fewer operations a window holds)
            await _callgrind_control("-z", str(pid))
            idle_at = time.monotonic()
            await asyncio.sleep(min(secs, 5.0))
            await _callgrind_control("-d", "idle", str(pid))
            idle_s = time.monotonic() - idle_at
            await _callgrind_control("-z", str(pid))  # the window starts here
            window_at = time.monotonic()
        stop_at = time.monotonic() + secs

        async def worker() -> None:
            nonlocal done
            while time.monotonic() < stop_at:
                if tx:
                    await producer.send_in_transaction(Message(topic, body), commit)
                else:
                    await producer.send(Message(topic, body))
                done += 1

        stat0, client0, t0 = broker_counters(pid), time.process_time(), time.monotonic()
        await asyncio.gather(*(worker() for _ in range(inflight)))
        if tx:  # the last END_TRANSACTIONs are oneway: count them once the broker has committed
            while True:
                if await commit_count(addr) - before_commits >= done:
                    break
                await asyncio.sleep(0.01)
        elapsed, stat1 = time.monotonic() - t0, broker_counters(pid)
        used = {k: stat1[k] - stat0[k] for k in COUNTERS}
        client_cpu = time.process_time() - client0
        if callgrind:
            await asyncio.sleep(1.0)  # the window's dispatch (reput) and flush
            await _callgrind_control("-d", "window", str(pid))
            window_at = time.monotonic() - window_at
    return {
        **({"idle_s": idle_s, "window_s": window_at} if callgrind else {}),
        "run": "transactions" if tx else "plain_sends",
        "ops": done,
        "ops_per_s": round(done / elapsed),
        "broker_cpu_us_per_op": round((used["user"] + used["sys"]) / done * 1e6, 1),
        **{f"broker_{k}_us_per_op": round(used[k] / done * 1e6, 1) for k in COUNTERS if k != "faults"},
        "broker_faults_per_op": round(used["faults"] / done, 2),
        "client_cpu_us_per_op": round(client_cpu / done * 1e6, 1),
        "load": load_avg(),
    }


#: ``_run``'s figures per operation that ``throughput`` averages over its rounds
PER_OP = (
    "broker_cpu_us_per_op",
    *(f"broker_{k}_us_per_op" for k in COUNTERS if k != "faults"),
    "broker_faults_per_op",
    "client_cpu_us_per_op",
)


def throughput(secs: float, inflight: int, rounds: int) -> None:
    """``rounds`` pairs of runs on one cluster, ``secs / rounds`` each, plain and transactions
    alternating (plain first in the odd rounds, transactions first in the even ones): this VM's
    speed drifts by a third within minutes, and two long runs one after the other measured the
    drift as much as the ratio (0.45-0.53 for the same code)."""
    slice_s = secs / rounds
    total: dict[bool, dict[str, float]] = {
        kind: dict.fromkeys(("ops", "s", *PER_OP), 0.0) for kind in (False, True)
    }
    ratios: list[float] = []
    cpu_ratios: list[float] = []  # broker CPU per plain send / per transaction, each round
    with cluster() as c:
        for r in range(rounds):
            per: dict[bool, float] = {}
            cpu: dict[bool, float] = {}
            for tx in (False, True) if r % 2 == 0 else (True, False):
                res = asyncio.run(_run(c.namesrv, c.broker_addrs[0], c.broker_pids[0], slice_s, inflight, tx))
                t = total[tx]
                t["ops"] += res["ops"]
                t["s"] += res["ops"] / res["ops_per_s"]
                for key in PER_OP:
                    t[key] += res[key] * res["ops"]
                per[tx], cpu[tx] = res["ops_per_s"], res["broker_cpu_us_per_op"]
            ratios.append(round(per[True] / per[False], 3))
            cpu_ratios.append(round(cpu[False] / cpu[True], 3))
    for tx in (False, True):
        t = total[tx]
        row = {
            "run": "transactions" if tx else "plain_sends",
            "ops": int(t["ops"]),
            "ops_per_s": round(t["ops"] / t["s"]),
            **{key: round(t[key] / t["ops"], 2 if key == "broker_faults_per_op" else 1) for key in PER_OP},
            "load": load_avg(),
        }
        print(json.dumps({"bench": "throughput", "inflight": inflight, "rounds": rounds, **row}), flush=True)
    plain, tx_run = total[False], total[True]
    print(
        json.dumps(
            {
                "bench": "throughput",
                "transactions_vs_plain": round(
                    (tx_run["ops"] / tx_run["s"]) / (plain["ops"] / plain["s"]), 3
                ),
                "per_round": ratios,
                "broker_cpu_plain_vs_tx_per_round": cpu_ratios,
                "target": ">= 0.5",
            }
        ),
        flush=True,
    )


async def _callgrind_control(*args: str) -> None:
    """``callgrind_control`` (zero or dump the broker's counters), waited for."""
    proc = await asyncio.create_subprocess_exec(
        "callgrind_control", *args, stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL
    )
    await proc.wait()


def _window_instructions(out: str, name: str = "window") -> int:
    """The instruction count of the dump ``name`` callgrind wrote next to ``out``."""
    for path in glob.glob(out + ".*"):
        with open(path, errors="replace") as f:
            text = f.read()
        if f"Trigger: dump {name}" in text:
            for line in text.splitlines():
                if line.startswith(("summary:", "totals:")):
                    return int(line.split()[1])
    raise RuntimeError(f"no callgrind window dump next to {out}")


def broker_instructions(secs: float, inflight: int, keep: str | None = None) -> None:
    """``throughput``'s runs with the broker under callgrind (module docstring, 4.); ``keep``: a
    directory the callgrind files are copied to (for ``callgrind_annotate``)."""
    tmp = tempfile.mkdtemp(prefix="pocketmq-txbench-cg-")
    real_bin, real_wait = client_common.BIN, client_common._wait_port
    try:
        with open(os.path.join(tmp, "mqbroker"), "w") as f:
            f.write(
                f'#!/bin/sh\nexec valgrind --tool=callgrind --callgrind-out-file="$CALLGRIND_OUT" '
                f'{sys.executable} {real_bin}/mqbroker "$@"\n'
            )
        os.chmod(os.path.join(tmp, "mqbroker"), 0o755)
        os.symlink(os.path.join(real_bin, "mqnamesrv"), os.path.join(tmp, "mqnamesrv"))
        client_common.BIN = tmp
        # a broker under valgrind takes a minute or so to open its port
        client_common._wait_port = lambda port, timeout=20.0: real_wait(port, 600.0)
        per_op = {}
        for tx in (False, True):
            out = os.path.join(tmp, f"callgrind.{'tx' if tx else 'plain'}")
            os.environ["CALLGRIND_OUT"] = out
            # (no fast failure: at valgrind's pace requests wait longer than waitTimeMillsInSendQueue)
            with cluster(sets=("brokerFastFailureEnable=false",)) as c:
                run = asyncio.run(
                    _run(c.namesrv, c.broker_addrs[0], c.broker_pids[0], secs, inflight, tx, callgrind=True)
                )
            idle_per_s = _window_instructions(out, "idle") / run["idle_s"]
            window = _window_instructions(out)
            per_op[tx] = (window - idle_per_s * run["window_s"]) / run["ops"]
            if keep:
                os.makedirs(keep, exist_ok=True)
                for path in glob.glob(out + ".*"):
                    shutil.copy(path, keep)
            print(
                json.dumps(
                    {
                        "bench": "broker_instructions",
                        "run": run["run"],
                        "ops": run["ops"],
                        "broker_instructions_per_op": round(per_op[tx]),
                        "gross_per_op": round(window / run["ops"]),
                        "idle_per_s": round(idle_per_s),
                    }
                ),
                flush=True,
            )
        print(
            json.dumps(
                {
                    "bench": "broker_instructions",
                    "plain_vs_transactions": round(per_op[False] / per_op[True], 3),
                    "target": ">= 0.5 (transactions at half the plain rate with the broker the bottleneck)",
                }
            ),
            flush=True,
        )
    finally:
        client_common.BIN, client_common._wait_port = real_bin, real_wait
        os.environ.pop("CALLGRIND_OUT", None)
        shutil.rmtree(tmp, ignore_errors=True)


def offline_broker(root: str, **keys: Any) -> BrokerController:
    """A broker's services over a store in ``root``, loaded, not started (no sockets)."""
    config = BrokerConfig.model_validate(
        {
            "brokerIP1": "127.0.0.1",
            "listenPort": 0,
            "namesrvAddr": None,
            **keys,
            "store": {"storePathRootDir": root, "mappedFileSizeCommitLog": 256 << 20},
        }
    )
    broker = BrokerController(config, fsync=False)
    broker.load()
    return broker


def check_scan(halves: int) -> None:
    root = tempfile.mkdtemp(prefix="pocketmq-txbench-")
    try:
        broker = offline_broker(root, transactionTimeOut=0)
        svc, checker = broker.transactional_message_service, broker.transaction_check_service
        sent = [0]

        def send_check(group: str, header: Any, body: bytes) -> bool:
            sent[0] += 1
            return True

        checker.send_check = send_check
        gen = UniqIdGenerator(ip=b"\x0a\x00\x00\x05")
        body = os.urandom(1024)
        born = int(time.time() * 1000) - 60_000
        for i in range(halves):
            props = properties_to_string(
                {
                    "TAGS": "TagA",
                    "KEYS": f"order-{i}",
                    "UNIQ_KEY": gen.create(),
                    "TRAN_MSG": "true",
                    "PGROUP": "PG",
                }
            )
            inner = MessageInner("BenchTx", body, i % 8, 0, props, 4, born, HOST, HOST)
            svc.prepare_message(inner)
        broker.store.do_reput()
        # every other half already resolved by an op record (half the backlog resolved, half due)
        for q in range(0, halves, 2):
            svc.write_op(q, q)
        broker.store.do_reput()
        svc.done.clear()

        t0 = time.process_time()
        svc.load()
        load_s = time.process_time() - t0
        t0 = time.process_time()
        checker.check_once()
        run_s = time.process_time() - t0
        print(
            json.dumps(
                {
                    "bench": "check_scan",
                    "halves": halves,
                    "ops_read_at_load_per_s": round((halves // 2) / load_s),
                    "halves_scanned": halves,
                    "checks_sent": sent[0],
                    "scan_per_s": round(halves / run_s),
                    "scan_us_per_half": round(run_s / halves * 1e6, 2),
                    "target": ">= 100000 halves/s (half resolved, half due: copied and checked)",
                    "load": load_avg(),
                }
            ),
            flush=True,
        )
        # the next run: every due half was copied (the copies are new to this run, so it stops at
        # them); the same backlog all resolved: the scan alone
        for q in range(broker.store.get_max_offset_in_queue("RMQ_SYS_TRANS_HALF_TOPIC", 0)):
            if q not in svc.done:
                svc.write_op(q, q)
        broker.store.do_reput()
        svc.half_progress = 0
        svc.read_ops()
        t0 = time.process_time()
        checker.check_once()
        run_s = time.process_time() - t0
        total = broker.store.get_max_offset_in_queue("RMQ_SYS_TRANS_HALF_TOPIC", 0)
        print(
            json.dumps(
                {
                    "bench": "check_scan_resolved",
                    "halves_scanned": total,
                    "scan_per_s": round(total / run_s),
                    "load": load_avg(),
                }
            ),
            flush=True,
        )
        broker.store.close()
    finally:
        shutil.rmtree(root, ignore_errors=True)


async def _end_in_turns(processor: Any, requests: list[RemotingCommand], turn: int) -> None:
    """``requests`` handed to the processor ``turn`` per event-loop turn (as frames of one read)."""
    for i in range(0, len(requests), turn):
        for request in requests[i : i + turn]:
            processor.end_transaction(None, request)
        await asyncio.sleep(0)  # the turn ends: the queued END_TRANSACTIONs are stored


def end_transaction_cpu(n: int = 4000, rounds: int = 8, turn: int = 16) -> None:
    root = tempfile.mkdtemp(prefix="pocketmq-txbench-")
    try:
        broker = offline_broker(root)
        svc, processor = broker.transactional_message_service, broker.end_transaction_processor
        store = broker.store
        gen = UniqIdGenerator(ip=b"\x0a\x00\x00\x05")
        body = os.urandom(1024)
        keys = ("prepare", "end", "end_read_back", "tx_reput", "plain_put", "plain_reput")
        best = dict.fromkeys(keys, float("inf"))

        def timed(key: str, t0: float) -> None:
            best[key] = min(best[key], time.process_time() - t0)

        def props(i: int, tx: bool) -> str:
            entries = {"TAGS": "TagA", "KEYS": f"order-{i}", "UNIQ_KEY": gen.create()}
            return properties_to_string({**entries, "TRAN_MSG": "true", "PGROUP": "PG"} if tx else entries)

        for round_no in range(rounds):
            born = int(time.time() * 1000)
            inners = [
                MessageInner("BenchTx", body, i % 8, 0, props(i, True), 4, born, HOST, HOST) for i in range(n)
            ]
            t0 = time.process_time()
            results = [svc.prepare_message(inner) for inner in inners]
            timed("prepare", t0)
            requests = []
            for inner, result in zip(inners, results, strict=True):
                append = result.append  # type: ignore[union-attr]
                uniq = inner.get_property("UNIQ_KEY") or ""
                ext = {"producerGroup": "PG", "tranStateTableOffset": str(append.logics_offset),
                       "commitLogOffset": str(append.wrote_offset), "commitOrRollback": "8",
                       "fromTransactionCheck": "false", "msgId": uniq, "transactionId": uniq}  # fmt: skip
                requests.append(RemotingCommand(code=RequestCode.END_TRANSACTION, ext_fields=ext, flag=2))
            if round_no % 2:  # every other round the halves are read back (as after a restart)
                svc.recent.clear()
            loop = asyncio.new_event_loop()
            t0 = time.process_time()
            loop.run_until_complete(_end_in_turns(processor, requests, turn))
            timed("end_read_back" if round_no % 2 else "end", t0)
            # the config writes the turns scheduled (a topic created by the first put) finish
            # before the loop closes: a closed loop left them pending ("Task was destroyed")
            if pending := asyncio.all_tasks(loop):
                loop.run_until_complete(asyncio.gather(*pending))
            loop.close()
            # the dispatch of a transaction's three records (half, committed copy, op record)
            t0 = time.process_time()
            store.do_reput()
            timed("tx_reput", t0)
            # a plain send's store work, same body and keys, for the comparison
            plain = [
                MessageInner("BenchPlain", body, i % 8, 0, props(i, False), 0, born, HOST, HOST)
                for i in range(n)
            ]
            t0 = time.process_time()
            for inner in plain:
                store.put_message(inner)
            timed("plain_put", t0)
            t0 = time.process_time()
            store.do_reput()
            timed("plain_reput", t0)
        assert svc.counters.committed == n * rounds
        us = {k: round(v / n * 1e6, 2) for k, v in best.items()}
        print(
            json.dumps(
                {
                    "bench": "end_transaction",
                    "broker_prepare_us": us["prepare"],
                    "broker_end_transaction_commit_us": us["end"],
                    "broker_end_transaction_commit_read_back_us": us["end_read_back"],
                    "broker_tx_reput_us": us["tx_reput"],
                    "broker_tx_store_us": round(us["prepare"] + us["end"] + us["tx_reput"], 2),
                    "broker_plain_put_us": us["plain_put"],
                    "broker_plain_reput_us": us["plain_reput"],
                    "broker_plain_store_us": round(us["plain_put"] + us["plain_reput"], 2),
                    "end_transactions_per_loop_turn": turn,
                    "note": "no sockets: the processors' and the store's work only (remoting, flush, prefault excluded)",
                    "load": load_avg(),
                }
            ),
            flush=True,
        )
        store.close()
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _self_callgrind(*args: str) -> None:
    """``callgrind_control`` on this process (under valgrind), waited for while this process
    keeps running (valgrind serves the request between its instructions, not in a wait)."""
    proc = subprocess.Popen(
        ["callgrind_control", *args, str(os.getpid())], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    while proc.poll() is None:
        time.sleep(0.02)


def _frames(n: int, tx: bool) -> list[bytes]:
    """SEND_MESSAGE_V2 frames as the SDK's producer sends them (a half: TRAN_MSG, PGROUP)."""
    body = bytes(range(256)) * 4
    out = []
    for i in range(1, n + 1):
        uniq = f"7F0000010A6B18B4AAC2{0x2794EB2C + i // 8:08X}{i & 0xFFFF:04X}"  # a "millisecond" per 8
        props = f"UNIQ_KEY\x01{uniq}" + ("\x02TRAN_MSG\x01true\x02PGROUP\x01BenchTxPG" if tx else "")
        ext = {"a": "BenchTxPG" if tx else "BenchPG", "b": "BenchTx" if tx else "BenchPlain", "c": "TBW102",
               "d": "4", "e": str(i % 4), "f": "4" if tx else "0", "g": "1764100000000", "h": "0", "i": props,
               "j": "0", "k": "false", "m": "false"}  # fmt: skip
        out.append(
            RemotingCommand(code=RequestCode.SEND_MESSAGE_V2, ext_fields=ext, body=body, opaque=i).encode()
        )
    return out


def _end_frames(replies: list[RemotingCommand]) -> bytes:
    """The oneway END_TRANSACTION (commit) frames of the halves ``replies`` answered."""
    frames = []
    for r in replies:
        # (read from the reply's bytes, as the producer does: a SEND_OK reply object need not
        # carry its extFields dict, command.EncodedReply)
        ext = decode_command(r.encode()[4:]).ext_fields or {}
        _, _, phy = decode_offset_msg_id(ext["msgId"])
        uniq = f"U{r.opaque:031d}"
        fields = {"producerGroup": "BenchTxPG", "tranStateTableOffset": ext["queueOffset"],
                  "commitLogOffset": str(phy), "commitOrRollback": "8", "fromTransactionCheck": "false",
                  "msgId": uniq, "transactionId": uniq}  # fmt: skip
        frames.append(RemotingCommand(code=RequestCode.END_TRANSACTION, ext_fields=fields, flag=2).encode())
    return b"".join(frames)


def offline_ops(n: int, tx: bool, turn: int = 16) -> None:
    """``--callgrind-offline``'s workload (module docstring, 5.), run under callgrind: dumps
    ``window`` (the workload) and ``client`` (the END_TRANSACTION frames built again: producer
    work inside the window, subtracted)."""
    root = tempfile.mkdtemp(prefix="pocketmq-txbench-")
    try:
        broker = offline_broker(root)
        send, end = broker.send_processor.process, broker.end_transaction_processor.end_transaction
        conn: Any = argparse.Namespace(attrs={}, remote_addr="127.0.0.1:5555")
        loop = asyncio.new_event_loop()
        frames = _frames(n + 1, tx)

        async def warm_up() -> None:  # the topics created, their config written
            for cmd in FrameDecoder().feed(frames.pop(0)):
                r = send(conn, cmd)
                r = r if isinstance(r, RemotingCommand) else await r  # type: ignore[misc]
                for c in FrameDecoder().feed(_end_frames([r]) if tx else b""):
                    end(conn, c)
            await asyncio.sleep(0)  # the END_TRANSACTION stored (its op topic created)
            # the topics' config writes (replies wait for them while they run)
            await asyncio.gather(*(asyncio.all_tasks() - {asyncio.current_task()}))
            assert broker.send_processor.topics.durable is None
            broker.store.do_reput()

        answered: list[RemotingCommand] = []

        # (an Enum class attribute read is ~0.6k instructions in Python 3.11: not per frame,
        # as the broker's dispatcher, which looks its handlers up by the int code)
        end_code = int(RequestCode.END_TRANSACTION)

        async def window() -> None:
            decoder, ends = FrameDecoder(), b""
            _self_callgrind("-z")
            for k in range(0, n, turn):
                replies = []
                for cmd in decoder.feed(b"".join(frames[k : k + turn]) + ends):
                    if cmd.code == end_code:
                        end(conn, cmd)
                    else:
                        r = send(conn, cmd)
                        assert isinstance(r, RemotingCommand), r
                        r.encode_header()  # the reply's header, as the connection writes it
                        replies.append(r)
                await asyncio.sleep(0)  # the turn ends: END_TRANSACTIONs stored
                broker.store.do_reput()
                ends = _end_frames(replies) if tx else b""
                answered.extend(replies)
            for cmd in decoder.feed(ends):
                end(conn, cmd)
            await asyncio.sleep(0)
            broker.store.do_reput()
            _self_callgrind("-d", "window")

        loop.run_until_complete(warm_up())
        # as mqbroker at the end of its boot (``runtime.boot_done``): what exists now is moved out
        # of the collector, or each full collection in the window walks every module (~10k
        # instructions per send that a running broker does not pay)
        gc.freeze()
        loop.run_until_complete(window())
        _self_callgrind("-z")
        for k in range(0, n, turn):
            if tx:
                _end_frames(answered[k : k + turn])
        _self_callgrind("-d", "client")
        loop.close()
        assert broker.transactional_message_service.counters.committed == (n + 1 if tx else 0)
        broker.store.close()
    finally:
        shutil.rmtree(root, ignore_errors=True)


def offline_instructions(n: int, turn: int = 16) -> None:
    """``--callgrind-offline`` (module docstring, 5.): ``offline_ops`` under valgrind, per kind."""
    tmp = tempfile.mkdtemp(prefix="pocketmq-txbench-cg-")
    try:
        per_op = {}
        for tx in (False, True):
            out = os.path.join(tmp, f"callgrind.{'tx' if tx else 'plain'}")
            subprocess.run(
                ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", sys.executable,
                 os.path.abspath(__file__), "--offline-ops", "tx" if tx else "plain", str(n), "--turn", str(turn)],
                check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            )  # fmt: skip
            per_op[tx] = (_window_instructions(out) - _window_instructions(out, "client")) / n
            run = "transactions" if tx else "plain_sends"
            print(json.dumps({"bench": "offline_instructions", "run": run, "ops": n, "turn": turn,
                              "broker_instructions_per_op": round(per_op[tx])}), flush=True)  # fmt: skip
        print(
            json.dumps(
                {
                    "bench": "offline_instructions",
                    "plain_vs_transactions": round(per_op[False] / per_op[True], 3),
                }
            ),
            flush=True,
        )
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--secs", type=float, default=10.0)
    parser.add_argument("--inflight", type=int, default=64)
    parser.add_argument(
        "--rounds", type=int, default=4, help="alternating plain/transaction runs of --secs / rounds each"
    )
    parser.add_argument("--halves", type=int, default=100_000)
    parser.add_argument(
        "--turn", type=int, default=16, help="requests per loop turn (end_transaction, --callgrind-offline)"
    )
    parser.add_argument("--skip-throughput", action="store_true")
    parser.add_argument("--throughput-only", action="store_true", help="no check_scan, no end_transaction")
    parser.add_argument("--callgrind", type=float, metavar="SECS", help="broker instructions per op only")
    parser.add_argument("--callgrind-keep", metavar="DIR", help="copy --callgrind's output files to DIR")
    parser.add_argument(
        "--callgrind-offline", type=int, metavar="N", help="in-process instructions per op only"
    )
    parser.add_argument("--offline-ops", nargs=2, metavar=("KIND", "N"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.offline_ops:
        offline_ops(int(args.offline_ops[1]), args.offline_ops[0] == "tx", max(1, args.turn))
        return
    if args.callgrind_offline:
        offline_instructions(args.callgrind_offline, max(1, args.turn))
        return
    if args.callgrind:
        broker_instructions(args.callgrind, args.inflight, args.callgrind_keep)
        return
    if not args.throughput_only:
        check_scan(args.halves)
        end_transaction_cpu(turn=max(1, args.turn))
    if not args.skip_throughput:
        throughput(args.secs, args.inflight, max(1, args.rounds))


if __name__ == "__main__":
    main()
