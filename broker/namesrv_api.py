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


class BrokerOuterAPI:
    def __init__(self, client: RemotingClient | None = None) -> None:
        self.client = client or RemotingClient(RemotingClientConfig(connect_timeout=3.0))

    async def close(self) -> None:
        await self.client.close()

    async def register_broker_all(
        self,
        namesrv_addrs: list[str],
        *,
        cluster_name: str,
        broker_addr: str,
        broker_name: str,
        broker_id: int,
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
            broker_name=broker_name,
            broker_addr=broker_addr,
            cluster_name=cluster_name,
            ha_server_addr=ha_server_addr,
            broker_id=broker_id,
            compressed=compressed,
            body_crc32=zlib.crc32(body) & 0x7FFFFFFF,
        )
        ext = header.to_ext_fields()
        results = await asyncio.gather(
            *(self._register_one(addr, ext, body, timeout) for addr in namesrv_addrs), return_exceptions=True
        )
        first: RegisterBrokerResult | None = None
        for addr, res in zip(namesrv_addrs, results, strict=True):
            if isinstance(res, BaseException):
                logger.warning("register broker %s to name server %s failed: %s", broker_name, addr, res)
            elif first is None:
                first = res
        return first

    async def _register_one(
        self, addr: str, ext: dict[str, str], body: bytes, timeout: float
    ) -> RegisterBrokerResult:
        request = RemotingCommand.request(RequestCode.REGISTER_BROKER, dict(ext), body)
        response = await self.client.invoke(addr, request, timeout)
        if response.code != ResponseCode.SUCCESS:
            raise RuntimeError(f"code {response.code}: {response.remark}")
        rh = RegisterBrokerResponseHeader.from_ext_fields(response.ext_fields)
        kv: KVTable | None = None
        if response.body:
            try:
                kv = KVTable.decode(response.body)
            except BodyFormatError:
                logger.warning("name server %s sent an unreadable KV table", addr)
        return RegisterBrokerResult(rh.ha_server_addr, rh.master_addr, kv)

    async def unregister_broker_all(
        self,
        namesrv_addrs: list[str],
        *,
        cluster_name: str,
        broker_addr: str,
        broker_name: str,
        broker_id: int,
        timeout: float = 3.0,
    ) -> None:
        ext = UnRegisterBrokerRequestHeader(  # type: ignore[call-arg, unused-ignore]
            broker_name=broker_name, broker_addr=broker_addr, cluster_name=cluster_name, broker_id=broker_id
        ).to_ext_fields()

        async def one(addr: str) -> None:
            response = await self.client.invoke(
                addr, RemotingCommand.request(RequestCode.UNREGISTER_BROKER, dict(ext)), timeout
            )
            if response.code != ResponseCode.SUCCESS:
                raise RuntimeError(f"code {response.code}: {response.remark}")

        results = await asyncio.gather(*(one(a) for a in namesrv_addrs), return_exceptions=True)
        for addr, res in zip(namesrv_addrs, results, strict=True):
            if isinstance(res, BaseException):
                logger.warning("unregister broker %s from name server %s failed: %s", broker_name, addr, res)
            else:
                logger.info("unregistered broker %s from name server %s", broker_name, addr)
