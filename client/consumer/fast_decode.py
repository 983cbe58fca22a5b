"""Fast decoding of pull bodies (the consumer's hot path).

Same records and result type as :func:`pocketmq.remoting.protocol.message.decode_messages`
(``MessageExt``), specialised for what pull bodies nearly always hold: IPv4 born/store hosts.
Per record: one ``unpack_from`` of the fixed prefix, one body copy, and dictionary lookups for
the values that repeat across a body (topic, hosts, the store host's msgId prefix). Any record
that is not the plain IPv4 shape, or looks inconsistent, goes through the shared decoder, which
validates it fully and raises :class:`MessageDecodeError` for garbage.
"""

from __future__ import annotations

import struct

from pocketmq.remoting.protocol.message import (
    HOST_FLAGS_MASK,
    MESSAGE_MAGIC_CODE,
    RECORD_PREFIX_V4,
    MessageExt,
    decode_message,
)

_PREFIX = RECORD_PREFIX_V4
_PREFIX_SIZE = RECORD_PREFIX_V4.size
_PROPS_LEN = struct.Struct(">h")
_topics: dict[bytes, str] = {}
_hosts: dict[tuple[bytes, int], tuple[str, int]] = {}
_id_prefix: dict[tuple[bytes, int], str] = {}


def _host(ip: bytes, port: int) -> tuple[str, int]:
    key = (ip, port)
    h = _hosts.get(key)
    if h is None:
        if len(_hosts) > 4096:
            _hosts.clear()
        h = _hosts[key] = (f"{ip[0]}.{ip[1]}.{ip[2]}.{ip[3]}", port)
    return h


def decode_pull_body(buf: bytes) -> list[MessageExt]:
    """Decode back-to-back records; raises MessageDecodeError on anything invalid."""
    out: list[MessageExt] = []
    append = out.append
    unpack = _PREFIX.unpack_from
    props_len = _PROPS_LEN.unpack_from
    n = len(buf)
    pos = 0
    while pos < n:
        if n - pos < _PREFIX_SIZE + 3:
            append(decode_message(buf, pos))  # raises with a precise reason
            pos += out[-1].store_size
            continue
        (total, magic, crc, qid, flag, qoff, phy, sys_flag, born_ts, born_ip, born_port,
         store_ts, store_ip, store_port, reconsume, prepared, body_len) = unpack(buf, pos)  # fmt: skip
        end = pos + total
        p = pos + _PREFIX_SIZE
        if (
            magic != MESSAGE_MAGIC_CODE
            or sys_flag & HOST_FLAGS_MASK
            or end > n
            or body_len < 0
            or p + body_len + 3 > end
        ):
            msg = decode_message(buf, pos)
            append(msg)
            pos += msg.store_size
            continue
        body = buf[p : p + body_len]
        p += body_len
        tlen = buf[p]
        tb = buf[p + 1 : p + 1 + tlen]
        topic = _topics.get(tb)
        q = p + 1 + tlen
        if topic is None or q + 2 > end:
            msg = decode_message(buf, pos)
            if len(_topics) < 4096:
                _topics[tb] = msg.topic
            append(msg)
            pos += msg.store_size
            continue
        (plen,) = props_len(buf, q)
        q += 2
        if plen < 0 or q + plen != end:
            msg = decode_message(buf, pos)  # raises
            append(msg)
            pos += msg.store_size
            continue
        try:
            props = buf[q:end].decode()
        except UnicodeDecodeError:
            msg = decode_message(buf, pos)  # raises
            append(msg)
            pos = end
            continue
        key = (store_ip, store_port)
        idp = _id_prefix.get(key)
        if idp is None:
            idp = _id_prefix[key] = f"{store_ip.hex().upper()}{store_port & 0xFFFFFFFF:08X}"
        append(
            MessageExt(
                total,
                magic,
                crc,
                qid,
                flag,
                qoff,
                phy,
                sys_flag,
                born_ts,
                _host(born_ip, born_port),
                store_ts,
                _host(store_ip, store_port),
                reconsume,
                prepared,
                body,
                topic,
                props,
                f"{idp}{phy & 0xFFFFFFFFFFFFFFFF:016X}",
            )
        )
        pos = end
    return out
