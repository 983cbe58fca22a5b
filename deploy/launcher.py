"""``pocketmq cluster up|down|status``: a local multi-process cluster (name servers + broker
groups) from the conf files, with data and logs under one directory, health checked.

    pocketmq cluster up --masters 2 [--slaves 0] [--namesrvs 1] [--dir DIR] [--set key=value ...]
    pocketmq cluster status [--dir DIR] [--json]
    pocketmq cluster down [--dir DIR]

``up`` starts ``mqnamesrv``/``mqbroker`` processes (``python -m pocketmq.namesrv|broker``) in
their own sessions, so they keep running after it returns; it returns once every port answers
and every broker is registered with the name servers (exit 0), or stops what it started and
exits 1 naming the process that failed (with the end of its log). Templates: ``namesrv.conf``,
``broker-a.conf`` (masters) and ``broker-a-s.conf`` (slaves) of ``--conf-dir`` (default
``$ROCKETMQ_HOME/conf``, else the repository's ``conf/``); names, ports, paths and the name server
list are set per process on top. ``down`` stops exactly the processes ``up`` recorded in
``DIR/cluster.json`` (brokers first) and nothing else; data and logs stay. ``status`` exits 0 when
every recorded process runs and every broker is registered, 1 otherwise.

``--slaves M`` needs master/slave replication (store HA), which is a later issue: until
``pocketmq.store.ha`` exists, ``up`` refuses ``--slaves`` > 0 instead of starting slaves that
would not replicate. Exposed as the click group :data:`cluster` (mounted by ``pocketmq``; also
``python -m pocketmq.deploy.launcher``).
"""

from __future__ import annotations

import asyncio
import importlib.util
import os
import sys
import time
from pathlib import Path
from typing import Any

import click

from pocketmq.deploy.cluster import (
    STATE_FILE,
    ClusterError,
    Proc,
    is_alive,
    log_tail,
    plan,
    port_open,
    read_state,
    start_proc,
    stop_procs,
    write_state,
)

__all__ = ["cluster", "ha_available"]

CONTEXT = {"help_option_names": ["-h", "--help"]}


def default_dir() -> str:
    home = os.environ.get("POCKETMQ_HOME") or os.path.join(os.path.expanduser("~"), ".pocketmq")
    return os.path.join(home, "cluster")


def default_conf_dir() -> str | None:
    candidates = []
    if os.environ.get("ROCKETMQ_HOME"):
        candidates.append(Path(os.environ["ROCKETMQ_HOME"]) / "conf")
    candidates.append(Path(__file__).resolve().parent.parent / "conf")  # a source checkout
    for c in candidates:
        if (c / "broker-a.conf").is_file():
            return str(c)
    return None


def ha_available() -> bool:
    """Whether this build replicates masters to slaves (the store's HA service)."""
    try:
        return importlib.util.find_spec("pocketmq.store.ha") is not None
    except ModuleNotFoundError:
        return False


def _fail(msg: str, code: int = 1) -> None:
    click.echo(f"pocketmq cluster: {msg}", err=True)
    sys.exit(code)


def _check_config(namesrv_conf: str | None, master_conf: str | None, overrides: tuple[str, ...]) -> None:
    """Load the configs the processes will load, before starting any: a bad or not-yet-supported
    key (``aclEnable=true``, ``tls.*``...) is one line and exit 2, not a broker dying at start."""
    from pocketmq.broker.config import load_broker_config
    from pocketmq.namesrv.config import load_namesrv_config
    from pocketmq.remoting.common.config import ConfigError

    try:
        load_namesrv_config(namesrv_conf)
        # the role keys plan() sets for a master come after the file, before the overrides
        load_broker_config(master_conf, ["brokerId=0", "brokerRole=ASYNC_MASTER", *overrides])
    except ConfigError as exc:
        _fail(str(exc), 2)


def _conf(conf_dir: str | None, name: str) -> str | None:
    if conf_dir is None:
        return None
    path = Path(conf_dir) / name
    return str(path) if path.is_file() else None


async def _registered(namesrv_addrs: str, timeout_ms: int = 2000) -> dict[str, set[int]] | None:
    """brokerName → registered broker ids, from the name servers (None if unreachable)."""
    from pocketmq.client.admin import MQAdmin

    try:
        async with MQAdmin(namesrv_addrs, timeout_ms=timeout_ms) as admin:
            info = await admin.cluster_info()
    except Exception:
        return None
    return {name: set(bd.broker_addrs) for name, bd in info.broker_addr_table.items()}


