"""Producer and consumer channel tables (pure: time is an argument, side effects are results).

Rules (RocketMQ ``ProducerManager`` / ``ConsumerManager`` / ``ConsumerGroupInfo``):

* registrations are keyed by connection (the client's TCP channel); a heartbeat refreshes
  ``last_update_ms``; a channel silent for ``channel_expired_timeout`` (120 s) is evicted by
  :meth:`scan_not_active_channel`, a closed channel at once by :meth:`do_channel_close_event`;
* a consumer group's membership "changes" when a new channel joins, one leaves, or its
  subscribed topic set changes (a newer ``subVersion`` replaces a subscription silently);
  the caller then sends NOTIFY_CONSUMER_IDS_CHANGED to the group's remaining channels;
* ``consumer_ids`` is sorted and de-duplicated: every broker must return the same list.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from pocketmq.remoting.protocol.bodies import (
    ConsumeFromWhere,
    ConsumeType,
    MessageModel,
    SubscriptionData,
)

if TYPE_CHECKING:
    from pocketmq.remoting.transport.connection import RemotingConnection

#: ``ConsumerManager.CHANNEL_EXPIRED_TIMEOUT``
CHANNEL_EXPIRED_TIMEOUT_MS = 120_000


@dataclass(slots=True, eq=False)
class ClientChannelInfo:
    conn: RemotingConnection
    client_id: str
    language: int
    version: int
    last_update_ms: int
    remote_addr: str = ""


@dataclass(slots=True, eq=False)
class ConsumerGroupInfo:
    group_name: str
    consume_type: ConsumeType
    message_model: MessageModel
    consume_from_where: ConsumeFromWhere
    channels: dict[Any, ClientChannelInfo] = field(default_factory=dict)
    subscription_table: dict[str, SubscriptionData] = field(default_factory=dict)
    last_update_ms: int = 0

    def find_subscription_data(self, topic: str) -> SubscriptionData | None:
        return self.subscription_table.get(topic)

    def client_ids(self) -> list[str]:
        return sorted({info.client_id for info in self.channels.values()})

    def all_channels(self) -> list[Any]:
        return list(self.channels)

    def find_channel_by_client_id(self, client_id: str) -> ClientChannelInfo | None:
        for info in self.channels.values():
            if info.client_id == client_id:
                return info
        return None

    def update_channel(
        self,
        info: ClientChannelInfo,
        consume_type: ConsumeType,
        message_model: MessageModel,
        consume_from_where: ConsumeFromWhere,
    ) -> bool:
        """Add or refresh a channel; True when it is new (membership changed)."""
        self.consume_type = consume_type
        self.message_model = message_model
        self.consume_from_where = consume_from_where
        old = self.channels.get(info.conn)
        updated = False
        if old is None:
            self.channels[info.conn] = info
            updated = True
        elif old.client_id != info.client_id:
            # The same connection now claims another client id: take the new one.
            self.channels[info.conn] = info
        else:
            old.last_update_ms = info.last_update_ms
            old.language = info.language
            old.version = info.version
        self.last_update_ms = info.last_update_ms
        return updated

    def update_subscription(self, subs: Iterable[SubscriptionData], now_ms: int) -> bool:
        """Merge the heartbeat's subscriptions; True when the topic set changed."""
        updated = False
        seen: set[str] = set()
        for sub in subs:
            seen.add(sub.topic)
            old = self.subscription_table.get(sub.topic)
            if old is None:
                self.subscription_table[sub.topic] = sub
                updated = True
            elif sub.sub_version > old.sub_version or (sub != old and sub.sub_version == old.sub_version):
                self.subscription_table[sub.topic] = sub
        for topic in [t for t in self.subscription_table if t not in seen]:
            del self.subscription_table[topic]
            updated = True
        self.last_update_ms = now_ms
        return updated


Channels = dict[Any, ClientChannelInfo]
_E = TypeVar("_E")


