"""Finish the project's own editable ``.venv`` so Spark works in it as in a wheel install.

``make install`` runs ``python -m pocketmq.deploy.devenv`` after ``pip install -e``. Two things
differ between an editable install and a wheel, and both break ``format("rocketmq")``:

1. setuptools serves an editable install with folder mappings (``pocketmq.spark`` is ``spark/``)
   through an import hook. PySpark registers Python data sources by listing the top-level
   ``pyspark_*`` modules with ``pkgutil.iter_modules()``, which sees only ``sys.path``
   entries, so the auto-registration shim ``pyspark_rocketmq`` stays invisible.
2. Spark starts its Python workers with ``$PYSPARK_PYTHON``, else ``python3`` from ``PATH``:
   unless the venv is activated, that is the system interpreter, without pocketmq or pyarrow.

The ``.pth`` file written here fixes both for every interpreter of this venv: its first line
puts ``spark/autoregister`` (which holds only the shim) on ``sys.path``; its second line sets
``PYSPARK_PYTHON`` to the venv's interpreter when it is not set already (an explicit setting
wins). A wheel install needs neither: the shim is a real top-level package there, and an
activated venv puts its ``python3`` first on ``PATH`` (spark/README.md).
"""

from __future__ import annotations

import sys
import sysconfig
from pathlib import Path

PTH_NAME = "pocketmq_spark_dev.pth"

#: A ``.pth`` line starting with ``import`` is executed at interpreter start (``site``).
ENV_LINE = "import os, sys; os.environ.setdefault('PYSPARK_PYTHON', sys.executable)"


def pth_text(repo: Path) -> str:
    return f"{(repo / 'spark' / 'autoregister').resolve()}\n{ENV_LINE}\n"


def install(repo: Path, site_packages: Path) -> Path:
    """Write the ``.pth`` file into ``site_packages``; returns its path."""
    shim = repo / "spark" / "autoregister" / "pyspark_rocketmq" / "__init__.py"
    if not shim.is_file():
        raise FileNotFoundError(f"{shim} not found: run this from the pocketmq repository")
    target = site_packages / PTH_NAME
    target.write_text(pth_text(repo))
    return target


def main() -> None:
    repo = Path(sys.argv[1]) if len(sys.argv) > 1 else Path.cwd()
    target = install(repo, Path(sysconfig.get_paths()["purelib"]))
    print(f"wrote {target}")


if __name__ == "__main__":
    main()
