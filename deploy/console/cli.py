"""``pocketmq console -n NAMESRV [--host 127.0.0.1] [--port 8082]``: serve the web console."""

from __future__ import annotations

import asyncio
import logging
import os
import sys

import click

__all__ = ["console"]


@click.command()
@click.option(
    "-n", "--namesrv-addr", default=lambda: os.environ.get("NAMESRV_ADDR", "127.0.0.1:9876"),
    show_default="$NAMESRV_ADDR or 127.0.0.1:9876", help="name server(s), 'host:port;host:port'",
)  # fmt: skip
@click.option("--host", default="127.0.0.1", show_default=True, help="address to serve on")
@click.option("--port", default=8082, show_default=True, type=int, help="port (rocketmq-dashboard's 8082)")
@click.option(
    "--access-key", default=lambda: os.environ.get("ROCKETMQ_ACCESS_KEY"),
    show_default="$ROCKETMQ_ACCESS_KEY", help="ACL access key the console signs its requests with",
)  # fmt: skip
@click.option(
    "--secret-key", default=lambda: os.environ.get("ROCKETMQ_SECRET_KEY"),
    show_default="$ROCKETMQ_SECRET_KEY", help="ACL secret key",
)  # fmt: skip
@click.option(
    "--collect-interval", default=60.0, show_default=True, type=click.FloatRange(min=0.1),
    help="seconds between the Dashboard page's volume samples",
)  # fmt: skip
@click.option("--log-level", default="INFO", show_default=True)
def console(
    namesrv_addr: str,
    host: str,
    port: int,
    access_key: str | None,
    secret_key: str | None,
    collect_interval: float,
    log_level: str,
) -> None:
    """Serve the web console for the cluster behind NAMESRV (Ctrl-C to stop)."""
    if bool(access_key) != bool(secret_key):
        raise click.UsageError("--access-key and --secret-key go together")
    from pocketmq.deploy.console.server import ConsoleServer
    from pocketmq.remoting.common.runtime import run_until_stopped

    logging.basicConfig(
        level=getattr(logging, log_level.upper(), logging.INFO),
        format="%(asctime)s %(levelname)-5s [%(name)s] %(message)s",
        stream=sys.stderr,
    )

    async def serve(stop: asyncio.Event) -> None:
        server = ConsoleServer(
            namesrv_addr, access_key=access_key, secret_key=secret_key, collect_interval=collect_interval
        )
        await server.start(host=host, port=port)
        click.echo(f"pocketmq console: {server.url} (name server {namesrv_addr})")
        try:
            await stop.wait()
        finally:
            await server.stop()

    try:
        run_until_stopped(serve)
    except OSError as exc:
        click.echo(f"pocketmq console: {exc}", err=True)
        sys.exit(1)
