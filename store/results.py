"""Status enums and result objects of the store (expected outcomes are values, not exceptions)."""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass

from pocketmq.remoting.protocol.message import HostAddress, create_offset_msg_id
from pocketmq.remoting.protocol.slots import SlotRecord


class AppendMessageStatus(enum.Enum):
    PUT_OK = "PUT_OK"
    END_OF_FILE = "END_OF_FILE"
    MESSAGE_SIZE_EXCEEDED = "MESSAGE_SIZE_EXCEEDED"
    PROPERTIES_SIZE_EXCEEDED = "PROPERTIES_SIZE_EXCEEDED"
    UNKNOWN_ERROR = "UNKNOWN_ERROR"


class PutMessageStatus(enum.Enum):
    PUT_OK = "PUT_OK"
    FLUSH_DISK_TIMEOUT = "FLUSH_DISK_TIMEOUT"
    FLUSH_SLAVE_TIMEOUT = "FLUSH_SLAVE_TIMEOUT"
    SLAVE_NOT_AVAILABLE = "SLAVE_NOT_AVAILABLE"
    SERVICE_NOT_AVAILABLE = "SERVICE_NOT_AVAILABLE"
    CREATE_MAPEDFILE_FAILED = "CREATE_MAPEDFILE_FAILED"
    MESSAGE_ILLEGAL = "MESSAGE_ILLEGAL"
    PROPERTIES_SIZE_EXCEEDED = "PROPERTIES_SIZE_EXCEEDED"
    OS_PAGECACHE_BUSY = "OS_PAGECACHE_BUSY"
    UNKNOWN_ERROR = "UNKNOWN_ERROR"

    @property
    def is_ok(self) -> bool:
        """The message is stored (PUT_OK or a flush/replication wait that did not complete)."""
        # by value: a member's hash is a Python-level Enum.__hash__ call, a str's is cached
        return self._value_ in _STORED_VALUES


_STORED = frozenset(
    {
        PutMessageStatus.PUT_OK,
        PutMessageStatus.FLUSH_DISK_TIMEOUT,
        PutMessageStatus.FLUSH_SLAVE_TIMEOUT,
        PutMessageStatus.SLAVE_NOT_AVAILABLE,
    }
)
_STORED_VALUES = frozenset(s.value for s in _STORED)


class GetMessageStatus(enum.Enum):
    FOUND = "FOUND"
    NO_MATCHED_MESSAGE = "NO_MATCHED_MESSAGE"
    MESSAGE_WAS_REMOVING = "MESSAGE_WAS_REMOVING"
    OFFSET_FOUND_NULL = "OFFSET_FOUND_NULL"
    OFFSET_OVERFLOW_BADLY = "OFFSET_OVERFLOW_BADLY"
    OFFSET_OVERFLOW_ONE = "OFFSET_OVERFLOW_ONE"
    OFFSET_TOO_SMALL = "OFFSET_TOO_SMALL"
    NO_MATCHED_LOGIC_QUEUE = "NO_MATCHED_LOGIC_QUEUE"
    NO_MESSAGE_IN_QUEUE = "NO_MESSAGE_IN_QUEUE"


@dataclass(slots=True)
class PutResult:
    status: PutMessageStatus
    append: AppendResult | None = None

    @property
    def is_ok(self) -> bool:
        return self.status.is_ok


_APPEND_FIELDS = (
    "wrote_offset",
    "wrote_bytes",
    "store_timestamp",
    "logics_offset",
    "msg_num",
    "store_host",
    "batch_offsets",
)


def _same_fields(a: object, b: object, fields: tuple[str, ...]) -> bool:
    return all(getattr(a, f) == getattr(b, f) for f in fields)


def _fields_repr(obj: object, fields: tuple[str, ...], name: str | None = None) -> str:
    values = ", ".join(f"{f}={getattr(obj, f)!r}" for f in fields)
    return f"{name or obj.__class__.__name__}({values})"


