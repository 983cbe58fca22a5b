"""A persist that starts while the previous write is done but its owner has not resumed yet.

Seen with the Java client: eight UPDATE_AND_CREATE_TOPIC requests at once froze the broker
(100 % CPU, no reply): the new persist awaited the finished write's future, which never
yields, waiting for the owner to clear it, which could then never run.
"""

from __future__ import annotations

import asyncio
import threading

from pocketmq.broker.offset_manager import ConsumerOffsetManager


async def _persist_right_after_a_write(tmp_path) -> None:
    m = ConsumerOffsetManager(str(tmp_path), fsync=False)
    m.commit_offset("G", "T", 0, 1)
    loop = asyncio.get_running_loop()
    # the state between a write's completion and its owner's resumption (the owner clears it)
    finished: asyncio.Future[None] = loop.create_future()
    finished.set_result(None)
    m._writing = finished
    loop.call_soon(setattr, m, "_writing", None)  # what the owner would do when it runs
    await m.persist_async()


def test_a_persist_after_a_finished_write_does_not_spin(tmp_path):
    # the loop runs on a thread of its own: a spinning loop cannot be timed out from inside it
    done = threading.Event()
    errors: list[BaseException] = []

    def run() -> None:
        try:
            asyncio.run(_persist_right_after_a_write(tmp_path))
        except BaseException as exc:
            errors.append(exc)
        done.set()

    threading.Thread(target=run, daemon=True).start()
    assert done.wait(20), "the second persist never finished (the event loop spins)"
    assert not errors
    assert (tmp_path / "consumerOffset.json").exists()
