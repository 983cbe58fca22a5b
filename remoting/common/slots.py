"""A base for hot-path records made without a Python ``__init__`` and filled slot by slot."""

from __future__ import annotations

from typing import TYPE_CHECKING


class SlotRecord:
    """``Cls()`` of a subclass is type_call, object_new and object_init (the empty args tuple);
    its maker then fills the slots. A Python ``__init__`` (a dataclass's) runs through
    slot_tp_init and a new frame, ~1k instructions more per object (callgrind); the subclasses
    are made once or twice per message (the pull's store result, a held pull)."""

    __slots__ = ()

    if TYPE_CHECKING:

        def __init__(self) -> None: ...

    else:
        __init__ = object.__init__
