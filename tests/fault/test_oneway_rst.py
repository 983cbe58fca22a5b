"""Oneway requests a client writes just before it closes with replies unread (issue 25, defect A).

Such a close sends RST, and the client's own kernel drops every byte still in its send buffer;
only what the broker's receive buffer already holds survives. Defect A was the broker dropping
requests it *had* read; this test pins that the broker serves every request its kernel accepted,
and that ``serverSocketRcvBufSize`` (RocketMQ's key, 0 = the OS default) really sizes that
buffer: the broker process is stopped (SIGSTOP) before the client connects, so it neither
accepts nor reads while the client writes 1,000 oneway sends (~1.4 MB, ten times the default
buffer) and closes with RST; the broker is resumed once the client's kernel has every byte
acknowledged. With a 4 MiB receive buffer on the listening socket all 1,000 fit. With the OS
default, or with the size set only once the loop accepts the socket (too late: the first window
is sized at the handshake), about 50 fit and the rest never leave the client.
"""

from __future__ import annotations

import asyncio
import fcntl
import os
import signal
import socket
import struct
import termios
import time
from pathlib import Path

import pytest

from pocketmq.client import MQAdmin
from pocketmq.remoting.protocol.codes import RequestCode
from pocketmq.remoting.protocol.command import RemotingCommand
from pocketmq.remoting.protocol.message import properties_to_string
from pocketmq.testing.procs import Servers

pytestmark = [pytest.mark.integration, pytest.mark.fault]

N = 1000
TOPIC = "OnewayRst"
RCVBUF = 4 * 1024 * 1024


def oneway_frames(n: int) -> list[bytes]:
    frames = []
    for i in range(n):
        props = properties_to_string({"UNIQ_KEY": f"7F000001{os.getpid():08X}{i:016X}", "TAGS": "A"})
        ext = {
            "a": "RstProducer", "b": TOPIC, "c": "TBW102", "d": "4", "e": str(i % 4), "f": "0",
            "g": str(int(time.time() * 1000)), "h": "0", "i": props, "j": "0", "k": "false",
        }  # fmt: skip
        cmd = RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, ext, b"b" * 1024, oneway=True)
        cmd.opaque = i
        frames.append(cmd.encode())
    return frames


def unacked(sock: socket.socket) -> int:
    count: int = struct.unpack("i", fcntl.ioctl(sock.fileno(), termios.TIOCOUTQ, b"\0" * 4))[0]
    return count


async def stored(namesrv: str) -> int:
    async with MQAdmin(namesrv) as admin:
        return (await admin.topic_status(TOPIC)).total_messages


def test_every_oneway_send_the_kernel_accepted_before_an_rst_is_stored(tmp_path: Path) -> None:
    rmem_max = int(Path("/proc/sys/net/core/rmem_max").read_text())
    frames = oneway_frames(N)
    if rmem_max * 2 < sum(map(len, frames)) * 1.3:
        pytest.skip(f"net.core.rmem_max={rmem_max} caps SO_RCVBUF below what this test writes")
    s = Servers(tmp_path, {"serverSocketRcvBufSize": str(RCVBUF)})
    s.precreate_topic(TOPIC, 4)
    s.start()
    try:
        proc = s.broker.proc
        assert proc is not None
        # stopped before the client connects: the kernel completes the handshake and queues the
        # connection, and the burst arrives before the broker's loop has accepted it (a client's
        # first frames always race the accept); the window the burst meets is the listener's
        os.kill(proc.pid, signal.SIGSTOP)
        try:
            with socket.create_connection(("127.0.0.1", s.broker_port), timeout=10) as sock:
                # linger 0: close() sends RST, as a close with replies unread does
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                for frame in frames:
                    sock.sendall(frame)
                # every byte acknowledged by the broker's kernel (SIOCOUTQ: unsent + unacked = 0)
                deadline = time.monotonic() + 10
                while unacked(sock):
                    assert time.monotonic() < deadline, f"{unacked(sock)} bytes never accepted"
                    time.sleep(0.01)
        except BaseException:
            os.kill(proc.pid, signal.SIGCONT)
            raise
        os.kill(proc.pid, signal.SIGCONT)
        deadline = time.monotonic() + 20
        count = 0
        while time.monotonic() < deadline:
            count = asyncio.run(stored(s.namesrv.addr))
            if count >= N:
                break
            time.sleep(0.2)
        assert count == N, f"{count} of {N} oneway sends stored"
    finally:
        s.stop()
