"""The README's Python example runs as a user runs it: twice in a row, in fresh processes.

Issue 22 defect 7: the push-consumer example timed out on its second run. The program is the
README's first ``python`` block with the name server address swapped for the test cluster's.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.spark.cluster import ThreadedCluster

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]


def readme_block(index: int) -> str:
    blocks = re.findall(r"```python\n(.*?)```", (ROOT / "README.md").read_text(), flags=re.S)
    return blocks[index]


def test_push_example_runs_twice(tmp_path: Path) -> None:
    mq = ThreadedCluster(brokers=1)
    try:
        mq.create_topic("Hello", 4)
        script = tmp_path / "hello.py"
        script.write_text(readme_block(0).replace("127.0.0.1:9876", mq.namesrv))
        for run in (1, 2):
            proc = subprocess.run(
                [sys.executable, str(script)], capture_output=True, text=True, timeout=90, cwd=tmp_path
            )
            assert proc.returncode == 0, f"run {run}:\n{proc.stdout}\n{proc.stderr}"
            received = [line for line in proc.stdout.splitlines() if line.startswith("Hello TagA k1")]
            assert received, f"run {run} received nothing:\n{proc.stdout}\n{proc.stderr}"
    finally:
        mq.close()
