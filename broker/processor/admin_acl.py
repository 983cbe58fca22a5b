"""ACL admin: codes 50-54 (RocketMQ 4.9 ``AdminBrokerProcessor``).

=====  ==================================  =============================================================
code   request                             behaviour
=====  ==================================  =============================================================
50     UPDATE_AND_CREATE_ACL_CONFIG        create or update an account (header fields; perms comma-
                                           separated) in its file, or ``plain_acl.yml`` when new; refused
                                           → 209 with the reason
51     DELETE_ACL_CONFIG                   remove an account; unknown → 210 ``The accesskey[<ak>]
                                           corresponding to accessConfig has been deleted failed.``
52     GET_BROKER_CLUSTER_ACL_INFO         header ``version`` (DataVersion JSON of ``plain_acl.yml``),
                                           ``allAclFileVersion`` (file → DataVersion), broker name/addr,
                                           cluster
53     UPDATE_GLOBAL_WHITE_ADDRS_CONFIG    replace a file's ``globalWhiteRemoteAddresses``; refused → 211
54     GET_BROKER_CLUSTER_ACL_CONFIG       body ``{globalWhiteAddrs, plainAccessConfigs}``; secret keys
                                           are masked (``******``): pocketmq never sends a secret back
=====  ==================================  =============================================================

With ``aclEnable=false`` every code answers its failure code (52 and 54: SYSTEM_ERROR) with
``ACL is not enabled on this broker (aclEnable=false)`` (RocketMQ fails with no remark, or no reply).
With ACL on, RocketMQ 4.9's admin-only code list does not include 50-54: any account with a valid
signature may call them. pocketmq adds them to the admin-only list (``decision.ADMIN_CODES``):
changing the ACL is an administrator's act (docs/acl.md).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pocketmq.broker.acl import AclConfigError, PlainAclManager
from pocketmq.broker.processor.admin_base import AdminBase, fail, ok
from pocketmq.remoting.protocol import fastjson
from pocketmq.remoting.protocol.acl import (
    CreateAccessConfigRequestHeader,
    DeleteAccessConfigRequestHeader,
    GetBrokerAclConfigResponseHeader,
    PlainAccessConfig,
    UpdateGlobalWhiteAddrsConfigRequestHeader,
    cluster_acl_config_body,
)
from pocketmq.remoting.protocol.codes import RequestCode, ResponseCode
from pocketmq.remoting.protocol.command import RemotingCommand

if TYPE_CHECKING:
    from pocketmq.remoting.transport.connection import RemotingConnection

logger = logging.getLogger("pocketmq.broker.processor.admin")

NOT_ENABLED = "ACL is not enabled on this broker (aclEnable=false)"


def _split(text: str | None) -> tuple[str, ...] | None:
    """RocketMQ ``UtilAll.split(s, ",")``: None stays None (keep what the file has)."""
    if text is None:
        return None
    return tuple(p.strip() for p in text.split(",") if p.strip())


@dataclass(eq=False, kw_only=True)
class AclAdmin(AdminBase):
    #: the broker's ACL rules, or None when ``aclEnable=false``
    acl: PlainAclManager | None

    HANDLERS = {
        RequestCode.UPDATE_AND_CREATE_ACL_CONFIG: "update_and_create_access_config",
        RequestCode.DELETE_ACL_CONFIG: "delete_access_config",
        RequestCode.GET_BROKER_CLUSTER_ACL_INFO: "get_broker_acl_config_version",
        RequestCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG: "update_global_white_addrs_config",
        RequestCode.GET_BROKER_CLUSTER_ACL_CONFIG: "get_broker_cluster_acl_config",
    }

    def update_and_create_access_config(
        self, conn: RemotingConnection, request: RemotingCommand
    ) -> RemotingCommand:
        code = ResponseCode.UPDATE_AND_CREATE_ACL_CONFIG_FAILED
        if self.acl is None:
            return fail(request, code, NOT_ENABLED)
        h = CreateAccessConfigRequestHeader.from_ext_fields(request.ext_fields)
        topic_perms, group_perms = _split(h.topic_perms), _split(h.group_perms)
        keep = frozenset(
            key
            for key, value in (
                ("whiteRemoteAddress", h.white_remote_address),
                ("defaultTopicPerm", h.default_topic_perm),
                ("defaultGroupPerm", h.default_group_perm),
                ("topicPerms", topic_perms),
                ("groupPerms", group_perms),
            )
            if value is None
        )
        cfg = PlainAccessConfig(
            access_key=h.access_key,
            secret_key=h.secret_key or "",
            white_remote_address=h.white_remote_address,
            admin=h.admin,
            default_topic_perm=h.default_topic_perm or None,
            default_group_perm=h.default_group_perm or None,
            topic_perms=topic_perms or (),
            group_perms=group_perms or (),
        )
        try:
            self.acl.update_account(cfg, keep_unset=keep)
        except (AclConfigError, OSError) as exc:
            logger.warning("updateAclConfig of %s from %s refused: %s", h.access_key, conn.remote_addr, exc)
            return fail(request, code, str(exc))
        logger.info("updateAclConfig of %s by %s", h.access_key, conn.remote_addr)
        return ok(request)

    def delete_access_config(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        code = ResponseCode.DELETE_ACL_CONFIG_FAILED
        if self.acl is None:
            return fail(request, code, NOT_ENABLED)
        h = DeleteAccessConfigRequestHeader.from_ext_fields(request.ext_fields)
        try:
            deleted = self.acl.delete_account(h.access_key)
        except (AclConfigError, OSError) as exc:
            return fail(request, code, str(exc))
        if not deleted:
            return fail(
                request,
                code,
                f"The accesskey[{h.access_key}] corresponding to accessConfig has been deleted failed.",
            )
        logger.info("deleteAclConfig of %s by %s", h.access_key, conn.remote_addr)
        return ok(request)

    def update_global_white_addrs_config(
        self, conn: RemotingConnection, request: RemotingCommand
    ) -> RemotingCommand:
        code = ResponseCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG_FAILED
        if self.acl is None:
            return fail(request, code, NOT_ENABLED)
        h = UpdateGlobalWhiteAddrsConfigRequestHeader.from_ext_fields(request.ext_fields)
        addrs = list(_split(h.global_white_addrs) or ())
        try:
            self.acl.update_global_white(addrs, h.acl_file_full_path or None)
        except (AclConfigError, OSError) as exc:
            return fail(request, code, str(exc))
        logger.info("updateGlobalWhiteAddr %s by %s", addrs, conn.remote_addr)
        return ok(request)

    def get_broker_acl_config_version(
        self, conn: RemotingConnection, request: RemotingCommand
    ) -> RemotingCommand:
        if self.acl is None:
            return fail(request, ResponseCode.SYSTEM_ERROR, NOT_ENABLED)
        cfg = self.state.config
        versions = {path: v.to_json() for path, v in self.acl.rules.versions.items()}
        h = GetBrokerAclConfigResponseHeader(
            version=fastjson.dumps(self.acl.default_version().to_json()),
            all_acl_file_version=fastjson.dumps(versions),
            broker_name=cfg.broker_name,
            broker_addr=self.state.broker_addr,
            cluster_name=cfg.broker_cluster_name,
        )
        return ok(request, ext=h.to_ext_fields())

    def get_broker_cluster_acl_config(
        self, conn: RemotingConnection, request: RemotingCommand
    ) -> RemotingCommand:
        if self.acl is None:
            return fail(request, ResponseCode.SYSTEM_ERROR, NOT_ENABLED)
        white, accounts = self.acl.all_config()
        return ok(request, fastjson.dumps(cluster_acl_config_body(white, accounts)).encode())
