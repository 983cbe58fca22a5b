"""Shared plumbing of the ``mqadmin`` commands: common options, running, output, failures.

Every command gets ``-n/--namesrvAddr`` (default ``$NAMESRV_ADDR``, then 127.0.0.1:9876),
``--json``, ``--timeout`` (ms per request) and ``--debug``, and ``-h/--help``.

Failures never print a traceback unless ``--debug``: one line on stderr,
``mqadmin <command>: <what went wrong>``, and an exit code:

====  ==========================================================================
code  meaning
====  ==========================================================================
0     success
1     the operation failed (a server refused it, or the thing does not exist)
2     bad usage (unknown command or option, bad value)
3     a name server or broker could not be reached (connect failure or timeout)
130   interrupted (Ctrl-C)
====  ==========================================================================

With ``--json`` a failure also prints ``{"error": {"message", "code", "type"}}`` on stdout, where
``code`` is the RocketMQ response code when a server refused (else null).
"""

from __future__ import annotations

import asyncio
import functools
import os
import sys
import time
import traceback
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

import click

if TYPE_CHECKING:
    from pocketmq.client.admin.admin import MQAdmin

T = TypeVar("T")
F = TypeVar("F", bound=Callable[..., Any])

EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_UNREACHABLE = 3
EXIT_INTERRUPTED = 130

CONTEXT_SETTINGS: dict[str, Any] = {"help_option_names": ["-h", "--help"], "max_content_width": 110}


@dataclass(slots=True)
class Opts:
    """The options every command has."""

    command: str
    namesrv: str | None
    json: bool
    debug: bool
    timeout_ms: int


class CommandFailed(Exception):
    """A failure already phrased for the user (``message``) with its exit code."""

    def __init__(self, message: str, exit_code: int = EXIT_FAILED, code: int | None = None) -> None:
        super().__init__(message)
        self.exit_code = exit_code
        self.code = code


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def run_admin(opts: Opts, job: Callable[[MQAdmin], Awaitable[T]]) -> T:
    """Run ``job(admin)`` on a fresh event loop with an :class:`MQAdmin` for the options."""
    from pocketmq.client.acl import tool_credentials, tool_tls_options
    from pocketmq.client.admin.admin import MQAdmin
    from pocketmq.remoting.common.runtime import new_event_loop

    # ACL: ROCKETMQ_ACCESS_KEY/ROCKETMQ_SECRET_KEY, else $ROCKETMQ_HOME/conf/tools.yml (as RocketMQ)
    creds = tool_credentials()
    ak, sk = (creds.access_key, creds.secret_key) if creds else (None, None)
    # TLS: ROCKETMQ_TLS_ENABLE=true (+ ROCKETMQ_TLS_TRUST_CERT_PATH), verified unless told otherwise
    tls = tool_tls_options()
    ctx = None
    if tls:
        from pocketmq.remoting.transport.tls import client_ssl_context

        ctx = client_ssl_context(trust=tls["tls_trust_cert_path"], verify=tls["tls_verify_server"])

    async def main() -> T:
        async with MQAdmin(
            opts.namesrv, timeout_ms=opts.timeout_ms, access_key=ak, secret_key=sk, ssl_context=ctx
        ) as admin:
            return await job(admin)

    with asyncio.Runner(loop_factory=new_event_loop) as runner:
        return runner.run(main())


def emit(opts: Opts, doc: Any, text: str | Callable[[], str]) -> None:
    """Print the JSON document (``--json``) or the human text."""
    if opts.json:
        from pocketmq.client.admin.format import dumps_json

        click.echo(dumps_json(doc), nl=False)
    else:
        click.echo(text() if callable(text) else text, nl=False)


