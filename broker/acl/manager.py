"""``PlainAclManager``: the broker's current ACL rules, hot reload, and the admin updates.

* :meth:`load` at startup: any problem is an :class:`AclConfigError` (the broker refuses to start).
* :meth:`maybe_reload`, every ``aclFileWatchIntervalMs``: when a file was added, removed or changed,
  the files are read again; a broken edit keeps the last good rules and is logged once (with the
  reason) until the files change again. Connections are untouched: the next request simply sees
  the new rules.
* Admin updates (UPDATE_AND_CREATE_ACL_CONFIG, DELETE_ACL_CONFIG, UPDATE_GLOBAL_WHITE_ADDRS_CONFIG)
  build the edited document, check the whole new rule set, then write the file and switch to the
  new rules; a refused update writes nothing.

Secrets are never logged: log lines name access keys and files only.
"""

from __future__ import annotations

import dataclasses
import logging
import os
from collections.abc import Callable, Sequence
from typing import Any

from pocketmq.broker.acl.address import AddressPatternError, parse_address_pattern
from pocketmq.broker.acl.files import AclFiles, Fingerprint
from pocketmq.broker.acl.rules import (
    KEY_MIN_LENGTH,
    AclConfigError,
    AclRules,
    DataVersion,
    PlainAccessConfig,
    build_rules,
    check_resource_perms,
)

__all__ = ["PlainAclManager"]

logger = logging.getLogger(__name__)


