"""Suite-wide test tiers: the ``integration`` marker is applied here, not in each test file.

A test is ``integration`` (real servers on loopback, in process or as subprocesses) when it
lives in a folder of such tests, uses a fixture that starts a server, or starts one in its own
body (calls one of ``SERVER_STARTERS``). ``pytest -m "not integration"`` is then the fast tier,
``pytest -m integration`` the rest. The transport tests (``tests/remoting``) are their own tier
(a bare ``RemotingServer`` on loopback), and stay unmarked.

Flaky tests are never retried. One that cannot be fixed at once goes in ``QUARANTINE`` with
the reason: it gets the ``quarantine`` marker (registered in pyproject.toml; ``-m quarantine``
runs just those) and a non-strict ``xfail``, so it still runs on every run, and its outcome
(xfailed / xpassed, with the reason) is in the summary (``-rxX``) until it is fixed and leaves
the list.
"""

from __future__ import annotations

import dis
import inspect
import types
from pathlib import Path
from typing import Any

import pytest

TESTS = Path(__file__).resolve().parent

#: Folders (under tests/) in which every test runs real servers.
SERVER_DIRS = ("integration", "interop")

#: Fixtures that start a real server, by the folder (under tests/) whose tests use them; "" is
#: every folder. ``item.fixturenames`` is the closure, so a fixture built on these counts too.
SERVER_FIXTURES: dict[str, frozenset[str]] = {
    "": frozenset({"pocketmq_cluster"}),  # pocketmq.testing.plugin
    "broker": frozenset({"broker"}),  # tests/broker/conftest.py: running_broker
    "namesrv": frozenset({"ns"}),  # tests/namesrv/test_processor.py: a started NamesrvController
    "spark": frozenset({"mq", "one", "two"}),  # ThreadedCluster / pocketmq.testing.cluster
}

#: Known flaky tests: node id (without parameters: every parametrization) -> why, and what
#: would fix it. Keep it short; an entry is a debt.
QUARANTINE: dict[str, str] = {}

#: What starts a server when a test body calls it (``module.qualname`` of the object).
SERVER_STARTERS = frozenset(
    {
        "pocketmq.testing.cluster",
        "pocketmq.testing.cluster_in_thread",
        "tests.broker.helpers.running_broker",
        "pocketmq.broker.controller.BrokerController",
        "pocketmq.namesrv.controller.NamesrvController",
    }
)


def runs_servers(item: pytest.Item) -> bool:
    """Whether ``item`` starts real servers (see the module docstring)."""
    try:
        parts = Path(str(item.path)).resolve().relative_to(TESTS).parts
    except ValueError:  # not under tests/
        return False
    folder = parts[0] if len(parts) > 1 else ""
    if folder in SERVER_DIRS:
        return True
    names = set(getattr(item, "fixturenames", ()))
    if names & (SERVER_FIXTURES[""] | SERVER_FIXTURES.get(folder, frozenset())):
        return True
    function = getattr(item, "function", None)
    if function is None:
        return False
    function = inspect.unwrap(function)
    code = getattr(function, "__code__", None)
    return code is not None and calls_a_starter(code, getattr(function, "__globals__", {}))


def calls_a_starter(code: types.CodeType, namespace: dict[str, Any]) -> bool:
    """Whether ``code`` (or a function nested in it) loads one of ``SERVER_STARTERS`` as a global."""
    for ins in dis.get_instructions(code):
        if ins.opname in ("LOAD_GLOBAL", "LOAD_NAME") and ins.argval in namespace:
            obj = namespace[ins.argval]
            if f"{getattr(obj, '__module__', '')}.{getattr(obj, '__qualname__', '')}" in SERVER_STARTERS:
                return True
    return any(
        isinstance(const, types.CodeType) and calls_a_starter(const, namespace) for const in code.co_consts
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if runs_servers(item) and item.get_closest_marker("integration") is None:
            item.add_marker(pytest.mark.integration)
        reason = quarantine_reason(item.nodeid)
        if reason is not None:
            item.add_marker(pytest.mark.quarantine(reason=reason))
            # still run; a failure is reported as xfailed (with the reason), a pass as xpassed
            item.add_marker(pytest.mark.xfail(reason=f"quarantined: {reason}", strict=False))


def quarantine_reason(nodeid: str) -> str | None:
    """The reason ``nodeid`` is quarantined (an entry names a test, or all of a parametrized one)."""
    for name, reason in QUARANTINE.items():
        if nodeid == name or nodeid.startswith(name + "["):
            return reason
    return None
