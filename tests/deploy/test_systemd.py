"""deploy/systemd units: well-formed, and they run the installed console scripts with -c."""

from __future__ import annotations

import shlex
import shutil
import subprocess
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
UNITS = ROOT / "deploy" / "systemd"


def parse(path: Path) -> dict[str, dict[str, list[str]]]:
    """systemd unit syntax: sections, repeated keys allowed, '#' comments."""
    sections: dict[str, dict[str, list[str]]] = {}
    current: dict[str, list[str]] | None = None
    for raw in path.read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("[") and line.endswith("]"):
            current = sections.setdefault(line[1:-1], {})
            continue
        assert current is not None, f"{path.name}: key outside a section: {line}"
        key, sep, value = line.partition("=")
        assert sep, f"{path.name}: not key=value: {line}"
        current.setdefault(key.strip(), []).append(value.strip())
    return sections


@pytest.mark.parametrize(
    ("unit", "script"), [("mqnamesrv.service", "mqnamesrv"), ("mqbroker@.service", "mqbroker")]
)
def test_unit_runs_the_console_script(unit: str, script: str) -> None:
    sections = parse(UNITS / unit)
    assert set(sections) == {"Unit", "Service", "Install"}
    service = sections["Service"]
    argv = shlex.split(service["ExecStart"][0])
    assert Path(argv[0]).name == script and argv[1] == "-c" and argv[2].endswith(".conf")
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert script in scripts
    assert service["KillSignal"] == ["SIGTERM"] and service["Restart"] == ["on-failure"]
    assert int(service["TimeoutStopSec"][0]) >= 30
    assert sections["Install"]["WantedBy"] == ["multi-user.target"]
    assert "network-online.target" in sections["Unit"]["After"][0]


def test_broker_unit_is_a_template_per_config() -> None:
    service = parse(UNITS / "mqbroker@.service")["Service"]
    assert service["ExecStart"][0].endswith("-c /etc/pocketmq/%i.conf")
    assert service["LimitNOFILE"] == ["655360"]


def test_systemd_analyze_accepts_the_units_when_available(tmp_path: Path) -> None:
    analyze = shutil.which("systemd-analyze")
    for unit in UNITS.iterdir():
        assert unit.suffix == ".service"
    if analyze is None:
        # not a systemd host (containers, CI): the parser test above covers the syntax
        pytest.skip(
            "systemd-analyze is not on PATH (not a systemd host); the unit parser test covers the syntax"
        )
    for unit in UNITS.iterdir():
        r = subprocess.run([analyze, "verify", "--man=no", str(unit)], capture_output=True, text=True)
        # the only complaint allowed: the install paths (/opt/pocketmq/venv/bin/...) do not exist here
        problems = [
            line for line in r.stderr.splitlines() if line.strip() and "is not executable" not in line
        ]
        assert problems == [], r.stderr
