"""``AclValidator``: the server RPC hook that enforces the ACL on every request (``aclEnable=true``).

Installed on the broker's servers (main and VIP port) only when ACL is on, so a broker without
ACL runs no hook at all. A denial raises :class:`AclDenied`: the dispatcher answers SYSTEM_ERROR (1)
with the remark ``org.apache.rocketmq.acl.common.AclException: <reason>`` (RocketMQ 4.9's code and
text, plus the account and missing permission), the handler never runs, and one audit line is
logged on ``pocketmq.broker.acl.audit``::

    ACL denied: account=RocketMQ addr=10.0.0.7:51234 code=310(SEND_MESSAGE_V2) resource=topic:TopicA reason=...
"""

from __future__ import annotations

import logging

from pocketmq.broker.acl.address import peer_address
from pocketmq.broker.acl.decision import Memo, decide
from pocketmq.broker.acl.manager import PlainAclManager
from pocketmq.broker.acl.rules import AclRules
from pocketmq.remoting.protocol.codes import code_name
from pocketmq.remoting.protocol.command import RemotingCommand
from pocketmq.remoting.protocol.errors import RemoteSystemError

__all__ = ["ACL_EXCEPTION", "AclDenied", "AclValidator"]

audit = logging.getLogger("pocketmq.broker.acl.audit")

#: The Java exception class RocketMQ's remark starts with (clients and scripts match on it).
ACL_EXCEPTION = "org.apache.rocketmq.acl.common.AclException"


class AclDenied(RemoteSystemError):
    """An ACL denial (reply code SYSTEM_ERROR, as RocketMQ)."""

    _register = False


class AclValidator:
    def __init__(self, manager: PlainAclManager) -> None:
        self.manager = manager
        #: Requests denied so far (tests and stats).
        self.denied = 0
        #: the rules ``_memo`` was filled under: a reload (a new rules object) empties it
        self._rules: AclRules | None = None
        self._memo: Memo = {}

    def before_request(self, remote_addr: str, request: RemotingCommand) -> None:
        rules = self.manager.rules
        if rules is not self._rules:
            self._rules, self._memo = rules, {}
        decision = decide(
            rules,
            peer=peer_address(remote_addr),
            code=request.code,
            ext=request.ext_fields,
            body=request.body,
            memo=self._memo,
        )
        if decision.allowed:
            return
        self.denied += 1
        resource = decision.resource
        if resource is not None and resource.startswith("%RETRY%"):
            resource = "group:" + resource[7:]
        elif resource is not None:
            resource = "topic:" + resource
        audit.warning(
            "ACL denied: account=%s addr=%s code=%d(%s) resource=%s reason=%s",
            decision.account or "-", remote_addr, request.code, code_name(request.code, response=False),
            resource or "-", decision.reason,
        )  # fmt: skip
        raise AclDenied(f"{ACL_EXCEPTION}: {decision.reason}")

    def after_response(
        self, remote_addr: str, request: RemotingCommand, response: RemotingCommand | None
    ) -> None:
        return None
