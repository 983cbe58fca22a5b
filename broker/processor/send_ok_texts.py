"""The SEND_OK's kept texts: the tables and blocks the send processor renders a SEND_OK's
frame head from (``SendMessageProcessor.process``), so a send joins a few kept UTF-8 pieces
instead of formatting its msgId, queue offset and opaque.

A block is (its first number, the head's text up to the number's last digits): a SEND_OK
whose number falls in the block its last send's did is its text plus a table subscript.
"""

from __future__ import annotations

from pocketmq.remoting.protocol.codes import RPC_TYPE_RESPONSE
from pocketmq.remoting.protocol.command import PREFIX, EncodedReply, RemotingCommand

_pack_prefix = PREFIX.pack
#: a reply's flag
RESPONSE = int(RPC_TYPE_RESPONSE)
#: a JSON reply's frame prefix (total length, header length) by header length, made once: a
#: list subscript instead of a Struct.pack call per SEND_OK (its header is ~150-200 bytes)
REPLY_PREFIXES = [_pack_prefix(4 + n, n) for n in range(1024)]
#: an offset msgId's last four hex digits by the offset's low 16 bits (a list subscript: the
#: SEND_OK's 16 digits are its 64 KiB block's 12, kept, and these; ~2.9 MB of bytes). The
#: SEND_OK's kept texts are UTF-8 bytes, joined as bytes: no str join and encode per send
HEX4 = [f"{i:04X}".encode() for i in range(1 << 16)]
#: no block: any offset's difference from it is out of range
NO_BLOCK = (-(1 << 64), b"")
#: no block of a decimal (``number_block``): any number's difference from it is out of range
NO_NUMBER: tuple[int, bytes, list[bytes]] = (-(1 << 64), b"", [])


def offset_block(offset: int, prefix: str) -> tuple[int, bytes]:
    """``offset``'s 64 KiB block: its first offset and the reply's text up to the msgId's
    last four hex digits (``prefix``: p0 and the store host's hex; then the offset's 12 high
    hex digits)."""
    first = offset >> 16 << 16
    return first, (prefix + first.to_bytes(8, "big").hex().upper()[:12]).encode()


def number_block(
    value: int, before: str, plain: list[bytes], padded: list[bytes]
) -> tuple[int, bytes, list[bytes]]:
    """The block of 1000 holding ``value`` (>= 0): its first number, ``before`` + the number's
    digits but the last three, and the table of the last three's texts (``plain``: below 1000,
    no leading zero; else ``padded``), so ``value``'s text is ``block[1] + block[2][value -
    block[0]]`` for any value of the block (UTF-8)."""
    if value < 1000:
        return 0, before.encode(), plain
    head = value // 1000
    return head * 1000, f"{before}{head}".encode(), padded


def encoded_reply(header: bytes, opaque: int) -> RemotingCommand:
    """A SEND_OK of this JSON header (no Python __init__: command.EncodedReply; code, remark,
    body, language, version, serialize_type: its class attributes, a SEND_OK's)."""
    reply = EncodedReply()
    reply.opaque = reply.head_opaque = opaque
    reply.flag = RESPONSE
    n = len(header)
    reply.head = (REPLY_PREFIXES[n] if n < 1024 else _pack_prefix(4 + n, n)) + header
    return reply
