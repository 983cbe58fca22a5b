"""The Prometheus exporter of the broker and the name server (RocketMQ 5.x metrics keys).

Keys (both servers; RocketMQ 5's ``BrokerConfig`` / ``ControllerConfig`` spellings and defaults):

=============================  ===========  ==================================================
key                            default      meaning
=============================  ===========  ==================================================
``metricsExporterType``        ``DISABLE``  ``PROM`` serves ``/metrics``; ``OTLP_GRPC`` and
                                            ``LOG`` are refused (``unsupported.REFUSALS``)
``metricsPromExporterPort``    ``5557``     TCP port of the exporter (0 = ephemeral, tests)
``metricsPromExporterHost``    ``""``       interface to bind (empty = every interface)
``metricsLabel``               ``""``       ``k:v,k2:v2`` labels added to every sample
=============================  ===========  ==================================================

The exporter runs on the server's own event loop (aiohttp): a scrape reads the live tables
between two requests, so the collectors need no locks and nothing is sampled per message.
``prometheus_client`` and ``aiohttp`` are imported only when the exporter is wanted: a server
with ``PROM`` calls :func:`preload` before it opens its remoting port, because those imports take
~130 ms of the loop thread (``-X importtime``), which a client connected at once would wait for.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Annotated, Any

from pydantic import AfterValidator

if TYPE_CHECKING:
    from aiohttp import web
    from prometheus_client.registry import Collector

logger = logging.getLogger(__name__)

__all__ = [
    "EXPORTER_TYPES",
    "ExporterType",
    "MetricsLabel",
    "PromExporter",
    "check_exporter_type",
    "parse_metrics_label",
    "serve_http",
    "start_exporter",
    "with_labels",
]

#: the text format every Prometheus 2.x parses (what ``generate_latest`` writes)
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

#: RocketMQ 5 ``MetricsExporterType`` names.
EXPORTER_TYPES = ("DISABLE", "OTLP_GRPC", "PROM", "LOG")


def check_exporter_type(value: str) -> str:
    """Upper-cased ``metricsExporterType``; ValueError naming the choices otherwise."""
    v = value.strip().upper()
    if v not in EXPORTER_TYPES:
        raise ValueError(f"metricsExporterType must be one of {', '.join(EXPORTER_TYPES)}, not {value!r}")
    return v


def parse_metrics_label(value: str) -> dict[str, str]:
    """``metricsLabel`` (``instance_id:a,uid:b``) as a dict; ValueError for a malformed pair."""
    out: dict[str, str] = {}
    for pair in value.split(","):
        if not pair.strip():
            continue
        key, sep, val = pair.partition(":")
        key = key.strip()
        if (
            not sep
            or not key
            or not (key[0].isalpha() or key[0] == "_")
            or not key.replace("_", "").isalnum()
        ):
            raise ValueError(f"metricsLabel pair {pair!r} is not name:value")
        out[key] = val.strip()
    return out


def _check_label(value: str) -> str:
    parse_metrics_label(value)
    return value


#: the config field types of ``metricsExporterType`` and ``metricsLabel`` (validated on load)
ExporterType = Annotated[str, AfterValidator(check_exporter_type)]
MetricsLabel = Annotated[str, AfterValidator(_check_label)]


def with_labels(collector: Collector, extra: Mapping[str, str]) -> Collector:
    """``collector`` with ``extra`` labels appended to every sample (``metricsLabel``)."""
    if not extra:
        return collector

    class _Labelled:
        def collect(self) -> Iterable[Any]:
            for family in collector.collect():
                family.samples = [
                    s._replace(labels={**s.labels, **extra}) for s in family.samples
                ]  # fmt: skip
                yield family

    return _Labelled()


def preload() -> None:
    """Import what the exporter runs on (``aiohttp``'s server, ``prometheus_client``'s registry,
    exposition and metric families), before a server opens its remoting port: at its start the
    imports would hold the loop ~130 ms while clients may already be connected."""
    import aiohttp.web  # noqa: F401
    import prometheus_client.core
    import prometheus_client.exposition
    import prometheus_client.registry  # noqa: F401


async def serve_http(app: web.Application, host: str, port: int) -> tuple[web.AppRunner, int]:
    """Serve ``app`` on ``host:port`` on the running loop; returns its runner and bound port.

    Raises: OSError when the port cannot be bound (nothing is left open).
    """
    from aiohttp import web

    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, host, port)
    try:
        await site.start()
    except BaseException:
        await runner.cleanup()
        raise
    server = getattr(site, "_server", None)
    sockets = getattr(server, "sockets", None) or []
    return runner, (sockets[0].getsockname()[1] if sockets else port)


class PromExporter:
    """``GET /metrics`` (Prometheus text format 0.0.4) over the collectors, on the running loop."""

    def __init__(self, collectors: Iterable[Collector], *, host: str, port: int) -> None:
        from prometheus_client import CollectorRegistry

        self.registry = CollectorRegistry(auto_describe=False)
        for c in collectors:
            self.registry.register(c)
        self.host = host or "0.0.0.0"
        self.port = port
        self._runner: web.AppRunner | None = None

    def render(self) -> bytes:
        from prometheus_client import generate_latest

        return generate_latest(self.registry)

    async def start(self) -> None:
        """Bind and serve. Raises OSError when the port cannot be bound."""
        from aiohttp import web

        async def metrics(request: web.Request) -> web.Response:
            body = self.render()
            return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE})

        async def index(request: web.Request) -> web.Response:
            return web.Response(text='<a href="/metrics">metrics</a>\n', content_type="text/html")

        app = web.Application()
        app.router.add_get("/metrics", metrics)
        app.router.add_get("/", index)
        self._runner, self.port = await serve_http(app, self.host, self.port)
        logger.info("metrics exporter serving http://%s:%d/metrics", self.host, self.port)

    async def stop(self) -> None:
        runner, self._runner = self._runner, None
        if runner is not None:
            await runner.cleanup()


async def start_exporter(collector: Collector, *, host: str, port: int, label: str) -> PromExporter:
    """A started exporter of ``collector`` with the ``metricsLabel`` labels added.

    Raises: OSError when the port cannot be bound.
    """
    exporter = PromExporter([with_labels(collector, parse_metrics_label(label))], host=host, port=port)
    await exporter.start()
    return exporter
