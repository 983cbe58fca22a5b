"""``mqbroker``: start a broker (RocketMQ's flags plus ``--set key=value``).

    mqbroker [-c conf/broker-a.conf] [-n 127.0.0.1:9876] [-p | -m] [--set key=value ...]

``-p`` prints every effective config key and exits, ``-m`` only the important ones (as
RocketMQ). A bad key or value is a startup error that names it (exit code 2). SIGTERM/SIGINT
shut the broker down cleanly: held pulls answered, unregistered from the name servers, store
flushed, metadata persisted.

Logging, as ``mqnamesrv``: the first of ``logging.json`` (``dictConfig``), ``logging.ini`` or
``logging.conf`` (``fileConfig``) found in ``$ROCKETMQ_HOME/conf``, then in the directory of the
``-c`` file (``conf/broker-a.conf`` → ``conf/logging.ini``); else ``basicConfig`` on stderr at
``--log-level``.
"""

from __future__ import annotations

import asyncio
import logging
import logging.config
import sys

import click

from pocketmq.broker.config import BrokerConfig, ConfigError, load_broker_config
from pocketmq.remoting.common.logsetup import configure_logging
from pocketmq.remoting.common.runtime import boot_done, freeze_heap, run_until_stopped, server_command
from pocketmq.remoting.common.sched import set_loop_slice

logger = logging.getLogger("pocketmq.broker")

IMPORTANT_KEYS = (
    "brokerClusterName", "brokerName", "brokerId", "brokerIP1", "listenPort", "namesrvAddr",
    "storePathRootDir", "brokerRole", "flushDiskType", "autoCreateTopicEnable", "mappedFileSizeCommitLog",
)  # fmt: skip


async def serve(config: BrokerConfig, stop: asyncio.Event | None = None, *, freeze_gc: bool = False) -> None:
    """Run a broker until ``stop`` is set (or forever), then shut it down cleanly.

    ``freeze_gc`` (the ``mqbroker`` process, not in-process callers such as tests): see
    :func:`~pocketmq.remoting.common.runtime.freeze_heap`.
    """
    from pocketmq.broker.controller import BrokerController

    controller = BrokerController(config)
    stop = stop or asyncio.Event()
    if freeze_gc:
        freeze_heap()  # (before the port opens: no client waits for it)
    await controller.start()
    # Java's mqbroker prints this line to stdout; scripts wait for it.
    ns = f" and name server is {config.namesrv_addr}" if config.namesrv_addr else ""
    boot_done(
        f"The broker[{config.broker_name}, {controller.broker_addr}] boot success. serializeType=JSON{ns}",
        freeze_gc=freeze_gc,
    )
    try:
        await stop.wait()
    finally:
        await controller.shutdown()


@server_command("broker .conf file")
@click.option(
    "-n", "--namesrv-addr", "namesrv", help="name server address list, e.g. 127.0.0.1:9876;127.0.0.2:9876"
)
@click.option("-p", "--print-config", "print_all", is_flag=True, help="print all config keys and exit")
@click.option(
    "-m", "--print-important-config", "print_important", is_flag=True, help="print important keys and exit"
)
def main(
    conf: str | None,
    namesrv: str | None,
    print_all: bool,
    print_important: bool,
    overrides: tuple[str, ...],
    log_level: str,
) -> None:
    """Start a pocketmq broker (RocketMQ 4.x compatible)."""
    try:
        configure_logging(log_level, conf)
    except (ValueError, KeyError, OSError) as exc:
        click.echo(f"mqbroker: bad logging config: {exc!r}", err=True)
        sys.exit(2)
    try:
        config = load_broker_config(conf, overrides, namesrv_addr=namesrv)
    except ConfigError as exc:
        click.echo(f"mqbroker: {exc}", err=True)
        sys.exit(2)
    if print_all or print_important:
        props = config.properties()
        for key, value in props.items():
            if print_all or key in IMPORTANT_KEYS:
                click.echo(f"{key}={value}")
        return
    logger.info("advertised address %s:%d (brokerIP1)", config.broker_ip1, config.listen_port)
    set_loop_slice(config.loop_sched_slice_micros)  # (this thread runs the loop)
    try:
        run_until_stopped(lambda stop: serve(config, stop, freeze_gc=True))
    except ConfigError as exc:  # found while building the broker (e.g. aclEnable with a bad file)
        click.echo(f"mqbroker: {exc}", err=True)
        sys.exit(2)
    except OSError as exc:
        click.echo(f"mqbroker: {exc}", err=True)
        sys.exit(1)
    except Exception as exc:  # one clear line, not a 40-line traceback (issue 23)
        logger.debug("broker failed", exc_info=True)
        click.echo(f"mqbroker: {type(exc).__name__}: {exc} (--log-level DEBUG shows where)", err=True)
        sys.exit(1)


if __name__ == "__main__":  # pragma: no cover
    main()