class PlainAclManager:
    def __init__(self, files: AclFiles, *, now_ms: Callable[[], int]) -> None:
        self.files = files
        self._now_ms = now_ms
        self.rules = AclRules()
        self._fingerprint: Fingerprint = ()
        self._reported: Fingerprint | None = None
        #: Successful reloads after the first load (tests wait on it).
        self.reloads = 0

    # ---------------------------------------------------------------------------- loading
    def load(self) -> None:
        """Raises: AclConfigError (no file, or a file RocketMQ would refuse)."""
        rules, fingerprint = self.files.load()
        self._install(rules, fingerprint)
        logger.info(
            "ACL loaded: %d account(s), %d global white-list entr(ies) from %s",
            len(rules.accounts), len(rules.global_white), ", ".join(rules.files),
        )  # fmt: skip

    def _install(self, rules: AclRules, fingerprint: Fingerprint) -> None:
        for warning in rules.warnings:
            logger.warning("ACL: %s", warning)
        self.rules = rules
        self._fingerprint = fingerprint
        self._reported = None

    def maybe_reload(self) -> bool:
        """Reload when the files changed; True when new rules were installed."""
        fingerprint = self.files.fingerprint()
        if fingerprint in (self._fingerprint, self._reported):
            return False
        try:
            rules, fingerprint = self.files.load()
        except AclConfigError as exc:
            self._reported = fingerprint
            logger.error("ACL files changed but cannot be used; keeping the last good rules: %s", exc)
            return False
        self._install(rules, fingerprint)
        self.reloads += 1
        logger.info("ACL reloaded: %d account(s) from %s", len(rules.accounts), ", ".join(rules.files))
        return True

    # ------------------------------------------------------------------------ admin updates
    def _documents(self, replace: dict[str, dict[str, Any]]) -> list[tuple[str, Any]]:
        paths = [p for p, _, _ in self.files.fingerprint()]
        for path in replace:
            if path not in paths:
                paths.append(path)
        return [(p, replace[p] if p in replace else self.files.read(p)) for p in paths]

    def _commit(self, path: str, doc: dict[str, Any]) -> None:
        """Check the rule set with ``doc`` as ``path``, bump its version, write it, switch rules."""
        old = self.rules.versions.get(path, DataVersion())
        doc["dataVersion"] = [{"counter": old.counter + 1, "timestamp": self._now_ms()}]
        build_rules(self._documents({path: doc}))  # raises before anything is written
        self.files.write(path, doc)
        rules, fingerprint = self.files.load()
        self._install(rules, fingerprint)

    def _doc(self, path: str) -> dict[str, Any]:
        doc = self.files.read(path) if os.path.exists(path) else None
        if doc is None:
            return {}
        if not isinstance(doc, dict):
            raise AclConfigError(f"{path}: expected a mapping")
        return doc

    def update_account(self, cfg: PlainAccessConfig, *, keep_unset: frozenset[str] = frozenset()) -> None:
        """Create or update an account (in its file, or the default file when new).

        ``keep_unset`` names the fields the request left out (kept from the existing entry).

        Raises:
            AclConfigError: bad keys, permissions or white-list pattern (nothing written).
            OSError: the file could not be written.
        """
        existing = self.rules.accounts.get(cfg.access_key)
        if not cfg.secret_key and existing is not None:  # an update may leave the secret out
            cfg = dataclasses.replace(cfg, secret_key=existing.secret_key)
        if len(cfg.access_key) <= KEY_MIN_LENGTH or len(cfg.secret_key) <= KEY_MIN_LENGTH:
            raise AclConfigError(
                f"The accessKey={cfg.access_key} and secretKey cannot be null and length should longer than 6"
            )
        check_resource_perms(cfg.topic_perms)
        check_resource_perms(cfg.group_perms)
        try:
            parse_address_pattern(cfg.white_remote_address)
        except AddressPatternError as exc:
            raise AclConfigError(f"whiteRemoteAddress: {exc}") from None
        path = existing.source if existing is not None else self.files.default_file
        doc = self._doc(path)
        accounts = doc.get("accounts")
        if not isinstance(accounts, list):
            accounts = []
        entry: dict[str, Any] = {}
        for item in accounts:
            if isinstance(item, dict) and str(item.get("accessKey")) == cfg.access_key:
                entry = item
                accounts.remove(item)
                break
        fields: dict[str, Any] = {
            "accessKey": cfg.access_key,
            "secretKey": cfg.secret_key,
            "whiteRemoteAddress": cfg.white_remote_address,
            "admin": cfg.admin,
            "defaultTopicPerm": cfg.default_topic_perm,
            "defaultGroupPerm": cfg.default_group_perm,
            "topicPerms": list(cfg.topic_perms),
            "groupPerms": list(cfg.group_perms),
        }
        for key, value in fields.items():
            if key in keep_unset and key in entry:
                continue
            if value is None and key not in entry:
                continue
            entry[key] = value
        accounts.append(entry)
        doc["accounts"] = accounts
        self._commit(path, doc)
        logger.info("ACL account %s updated in %s", cfg.access_key, path)

    def delete_account(self, access_key: str) -> bool:
        """False when no file defines ``access_key``.

        Raises:
            AclConfigError / OSError: the file could not be read or written.
        """
        existing = self.rules.accounts.get(access_key)
        if existing is None:
            return False
        doc = self._doc(existing.source)
        accounts = [
            a
            for a in doc.get("accounts") or ()
            if not (isinstance(a, dict) and str(a.get("accessKey")) == access_key)
        ]
        doc["accounts"] = accounts
        self._commit(existing.source, doc)
        logger.info("ACL account %s deleted from %s", access_key, existing.source)
        return True

    def update_global_white(self, addresses: Sequence[str], file: str | None = None) -> None:
        """Replace one file's ``globalWhiteRemoteAddresses`` (default: ``plain_acl.yml``).

        Raises:
            AclConfigError: a bad pattern, or a file that is not an ACL file of this broker.
            OSError: the file could not be written.
        """
        path = os.path.abspath(file) if file else self.files.default_file
        if path != self.files.default_file and path not in self.rules.files:
            raise AclConfigError(
                f"{file} is not an ACL file of this broker (known: {', '.join(self.rules.files)})"
            )
        for entry in addresses:
            try:
                parse_address_pattern(entry)
            except AddressPatternError as exc:
                raise AclConfigError(f"globalWhiteRemoteAddresses: {exc}") from None
        doc = self._doc(path)
        doc["globalWhiteRemoteAddresses"] = list(addresses)
        self._commit(path, doc)
        logger.info("ACL global white list of %s set to %s", path, list(addresses))

    # ------------------------------------------------------------------------------ views
    def all_config(self) -> tuple[list[str], list[PlainAccessConfig]]:
        """Every file's global white-list entries and every account (first definition wins)."""
        white = [
            entry for path in self.rules.files for entry in self.rules.global_white_by_file.get(path, ())
        ]
        return white, [account.config for account in self.rules.accounts.values()]

    def default_version(self) -> DataVersion:
        return self.rules.versions.get(self.files.default_file, DataVersion())
