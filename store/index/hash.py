"""Index key hashes: ``abs(String.hashCode())`` of ``topic#key`` (Java ``IndexFile.indexKeyHashMethod``).

Java's hash is ``h(s) = sum(s[i] * 31**(n-1-i)) mod 2**32`` over UTF-16 code units, which
composes: ``h(a + b) = h(a) * 31**len(b) + h(b)``. A pure-Python loop over the characters costs
~1 µs per key (two keys per message), so the hot path never loops over a key:

* the key is split into ``head = key[:-2]`` and a 2-character ``tail``;
* ``h(topic + "#" + head)`` is cached per topic, and ``h(tail)`` is in one shared table that
  holds every pair of ASCII characters from the start (BMP pairs are added on demand);
* the hash is then ``heads[head] * 31**2 + tails[tail]`` (two dict lookups, ~0.25 µs).

This is fast because real keys share heads: a UNIQ_KEY is 20 hex chars of producer prefix, 8
of milliseconds-in-month and 4 of counter, so its 30-char head changes every 256 messages or
millisecond per producer; business keys are typically a prefix plus a sequence number. Two
characters, not four: the tails a broker touches (hex and digit pairs) are a few hundred
entries that stay in the CPU cache, where a 4-character tail table (65,536 hex groups alone)
missed it on most lookups (measured 300-390 vs 260 ns per key with a scan polluting the
cache). A head miss is computed from the head's own head (one level; three for a UNIQ_KEY), so a
UNIQ_KEY whose counter byte or millisecond changed costs a few lookups more, and a random key
costs one full hash. Tables are bounded (cleared when full) so hostile keys cannot grow memory.
"""

from __future__ import annotations

from pocketmq.remoting.protocol.message import java_string_hash

__all__ = [
    "HEAD_TABLES",
    "TAIL_TABLE",
    "UNIQ_DEPTH",
    "fold_hash",
    "heads_of",
    "key_parts",
    "index_key_hash",
    "topic_key_hash",
    "topic_key_hashes",
    "uniq_key_hash",
]

_M = 0xFFFFFFFF
_P2 = 961  # 31**2
_MAX_HEADS = 16_384  # per topic
_MAX_TOPICS = 1024
_MAX_TAILS = 1 << 15  # the 16,384 ASCII pairs, and as many others
#: levels a UNIQ_KEY's head miss is composed from before a full hash: its millisecond changes its
#: 30- and 28-character heads together, and the 26-character one only every 256 ms, so with one
#: level every new millisecond cost a full hash (~40k instructions; ~12.8k a key amortized at 30
#: keys a millisecond); one send in flight, or a broker under valgrind, sees a new millisecond at
#: every message. Business keys keep one level: a random key would only fill the table faster
UNIQ_DEPTH = 3

#: topic -> {head: h(topic + "#" + head) * 31**2 mod 2**32} (pre-multiplied: one op less per key)
_HEADS: dict[str, dict[str, int]] = {}
#: every 2-char ASCII string -> its hash (16,384 entries); other pairs of 2 UTF-16 units are
#: added on demand (``_tail_hash``)
_ASCII_PAIRS: dict[str, int] = {chr(a) + chr(b): a * 31 + b for a in range(128) for b in range(128)}
_TAILS: dict[str, int] = dict(_ASCII_PAIRS)
#: the tables, for callers that inline the two lookups (``IndexService.build_index``); both
#: dicts are only ever cleared in place, never replaced, so binding them once is safe. A miss
#: (KeyError) must go through ``topic_key_hash``, which fills them.
HEAD_TABLES = _HEADS
TAIL_TABLE = _TAILS


def _fold(u: int) -> int:
    """Unsigned 32-bit hash -> ``abs(int32)``, 0 for Integer.MIN_VALUE (Java's overflow)."""
    return u if u < 0x80000000 else (0x100000000 - u) & 0x7FFFFFFF


def index_key_hash(key: str) -> int:
    """``abs(key.hashCode())``, 0 for Integer.MIN_VALUE; ``key`` is the full ``topic#key``."""
    return _fold(java_string_hash(key) & _M)


def _tail_hash(tail: str) -> int | None:
    """h(tail) for a 2-char tail of 2 UTF-16 units; None if it holds an astral char."""
    t = _TAILS.get(tail)
    if t is None:
        a, b = map(ord, tail)
        if a > 0xFFFF or b > 0xFFFF:
            return None  # two UTF-16 units each: 31**2 would be the wrong multiplier
        t = a * 31 + b  # < 2**32: no wrap-around
        if len(_TAILS) >= _MAX_TAILS:
            _TAILS.clear()
            _TAILS.update(_ASCII_PAIRS)
        _TAILS[tail] = t
    return t


def _head_p2(heads: dict[str, int], topic: str, head: str, depth: int = 1) -> int:
    """``h(topic + "#" + head) * 31**2`` (mod 2**32), cached in ``heads``; a miss is composed
    from the head's own head, recursively down to ``depth`` levels, then one full hash."""
    hp = heads.get(head)
    if hp is None:
        t = _tail_hash(head[-2:]) if len(head) >= 2 else None
        if t is not None:
            inner = head[:-2]
            ip = heads.get(inner)
            if ip is None:
                ip = (
                    _head_p2(heads, topic, inner, depth - 1)
                    if depth > 1
                    else (java_string_hash(f"{topic}#{inner}") * _P2) & _M
                )
                if len(heads) >= _MAX_HEADS:
                    heads.clear()
                heads[inner] = ip
            hp = ((ip + t) * _P2) & _M
        else:
            hp = (java_string_hash(f"{topic}#{head}") * _P2) & _M
        if len(heads) >= _MAX_HEADS:
            heads.clear()
        heads[head] = hp
    return hp


