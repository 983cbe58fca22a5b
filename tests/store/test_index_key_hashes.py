"""Index key hashes from cached heads and tails (``store.index.hash``, the reput's fast path and
the index process's scan) equal Java's ``String.hashCode`` of ``topic#key`` as RocketMQ's
IndexService folds it, on every path (moved from test_store_fastpaths.py)."""

from __future__ import annotations

import random

import pytest

from pocketmq.remoting.protocol.message import UniqIdGenerator, java_string_hash
from pocketmq.store import MessageStore
from pocketmq.store.index.hash import topic_key_hash, topic_key_hashes

from .conftest import make_msg, tiny_config


def _ref_hash(topic: str, key: str) -> int:
    h = abs(java_string_hash(f"{topic}#{key}"))
    return 0 if h > 0x7FFFFFFF else h


def test_cached_index_hashes_equal_java_string_hash():
    rnd = random.Random(11)
    gen = UniqIdGenerator()
    alphabet = "abcXYZ019 #-_é中\U0001f600\uffff\ud7ff"
    for _ in range(20_000):
        topic = rnd.choice(["T", "TopicA", "t中", "%RETRY%g"])
        r = rnd.random()
        if r < 0.3:
            key = gen.create()
        elif r < 0.5:
            key = f"order-{rnd.randrange(100_000)}"
        else:
            key = "".join(rnd.choice(alphabet) for _ in range(rnd.randrange(12)))
        assert topic_key_hash(topic, key) == _ref_hash(topic, key), (topic, key)
        keys = f"{key}  {key[:3]} zz"
        expected = [_ref_hash(topic, k) for k in ([key] if key else []) + [k for k in keys.split(" ") if k]]
        assert topic_key_hashes(topic, key, keys) == expected, (topic, key)


def test_tail_table_holds_every_ascii_pair_and_uniq_keys_hash_without_a_miss():
    from pocketmq.store.index import hash as index_hash
    from pocketmq.store.index.hash import TAIL_TABLE

    for a in range(128):
        for b in range(128):
            pair = chr(a) + chr(b)
            assert TAIL_TABLE[pair] == java_string_hash(pair) & 0xFFFFFFFF
    gen = UniqIdGenerator()
    keys = [gen.create() for _ in range(3000)]
    for key in keys[:10]:
        topic_key_hash("TopicA", key)  # (the head of each counter byte is filled once)
    slow_calls = []
    real = index_hash._slow
    index_hash._slow = lambda *a: slow_calls.append(a) or real(*a)  # type: ignore[assignment]
    try:
        for key in keys[10:]:
            assert topic_key_hash("TopicA", key) == _ref_hash("TopicA", key)
    finally:
        index_hash._slow = real
    # a miss only when the counter's high byte or the millisecond changes: no per-tail misses
    assert len(slow_calls) <= len({k[:-2] for k in keys})


def test_a_uniq_key_of_a_new_millisecond_is_composed_not_hashed_whole(monkeypatch):
    """One send in flight (or a broker under valgrind) sees a new millisecond at every message:
    its UNIQ_KEY's 30- and 28-character heads are both new, and the 26-character one is not."""
    from pocketmq.store.index import hash as index_hash

    prefix = "C0A8010A1234ABCD0001"  # IP, pid, class-loader hash
    keys = [f"{prefix}{(5_000_000 + i * 3) & 0xFFFFFFFF:08X}{i & 0xFFFF:04X}" for i in range(3000)]
    full = []
    real = index_hash.java_string_hash
    monkeypatch.setattr(index_hash, "java_string_hash", lambda s: full.append(s) or real(s))
    for key in keys:
        assert topic_key_hashes("TopicNewMs", key, None) == [_ref_hash("TopicNewMs", key)]
    # a full hash when the 26-character head is new (every 256 ms: 3000 keys 3 ms apart span
    # ~35 of them), not one per key
    assert len(full) <= 40, len(full)
    # business keys keep one level: a random key is hashed once, never composed level by level
    full.clear()
    rnd = random.Random(5)
    for _ in range(200):
        key = f"{rnd.getrandbits(128):032x}"
        assert topic_key_hashes("TopicNewMs", None, key) == [_ref_hash("TopicNewMs", key)]
    assert len(full) == 200


@pytest.mark.parametrize("path", ["reput", "scan"])
def test_every_uniq_key_hash_path_composes_a_new_millisecond(path, tmp_path, monkeypatch):
    """Reput's fast path (``dispatch.appended``) and the index process's scan (``index.scan``)
    compose a UNIQ_KEY of a new millisecond from its heads as ``topic_key_hashes`` does, with
    the same hashes: a full Java hash only when its 26-character head is new."""
    from pocketmq.store.index import hash as index_hash
    from pocketmq.store.index.scan import KeyHashCache

    prefix = "C0A8010A1234ABCD0002"
    keys = [f"{prefix}{(7_000_000 + i * 3) & 0xFFFFFFFF:08X}{i & 0xFFFF:04X}" for i in range(600)]
    full: list[str] = []
    real = index_hash.java_string_hash
    monkeypatch.setattr(index_hash, "java_string_hash", lambda s: full.append(s) or real(s))
    topic = f"TopicNewMs{path}"
    if path == "scan":
        cache = KeyHashCache()
        cache.prefill()
        _name, heads = cache.topic(topic.encode())
        got = [cache.miss(topic, heads, k.encode(), index_hash.UNIQ_DEPTH) for k in keys]
        assert got == [_ref_hash(topic, k) for k in keys]
    else:
        s = MessageStore(tiny_config(str(tmp_path), max_hash_slot_num=64, max_index_num=1000))
        s.load()
        try:
            for i, k in enumerate(keys):
                assert s.put_message(make_msg(i, topic=topic, extra={"UNIQ_KEY": k})).append is not None
            s.do_reput()
            uniq_full = [h for h in full if h.startswith(f"{topic}#{prefix}")]
            full.clear()  # (a query hashes its key whole)
            assert all(s.index.query(topic, k, 4, 0, 1 << 62) for k in keys)
            full[:] = uniq_full
        finally:
            s.close()
    assert len(full) <= 12, len(full)  # ~7 new 26-char heads (3 ms apart, every 256 ms)