def _namesrv_addrs(procs: list[Proc]) -> str:
    return ";".join(p.addr for p in procs if p.role == "namesrv")


def _health(procs: list[Proc]) -> list[dict[str, Any]]:
    regs = asyncio.run(_registered(_namesrv_addrs(procs))) or {}
    rows = []
    for p in procs:
        alive = is_alive(p)
        listening = alive and port_open(p.port)
        registered = None
        if p.role == "broker":
            registered = bool(p.broker_name in regs and p.broker_id in regs[p.broker_name])
        rows.append({"role": p.role, "name": p.name, "pid": p.pid, "addr": p.addr, "log": p.log,
                     "alive": alive, "listening": listening, "registered": registered})  # fmt: skip
    return rows


def _healthy(rows: list[dict[str, Any]]) -> bool:
    return all(r["alive"] and r["listening"] and r["registered"] is not False for r in rows)


def _print(rows: list[dict[str, Any]], as_json: bool, root: Path, ns: str) -> None:
    if as_json:
        import orjson

        doc = {"dir": str(root), "namesrvAddr": ns, "healthy": _healthy(rows), "processes": rows}
        click.echo(orjson.dumps(doc, option=orjson.OPT_INDENT_2).decode())
        return
    from pocketmq.client.admin.format import table

    def yn(v: object) -> str:
        return "-" if v is None else ("yes" if v else "NO")

    click.echo(
        table(
            ["#Role", "#Name", "#PID", "#Addr", "#Alive", "#Listening", "#Registered", "#Log"],
            [
                [
                    r["role"],
                    r["name"],
                    r["pid"],
                    r["addr"],
                    yn(r["alive"]),
                    yn(r["listening"]),
                    yn(r["registered"]),
                    r["log"],
                ]
                for r in rows
            ],
        ),
        nl=False,
    )
    click.echo(f"export NAMESRV_ADDR='{ns}'")


@click.group(context_settings=CONTEXT)
def cluster() -> None:
    """A local multi-process cluster: name servers + broker groups under one directory."""


@cluster.command()
@click.option(
    "--masters", "-m", type=click.IntRange(1, 26), default=1, show_default=True, help="broker groups"
)
@click.option(
    "--slaves", "-s", type=click.IntRange(0, 4), default=0, show_default=True, help="slaves per group"
)
@click.option("--namesrvs", type=click.IntRange(1, 5), default=1, show_default=True, help="name servers")
@click.option(
    "--dir", "root", default=default_dir, show_default="$POCKETMQ_HOME/cluster or ~/.pocketmq/cluster"
)
@click.option(
    "--namesrv-port", type=click.IntRange(0, 65535), default=9876, show_default=True, help="0 = free ports"
)
@click.option(
    "--broker-port", type=click.IntRange(0, 65535), default=10911, show_default=True, help="0 = free ports"
)
@click.option("--host", default="127.0.0.1", show_default=True, help="address every server binds to")
@click.option(
    "--conf-dir", default=default_conf_dir, help="namesrv.conf / broker-a.conf / broker-a-s.conf templates"
)
@click.option("--set", "overrides", multiple=True, metavar="KEY=VALUE", help="broker config key (repeatable)")
@click.option(
    "--timeout", type=click.FloatRange(1), default=60.0, show_default=True, help="health-check seconds"
)
@click.option("--log-level", default="INFO", show_default=True)
@click.option("--json", "as_json", is_flag=True, help="print the cluster as JSON")
def up(
    masters: int, slaves: int, namesrvs: int, root: str, namesrv_port: int, broker_port: int, host: str,
    conf_dir: str | None, overrides: tuple[str, ...], timeout: float, log_level: str, as_json: bool,
) -> None:  # fmt: skip
    """Start the cluster and wait until it is healthy."""
    if slaves > 0 and not ha_available():
        _fail(
            "--slaves needs master/slave replication (store HA, pocketmq.store.ha), which this build "
            "does not have yet; a slave would start but never replicate. Use --slaves 0.",
            2,
        )
    _check_config(_conf(conf_dir, "namesrv.conf"), _conf(conf_dir, "broker-a.conf"), overrides)
    path = Path(root).resolve()
    state = _read(path)
    if state is not None and any(is_alive(p) for p in state[0]):
        pids = ", ".join(str(p.pid) for p in state[0] if is_alive(p))
        _fail(
            f"a cluster is already running in {path} (pids {pids}); run: pocketmq cluster down --dir {path}"
        )
    path.mkdir(parents=True, exist_ok=True)
    try:
        procs = plan(
            path, masters=masters, slaves=slaves, namesrvs=namesrvs, namesrv_port=namesrv_port,
            broker_port=broker_port, host=host, namesrv_conf=_conf(conf_dir, "namesrv.conf"),
            master_conf=_conf(conf_dir, "broker-a.conf"), slave_conf=_conf(conf_dir, "broker-a-s.conf"),
            overrides=overrides, log_level=log_level,
        )  # fmt: skip
    except ClusterError as exc:
        _fail(str(exc), 2)
    ns = _namesrv_addrs(procs)
    meta: dict[str, Any] = {"masters": masters, "slaves": slaves, "namesrvAddr": ns}
    started: list[Proc] = []
    deadline = time.monotonic() + timeout
    try:
        for role in ("namesrv", "broker"):
            batch = [p for p in procs if p.role == role]
            for p in batch:
                start_proc(p)
                started.append(p)
                write_state(path, started, meta)
            _wait(batch, deadline)
        _wait_registered(procs, deadline)
    except ClusterError as exc:
        stop_procs(started, timeout=10)
        (path / STATE_FILE).unlink(missing_ok=True)
        _fail(str(exc))
    _print(_health(procs), as_json, path, ns)


