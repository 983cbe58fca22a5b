"""``mqnamesrv``: start a name server (RocketMQ's flags plus ``--set key=value``).

    mqnamesrv [-c conf/namesrv.conf] [-p] [--set key=value ...] [--log-level INFO]

* ``-c``: a RocketMQ ``namesrv.conf`` (Java keys; unsupported Netty/thread-pool keys are accepted
  with a warning);
* ``--set``: override any key (repeatable), applied after the file;
* ``-p``: print the effective config as properties and exit 0.

Listens on ``listenPort`` (9876 by default). A bad key or value, an unusable port or a corrupt KV
file is one line on stderr naming the problem and a non-zero exit code (2: config, 1: start-up).
SIGTERM/SIGINT shut down cleanly (connections closed, pending KV changes written); a second
signal exits at once. On success the line ``The Name Server boot success. serializeType=JSON``
goes to stdout, as Java's ``mqnamesrv`` prints it.

Logging is configured here only: ``$ROCKETMQ_HOME/conf/logging.json`` (``dictConfig``),
``logging.ini`` or ``logging.conf`` (``fileConfig``), also looked for beside the ``-c`` file
(:mod:`pocketmq.remoting.common.logsetup`), else plain ``basicConfig`` on
stderr.
"""

from __future__ import annotations

import asyncio
import logging
import logging.config
import os
import sys

import click

from pocketmq.namesrv.config import NamesrvConfig, load_namesrv_config
from pocketmq.remoting.common.config import ConfigError, render_config
from pocketmq.remoting.common.logsetup import configure_logging
from pocketmq.remoting.common.persist import PersistCorruptError
from pocketmq.remoting.common.runtime import boot_done, freeze_heap, run_until_stopped, server_command

logger = logging.getLogger("pocketmq.namesrv")

__all__ = ["configure_logging", "main", "serve"]


async def serve(config: NamesrvConfig, stop: asyncio.Event | None = None, *, freeze_gc: bool = False) -> None:
    """Run a name server until ``stop`` is set (or forever), then shut it down cleanly.

    ``freeze_gc`` (the ``mqnamesrv`` process, not in-process callers): see
    :func:`~pocketmq.remoting.common.runtime.freeze_heap`.
    """
    from pocketmq.namesrv.controller import NamesrvController

    controller = NamesrvController(config)
    stop = stop or asyncio.Event()
    if freeze_gc:
        freeze_heap()  # (before the port opens: no client waits for it)
    try:
        await controller.start()
        boot_done("The Name Server boot success. serializeType=JSON", freeze_gc=freeze_gc)
        await stop.wait()
    finally:
        await controller.shutdown()


@server_command("namesrv .conf file")
@click.option(
    "-p", "--print-config", "print_config", is_flag=True, help="print the effective config and exit"
)
def main(conf: str | None, print_config: bool, overrides: tuple[str, ...], log_level: str) -> None:
    """Start a pocketmq name server (RocketMQ 4.x compatible)."""
    configure_logging(log_level, conf)
    try:
        config = load_namesrv_config(conf, overrides)
    except ConfigError as exc:
        click.echo(f"mqnamesrv: {exc}", err=True)
        sys.exit(2)
    if not config.rocketmq_home and os.environ.get("ROCKETMQ_HOME"):
        config = config.model_copy(update={"rocketmq_home": os.environ["ROCKETMQ_HOME"]})
    if print_config:
        click.echo(render_config(config), nl=False)
        return
    try:
        run_until_stopped(lambda stop: serve(config, stop, freeze_gc=True))
    except ConfigError as exc:  # found while building the server (e.g. TLS without a certificate)
        click.echo(f"mqnamesrv: {exc}", err=True)
        sys.exit(2)
    except PersistCorruptError as exc:
        click.echo(f"mqnamesrv: kvConfigPath {config.kv_config_path}: {exc}", err=True)
        sys.exit(1)
    except OSError as exc:
        if exc.filename:  # the KV file or its directory
            click.echo(f"mqnamesrv: {exc}", err=True)
        else:
            where = f"{config.bind_address}:{config.listen_port}"
            click.echo(f"mqnamesrv: cannot listen on {where} (bindAddress/listenPort): {exc}", err=True)
        sys.exit(1)
    except Exception as exc:  # one clear line, not a 40-line traceback (issue 23)
        logging.getLogger("pocketmq.namesrv").debug("name server failed", exc_info=True)
        click.echo(f"mqnamesrv: {type(exc).__name__}: {exc} (--log-level DEBUG shows where)", err=True)
        sys.exit(1)


if __name__ == "__main__":  # pragma: no cover
    main()
