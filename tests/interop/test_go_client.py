"""Apache RocketMQ's Go client (``rocketmq-client-go/v2``, pinned in tests/interop/go/go.mod)
against pocketmq's real servers: one name server + broker (processes) and one driver process
running every scenario at once (``make go-deps`` builds it), and transactions (commit,
rollback, check-back) on a broker with a 1 s check interval.
"""

from __future__ import annotations

import uuid

import pytest

from tests.interop import scenario_runs as runs

CORE = [
    "sync", "async", "oneway_close", "batch", "delay", "tag_filter", "orderly", "broadcasting",
    "clustering", "retry", "pull_poll", "pull_from", "zlib", "sdk_produced",
]  # fmt: skip
TX_KEYS = {"transactionCheckInterval": "1000", "transactionTimeOut": "1000"}
#: ``oneway_close`` (the Go client closes right after its oneway sends, with replies unread: an
#: RST): a 4 MiB receive buffer on the broker's listening socket holds the whole burst whatever
#: the broker's loop is doing, so the scenario checks that every request that reached the broker
#: is served (tests/fault/test_oneway_rst.py pins that buffer).
CORE_KEYS = {"serverSocketRcvBufSize": str(4 * 1024 * 1024)}


def _run(tmp, scenarios: list[str], keys: dict[str, str] | None = None) -> runs.ScenarioResults:  # type: ignore[no-untyped-def]
    runs.go_available()
    run_id = uuid.uuid4().hex[:10]

    def argv(namesrv: str) -> list[str]:
        return runs.go_argv(namesrv, scenarios, run_id=run_id)

    topics = [f"GO_{s}_{run_id}" for s in scenarios]

    def before(namesrv: str) -> None:
        if "sdk_produced" in scenarios:
            runs.produce_with_sdk(namesrv, f"GO_sdk_produced_{run_id}")

    return runs.group_on_servers(tmp, argv, keys, topics=topics, before=before)


@pytest.fixture(scope="module")
def core(tmp_path_factory: pytest.TempPathFactory) -> runs.ScenarioResults:
    return _run(tmp_path_factory.mktemp("go-core"), CORE, CORE_KEYS)


@pytest.fixture(scope="module")
def tx(tmp_path_factory: pytest.TempPathFactory) -> runs.ScenarioResults:
    return _run(tmp_path_factory.mktemp("go-tx"), ["transaction"], TX_KEYS)


@pytest.mark.parametrize("scenario", CORE)
def test_go_core(core: runs.ScenarioResults, scenario: str) -> None:
    core.check(scenario)


def test_go_transaction(tx: runs.ScenarioResults) -> None:
    tx.check("transaction")
