from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from pocketmq.remoting.common import persist
from pocketmq.remoting.common.persist import PersistCorruptError


def test_first_write_has_no_backup(tmp_path: Path) -> None:
    path = tmp_path / "config" / "topics.json"
    persist.atomic_write_text(path, "one")
    assert path.read_text() == "one"
    assert not (tmp_path / "config" / "topics.json.bak").exists()
    assert not (tmp_path / "config" / "topics.json.tmp").exists()


def test_second_write_keeps_previous_as_bak(tmp_path: Path) -> None:
    path = tmp_path / "kv.json"
    persist.atomic_write_text(path, "v1")
    persist.atomic_write_text(path, "v2")
    persist.atomic_write_text(path, "v3")
    assert path.read_text() == "v3"
    assert Path(str(path) + ".bak").read_text() == "v2"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["kv.json", "kv.json.bak"]


def test_no_backup_when_disabled(tmp_path: Path) -> None:
    path = tmp_path / "x"
    persist.atomic_write_bytes(path, b"1", keep_backup=False, fsync=False)
    persist.atomic_write_bytes(path, b"2", keep_backup=False, fsync=False)
    assert path.read_bytes() == b"2"
    assert not Path(str(path) + ".bak").exists()


def test_failed_write_leaves_old_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "x.json"
    persist.atomic_write_text(path, "old")

    def broken_replace(src: str, dst: str) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", broken_replace)
    with pytest.raises(OSError):
        persist.atomic_write_text(path, "new")
    monkeypatch.undo()
    assert path.read_text() == "old"
    assert not Path(str(path) + ".tmp").exists()


def test_load_json_lenient_and_missing(tmp_path: Path) -> None:
    path = tmp_path / "consumerOffset.json"
    assert persist.load_json(path) is None
    path.write_text('{"offsetTable":{"T@G":{0:12,1:7}}}')
    assert persist.load_json(path) == {"offsetTable": {"T@G": {0: 12, 1: 7}}}


def test_load_falls_back_to_bak_when_main_is_corrupt(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "topics.json"
    persist.atomic_write_json(path, {"v": 1})
    persist.atomic_write_json(path, {"v": 2})
    path.write_text('{"v": 3, "trunc')  # torn by something outside our protocol
    assert persist.load_json(path) == {"v": 1}
    assert "backup" in caplog.text


def test_load_falls_back_when_main_empty_or_missing(tmp_path: Path) -> None:
    path = tmp_path / "a.json"
    persist.atomic_write_json(path, {"v": 1})
    persist.atomic_write_json(path, {"v": 2})
    path.write_text("")
    assert persist.load_json(path) == {"v": 1}
    path.unlink()
    assert persist.load_json(path) == {"v": 1}


def test_both_corrupt_raises_naming_files(tmp_path: Path) -> None:
    path = tmp_path / "b.json"
    path.write_text("{garbage")
    Path(str(path) + ".bak").write_text("[also garbage")
    with pytest.raises(PersistCorruptError) as info:
        persist.load_json(path)
    assert "b.json" in str(info.value)
    assert len(info.value.reasons) == 2


def test_custom_parser_and_text(tmp_path: Path) -> None:
    path = tmp_path / "c.txt"
    persist.atomic_write_text(path, "42")
    assert persist.load_text(path, int) == 42
    path.write_text("x")
    with pytest.raises(PersistCorruptError):
        persist.load_text(path, int)


def test_pretty_json_is_readable_by_stdlib(tmp_path: Path) -> None:
    path = tmp_path / "d.json"
    persist.atomic_write_json(path, {"b": [1, 2], "a": {"x": "y"}})
    text = path.read_text()
    assert "\t" in text
    assert json.loads(text) == {"a": {"x": "y"}, "b": [1, 2]}


def test_bak_survives_as_hardlink_target(tmp_path: Path) -> None:
    # the backup must be the old content, not a link that later writes change
    path = tmp_path / "e.json"
    persist.atomic_write_text(path, "1")
    persist.atomic_write_text(path, "2")
    bak = Path(str(path) + ".bak")
    assert bak.read_text() == "1"
    persist.atomic_write_text(path, "3")
    assert bak.read_text() == "2"
    assert path.read_text() == "3"
