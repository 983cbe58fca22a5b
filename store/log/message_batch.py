"""A batch of ``MessageInner`` encoded as CommitLog records (``CommitLog.put_messages``: the
store API's batch of messages sharing topic and queue, as the broker's own batches and tests
hand it; the SDK's batch bodies take ``batch_encode.encode_body`` instead).

Per message: one ``pack`` of the prefix, the CRC and the properties encoding; what the messages
of a broker batch share (hosts, sysFlag, topic) is worked out once. Nothing is written here: the
caller copies the ``Encoded`` parts into its segment.
"""

from __future__ import annotations

from collections.abc import Sequence

from pocketmq.remoting.protocol.message import (
    HOST_FLAGS_MASK,
    MAX_PROPERTIES_LENGTH,
    MESSAGE_MAGIC_CODE,
    PROPS_LEN,
    RECORD_PREFIX_STRUCTS,
    host_flags,
)
from pocketmq.store.log.batch_encode import ILLEGAL, TOO_LONG_PROPS, Encoded, encode_items
from pocketmq.store.log.crc import FAST_CRC_MIN as _LONG
from pocketmq.store.log.crc import crc32_long, crc32_short
from pocketmq.store.message_inner import MessageInner

_pack_props_len = PROPS_LEN.pack


def encode_messages(
    msgs: Sequence[MessageInner], head: bytes, phy: int, qoff: int, now: int, max_body: int
) -> Encoded | int:
    """Records of ``msgs`` (topic head ``head``) starting at CommitLog offset ``phy`` and queue
    offset ``qoff``, stored at ``now``; or ``ILLEGAL`` / ``TOO_LONG_PROPS`` (``encode_items``'
    refusals): another topic or queue than the first message's, a body over ``max_body``, too
    long or NUL-ended properties. Records that differ in hosts or sysFlag: ``_encode_mixed``."""
    first = msgs[0]
    topic = first.topic
    queue_id = first.queue_id
    tail_len = len(head) + 2
    born = first.born_host
    store = first.store_host
    born_ip, born_port = born
    store_ip, store_port = store
    sys_flag = (first.sys_flag & ~HOST_FLAGS_MASK) | host_flags(born_ip, store_ip)
    prefix = RECORD_PREFIX_STRUCTS[sys_flag & HOST_FLAGS_MASK]
    pack = prefix.pack
    fixed = prefix.size + tail_len
    crc32 = crc32_long if min(len(m.body) for m in msgs) >= _LONG else crc32_short
    pack_len = _pack_props_len
    parts: list[bytes | memoryview] = []
    add = parts.extend
    sizes: list[int] = []
    props_list: list[str] = []
    base_flag = first.sys_flag
    start = phy
    start_qoff = qoff
    for m in msgs:
        if m.topic != topic or m.queue_id != queue_id:
            return ILLEGAL
        props = m.properties_string()
        props_b, body = props.encode(), m.body
        plen, blen = len(props_b), len(body)
        if plen > MAX_PROPERTIES_LENGTH or (plen and not props_b[-1]):  # see records.validate_record
            return TOO_LONG_PROPS
        if blen > max_body:
            return ILLEGAL
        if (
            m.sys_flag != base_flag
            or not (m.born_host is born or m.born_host == born)
            or not (m.store_host is store or m.store_host == store)
        ):
            return _encode_mixed(msgs, head, start, start_qoff, now, max_body)
        size = fixed + blen + plen
        add(
            (
                # inline of remoting.protocol.message.encode_message
                pack(
                    size, MESSAGE_MAGIC_CODE, crc32(body) & 0x7FFFFFFF, queue_id, m.flag, qoff, phy,
                    sys_flag, m.born_timestamp, born_ip, born_port, now, store_ip, store_port,
                    m.reconsume_times, m.prepared_transaction_offset, blen,
                ),
                body,
                head,
                pack_len(plen),
                props_b,
            )
        )  # fmt: skip
        sizes.append(size)
        props_list.append(props)
        phy += size
        qoff += 1
    return Encoded(parts, sizes, props_list, phy - start, sys_flag)


def _encode_mixed(
    msgs: Sequence[MessageInner], head: bytes, phy: int, qoff: int, now: int, max_body: int
) -> Encoded | int:
    """``encode_messages`` for records that differ in hosts or sysFlag (not from a broker):
    each message is its own template for ``encode_items`` (a rare path: one call each)."""
    first = msgs[0]
    topic = first.topic
    queue_id = first.queue_id
    parts: list[bytes | memoryview] = []
    sizes: list[int] = []
    props_list: list[str] = []
    flags: list[int] = []
    start = phy
    for m in msgs:
        if m.topic != topic or m.queue_id != queue_id:
            return ILLEGAL
        item = (m.flag, m.body, m.properties_string())
        one = encode_items(m, (item,), head, phy, qoff, now, max_body, m.prepared_transaction_offset)
        if not isinstance(one, Encoded):
            return one
        parts += one.parts
        sizes += one.sizes
        props_list += one.props
        flag = one.flags
        assert isinstance(flag, int)  # one record: one sysFlag
        flags.append(flag)
        phy += one.total
        qoff += 1
    return Encoded(parts, sizes, props_list, phy - start, flags)
