"""TLS on the name server and the broker (tls.server.mode enforcing / permissive) with the SDK's useTLS."""

from __future__ import annotations

from pathlib import Path

import pytest

from pocketmq.client import Message, Producer, SendStatus
from pocketmq.deploy.tls_cert import make_self_signed
from pocketmq.remoting.protocol.codes import RequestCode, ResponseCode
from pocketmq.remoting.protocol.command import RemotingCommand
from pocketmq.remoting.protocol.errors import RemotingConnectError, RemotingTimeoutError
from pocketmq.remoting.transport.client import RemotingClient, RemotingClientConfig
from pocketmq.remoting.transport.tls import TlsConfigError, client_ssl_context
from pocketmq.testing import cluster
from tests.integration.support import loop_clean_at_exit  # noqa: F401 - fixtures

pytestmark = pytest.mark.integration


def _tls(cert: str, key: str, mode: str) -> dict[str, str]:
    return {"tls.server.mode": mode, "tls.server.certPath": cert, "tls.server.keyPath": key}


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str]:
    try:
        return make_self_signed(tmp_path_factory.mktemp("tls"), hosts=("localhost", "127.0.0.1"))
    except RuntimeError as exc:
        pytest.skip(f"cannot make a test certificate: {exc}")


async def _ping(addr: str, ssl_ctx=None) -> RemotingCommand:
    cli = RemotingClient(RemotingClientConfig(ssl=ssl_ctx, connect_timeout=3.0, request_timeout=3.0))
    try:
        return await cli.invoke(addr, RemotingCommand.request(RequestCode.GET_BROKER_CLUSTER_INFO), 3.0)
    finally:
        await cli.close()


async def test_enforcing_cluster_with_tls_sdk(tmp_path: Path, pair: tuple[str, str]) -> None:
    cert, key = pair
    ns = _tls(cert, key, "enforcing")
    # an enforcing broker talks TLS to its name servers too, verifying them against this trust
    broker = {**ns, "tls.client.trustCertPath": cert}
    async with cluster(tmp_path / "c", namesrv_config=ns, broker_config=broker) as c:
        await c.create_topic("Tls", queues=2)
        async with Producer("PG", namesrv=c.namesrv_addr, use_tls=True, tls_trust_cert_path=cert) as p:
            assert (await p.send(Message("Tls", b"secret"))).send_status is SendStatus.SEND_OK
        # a plaintext client on an enforcing port is disconnected
        for addr in (c.namesrv_addr, c.broker_addrs[0]):
            with pytest.raises((RemotingConnectError, RemotingTimeoutError)):
                await _ping(addr)
        # verification is on by default: a certificate the client does not trust is refused...
        with pytest.raises(RemotingConnectError, match="CERTIFICATE_VERIFY_FAILED"):
            await _ping(c.namesrv_addr, client_ssl_context())
        # ...and so is a trusted certificate for another host
        other_cert, _ = make_self_signed(tmp_path / "other", hosts=("other.example",))
        other_ctx = client_ssl_context(trust=other_cert)
        with pytest.raises(RemotingConnectError, match="CERTIFICATE_VERIFY_FAILED"):
            await _ping(c.namesrv_addr, other_ctx)
        wrong_host = make_self_signed(tmp_path / "wrong", hosts=("other.example",))
        async with cluster(tmp_path / "w", namesrv_config=_tls(*wrong_host, "enforcing"), brokers=0) as w:
            with pytest.raises(RemotingConnectError, match="CERTIFICATE_VERIFY_FAILED"):
                await _ping(w.namesrv_addr, client_ssl_context(trust=wrong_host[0]))
            # the opt-out (tls.client.authServer=false / tls_verify_server=False) connects anyway
            assert (
                await _ping(w.namesrv_addr, client_ssl_context(verify=False))
            ).code == ResponseCode.SUCCESS


async def test_permissive_port_serves_both(tmp_path: Path, pair: tuple[str, str]) -> None:
    cert, key = pair
    cfg = _tls(cert, key, "permissive")
    async with cluster(tmp_path / "c", namesrv_config=cfg, broker_config=cfg) as c:
        await c.create_topic("Both", queues=2)
        assert (await _ping(c.namesrv_addr)).code == ResponseCode.SUCCESS
        assert (await _ping(c.namesrv_addr, client_ssl_context(trust=cert))).code == ResponseCode.SUCCESS
        async with Producer("PG1", namesrv=c.namesrv_addr, use_tls=True, tls_trust_cert_path=cert) as p:
            assert (await p.send(Message("Both", b"tls"))).send_status is SendStatus.SEND_OK
        async with Producer("PG2", namesrv=c.namesrv_addr) as p:
            assert (await p.send(Message("Both", b"plain"))).send_status is SendStatus.SEND_OK


async def test_enforcing_without_certificate_refuses_to_start(tmp_path: Path, pair: tuple[str, str]) -> None:
    with pytest.raises(TlsConfigError, match=r"tls.server.certPath") as err:
        async with cluster(tmp_path / "c", namesrv_config={"tls.server.mode": "enforcing"}, brokers=0):
            pass
    assert err.value.key == "tls.server.certPath"
    with pytest.raises(TlsConfigError, match="no such file") as err:
        async with cluster(
            tmp_path / "d", broker_config=_tls(pair[0], str(tmp_path / "missing.key"), "enforcing")
        ):
            pass
    assert err.value.key == "tls.server.keyPath"
