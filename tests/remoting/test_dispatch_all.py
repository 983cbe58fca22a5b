"""``ProcessorDispatcher.dispatch_all``: a server connection hands the dispatcher a read's commands
at once (no call per frame). Every kind of handler outcome read in one chunk gets the reply it got
one ``dispatch`` at a time, in request order; a response to a server-initiated request read in
the same chunk resolves its waiter; with an RPC hook the general path answers the same."""

from __future__ import annotations

import asyncio
import struct

import pytest

from pocketmq.remoting.protocol.codes import RPC_ONEWAY, RPC_TYPE_RESPONSE, ResponseCode
from pocketmq.remoting.protocol.command import EncodedReply, RemotingCommand, reply_template
from pocketmq.remoting.protocol.errors import SystemBusyError
from pocketmq.remoting.protocol.frame import FrameDecoder
from pocketmq.remoting.transport.connection import RemotingConnection
from pocketmq.remoting.transport.hooks import RPCHook
from pocketmq.remoting.transport.server import RemotingServer, RemotingServerConfig
from tests.waiting import wait_until

_PARTS = reply_template({"msgId": None, "queueId": None})
assert _PARTS is not None


def _encoded(opaque: int, tag: str) -> EncodedReply:
    p0, p1, p2, p3 = _PARTS  # (msgId, queueId, opaque)
    header = f"{p0}{tag}{p1}7{p2}{opaque}{p3}".encode()
    reply = object.__new__(EncodedReply)
    reply.opaque = opaque
    reply.flag = int(RPC_TYPE_RESPONSE)
    reply.head = struct.pack(">II", 4 + len(header), len(header)) + header
    reply.head_opaque = opaque
    return reply


async def _late(request: RemotingCommand) -> RemotingCommand:
    await asyncio.sleep(0)
    return RemotingCommand.response_to(request, ResponseCode.SUCCESS, "late")


def _server(hooked: bool) -> RemotingServer:
    srv = RemotingServer(RemotingServerConfig(host="127.0.0.1"))
    d = srv.dispatcher
    d.register(101, lambda conn, req: _encoded(req.opaque, f"E{req.opaque}"))
    d.register(
        102, lambda conn, req: RemotingCommand.response_to(req, ResponseCode.SUCCESS, f"R{req.opaque}")
    )
    d.register(103, lambda conn, req: RemotingCommand(ResponseCode.SUCCESS, 0, 0, f"plain{req.opaque}"))
    d.register(104, lambda conn, req: None)
    d.register(105, lambda conn, req: _late(req))

    def refuse(conn: RemotingConnection, req: RemotingCommand) -> RemotingCommand:
        raise SystemBusyError("no")

    def fail(conn: RemotingConnection, req: RemotingCommand) -> RemotingCommand:
        raise ValueError("boom")

    d.register(106, refuse)
    d.register(107, fail)
    if hooked:
        seen: list[int] = []

        class Hook(RPCHook):
            def before_request(self, addr: str, request: RemotingCommand) -> None:
                seen.append(request.opaque)

            def after_response(
                self, addr: str, request: RemotingCommand, response: RemotingCommand | None
            ) -> None:
                pass

        d.hooks.append(Hook())
    return srv


@pytest.mark.parametrize("hooked", [False, True])
async def test_one_chunk_of_every_outcome_is_answered_in_request_order(hooked: bool) -> None:
    srv = _server(hooked)
    await srv.start()
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", srv.port)
        await wait_until(lambda: len(srv.connections) == 1)
        (conn,) = srv.connections
        # a server-initiated request: its reply is read in the same chunk as the requests
        invoked = asyncio.ensure_future(srv.invoke(conn, RemotingCommand(200, 0, 0, "ask"), 5.0))
        frame = await reader.readexactly(4)
        head = await reader.readexactly(int.from_bytes(frame, "big"))
        (ask,) = FrameDecoder().feed(frame + head)
        codes = [101, 102, 9999, 103, 104, 106, 101, 107, 105, 101]
        chunk = [RemotingCommand(code, i + 1, 0, None).encode() for i, code in enumerate(codes)]
        chunk.insert(
            3, RemotingCommand(ResponseCode.SUCCESS, ask.opaque, int(RPC_TYPE_RESPONSE), "answer").encode()
        )
        chunk.append(RemotingCommand(102, 50, int(RPC_ONEWAY), None).encode())  # oneway: no reply
        chunk.append(RemotingCommand(101, 52, int(RPC_ONEWAY), None).encode())  # (a pre-rendered one: none)
        chunk.append(RemotingCommand(101, 51, 0, None).encode())
        writer.write(b"".join(chunk))
        answered = await asyncio.wait_for(invoked, 5.0)
        assert answered.remark == "answer"
        dec = FrameDecoder()
        got: list[RemotingCommand] = []
        while len(got) < 10:
            got += dec.feed(await asyncio.wait_for(reader.read(65536), 5.0))
        writer.close()
    finally:
        await srv.stop()
    # 104 (None) and the oneway get none; the async one (opaque 9) comes after the synchronous
    # ones of its read
    assert [c.opaque for c in got] == [1, 2, 3, 4, 6, 7, 8, 10, 51, 9]
    by = {c.opaque: c for c in got}
    assert all(c.flag & int(RPC_TYPE_RESPONSE) for c in got)
    assert by[1].code == ResponseCode.SUCCESS and by[1].ext_fields["msgId"] == "E1"
    assert by[2].remark == "R2"
    assert by[3].code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED
    assert by[3].remark == " request type 9999 not supported"
    assert by[4].remark == "plain4"
    assert by[6].code == ResponseCode.SYSTEM_BUSY and by[6].remark == "no"
    assert by[8].code == ResponseCode.SYSTEM_ERROR and "ValueError: boom" in (by[8].remark or "")
    assert by[9].remark == "late"
    assert by[51].ext_fields["msgId"] == "E51"
