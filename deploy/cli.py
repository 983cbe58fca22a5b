"""The ``pocketmq`` command: conveniences around the servers.

    pocketmq up [--data-dir DIR] [--host 127.0.0.1] [--namesrv-port 9876] [--broker-port 10911]
                [--set key=value ...]
    pocketmq cluster up|down|status ...   (multi-process local clusters, pocketmq.deploy.launcher)
    pocketmq bench ...        (the SDK benchmarks, when pocketmq.client.benchmark is installed)
    pocketmq tls-cert ...     (a self-signed certificate and key for local TLS)

``up`` runs a name server and one broker (``broker-a``) in one process, listening on
``127.0.0.1:9876`` and ``127.0.0.1:10911`` by default, with all files under the data dir
(``$POCKETMQ_HOME``, else ``./data``: ``data/namesrv``, ``data/broker-a``). It uses
RocketMQ's defaults except for smaller store files (128 MiB CommitLog segments, a 40 MiB
index), which ``--set`` can change, e.g. ``--set mappedFileSizeCommitLog=1073741824``.
Ctrl-C / SIGTERM stop both cleanly.
"""

from __future__ import annotations

import asyncio
import importlib
import importlib.util
import logging
import os
import sys
from typing import Any

import click

logger = logging.getLogger("pocketmq.deploy")

#: Store settings of ``pocketmq up`` that differ from RocketMQ's (smaller files for a dev box).
UP_STORE_DEFAULTS = {
    "mappedFileSizeCommitLog": str(128 << 20),
    "maxHashSlotNum": "500000",
    "maxIndexNum": "2000000",
}

#: Subcommands provided by other packages, imported only when used: name → (module, attribute).
LAZY_COMMANDS = {
    "bench": ("pocketmq.client.benchmark", "bench"),
    "cluster": ("pocketmq.deploy.launcher", "cluster"),
    "tls-cert": ("pocketmq.deploy.tls_cert", "tls_cert"),
    "console": ("pocketmq.deploy.console.cli", "console"),
}


def default_data_dir() -> str:
    return os.environ.get("POCKETMQ_HOME") or "data"


