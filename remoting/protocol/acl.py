"""ACL 1.0 request signatures (RocketMQ ``AclClientRPCHook`` / ``AclUtils``), pure functions.

The signed bytes of a request are, in this order:

    =====================  ==========================================================
    part                   content
    =====================  ==========================================================
    ext-field values       every ext field except ``Signature`` and ``_UNIQUE_KEY_QUERY``,
                           sorted by key, values only (no keys, no separators), UTF-8
    body                   the raw body bytes, when the request has one
    =====================  ==========================================================

``Signature = Base64(HMAC-SHA1(secretKey, signed bytes))``. The client adds ``AccessKey`` (and
``SecurityToken`` when it has one) to the ext fields *before* signing, so they are signed too;
C++ and ali-ons clients also add ``OnsChannel``. Keys are Java field names (ASCII), so Python's
string order is Java ``TreeMap`` order.

ACL 1.0 signs no timestamp or nonce: a captured request can be replayed as long as its account
exists (RocketMQ behaves the same; pocketmq keeps the wire-compatible behaviour).

Also here: the headers and body of the ACL admin requests (codes 50-54) and
:class:`PlainAccessConfig`, one account as RocketMQ writes it in ``plain_acl.yml`` and in bodies.
"""

from __future__ import annotations

import hashlib
from binascii import b2a_base64 as _b64
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from hmac import compare_digest as _compare_digest
from operator import itemgetter
from typing import Any

from pocketmq.remoting.protocol.command import RemotingCommand
from pocketmq.remoting.protocol.header_codec import CommandHeader, header, wire

__all__ = [
    "ACCESS_KEY",
    "CreateAccessConfigRequestHeader",
    "DeleteAccessConfigRequestHeader",
    "GetBrokerAclConfigResponseHeader",
    "PlainAccessConfig",
    "RequestSigner",
    "Signer",
    "UpdateGlobalWhiteAddrsConfigRequestHeader",
    "cluster_acl_config_body",
    "ONS_CHANNEL",
    "SECURITY_TOKEN",
    "SIGNATURE",
    "UNIQUE_KEY_QUERY",
    "sign",
    "signature_content",
    "signed_text",
    "signature_matches",
]

ACCESS_KEY = "AccessKey"
SECURITY_TOKEN = "SecurityToken"
SIGNATURE = "Signature"
ONS_CHANNEL = "OnsChannel"
#: ``MixAll.UNIQUE_MSG_QUERY_FLAG``: set by QUERY_MESSAGE after signing, so never signed.
UNIQUE_KEY_QUERY = "_UNIQUE_KEY_QUERY"

_UNSIGNED = (SIGNATURE, UNIQUE_KEY_QUERY)
#: SHA-1 block size (HMAC pads the key to it).
_BLOCK = 64


def signature_content(ext_fields: Mapping[str, str] | None, body: bytes | None) -> bytes:
    """The bytes a signature covers (see the module docstring)."""
    data = b""
    if ext_fields:
        data = "".join([v for k, v in sorted(ext_fields.items()) if k not in _UNSIGNED]).encode()
    if body:
        data += body
    return data


#: ext-field key order (as received) → (getter of the signed values in key order, how many it
#: reads). A client sends few distinct key sets, so the sort runs once per set; bounded (a peer
#: controls the keys).
_ORDERS: dict[tuple[str, ...], tuple[Callable[[Mapping[str, str]], Any], int]] = {}
_MAX_ORDERS = 1024
#: ext-field count → the ``_ORDERS`` entry last used for a key set of that size: most requests
#: reuse it without building the key tuple (:func:`signed_text` checks that it fits exactly)
_BY_SIZE: dict[int, tuple[Callable[[Mapping[str, str]], Any], int]] = {}


def _nothing(ext_fields: Mapping[str, str]) -> str:
    return ""


