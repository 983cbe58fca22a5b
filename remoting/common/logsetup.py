"""Logging set-up for the server entry points (``mqnamesrv``, ``mqbroker``), RocketMQ style.

The first of ``logging.json`` (``dictConfig``), ``logging.ini`` or ``logging.conf``
(``fileConfig``) found in ``$ROCKETMQ_HOME/conf`` and then in the directory of the ``-c`` config
file is used; without one, ``basicConfig`` on stderr at the given level. Library code never
configures logging.
"""

from __future__ import annotations

import json
import logging
import logging.config
import os
import sys
from pathlib import Path

NAMES = ("logging.json", "logging.ini", "logging.conf")


def logging_file(conf_path: str | None = None) -> Path | None:
    """The logging config file to use, or None."""
    dirs: list[Path] = []
    home = os.environ.get("ROCKETMQ_HOME")
    if home:
        dirs.append(Path(home) / "conf")
    if conf_path:
        dirs.append(Path(conf_path).resolve().parent)
    for d in dirs:
        for name in NAMES:
            if (d / name).is_file():
                return d / name
    return None


def configure_logging(level: str = "INFO", conf_path: str | None = None) -> None:
    """Apply the logging config file if one exists, else ``basicConfig`` on stderr.

    Raises:
        ValueError / KeyError / OSError: the file exists but is not a valid logging config.
    """
    path = logging_file(conf_path)
    if path is not None:
        if path.suffix == ".json":
            logging.config.dictConfig(json.loads(path.read_text(encoding="utf-8")))
        else:
            logging.config.fileConfig(path, disable_existing_loggers=False)
        return
    logging.basicConfig(
        level=getattr(logging, level.upper(), logging.INFO),
        format="%(asctime)s %(levelname)-5s [%(name)s] %(message)s",
        stream=sys.stderr,
    )
