"""``SubscriptionGroupManager``: consumer group configs (``config/subscriptionGroup.json``).

Built-in groups as a Java broker: ``TOOLS_CONSUMER``, ``FILTERSRV_CONSUMER``,
``SELF_TEST_C_GROUP``, ``CID_ONS-HTTP-PROXY``, ``CID_ONSAPI_PULL``, ``CID_ONSAPI_PERMISSION``,
``CID_ONSAPI_OWNER``. An unknown group is created with RocketMQ's defaults on first
use when ``autoCreateSubscriptionGroup`` is on (always for ``CID_RMQ_SYS_*`` groups).
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from pocketmq.broker.config_file import VersionedConfigFile
from pocketmq.remoting.protocol.bodies import SubscriptionGroupConfig, SubscriptionGroupWrapper
from pocketmq.remoting.protocol.route import (
    CID_ONSAPI_OWNER_GROUP,
    CID_ONSAPI_PERMISSION_GROUP,
    CID_ONSAPI_PULL_GROUP,
    FILTERSRV_CONSUMER_GROUP,
    ONS_HTTP_PROXY_GROUP,
    SELF_TEST_CONSUMER_GROUP,
    TOOLS_CONSUMER_GROUP,
    is_sys_consumer_group,
)

logger = logging.getLogger(__name__)

BUILTIN_GROUPS = (
    TOOLS_CONSUMER_GROUP,
    FILTERSRV_CONSUMER_GROUP,
    SELF_TEST_CONSUMER_GROUP,
    ONS_HTTP_PROXY_GROUP,
    CID_ONSAPI_PULL_GROUP,
    CID_ONSAPI_PERMISSION_GROUP,
    CID_ONSAPI_OWNER_GROUP,
)


class SubscriptionGroupManager(VersionedConfigFile[SubscriptionGroupConfig, SubscriptionGroupWrapper]):
    file_name = "subscriptionGroup.json"

    def __init__(
        self,
        config_dir: str | None,
        *,
        now_ms: Callable[[], int],
        auto_create_subscription_group: bool = True,
        fsync: bool = True,
    ) -> None:
        #: the table (the base's ``table``)
        self.subscription_group_table: dict[str, SubscriptionGroupConfig] = {
            g: SubscriptionGroupConfig(g) for g in BUILTIN_GROUPS
        }
        super().__init__(config_dir, self.subscription_group_table, now_ms=now_ms, fsync=fsync)
        self.auto_create = auto_create_subscription_group

    wrapper_type = SubscriptionGroupWrapper
    table_key = "subscriptionGroupTable"

    @staticmethod
    def unwrap(wrapper: SubscriptionGroupWrapper) -> dict[str, SubscriptionGroupConfig]:
        return wrapper.subscription_group_table

    def find_subscription_group_config(self, group: str) -> SubscriptionGroupConfig | None:
        """The group's config; auto-created (written at once: :meth:`persist_soon`) when allowed, else None."""
        sgc = self.subscription_group_table.get(group)
        if sgc is None and (self.auto_create or is_sys_consumer_group(group)):
            sgc = SubscriptionGroupConfig(group)
            self.subscription_group_table[group] = sgc
            logger.info("auto-created subscription group %s", group)
            self.bump_version()
            self.persist_soon()
        return sgc

    def contains(self, group: str) -> bool:
        return group in self.subscription_group_table

    def update_subscription_group_config(self, sgc: SubscriptionGroupConfig) -> None:
        old = self.subscription_group_table.get(sgc.group_name)
        self.subscription_group_table[sgc.group_name] = sgc
        logger.info("subscription group %s %s: %s", sgc.group_name, "updated" if old else "created", sgc)
        self.bump_version()

    def delete_subscription_group_config(self, group: str) -> SubscriptionGroupConfig | None:
        sgc = self.pop(group)
        if sgc is not None:
            logger.info("deleted subscription group %s", group)
        return sgc