def heads_of(topic: str) -> dict[str, int]:
    heads = _HEADS.get(topic)
    if heads is None:
        if len(_HEADS) >= _MAX_TOPICS:
            _HEADS.clear()
        heads = _HEADS[topic] = {}
    return heads


def key_parts(topic: str, key: str, depth: int = 1) -> tuple[int, int] | None:
    """``(h(topic#head) * 31**2, h(tail))`` of a key split as the module doc says (cached in
    the tables), so that its hash is ``fold_hash(sum)``; None for a key that does not split
    (shorter than 2, or an astral character in the tail). ``index.scan`` mirrors these parts in
    tables keyed by bytes. ``depth``: head levels composed on a miss (``UNIQ_DEPTH`` for a UNIQ_KEY)."""
    if len(key) >= 2:
        t = _tail_hash(key[-2:])
        if t is not None:
            return _head_p2(heads_of(topic), topic, key[:-2], depth), t
    return None


def fold_hash(u: int) -> int:
    """``abs(int32)`` of an unsigned sum of key parts (any non-negative int)."""
    return _fold(u & _M)


def _slow(heads: dict[str, int], topic: str, key: str, depth: int = 1) -> int:
    if len(key) >= 2:
        t = _tail_hash(key[-2:])
        if t is not None:
            return _fold((_head_p2(heads, topic, key[:-2], depth) + t) & _M)
    return _fold(java_string_hash(f"{topic}#{key}") & _M)


def topic_key_hash(topic: str, key: str) -> int:
    """``index_key_hash(topic + "#" + key)`` without building the string (cached, see module doc)."""
    heads = _HEADS.get(topic)
    if heads is None:
        heads = heads_of(topic)
    hp = heads.get(key[:-2])
    t = _TAILS.get(key[-2:])
    if hp is None or t is None:  # (a key shorter than 2 never finds a tail)
        return _slow(heads, topic, key)
    u = (hp + t) & 0xFFFFFFFF
    # inline of index.hash.fold_hash
    return u if u < 0x80000000 else (0x100000000 - u) & 0x7FFFFFFF


def uniq_key_hash(topic: str, key: str) -> int:
    """``topic_key_hash`` of a UNIQ_KEY that missed the tables: its head is composed down to
    ``UNIQ_DEPTH`` levels (a new millisecond changes its two longest heads), not hashed whole.

    The common miss (a new millisecond: the 26-character head cached, the three tails ASCII) is
    composed inline, ~3x fewer instructions than ``_head_p2``'s recursion (measured under
    callgrind: at one send in flight every message is such a miss)."""
    heads = _HEADS.get(topic)
    if heads is None:
        heads = heads_of(topic)
    if len(key) >= 6:
        head = key[:-6]
        if head in heads:  # (``in``, subscripts: no method call, no raise on the common path)
            hp = heads[head]
            tails = _TAILS
            t1 = key[-6:-4]
            t2 = key[-4:-2]
            t3 = key[-2:]
            if t1 in tails and t2 in tails and t3 in tails:
                # h(topic#head) * 31**2 of the 30-char head, as _head_p2 caches it (the 28-char
                # one is not stored: only a counter byte changing within a millisecond would
                # find it, and each store hashes a new string)
                h30 = ((((hp + tails[t1]) * _P2) & _M) + tails[t2]) * _P2 & _M
                if len(heads) >= _MAX_HEADS:
                    heads.clear()
                    heads[head] = hp
                heads[key[:-2]] = h30
                u = (h30 + tails[t3]) & _M
                # inline of index.hash.fold_hash
                return u if u < 0x80000000 else (0x100000000 - u) & 0x7FFFFFFF
    return _slow(heads, topic, key, UNIQ_DEPTH)


def topic_key_hashes(topic: str, uniq_key: str | None, keys: str | None) -> list[int]:
    """Hashes of every index key of one record: UNIQ_KEY first, then each KEYS token.

    The per-dispatched-message hot path: subscripts in a ``try`` (a miss raises KeyError,
    including for keys shorter than 2, whose tail is never in the table).
    """
    heads = _HEADS.get(topic)
    if heads is None:
        heads = heads_of(topic)
    tails = _TAILS
    out: list[int] = []
    if uniq_key:
        try:
            # inline of index.hash.topic_key_hash
            u = (heads[uniq_key[:-2]] + tails[uniq_key[-2:]]) & 0xFFFFFFFF
            out.append(u if u < 0x80000000 else (0x100000000 - u) & 0x7FFFFFFF)
        except KeyError:
            out.append(uniq_key_hash(topic, uniq_key))
    if keys:
        for k in keys.split(" ") if " " in keys else (keys,):
            if k:
                try:
                    # inline of index.hash.topic_key_hash
                    u = (heads[k[:-2]] + tails[k[-2:]]) & 0xFFFFFFFF
                    out.append(u if u < 0x80000000 else (0x100000000 - u) & 0x7FFFFFFF)
                except KeyError:
                    out.append(_slow(heads, topic, k))
    return out
