"""What ACL and TLS cost: 1 KB single sends, 128 in flight, against mqnamesrv + mqbroker processes.

Three configurations, run in turn ``rounds`` times (same machine, same run, interleaved so load
drifts hit all three alike): ``off`` (no ACL, plaintext), ``acl`` (``aclEnable=true``, every request
signed and checked, account with explicit topic and default group permissions) and ``tls``
(``tls.server.mode=enforcing`` on both servers, the client verifying the certificate). Prints one
JSON line per run and a summary line with the best throughput of each and the ratios
(the issue's bar: acl/off >= 0.85, tls/off >= 0.70), plus ``<config>_over_off_broker_cpu``, the
median over rounds of the broker's CPU per message off / on (what the throughput ratio is when
the broker is the bottleneck). CPU per message (client and broker) is in every line: prefer it
on a loaded machine. Usage: ``python bench/acl_tls.py [secs] [rounds]
[configs]``, ``configs`` a comma-separated subset of ``off,acl,tls`` (all three by default).

``python bench/acl_tls.py --micro`` measures, in this process and without sockets, the CPU time
ACL adds per request: the client signing a 1 KB SEND_MESSAGE_V2 (the SDK's ``AclClientRPCHook``) and the
broker checking it (``AclValidator.before_request``: signature, resources, decision), best of
several rounds of ``time.process_time`` (steadier than throughput on a shared machine).
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import tempfile
import time
from typing import Any

from client_common import cluster, run_bench

from pocketmq.deploy.tls_cert import make_self_signed

ACL_YML = """\
accounts:
  - accessKey: benchUser
    secretKey: benchSecret
    admin: false
    defaultTopicPerm: DENY
    defaultGroupPerm: SUB
    topicPerms:
      - BenchAcl=PUB|SUB
"""


def micro(n: int = 2000, rounds: int = 40) -> None:
    import yaml

    from pocketmq.broker.acl.rules import build_rules
    from pocketmq.broker.acl.validator import AclValidator
    from pocketmq.client.acl import AclClientRPCHook
    from pocketmq.remoting.protocol.command import RemotingCommand

    class Rules:  # what AclValidator reads of a PlainAclManager
        rules = build_rules([("plain_acl.yml", yaml.safe_load(ACL_YML))])

    validator = AclValidator(Rules())  # type: ignore[arg-type]
    hook = AclClientRPCHook("benchUser", "benchSecret")  # as the SDK installs it: its before_request
    body = os.urandom(1024)
    props = "UNIQ_KEY\x01AC110001000018B4AAC2C2B1D10000\x02WAIT\x01true"

    def requests() -> list[RemotingCommand]:
        # the ext fields of a SEND_MESSAGE_V2 as the SDK sends it
        now = str(int(time.time() * 1000))
        fields = {"a": "BenchPG", "b": "BenchAcl", "c": "TBW102", "d": "4", "e": "0", "f": "0", "g": now,
                  "h": "0", "i": props, "j": "0", "k": "false", "l": "0", "m": "false", "n": "broker-a"}  # fmt: skip
        return [
            RemotingCommand(code=310, ext_fields={**fields, "e": str(i % 8)}, body=body) for i in range(n)
        ]

    def best(step: Any, signed: bool) -> float:
        out = float("inf")
        for _ in range(rounds):
            batch = requests()
            if signed:
                for r in batch:
                    hook.before_request("127.0.0.1:10911", r)
            t0 = time.process_time()
            for r in batch:
                step(r)
            out = min(out, time.process_time() - t0)
        return round(out / n * 1e6, 2)

    sign_us = best(lambda r: hook.before_request("127.0.0.1:10911", r), False)
    check_us = best(lambda r: validator.before_request("127.0.0.1:50000", r), True)
    assert validator.denied == 0
    print(
        json.dumps(
            {"bench": "acl_micro", "client_sign_us_per_request": sign_us,
             "broker_check_us_per_request": check_us, "load": os.getloadavg()[0]}
        ),
        flush=True,
    )  # fmt: skip


def main() -> None:
    if "--micro" in sys.argv:
        micro()
        return
    secs = sys.argv[1] if len(sys.argv) > 1 else "10"
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    wanted = sys.argv[3].split(",") if len(sys.argv) > 3 else ["off", "acl", "tls"]
    certs = tempfile.mkdtemp(prefix="pocketmq-bench-tls-")
    cert, key = make_self_signed(certs, hosts=("127.0.0.1", "localhost"))
    tls_sets = ("tls.server.mode=enforcing", f"tls.server.certPath={cert}", f"tls.server.keyPath={key}")
    configs = {
        "off": ({}, {}, (), ()),
        "acl": (
            {"conf/plain_acl.yml": ACL_YML},
            {"ROCKETMQ_ACCESS_KEY": "benchUser", "ROCKETMQ_SECRET_KEY": "benchSecret"},
            ("aclEnable=true",),
            (),
        ),
        "tls": (
            {},
            {"ROCKETMQ_TLS_ENABLE": "true", "ROCKETMQ_TLS_TRUST_CERT_PATH": cert},
            (*tls_sets, f"tls.client.trustCertPath={cert}"),
            tls_sets,
        ),
    }
    best: dict[str, dict[str, object]] = {}
    #: per round: config -> broker CPU µs per message (the projected ratios below)
    cpu: list[dict[str, float]] = []
    for r in range(rounds):
        cpu.append({})
        for name, (files, env, sets, ns_sets) in configs.items():
            if name not in wanted:
                continue
            with cluster("ASYNC_FLUSH", sets=sets, ns_sets=ns_sets, home_files=files) as c:
                # the ACL account may only send to BenchAcl; every run uses its own topic name
                topic = "BenchAcl" if name == "acl" else f"Bench{name.capitalize()}"
                result = run_bench(
                    ["produce", "-d", secs, "-t", topic, "-w", "128", "-s", "1024"], c, env=env
                )
            result.update(config=name, round=r, load=os.getloadavg()[0])
            print(json.dumps(result), flush=True)
            if result.get("errors"):
                raise SystemExit(f"{name}: {result['errors']} failed sends")
            cpu[-1][name] = next(float(v) for k, v in result.items() if k.startswith("broker_"))
            if name not in best or float(result["tps"]) > float(best[name]["tps"]):  # type: ignore[arg-type]
                best[name] = result
    off = float(best["off"]["tps"]) if "off" in best else float("nan")  # type: ignore[arg-type]
    summary = {
        "summary": True,
        **{f"{n}_tps": best[n]["tps"] for n in best},
        **{f"{n}_over_off": round(float(best[n]["tps"]) / off, 3) for n in best if n != "off"},  # type: ignore[arg-type]
        **{f"{n}_{k}": v for n in best for k, v in best[n].items() if k.endswith("cpu_us_per_msg")},
        # the broker-bound projection, steadier than throughput on a loaded machine: the median
        # over rounds of broker CPU per message off / on, each pair from the same round
        **{
            f"{n}_over_off_broker_cpu": round(statistics.median(c["off"] / c[n] for c in cpu), 3)
            for n in best
            if n != "off" and "off" in best
        },
    }
    print(json.dumps(summary), flush=True)


if __name__ == "__main__":
    main()
