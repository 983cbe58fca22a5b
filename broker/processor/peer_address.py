"""Peer addresses in the packed form stored as a message's BORNHOST/STOREHOST."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pocketmq.remoting.protocol.message import HostAddress, MessageDecodeError, pack_host_ip

if TYPE_CHECKING:
    from pocketmq.remoting.transport.connection import RemotingConnection

#: Placeholder for peers the IPv4-only decoders of C++ and ali-ons could not read.
_IPV4_PLACEHOLDER = b"\x7f\x00\x00\x01"


def host_address(addr: str) -> HostAddress:
    """``"ip:port"`` (or ``"[v6]:port"``) → the packed form stored as BORNHOST.

    IPv4-mapped IPv6 addresses are unmapped; other IPv6 peers become 127.0.0.1 because the C++
    and ali-ons message decoders only understand 4-byte hosts.
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


def born_host_of(conn: RemotingConnection) -> HostAddress:
    """The peer's packed address, cached on the connection."""
    attrs = conn.attrs
    cached = attrs.get("born_host")
    if cached is None:
        cached = attrs["born_host"] = host_address(conn.remote_addr)
    return cached
