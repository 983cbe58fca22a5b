"""``MessageInner``: what the broker hands to ``MessageStore.put_message`` (Java ``MessageExtBrokerInner``)."""

from __future__ import annotations

from dataclasses import dataclass, field

from pocketmq.remoting.protocol.message import (
    HostAddress,
    MessageConst,
    get_property,
    properties_to_string,
)

LOCALHOST: HostAddress = (b"\x7f\x00\x00\x01", 0)
_WAIT_NEEDLE = MessageConst.WAIT + "\x01"
_TRUE = "true"


@dataclass(slots=True)
class MessageInner:
    """One message to append. The store assigns queue offset, physical offset, store time and CRC.

    ``properties`` is a dict or the already encoded ``k\\x01v\\x02...`` string (the SEND_MESSAGE_V2
    header carries exactly that string, so the broker can pass it through). ``sys_flag``'s host
    bits (0x10/0x20) are derived from the host lengths. ``tags_code`` is informational: the
    ConsumeQueue tagsCode is always derived from the stored TAGS (or DELAY) property, so live
    dispatch and recovery re-dispatch agree byte for byte.
    """

    topic: str
    body: bytes
    queue_id: int = 0
    flag: int = 0
    properties: dict[str, str] | str = field(default_factory=dict)
    sys_flag: int = 0
    born_timestamp: int = 0
    born_host: HostAddress = LOCALHOST
    store_host: HostAddress = LOCALHOST
    reconsume_times: int = 0
    prepared_transaction_offset: int = 0
    tags_code: int = 0

    def properties_string(self) -> str:
        p = self.properties
        return p if isinstance(p, str) else properties_to_string(p)

    def get_property(self, key: str) -> str | None:
        p = self.properties
        return get_property(p, key) if isinstance(p, str) else p.get(key)

    @property
    def wait_store_msg_ok(self) -> bool:
        """``WAIT`` property as Java reads it: absent → True, else ``Boolean.parseBoolean``."""
        p = self.properties
        if isinstance(p, str):
            i = p.find(_WAIT_NEEDLE)
            if i < 0:  # the broker strips WAIT before storing: the common case
                return True
            # a Java producer's "WAIT\x01true" (per put on the SYNC_FLUSH path): no parse
            if (i == 0 or p[i - 1] == "\x02") and p.startswith(_TRUE, i + 5):
                end = i + 9
                if len(p) == end or p[end] == "\x02":
                    return True
            value = get_property(p, MessageConst.WAIT)
        else:
            value = p.get(MessageConst.WAIT)
        return value is None or value.lower() == "true"
