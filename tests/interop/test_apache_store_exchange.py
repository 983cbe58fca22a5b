"""Store exchange with Apache RocketMQ 4.9.7 (the oracle), both ways: a store one broker wrote
is opened by the other, which serves every message (pull by offset, query by key and by id) and
the consumer offsets. Each direction starts the Apache servers once (~10-20 s)."""

from __future__ import annotations

from pathlib import Path

from pocketmq.testing.procs import servers
from tests.interop import store_exchange as ex
from tests.interop.apache_servers import apache_available, apache_servers


def test_apache_serves_a_store_pocketmq_wrote(tmp_path: Path) -> None:
    apache_available()
    with servers(tmp_path / "pocketmq", topics={ex.TOPIC: ex.QUEUES}) as s:
        sent = ex.write(s.broker.addr)
        store = s.store_dir
    with apache_servers(tmp_path / "apache", store_dir=store) as a:
        ex.check(a.broker_addr, sent)


def test_pocketmq_serves_a_store_apache_wrote(tmp_path: Path) -> None:
    apache_available()
    with apache_servers(tmp_path / "apache") as a:
        a.create_topics([ex.TOPIC], ex.QUEUES)
        sent = ex.write(a.broker_addr)
        store = a.store_dir
    with servers(tmp_path / "pocketmq", broker_keys={"storePathRootDir": str(store)}) as s:
        ex.check(s.broker.addr, sent)
