"""The broker's running values that its components share, and the handler registration seam.

:class:`BrokerState` holds what changes while a broker runs: the config (UPDATE_BROKER_CONFIG
swaps the whole object) and the advertised address (known once the listening port is bound).
The controller (the composition root) owns one and hands it to every processor that reads
them, so a processor never holds the controller itself.

:class:`Registrar` is how a processor puts its handlers on the broker's servers: the
controller's ``register_processor`` (main port, and the VIP port unless ``fast=False``);
:class:`HandlerTable` is the usual way, a table of request code → method name.
"""

from __future__ import annotations

from typing import ClassVar, Protocol

from pocketmq.broker.config import BrokerConfig
from pocketmq.remoting.protocol.message import HostAddress, pack_host_ip
from pocketmq.remoting.transport.connection import Handler

__all__ = ["BrokerState", "HandlerTable", "Registrar"]


class BrokerState:
    """``config`` (swapped by UPDATE_BROKER_CONFIG), ``store_host`` and ``broker_addr``."""

    __slots__ = ("broker_addr", "config", "store_host")

    def __init__(self, config: BrokerConfig) -> None:
        self.config = config
        #: the packed ``(ip, port)`` stored as each message's STOREHOST
        self.store_host: HostAddress = (pack_host_ip(config.broker_ip1), config.listen_port)
        #: the advertised ``ip:port``
        self.broker_addr = config.broker_addr

    def bound_to(self, port: int) -> None:
        """Advertise ``port`` (an ephemeral port the kernel picked)."""
        ip = self.config.broker_ip1
        self.store_host = (pack_host_ip(ip), port)
        self.broker_addr = f"{ip}:{port}"


class Registrar(Protocol):
    """Serve ``code`` with ``handler`` (on the VIP port too unless ``fast=False``)."""

    def __call__(self, code: int, handler: Handler, *, fast: bool = True) -> None: ...


class HandlerTable:
    """A processor that serves the codes of its ``HANDLERS`` table (on both ports)."""

    #: request code → name of the method that serves it
    HANDLERS: ClassVar[dict[int, str]] = {}

    def register(self, register: Registrar) -> None:
        for code, name in self.HANDLERS.items():
            register(code, getattr(self, name))
