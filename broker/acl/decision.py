"""The ACL decision table (RocketMQ 4.9 ``PlainAccessValidator`` + ``PlainPermissionManager.validate``).

Pure: a request's code, ext fields, body and peer address plus an :class:`AclRules` → a
:class:`Decision`. No sockets, no files; tested as a table.

Resources a request needs (:func:`required_resources`; groups are their ``%RETRY%<group>`` topic):

=================================  ===========================================================
request                            resources
=================================  ===========================================================
SEND_MESSAGE (10)                  ``topic``:PUB, or for a ``%RETRY%`` topic ``%RETRY%<group>``:SUB
SEND_MESSAGE_V2 (310)              ``b``:PUB, or for a ``%RETRY%`` topic ``%RETRY%<a>``:SUB
CONSUMER_SEND_MSG_BACK (36)        ``%RETRY%<group>``:SUB
PULL_MESSAGE (11)                  ``topic``:SUB and ``%RETRY%<consumerGroup>``:SUB
QUERY_MESSAGE (12)                 ``topic``:SUB
HEART_BEAT (34)                    per consumer group ``%RETRY%<group>``:SUB, each subscribed topic:SUB
UNREGISTER_CLIENT (35),            ``%RETRY%<consumerGroup>``:SUB
GET_CONSUMER_LIST_BY_GROUP (38)
UPDATE_CONSUMER_OFFSET (15)        ``%RETRY%<consumerGroup>``:SUB and ``topic``:SUB
anything else                      none (the signature alone), e.g. SEND_BATCH_MESSAGE (320)
=================================  ===========================================================

Decision order (the first row that applies decides):

====  =======================================================  =========================================
step  condition                                                outcome
====  =======================================================  =========================================
1     peer matches a ``globalWhiteRemoteAddresses`` entry      allow
2     no ``AccessKey`` ext field                               deny "No accessKey is configured"
3     unknown access key                                       deny "No acl config for <ak>"
4     peer matches the account's ``whiteRemoteAddress``        allow (no signature needed)
5     ``Signature`` is not the request's (constant time)       deny "Check signature failed for accessKey=<ak>"
6     resources include ``RMQ_SYS_TRACE_TOPIC``:PUB            allow (message trace)
7     admin request code, account not admin                    deny "Need admin permission for request code=<c>, but accessKey=<ak> is not"
8     admin account without explicit perms                     allow
9     per resource: explicit perm, else the default            deny "No default permission for topic:<t>" /
      topic/group perm, must grant what is needed              "... group:<g>" (+ account and needed perm)
10    otherwise                                                allow
====  =======================================================  =========================================

A body that cannot be parsed (HEART_BEAT) denies with the parse error, as RocketMQ's
``AclException(t.getMessage())``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from pocketmq.broker.acl.address import NO_ADDRESS, Address
from pocketmq.broker.acl.rules import PUB, SUB, Account, AclRules, check_permission, perm_name
from pocketmq.remoting.protocol.acl import ACCESS_KEY, SIGNATURE
from pocketmq.remoting.protocol.codes import RequestCode
from pocketmq.remoting.protocol.fastjson import BodyFormatError
from pocketmq.remoting.protocol.heartbeat import HeartbeatData
from pocketmq.remoting.protocol.topics import RETRY_GROUP_TOPIC_PREFIX, RMQ_SYS_TRACE_TOPIC

__all__ = [
    "ADMIN_CODES", "MEMO_FIELDS", "Decision", "Memo", "authorize", "decide", "memo_key", "remembered",
    "required_resources",
]  # fmt: skip

#: Request codes only an ``admin: true`` account may send: RocketMQ's ``Permission.ADMIN_CODE``
#: plus, unlike RocketMQ 4.9, the ACL writes and the account listing (50, 51, 53, 54), so that a
#: normal account cannot make itself an administrator.
ADMIN_CODES = frozenset(
    {
        int(RequestCode.UPDATE_AND_CREATE_TOPIC),
        int(RequestCode.UPDATE_BROKER_CONFIG),
        int(RequestCode.DELETE_TOPIC_IN_BROKER),
        int(RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP),
        int(RequestCode.DELETE_SUBSCRIPTIONGROUP),
        int(RequestCode.UPDATE_AND_CREATE_ACL_CONFIG),
        int(RequestCode.DELETE_ACL_CONFIG),
        int(RequestCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG),
        int(RequestCode.GET_BROKER_CLUSTER_ACL_CONFIG),
    }
)

_SEND, _SEND_V2 = int(RequestCode.SEND_MESSAGE), int(RequestCode.SEND_MESSAGE_V2)
_PULL, _QUERY = int(RequestCode.PULL_MESSAGE), int(RequestCode.QUERY_MESSAGE)
_BACK, _HEARTBEAT = int(RequestCode.CONSUMER_SEND_MSG_BACK), int(RequestCode.HEART_BEAT)
_GROUP_ONLY = frozenset({int(RequestCode.UNREGISTER_CLIENT), int(RequestCode.GET_CONSUMER_LIST_BY_GROUP)})
_OFFSET = int(RequestCode.UPDATE_CONSUMER_OFFSET)


@dataclass(frozen=True, slots=True)
class Decision:
    """``allowed``, and for a denial the ``reason`` (RocketMQ's text) and the ``resource`` at fault."""

    allowed: bool
    reason: str = ""
    account: str | None = None
    resource: str | None = None


ALLOW = Decision(True)


def _retry(group: str | None) -> str | None:
    return None if group is None else RETRY_GROUP_TOPIC_PREFIX + group


def required_resources(code: int, ext: Mapping[str, str], body: bytes | None) -> dict[str, int]:
    """The resources ``code`` needs (the table in the module docstring); absent fields are skipped.

    Raises:
        BodyFormatError: a HEART_BEAT body that is not a heartbeat.
    """
    if code in (_SEND_V2, _SEND):  # the common case first
        topic = ext.get("b" if code == _SEND_V2 else "topic")
        if topic is None:
            return {}
        if not topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
            return {topic: PUB}
        group = ext.get("a" if code == _SEND_V2 else "group")
        return {} if group is None else {RETRY_GROUP_TOPIC_PREFIX + group: SUB}
    pairs: list[tuple[str | None, int]] = []
    if code == _PULL:
        pairs = [(ext.get("topic"), SUB), (_retry(ext.get("consumerGroup")), SUB)]
    elif code == _BACK:
        pairs = [(_retry(ext.get("group")), SUB)]
    elif code == _QUERY:
        pairs = [(ext.get("topic"), SUB)]
    elif code == _HEARTBEAT:
        heartbeat = HeartbeatData.decode(body or b"")
        for consumer in heartbeat.consumer_data_set:
            pairs.append((_retry(consumer.group_name), SUB))
            pairs.extend((sub.topic, SUB) for sub in consumer.subscription_data_set)
    elif code in _GROUP_ONLY:
        pairs = [(_retry(ext.get("consumerGroup")), SUB)]
    elif code == _OFFSET:
        pairs = [(_retry(ext.get("consumerGroup")), SUB), (ext.get("topic"), SUB)]
    return {resource: perm for resource, perm in pairs if resource is not None}


def _resource_text(resource: str) -> str:
    if resource.startswith(RETRY_GROUP_TOPIC_PREFIX):
        return "group:" + resource[len(RETRY_GROUP_TOPIC_PREFIX) :]
    return "topic:" + resource


#: request code → the ext fields that, with the code and the account, fix the resources it needs
#: (:func:`required_resources`), so its authorization can be remembered (:func:`decide`'s
#: ``memo``); codes needing none have no fields; HEART_BEAT (its body decides) is absent.
MEMO_FIELDS: dict[int, tuple[str, ...]] = {
    _SEND_V2: ("b", "a"),
    _SEND: ("topic", "group"),
    _PULL: ("topic", "consumerGroup"),
    _BACK: ("group",),
    _QUERY: ("topic",),
    _OFFSET: ("consumerGroup", "topic"),
    **dict.fromkeys(_GROUP_ONLY, ("consumerGroup",)),
}
#: the most authorizations a memo keeps (a peer names the topics): past it, it starts over
MEMO_MAX = 4096

Memo = dict[tuple[object, ...], Decision]
"""Authorizations by ``(access key, code, the MEMO_FIELDS values)``, valid for one :class:`AclRules`."""


def decide(
    rules: AclRules,
    *,
    peer: Address | None,
    code: int,
    ext: Mapping[str, str] | None,
    body: bytes | None,
    memo: Memo | None = None,
) -> Decision:
    """The decision for one request (the table in the module docstring).

    Steps 1-5 (white lists, account, signature) run for every request; with ``memo`` (a dict the
    caller keeps for this ``rules`` object only), the outcome of steps 6-10 is remembered per
    access key, code and resource fields, so a producer's sends to one topic decide it once.
    """
    for matcher in rules.global_white:
        if matcher.matches(peer):
            return ALLOW
    if ext is None:
        return Decision(False, "No accessKey is configured")
    access_key = ext.get(ACCESS_KEY)
    if access_key is None:
        return Decision(False, "No accessKey is configured")
    account = rules.accounts.get(access_key)
    if account is None:
        return Decision(False, f"No acl config for {access_key}", access_key)
    if account.white is not NO_ADDRESS and account.white.matches(peer):
        return ALLOW
    if not account.signer.matches(ext.get(SIGNATURE), ext, body):
        return Decision(False, f"Check signature failed for accessKey={access_key}", access_key)
    if memo is None:
        return authorize(account, code, ext, body)
    return remembered(memo, account, code, ext, body)


def memo_key(access_key: str, code: int, ext: Mapping[str, str]) -> tuple[object, ...] | None:
    """The key of a request's authorization in a :data:`Memo`, or None when it is not remembered."""
    fields = MEMO_FIELDS.get(code)
    if fields is None:
        return None
    return (access_key, code, *map(ext.get, fields))


def remembered(
    memo: Memo, account: Account, code: int, ext: Mapping[str, str], body: bytes | None
) -> Decision:
    """Steps 6-10 (:func:`authorize`) through ``memo`` (see :func:`decide`)."""
    key = memo_key(account.access_key, code, ext)
    if key is None:
        return authorize(account, code, ext, body)
    decision = memo.get(key)
    if decision is None:
        decision = authorize(account, code, ext, body)
        if len(memo) >= MEMO_MAX:
            memo.clear()
        memo[key] = decision
    return decision


def authorize(account: Account, code: int, ext: Mapping[str, str], body: bytes | None) -> Decision:
    """Steps 6-10 of the table for a request whose account and signature are good."""
    access_key = account.access_key
    try:
        needed = required_resources(code, ext, body)
    except BodyFormatError as exc:
        return Decision(False, str(exc), access_key)
    if needed.get(RMQ_SYS_TRACE_TOPIC) == PUB:
        return ALLOW
    if code in ADMIN_CODES and not account.admin:
        return Decision(
            False,
            f"Need admin permission for request code={code}, but accessKey={access_key} is not",
            access_key,
        )
    if not needed or (account.admin and not account.perms):
        return ALLOW
    owned = account.perms
    for resource, perm in needed.items():
        is_group = resource.startswith(RETRY_GROUP_TOPIC_PREFIX)
        have = owned.get(resource)
        if have is None:
            have = account.default_group_perm if is_group else account.default_topic_perm
        if not check_permission(perm, have):
            return Decision(
                False,
                f"No default permission for {_resource_text(resource)}"
                f" (accessKey={access_key} needs {perm_name(perm)}, has {perm_name(have)})",
                access_key,
                resource,
            )
    return ALLOW
