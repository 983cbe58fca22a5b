"""Running out of file descriptors is logged, rate-limited, naming the limit (issue 23, T19):
before, new clients hung (asyncio) or were dropped (uvloop) with nothing said.

The server runs in a child process whose open-file limit is 64, so exhausting it cannot hurt
the test runner; the child holds every free descriptor, lets clients connect, and prints what
its log said.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

CHILD = textwrap.dedent(
    """
    import asyncio, logging, os, resource, socket, sys
    resource.setrlimit(resource.RLIMIT_NOFILE, (64, 64))
    logging.basicConfig(level=logging.WARNING, stream=sys.stdout, format="%(name)s %(message)s")
    from pocketmq.remoting.transport.server import RemotingServer, RemotingServerConfig

    async def main():
        srv = RemotingServer(RemotingServerConfig(host="127.0.0.1", sweep_interval=0.05, max_connections=1000))
        await srv.start()
        clients = [socket.create_connection(("127.0.0.1", srv.port)) for _ in range(3)]
        hog = []
        try:
            while True:
                hog.append(os.open(os.devnull, os.O_RDONLY))
        except OSError:
            pass
        for fd in hog[-3:]:  # room for client sockets only: the server's accepts fail
            os.close(fd)
        del hog[-3:]
        extra = [socket.socket() for _ in range(3)]
        for s in extra:
            s.setblocking(False)
            try:
                s.connect(("127.0.0.1", srv.port))
            except BlockingIOError:
                pass
        await asyncio.sleep(1.5)
        await srv.stop()

    if sys.argv[1] == "uvloop":
        import uvloop
        uvloop.run(main())
    else:
        asyncio.run(main())
    """
)


@pytest.mark.parametrize("loop", ["asyncio", "uvloop"])
def test_running_out_of_descriptors_is_logged_once_naming_the_limit(loop: str) -> None:
    if loop == "uvloop":
        pytest.importorskip("uvloop")
    done = subprocess.run(
        [sys.executable, "-c", CHILD, loop], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    lines = [line for line in done.stdout.splitlines() if "out of file descriptors" in line]
    assert lines, done.stdout + done.stderr
    assert "open-file limit 64" in lines[0] and "ulimit -n" in lines[0]
    assert len(lines) == 1  # rate-limited: one line per 10 s, however many accepts failed
    assert "Traceback" not in done.stdout + done.stderr
