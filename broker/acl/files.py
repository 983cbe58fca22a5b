"""Where the ACL files are and how they are read and written (RocketMQ 4.9 ``PlainPermissionManager``).

Files, under ``rocketmqHome`` (``ROCKETMQ_HOME``):

* ``conf/plain_acl.yml``: the default file (global white list, accounts; new accounts go here);
* every ``*.yml`` / ``*.yaml`` below ``conf/acl/`` (sub-folders too, sorted by path), read before
  the default file, as RocketMQ lists them; ``conf/tools.yml`` (client credentials) is skipped.

Writes (admin commands) replace a file atomically (``.bak`` keeps the previous content) and bump
its ``dataVersion``. YAML is parsed with ``safe_load`` only.
"""

from __future__ import annotations

import os
from typing import Any

import yaml

from pocketmq.broker.acl.rules import AclConfigError, AclRules, build_rules
from pocketmq.remoting.common.persist import atomic_write_text

__all__ = ["AclFiles", "Fingerprint", "yaml_problem"]

DEFAULT_FILE = os.path.join("conf", "plain_acl.yml")
ACL_DIR = os.path.join("conf", "acl")
TOOLS_FILE = os.path.join("conf", "tools.yml")

#: (path, mtime_ns, size) of every ACL file: a change of any means "reload".
Fingerprint = tuple[tuple[str, int, int], ...]


def yaml_problem(exc: yaml.YAMLError) -> str:
    """What is wrong and where, without the quoted source line (it may hold a secret key)."""
    problem = getattr(exc, "problem", None) or getattr(exc, "context", None) or type(exc).__name__
    mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
    return f"{problem}{where}"


class AclFiles:
    """The ACL files of one ``rocketmqHome``."""

    def __init__(self, home: str, *, fsync: bool = True) -> None:
        self.home = os.path.abspath(home)
        self.default_file = os.path.join(self.home, DEFAULT_FILE)
        self.acl_dir = os.path.join(self.home, ACL_DIR)
        self._tools_file = os.path.join(self.home, TOOLS_FILE)
        self._fsync = fsync

    def paths(self) -> list[str]:
        """Every ACL file that exists, in load order."""
        out: list[str] = []
        if os.path.isdir(self.acl_dir):
            for root, dirs, names in os.walk(self.acl_dir):
                dirs.sort()
                for name in sorted(names):
                    path = os.path.join(root, name)
                    if name.endswith((".yml", ".yaml")) and path != self._tools_file:
                        out.append(path)
        if os.path.isfile(self.default_file) and self.default_file not in out:
            out.append(self.default_file)
        return out

    def fingerprint(self) -> Fingerprint:
        out: list[tuple[str, int, int]] = []
        for path in self.paths():
            try:
                st = os.stat(path)
            except OSError:
                continue
            out.append((path, st.st_mtime_ns, st.st_size))
        return tuple(out)

    def read(self, path: str) -> Any:
        """One file's parsed YAML (``None`` for an empty file).

        Raises:
            AclConfigError: unreadable, or not YAML.
        """
        try:
            with open(path, encoding="utf-8") as f:
                text = f.read()
        except OSError as exc:
            raise AclConfigError(f"{path}: cannot read: {exc.strerror or exc}") from None
        try:
            return yaml.safe_load(text)
        except yaml.YAMLError as exc:
            raise AclConfigError(f"{path}: not valid YAML: {yaml_problem(exc)}") from None

    def load(self) -> tuple[AclRules, Fingerprint]:
        """The rules of every file, and the fingerprint they were read at.

        Raises:
            AclConfigError: no ACL file at all, or any file unreadable or invalid.
        """
        fingerprint = self.fingerprint()
        paths = [p for p, _, _ in fingerprint]
        if not paths:
            raise AclConfigError(
                f"no ACL file: {self.default_file} does not exist and {self.acl_dir} holds no *.yml file"
            )
        return build_rules([(path, self.read(path)) for path in paths]), fingerprint

    def write(self, path: str, doc: dict[str, Any]) -> None:
        """Replace ``path`` with ``doc`` (key order kept).

        Raises:
            OSError: the write failed (the old file is intact).
        """
        text = yaml.safe_dump(doc, sort_keys=False, default_flow_style=False, allow_unicode=True)
        atomic_write_text(path, text, fsync=self._fsync)