def test_uniq_key_hash_of_any_key_is_the_java_hash():
    """``uniq_key_hash``'s inline compose and its fallbacks (short keys, non-ASCII and astral
    characters in the tails or the head), cold and with the heads cached."""
    from pocketmq.store.index.hash import uniq_key_hash

    base = ["", "a", "ab", "abcdef", "abcdefg", "键-é-abcdef", "\U0001f600abcdef", "abc\U0001f600ef"]
    keys = (
        base + [k + "\U0001f600" for k in base] + [f"C0A8010A1234ABCD0003{i:08X}{i:04X}" for i in range(50)]
    )
    for _ in range(2):
        for k in keys:
            assert uniq_key_hash("TopicAnyUniq", k) == _ref_hash("TopicAnyUniq", k), k


def test_hash_of_integer_min_value_folds_to_zero():
    # find a key whose topic#key hash is Integer.MIN_VALUE through the composition rule
    target = 0x80000000
    for head in (f"h{i}" for i in range(1000)):
        hh = java_string_hash(f"T#{head}") & 0xFFFFFFFF
        need = (target - hh * pow(31, 4, 1 << 32)) % (1 << 32)
        c0, rest = divmod(need, 31**3)
        c1, rest = divmod(rest, 31**2)
        c2, c3 = divmod(rest, 31)
        if 0 < c0 <= 0xD7FF:  # c1..c3 < 31
            key = head + "".join(map(chr, (c0, c1, c2, c3)))
            assert java_string_hash(f"T#{key}") == -0x80000000
            assert topic_key_hash("T", key) == 0 == _ref_hash("T", key)
            assert topic_key_hash("T", key) == 0  # cached path
            return
    pytest.fail("no MIN_VALUE key constructed")


def test_a_batchs_same_head_hashes_equal_java_string_hash():
    """``same_head_hashes`` (a batch body's UNIQ_KEYs hashed by C-level maps per run of one
    head, read from its NUL-joined properties strings) gives every key's ``topic#key`` hash or
    None (the per-key loop), and takes runs whose head part lies below and above 2**31 and
    batches of several runs."""
    from pocketmq.store.dispatch.batched import same_head_hashes
    from pocketmq.store.index.hash import heads_of

    rnd = random.Random(5)
    sides = set()
    for trial in range(400):
        topic = f"T{trial % 7}"
        prefix = f"7F0000010A6B18B4AAC2{rnd.randrange(1 << 32):08X}"
        start = rnd.randrange(0x10000 - 300)
        n = rnd.choice([1, 2, 64, 200])
        shape = trial % 8
        if shape == 2:
            start &= 0xFF00  # (one head but key 1's)
        keys = [f"{prefix}{start + i:04X}" for i in range(n)]  # (runs of one head: 1-2)
        if shape == 1:
            keys[n // 2 :] = [k[:-6] + "99" + k[-4:] for k in keys[n // 2 :]]  # a later millisecond
        elif shape == 2 and n > 2:
            keys[1] = keys[1][:-4] + "FF" + keys[1][-2:]  # heads A, B, A
        elif shape == 3:
            keys[-1] = keys[-1] + "0"  # one longer key
        elif shape == 4:
            keys[0] = keys[0][:-1] + "é"  # not ASCII
        elif shape == 5:
            keys = [k[:5] for k in keys]  # too short
        # (as a batch body's properties: a prefix, the key, a tail; joined with NULs)
        props = "\x00".join(f"UNIQ_KEY\x01{k}\x02CLUSTER\x01C" for k in keys)
        size = len(keys[0])
        got = same_head_hashes(props, n, size + 20, 9, size, topic, heads_of(topic))
        expected = [_ref_hash(topic, k) for k in keys]
        if shape in (0, 1, 6, 7):
            assert got == expected, (topic, keys[:3])
            sides.add(heads_of(topic)[keys[0][:-2]] > 0x80000000)
        else:
            assert got is None or got == expected
        if shape in (4, 5) or (shape in (2, 3) and n > 2):
            assert got is None, (shape, n, keys[:3])
    assert sides == {False, True}  # (heads whose part is above 2**31 fold to 2**32 - hv - t)


def test_same_head_hashes_reads_every_ascii_tail():
    """Every pair of ASCII characters (but NUL) as a key's tail, in runs of one head: each
    key's hash is Java's (the tails read as 16-bit values and looked up in one table)."""
    from pocketmq.store.dispatch.batched import same_head_hashes
    from pocketmq.store.index.hash import heads_of

    chars = [chr(c) for c in range(1, 128)]
    tails = [a + b for a in chars for b in chars]
    head = "7F0000010A6B18B4AAC22794EB2C00"
    for topic in ("T0", "TopicTest", "BenchTopic"):
        for k in range(0, len(tails), 500):
            keys = [head + t for t in tails[k : k + 500]]
            props = "\x00".join(f"UNIQ_KEY\x01{key}\x02CLUSTER\x01C" for key in keys)
            size = len(keys[0])
            got = same_head_hashes(props, len(keys), size + 20, 9, size, topic, heads_of(topic))
            assert got == [_ref_hash(topic, key) for key in keys]
