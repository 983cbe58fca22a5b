"""ACL request signing on the client side (Java ``AclClientRPCHook``) and where credentials come from.

Before each request the hook adds ``AccessKey`` (and ``SecurityToken`` when set) to the ext fields
and then ``Signature`` over the sorted ext-field values plus the body
(:func:`pocketmq.remoting.protocol.acl.sign`).

Tools (``mqadmin``, ``pocketmq bench``, the Spark source) find credentials as RocketMQ's tools do,
plus environment variables (:func:`tool_credentials`):

1. ``ROCKETMQ_ACCESS_KEY`` / ``ROCKETMQ_SECRET_KEY`` (and optional ``ROCKETMQ_SECURITY_TOKEN``);
2. else ``$ROCKETMQ_HOME/conf/tools.yml`` with ``accessKey`` / ``secretKey`` keys (RocketMQ's
   ``AclUtils.getAclRPCHook``); a missing file or blank keys mean "no ACL".

and TLS from ``ROCKETMQ_TLS_ENABLE=true`` (RocketMQ's ``-Dtls.enable``), trusting
``ROCKETMQ_TLS_TRUST_CERT_PATH`` (else the system CAs); ``ROCKETMQ_TLS_VERIFY_SERVER=false`` turns
certificate and host-name checks off (:func:`tool_tls_options`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from pocketmq.remoting.protocol.acl import RequestSigner, sign
from pocketmq.remoting.protocol.command import RemotingCommand

__all__ = ["AclClientRPCHook", "SessionCredentials", "sign", "tool_credentials", "tool_tls_options"]

ENV_ACCESS_KEY = "ROCKETMQ_ACCESS_KEY"
ENV_SECRET_KEY = "ROCKETMQ_SECRET_KEY"
ENV_SECURITY_TOKEN = "ROCKETMQ_SECURITY_TOKEN"
#: ``MixAll.ACL_CONF_TOOLS_FILE``, under ``ROCKETMQ_HOME``.
TOOLS_FILE = os.path.join("conf", "tools.yml")


@dataclass(frozen=True, slots=True)
class SessionCredentials:
    """An ACL account's keys (Java ``SessionCredentials``). ``repr`` never shows the secret."""

    access_key: str
    secret_key: str
    security_token: str | None = None

    def __repr__(self) -> str:
        return f"SessionCredentials(access_key={self.access_key!r}, secret_key='***')"

    def hook(self) -> AclClientRPCHook:
        return AclClientRPCHook(self.access_key, self.secret_key, self.security_token)


class AclClientRPCHook(RequestSigner):
    """Signs every request. An ``RPCHook`` (``hooks=``); its :meth:`before_request` alone is also a
    before-hook (``RemotingClient(before_hooks=[hook.before_request])``), which keeps the client's
    fast path: the SDK installs it that way (:meth:`RequestSigner.before_request`, signing inline)."""

    def __init__(self, access_key: str, secret_key: str, security_token: str | None = None) -> None:
        super().__init__(access_key, secret_key, security_token)
        self.secret_key = secret_key

    def __repr__(self) -> str:
        return f"AclClientRPCHook(access_key={self.access_key!r})"

    def after_response(
        self, remote_addr: str, request: RemotingCommand, response: RemotingCommand | None
    ) -> None:
        return None


def tool_credentials(environ: dict[str, str] | None = None) -> SessionCredentials | None:
    """The credentials a tool should sign with (see the module docstring), or None.

    Raises:
        ValueError: ``tools.yml`` exists but is not a YAML mapping.
    """
    env = os.environ if environ is None else environ
    ak, sk = env.get(ENV_ACCESS_KEY, "").strip(), env.get(ENV_SECRET_KEY, "").strip()
    if ak and sk:
        return SessionCredentials(ak, sk, env.get(ENV_SECURITY_TOKEN) or None)
    home = env.get("ROCKETMQ_HOME")
    if not home:
        return None
    path = os.path.join(home, TOOLS_FILE)
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except FileNotFoundError:
        return None
    import yaml

    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as exc:  # the message leaves the source line out: it may hold the secret
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 1})" if mark is not None else ""
        raise ValueError(f"{path}: not valid YAML{where}") from None
    if doc is None:
        return None
    if not isinstance(doc, dict):
        raise ValueError(f"{path}: expected accessKey/secretKey keys")
    ak, sk = str(doc.get("accessKey") or "").strip(), str(doc.get("secretKey") or "").strip()
    if not ak or not sk:
        return None
    token = doc.get("securityToken")
    return SessionCredentials(ak, sk, str(token) if token else None)


def tool_tls_options(environ: dict[str, str] | None = None) -> dict[str, Any]:
    """``ClientConfig`` TLS options for a tool from the environment (module docstring); {} = plaintext."""
    env = os.environ if environ is None else environ
    if env.get("ROCKETMQ_TLS_ENABLE", "").strip().lower() != "true":
        return {}
    return {
        "use_tls": True,
        "tls_trust_cert_path": env.get("ROCKETMQ_TLS_TRUST_CERT_PATH") or None,
        "tls_verify_server": env.get("ROCKETMQ_TLS_VERIFY_SERVER", "true").strip().lower() != "false",
    }
