"""The command of a JSON header decoded by a typed msgspec decoder (``end_fields``, ``send_ok``).

Those modules each type one hot frame's extFields (a struct, no dict); what they share is here:
the header decoded in one call, anything the decoder refuses or an unknown language returning
None (the frame then takes the general decode, which decides), and the command's slots filled
directly, its ``raw_header`` kept for the lazy ``ext_fields``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from pocketmq.remoting.protocol import header_json
from pocketmq.remoting.protocol.command import RemotingCommand, SendV2Request

__all__ = ["TypedCommand", "typed_command", "typed_decoder"]

_new = object.__new__
_LANGUAGES = header_json.LANGUAGE_BY_NAME


class TypedCommand(RemotingCommand):
    """A command whose extFields were decoded into a struct (a subclass's slot). Its
    ``ext_fields`` are decoded from ``raw_header`` when first asked for (the general path,
    hooks, tests): the dict the decoder builds for other frames."""

    __slots__ = ("raw_header",)
    raw_header: bytes | bytearray

    #: ``SendV2Request``'s lazy property (it reads ``raw_header``), the same code
    ext_fields = SendV2Request.ext_fields


C = TypeVar("C", bound=TypedCommand)


def typed_decoder(fields: type) -> Callable[[Any], Any]:
    """The decoder of a header (``header_json._Header``) whose extFields are the msgspec struct
    ``fields`` (no dict, no key strings built)."""
    import msgspec

    header = msgspec.defstruct(
        f"_{fields.__name__}Header",
        [("extFields", fields)],
        bases=(header_json._Header,),
        gc=False,
        forbid_unknown_fields=True,
    )
    return msgspec.json.Decoder(header).decode


def typed_command(
    decode: Callable[[Any], Any], cls: type[C], fields: Any, header: bytes | bytearray, body: bytes | None
) -> C | None:
    """A ``cls`` from ``decode(header)`` (a ``header_json._Header`` subclass), its extFields
    struct set through the slot descriptor ``fields``; None: the general path decodes it."""
    try:
        h = decode(header)
    except Exception:  # (another or a credential key, a null value, bad JSON...): the general path
        return None
    language = _LANGUAGES.get(h.language)
    if language is None:
        return None
    cmd = _new(cls)
    cmd.code = h.code
    cmd.language = language
    cmd.version = h.version
    cmd.opaque = h.opaque
    cmd.flag = h.flag
    cmd.remark = h.remark
    fields.__set__(cmd, h.extFields)
    cmd.raw_header = header
    cmd.body = body
    cmd.serialize_type = 0
    return cmd
