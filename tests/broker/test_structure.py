"""Guard rail of the broker's shape: no module but the composition root (and the entry point)
imports the controller. (That the store is used only through its facade ``pocketmq.store`` is
the import-linter contract ``broker-uses-store-facade``.)"""

from __future__ import annotations

import ast
from pathlib import Path

import pocketmq.broker

BROKER_DIR = Path(pocketmq.broker.__file__).resolve().parent
ROOTS = {"controller.py", "__main__.py"}


def imported_modules(path: Path) -> set[str]:
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            out.add(node.module)
    return out


def broker_modules() -> list[Path]:
    paths = sorted(BROKER_DIR.rglob("*.py"))
    assert len(paths) > 20
    return paths


def test_only_the_composition_root_imports_the_controller():
    offenders = [
        str(p.relative_to(BROKER_DIR))
        for p in broker_modules()
        if p.name not in ROOTS and "pocketmq.broker.controller" in imported_modules(p)
    ]
    assert offenders == []


def test_every_handler_table_names_a_method_of_its_processor():
    from pocketmq.broker.processor.admin_broker import BrokerAdmin
    from pocketmq.broker.processor.admin_consumer import ConsumerAdmin
    from pocketmq.broker.processor.admin_group import GroupAdmin
    from pocketmq.broker.processor.admin_topic import TopicAdmin
    from pocketmq.broker.processor.client_manage import ClientManageProcessor
    from pocketmq.broker.processor.consumer_manage import ConsumerManageProcessor
    from pocketmq.broker.processor.query import QueryMessageProcessor

    tables = [
        BrokerAdmin,
        ConsumerAdmin,
        GroupAdmin,
        TopicAdmin,
        ClientManageProcessor,
        ConsumerManageProcessor,
    ]
    for cls in [*tables, QueryMessageProcessor]:
        assert cls.HANDLERS, cls
        missing = [name for name in cls.HANDLERS.values() if not callable(getattr(cls, name, None))]
        assert missing == [], cls
