"""A ``StreamingQueryListener`` that turns each progress into Kafka's lag metrics.

    from pocketmq.spark.progress import LagListener

    lag = LagListener()
    spark.streams.addListener(lag)
    ...
    lag.latest(query.id)   # [{"minOffsetsBehindLatest": "0", "maxOffsetsBehindLatest": "120", ...}]

It runs on the driver, keeps the metrics of each query's last progress and logs them at INFO
(logger ``pocketmq.spark``). The numbers come from :func:`pocketmq.spark.lag.source_lag`.
"""

from __future__ import annotations

import json
import logging
import threading
from typing import Any

from pyspark.sql.streaming.listener import StreamingQueryListener

from pocketmq.spark.lag import source_lag

logger = logging.getLogger("pocketmq.spark")


class LagListener(StreamingQueryListener):
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._latest: dict[str, list[dict[str, str] | None]] = {}

    def latest(self, query_id: Any) -> list[dict[str, str] | None]:
        """Lag metrics per source of the query's last progress ([] before its first one)."""
        with self._lock:
            return list(self._latest.get(str(query_id), []))

    def onQueryStarted(self, event: Any) -> None:
        pass

    def onQueryProgress(self, event: Any) -> None:
        progress = json.loads(event.progress.json)
        lags = source_lag(progress)
        with self._lock:
            self._latest[str(progress.get("id"))] = lags
        for i, lag in enumerate(lags):
            if lag is not None:
                logger.info(
                    "query %s batch %s source %d: %s", progress.get("id"), progress.get("batchId"), i, lag
                )

    def onQueryIdle(self, event: Any) -> None:
        pass

    def onQueryTerminated(self, event: Any) -> None:
        pass
