from __future__ import annotations

import json
from pathlib import Path

import pytest

from pocketmq.namesrv.kv_config import KVConfigManager
from pocketmq.remoting.common.persist import PersistCorruptError


def test_table_operations_in_memory() -> None:
    kv = KVConfigManager(None)
    assert kv.get_kv_config("ns", "k") is None
    assert kv.get_kv_list_by_namespace("ns") is None
    assert kv.put_kv_config("ns", "k", "v")
    assert not kv.put_kv_config("ns", "k", "v")  # unchanged
    assert kv.put_kv_config("ns", "k", "v2")
    assert kv.get_kv_config("ns", "k") == "v2"
    listing = kv.get_kv_list_by_namespace("ns")
    assert listing == {"k": "v2"}
    assert listing is not None
    listing["x"] = "y"  # a copy
    assert kv.get_kv_config("ns", "x") is None
    assert kv.delete_kv_config("ns", "k")
    assert not kv.delete_kv_config("ns", "k")
    assert not kv.delete_kv_config("other", "k")
    assert kv.get_kv_list_by_namespace("ns") == {}  # the emptied namespace stays, as in Java
    assert kv.namespaces() == ["ns"]
    assert not kv.load()
    kv.persist()  # no path: nothing to write, no error


def test_persist_shape_and_reload(tmp_path: Path) -> None:
    path = tmp_path / "namesrv" / "kvConfig.json"
    kv = KVConfigManager(path, fsync=False)
    assert not kv.load()
    kv.put_kv_config("ORDER_TOPIC_CONFIG", "T1", "broker-a:4;broker-b:4")
    kv.put_kv_config("other", "é", "ü")
    kv.persist()
    assert json.loads(path.read_text()) == {
        "configTable": {"ORDER_TOPIC_CONFIG": {"T1": "broker-a:4;broker-b:4"}, "other": {"é": "ü"}}
    }
    again = KVConfigManager(path)
    assert again.load()
    assert again.snapshot() == kv.snapshot()


def test_snapshot_then_write_in_two_steps(tmp_path: Path) -> None:
    path = tmp_path / "kv.json"
    kv = KVConfigManager(path, fsync=False)
    kv.put_kv_config("ns", "a", "1")
    data = kv.encode()  # taken on the loop
    kv.put_kv_config("ns", "b", "2")  # later change not in this snapshot
    kv.write(data)  # in the executor
    assert json.loads(path.read_text()) == {"configTable": {"ns": {"a": "1"}}}


def test_reads_java_written_file(tmp_path: Path) -> None:
    path = tmp_path / "kvConfig.json"
    path.write_text('{\n\t"configTable":{\n\t\t"ORDER_TOPIC_CONFIG":{\n\t\t\t"T":"b:4"\n\t\t}\n\t}\n}')
    kv = KVConfigManager(path)
    assert kv.load()
    assert kv.get_kv_config("ORDER_TOPIC_CONFIG", "T") == "b:4"


def test_corrupt_file_falls_back_to_backup(tmp_path: Path) -> None:
    path = tmp_path / "kvConfig.json"
    kv = KVConfigManager(path, fsync=False)
    kv.put_kv_config("ns", "k", "old")
    kv.persist()
    kv.put_kv_config("ns", "k", "new")
    kv.persist()
    path.write_text('{"configTable": {"ns": ')  # damaged behind our back
    restored = KVConfigManager(path)
    assert restored.load()
    assert restored.get_kv_config("ns", "k") == "old"


def test_wrong_shape_is_corrupt(tmp_path: Path) -> None:
    path = tmp_path / "kvConfig.json"
    path.write_text('{"configTable": {"ns": "not an object"}}')
    with pytest.raises(PersistCorruptError, match="ns"):
        KVConfigManager(path).load()
