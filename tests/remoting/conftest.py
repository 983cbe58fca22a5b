"""Each test starts with fresh rate limiters: a warning logged by an earlier test must not be
suppressed in the next one (``remoting.transport.limits.RateLimitedLog``)."""

from __future__ import annotations

import pytest

from pocketmq.remoting.transport import connection, server
from pocketmq.remoting.transport.limits import RateLimitedLog


@pytest.fixture(autouse=True)
def fresh_rate_limits(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(connection, "_limited_log", RateLimitedLog(connection.logger))
    monkeypatch.setattr(server, "_limited_log", RateLimitedLog(server.logger))
