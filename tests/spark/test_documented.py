"""Issue 22 defect 1: the documented way to use Spark works as written, with no test workaround.

Each case starts a clean subprocess, as a user's shell would: no ``PYSPARK_PYTHON``, no
``PYTHONPATH``, the working directory at the repository root, and

* the project's own ``.venv`` (what ``make install`` / ``make run`` builds): its interpreter
  run by path, NOT activated (``PATH`` without the venv), which is the harder case;
* a wheel of this checkout installed into a fresh venv, which is then "activated" (its
  ``bin`` first on ``PATH``, ``VIRTUAL_ENV`` set) as spark/README.md says. The fresh venv gets
  its third-party dependencies (pyspark, pyarrow, pydantic, ...) through a path entry to the
  project venv's site-packages instead of a second 400 MB download: only ``pocketmq`` and
  ``pyspark_rocketmq`` come from the wheel (asserted).

Both run spark/README.md's python blocks (one program, name server address and paths swapped
for the test's) and ``spark/examples/tag_counts.py`` from the command line.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from tests.spark.cluster import ThreadedCluster

pytestmark = [pytest.mark.spark, pytest.mark.integration, pytest.mark.timeout(900)]

ROOT = Path(__file__).resolve().parents[2]
VENV_PYTHON = ROOT / ".venv" / "bin" / "python"
PER_QUEUE = 120  # the README's batch starts broker-a queue 0 at offset 100


def readme_program(namesrv: str, tmp: Path) -> str:
    text = (ROOT / "spark" / "README.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, flags=re.S)
    assert len(blocks) >= 4, "spark/README.md lost its examples"
    program = "\n".join(blocks)
    return program.replace("127.0.0.1:9876", namesrv).replace("/tmp/rocketmq-demo", str(tmp / "demo"))


def clean_env(path_first: Path | None) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON", "PYTHONPATH", "VIRTUAL_ENV")
    }
    parts = [p for p in env.get("PATH", "").split(os.pathsep) if p and not p.startswith(str(ROOT / ".venv"))]
    if path_first is not None:
        parts.insert(0, str(path_first / "bin"))
        env["VIRTUAL_ENV"] = str(path_first)
    env["PATH"] = os.pathsep.join(parts)
    env["SPARK_LOCAL_IP"] = "127.0.0.1"
    return env


def run(cmd: list[str], env: dict[str, str]) -> str:
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, f"{cmd} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-6000:]}"
    return proc.stdout


@pytest.fixture(scope="module")
def topics(mq: ThreadedCluster) -> str:
    for topic in ("Orders", "Payments"):
        mq.create_topic(topic, 2)
        mq.fill(topic, PER_QUEUE, 2)
    return mq.namesrv


def check_programs(python: str, env: dict[str, str], namesrv: str, tmp: Path) -> None:
    script = tmp / "readme_program.py"
    script.write_text(readme_program(namesrv, tmp))
    out = run([python, str(script)], env)
    total = 2 * 2 * PER_QUEUE  # two brokers x two queues
    assert f"{2 * total} rows" in out  # the stream read Orders and Payments
    assert all(f"'{tag}': 160" in out for tag in "ABC"), out  # totals() of the example pipeline
    out = run(
        [python, "spark/examples/tag_counts.py", "--name-server", namesrv, "--topic", "Payments",
         "--output", str(tmp / "tags"), "--checkpoint", str(tmp / "tags_cp"), "--available-now"],
        env,
    )  # fmt: skip
    assert sorted(out.split()) == sorted(["A", "160", "B", "160", "C", "160"]), out


def test_project_venv_as_documented(topics: str, tmp_path: Path) -> None:
    if not VENV_PYTHON.exists():
        pytest.skip("no project .venv (make install builds it)")
    check_programs(str(VENV_PYTHON), clean_env(None), topics, tmp_path)


def test_wheel_in_a_fresh_venv_as_documented(topics: str, tmp_path: Path) -> None:
    wheels = tmp_path / "wheels"
    run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(wheels), str(ROOT)],
        clean_env(None))  # fmt: skip
    (wheel,) = wheels.glob("pocketmq-*.whl")
    venv = tmp_path / "fresh"
    run([sys.executable, "-m", "venv", "--without-pip", str(venv)], clean_env(None))
    fresh_python = venv / "bin" / "python"
    site = Path(
        run(
            [str(fresh_python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            clean_env(None),
        ).strip()
    )
    # pip of the test's interpreter installs into the fresh venv's site-packages
    run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(site), str(wheel)],
        clean_env(None),
    )
    (site / "zz_dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    env = clean_env(venv)
    where = run(["python", "-c", "import pocketmq, pyspark_rocketmq; print(pocketmq.__path__[0]); print(pyspark_rocketmq.__file__)"], env)  # fmt: skip
    assert all(line.startswith(str(site)) for line in where.split()), where
    check_programs("python", env, topics, tmp_path)
