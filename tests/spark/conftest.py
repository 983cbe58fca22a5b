"""Spark tier fixtures: ONE local[2] SparkSession for every Spark test, one shared real cluster.

Settings from SPARK_SOURCE.md §4.5: the venv's interpreter for the Python workers (pitfall
1), loopback only (pitfall 21), UI and progress bar off, 2 shuffle partitions, a modest
driver heap and the C1-only/serial-GC JVM (several seconds less start-up on 2 cores).

The auto-registration shim must be a top-level module on the workers' path. An installed wheel
puts ``pyspark_rocketmq`` in site-packages; an editable install only exposes it through an
import hook that PySpark's module scan (``pkgutil.iter_modules``) does not see, so in that case
a temporary directory with a symlink to ``spark/pyspark_rocketmq`` goes on ``PYTHONPATH``.
"""

from __future__ import annotations

import os
import pkgutil
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.spark.cluster import ThreadedCluster

ROOT = Path(__file__).resolve().parents[2]
FAULT_DIR_ENV = "POCKETMQ_SPARK_FAULT_DIR"  # read by pocketmq.spark.reader in the workers


def _expose_shim(tmp: Path) -> None:
    if any(m.name == "pyspark_rocketmq" for m in pkgutil.iter_modules()):
        return
    shim_dir = tmp / "shim"
    shim_dir.mkdir()
    (shim_dir / "pyspark_rocketmq").symlink_to(ROOT / "spark" / "pyspark_rocketmq")
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(shim_dir), os.environ.get("PYTHONPATH")) if p)


@pytest.fixture(scope="session")
def spark_env(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Environment the JVM and its Python workers inherit; returns the fault-injection dir."""
    tmp = tmp_path_factory.mktemp("spark")
    _expose_shim(tmp)
    faults = tmp / "faults"
    faults.mkdir()
    os.environ[FAULT_DIR_ENV] = str(faults)
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
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
