"""Spark tier fixtures: ONE local[2] SparkSession for every Spark test, one shared real cluster.

Settings: loopback only (``SPARK_LOCAL_IP``: a machine whose host name resolves elsewhere would
otherwise bind the driver there), UI and progress bar off, 2 shuffle partitions, a modest
driver heap and the C1-only/serial-GC JVM (several seconds less start-up on 2 cores).

Nothing here helps Spark find the source or the venv's interpreter: the tests use the project's
``.venv`` as a user does (``make install`` sets it up, ``deploy/devenv.py``), and
``tests/spark/test_documented.py`` runs the documented examples in clean subprocesses.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.spark.cluster import ThreadedCluster

ROOT = Path(__file__).resolve().parents[2]
FAULT_DIR_ENV = "POCKETMQ_SPARK_FAULT_DIR"  # read by pocketmq.spark.reader in the workers


@pytest.fixture(scope="session")
def spark_env(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Environment the JVM and its Python workers inherit; returns the fault-injection dir."""
    tmp = tmp_path_factory.mktemp("spark")
    faults = tmp / "faults"
    faults.mkdir()
    os.environ[FAULT_DIR_ENV] = str(faults)
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    return faults


@pytest.fixture(scope="session")
def spark(spark_env: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    from pyspark.sql import SparkSession

    warehouse = tmp_path_factory.mktemp("warehouse")
    session = (
        SparkSession.builder.master("local[2]")
        .appName("pocketmq-spark-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.default.parallelism", "2")
        .config("spark.driver.memory", "768m")
        .config("spark.driver.extraJavaOptions", "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC")
        .config("spark.sql.warehouse.dir", str(warehouse))
        .config("spark.sql.streaming.stopTimeout", "10s")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    for query in session.streams.active:
        query.stop()
    session.stop()


@pytest.fixture(scope="session")
def mq() -> Iterator[ThreadedCluster]:
    """A real name server + two broker groups shared by the Spark tests (one topic per test)."""
    c = ThreadedCluster(brokers=2)
    yield c
    c.close()


@pytest.fixture
def fault_dir(spark_env: Path) -> Iterator[Path]:
    yield spark_env
    for leftover in spark_env.iterdir():
        leftover.unlink()