def signed_text(ext_fields: Mapping[str, str]) -> str:
    """The ext-field values a signature covers, in key order (see the module docstring).

    The entry of the last key set of the same size serves when it reads as many keys as the
    fields hold signed ones and finds every one of them: then its keys *are* the signed keys.
    """
    n = len(ext_fields)
    entry = _BY_SIZE.get(n)
    if entry is not None and entry[1] == n - (SIGNATURE in ext_fields) - (UNIQUE_KEY_QUERY in ext_fields):
        try:
            return "".join(entry[0](ext_fields))
        except KeyError:  # another key set of this size: the exact lookup below
            pass
    keys = tuple(ext_fields)
    entry = _ORDERS.get(keys)
    if entry is None:
        signed = [k for k in sorted(keys) if k not in _UNSIGNED]
        if len(_ORDERS) >= _MAX_ORDERS:
            _ORDERS.clear()
        # itemgetter of one key returns the value itself: "".join of a str is that str
        entry = _ORDERS[keys] = (itemgetter(*signed) if signed else _nothing, len(signed))
    _BY_SIZE[n] = entry
    return "".join(entry[0](ext_fields))


def _signed_values(ext_fields: Mapping[str, str]) -> bytes:
    """The ext-field part of :func:`signature_content` (values in key order, UTF-8)."""
    return signed_text(ext_fields).encode()


class Signer:
    """Signs and checks requests with one secret key.

    HMAC-SHA1 by hand from two SHA1 states prepared once (key XOR ipad / opad, RFC 2104), copied
    per request: half the cost of ``hmac`` objects for a 1 KB message; the body is fed without a
    copy, and the ext-field order is cached (:func:`signed_text`).
    """

    __slots__ = ("inner", "outer")

    def __init__(self, secret_key: str) -> None:
        key = secret_key.encode()
        if len(key) > _BLOCK:
            key = hashlib.sha1(key).digest()
        key = key.ljust(_BLOCK, b"\0")
        #: SHA-1 states after the key block XOR ipad / opad: copied per request, never updated
        #: (the broker's validator inlines :meth:`matches` with them)
        self.inner = hashlib.sha1(bytes(b ^ 0x36 for b in key))
        self.outer = hashlib.sha1(bytes(b ^ 0x5C for b in key))

    def digest(self, ext_fields: Mapping[str, str] | None, body: bytes | None) -> bytes:
        inner = self.inner.copy()
        if ext_fields:
            inner.update(signed_text(ext_fields).encode())
        if body:
            inner.update(body)
        outer = self.outer.copy()
        outer.update(inner.digest())
        return outer.digest()

    def sign(self, ext_fields: Mapping[str, str] | None, body: bytes | None) -> str:
        """``Base64(HMAC-SHA1(secret, signed bytes))``."""
        return _b64(self.digest(ext_fields, body), newline=False).decode()

    def matches(
        self, signature: str | None, ext_fields: Mapping[str, str] | None, body: bytes | None
    ) -> bool:
        """Whether ``signature`` is the request's signature (constant-time comparison)."""
        if not signature:
            return False
        expected = _b64(self.digest(ext_fields, body), newline=False)
        return _compare_digest(expected, signature.encode("utf-8", "surrogateescape"))


class RequestSigner:
    """Adds ``AccessKey`` (and ``SecurityToken``) and then ``Signature`` to a request, as RocketMQ's
    ``AclClientRPCHook`` (the SDK's hook and the Spark source use it). ``repr`` hides the secret.

    :meth:`before_request` is a transport before-hook as it is (``RemotingClient(before_hooks=)``):
    one Python call per request, the HMAC inline.
    """

    __slots__ = ("access_key", "inner", "outer", "security_token")

    def __init__(self, access_key: str, secret_key: str, security_token: str | None = None) -> None:
        self.access_key = access_key
        self.security_token = security_token
        signer = Signer(secret_key)
        self.inner, self.outer = signer.inner, signer.outer

    def __repr__(self) -> str:
        return f"RequestSigner(access_key={self.access_key!r})"

    def __call__(self, request: RemotingCommand) -> None:
        self.before_request("", request)

    def before_request(self, remote_addr: str, request: RemotingCommand) -> None:
        ext = request.ext_fields
        if ext is None:
            ext = request.ext_fields = {}
        ext[ACCESS_KEY] = self.access_key
        if self.security_token:
            ext[SECURITY_TOKEN] = self.security_token
        # inline of Signer.sign (every request of an ACL client)
        inner = self.inner.copy()
        inner.update(signed_text(ext).encode())
        body = request.body
        if body:
            inner.update(body)
        outer = self.outer.copy()
        outer.update(inner.digest())
        ext[SIGNATURE] = _b64(outer.digest(), newline=False).decode()


