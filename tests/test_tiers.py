"""tests/conftest.py: which tests are marked integration, and how the quarantine list applies."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from pocketmq.testing import cluster
from tests import conftest
from tests.broker.helpers import running_broker

ROOT = Path(__file__).resolve().parents[1]


async def _starts_a_cluster() -> None:
    async with cluster() as c:
        del c


async def _starts_one_in_a_nested_function() -> None:
    async def inner() -> None:
        async with running_broker("/nonexistent") as b:
            del b

    await inner()


def _uses_a_name_that_only_looks_like_a_starter(config: Any) -> Any:
    cluster = config.cluster  # an attribute and a local: not pocketmq.testing.cluster
    return cluster


@pytest.mark.parametrize(
    ("function", "starts"),
    [
        (_starts_a_cluster, True),
        (_starts_one_in_a_nested_function, True),
        (_uses_a_name_that_only_looks_like_a_starter, False),
    ],
)
def test_server_starters_are_found_through_the_test_globals(function: Any, starts: bool) -> None:
    assert conftest.calls_a_starter(function.__code__, function.__globals__) is starts


def test_quarantine_names_a_test_or_all_its_parametrizations(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(conftest, "QUARANTINE", {"tests/x.py::test_y": "races the sweeper"})
    assert conftest.quarantine_reason("tests/x.py::test_y") == "races the sweeper"
    assert conftest.quarantine_reason("tests/x.py::test_y[a-1]") == "races the sweeper"
    assert conftest.quarantine_reason("tests/x.py::test_y_other") is None


def test_server_tests_are_marked_and_pure_ones_are_not() -> None:
    def collected(marker: str, *paths: str) -> set[str]:
        argv = [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "--collect-only",
            "-m",
            marker,
        ]
        out = subprocess.run([*argv, *paths], capture_output=True, text=True, cwd=ROOT, check=True).stdout
        return {line.split("[")[0] for line in out.splitlines() if "::" in line}

    paths = ("tests/broker/test_send.py", "tests/deploy/test_testing.py", "tests/remoting/test_transport.py")
    marked = collected("integration", *paths)
    unmarked = collected("not integration", *paths)
    assert any(
        nodeid.startswith("tests/broker/test_send.py::") for nodeid in marked
    )  # broker / running_broker
    assert {
        "tests/deploy/test_testing.py::test_record_requests_sees_what_the_brokers_receive",  # cluster()
        "tests/deploy/test_testing.py::test_cluster_in_thread_serves_blocking_callers",  # cluster_in_thread()
    } <= marked
    assert unmarked and all(nodeid.startswith("tests/") for nodeid in unmarked)
    assert not any(nodeid.startswith("tests/remoting/") for nodeid in marked)  # the transport tier
