"""The flow-control keys on a running broker (``broker.flow_control``): both servers share one
``QueueWait``, and UPDATE_BROKER_CONFIG changes it for the connections already open."""

from __future__ import annotations

from pocketmq.broker.controller import BrokerController
from pocketmq.remoting.protocol.codes import RequestCode, ResponseCode
from tests.broker.helpers import Wire

SEND = int(RequestCode.SEND_MESSAGE_V2)


async def test_update_broker_config_changes_the_live_limits(broker: BrokerController, wire: Wire) -> None:
    qw = broker.queue_wait
    assert broker.remoting_server.config.queue_wait is qw
    if broker.fast_remoting_server is not None:
        assert broker.fast_remoting_server.config.queue_wait is qw
    assert qw.limits[SEND] == 0.2 and qw.held_limit == 1.0
    body = b"waitTimeMillsInSendQueue=350\nosPageCacheBusyTimeOutMills=1500\n"
    r = await wire.call(RequestCode.UPDATE_BROKER_CONFIG, None, body)
    assert r.code == ResponseCode.SUCCESS, r.remark
    assert qw.limits[SEND] == 0.35 and qw.held_limit == 1.5
    r = await wire.call(RequestCode.UPDATE_BROKER_CONFIG, None, b"brokerFastFailureEnable=false\n")
    assert r.code == ResponseCode.SUCCESS, r.remark
    assert qw.limits == {} and qw.shortest == float("inf")