class AppendResult(SlotRecord, PutResult):
    """Where an append landed. ``msg_id`` is built on first access (offset msgId(s)).

    It is also the stored put's ``PutResult``: ``status`` PUT_OK and ``append`` itself, so a
    stored put is one object, not a PutResult around an AppendResult (one allocation and
    deallocation fewer per send). Failed puts are plain ``PutResult``s (``append`` None);
    a flush or replication timeout wraps the append in a new ``PutResult``.
    """

    __slots__ = _APPEND_FIELDS
    wrote_offset: int
    wrote_bytes: int
    store_timestamp: int
    logics_offset: int
    msg_num: int
    store_host: HostAddress
    #: physical offset of every record of a batch (None for a single message)
    batch_offsets: list[int] | None

    @classmethod
    def of(
        cls,
        wrote_offset: int = 0,
        wrote_bytes: int = 0,
        store_timestamp: int = 0,
        logics_offset: int = 0,
        msg_num: int = 1,
        store_host: HostAddress = (b"\x7f\x00\x00\x01", 0),
        batch_offsets: list[int] | None = None,
    ) -> AppendResult:
        """An AppendResult of these fields (status PUT_OK)."""
        self = cls()
        self.status, self.store_host, self.batch_offsets = PutMessageStatus.PUT_OK, store_host, batch_offsets
        self.wrote_offset, self.wrote_bytes, self.msg_num = wrote_offset, wrote_bytes, msg_num
        self.store_timestamp, self.logics_offset = store_timestamp, logics_offset
        return self

    @property
    def append(self) -> AppendResult:  # type: ignore[override]  # (read-only: it is this object)
        """This object (a stored put's ``PutResult.append``)."""
        return self

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not AppendResult:
            return NotImplemented
        return _same_fields(self, other, _APPEND_FIELDS)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return _fields_repr(self, _APPEND_FIELDS)

    @property
    def msg_id(self) -> str:
        """Offset msgId; comma-separated for a batch (as the Java broker replies)."""
        ip, port = self.store_host
        if self.batch_offsets is None:
            return create_offset_msg_id(ip, port, self.wrote_offset)
        return ",".join(create_offset_msg_id(ip, port, off) for off in self.batch_offsets)


_GET_FIELDS = (
    "status",
    "next_begin_offset",
    "min_offset",
    "max_offset",
    "body",
    "message_count",
    "suggest_pulling_from_slave",
    "message_offsets",
)


class GetResult(SlotRecord):
    """Answer to ``get_message``: ``body`` is the pull response body (complete records).

    Made twice per delivery at one send in flight (the pull held, then woken): no Python
    ``__init__`` (``GetResult()`` is type_call and object_init, then its slots are filled, as
    ``AppendResult``), not a dataclass's generated one called through slot_tp_init with a
    ``list()`` default factory per result; a result that found nothing is a
    :class:`MissedGetResult`, whose four empty fields are class attributes.
    """

    __slots__ = _GET_FIELDS
    status: GetMessageStatus
    next_begin_offset: int
    min_offset: int
    max_offset: int
    body: bytes
    message_count: int
    suggest_pulling_from_slave: bool
    #: commit-log offset of each returned record, in order (for tools and tests)
    message_offsets: Sequence[int]

    @classmethod
    def of(
        cls,
        status: GetMessageStatus,
        next_begin_offset: int,
        min_offset: int,
        max_offset: int,
        body: bytes = b"",
        message_count: int = 0,
        suggest_pulling_from_slave: bool = False,
        message_offsets: Sequence[int] = (),
    ) -> GetResult:
        """A GetResult of these fields (for tools and tests; the store fills slots itself)."""
        self = cls()
        self.status, self.next_begin_offset, self.min_offset = status, next_begin_offset, min_offset
        self.max_offset, self.body, self.message_count = max_offset, body, message_count
        self.suggest_pulling_from_slave, self.message_offsets = suggest_pulling_from_slave, message_offsets
        return self

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, GetResult):
            return NotImplemented
        return _same_fields(self, other, _GET_FIELDS)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return _fields_repr(self, _GET_FIELDS, "GetResult")


class MissedGetResult(GetResult):
    """A GetResult that found nothing: only its status and offsets are filled."""

    __slots__ = ()
    # class attributes over the base's slots: read-only on an instance, four stores fewer
    body = b""
    message_count = 0
    suggest_pulling_from_slave = False
    message_offsets = ()


@dataclass(slots=True)
class QueryMessageResult:
    """Answer to ``query_message``: raw records plus the index freshness markers."""

    messages: list[bytes]
    index_last_update_timestamp: int
    index_last_update_phyoffset: int

    @property
    def body(self) -> bytes:
        return b"".join(self.messages)


@dataclass(slots=True)
class ConsumeQueueRead:
    """Answer to ``read_consume_queue``: the queue's offset range and the requested units
    ``(commit-log offset, size, tags code)``; ``units`` is None when the index is not stored."""

    min_offset: int
    max_offset: int
    units: list[tuple[int, int, int]] | None
