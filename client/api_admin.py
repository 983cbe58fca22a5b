"""Admin calls of :class:`pocketmq.client.api.MQClientAPI` (what ``mqadmin`` needs).

They share the SDK's request layer: the same connections, error registry and ACL hook.
JSON bodies come back parsed with the lenient fastjson reader (``Mapping``); MessageQueue-keyed
maps keep fastjson's object keys as ``FrozenDict`` (turn them into ``MessageQueue`` with
:meth:`MessageQueue.from_json`). Properties-text bodies come back as ``dict[str, str]``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson

from pocketmq.remoting.common import properties as java_properties
from pocketmq.remoting.protocol import fastjson
from pocketmq.remoting.protocol.codes import RequestCode
from pocketmq.remoting.protocol.command import RemotingCommand
from pocketmq.remoting.protocol.headers import (
    CloneGroupOffsetRequestHeader,
    ConsumeMessageDirectlyResultRequestHeader,
    CreateTopicRequestHeader,
    DeleteKVConfigRequestHeader,
    DeleteSubscriptionGroupRequestHeader,
    DeleteTopicFromNamesrvRequestHeader,
    DeleteTopicRequestHeader,
    GetConsumerConnectionListRequestHeader,
    GetConsumerRunningInfoRequestHeader,
    GetConsumeStatsRequestHeader,
    GetKVConfigRequestHeader,
    GetKVListByNamespaceRequestHeader,
    GetProducerConnectionListRequestHeader,
    GetTopicsByClusterRequestHeader,
    GetTopicStatsInfoRequestHeader,
    PutKVConfigRequestHeader,
    QueryConsumeQueueRequestHeader,
    QueryConsumeTimeSpanRequestHeader,
    QueryMessageRequestHeader,
    QueryTopicConsumeByWhoRequestHeader,
    ResetOffsetRequestHeader,
    WipeWritePermOfBrokerRequestHeader,
)
from pocketmq.remoting.protocol.message import MessageExt, decode_messages
from pocketmq.remoting.protocol.topics import DEFAULT_TOPIC, PermName


def _json(reply: RemotingCommand, what: str) -> Mapping[Any, Any]:
    return fastjson.decode_object(reply.body or b"{}", what)


class AdminCalls:
    """Mixin; the request layer methods are provided by ``MQClientAPI``."""

    async def invoke_checked(
        self, addr: str, code: int, ext: Mapping[str, str] | None = None, body: bytes | None = None,
        timeout: float | None = None,
    ) -> RemotingCommand:  # fmt: skip
        raise NotImplementedError

    async def invoke_namesrv_checked(
        self, code: int, ext: Mapping[str, str] | None = None, body: bytes | None = None,
        timeout: float | None = None, addr: str | None = None,
    ) -> RemotingCommand:  # fmt: skip
        raise NotImplementedError

    # ----------------------------------------------------------------------------- name server
    async def get_broker_cluster_info(self) -> Mapping[Any, Any]:
        return _json(await self.invoke_namesrv_checked(RequestCode.GET_BROKER_CLUSTER_INFO), "ClusterInfo")

    async def get_all_topic_list(self) -> list[str]:
        reply = await self.invoke_namesrv_checked(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER)
        return [str(t) for t in fastjson.get_list(_json(reply, "TopicList"), "topicList")]

    async def get_topics_by_cluster(self, cluster: str) -> list[str]:
        ext = GetTopicsByClusterRequestHeader(cluster=cluster).to_ext_fields()
        reply = await self.invoke_namesrv_checked(RequestCode.GET_TOPICS_BY_CLUSTER, ext)
        return [str(t) for t in fastjson.get_list(_json(reply, "TopicList"), "topicList")]

    async def delete_topic_in_namesrv(
        self, namesrv_addr: str, topic: str, cluster: str | None = None
    ) -> None:
        ext = DeleteTopicFromNamesrvRequestHeader(topic=topic, cluster_name=cluster).to_ext_fields()
        await self.invoke_namesrv_checked(RequestCode.DELETE_TOPIC_IN_NAMESRV, ext, addr=namesrv_addr)

    async def wipe_write_perm_of_broker(self, namesrv_addr: str, broker_name: str) -> int:
        ext = WipeWritePermOfBrokerRequestHeader(broker_name=broker_name).to_ext_fields()
        reply = await self.invoke_namesrv_checked(
            RequestCode.WIPE_WRITE_PERM_OF_BROKER, ext, addr=namesrv_addr
        )
        return int(reply.ext("wipeTopicCount") or 0)

    async def add_write_perm_of_broker(self, namesrv_addr: str, broker_name: str) -> int:
        ext = {"brokerName": broker_name}
        reply = await self.invoke_namesrv_checked(
            RequestCode.ADD_WRITE_PERM_OF_BROKER, ext, addr=namesrv_addr
        )
        return int(reply.ext("addTopicCount") or 0)

    async def put_kv_config(
        self, namespace: str, key: str, value: str, namesrv_addr: str | None = None
    ) -> None:
        ext = PutKVConfigRequestHeader(namespace=namespace, key=key, value=value).to_ext_fields()
        await self.invoke_namesrv_checked(RequestCode.PUT_KV_CONFIG, ext, addr=namesrv_addr)

    async def get_kv_config(self, namespace: str, key: str) -> str | None:
        ext = GetKVConfigRequestHeader(namespace=namespace, key=key).to_ext_fields()
        return (await self.invoke_namesrv_checked(RequestCode.GET_KV_CONFIG, ext)).ext("value")

    async def delete_kv_config(self, namespace: str, key: str, namesrv_addr: str | None = None) -> None:
        ext = DeleteKVConfigRequestHeader(namespace=namespace, key=key).to_ext_fields()
        await self.invoke_namesrv_checked(RequestCode.DELETE_KV_CONFIG, ext, addr=namesrv_addr)

    async def get_kv_list_by_namespace(self, namespace: str) -> dict[str, str]:
        ext = GetKVListByNamespaceRequestHeader(namespace=namespace).to_ext_fields()
        reply = await self.invoke_namesrv_checked(RequestCode.GET_KVLIST_BY_NAMESPACE, ext)
        return {str(k): str(v) for k, v in fastjson.get_dict(_json(reply, "KVTable"), "table").items()}

    async def get_namesrv_config(self, namesrv_addr: str) -> dict[str, str]:
        reply = await self.invoke_namesrv_checked(RequestCode.GET_NAMESRV_CONFIG, addr=namesrv_addr)
        return java_properties.loads((reply.body or b"").decode())

    async def update_namesrv_config(self, namesrv_addr: str, props: Mapping[str, str]) -> None:
        body = java_properties.dumps(dict(props)).encode()
        await self.invoke_namesrv_checked(RequestCode.UPDATE_NAMESRV_CONFIG, None, body, addr=namesrv_addr)

    # ---------------------------------------------------------------------------------- broker
    async def create_topic(
        self, addr: str, topic: str, *, read_queue_nums: int = 8, write_queue_nums: int = 8, perm: int = PermName.DEFAULT,
        order: bool = False, topic_filter_type: str = "SINGLE_TAG", default_topic: str = DEFAULT_TOPIC,
        topic_sys_flag: int | None = None,
    ) -> None:  # fmt: skip
        ext = CreateTopicRequestHeader(topic=topic, default_topic=default_topic, read_queue_nums=read_queue_nums,
            write_queue_nums=write_queue_nums, perm=perm, topic_filter_type=topic_filter_type,
            topic_sys_flag=topic_sys_flag, order=order,
        ).to_ext_fields()  # fmt: skip
        await self.invoke_checked(addr, RequestCode.UPDATE_AND_CREATE_TOPIC, ext)

    async def delete_topic_in_broker(self, addr: str, topic: str) -> None:
        ext = DeleteTopicRequestHeader(topic=topic).to_ext_fields()
        await self.invoke_checked(addr, RequestCode.DELETE_TOPIC_IN_BROKER, ext)

    async def get_all_topic_config(self, addr: str) -> Mapping[Any, Any]:
        return _json(
            await self.invoke_checked(addr, RequestCode.GET_ALL_TOPIC_CONFIG), "TopicConfigSerializeWrapper"
        )

    async def get_topic_stats_info(self, addr: str, topic: str) -> Mapping[Any, Any]:
        ext = GetTopicStatsInfoRequestHeader(topic=topic).to_ext_fields()
        return _json(
            await self.invoke_checked(addr, RequestCode.GET_TOPIC_STATS_INFO, ext), "TopicStatsTable"
        )

    async def get_consume_stats(self, addr: str, group: str, topic: str | None = None) -> Mapping[Any, Any]:
        ext = GetConsumeStatsRequestHeader(consumer_group=group, topic=topic).to_ext_fields()
        return _json(await self.invoke_checked(addr, RequestCode.GET_CONSUME_STATS, ext), "ConsumeStats")

    async def get_consumer_connection_list(self, addr: str, group: str) -> Mapping[Any, Any]:
        ext = GetConsumerConnectionListRequestHeader(consumer_group=group).to_ext_fields()
        reply = await self.invoke_checked(addr, RequestCode.GET_CONSUMER_CONNECTION_LIST, ext)
        return _json(reply, "ConsumerConnection")

    async def get_producer_connection_list(self, addr: str, group: str) -> Mapping[Any, Any]:
        ext = GetProducerConnectionListRequestHeader(producer_group=group).to_ext_fields()
        reply = await self.invoke_checked(addr, RequestCode.GET_PRODUCER_CONNECTION_LIST, ext)
        return _json(reply, "ProducerConnection")

    async def get_broker_runtime_info(self, addr: str) -> dict[str, str]:
        obj = _json(await self.invoke_checked(addr, RequestCode.GET_BROKER_RUNTIME_INFO), "KVTable")
        return {str(k): str(v) for k, v in fastjson.get_dict(obj, "table").items()}

    async def get_broker_config(self, addr: str) -> dict[str, str]:
        reply = await self.invoke_checked(addr, RequestCode.GET_BROKER_CONFIG)
        return java_properties.loads((reply.body or b"").decode())

    async def update_broker_config(self, addr: str, props: Mapping[str, str]) -> None:
        body = java_properties.dumps(dict(props)).encode()
        await self.invoke_checked(addr, RequestCode.UPDATE_BROKER_CONFIG, None, body)

    async def create_subscription_group(self, addr: str, config: Mapping[str, Any]) -> None:
        """UPDATE_AND_CREATE_SUBSCRIPTIONGROUP with a SubscriptionGroupConfig JSON object."""
        await self.invoke_checked(
            addr, RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, None, orjson.dumps(dict(config))
        )

    async def delete_subscription_group(self, addr: str, group: str, remove_offset: bool = False) -> None:
        ext = DeleteSubscriptionGroupRequestHeader(
            group_name=group, remove_offset=remove_offset
        ).to_ext_fields()
        await self.invoke_checked(addr, RequestCode.DELETE_SUBSCRIPTIONGROUP, ext)

    async def get_all_subscription_group(self, addr: str) -> Mapping[Any, Any]:
        reply = await self.invoke_checked(addr, RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG)
        return _json(reply, "SubscriptionGroupWrapper")

    async def invoke_broker_to_reset_offset(
        self, addr: str, topic: str, group: str, timestamp: int, is_force: bool = True
    ) -> Mapping[Any, Any]:
        ext = ResetOffsetRequestHeader(topic=topic, group=group, timestamp=timestamp, is_force=is_force)
        reply = await self.invoke_checked(
            addr, RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, ext.to_ext_fields()
        )
        return _json(reply, "ResetOffsetBody")

    async def get_consumer_running_info(
        self, addr: str, group: str, client_id: str, jstack: bool = False
    ) -> Mapping[Any, Any]:
        ext = GetConsumerRunningInfoRequestHeader(
            consumer_group=group,
            client_id=client_id,
            jstack_enable=jstack,
        )
        reply = await self.invoke_checked(
            addr, RequestCode.GET_CONSUMER_RUNNING_INFO, ext.to_ext_fields(), timeout=10.0
        )
        return _json(reply, "ConsumerRunningInfo")

    async def consume_message_directly(
        self, addr: str, group: str, client_id: str | None, msg_id: str, broker_name: str | None = None
    ) -> Mapping[Any, Any]:
        ext = ConsumeMessageDirectlyResultRequestHeader(
            consumer_group=group,
            client_id=client_id,
            msg_id=msg_id,
            broker_name=broker_name,
        ).to_ext_fields()
        reply = await self.invoke_checked(addr, RequestCode.CONSUME_MESSAGE_DIRECTLY, ext, timeout=10.0)
        return _json(reply, "ConsumeMessageDirectlyResult")

    async def query_topic_consume_by_who(self, addr: str, topic: str) -> list[str]:
        ext = QueryTopicConsumeByWhoRequestHeader(topic=topic).to_ext_fields()
        reply = await self.invoke_checked(addr, RequestCode.QUERY_TOPIC_CONSUME_BY_WHO, ext)
        return [str(g) for g in fastjson.get_list(_json(reply, "GroupList"), "groupList")]

    async def query_consume_time_span(self, addr: str, topic: str, group: str) -> list[Any]:
        ext = QueryConsumeTimeSpanRequestHeader(topic=topic, group=group).to_ext_fields()
        reply = await self.invoke_checked(addr, RequestCode.QUERY_CONSUME_TIME_SPAN, ext)
        return fastjson.get_list(_json(reply, "QueryConsumeTimeSpanBody"), "consumeTimeSpanSet")

    async def clone_group_offset(
        self, addr: str, src: str, dest: str, topic: str | None, offline: bool
    ) -> None:
        ext = CloneGroupOffsetRequestHeader(src_group=src, dest_group=dest, topic=topic, offline=offline)
        await self.invoke_checked(addr, RequestCode.CLONE_GROUP_OFFSET, ext.to_ext_fields())

    async def query_consume_queue(
        self, addr: str, topic: str, queue_id: int, index: int, count: int, group: str | None = None
    ) -> Mapping[Any, Any]:
        ext = QueryConsumeQueueRequestHeader(
            topic=topic,
            queue_id=queue_id,
            index=index,
            count=count,
            consumer_group=group,
        ).to_ext_fields()
        return _json(
            await self.invoke_checked(addr, RequestCode.QUERY_CONSUME_QUEUE, ext),
            "QueryConsumeQueueResponseBody",
        )

    async def query_message(
        self,
        addr: str,
        topic: str,
        key: str,
        max_num: int,
        begin_ms: int,
        end_ms: int,
        *,
        unique_key: bool = False,
    ) -> list[MessageExt]:
        """QUERY_MESSAGE by key (or by UNIQ_KEY with ``unique_key``); [] when none is found."""
        ext = QueryMessageRequestHeader(
            topic=topic,
            key=key,
            max_num=max_num,
            begin_timestamp=begin_ms,
            end_timestamp=end_ms,
        ).to_ext_fields()
        if unique_key:
            ext["_UNIQUE_KEY_QUERY"] = "true"
        from pocketmq.remoting.protocol.errors import QueryNotFoundError

        try:
            reply = await self.invoke_checked(addr, RequestCode.QUERY_MESSAGE, ext, timeout=10.0)
        except QueryNotFoundError:
            return []
        return decode_messages(reply.body or b"")

    async def get_system_topic_list_from_broker(self, addr: str) -> list[str]:
        reply = await self.invoke_checked(addr, RequestCode.GET_SYSTEM_TOPIC_LIST_FROM_BROKER)
        return [str(t) for t in fastjson.get_list(_json(reply, "TopicList"), "topicList")]
