"""Interop fixtures: driver logs go under pytest's basetemp, which pytest prunes itself."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.interop import drivers


@pytest.fixture(scope="session", autouse=True)
def driver_log_root(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    drivers.LOG_ROOT = tmp_path_factory.mktemp("driver-logs")
    yield
    drivers.LOG_ROOT = None
