"""Typed custom headers of RocketMQ 4.x requests and responses.

Field names on the wire are the Java field names (``wire(...)``); SEND_MESSAGE_V2 adds
single-letter names (``v2=``). Python attributes are snake_case. ``int32=True`` marks Java
``Integer``/``int`` fields (range-checked); other ints are Java ``Long``.
See :mod:`pocketmq.remoting.protocol.header_codec` for parsing rules.
"""

from __future__ import annotations

from pocketmq.remoting.protocol.header_codec import CommandHeader, header, wire

# ----------------------------------------------------------------------------- name server


@header
class PutKVConfigRequestHeader(CommandHeader):
    namespace: str = wire("namespace")
    key: str = wire("key")
    value: str = wire("value")


@header
class GetKVConfigRequestHeader(CommandHeader):
    namespace: str = wire("namespace")
    key: str = wire("key")


@header
class GetKVConfigResponseHeader(CommandHeader):
    value: str | None = wire("value", default=None)


@header
class DeleteKVConfigRequestHeader(CommandHeader):
    namespace: str = wire("namespace")
    key: str = wire("key")


@header
class GetKVListByNamespaceRequestHeader(CommandHeader):
    namespace: str = wire("namespace")


@header
class RegisterBrokerRequestHeader(CommandHeader):
    broker_name: str = wire("brokerName")
    broker_addr: str = wire("brokerAddr")
    cluster_name: str = wire("clusterName")
    ha_server_addr: str = wire("haServerAddr")
    broker_id: int = wire("brokerId")
    compressed: bool = wire("compressed", default=False)
    body_crc32: int = wire("bodyCrc32", default=0, int32=True)


@header
class RegisterBrokerResponseHeader(CommandHeader):
    ha_server_addr: str | None = wire("haServerAddr", default=None)
    master_addr: str | None = wire("masterAddr", default=None)


@header
class UnRegisterBrokerRequestHeader(CommandHeader):
    broker_name: str = wire("brokerName")
    broker_addr: str = wire("brokerAddr")
    cluster_name: str = wire("clusterName")
    broker_id: int = wire("brokerId")


@header
class QueryDataVersionRequestHeader(CommandHeader):
    broker_name: str = wire("brokerName")
    broker_addr: str = wire("brokerAddr")
    cluster_name: str = wire("clusterName")
    broker_id: int = wire("brokerId")


@header
class QueryDataVersionResponseHeader(CommandHeader):
    changed: bool | None = wire("changed", default=None)


@header
class GetRouteInfoRequestHeader(CommandHeader):
    topic: str = wire("topic")
    accept_standard_json_only: bool | None = wire("acceptStandardJsonOnly", default=None)


@header
class WipeWritePermOfBrokerRequestHeader(CommandHeader):
    broker_name: str = wire("brokerName")


@header
class WipeWritePermOfBrokerResponseHeader(CommandHeader):
    wipe_topic_count: int = wire("wipeTopicCount", int32=True)


@header
class AddWritePermOfBrokerRequestHeader(CommandHeader):
    broker_name: str = wire("brokerName")


@header
class AddWritePermOfBrokerResponseHeader(CommandHeader):
    add_topic_count: int = wire("addTopicCount", int32=True)


@header
class DeleteTopicFromNamesrvRequestHeader(CommandHeader):
    topic: str = wire("topic")
    cluster_name: str | None = wire("clusterName", default=None)


@header
class GetTopicsByClusterRequestHeader(CommandHeader):
    cluster: str = wire("cluster")


# ------------------------------------------------------------------------------ send / pull


@header
class SendMessageRequestHeader(CommandHeader):
    """SEND_MESSAGE (V1 names) and SEND_MESSAGE_V2 / SEND_BATCH_MESSAGE (short names)."""

    producer_group: str = wire("producerGroup", v2="a")
    topic: str = wire("topic", v2="b")
    default_topic: str = wire("defaultTopic", v2="c")
    default_topic_queue_nums: int = wire("defaultTopicQueueNums", v2="d", int32=True)
    queue_id: int = wire("queueId", v2="e", int32=True)
    sys_flag: int = wire("sysFlag", v2="f", int32=True)
    born_timestamp: int = wire("bornTimestamp", v2="g", big=True)
    flag: int = wire("flag", v2="h", int32=True)
    properties: str | None = wire("properties", v2="i", default=None)
    reconsume_times: int | None = wire("reconsumeTimes", v2="j", default=None, int32=True)
    unit_mode: bool = wire("unitMode", v2="k", default=False)
    max_reconsume_times: int | None = wire("maxReconsumeTimes", v2="l", default=None, int32=True)
    batch: bool = wire("batch", v2="m", default=False)
    bname: str | None = wire("bname", v2="n", default=None)


@header
class SendMessageResponseHeader(CommandHeader):
    msg_id: str = wire("msgId")
    queue_id: int = wire("queueId", int32=True)
    queue_offset: int = wire("queueOffset")
    transaction_id: str | None = wire("transactionId", default=None)


