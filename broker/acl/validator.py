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
from binascii import b2a_base64 as _b64
from collections.abc import Mapping
from hmac import compare_digest as _compare_digest
from typing import Any, NoReturn

from pocketmq.broker.acl.address import NO_ADDRESS, peer_address
from pocketmq.broker.acl.decision import MEMO_MAX, Decision, Memo, decide, remembered
from pocketmq.broker.acl.manager import PlainAclManager
from pocketmq.broker.acl.rules import Account, AclRules
from pocketmq.remoting.protocol.acl import ACCESS_KEY, SIGNATURE, signed_text
from pocketmq.remoting.protocol.codes import RequestCode, code_name
from pocketmq.remoting.protocol.command import RemotingCommand
from pocketmq.remoting.protocol.errors import RemoteSystemError
from pocketmq.remoting.protocol.topics import RETRY_GROUP_TOPIC_PREFIX

__all__ = ["ACL_EXCEPTION", "AclDenied", "AclValidator"]

audit = logging.getLogger("pocketmq.broker.acl.audit")

#: The Java exception class RocketMQ's remark starts with (clients and scripts match on it).
ACL_EXCEPTION = "org.apache.rocketmq.acl.common.AclException"


class AclDenied(RemoteSystemError):
    """An ACL denial (reply code SYSTEM_ERROR, as RocketMQ)."""

    _register = False


_SEND_V2 = int(RequestCode.SEND_MESSAGE_V2)


class AclValidator:
    """The decision table (:func:`~pocketmq.broker.acl.decision.decide`) on every request.

    The common request (no global white list, a known account without a white list, a good
    signature) skips the steps that cannot apply, the peer-address parse and the generic call: per
    request this is only the HMAC, one dict lookup for the account and one for the remembered
    authorization (a send's by its topic name alone: no key tuple to build, hash and compare).
    Everything else (a white list, a bad or missing signature, an unknown account)
    goes through ``decide`` itself, so the table stays the single source of every outcome.
    """

    def __init__(self, manager: PlainAclManager) -> None:
        self.manager = manager
        #: Requests denied so far (tests and stats).
        self.denied = 0
        #: the rules ``_memo`` and ``_direct`` were filled under: a reload (a new rules object)
        #: empties the one and rebuilds the other
        self._rules: AclRules | None = None
        self._memo: Memo = {}
        #: access key → (account, its SEND_MESSAGE_V2 authorizations by topic) for the accounts
        #: steps 1 and 4 (white lists) cannot allow without a signature: none when a global white
        #: list exists (every request checks the peer first). A send to a topic that is not a
        #: ``%RETRY%`` one needs that topic only (decision.required_resources), hence the topic key.
        #: The account's HMAC key states (``Signer.inner``/``outer``) ride along.
        self._direct: Mapping[str, tuple[Account, dict[str, Decision], Any, Any]] = {}

    def _use(self, rules: AclRules) -> None:
        self._rules, self._memo = rules, {}
        self._direct = (
            {}
            if rules.global_white
            else {
                ak: (a, {}, a.signer.inner, a.signer.outer)
                for ak, a in rules.accounts.items()
                if a.white is NO_ADDRESS
            }
        )

    def before_request(self, remote_addr: str, request: RemotingCommand) -> None:
        rules = self.manager.rules
        if rules is not self._rules:
            self._use(rules)
        ext = request.ext_fields
        if ext is not None:
            direct = self._direct.get(ext.get(ACCESS_KEY))  # type: ignore[arg-type]
            signature = ext.get(SIGNATURE)
            if direct is not None and signature:
                account, sends, inner, outer = direct
                body = request.body
                # inline of Signer.matches (one Python frame instead of three per request)
                inner = inner.copy()
                inner.update(signed_text(ext).encode())
                if body:
                    inner.update(body)
                outer = outer.copy()
                outer.update(inner.digest())
                if _compare_digest(
                    _b64(outer.digest(), newline=False), signature.encode("utf-8", "surrogateescape")
                ):
                    code = request.code
                    if code == _SEND_V2:
                        topic = ext.get("b")
                        decision = sends.get(topic)  # type: ignore[arg-type]
                        if decision is None:
                            decision = remembered(self._memo, account, code, ext, body)
                            if topic is not None and not topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
                                if len(sends) >= MEMO_MAX:
                                    sends.clear()
                                sends[topic] = decision
                    else:
                        decision = remembered(self._memo, account, code, ext, body)
                    if decision.allowed:
                        return
                    self._deny(remote_addr, request, decision)
        # anything else: the whole table (it finds the same outcome for what is above, and the
        # reason of a denial)
        decision = decide(
            rules,
            peer=peer_address(remote_addr),
            code=request.code,
            ext=ext,
            body=request.body,
            memo=self._memo,
        )
        if not decision.allowed:
            self._deny(remote_addr, request, decision)

    def _deny(self, remote_addr: str, request: RemotingCommand, decision: Decision) -> NoReturn:
        """Count, audit and raise :class:`AclDenied`."""
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