class LazyGroup(click.Group):
    """A group whose optional subcommands are imported on first use."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        names = set(super().list_commands(ctx))
        for name, (module, _attr) in LAZY_COMMANDS.items():
            if _module_exists(module):
                names.add(name)
        return sorted(names)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        cmd = super().get_command(ctx, cmd_name)
        if cmd is not None or cmd_name not in LAZY_COMMANDS:
            return cmd
        module, attr = LAZY_COMMANDS[cmd_name]
        try:
            mod = importlib.import_module(module)
        except ModuleNotFoundError as exc:
            if exc.name != module:
                raise
            return None
        found = getattr(mod, attr, None)
        return found if isinstance(found, click.Command) else None


def _module_exists(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:
        return False


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
def main() -> None:
    """pocketmq: Apache RocketMQ 4.x rebuilt in Python."""


async def run_up(
    data_dir: str,
    host: str,
    namesrv_port: int,
    broker_port: int,
    overrides: tuple[str, ...],
    stop: asyncio.Event,
    ready: Any = None,
    console_port: int | None = None,
) -> None:
    """Start the name server and the broker, wait for ``stop``, shut both down."""
    from pocketmq.broker.config import load_broker_config
    from pocketmq.broker.controller import BrokerController
    from pocketmq.namesrv.config import NamesrvConfig
    from pocketmq.namesrv.controller import NamesrvController

    ns_dir = os.path.join(data_dir, "namesrv")
    os.makedirs(ns_dir, exist_ok=True)
    ns_config = NamesrvConfig.model_validate(
        {
            "listenPort": namesrv_port,
            "bindAddress": host,
            "kvConfigPath": os.path.join(ns_dir, "kvConfig.json"),
            "configStorePath": os.path.join(ns_dir, "namesrv.properties"),
        }
    )
    namesrv = NamesrvController(ns_config)
    await namesrv.start()
    broker = None
    console: Any = None
    try:
        settings = [f"{k}={v}" for k, v in UP_STORE_DEFAULTS.items()]
        settings += [
            "brokerName=broker-a",
            f"brokerIP1={'127.0.0.1' if host in ('0.0.0.0', '') else host}",
            f"listenHost={host}",
            f"listenPort={broker_port}",
            f"storePathRootDir={os.path.join(data_dir, 'broker-a')}",
            *overrides,
        ]
        config = load_broker_config(None, settings, namesrv_addr=namesrv.addr)
        broker = BrokerController(config)
        await broker.start()
        click.echo(
            f"pocketmq up: name server {namesrv.addr}, broker {config.broker_name} {broker.broker_addr}, "
            f"data in {data_dir}"
        )
        click.echo(
            f"  export NAMESRV_ADDR={namesrv.addr}   # then produce/consume with any RocketMQ 4.x client"
        )
        if console_port is not None:  # the web console (pocketmq.deploy.console)
            from pocketmq.deploy.console.server import ConsoleServer

            console = ConsoleServer(namesrv.addr)
            await console.start(host=host, port=console_port)
            click.echo(f"  web console {console.url}")
        if ready is not None:
            ready(namesrv, broker)
        await stop.wait()
    finally:
        if console is not None:
            await console.stop()
        if broker is not None:
            await broker.shutdown()
        await namesrv.shutdown()


@main.command()
@click.option("--data-dir", default=default_data_dir, show_default="$POCKETMQ_HOME or ./data")
@click.option("--host", default="127.0.0.1", show_default=True, help="address both servers bind to")
@click.option("--namesrv-port", default=9876, show_default=True, type=int)
@click.option("--broker-port", default=10911, show_default=True, type=int)
@click.option(
    "--set", "overrides", multiple=True, metavar="KEY=VALUE", help="broker/store config key (repeatable)"
)
@click.option(
    "--log-level", default=lambda: os.environ.get("POCKETMQ_LOG_LEVEL", "INFO"), show_default="INFO"
)
@click.option("--console", "with_console", is_flag=True, help="also serve the web console")
@click.option("--console-port", default=8082, show_default=True, type=int)
def up(
    data_dir: str,
    host: str,
    namesrv_port: int,
    broker_port: int,
    overrides: tuple[str, ...],
    log_level: str,
    with_console: bool = False,
    console_port: int = 8082,
) -> None:
    """Run a name server and one broker in this process (Ctrl-C to stop)."""
    from pocketmq.broker.config import ConfigError, load_broker_config
    from pocketmq.remoting.common.runtime import run_until_stopped
    from pocketmq.remoting.common.sched import set_loop_slice

    try:
        # refuse a bad or not-yet-supported key (aclEnable=true, tls.*...) before starting anything
        checked = load_broker_config(None, overrides)
    except ConfigError as exc:
        click.echo(f"pocketmq up: {exc}", err=True)
        sys.exit(2)
    logging.basicConfig(
        level=getattr(logging, log_level.upper(), logging.INFO),
        format="%(asctime)s %(levelname)-5s [%(name)s] %(message)s",
        stream=sys.stderr,
    )
    set_loop_slice(checked.loop_sched_slice_micros)  # (this thread runs the loop)
    data_dir = os.path.abspath(data_dir)
    try:
        run_until_stopped(
            lambda stop: run_up(
                data_dir,
                host,
                namesrv_port,
                broker_port,
                overrides,
                stop,
                console_port=console_port if with_console else None,
            )
        )
    except ConfigError as exc:
        click.echo(f"pocketmq up: {exc}", err=True)
        sys.exit(2)
    except OSError as exc:
        click.echo(f"pocketmq up: {exc}", err=True)
        sys.exit(1)


if __name__ == "__main__":  # pragma: no cover
    main()
