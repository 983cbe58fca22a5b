"""``MQAdmin(namespace="ns")``: the admin client of one RocketMQ namespace.

RocketMQ 4.9's ``mqadmin`` has no namespace option (its commands take the full ``ns%name``);
its clients have ``namespace`` (Java ``ClientConfig.namespace``). ``MQAdmin`` takes the same
``namespace=`` as the producer and consumers, with the rules of :mod:`pocketmq.client.namespace`:

* arguments: ``topic``, ``group``, ``src`` / ``dest`` (clone_group_offset) and the name of a
  ``TopicConfig`` / ``SubscriptionGroupConfig`` go on the wire as ``ns%name`` (system names
  and names that already carry the namespace are left alone);
* results: ``topic_list``, ``topics_by_cluster`` and ``topic_groups`` list only the namespace's
  topics / groups, with plain names; messages (``find_message``, ``view_message``,
  ``query_by_key``, ``query_by_unique_key``, ``read_messages``) carry the plain topic. Other
  results (stats, routes, connections, running info) keep the wire names the brokers report.

Nothing of this runs without a namespace: the wrappers are installed on the instance only when
one is set.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
from collections.abc import Callable, Iterable
from typing import Any

from pocketmq.client.namespace import SEPARATOR, unwrap, wrap
from pocketmq.remoting.protocol.message import MessageExt
from pocketmq.remoting.protocol.topics import DLQ_GROUP_TOPIC_PREFIX, RETRY_GROUP_TOPIC_PREFIX

#: parameters that name a topic or a group
NAME_PARAMS = frozenset({"topic", "group", "src", "dest"})
#: config dataclass fields that name the topic / group
CONFIG_FIELDS = ("topic_name", "group_name")
#: results that list names: only the namespace's, unwrapped
NAME_LISTS = frozenset({"topic_list", "topics_by_cluster", "topic_groups"})
#: results that are messages, or lists of them, or of ranges holding them
MESSAGE_RESULTS = frozenset(
    {"find_message", "view_message", "query_by_key", "query_by_unique_key", "read_messages"}
)


def mine(namespace: str, name: str) -> bool:
    """Whether the wire name ``name`` belongs to ``namespace`` (retry/DLQ prefixes allowed)."""
    for prefix in (RETRY_GROUP_TOPIC_PREFIX, DLQ_GROUP_TOPIC_PREFIX):
        if name.startswith(prefix):
            name = name[len(prefix) :]
            break
    return name.startswith(namespace + SEPARATOR)


def _wrap_arg(ns: str, name: str, value: Any) -> Any:
    if value is None:
        return value
    if name == "config":
        for f in CONFIG_FIELDS:
            if hasattr(value, f) and dataclasses.is_dataclass(value):
                return dataclasses.replace(value, **{f: wrap(ns, getattr(value, f))})  # type: ignore[type-var]
        return value
    return wrap(ns, value) if isinstance(value, str) else value


def _unwrap_messages(ns: str, value: Any) -> Any:
    if isinstance(value, MessageExt):
        value.topic = unwrap(ns, value.topic)
    elif isinstance(value, list):
        for item in value:
            _unwrap_messages(ns, item)
    elif dataclasses.is_dataclass(value):
        for f in dataclasses.fields(value):
            item = getattr(value, f.name)
            if isinstance(item, list | MessageExt):
                _unwrap_messages(ns, item)
    return value


def _namespaced(ns: str, name: str, method: Callable[..., Any]) -> Callable[..., Any]:
    sig = inspect.signature(method)
    wrapped_params = [p for p in sig.parameters if p in NAME_PARAMS or p == "config"]

    @functools.wraps(method)
    async def call(*args: Any, **kwargs: Any) -> Any:
        if wrapped_params:
            bound = sig.bind(*args, **kwargs)
            for p in wrapped_params:
                if p in bound.arguments:
                    bound.arguments[p] = _wrap_arg(ns, p, bound.arguments[p])
            args, kwargs = bound.args, bound.kwargs
        result = await method(*args, **kwargs)
        if name in NAME_LISTS:
            return [unwrap(ns, n) for n in result if mine(ns, n)]
        if name in MESSAGE_RESULTS:
            return _unwrap_messages(ns, result)
        return result

    return call


def install(admin: Any, namespace: str, names: Iterable[str]) -> None:
    """Replace ``admin``'s public coroutine methods among ``names`` by namespaced ones."""
    for name in names:
        method = getattr(admin, name)
        if name.startswith("_") or not inspect.iscoroutinefunction(method):
            continue
        params = set(inspect.signature(method).parameters)
        if params & NAME_PARAMS or "config" in params or name in NAME_LISTS or name in MESSAGE_RESULTS:
            setattr(admin, name, _namespaced(namespace, name, method))
