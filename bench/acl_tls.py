"""What ACL and TLS cost: 1 KB single sends, 128 in flight, against mqnamesrv + mqbroker processes.

Three configurations, run in turn ``rounds`` times (same machine, same run, interleaved so load
drifts hit all three alike): ``off`` (no ACL, plaintext), ``acl`` (``aclEnable=true``, every request
signed and checked, account with explicit topic and default group permissions) and ``tls``
(``tls.server.mode=enforcing`` on both servers, the client verifying the certificate). Prints one
JSON line per run and a summary line with the best throughput of each and the ratios
(the issue's bar: acl/off >= 0.85, tls/off >= 0.70). CPU per message (client and broker) is in
every line: prefer it on a loaded machine. Usage: ``python bench/acl_tls.py [secs] [rounds]``.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile

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


def main() -> None:
    secs = sys.argv[1] if len(sys.argv) > 1 else "10"
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 3
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
    for r in range(rounds):
        for name, (files, env, sets, ns_sets) in configs.items():
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
            if name not in best or float(result["tps"]) > float(best[name]["tps"]):  # type: ignore[arg-type]
                best[name] = result
    off = float(best["off"]["tps"])  # type: ignore[arg-type]
    summary = {
        "summary": True,
        **{f"{n}_tps": best[n]["tps"] for n in best},
        "acl_over_off": round(float(best["acl"]["tps"]) / off, 3),  # type: ignore[arg-type]
        "tls_over_off": round(float(best["tls"]["tps"]) / off, 3),  # type: ignore[arg-type]
        **{f"{n}_{k}": v for n in best for k, v in best[n].items() if k.endswith("cpu_us_per_msg")},
    }
    print(json.dumps(summary), flush=True)


if __name__ == "__main__":
    main()