@header
class PullMessageRequestHeader(CommandHeader):
    consumer_group: str = wire("consumerGroup")
    topic: str = wire("topic")
    queue_id: int = wire("queueId", int32=True)
    queue_offset: int = wire("queueOffset")
    max_msg_nums: int = wire("maxMsgNums", int32=True)
    sys_flag: int = wire("sysFlag", int32=True)
    commit_offset: int = wire("commitOffset")
    suspend_timeout_millis: int = wire("suspendTimeoutMillis")
    subscription: str | None = wire("subscription", default=None)
    sub_version: int = wire("subVersion", default=0)
    expression_type: str | None = wire("expressionType", default=None)
    bname: str | None = wire("bname", default=None)


@header
class PullMessageResponseHeader(CommandHeader):
    suggest_which_broker_id: int = wire("suggestWhichBrokerId")
    next_begin_offset: int = wire("nextBeginOffset")
    min_offset: int = wire("minOffset")
    max_offset: int = wire("maxOffset")


@header
class ConsumerSendMsgBackRequestHeader(CommandHeader):
    offset: int = wire("offset")
    group: str = wire("group")
    delay_level: int = wire("delayLevel", int32=True)
    origin_msg_id: str | None = wire("originMsgId", default=None)
    origin_topic: str | None = wire("originTopic", default=None)
    unit_mode: bool = wire("unitMode", default=False)
    max_reconsume_times: int | None = wire("maxReconsumeTimes", default=None, int32=True)


@header
class EndTransactionRequestHeader(CommandHeader):
    producer_group: str = wire("producerGroup")
    tran_state_table_offset: int = wire("tranStateTableOffset")
    commit_log_offset: int = wire("commitLogOffset")
    commit_or_rollback: int = wire("commitOrRollback", int32=True)
    from_transaction_check: bool = wire("fromTransactionCheck", default=False)
    msg_id: str = wire("msgId")
    transaction_id: str | None = wire("transactionId", default=None)


@header
class CheckTransactionStateRequestHeader(CommandHeader):
    tran_state_table_offset: int = wire("tranStateTableOffset")
    commit_log_offset: int = wire("commitLogOffset")
    msg_id: str | None = wire("msgId", default=None)
    transaction_id: str | None = wire("transactionId", default=None)
    offset_msg_id: str | None = wire("offsetMsgId", default=None)


# ---------------------------------------------------------------------- offsets and queries


@header
class QueryMessageRequestHeader(CommandHeader):
    topic: str = wire("topic")
    key: str = wire("key")
    max_num: int = wire("maxNum", int32=True)
    begin_timestamp: int = wire("beginTimestamp")
    end_timestamp: int = wire("endTimestamp")


@header
class QueryMessageResponseHeader(CommandHeader):
    index_last_update_timestamp: int = wire("indexLastUpdateTimestamp")
    index_last_update_phyoffset: int = wire("indexLastUpdatePhyoffset")


@header
class ViewMessageRequestHeader(CommandHeader):
    offset: int = wire("offset")


@header
class QueryConsumerOffsetRequestHeader(CommandHeader):
    consumer_group: str = wire("consumerGroup")
    topic: str = wire("topic")
    queue_id: int = wire("queueId", int32=True)


@header
class UpdateConsumerOffsetRequestHeader(CommandHeader):
    consumer_group: str = wire("consumerGroup")
    topic: str = wire("topic")
    queue_id: int = wire("queueId", int32=True)
    commit_offset: int = wire("commitOffset")


@header
class OffsetResponseHeader(CommandHeader):
    """Reply of QUERY_CONSUMER_OFFSET, SEARCH_OFFSET_BY_TIMESTAMP, GET_MAX/MIN_OFFSET."""

    offset: int = wire("offset")


@header
class SearchOffsetRequestHeader(CommandHeader):
    topic: str = wire("topic")
    queue_id: int = wire("queueId", int32=True)
    timestamp: int = wire("timestamp")


@header
class GetMaxOffsetRequestHeader(CommandHeader):
    topic: str = wire("topic")
    queue_id: int = wire("queueId", int32=True)


@header
class GetMinOffsetRequestHeader(CommandHeader):
    topic: str = wire("topic")
    queue_id: int = wire("queueId", int32=True)


@header
class GetEarliestMsgStoretimeRequestHeader(CommandHeader):
    topic: str = wire("topic")
    queue_id: int = wire("queueId", int32=True)


@header
class GetEarliestMsgStoretimeResponseHeader(CommandHeader):
    timestamp: int = wire("timestamp")


# --------------------------------------------------------------------- clients and groups


@header
class UnregisterClientRequestHeader(CommandHeader):
    client_id: str = wire("clientID")
    producer_group: str | None = wire("producerGroup", default=None)
    consumer_group: str | None = wire("consumerGroup", default=None)


@header
class GetConsumerListByGroupRequestHeader(CommandHeader):
    consumer_group: str = wire("consumerGroup")


@header
class NotifyConsumerIdsChangedRequestHeader(CommandHeader):
    consumer_group: str = wire("consumerGroup")


