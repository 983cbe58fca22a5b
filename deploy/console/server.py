"""``ConsoleServer``: the console's aiohttp application, startable inside a running loop.

    server = ConsoleServer("127.0.0.1:9876")
    await server.start(host="127.0.0.1", port=0)   # server.url: "http://127.0.0.1:<port>/"
    ...
    await server.stop()

``/`` serves ``static/index.html``; ``/static/*`` the script and style sheet; ``/api/*`` the JSON
routes of :mod:`.api` and :mod:`.api_more`. One admin client (its connections, signed with the
ACL credentials when given) serves every request; a :class:`~.volume.VolumeCollector` task
samples message volume for the Dashboard page every ``collect_interval`` seconds.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from importlib import resources
from pathlib import Path

from aiohttp import web

from pocketmq.client.admin import MQAdmin
from pocketmq.deploy.console.api import ADMIN_KEY, CREDENTIALS_KEY, routes
from pocketmq.deploy.console.api_more import COLLECTOR_KEY, more_routes
from pocketmq.deploy.console.volume import VolumeCollector
from pocketmq.remoting.common.metrics_http import serve_http

logger = logging.getLogger(__name__)

__all__ = ["ConsoleServer", "build_app", "static_dir"]


def static_dir() -> Path:
    """The packaged ``static/`` folder (package data)."""
    return Path(str(resources.files("pocketmq.deploy.console") / "static"))


def build_app(
    namesrv_addr: str,
    *,
    timeout_ms: int = 5000,
    access_key: str | None = None,
    secret_key: str | None = None,
    collect_interval: float = 60.0,
) -> web.Application:
    """The application; its admin client and volume collector start on startup, stop on cleanup."""
    app = web.Application()
    folder = static_dir()
    tasks: list[asyncio.Task[None]] = []

    async def open_admin(app: web.Application) -> None:
        admin = MQAdmin(namesrv_addr, timeout_ms=timeout_ms, access_key=access_key, secret_key=secret_key)
        app[ADMIN_KEY] = admin
        if access_key and secret_key:
            app[CREDENTIALS_KEY] = {"access_key": access_key, "secret_key": secret_key}
        collector = VolumeCollector(admin=admin, interval=collect_interval)
        app[COLLECTOR_KEY] = collector
        tasks.append(asyncio.get_running_loop().create_task(collector.run(), name="console-volume"))

    async def close_admin(app: web.Application) -> None:
        for task in tasks:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        await app[ADMIN_KEY].close()

    async def index(request: web.Request) -> web.FileResponse:
        return web.FileResponse(folder / "index.html", headers={"Cache-Control": "no-cache"})

    async def config(request: web.Request) -> web.Response:
        return web.json_response({"namesrvAddr": namesrv_addr, "acl": bool(access_key and secret_key)})

    app.on_startup.append(open_admin)
    app.on_cleanup.append(close_admin)
    app.router.add_get("/", index)
    app.router.add_get("/api/config", config)
    app.router.add_static("/static/", folder)
    routes(app)
    more_routes(app)
    return app


class ConsoleServer:
    """The console on ``host:port`` (``port=0``: a free one; see :attr:`url`)."""

    def __init__(
        self,
        namesrv_addr: str,
        *,
        timeout_ms: int = 5000,
        access_key: str | None = None,
        secret_key: str | None = None,
        collect_interval: float = 60.0,
    ) -> None:
        self.namesrv_addr = namesrv_addr
        self.app = build_app(
            namesrv_addr,
            timeout_ms=timeout_ms,
            access_key=access_key,
            secret_key=secret_key,
            collect_interval=collect_interval,
        )
        self._runner: web.AppRunner | None = None
        self.host = "127.0.0.1"
        self.port = 0

    @property
    def url(self) -> str:
        host = "127.0.0.1" if self.host in ("", "0.0.0.0") else self.host
        return f"http://{host}:{self.port}/"

    async def start(self, *, host: str = "127.0.0.1", port: int = 8082) -> None:
        """Bind and serve. Raises OSError when the port cannot be bound."""
        self._runner, self.port = await serve_http(self.app, host, port)
        self.host = host
        logger.info("console serving %s (name server %s)", self.url, self.namesrv_addr)

    async def stop(self) -> None:
        runner, self._runner = self._runner, None
        if runner is not None:
            await runner.cleanup()
