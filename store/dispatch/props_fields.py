"""What dispatch reads from a record's properties string: tagsCode, KEYS, UNIQ_KEY, DELAY.

Properties are ``k\\x01v\\x02k\\x01v`` (remoting.protocol.message). Dispatch needs three values
per record and parses nothing else: with the string framed by separators
(``"\\x02" + props + "\\x02"``), a property is found with one ``find`` of ``"\\x02KEY\\x01"`` and
ends at the next ``"\\x02"`` (the first occurrence wins, as ``get_property``). The
per-record loops (``dispatch.appended``) inline exactly this; ``dispatch_fields`` is the reference.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from types import MappingProxyType

from pocketmq.remoting.protocol.message import (
    MessageConst,
    get_property,
    string_to_properties,
    tags_hash,
)

__all__ = [
    "NO_PROPERTIES",
    "KEYS_NEEDLE",
    "TAGS_NEEDLE",
    "TAG_CODES",
    "UNIQ_NEEDLE",
    "LazyProperties",
    "deliver_time",
    "dispatch_fields",
    "tag_code",
    "tags_code_of",
    "wants_properties",
]

#: TAGS value -> tagsCode (bounded; ``tags_hash`` has its own cache too)
TAG_CODES: dict[str, int] = {}
TAGS_NEEDLE = "\x02TAGS\x01"
KEYS_NEEDLE = "\x02KEYS\x01"
UNIQ_NEEDLE = "\x02UNIQ_KEY\x01"
_DELAY = MessageConst.DELAY
#: what a listener that does not read properties gets (``MessageArrivingListener``)
NO_PROPERTIES: Mapping[str, str] = MappingProxyType({})


class LazyProperties(Mapping[str, str]):
    """Properties of a dispatched record, parsed only if the listener looks at them."""

    __slots__ = ("_d", "_s")

    def __init__(self, s: str) -> None:
        self._s = s
        self._d: dict[str, str] | None = None

    def _dict(self) -> dict[str, str]:
        if self._d is None:
            self._d = string_to_properties(self._s)
        return self._d

    def __getitem__(self, key: str) -> str:
        return self._dict()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._dict())

    def __len__(self) -> int:
        return len(self._dict())


def wants_properties(listener: object) -> bool:
    """Whether a ``MessageArrivingListener`` reads the properties it is given."""
    return bool(getattr(listener, "needs_properties", True))


def tag_code(tags: str) -> int:
    """tagsCode of a TAGS value missing from ``TAG_CODES`` (which it then caches)."""
    if len(TAG_CODES) > 4096:
        TAG_CODES.clear()
    code = TAG_CODES[tags] = tags_hash(tags)
    return code


def tags_code_of(props: str) -> int:
    """The hash of the TAGS property (first occurrence, as ``get_property``); 0 without tags."""
    if props.startswith("TAGS\x01"):
        a = 5
    else:
        a = props.find(TAGS_NEEDLE)
        if a < 0:
            return 0
        a += 6
    e = props.find("\x02", a)
    tags = props[a:e] if e >= 0 else props[a:]
    if not tags:
        return 0
    code = TAG_CODES.get(tags)
    return tag_code(tags) if code is None else code


def dispatch_fields(props: str) -> tuple[str | None, str | None, str | None]:
    """``(TAGS, KEYS, UNIQ_KEY)`` of a properties string (first occurrence, as ``get_property``).

    One framing string and three ``find`` calls instead of three ``get_property`` calls: the
    separators around the string make every value end at a separator.
    """
    s = f"\x02{props}\x02"
    i = s.find(TAGS_NEEDLE)
    tags = s[i + 6 : s.find("\x02", i + 6)] if i >= 0 else None
    i = s.find(KEYS_NEEDLE)
    keys = s[i + 6 : s.find("\x02", i + 6)] if i >= 0 else None
    i = s.find(UNIQ_NEEDLE)
    uniq = s[i + 10 : s.find("\x02", i + 10)] if i >= 0 else None
    return tags, keys, uniq


def deliver_time(props: str, store_ts: int, delay_levels: list[int], default: int) -> int:
    """tagsCode of a SCHEDULE_TOPIC_XXXX unit: store time + the level's delay (Java semantics)."""
    raw = get_property(props, _DELAY)
    if raw is None:
        return default
    try:
        level = int(raw)
    except ValueError:
        return default
    level = min(level, len(delay_levels))
    if level <= 0:
        return default
    return store_ts + delay_levels[level - 1]
