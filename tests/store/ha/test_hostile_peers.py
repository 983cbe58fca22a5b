"""T7: hostile peers on the master's HA port (1,000 connections: random bytes, offsets beyond
the master's end, negative offsets, nothing at all). Each is closed, the acknowledgement
watermark never moves because of them, the real slave keeps replicating, memory stays bounded."""

from __future__ import annotations

import asyncio
import random
import resource

from pocketmq.store import PutMessageStatus
from pocketmq.store.ha.codec import encode_report
from tests.store.conftest import make_msg
from tests.store.ha.test_replication import _master, _slave, _until

PEERS = 1000
WAVE = 100


async def _hostile(port: int, kind: str, rng: random.Random, end: int) -> bool:
    """One hostile connection; True once the master closed it."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        if kind == "random":
            writer.write(rng.randbytes(rng.randrange(1, 4096)))
        elif kind == "beyond":
            writer.write(encode_report(end + rng.randrange(1, 1 << 40)))
        elif kind == "negative":
            writer.write(encode_report(-rng.randrange(1, 1 << 62)))
        # "silent": sends nothing, closed by housekeeping
        await writer.drain()
        await asyncio.wait_for(reader.read(), 10)  # a heartbeat at most, then EOF
        return True
    except (ConnectionError, TimeoutError):
        return True
    finally:
        writer.close()


async def test_a_thousand_hostile_connections(open_store, tmp_path):
    # silent peers are closed after 1.5 s; the real slave reports every 100 ms (a 500 ms
    # housekeeping closed the real slave once on a loaded 2-core box: one stall of the shared loop)
    fast = {"ha_housekeeping_interval": 1500, "ha_send_heartbeat_interval": 100}
    master = await _master(
        open_store, str(tmp_path / "m"), broker_role="SYNC_MASTER", slave_timeout=2000, **fast
    )
    slave = await _slave(open_store, str(tmp_path / "s"), master, **fast)
    ha = master.ha_master
    assert ha is not None
    closed: list[str] = []
    ha.on_close = lambda addr, reason: closed.append(f"{addr} {reason}")
    try:
        await _until(lambda: ha.slave_count() == 1)
        real = ha.slaves()[0][0]
        rng = random.Random(7)
        kinds = ["random", "beyond", "negative", "silent"]
        rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        done = 0
        sent = 0
        while done < PEERS:
            end = master.get_max_phy_offset()
            wave = [_hostile(ha.port, kinds[(done + i) % 4], rng, end) for i in range(WAVE)]
            # the real slave keeps acknowledging SYNC_MASTER puts while the wave runs
            puts = [master.put_message_async(make_msg(sent + i)) for i in range(20)]
            results = await asyncio.gather(*wave, *puts)
            assert all(results[:WAVE])
            statuses = {r.status for r in results[WAVE:]}
            assert statuses == {PutMessageStatus.PUT_OK}, [r for r in closed if r.startswith(real)]
            sent += 20
            done += WAVE
            # the watermark is never beyond what the master wrote, whatever the peers reported
            assert ha.group_transfer.acked <= master.get_max_phy_offset()
        await _until(lambda: len(ha.connections) == 1)  # only the real slave is left
        assert len(closed) >= PEERS
        assert ha.group_transfer.acked == master.get_max_phy_offset() == slave.get_max_phy_offset()
        # bounded memory: no per-peer state survives (ru_maxrss is in KiB on Linux)
        assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss_before < 200 * 1024
    finally:
        await slave.shutdown()
        await master.shutdown()
