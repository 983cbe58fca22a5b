"""Auto-registration shim: ``spark.read.format("rocketmq")`` with no ``spark.dataSource.register``.

PySpark (>= 4.0) looks, at the first use of a Python data source in a session, for top-level
modules named ``pyspark_<x>`` that expose ``DefaultSource`` (a ``DataSource`` subclass) and
registers each under its ``name()`` (``pyspark.sql.worker.lookup_data_sources``). This module is
installed top-level by the ``pocketmq`` distribution for exactly that lookup; everything else
lives in :mod:`pocketmq.spark`.
"""

from __future__ import annotations

from pocketmq.spark.source import RocketMQDataSource as DefaultSource

__all__ = ["DefaultSource"]
