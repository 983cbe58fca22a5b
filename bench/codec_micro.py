"""Per-frame CPU of the remoting codec on the send path, in µs (best of N, ``time.process_time``).

Frames are built as the SDK and the broker build them: a SEND_MESSAGE_V2 request (short-name
ext fields from ``client.producer.prepare``, a 1 KB body) and its SEND_OK reply (the broker's
``_reply`` ext dict). Each stage runs in a tight loop with no I/O:

* ``client_encode``: ``RemotingCommand(...)`` + ``encode_header`` of the request;
* ``broker_split``: ``FrameDecoder.feed`` of the request frame (split + JSON header decode);
  ``*_split16``: the same per frame when one read holds 16 frames;
* ``broker_header``: ``SendMessageRequestHeader.from_ext_fields_v2``;
* ``broker_encode``: building the reply and ``encode_header``;
* ``client_split``: ``FrameDecoder.feed`` of the reply frame;
* ``binary_*``: the same request through the ROCKETMQ binary serializer.

Usage: ``python bench/codec_micro.py [--n 20000] [--rounds 7] [--acl]`` (``--acl`` adds the
AccessKey/Signature ext fields an ACL client sends). Prints one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from collections.abc import Callable

from pocketmq.remoting.protocol.codes import CURRENT_VERSION, RPC_TYPE_RESPONSE, LanguageCode
from pocketmq.remoting.protocol.command import RemotingCommand
from pocketmq.remoting.protocol.frame import FrameDecoder
from pocketmq.remoting.protocol.headers import SendMessageRequestHeader

BODY = b"x" * 1024
PROPS = "UNIQ_KEY\x017F0000010A2B18B4AAC2634F5A800000\x02WAIT\x01true\x02TAGS\x01TagA\x02KEYS\x01key-1"


def request_ext(acl: bool) -> dict[str, str]:
    ext = {
        "a": "bench-producer-group",
        "b": "BenchTopic",
        "c": "TBW102",
        "d": "4",
        "e": "3",
        "f": "0",
        "g": str(time.time_ns() // 1_000_000),
        "h": "0",
        "i": PROPS,
        "j": "0",
        "k": "false",
        "m": "false",
        "n": "broker-a",
    }
    if acl:
        ext["AccessKey"] = "RocketMQ"
        ext["Signature"] = "bWFkZS11cC1zaWduYXR1cmUtZm9yLWJlbmNobWFyaw=="
    return ext


def reply_ext() -> dict[str, str]:
    return {
        "MSG_REGION": "DefaultRegion",
        "TRACE_ON": "true",
        "msgId": "7F00000100002A9F00000000000F4240",
        "queueId": "3",
        "queueOffset": "123456",
    }


def best_us(fn: Callable[[int], None], n: int, rounds: int) -> float:
    best = float("inf")
    for _ in range(rounds):
        t0 = time.process_time()
        fn(n)
        best = min(best, time.process_time() - t0)
    return round(best / n * 1e6, 3)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=20000)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--acl", action="store_true")
    args = ap.parse_args()
    ext = request_ext(args.acl)
    lang = int(LanguageCode.PYTHON)
    req = RemotingCommand(310, 7, 0, None, ext, BODY, lang)
    req_frame = req.encode()
    rext = reply_ext()
    reply = RemotingCommand(0, 7, RPC_TYPE_RESPONSE, None, rext, None, 0, CURRENT_VERSION, 0)
    reply_frame = reply.encode()
    breq = RemotingCommand(310, 7, 0, None, ext, BODY, lang, CURRENT_VERSION, 1)
    breq_frame = breq.encode()
    decoded = FrameDecoder().feed(req_frame)[0]

    def client_encode(n: int) -> None:
        for i in range(n):
            RemotingCommand(310, i, 0, None, ext, BODY, lang).encode_header()

    def split(frame: bytes) -> Callable[[int], None]:
        def run(n: int) -> None:
            feed = FrameDecoder().feed
            for _ in range(n):
                feed(frame)

        return run

    def split16(frame: bytes) -> Callable[[int], None]:
        data = frame * 16  # a read holding 16 frames, as with many requests in flight

        def run(n: int) -> None:
            feed = FrameDecoder().feed
            for _ in range(n // 16):
                feed(data)

        return run

    def broker_header(n: int) -> None:
        parse = SendMessageRequestHeader.from_ext_fields_v2
        fields = decoded.ext_fields
        for _ in range(n):
            parse(fields)

    def broker_encode(n: int) -> None:
        for i in range(n):
            e = dict(rext)
            RemotingCommand(0, i, RPC_TYPE_RESPONSE, None, e, None, 0, CURRENT_VERSION, 0).encode_header()

    def binary_encode(n: int) -> None:
        for i in range(n):
            RemotingCommand(310, i, 0, None, ext, BODY, lang, CURRENT_VERSION, 1).encode_header()

    stages = {
        "client_encode": client_encode,
        "broker_split": split(req_frame),
        "broker_split16": split16(req_frame),
        "broker_header": broker_header,
        "broker_encode": broker_encode,
        "client_split": split(reply_frame),
        "client_split16": split16(reply_frame),
        "binary_encode": binary_encode,
        "binary_split": split(breq_frame),
    }
    out: dict[str, object] = {name: best_us(fn, args.n, args.rounds) for name, fn in stages.items()}
    out["loadavg"] = os.getloadavg()[0]
    out["acl"] = args.acl
    print(json.dumps(out))


if __name__ == "__main__":
    main()
