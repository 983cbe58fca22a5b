"""``pocketmq tls-cert``: a self-signed certificate and key for local TLS (``tls.server.*`` keys).

    pocketmq tls-cert [--dir DIR] [--name server] [--host localhost --host 127.0.0.1 ...] [--days 365]

writes ``DIR/server.pem`` (the certificate; also what clients trust: ``tls.client.trustCertPath``
and the SDK's ``tls_trust_cert_path``) and ``DIR/server.key`` (an unencrypted RSA 2048 key, mode
0600). Every ``--host`` becomes a subjectAltName (an IP address or a DNS name), which is what
clients check the host name against. Uses the ``openssl`` command (1.1.1 or newer). For local
use and tests: production certificates come from your CA.
"""

from __future__ import annotations

import ipaddress
import os
import shutil
import subprocess

import click

__all__ = ["make_self_signed", "tls_cert"]


def _san(host: str) -> str:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return f"DNS:{host}"
    return f"IP:{host}"


def make_self_signed(
    directory: str | os.PathLike[str], *, name: str = "server", hosts: tuple[str, ...] = ("localhost", "127.0.0.1"),
    days: int = 365,
) -> tuple[str, str]:  # fmt: skip
    """Write ``<name>.pem`` and ``<name>.key`` into ``directory``; returns (cert path, key path).

    Raises:
        RuntimeError: no ``openssl`` command, or it failed (its message included).
    """
    openssl = shutil.which("openssl")
    if openssl is None:
        raise RuntimeError("the openssl command is needed to make a certificate (install OpenSSL)")
    os.makedirs(directory, exist_ok=True)
    cert = os.path.join(directory, f"{name}.pem")
    key = os.path.join(directory, f"{name}.key")
    argv = [
        openssl, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-sha256", "-days", str(days),
        "-keyout", key, "-out", cert, "-subj", f"/CN={hosts[0]}",
        "-addext", "subjectAltName=" + ",".join(_san(h) for h in hosts),
        "-addext", "basicConstraints=critical,CA:TRUE",
    ]  # fmt: skip
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"openssl failed: {done.stderr.strip()}")
    os.chmod(key, 0o600)
    return cert, key


@click.command("tls-cert")
@click.option("--dir", "directory", default="tls", show_default=True, help="where to write the files")
@click.option("--name", default="server", show_default=True, help="file name stem (<name>.pem, <name>.key)")
@click.option("--host", "hosts", multiple=True, help="host name or IP the certificate is for (repeatable)")
@click.option("--days", default=365, show_default=True, type=click.IntRange(1))
def tls_cert(directory: str, name: str, hosts: tuple[str, ...], days: int) -> None:
    """Make a self-signed certificate and key for local TLS."""
    try:
        cert, key = make_self_signed(
            directory, name=name, hosts=hosts or ("localhost", "127.0.0.1"), days=days
        )
    except RuntimeError as exc:
        raise click.ClickException(str(exc)) from None
    click.echo(f"certificate: {cert}\nprivate key: {key}")
    click.echo(
        f"broker/namesrv: tls.server.mode=enforcing tls.server.certPath={cert} tls.server.keyPath={key}\n"
        f"clients: useTLS=true, trust {cert}"
    )
