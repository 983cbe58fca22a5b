"""The distribution installs the repository folders as the `pocketmq` namespace (ARCHITECTURE.md §1)."""

from __future__ import annotations

import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _config() -> dict:  # type: ignore[type-arg]
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]


def _expected_packages() -> set[str]:
    mapping = _config()["package-dir"]
    mapped_dirs = {(ROOT / folder).resolve() for folder in mapping.values()}
    found = set()
    for pkg, folder in mapping.items():
        base = (ROOT / folder).resolve()
        for init in base.rglob("__init__.py"):
            parent = init.parent.resolve()
            if "node_modules" in parent.parts or (parent != base and parent in mapped_dirs):
                continue  # a folder mapped to a package name of its own (deploy/testing)
            rel = parent.relative_to(base)
            found.add(".".join((pkg, *rel.parts)))
    return found


def test_package_list_matches_tree() -> None:
    listed = set(_config()["packages"])
    assert listed == _expected_packages()


def test_wheel_contains_and_imports_every_package(tmp_path: Path) -> None:
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(tmp_path),
            str(ROOT),
        ],
        check=True,
        capture_output=True,
    )
    (wheel,) = tmp_path.glob("pocketmq-*.whl")
    target = tmp_path / "site"
    with zipfile.ZipFile(wheel) as zf:
        zf.extractall(target)
        names = zf.namelist()
    assert "pocketmq/remoting/protocol/command.py" in names
    assert "pocketmq/client/py.typed" in names
    code = "import pocketmq.remoting.protocol.command, pocketmq.remoting.transport.server; import pocketmq.store, pocketmq.client; print(pocketmq.remoting.__file__)"
    out = subprocess.run(
        [sys.executable, "-I", "-c", f"import sys; sys.path.insert(0, {str(target)!r}); {code}"],
        check=True,
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert out.stdout.strip().startswith(str(target))
