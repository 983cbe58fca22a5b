"""pocketmq.client.admin: the asyncio admin API (:class:`MQAdmin`) and the ``mqadmin`` CLI.

``from pocketmq.client.admin import MQAdmin`` imports the API on first use only, so that the
``mqadmin`` command (``pocketmq.client.admin.cli``) starts without loading it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pocketmq.client.admin.admin import MQAdmin
    from pocketmq.client.admin.base import MQAdminError

__all__ = ["MQAdmin", "MQAdminError"]


def __getattr__(name: str) -> Any:
    if name == "MQAdmin":
        from pocketmq.client.admin.admin import MQAdmin

        return MQAdmin
    if name == "MQAdminError":
        from pocketmq.client.admin.base import MQAdminError

        return MQAdminError
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
