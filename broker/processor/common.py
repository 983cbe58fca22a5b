"""Helpers shared by the broker's processors: peer addresses, header parsing, replies."""

from __future__ import annotations

from typing import Any, TypeVar

from pocketmq.remoting.protocol.codes import ResponseCode
from pocketmq.remoting.protocol.command import RemotingCommand
from pocketmq.remoting.protocol.header_codec import CommandHeader
from pocketmq.remoting.protocol.message import HostAddress, MessageDecodeError, pack_host_ip

H = TypeVar("H", bound=CommandHeader)

#: Placeholder for peers the IPv4-only decoders of C++ and ali-ons could not read.
_IPV4_PLACEHOLDER = b"\x7f\x00\x00\x01"


def host_address(addr: str) -> HostAddress:
    """``"ip:port"`` (or ``"[v6]:port"``) → the packed form stored as BORNHOST.

    IPv4-mapped IPv6 addresses are unmapped; other IPv6 peers become 127.0.0.1 because the C++
    and ali-ons message decoders only understand 4-byte hosts (reference §4.1 QUIRK).
    """
    host, _, port_s = addr.rpartition(":")
    host = host.strip("[]")
    try:
        port = int(port_s)
    except ValueError:
        port = 0
    if host.startswith("::ffff:") and "." in host:
        host = host[7:]
    try:
        ip = pack_host_ip(host)
    except MessageDecodeError:
        ip = _IPV4_PLACEHOLDER
    if len(ip) != 4:
        ip = _IPV4_PLACEHOLDER
    return ip, port


def born_host_of(conn: Any) -> HostAddress:
    """The peer's packed address, cached on the connection."""
    attrs = conn.attrs
    cached = attrs.get("born_host")
    if cached is None:
        cached = attrs["born_host"] = host_address(conn.remote_addr)
    return cached  # type: ignore[no-any-return]


def peer_ip(conn: Any) -> str:
    return str(conn.remote_addr).rpartition(":")[0].strip("[]")


def reply(
    request: RemotingCommand,
    code: int = ResponseCode.SUCCESS,
    remark: str | None = None,
    ext_fields: dict[str, str] | None = None,
    body: bytes | None = None,
) -> RemotingCommand:
    return RemotingCommand.response_to(request, code, remark, ext_fields, body)


def offset_reply(request: RemotingCommand, offset: int) -> RemotingCommand:
    return RemotingCommand.response_to(request, ResponseCode.SUCCESS, None, {"offset": str(offset)})
