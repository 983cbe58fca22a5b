"""``BrokerOuterAPI``: the broker's calls to its name servers (REGISTER / UNREGISTER_BROKER).

Registration goes to every configured name server concurrently (RocketMQ
``registerBrokerAll``); one that is down only logs a warning, the others still learn about the
broker. The first successful reply supplies ``RegisterBrokerResult`` (a slave's master and HA
addresses, and the ORDER_TOPIC_CONFIG KV table).
"""

from __future__ import annotations

import asyncio
import logging
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from pocketmq.remoting.protocol.codes import RequestCode, ResponseCode
from pocketmq.remoting.protocol.command import RemotingCommand
from pocketmq.remoting.protocol.fastjson import BodyFormatError
from pocketmq.remoting.protocol.headers import (
    RegisterBrokerRequestHeader,
    RegisterBrokerResponseHeader,
    UnRegisterBrokerRequestHeader,
)
from pocketmq.remoting.protocol.route import (
    KVTable,
    RegisterBrokerBody,
    RegisterBrokerResult,
    TopicConfigSerializeWrapper,
)
from pocketmq.remoting.transport.client import RemotingClient, RemotingClientConfig

logger = logging.getLogger(__name__)

_R = TypeVar("_R")


@dataclass(frozen=True, slots=True)
class BrokerIdentity:
    """Who registers or unregisters: the fields both requests name the broker by."""

    cluster_name: str
    broker_addr: str
    broker_name: str
    broker_id: int


class BrokerOuterAPI:
    def __init__(self, client: RemotingClient | None = None) -> None:
        self.client = client or RemotingClient(RemotingClientConfig(connect_timeout=3.0))

    async def close(self) -> None:
        await self.client.close()

    async def _call_all(
        self,
        addrs: list[str],
        request: tuple[int, dict[str, str], bytes | None],
        read: Callable[[str, RemotingCommand], _R],
        timeout: float,
    ) -> list[_R | BaseException]:
        """Send one request ``(code, ext, body)`` to every name server at once: per address
        ``read(addr, reply)`` of its SUCCESS reply, or the exception (a failed call, a
        ``RuntimeError`` naming another reply code, or what ``read`` raised)."""
        code, ext, body = request

        async def one(addr: str) -> _R:
            response = await self.client.invoke(addr, RemotingCommand.request(code, dict(ext), body), timeout)
            if response.code != ResponseCode.SUCCESS:
                raise RuntimeError(f"code {response.code}: {response.remark}")
            return read(addr, response)

        return await asyncio.gather(*(one(addr) for addr in addrs), return_exceptions=True)

    async def register_broker_all(
        self,
        namesrv_addrs: list[str],
        broker: BrokerIdentity,
        *,
        ha_server_addr: str,
        wrapper: TopicConfigSerializeWrapper,
        filter_server_list: list[str] | None = None,
        compressed: bool = False,
        timeout: float = 6.0,
    ) -> RegisterBrokerResult | None:
        """Register with every name server; the first successful result, or None if all failed."""
        if not namesrv_addrs:
            return None
        body = RegisterBrokerBody(wrapper, list(filter_server_list or [])).encode(compress=compressed)
        header = RegisterBrokerRequestHeader(  # type: ignore[call-arg, unused-ignore]
            broker_name=broker.broker_name,
            broker_addr=broker.broker_addr,
            cluster_name=broker.cluster_name,
            ha_server_addr=ha_server_addr,
            broker_id=broker.broker_id,
            compressed=compressed,
            body_crc32=zlib.crc32(body) & 0x7FFFFFFF,
        )
        request = (RequestCode.REGISTER_BROKER, header.to_ext_fields(), body)
        results = await self._call_all(namesrv_addrs, request, _register_result, timeout)
        first: RegisterBrokerResult | None = None
        for addr, res in zip(namesrv_addrs, results, strict=True):
            if isinstance(res, BaseException):
                logger.warning(
                    "register broker %s to name server %s failed: %s", broker.broker_name, addr, res
                )
            elif first is None:
                first = res
        return first

    async def unregister_broker_all(
        self, namesrv_addrs: list[str], broker: BrokerIdentity, *, timeout: float = 3.0
    ) -> None:
        ext = UnRegisterBrokerRequestHeader(  # type: ignore[call-arg, unused-ignore]
            broker_name=broker.broker_name,
            broker_addr=broker.broker_addr,
            cluster_name=broker.cluster_name,
            broker_id=broker.broker_id,
        ).to_ext_fields()
        results = await self._call_all(
            namesrv_addrs, (RequestCode.UNREGISTER_BROKER, ext, None), _ignore, timeout
        )
        for addr, res in zip(namesrv_addrs, results, strict=True):
            if isinstance(res, BaseException):
                logger.warning(
                    "unregister broker %s from name server %s failed: %s", broker.broker_name, addr, res
                )
            else:
                logger.info("unregistered broker %s from name server %s", broker.broker_name, addr)


def _ignore(addr: str, response: RemotingCommand) -> None:
    return None


def _register_result(addr: str, response: RemotingCommand) -> RegisterBrokerResult:
    """A REGISTER_BROKER SUCCESS reply read (an unreadable KV table only logs)."""
    rh = RegisterBrokerResponseHeader.from_ext_fields(response.ext_fields)
    kv: KVTable | None = None
    if response.body:
        try:
            kv = KVTable.decode(response.body)
        except BodyFormatError:
            logger.warning("name server %s sent an unreadable KV table", addr)
    return RegisterBrokerResult(rh.ha_server_addr, rh.master_addr, kv)
