"""Typed construction of remoting custom headers.

``@header`` classes are generated dataclasses that mypy cannot see through (the decorator
lacks ``dataclass_transform``), so keyword construction goes through this one helper.
"""

from __future__ import annotations

from typing import Any, TypeVar, cast

from pocketmq.remoting.protocol.header_codec import CommandHeader

H = TypeVar("H", bound=CommandHeader)


def make(cls: type[H], **fields: Any) -> H:
    return cast(H, cast(Any, cls)(**fields))