def describe_failure(exc: BaseException) -> CommandFailed:
    """One clear line (and exit code) for any exception a command can raise."""
    if isinstance(exc, CommandFailed):
        return exc
    from pocketmq.client.admin.base import MQAdminError
    from pocketmq.client.errors import MQClientError, TopicRouteNotFoundError
    from pocketmq.remoting.protocol.codes import ResponseCode
    from pocketmq.remoting.protocol.errors import RemotingConnectError, RemotingTimeoutError, ResponseError

    if isinstance(exc, TopicRouteNotFoundError):
        return CommandFailed(f"topic {exc.topic!r} does not exist (the name servers have no route for it)")
    if isinstance(exc, RemotingConnectError):
        return CommandFailed(f"cannot reach the server: {exc}", EXIT_UNREACHABLE)
    if isinstance(exc, RemotingTimeoutError | TimeoutError):
        return CommandFailed(f"no reply in time: {exc or 'timeout'} (try --timeout)", EXIT_UNREACHABLE)
    if isinstance(exc, ResponseError):
        try:
            name = ResponseCode(exc.response_code).name
        except ValueError:
            name = "UNKNOWN"
        where = f" from {exc.addr}" if exc.addr else ""
        remark = exc.remark or "no remark"
        return CommandFailed(f"{remark} (code {exc.response_code} {name}{where})", code=exc.response_code)
    if isinstance(exc, MQAdminError | MQClientError | ValueError):
        return CommandFailed(str(exc) or type(exc).__name__)
    if isinstance(exc, OSError):
        return CommandFailed(f"{exc}", EXIT_FAILED)
    return CommandFailed(f"{type(exc).__name__}: {exc} (run with --debug for the traceback)")


def fail(opts: Opts, exc: BaseException) -> None:
    """Report ``exc`` and exit with its code."""
    failure = describe_failure(exc)
    if opts.debug:
        traceback.print_exception(exc, file=sys.stderr)
    if opts.json:
        from pocketmq.client.admin.format import dumps_json

        doc = {"error": {"message": str(failure), "code": failure.code, "type": type(exc).__name__}}
        click.echo(dumps_json(doc), nl=False)
    click.echo(f"mqadmin {opts.command}: {failure}", err=True)
    raise click.exceptions.Exit(failure.exit_code)


_COMMON_PARAMS = frozenset({"namesrv", "as_json", "timeout_ms", "debug"})


def _common(f: Callable[..., Any]) -> Callable[..., Any]:
    f = click.option("--debug", is_flag=True, help="print the full traceback on failure")(f)
    f = click.option(
        "--timeout", "timeout_ms", type=click.IntRange(1), default=5000, show_default=True,
        help="per-request timeout in ms",
    )(f)  # fmt: skip
    f = click.option("--json", "as_json", is_flag=True, help="print one JSON document (stable keys)")(f)
    return click.option(
        "-n", "--namesrvAddr", "namesrv", metavar="ADDR",
        default=lambda: os.environ.get("NAMESRV_ADDR") or None,
        help="name server address list, e.g. 127.0.0.1:9876;127.0.0.2:9876 (default: $NAMESRV_ADDR, 127.0.0.1:9876)",
    )(f)  # fmt: skip


def admin_command(name: str, help_text: str) -> Callable[[F], click.Command]:
    """Decorator: a click command named ``name`` whose callback gets ``opts`` first.

    Exceptions from the callback become one line on stderr and an exit code (:func:`fail`).
    """

    def deco(f: F) -> click.Command:
        @functools.wraps(f)
        def callback(namesrv: str | None, as_json: bool, timeout_ms: int, debug: bool, **kwargs: Any) -> None:
            opts = Opts(name, namesrv, as_json, debug, timeout_ms)
            try:
                f(opts, **kwargs)
            except click.exceptions.Exit:
                raise
            except click.UsageError:
                raise
            except KeyboardInterrupt:
                click.echo(f"mqadmin {name}: interrupted", err=True)
                raise click.exceptions.Exit(EXIT_INTERRUPTED) from None
            except Exception as exc:
                fail(opts, exc)

        cmd = click.command(name, help=help_text, context_settings=CONTEXT_SETTINGS)(_common(callback))
        # The command's own options first in --help, the common ones after (stable sort).
        cmd.params.sort(key=lambda p: p.name in _COMMON_PARAMS)
        return cmd

    return deco


def bool_option(*decls: str, default: bool, help: str) -> Callable[[F], F]:
    """A Java-style boolean option: ``-o true``/``-o false``, or ``-o`` alone for true."""
    return click.option(
        *decls, type=click.BOOL, is_flag=False, flag_value=True, default=default, show_default=True, help=help
    )


def time_value(text: str | None, what: str) -> int | None:
    """``now`` / epoch ms / ``yyyy-MM-dd#HH:mm:ss:SSS`` → ms (None stays None).

    Raises:
        click.BadParameter: none of those forms.
    """
    if text is None:
        return None
    from pocketmq.client.admin.format import parse_time

    try:
        return parse_time(text, now_ms())
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint=what) from None


def perm_value(perm: int) -> int:
    if perm not in (2, 4, 6):
        raise click.BadParameter("perm must be 2 (W), 4 (R) or 6 (RW)", param_hint="'-p'")
    return perm
