"""The broker's admin requests (what ``mqadmin``, the dashboard and rocketmq-exporter send).

Split by subject (each module's docstring tables its codes, checks, codes and remarks):

=====================  ==========================================================================
module                 requests
=====================  ==========================================================================
``admin_topic``        UPDATE_AND_CREATE_TOPIC, DELETE_TOPIC_IN_BROKER, GET_ALL_TOPIC_CONFIG,
                       GET_TOPIC_CONFIG (5.x), GET_TOPIC_STATS_INFO, QUERY_TOPIC_CONSUME_BY_WHO,
                       GET_SYSTEM_TOPIC_LIST_FROM_BROKER, CLEAN_EXPIRED_CONSUMEQUEUE,
                       CLEAN_UNUSED_TOPIC, DELETE_EXPIRED_COMMITLOG
``admin_group``        UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, GET_ALL_SUBSCRIPTIONGROUP_CONFIG,
                       DELETE_SUBSCRIPTIONGROUP, GET_CONSUMER_CONNECTION_LIST,
                       GET_PRODUCER_CONNECTION_LIST, GET_ALL_CONSUMER_OFFSET, GET_ALL_DELAY_OFFSET,
                       CLONE_GROUP_OFFSET
``admin_consumer``     GET_CONSUME_STATS, GET_BROKER_CONSUME_STATS, QUERY_CONSUME_TIME_SPAN,
                       QUERY_CORRECTION_OFFSET, INVOKE_BROKER_TO_RESET_OFFSET,
                       GET_CONSUMER_RUNNING_INFO, CONSUME_MESSAGE_DIRECTLY, QUERY_CONSUME_QUEUE
``admin_broker``       GET_BROKER_RUNTIME_INFO, GET_BROKER_CONFIG, UPDATE_BROKER_CONFIG,
                       VIEW_BROKER_STATS_DATA
=====================  ==========================================================================

Common rules: a missing or unparsable header field is SYSTEM_ERROR naming the field; topic and
subscription-group mutations on a slave are SYSTEM_ERROR with Java's remark; topics.json and
subscriptionGroup.json are written atomically (temp file, fsync, rename, ``.bak``) before a
mutation is acknowledged. Each group is built by the controller with exactly its collaborators;
the stats manager they read is the controller's one, which send, pull, send-back and the schedule
service feed.
"""

from __future__ import annotations

from pocketmq.broker.processor.admin_broker import BrokerAdmin
from pocketmq.broker.processor.admin_consumer import ConsumerAdmin
from pocketmq.broker.processor.admin_group import GroupAdmin
from pocketmq.broker.processor.admin_topic import TopicAdmin

__all__ = ["BrokerAdmin", "ConsumerAdmin", "GroupAdmin", "TopicAdmin"]
