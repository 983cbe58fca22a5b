"""END_TRANSACTION (37) frames decoded typed: the header's extFields into a struct, no dict.

A producer sends one END_TRANSACTION per transaction; the generic typed decode
(``header_json.typed_decode``) builds a dict of its seven fields, key strings included, and the
broker then reads four of them by name. Here the header goes to :class:`EndFields` in one
msgspec call (values only), and :func:`end_command` returns an :class:`EndTxRequest` whose ``fields`` the
END_TRANSACTION processor reads (``end_transaction``'s oneway path). As
lat11's ``SendV2Request``: whatever the struct refuses -- an unknown or credential key (ACL),
a missing required field, a null or number value, an unknown language -- returns None and the
frame takes the general path, which decides (same codes and remarks); the request's
``ext_fields`` is the dict that path builds, decoded from the raw header when first asked for.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Literal

from pocketmq.remoting.protocol import header_json
from pocketmq.remoting.protocol.command import TypedCommand, typed_command

__all__ = ["END_START", "EndTxRequest", "end_command", "end_decode"]

#: How fastjson (sorted keys) and our encoder start an END_TRANSACTION request's header with
#: extFields: only such a header is tried typed.
END_START = b'{"code":37,"extFields":{'

_decode: Callable[[Any], Any] | None
if TYPE_CHECKING:
    _LanguageName = str
else:  # the known language names (msgspec returns the Literal's own objects)
    _LanguageName = Literal[tuple(header_json.LANGUAGE_BY_NAME)]

try:  # pragma: no cover - without msgspec every frame takes the general path
    import msgspec

    class EndFields(msgspec.Struct, gc=False, forbid_unknown_fields=True):
        """``EndTransactionRequestHeader``'s wire fields as producers send them (string values;
        the optional two may be absent)."""

        producerGroup: str
        tranStateTableOffset: str
        commitLogOffset: str
        commitOrRollback: str
        msgId: str
        fromTransactionCheck: str | None = None
        transactionId: str | None = None

    class _EndHeader(header_json._Header, gc=False, forbid_unknown_fields=True):
        """``_Header`` with END_TRANSACTION's extFields typed (no dict, no key strings built)
        and its language one of the known names, returned as the very key of
        ``LANGUAGE_BY_NAME`` (no string built and hashed per frame; another name is refused,
        as the frame decoder refuses it, and the general path decides)."""

        extFields: EndFields  # type: ignore[assignment]
        language: _LanguageName

    _decode = msgspec.json.Decoder(_EndHeader).decode
except ImportError:  # pragma: no cover
    _decode = None


class EndTxRequest(TypedCommand):
    """An END_TRANSACTION request decoded typed: ``fields`` is an :class:`EndFields`."""

    __slots__ = ()


#: the typed decode of a whole header (None without msgspec): ``end_raw``'s requests decode
#: their ``fields`` with it when asked
end_decode = _decode

#: :class:`EndTxRequest` of a JSON header starting with :data:`END_START`; None: the general
#: path decodes it (module docstring)
end_command = typed_command(_decode, EndTxRequest)
