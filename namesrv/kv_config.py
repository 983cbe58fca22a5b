"""KV config of the name server: ``namespace → key → value``, persisted as ``kvConfig.json``.

File shape (fastjson, RocketMQ's ``KVConfigSerializeWrapper``)::

    {"configTable":{"<namespace>":{"<key>":"<value>"}}}

The table itself is pure: ``put``/``delete`` only change memory and report whether anything
changed. Persistence is explicit and atomic (``remoting.common.persist``: temp file, fsync,
rename, previous version kept as ``.bak``; loading falls back to the ``.bak`` when the main file
is corrupt). A caller on the event loop takes the snapshot with :meth:`KVConfigManager.encode`
on the loop and writes it with :meth:`KVConfigManager.write` in the executor, so the loop never
waits for fsync and the snapshot is consistent.
"""

from __future__ import annotations

import os
from typing import Any

from pocketmq.remoting.common import persist
from pocketmq.remoting.protocol import fastjson
from pocketmq.remoting.protocol.fastjson import BodyFormatError, as_object, get_dict

__all__ = ["KVConfigManager"]


def _parse(data: bytes) -> dict[str, dict[str, str]]:
    obj = as_object(fastjson.loads(data), "kvConfig")
    table: dict[str, dict[str, str]] = {}
    for namespace, entries in get_dict(obj, "configTable").items():
        if not isinstance(entries, dict):
            raise BodyFormatError(f"namespace {namespace!r} is not an object", field="configTable")
        table[str(namespace)] = {str(k): "" if v is None else str(v) for k, v in entries.items()}
    return table


class KVConfigManager:
    """The KV table; implements route_info's ``KvLookup``.

    Args:
        path: the ``kvConfig.json`` file; ``None`` keeps everything in memory.
        fsync: sync writes to disk (tests may turn it off).
    """

    def __init__(self, path: str | os.PathLike[str] | None, *, fsync: bool = True) -> None:
        self.path = None if path is None else os.fspath(path)
        self.fsync = fsync
        self._table: dict[str, dict[str, str]] = {}

    # -- persistence -------------------------------------------------------------------------

    def load(self) -> bool:
        """Replace the table with the file's content (or its ``.bak``); ``False`` if neither exists.

        Raises:
            persist.PersistCorruptError: the file and its backup are both unreadable.
        """
        if self.path is None:
            return False
        table = persist.load_bytes(self.path, _parse)
        if table is None:
            return False
        self._table = table
        return True

    def encode(self) -> bytes:
        """A consistent snapshot of the table in the file's format (pretty, like fastjson's)."""
        return fastjson.dumpb({"configTable": self._table}, pretty=True)

    def write(self, data: bytes) -> None:
        """Atomically write an :meth:`encode` snapshot (blocking: run it in the executor).

        Raises:
            OSError: the write failed; the previous file is intact.
        """
        if self.path is not None:
            persist.atomic_write_bytes(self.path, data, fsync=self.fsync)

    def persist(self) -> None:
        """``write(encode())`` in one blocking call.

        Raises:
            OSError: the write failed; the previous file is intact.
        """
        self.write(self.encode())

    # -- table -------------------------------------------------------------------------------

    def put_kv_config(self, namespace: str, key: str, value: str) -> bool:
        """Set a value; ``True`` when the table changed."""
        entries = self._table.setdefault(namespace, {})
        if entries.get(key) == value:
            return False
        entries[key] = value
        return True

    def delete_kv_config(self, namespace: str, key: str) -> bool:
        """Remove a value; ``True`` when something was removed.

        An emptied namespace stays (as in Java), so GET_KVLIST_BY_NAMESPACE then answers an empty
        table rather than QUERY_NOT_FOUND.
        """
        entries = self._table.get(namespace)
        if entries is None or key not in entries:
            return False
        del entries[key]
        return True

    def get_kv_config(self, namespace: str, key: str) -> str | None:
        entries = self._table.get(namespace)
        return None if entries is None else entries.get(key)

    def get_kv_list_by_namespace(self, namespace: str) -> dict[str, str] | None:
        """A copy of the namespace's table; ``None`` when the namespace does not exist."""
        entries = self._table.get(namespace)
        return None if entries is None else dict(entries)

    def namespaces(self) -> list[str]:
        return sorted(self._table)

    def snapshot(self) -> dict[str, Any]:
        """A deep copy of the whole table (for tooling and tests)."""
        return {ns: dict(entries) for ns, entries in self._table.items()}
