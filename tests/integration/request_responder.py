"""A responder in its own process: ``python -m tests.integration.request_responder NAMESRV TOPIC``.

Consumes requests from TOPIC and answers each with ``pong:<body>`` through request-reply;
prints ``ready`` once its consumer runs, and stops on stdin EOF.
"""

from __future__ import annotations

import asyncio
import sys

from pocketmq.client import CONSUME_SUCCESS, ConsumeFromWhere, Message, Producer, PushConsumer
from pocketmq.client.producer.request_reply import create_reply_message


async def main(namesrv: str, topic: str) -> None:
    async with Producer("ResponderPG", namesrv=namesrv) as producer:

        async def listener(msgs, ctx):  # type: ignore[no-untyped-def]
            for m in msgs:
                reply: Message = create_reply_message(m, b"pong:" + m.body)
                await producer.send_reply(reply)
            return CONSUME_SUCCESS

        consumer = PushConsumer(
            "ResponderCG", namesrv=namesrv, listener=listener,
            consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
        )  # fmt: skip
        consumer.subscribe(topic)
        async with consumer:
            print("ready", flush=True)
            await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2]))
