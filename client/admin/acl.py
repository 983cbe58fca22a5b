"""ACL administration (RocketMQ 4.9 request codes 50-54), a mixin of :class:`~.admin.MQAdmin`.

Every call goes to the broker addresses given (``mqadmin`` resolves ``-b``/``-c`` with
``targets``). The broker never returns secret keys: :meth:`AclOps.acl_config` shows ``******``.
"""

from __future__ import annotations

from typing import Any

from pocketmq.client.admin.base import AdminBase
from pocketmq.remoting.protocol import fastjson
from pocketmq.remoting.protocol.acl import (
    CreateAccessConfigRequestHeader,
    DeleteAccessConfigRequestHeader,
    GetBrokerAclConfigResponseHeader,
    UpdateGlobalWhiteAddrsConfigRequestHeader,
)
from pocketmq.remoting.protocol.codes import RequestCode

__all__ = ["AclOps"]


class AclOps(AdminBase):
    async def update_acl_config(
        self,
        addr: str,
        access_key: str,
        *,
        secret_key: str | None = None,
        white_remote_address: str | None = None,
        admin: bool = False,
        default_topic_perm: str | None = None,
        default_group_perm: str | None = None,
        topic_perms: list[str] | None = None,
        group_perms: list[str] | None = None,
    ) -> None:
        """UPDATE_AND_CREATE_ACL_CONFIG: create or update one account (None keeps the broker's value).

        Raises: ResponseError (209 with the broker's reason).
        """
        h = CreateAccessConfigRequestHeader(
            access_key=access_key,
            secret_key=secret_key,
            white_remote_address=white_remote_address,
            admin=admin,
            default_topic_perm=default_topic_perm,
            default_group_perm=default_group_perm,
            topic_perms=None if topic_perms is None else ",".join(topic_perms),
            group_perms=None if group_perms is None else ",".join(group_perms),
        )
        await self.api.invoke_checked(addr, RequestCode.UPDATE_AND_CREATE_ACL_CONFIG, h.to_ext_fields())

    async def delete_acl_config(self, addr: str, access_key: str) -> None:
        """DELETE_ACL_CONFIG. Raises: ResponseError (210: no such account)."""
        h = DeleteAccessConfigRequestHeader(access_key=access_key)
        await self.api.invoke_checked(addr, RequestCode.DELETE_ACL_CONFIG, h.to_ext_fields())

    async def update_global_white_addrs(
        self, addr: str, addresses: list[str], acl_file: str | None = None
    ) -> None:
        """UPDATE_GLOBAL_WHITE_ADDRS_CONFIG (default file: the broker's plain_acl.yml).

        Raises: ResponseError (211 with the broker's reason).
        """
        h = UpdateGlobalWhiteAddrsConfigRequestHeader(
            global_white_addrs=",".join(addresses), acl_file_full_path=acl_file or ""
        )
        await self.api.invoke_checked(addr, RequestCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG, h.to_ext_fields())

    async def acl_config_version(self, addr: str) -> dict[str, Any]:
        """GET_BROKER_CLUSTER_ACL_INFO: ``{clusterName, brokerName, brokerAddr, version, files}``
        where ``files`` maps each ACL file to ``{counter, timestamp}``."""
        reply = await self.api.invoke_checked(addr, RequestCode.GET_BROKER_CLUSTER_ACL_INFO)
        h = GetBrokerAclConfigResponseHeader.from_ext_fields(reply.ext_fields)
        files = fastjson.decode_object(h.all_acl_file_version or "{}", "allAclFileVersion")
        return {
            "clusterName": h.cluster_name,
            "brokerName": h.broker_name,
            "brokerAddr": h.broker_addr,
            "version": fastjson.decode_object(h.version, "version"),
            "files": {
                path: {"counter": int(v.get("counter", 0)), "timestamp": int(v.get("timestamp", 0))}
                for path, v in files.items()
            },
        }

    async def acl_config(self, addr: str) -> dict[str, Any]:
        """GET_BROKER_CLUSTER_ACL_CONFIG: ``{globalWhiteAddrs, plainAccessConfigs}`` (secrets masked)."""
        reply = await self.api.invoke_checked(addr, RequestCode.GET_BROKER_CLUSTER_ACL_CONFIG)
        return dict(fastjson.decode_object(reply.body or b"{}", "GetBrokerClusterAclConfigResponseBody"))
