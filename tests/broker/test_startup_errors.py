"""Startup errors a user can act on (issue 23): one clear line naming the file or key."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from pocketmq.broker.topic_config import TopicConfigManager
from pocketmq.remoting.common.persist import PersistCorruptError
from pocketmq.remoting.protocol.route import TopicConfig


def test_null_topic_table_is_refused_not_started_from_empty(tmp_path: Path) -> None:
    (tmp_path / "topics.json").write_text('{"topicConfigTable": null}')
    manager = TopicConfigManager(str(tmp_path), broker_name="b", cluster_name="c", now_ms=lambda: 1)
    with pytest.raises(PersistCorruptError, match="topicConfigTable is missing or null"):
        manager.load()


def test_null_topic_table_falls_back_to_the_backup(tmp_path: Path) -> None:
    good = TopicConfigManager(str(tmp_path), broker_name="b", cluster_name="c", now_ms=lambda: 1)
    good.update_topic_config(TopicConfig("Kept", 4, 4))
    good.persist()
    (tmp_path / "topics.json").rename(tmp_path / "topics.json.bak")
    (tmp_path / "topics.json").write_text('{"topicConfigTable": null}')
    manager = TopicConfigManager(str(tmp_path), broker_name="b", cluster_name="c", now_ms=lambda: 1)
    assert manager.load()
    assert "Kept" in manager.table


def run_broker(tmp_path: Path, conf: bytes) -> subprocess.CompletedProcess[str]:
    path = tmp_path / "broker.conf"
    path.write_bytes(conf)
    return subprocess.run(
        [sys.executable, "-m", "pocketmq.broker", "-c", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
    )


def test_startup_failure_is_one_line_without_a_traceback(tmp_path: Path) -> None:
    store = tmp_path / "store"
    (store / "config").mkdir(parents=True)
    (store / "config" / "topics.json").write_text('{"topicConfigTable": null}')
    done = run_broker(tmp_path, f"brokerName=b\nlistenPort=0\nstorePathRootDir={store}\n".encode())
    assert done.returncode == 1
    assert "Traceback" not in done.stderr
    (line,) = [ln for ln in done.stderr.splitlines() if ln.startswith("mqbroker:")]
    assert "topics.json" in line and "topicConfigTable" in line


def test_non_utf8_conf_and_oversized_segment_name_file_and_key(tmp_path: Path) -> None:
    done = run_broker(tmp_path, b"brokerName=caf\xe9\n")
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "broker.conf:1: not UTF-8" in done.stderr
    done = run_broker(tmp_path, b"mappedFileSizeCommitLog=1000000000000000000000\n")
    assert done.returncode == 2 and "'mappedFileSizeCommitLog'" in done.stderr