@header
class GetConsumerConnectionListRequestHeader(CommandHeader):
    consumer_group: str = wire("consumerGroup")


@header
class GetProducerConnectionListRequestHeader(CommandHeader):
    producer_group: str = wire("producerGroup")


@header
class GetConsumeStatsRequestHeader(CommandHeader):
    consumer_group: str = wire("consumerGroup")
    topic: str | None = wire("topic", default=None)


@header
class DeleteSubscriptionGroupRequestHeader(CommandHeader):
    group_name: str = wire("groupName")
    remove_offset: bool = wire("removeOffset", default=False)


@header
class ResetOffsetRequestHeader(CommandHeader):
    """INVOKE_BROKER_TO_RESET_OFFSET (222) and RESET_CONSUMER_CLIENT_OFFSET (220)."""

    topic: str = wire("topic")
    group: str = wire("group")
    timestamp: int = wire("timestamp")
    is_force: bool = wire("isForce", default=False)


@header
class GetConsumerStatusRequestHeader(CommandHeader):
    topic: str = wire("topic")
    group: str = wire("group")
    client_addr: str | None = wire("clientAddr", default=None)


@header
class GetConsumerRunningInfoRequestHeader(CommandHeader):
    consumer_group: str = wire("consumerGroup")
    client_id: str = wire("clientId")
    jstack_enable: bool = wire("jstackEnable", default=False)


@header
class ConsumeMessageDirectlyResultRequestHeader(CommandHeader):
    consumer_group: str = wire("consumerGroup")
    client_id: str | None = wire("clientId", default=None)
    msg_id: str | None = wire("msgId", default=None)
    broker_name: str | None = wire("brokerName", default=None)


@header
class QueryTopicConsumeByWhoRequestHeader(CommandHeader):
    topic: str = wire("topic")


@header
class QueryConsumeTimeSpanRequestHeader(CommandHeader):
    topic: str = wire("topic")
    group: str = wire("group")


@header
class QueryCorrectionOffsetHeader(CommandHeader):
    filter_groups: str | None = wire("filterGroups", default=None)
    compare_group: str = wire("compareGroup")
    topic: str = wire("topic")


@header
class CloneGroupOffsetRequestHeader(CommandHeader):
    src_group: str = wire("srcGroup")
    dest_group: str = wire("destGroup")
    topic: str | None = wire("topic", default=None)
    offline: bool = wire("offline", default=False)


@header
class QueryConsumeQueueRequestHeader(CommandHeader):
    topic: str = wire("topic")
    queue_id: int = wire("queueId", int32=True)
    index: int = wire("index")
    count: int = wire("count", int32=True)
    consumer_group: str | None = wire("consumerGroup", default=None)


# --------------------------------------------------------------------------------- admin


@header
class CreateTopicRequestHeader(CommandHeader):
    topic: str = wire("topic")
    default_topic: str = wire("defaultTopic")
    read_queue_nums: int = wire("readQueueNums", int32=True)
    write_queue_nums: int = wire("writeQueueNums", int32=True)
    perm: int = wire("perm", int32=True)
    topic_filter_type: str = wire("topicFilterType", default="SINGLE_TAG")
    topic_sys_flag: int | None = wire("topicSysFlag", default=None, int32=True)
    order: bool = wire("order", default=False)


@header
class DeleteTopicRequestHeader(CommandHeader):
    topic: str = wire("topic")


@header
class GetTopicStatsInfoRequestHeader(CommandHeader):
    topic: str = wire("topic")


@header
class GetBrokerConfigResponseHeader(CommandHeader):
    version: str | None = wire("version", default=None)


@header
class ViewBrokerStatsDataRequestHeader(CommandHeader):
    stats_name: str = wire("statsName")
    stats_key: str = wire("statsKey")


@header
class GetConsumeStatsInBrokerHeader(CommandHeader):
    is_order: bool = wire("isOrder", default=False)


@header
class ResumeCheckHalfMessageRequestHeader(CommandHeader):
    msg_id: str | None = wire("msgId", default=None)


# ------------------------------------------------------------------------------ request-reply


@header
class ReplyMessageRequestHeader(CommandHeader):
    """PUSH_REPLY_MESSAGE_TO_CLIENT (326): the broker hands a reply to the requesting client;
    the body is the reply's body, ``properties`` carries CORRELATION_ID and the rest."""

    producer_group: str = wire("producerGroup")
    topic: str = wire("topic")
    default_topic: str = wire("defaultTopic")
    default_topic_queue_nums: int = wire("defaultTopicQueueNums", int32=True)
    queue_id: int = wire("queueId", int32=True)
    sys_flag: int = wire("sysFlag", int32=True)
    born_timestamp: int = wire("bornTimestamp")
    flag: int = wire("flag", int32=True)
    properties: str | None = wire("properties", default=None)
    reconsume_times: int | None = wire("reconsumeTimes", default=None, int32=True)
    unit_mode: bool = wire("unitMode", default=False)
    born_host: str = wire("bornHost", default="")
    store_host: str = wire("storeHost", default="")
    store_timestamp: int = wire("storeTimestamp", default=0)
