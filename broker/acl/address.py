"""Remote-address patterns of ``plain_acl.yml`` (RocketMQ ``RemoteAddressStrategyFactory``).

An address is compared as a tuple of numbers: 4 octets (IPv4) or 8 hextets (IPv6, ``::``
expanded; an IPv4-mapped IPv6 peer counts as its IPv4 address). Pattern forms, as RocketMQ 4.9:

==============================  ==============================================================
pattern                         matches
==============================  ==============================================================
blank / absent                  nothing (an account's white list is then unused)
``*``, ``*.*.*.*``,             every address
``*:*:*:*:*:*:*:*``
``192.168.1.7``, ``::1``        that address (IPv6 in any spelling)
``192.168.1.*``, ``10.*.*.*``   a prefix: the first ``*`` or range ends the fixed part and every
``192.168.1.1-50``              later part must be ``*`` (a range ``a-b`` is inclusive,
``192.168.1-3.*``               hexadecimal for IPv6); the first part is always fixed
``fe80:0:0:0:0:0:0:*``
``192.168.1.{1,2,9}``           the listed last parts (IPv6: ``...:{1,a}``)
``10.0.0.1,10.0.0.2``           any listed address
==============================  ==============================================================

Anything else is an :class:`AddressPatternError` naming the pattern (RocketMQ throws
``AclException`` while loading, so a broken file never loads).
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from functools import lru_cache

__all__ = ["AddressMatcher", "AddressPatternError", "parse_address_pattern", "peer_address"]

Address = tuple[int, ...]


class AddressPatternError(ValueError):
    """A white-list pattern RocketMQ would refuse."""


@lru_cache(maxsize=4096)
def peer_address(remote_addr: str) -> Address | None:
    """``host:port`` (as the transport names a peer) → the host as a number tuple, or None.

    Cached: a connection's address is the same string for each of its requests.
    """
    host, sep, port = remote_addr.rpartition(":")
    if not sep or not port.isdigit():
        host = remote_addr
    return _parse_ip(host.strip("[]"))


def _parse_ip(text: str) -> Address | None:
    try:
        ip = ipaddress.ip_address(text.strip())
    except ValueError:
        return None
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            return tuple(ip.ipv4_mapped.packed)
        packed = ip.packed
        return tuple(int.from_bytes(packed[i : i + 2], "big") for i in range(0, 16, 2))
    return tuple(ip.packed)


@dataclass(frozen=True, slots=True)
class AddressMatcher:
    """One pattern: ``exact`` addresses, or per-part inclusive ``ranges``, or ``any``."""

    pattern: str
    any: bool = False
    exact: frozenset[Address] = frozenset()
    ranges: tuple[tuple[int, int], ...] | None = None

    def matches(self, addr: Address | None) -> bool:
        if self.any:
            return True
        if addr is None:
            return False
        if addr in self.exact:
            return True
        ranges = self.ranges
        if ranges is None or len(ranges) != len(addr):
            return False
        return all(lo <= part <= hi for part, (lo, hi) in zip(addr, ranges, strict=True))


NO_ADDRESS = AddressMatcher("")
ANY_ADDRESS = AddressMatcher("*", any=True)


def parse_address_pattern(pattern: str | None) -> AddressMatcher:
    """The matcher of one white-list entry (see the module docstring).

    Raises:
        AddressPatternError: not one of RocketMQ's forms.
    """
    if pattern is None or not str(pattern).strip():
        return NO_ADDRESS
    text = str(pattern).strip()
    if text in ("*", "*.*.*.*", "*:*:*:*:*:*:*:*"):
        return ANY_ADDRESS
    if text.endswith("}"):
        return AddressMatcher(text, exact=frozenset(_braces(text)))
    if "," in text:
        return AddressMatcher(text, exact=frozenset(_exact(p, text) for p in text.split(",")))
    if "*" in text or "-" in text:
        return AddressMatcher(text, ranges=_ranges(text))
    return AddressMatcher(text, exact=frozenset({_exact(text, text)}))


def _exact(text: str, pattern: str) -> Address:
    addr = _parse_ip(text)
    if addr is None:
        raise AddressPatternError(
            f"Netaddress examine Exception netaddress is {text.strip()} (in {pattern!r})"
        )
    return addr


def _braces(text: str) -> list[Address]:
    head, sep, tail = text.rpartition("{")
    sep_char = ":" if ":" in text else "."
    if not sep or not head.endswith(sep_char) or not tail.endswith("}"):
        raise AddressPatternError(f"bad address pattern {text!r}: expected a.b.c.{{x,y}}")
    if sep_char == "." and head.count(".") != 3:
        raise AddressPatternError(f"bad address pattern {text!r}: an IPv4 address has four parts")
    items = [p.strip() for p in tail[:-1].split(",")]
    if not items or any(not p for p in items):
        raise AddressPatternError(f"bad address pattern {text!r}: empty entry in braces")
    return [_exact(head + item, text) for item in items]


def _ranges(text: str) -> tuple[tuple[int, int], ...]:
    v6 = ":" in text
    base, top, width = (16, 0xFFFF, 8) if v6 else (10, 255, 4)
    parts = text.split(":" if v6 else ".")
    if v6 and "" in parts:
        parts = _expand_v6(parts, text)
    if len(parts) != width:
        raise AddressPatternError(f"bad address pattern {text!r}: expected {width} parts")
    out: list[tuple[int, int]] = []
    open_from: int | None = None
    for i, raw in enumerate(parts):
        part = raw.strip()
        if open_from is not None:
            if part != "*":
                raise AddressPatternError(
                    f"bad address pattern {text!r}: after a '*' or a range every part must be '*'"
                )
            out.append((0, top))
            continue
        if part == "*" or "-" in part:
            if i == 0:
                raise AddressPatternError(f"bad address pattern {text!r}: the first part must be fixed")
            open_from = i
            if part == "*":
                out.append((0, top))
                continue
            lo_s, _, hi_s = part.partition("-")
            lo, hi = _number(lo_s, base, top, text), _number(hi_s, base, top, text)
            if lo > hi:
                raise AddressPatternError(f"bad address pattern {text!r}: range {part} is empty")
            out.append((lo, hi))
            continue
        n = _number(part, base, top, text)
        out.append((n, n))
    return tuple(out)


def _expand_v6(parts: list[str], text: str) -> list[str]:
    """``a::b:*`` → the 8 parts with the ``::`` gap filled with zeros."""
    first = parts.index("")
    last = len(parts) - 1 - parts[::-1].index("")
    head = [p for p in parts[:first] if p]
    tail = [p for p in parts[last + 1 :] if p]
    missing = 8 - len(head) - len(tail)
    if missing < 1:
        raise AddressPatternError(f"bad address pattern {text!r}: too many parts")
    return head + ["0"] * missing + tail


def _number(text: str, base: int, top: int, pattern: str) -> int:
    try:
        n = int(text.strip(), base)
    except ValueError:
        raise AddressPatternError(f"bad address pattern {pattern!r}: {text!r} is not a number") from None
    if not 0 <= n <= top:
        raise AddressPatternError(f"bad address pattern {pattern!r}: {text} is out of range")
    return n
