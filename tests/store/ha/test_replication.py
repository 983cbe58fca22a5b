"""Master and slave stores replicating over loopback (real sockets, RocketMQ's HA frames)."""

from __future__ import annotations

import asyncio
import logging
import socket
import struct

import pytest

from pocketmq.store import MessageStore, PutMessageStatus
from pocketmq.store.ha.codec import encode_report, encode_transfer_header
from tests.store.conftest import make_msg, pull_all

SEG = 64 * 1024


async def _until(cond, timeout: float = 10.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not cond():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError("condition not met in time")
        await asyncio.sleep(0.01)


async def _master(open_store, root, **cfg) -> MessageStore:
    store = open_store(root, **cfg)
    await store.start()
    await store.start_ha(host="127.0.0.1", port=0)
    return store


async def _slave(open_store, root, master: MessageStore, **cfg) -> MessageStore:
    assert master.ha_master is not None
    store = open_store(
        root, broker_role="SLAVE", ha_master_address=f"127.0.0.1:{master.ha_master.port}", **cfg
    )
    await store.start()
    await store.start_ha()
    return store


def _commitlog_bytes(store: MessageStore, start: int, end: int) -> bytes:
    out = b""
    off = start
    while off < end:
        data = store.get_commit_log_data(off, end - off)
        assert data, off
        out += data
        off += len(data)
    return out


async def test_slave_copies_from_the_masters_last_segment_byte_identical(open_store, tmp_path):
    master = await _master(open_store, str(tmp_path / "m"))
    for i in range(900):  # ~3.5 segments of 64 KiB
        assert master.put_message(make_msg(i, queue_id=i % 2)).status is PutMessageStatus.PUT_OK
    end = master.get_max_phy_offset()
    assert end > 3 * SEG
    slave = await _slave(open_store, str(tmp_path / "s"), master)
    try:
        await _until(lambda: slave.get_max_phy_offset() == end)
        start = end - end % SEG
        assert slave.get_min_phy_offset() == start  # report 0 → the master's last segment
        assert _commitlog_bytes(slave, start, end) == _commitlog_bytes(master, start, end)
        # more puts follow at once, across a segment boundary
        for i in range(900, 1200):
            master.put_message(make_msg(i, queue_id=i % 2))
        end = master.get_max_phy_offset()
        await _until(lambda: slave.get_max_phy_offset() == end)
        assert _commitlog_bytes(slave, start, end) == _commitlog_bytes(master, start, end)
        # the slave's reput built its ConsumeQueues from the replicated records (the master's
        # own reput may still be dispatching: the transfer does not wait for it)
        await _until(lambda: slave.dispatch_behind_bytes == 0 and master.dispatch_behind_bytes == 0)
        for q in (0, 1):
            on_slave = pull_all(slave, "TopicA", q, slave.get_min_offset_in_queue("TopicA", q))
            assert on_slave and slave.get_max_offset_in_queue("TopicA", q) == master.get_max_offset_in_queue(
                "TopicA", q
            )
            first = slave.get_min_offset_in_queue("TopicA", q)
            on_master = pull_all(master, "TopicA", q, first)
            assert [m.msg_id for m in on_slave] == [m.msg_id for m in on_master]
        # the master sees the acknowledgement
        await _until(lambda: master.ha_master.group_transfer.acked == end)
        info = master.runtime_info()
        assert info["haSlaveCount"] == "1" and info["haSlaveAckOffset"] == str(end)
        assert slave.runtime_info()["haConnected"] == "true"
        # a slave refuses puts
        assert slave.put_message(make_msg(1)).status is PutMessageStatus.SERVICE_NOT_AVAILABLE
    finally:
        await slave.shutdown()
        await master.shutdown()


async def test_sync_master_waits_for_the_slave(open_store, tmp_path):
    master = await _master(open_store, str(tmp_path / "m"), broker_role="SYNC_MASTER", slave_timeout=400)
    try:
        # no slave: SLAVE_NOT_AVAILABLE at once (the message is stored all the same)
        before = master.get_max_phy_offset()
        r = await master.put_message_async(make_msg(0))
        assert r.status is PutMessageStatus.SLAVE_NOT_AVAILABLE and master.get_max_phy_offset() > before
        slave = await _slave(open_store, str(tmp_path / "s"), master)
        await _until(lambda: master.ha_master.slave_count() == 1)
        rs = await asyncio.gather(*(master.put_message_async(make_msg(i)) for i in range(1, 200)))
        assert all(r.status is PutMessageStatus.PUT_OK for r in rs)
        # every PUT_OK byte is on the slave
        assert slave.get_max_phy_offset() >= max(r.append.wrote_offset + r.append.wrote_bytes for r in rs)
        await slave.shutdown()
        await _until(lambda: master.ha_master.slave_count() == 0)
        r = await master.put_message_async(make_msg(999))
        assert r.status is PutMessageStatus.SLAVE_NOT_AVAILABLE
    finally:
        await master.shutdown()


async def test_sync_master_times_out_when_the_slave_stops_acking(open_store, tmp_path):
    master = await _master(open_store, str(tmp_path / "m"), broker_role="SYNC_MASTER", slave_timeout=300)
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", master.ha_master.port)
        writer.write(encode_report(0))  # a "slave" that reports once and never again
        await writer.drain()
        await _until(lambda: master.ha_master.slave_count() == 1)
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        r = await master.put_message_async(make_msg(1))
        waited = loop.time() - t0
        assert r.status is PutMessageStatus.FLUSH_SLAVE_TIMEOUT
        assert 0.29 <= waited < 0.3 * 1.1 + 0.2
        assert master.ha_master.group_transfer.waiting == 0
        writer.close()
    finally:
        await master.shutdown()


async def test_transfers_are_chunks_of_at_most_the_batch_size_cutting_records(open_store, tmp_path):
    master = await _master(open_store, str(tmp_path / "m"), ha_transfer_batch_size=1000)
    try:
        for i in range(50):
            master.put_message(make_msg(i, body_size=333))
        end = master.get_max_phy_offset()
        reader, writer = await asyncio.open_connection("127.0.0.1", master.ha_master.port)
        writer.write(encode_report(0))
        await writer.drain()
        got = b""
        offset = 0
        while offset < end:
            off, size = struct.unpack(">qi", await reader.readexactly(12))
            assert off == offset and 0 < size <= 1000
            got += await reader.readexactly(size)
            offset += size
        assert got == _commitlog_bytes(master, 0, end)
        writer.close()
    finally:
        await master.shutdown()


@pytest.mark.parametrize(
    ("payload", "why"),
    [
        (lambda end: encode_report(end + 1), "beyond"),
        (lambda end: encode_report(-8), "negative"),
        (lambda end: b"\xff\xfe\xfd\xfc\xfb\xfa\xf9\xf8", "negative"),
    ],
)
async def test_hostile_reports_close_the_connection_and_ack_nothing(open_store, tmp_path, payload, why):
    master = await _master(open_store, str(tmp_path / "m"), broker_role="SYNC_MASTER")
    closed: list[str] = []
    master.ha_master.on_close = lambda addr, reason: closed.append(reason)
    try:
        master.put_message(make_msg(1))
        end = master.get_max_phy_offset()
        reader, writer = await asyncio.open_connection("127.0.0.1", master.ha_master.port)
        writer.write(payload(end))
        await writer.drain()
        await asyncio.wait_for(reader.read(), 5)  # EOF: the master closed it
        await _until(lambda: bool(closed))
        assert why in closed[0]
        assert master.ha_master.group_transfer.acked == 0 and master.ha_master.slave_count() == 0
        writer.close()
    finally:
        await master.shutdown()


async def test_a_silent_peer_is_closed_after_housekeeping(open_store, tmp_path):
    master = await _master(open_store, str(tmp_path / "m"), ha_housekeeping_interval=300)
    closed: list[str] = []
    master.ha_master.on_close = lambda addr, reason: closed.append(reason)
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", master.ha_master.port)
        await asyncio.wait_for(reader.read(), 5)
        assert closed and "no report" in closed[0]
        writer.close()
    finally:
        await master.shutdown()


async def test_slave_refuses_to_mix_logs_with_a_shorter_master(open_store, tmp_path, caplog):
    # the slave holds more than the master (e.g. the master lost its tail): it must not append
    slave_root = str(tmp_path / "s")
    m0 = open_store(str(tmp_path / "m0"))
    for i in range(30):
        m0.put_message(make_msg(i))
    # the slave's log: a copy of m0's 30 records
    s = open_store(slave_root, broker_role="SLAVE")
    assert s.append_to_commit_log(0, _commitlog_bytes(m0, 0, m0.get_max_phy_offset()))
    s.close()
    master = await _master(open_store, str(tmp_path / "m"))
    for i in range(10):
        master.put_message(make_msg(i))
    slave_end = m0.get_max_phy_offset()
    assert master.get_max_phy_offset() < slave_end
    caplog.set_level(logging.WARNING, logger="pocketmq.store.ha.slave")
    slave = await _slave(open_store, slave_root, master)
    slave.ha_slave.reconnect_s = 0.05
    try:
        await _until(lambda: "refusing to mix" in caplog.text)
        await asyncio.sleep(0.3)  # several reconnects
        assert slave.get_max_phy_offset() == slave_end  # nothing appended
        assert master.ha_master.group_transfer.acked == 0  # nothing acknowledged
        lines = [r for r in caplog.records if "refusing to mix" in r.getMessage()]
        assert len(lines) == 1 and "shorter" in lines[0].getMessage()
    finally:
        await slave.shutdown()
        await master.shutdown()


async def test_slave_closes_on_an_offset_mismatch_from_a_master(open_store, tmp_path):
    """A master (here a raw socket) sending data at an offset the slave does not end at."""
    s = open_store(str(tmp_path / "s"), broker_role="SLAVE")
    seed = open_store(str(tmp_path / "seed"))
    for i in range(5):
        seed.put_message(make_msg(i))
    data = _commitlog_bytes(seed, 0, seed.get_max_phy_offset())
    assert s.append_to_commit_log(0, data)
    reports: list[int] = []
    closed = asyncio.Event()

    async def fake_master(reader, writer):
        reports.append(struct.unpack(">q", await reader.readexactly(8))[0])
        writer.write(encode_transfer_header(len(data) + 100, 4) + b"junk")
        await writer.drain()
        await reader.read()  # the slave closes
        closed.set()

    server = await asyncio.start_server(fake_master, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    await s.start()
    s.config  # noqa: B018
    await s.start_ha()
    s.ha_slave.update_master_address(f"127.0.0.1:{port}")
    try:
        await asyncio.wait_for(closed.wait(), 10)
        assert reports == [len(data)]
        assert s.get_max_phy_offset() == len(data)
        assert "refusing to mix" in s.ha_slave.last_error or "skips" in s.ha_slave.last_error
    finally:
        server.close()
        await s.shutdown()


def test_port_zero_binds_a_free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        assert sock.getsockname()[1] > 0


def test_reput_waits_for_a_record_cut_inside_its_size_field(open_store, tmp_path, caplog):
    """A transfer may end 1-7 bytes into a record; a 1 KiB record's first bytes are zeros."""
    seed = open_store(str(tmp_path / "seed"))
    for i in range(3):
        seed.put_message(make_msg(i, body_size=1024))
    data = _commitlog_bytes(seed, 0, seed.get_max_phy_offset())
    first = int.from_bytes(data[:4], "big")
    assert data[first : first + 2] == b"\x00\x00"
    slave = open_store(str(tmp_path / "s"), broker_role="SLAVE")
    caplog.set_level(logging.ERROR)
    for piece in (data[: first + 2], data[first + 2 : first + 5], data[first + 5 :]):
        assert slave.append_to_commit_log(slave.get_max_phy_offset(), piece)
        slave.do_reput()
    assert "reput stopped" not in caplog.text
    assert slave.get_max_offset_in_queue("TopicA", 0) == 3


def test_replication_on_uvloop(open_store, tmp_path):
    """The brokers run on uvloop, whose transports are not asyncio.Transport subclasses: the
    protocols (master connection, slave link with its receive buffer) must work on both loops."""
    uvloop = pytest.importorskip("uvloop", reason="uvloop is not installed on this platform")

    async def run() -> None:
        master = await _master(open_store, str(tmp_path / "m"), broker_role="SYNC_MASTER")
        slave = await _slave(open_store, str(tmp_path / "s"), master)
        try:
            assert master.ha_master is not None
            await _until(lambda: master.ha_master is not None and master.ha_master.slave_count() == 1)
            results = await asyncio.gather(*(master.put_message_async(make_msg(i)) for i in range(300)))
            assert {r.status for r in results} == {PutMessageStatus.PUT_OK}
            end = master.get_max_phy_offset()
            assert slave.get_max_phy_offset() == end
            assert _commitlog_bytes(slave, 0, end) == _commitlog_bytes(master, 0, end)
        finally:
            await slave.shutdown()
            await master.shutdown()

    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        runner.run(run())
