"""Broker ACL 1.0 (RocketMQ 4.9 ``plain_acl.yml``): rules, decisions, files, hot reload, the RPC hook.

Modules, lowest first: ``address`` (white-list patterns), ``rules`` (accounts and permissions from
parsed YAML, pure), ``decision`` (the decision table and per-request resources, pure), ``files``
(where the files are, read/write), ``manager`` (current rules, hot reload, admin updates),
``validator`` (the server RPC hook). User documentation: ``docs/acl.md``.
"""

from pocketmq.broker.acl.manager import PlainAclManager
from pocketmq.broker.acl.rules import AclConfigError
from pocketmq.broker.acl.validator import AclDenied, AclValidator
from pocketmq.remoting.protocol.acl import PlainAccessConfig

__all__ = ["AclConfigError", "AclDenied", "AclValidator", "PlainAccessConfig", "PlainAclManager"]
