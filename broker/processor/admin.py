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
mutation is acknowledged. The stats manager the handlers read (``controller.broker_stats_manager``)
is the controller's (created here only for a controller without one); send, pull, send-back and
the schedule service feed it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pocketmq.broker.processor.admin_broker import BrokerAdmin
from pocketmq.broker.processor.admin_common import broker_stats_of
from pocketmq.broker.processor.admin_consumer import ConsumerAdmin
from pocketmq.broker.processor.admin_group import GroupAdmin
from pocketmq.broker.processor.admin_topic import TopicAdmin

if TYPE_CHECKING:
    from pocketmq.broker.controller import BrokerController

__all__ = ["BrokerAdmin", "ConsumerAdmin", "GroupAdmin", "TopicAdmin", "register_admin_processors"]

#: Controller attribute holding the admin processors by class name (tests and tools tune them,
#: e.g. ``ConsumerAdmin.call_client_timeout``).
ADMIN_ATTR = "admin_processors"


def register_admin_processors(controller: BrokerController) -> None:
    """Register every admin handler on the controller's servers (main and VIP port)."""
    broker_stats_of(controller)
    admins = (
        TopicAdmin(controller),
        GroupAdmin(controller),
        ConsumerAdmin(controller),
        BrokerAdmin(controller),
    )
    for admin in admins:
        admin.register()
    setattr(controller, ADMIN_ATTR, {type(a).__name__: a for a in admins})