class GroupChannelTable(ABC, Generic[_E]):
    """``{group: entry}``, each entry holding the group's ``{conn: ClientChannelInfo}``.

    The channel bookkeeping consumers and producers share; a group left without channels goes.
    """

    def __init__(self, channel_expired_timeout_ms: int = CHANNEL_EXPIRED_TIMEOUT_MS) -> None:
        #: group → entry (a consumer's ConsumerGroupInfo, a producer's channel dict)
        self.table: dict[str, _E] = {}
        self.channel_expired_timeout_ms = channel_expired_timeout_ms
        #: connection → the groups it registered in (insertion-ordered; a superset: an
        #: unregistered or evicted channel stays until its connection closes), so a close visits
        #: its own groups, and a connection that never registered costs one lookup (T16: 10,000
        #: idle connections closing each walked every group of the table)
        self._groups_of: dict[Any, dict[str, None]] = {}

    @staticmethod
    @abstractmethod
    def channels_of(entry: _E) -> Channels: ...

    def unregister(self, group: str, conn: RemotingConnection) -> bool:
        """Remove ``conn`` from ``group``; True when it was there (membership changed)."""
        entry = self.table.get(group)
        if entry is None:
            return False
        channels = self.channels_of(entry)
        if channels.pop(conn, None) is None:
            return False
        if not channels:
            del self.table[group]
        return True

    def _track(self, group: str, conn: RemotingConnection) -> None:
        groups = self._groups_of.get(conn)
        if groups is None:
            self._groups_of[conn] = {group: None}
        elif group not in groups:
            groups[group] = None

    def do_channel_close_event(self, conn: RemotingConnection) -> list[str]:
        """Forget ``conn`` everywhere; returns the groups whose membership changed."""
        groups = self._groups_of.pop(conn, None)
        if groups is None:
            return []
        changed: list[str] = []
        for group in groups:
            entry = self.table.get(group)
            if entry is None:
                continue
            channels = self.channels_of(entry)
            if channels.pop(conn, None) is not None:
                changed.append(group)
                if not channels:
                    del self.table[group]
        return changed

    def scan_not_active_channel(self, now_ms: int) -> list[tuple[str, ClientChannelInfo]]:
        """Evict channels silent longer than the expiry; returns ``(group, channel)`` pairs."""
        expired: list[tuple[str, ClientChannelInfo]] = []
        limit = self.channel_expired_timeout_ms
        for group, entry in list(self.table.items()):
            channels = self.channels_of(entry)
            for conn, info in list(channels.items()):
                if now_ms - info.last_update_ms > limit:
                    del channels[conn]
                    expired.append((group, info))
            if not channels:
                del self.table[group]
        return expired


class ConsumerManager(GroupChannelTable[ConsumerGroupInfo]):
    @staticmethod
    def channels_of(entry: ConsumerGroupInfo) -> Channels:
        return entry.channels

    def get_consumer_group_info(self, group: str) -> ConsumerGroupInfo | None:
        return self.table.get(group)

    def find_subscription_data(self, group: str, topic: str) -> SubscriptionData | None:
        info = self.table.get(group)
        return info.find_subscription_data(topic) if info is not None else None

    def register_consumer(
        self,
        group: str,
        info: ClientChannelInfo,
        consume_type: ConsumeType,
        message_model: MessageModel,
        consume_from_where: ConsumeFromWhere,
        subs: Iterable[SubscriptionData],
    ) -> bool:
        """Register or refresh; True when the group's membership or topic set changed."""
        cgi = self.table.get(group)
        if cgi is None:
            cgi = ConsumerGroupInfo(group, consume_type, message_model, consume_from_where)
            self.table[group] = cgi
        self._track(group, info.conn)
        r1 = cgi.update_channel(info, consume_type, message_model, consume_from_where)
        r2 = cgi.update_subscription(subs, info.last_update_ms)
        return r1 or r2

    unregister_consumer = GroupChannelTable.unregister

    def query_topic_consume_by_who(self, topic: str) -> set[str]:
        return {g for g, cgi in self.table.items() if topic in cgi.subscription_table}


class ProducerManager(GroupChannelTable[Channels]):
    @staticmethod
    def channels_of(entry: Channels) -> Channels:
        return entry

    def register_producer(self, group: str, info: ClientChannelInfo) -> None:
        channels = self.table.setdefault(group, {})
        self._track(group, info.conn)
        old = channels.get(info.conn)
        if old is None or old.client_id != info.client_id:
            channels[info.conn] = info
        else:
            old.last_update_ms = info.last_update_ms

    unregister_producer = GroupChannelTable.unregister

    def get_channels(self, group: str) -> list[ClientChannelInfo]:
        return list(self.table.get(group, {}).values())

    def get_available_channel(self, group: str) -> ClientChannelInfo | None:
        """A live channel of ``group`` (for CHECK_TRANSACTION_STATE)."""
        for info in self.table.get(group, {}).values():
            if getattr(info.conn, "is_active", True):
                return info
        return None