def _wait(batch: list[Proc], deadline: float) -> None:
    pending = list(batch)
    while pending:
        for p in list(pending):
            if not is_alive(p):
                raise ClusterError(f"{p.name} exited during start-up: {log_tail(p) or 'see ' + p.log}")
            if port_open(p.port):
                pending.remove(p)
        if pending and time.monotonic() > deadline:
            names = ", ".join(f"{p.name} (port {p.port})" for p in pending)
            raise ClusterError(f"not listening in time: {names}; see {pending[0].log}")
        if pending:
            time.sleep(0.05)


def _wait_registered(procs: list[Proc], deadline: float) -> None:
    brokers = [p for p in procs if p.role == "broker"]
    ns = _namesrv_addrs(procs)
    while True:
        regs = asyncio.run(_registered(ns)) or {}
        missing = [p for p in brokers if p.broker_id not in regs.get(p.broker_name or "", set())]
        if not missing:
            return
        for p in missing:
            if not is_alive(p):
                raise ClusterError(f"{p.name} exited during start-up: {log_tail(p) or 'see ' + p.log}")
        if time.monotonic() > deadline:
            raise ClusterError(
                f"not registered with the name servers in time: {', '.join(p.name for p in missing)}"
            )
        time.sleep(0.1)


def _read(path: Path) -> tuple[list[Proc], dict[str, Any]] | None:
    try:
        return read_state(path)
    except ClusterError as exc:
        _fail(str(exc))
        raise  # pragma: no cover


@cluster.command()
@click.option(
    "--dir", "root", default=default_dir, show_default="$POCKETMQ_HOME/cluster or ~/.pocketmq/cluster"
)
@click.option(
    "--timeout", type=click.FloatRange(1), default=30.0, show_default=True, help="seconds before SIGKILL"
)
@click.option("--json", "as_json", is_flag=True)
def down(root: str, timeout: float, as_json: bool) -> None:
    """Stop every process `up` started (brokers first); data and logs stay."""
    path = Path(root).resolve()
    state = _read(path)
    if state is None:
        if as_json:
            click.echo('{"stopped": []}')
        else:
            click.echo(f"no cluster recorded in {path}; nothing to stop")
        return
    procs, _ = state
    stopped = stop_procs(procs, timeout=timeout)
    (path / STATE_FILE).unlink(missing_ok=True)
    if as_json:
        import orjson

        click.echo(orjson.dumps({"stopped": [{"name": p.name, "pid": p.pid} for p in stopped]}).decode())
    else:
        for p in stopped:
            click.echo(f"stopped {p.name} (pid {p.pid})")
        click.echo(f"cluster in {path} is down (data and logs kept)")


@cluster.command()
@click.option(
    "--dir", "root", default=default_dir, show_default="$POCKETMQ_HOME/cluster or ~/.pocketmq/cluster"
)
@click.option("--json", "as_json", is_flag=True)
def status(root: str, as_json: bool) -> None:
    """Show every process and whether it runs, listens and is registered (exit 1 if not healthy)."""
    path = Path(root).resolve()
    state = _read(path)
    if state is None:
        _fail(f"no cluster recorded in {path} (start one with: pocketmq cluster up --dir {path})")
        return
    procs, meta = state
    rows = _health(procs)
    _print(rows, as_json, path, meta.get("namesrvAddr", _namesrv_addrs(procs)))
    if not _healthy(rows):
        sys.exit(1)


if __name__ == "__main__":  # pragma: no cover
    cluster()