def sign(secret_key: str, ext_fields: Mapping[str, str] | None, body: bytes | None) -> str:
    """``Base64(HMAC-SHA1(secret_key, signature_content(ext_fields, body)))``."""
    return Signer(secret_key).sign(ext_fields, body)


def signature_matches(
    secret_key: str, signature: str | None, ext_fields: Mapping[str, str] | None, body: bytes | None
) -> bool:
    """Whether ``signature`` is the request's signature under ``secret_key`` (constant time)."""
    return Signer(secret_key).matches(signature, ext_fields, body)


# ------------------------------------------------------------------------- admin wire types


@dataclass(frozen=True, slots=True)
class PlainAccessConfig:
    """One account as written in ``plain_acl.yml`` and in admin bodies (RocketMQ ``PlainAccessConfig``)."""

    access_key: str
    secret_key: str
    white_remote_address: str | None = None
    admin: bool = False
    default_topic_perm: str | None = None
    default_group_perm: str | None = None
    topic_perms: tuple[str, ...] = ()
    group_perms: tuple[str, ...] = ()

    def __repr__(self) -> str:
        return f"PlainAccessConfig(access_key={self.access_key!r}, admin={self.admin})"

    def to_json(self, *, mask_secret: bool = True) -> dict[str, Any]:
        """The fastjson body form. The secret is masked unless asked: no pocketmq reply carries it."""
        return {
            "accessKey": self.access_key,
            "admin": self.admin,
            "defaultGroupPerm": self.default_group_perm,
            "defaultTopicPerm": self.default_topic_perm,
            "groupPerms": list(self.group_perms),
            "secretKey": SECRET_MASK if mask_secret else self.secret_key,
            "topicPerms": list(self.topic_perms),
            "whiteRemoteAddress": self.white_remote_address,
        }


#: What replies show instead of a secret key.
SECRET_MASK = "******"


def cluster_acl_config_body(white: list[str], accounts: list[PlainAccessConfig]) -> dict[str, Any]:
    """GET_BROKER_CLUSTER_ACL_CONFIG (54) body (``GetBrokerClusterAclConfigResponseBody``), secrets masked."""
    return {"globalWhiteAddrs": white, "plainAccessConfigs": [a.to_json() for a in accounts]}


@header
class CreateAccessConfigRequestHeader(CommandHeader):
    """UPDATE_AND_CREATE_ACL_CONFIG (50); ``topicPerms``/``groupPerms`` are comma-separated."""

    access_key: str = wire("accessKey")
    secret_key: str | None = wire("secretKey", default=None)
    white_remote_address: str | None = wire("whiteRemoteAddress", default=None)
    admin: bool = wire("admin", default=False)
    default_topic_perm: str | None = wire("defaultTopicPerm", default=None)
    default_group_perm: str | None = wire("defaultGroupPerm", default=None)
    topic_perms: str | None = wire("topicPerms", default=None)
    group_perms: str | None = wire("groupPerms", default=None)


@header
class DeleteAccessConfigRequestHeader(CommandHeader):
    """DELETE_ACL_CONFIG (51)."""

    access_key: str = wire("accessKey")


@header
class UpdateGlobalWhiteAddrsConfigRequestHeader(CommandHeader):
    """UPDATE_GLOBAL_WHITE_ADDRS_CONFIG (53); ``globalWhiteAddrs`` comma-separated; an empty file
    path means ``plain_acl.yml``."""

    global_white_addrs: str = wire("globalWhiteAddrs")
    acl_file_full_path: str | None = wire("aclFileFullPath", default=None)


@header
class GetBrokerAclConfigResponseHeader(CommandHeader):
    """GET_BROKER_CLUSTER_ACL_INFO (52) reply: DataVersion JSON of ``plain_acl.yml`` and of every file."""

    version: str = wire("version")
    all_acl_file_version: str | None = wire("allAclFileVersion", default=None)
    broker_name: str = wire("brokerName")
    broker_addr: str = wire("brokerAddr")
    cluster_name: str = wire("clusterName")
