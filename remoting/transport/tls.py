"""TLS for the remoting servers and clients (RocketMQ 4.x ``TlsSystemConfig`` keys).

Server modes (``tls.server.mode``):

==============  ==================================================================================
``disabled``    plaintext only (pocketmq's default; RocketMQ's is ``permissive`` with a throwaway
                self-signed test certificate, which pocketmq does not fabricate)
``permissive``  one port for both: a connection whose first byte is ``0x16`` (a TLS ClientHello)
                is served over TLS, anything else as plaintext (RocketMQ's ``HandshakeHandler``)
``enforcing``   TLS only: a plaintext peer fails the handshake and is disconnected
==============  ==================================================================================

``permissive`` and ``enforcing`` need ``tls.server.certPath`` and ``tls.server.keyPath`` (PEM);
``tls.server.need.client.auth`` = ``optional``/``require`` asks clients for a certificate, checked
against ``tls.server.trustCertPath`` (required then).

Clients (the SDK's ``useTLS``, a broker talking to TLS name servers with ``tls.enable``) verify the
server by default: certificate chain against ``tls.client.trustCertPath`` (else the system CAs) and
host name. ``tls.client.authServer=false`` turns verification off (RocketMQ's default; never for
production). ``tls.client.certPath``/``keyPath`` present a client certificate.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import socket
import ssl
from collections.abc import Callable
from typing import Literal

from pydantic import BaseModel, Field

from pocketmq.remoting.common.config import ConfigError

__all__ = [
    "TLS_RECORD_HANDSHAKE",
    "PermissiveServer",
    "TlsConfigError",
    "TlsSettings",
    "changed_tls_keys",
    "client_ssl_context",
    "server_ssl_context",
]

logger = logging.getLogger(__name__)

#: First byte of a TLS record carrying a handshake message (a ClientHello opens every session).
TLS_RECORD_HANDSHAKE = 0x16

TlsMode = Literal["disabled", "permissive", "enforcing"]


class TlsConfigError(ConfigError):
    """A TLS setting that cannot work (missing or unreadable file); names the key (a startup error)."""

    def __init__(self, key: str, message: str) -> None:
        super().__init__(f"{key}: {message}", key=key)


class TlsSettings(BaseModel):
    """The ``tls.*`` keys (a mixin of the broker's and the name server's config models).

    ``tls.test.mode.enable=true`` and the ``keyPassword`` keys are refused at load
    (``remoting.common.unsupported``): pocketmq makes no throwaway certificates and reads only
    unencrypted PEM keys.
    """

    tls_server_mode: TlsMode = Field(
        "disabled", alias="tls.server.mode", description="disabled | permissive | enforcing"
    )
    tls_enable: bool = Field(
        False, alias="tls.enable", description="outbound connections (a broker to its name servers) use TLS"
    )
    tls_test_mode_enable: bool = Field(
        False,
        alias="tls.test.mode.enable",
        description="RocketMQ's self-signed test mode (refused when true)",
    )
    tls_server_need_client_auth: Literal["none", "optional", "require"] = Field(
        "none", alias="tls.server.need.client.auth", description="ask clients for a certificate"
    )
    tls_server_cert_path: str | None = Field(None, alias="tls.server.certPath", description="PEM certificate")
    tls_server_key_path: str | None = Field(None, alias="tls.server.keyPath", description="PEM private key")
    tls_server_key_password: str | None = Field(
        None, alias="tls.server.keyPassword", description="encrypted keys (refused when set)"
    )
    tls_server_trust_cert_path: str | None = Field(
        None, alias="tls.server.trustCertPath", description="CAs that sign client certificates"
    )
    tls_server_auth_client: bool = Field(
        False, alias="tls.server.authClient", description="client certificates are always verified when asked"
    )
    tls_client_cert_path: str | None = Field(None, alias="tls.client.certPath")
    tls_client_key_path: str | None = Field(None, alias="tls.client.keyPath")
    tls_client_key_password: str | None = Field(
        None, alias="tls.client.keyPassword", description="encrypted keys (refused when set)"
    )
    tls_client_trust_cert_path: str | None = Field(
        None, alias="tls.client.trustCertPath", description="CAs that sign server certificates"
    )
    tls_client_auth_server: bool = Field(
        True, alias="tls.client.authServer", description="verify the server's certificate and host name"
    )
    tls_config_file: str | None = Field(
        None, alias="tls.config.file", description="RocketMQ's separate TLS file (refused when set)"
    )

    def server_context(self) -> ssl.SSLContext | None:
        """The server context for the configured mode (None: ``disabled``).

        Raises:
            TlsConfigError: a needed file is missing or unreadable (the message names the key).
        """
        if self.tls_server_mode == "disabled":
            return None
        return server_ssl_context(
            cert=self.tls_server_cert_path,
            key=self.tls_server_key_path,
            trust=self.tls_server_trust_cert_path,
            client_auth=self.tls_server_need_client_auth,
        )

    def outbound_context(self, use_tls: bool = False) -> ssl.SSLContext | None:
        """The client context for outbound connections (``tls.enable``, ``useTLS`` or an enforcing
        server, as RocketMQ's ``BrokerStartup`` decides); None: plaintext.

        Raises:
            TlsConfigError: unreadable trust, certificate or key files.
        """
        if not (use_tls or self.tls_enable or self.tls_server_mode == "enforcing"):
            return None
        return client_ssl_context(
            trust=self.tls_client_trust_cert_path,
            cert=self.tls_client_cert_path,
            key=self.tls_client_key_path,
            verify=self.tls_client_auth_server,
        )


def changed_tls_keys(old: TlsSettings, new: TlsSettings) -> list[str]:
    """The ``tls.*`` keys whose value differs: a running server cannot adopt them (its sockets and
    contexts are built at startup), so a live config update refuses them with :data:`RESTART_REMARK`."""
    return [
        field.alias or name
        for name, field in TlsSettings.model_fields.items()
        if getattr(old, name) != getattr(new, name)
    ]


#: How a live update refusing a startup-only key says why (after ``<source>: <key> ``).
RESTART_REMARK = "is read at startup only: change it in the .conf and restart"


def _load_chain(ctx: ssl.SSLContext, cert: str, key: str | None, cert_key: str, key_key: str) -> None:
    try:
        ctx.load_cert_chain(cert, key)
    except FileNotFoundError as exc:
        raise TlsConfigError(
            cert_key if exc.filename == cert else key_key, f"no such file: {exc.filename}"
        ) from None
    except (ssl.SSLError, OSError) as exc:
        raise TlsConfigError(cert_key, f"cannot load certificate/key ({cert}, {key}): {exc}") from None


def _load_trust(ctx: ssl.SSLContext, trust: str, key: str) -> None:
    try:
        ctx.load_verify_locations(cafile=trust)
    except (ssl.SSLError, OSError) as exc:
        raise TlsConfigError(key, f"cannot load trusted certificates from {trust}: {exc}") from None


def server_ssl_context(
    *, cert: str | None, key: str | None, trust: str | None = None, client_auth: str = "none"
) -> ssl.SSLContext:
    """A TLS server context (TLS 1.2+).

    Raises:
        TlsConfigError: no certificate or key, unreadable files, client auth without trust.
    """
    if not cert:
        raise TlsConfigError("tls.server.certPath", "TLS is on (tls.server.mode) but no certificate is set")
    if not key:
        raise TlsConfigError("tls.server.keyPath", "TLS is on (tls.server.mode) but no private key is set")
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    _load_chain(ctx, cert, key, "tls.server.certPath", "tls.server.keyPath")
    if client_auth != "none":
        if not trust:
            raise TlsConfigError(
                "tls.server.trustCertPath", f"tls.server.need.client.auth={client_auth} needs trusted CAs"
            )
        _load_trust(ctx, trust, "tls.server.trustCertPath")
        ctx.verify_mode = ssl.CERT_REQUIRED if client_auth == "require" else ssl.CERT_OPTIONAL
    return ctx


def client_ssl_context(
    *, trust: str | None = None, cert: str | None = None, key: str | None = None, verify: bool = True
) -> ssl.SSLContext:
    """A TLS client context: verifies the server (chain and host name) unless ``verify=False``.

    Raises:
        TlsConfigError: unreadable trust, certificate or key files.
    """
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    if verify:
        if trust:
            _load_trust(ctx, trust, "tls.client.trustCertPath")
        else:
            ctx.load_default_certs()
    else:
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    if cert:
        _load_chain(ctx, cert, key, "tls.client.certPath", "tls.client.keyPath")
    return ctx


class PermissiveServer:
    """A listening socket that serves TLS and plaintext on one port (``permissive``).

    Each accepted connection waits (at most ``sniff_timeout``) for its first byte, peeked without
    reading it: ``0x16`` starts a TLS session, anything else a plaintext connection; the protocol
    then sees the stream from its first byte either way.
    """

    def __init__(
        self,
        factory: Callable[[], asyncio.Protocol],
        ctx: ssl.SSLContext,
        *,
        sniff_timeout: float,
        handshake_timeout: float = 10.0,
    ) -> None:
        self._factory = factory
        self._ctx = ctx
        self._sniff_timeout = sniff_timeout
        self._handshake_timeout = handshake_timeout
        self._sock: socket.socket | None = None
        self._accepting: asyncio.Task[None] | None = None
        self._pending: set[asyncio.Task[None]] = set()
        self.sockets: list[socket.socket] = []

    async def start(self, host: str, port: int, backlog: int) -> None:
        sock = socket.create_server((host, port), backlog=backlog, reuse_port=False)
        sock.setblocking(False)
        self._sock = sock
        self.sockets = [sock]
        self._accepting = asyncio.get_running_loop().create_task(self._accept_loop(sock), name="tls-accept")

    async def _accept_loop(self, sock: socket.socket) -> None:
        loop = asyncio.get_running_loop()
        while True:
            try:
                conn, _ = await loop.sock_accept(sock)
            except OSError as exc:
                logger.warning("accept failed: %s", exc)
                await asyncio.sleep(0.1)
                continue
            task = loop.create_task(self._serve(conn))
            self._pending.add(task)
            task.add_done_callback(self._pending.discard)

    async def _serve(self, conn: socket.socket) -> None:
        loop = asyncio.get_running_loop()
        conn.setblocking(False)
        try:
            limit = self._sniff_timeout if math.isfinite(self._sniff_timeout) else None
            first = await asyncio.wait_for(_peek(loop, conn), limit)
        except (TimeoutError, OSError):
            conn.close()
            return
        if not first:
            conn.close()  # closed before sending anything
            return
        tls = first[0] == TLS_RECORD_HANDSHAKE
        try:
            await loop.connect_accepted_socket(
                self._factory,
                conn,
                ssl=self._ctx if tls else None,
                ssl_handshake_timeout=self._handshake_timeout if tls else None,
            )
        except (OSError, ssl.SSLError, TimeoutError) as exc:
            logger.info("TLS handshake with a client failed: %s", exc)
            conn.close()

    def close(self) -> None:
        if self._accepting is not None:
            self._accepting.cancel()
        for task in list(self._pending):
            task.cancel()
        if self._sock is not None:
            self._sock.close()
            self._sock = None

    async def wait_closed(self) -> None:
        tasks = [t for t in (self._accepting, *self._pending) if t is not None]
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        self._accepting = None


async def _peek(loop: asyncio.AbstractEventLoop, conn: socket.socket) -> bytes:
    """The first byte of ``conn`` without consuming it ('' when the peer closed)."""
    while True:
        try:
            return conn.recv(1, socket.MSG_PEEK)
        except BlockingIOError:
            pass
        ready: asyncio.Future[None] = loop.create_future()

        def wake(fut: asyncio.Future[None] = ready) -> None:
            if not fut.done():
                fut.set_result(None)

        loop.add_reader(conn.fileno(), wake)
        try:
            await ready
        finally:
            loop.remove_reader(conn.fileno())
