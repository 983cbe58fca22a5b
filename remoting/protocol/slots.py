"""A base for hot-path records made without a Python ``__init__`` and filled slot by slot.

In ``remoting.protocol``, the lowest layer, so that the wire types (SEND_OK, a pull's reply,
the typed replies), the SDK's requests and the store's results share it."""

from __future__ import annotations

from typing import TYPE_CHECKING


class SlotRecord:
    """``Cls()`` of a subclass is type_call, object_new and object_init (the empty args tuple);
    its maker then fills the slots. A Python ``__init__`` (a dataclass's) runs through
    slot_tp_init and a new frame, ~1k instructions more per object (callgrind), and
    ``object.__new__(Cls)`` takes a one-item args tuple and tp_new_wrapper's checks (~0.2-0.3k
    more); the subclasses are made once or twice per message (a put's and a pull's store
    result, a held pull, a SEND_OK, a pull reply, the SDK's send request and its reply). Put it
    first among a subclass's bases, so that its ``__init__`` is the one found (a dataclass
    base's would be otherwise)."""

    __slots__ = ()

    if TYPE_CHECKING:

        def __init__(self) -> None: ...

    else:
        __init__ = object.__init__
