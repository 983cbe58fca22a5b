"""The ACL rule set: permissions, accounts and global white list built from ``plain_acl.yml`` documents.

Pure (no files, no clock): :func:`build_rules` turns parsed YAML documents into one immutable
:class:`AclRules`, or raises :class:`AclConfigError` naming the file and the entry. The loader
(:mod:`pocketmq.broker.acl.files`) reads the files; the decision table
(:mod:`pocketmq.broker.acl.decision`) reads the rules.

Document shape (RocketMQ 4.9, every key optional)::

    globalWhiteRemoteAddresses: [ "10.10.103.*", "192.168.0.*" ]
    accounts:
      - accessKey: RocketMQ            # longer than 6 characters
        secretKey: 12345678            # longer than 6 characters
        whiteRemoteAddress: 192.168.1.*  # requests from here need no signature
        admin: false                   # admin request codes; no explicit perms = everything
        defaultTopicPerm: DENY         # DENY | PUB | SUB | PUB|SUB | SUB|PUB (other: DENY)
        defaultGroupPerm: SUB
        topicPerms: [ "topicA=DENY", "topicB=PUB|SUB" ]
        groupPerms: [ "groupA=DENY" ]  # checked as the group's %RETRY% topic
    dataVersion: [ { counter: 1, timestamp: 1700000000000 } ]   # written by the admin commands

Several files (``plain_acl.yml`` and every ``*.yml``/``*.yaml`` under ``conf/acl``): white lists
add up; an access key defined in two files keeps the first definition (in file order) and the
second is reported in :attr:`AclRules.warnings`, as RocketMQ logs it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pocketmq.broker.acl.address import AddressMatcher, AddressPatternError, parse_address_pattern
from pocketmq.remoting.protocol.acl import PlainAccessConfig, Signer
from pocketmq.remoting.protocol.registration import DataVersion
from pocketmq.remoting.protocol.topics import RETRY_GROUP_TOPIC_PREFIX

__all__ = [
    "ANY",
    "DENY",
    "PUB",
    "SUB",
    "Account",
    "AclConfigError",
    "AclRules",
    "DataVersion",
    "PlainAccessConfig",
    "build_rules",
    "check_permission",
    "check_resource_perms",
    "parse_perm",
    "perm_name",
]

#: ``Permission`` bits.
DENY, ANY, PUB, SUB = 1, 2, 4, 8
#: ``AclConstants.ACCESS_KEY_MIN_LENGTH`` / ``SECRET_KEY_MIN_LENGTH``: keys must be longer.
KEY_MIN_LENGTH = 6
_PERM_NAMES = {"DENY": DENY, "PUB": PUB, "SUB": SUB, "PUB|SUB": PUB | SUB, "SUB|PUB": PUB | SUB}


class AclConfigError(ValueError):
    """An ACL file or admin update RocketMQ would refuse (the message names the file and entry)."""


def parse_perm(text: str | None) -> int:
    """``DENY``/``PUB``/``SUB``/``PUB|SUB``/``SUB|PUB``; anything else (or none) is DENY, as RocketMQ."""
    if text is None:
        return DENY
    return _PERM_NAMES.get(str(text).strip(), DENY)


def perm_name(perm: int) -> str:
    if perm & DENY:
        return "DENY"
    if perm & ANY:
        return "PUB|SUB (either)"
    return {PUB: "PUB", SUB: "SUB", PUB | SUB: "PUB|SUB"}.get(perm & (PUB | SUB), "DENY")


def check_permission(needed: int, owned: int) -> bool:
    """RocketMQ ``Permission.checkPermission``: DENY wins; ANY needs PUB or SUB; else any shared bit."""
    if owned & DENY:
        return False
    if needed & ANY:
        return bool(owned & (PUB | SUB))
    return bool(needed & owned)


def check_resource_perms(entries: Sequence[str]) -> None:
    """Strict check of ``res=PERM`` entries (admin updates; RocketMQ ``checkResourcePerms``).

    Raises:
        AclConfigError: not ``res=PERM``, or a permission other than the five known spellings.
    """
    for entry in entries:
        name, sep, perm = entry.partition("=")
        if not sep or not name.strip() or "=" in perm or not perm.strip():
            raise AclConfigError(
                f"Parse Resource format error for {entry}. The expected resource format is 'Res=Perm'. "
                "For example: topicA=SUB"
            )
        if perm.strip() not in _PERM_NAMES:
            raise AclConfigError(
                f"Parse resource permission error for {entry}. The expected permissions are 'SUB' or "
                "'PUB' or 'SUB|PUB' or 'PUB|SUB'."
            )


@dataclass(frozen=True, slots=True)
class Account:
    """An account ready for decisions: permissions by resource (groups as ``%RETRY%<group>``)."""

    access_key: str
    secret_key: str = field(repr=False)
    admin: bool
    white: AddressMatcher
    default_topic_perm: int
    default_group_perm: int
    perms: Mapping[str, int]
    source: str
    config: PlainAccessConfig = field(repr=False)
    #: the secret's HMAC key schedule, computed once
    signer: Signer = field(repr=False, compare=False)


@dataclass(frozen=True, slots=True)
class AclRules:
    """Everything a decision reads; replaced as a whole on reload (never mutated)."""

    global_white: tuple[AddressMatcher, ...] = ()
    accounts: Mapping[str, Account] = field(default_factory=dict)
    #: file → its global white-list entries, accounts (as written) and data version
    global_white_by_file: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    versions: Mapping[str, DataVersion] = field(default_factory=dict)
    files: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()


def _text(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _bool(value: Any, where: str) -> bool:
    if value is None:
        return False
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("true", "false"):
        return text == "true"
    raise AclConfigError(f"{where}: admin must be true or false, not {value!r}")


def _str_list(value: Any, where: str, key: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        return (value,)
    if not isinstance(value, list):
        raise AclConfigError(f"{where}: {key} must be a list of strings")
    return tuple(str(v) for v in value if v is not None)


def parse_account(doc: Any, where: str) -> PlainAccessConfig:
    """One ``accounts`` entry → :class:`PlainAccessConfig` (keys checked as RocketMQ does).

    Raises:
        AclConfigError: not a mapping, or keys of 6 characters or fewer.
    """
    if not isinstance(doc, dict):
        raise AclConfigError(f"{where}: an account must be a mapping with accessKey and secretKey")
    ak, sk = _text(doc.get("accessKey")), _text(doc.get("secretKey"))
    if ak is None or sk is None or len(ak) <= KEY_MIN_LENGTH or len(sk) <= KEY_MIN_LENGTH:
        raise AclConfigError(
            f"{where}: The accessKey={ak} and secretKey cannot be null and length should longer than 6"
        )
    return PlainAccessConfig(
        access_key=ak,
        secret_key=sk,
        white_remote_address=_text(doc.get("whiteRemoteAddress")),
        admin=_bool(doc.get("admin"), f"{where} ({ak})"),
        default_topic_perm=_text(doc.get("defaultTopicPerm")),
        default_group_perm=_text(doc.get("defaultGroupPerm")),
        topic_perms=_str_list(doc.get("topicPerms"), f"{where} ({ak})", "topicPerms"),
        group_perms=_str_list(doc.get("groupPerms"), f"{where} ({ak})", "groupPerms"),
    )


def build_account(cfg: PlainAccessConfig, source: str) -> Account:
    """Raises: AclConfigError (a ``res=PERM`` entry without ``=``, a bad white-list pattern)."""
    perms: dict[str, int] = {}
    for entries, is_topic in ((cfg.group_perms, False), (cfg.topic_perms, True)):
        for entry in entries:
            items = [p for p in entry.split("=") if p]
            if len(items) != 2:
                kind = "topic" if is_topic else "group"
                raise AclConfigError(
                    f"{source} ({cfg.access_key}): Parse resource permission failed for {kind}:{entry}"
                )
            name = items[0].strip()
            perms[name if is_topic else RETRY_GROUP_TOPIC_PREFIX + name] = parse_perm(items[1])
    try:
        white = parse_address_pattern(cfg.white_remote_address)
    except AddressPatternError as exc:
        raise AclConfigError(f"{source} ({cfg.access_key}): whiteRemoteAddress: {exc}") from None
    return Account(
        access_key=cfg.access_key,
        secret_key=cfg.secret_key,
        admin=cfg.admin,
        white=white,
        default_topic_perm=parse_perm(cfg.default_topic_perm),
        default_group_perm=parse_perm(cfg.default_group_perm),
        perms=perms,
        source=source,
        config=cfg,
        signer=Signer(cfg.secret_key),
    )


def _data_version(value: Any) -> DataVersion:
    if isinstance(value, list) and value and isinstance(value[0], dict):
        first = value[0]
        try:
            return DataVersion(
                timestamp=int(first.get("timestamp") or 0), counter=int(first.get("counter") or 0)
            )
        except (TypeError, ValueError):
            return DataVersion()
    return DataVersion()


def build_rules(documents: Sequence[tuple[str, Any]]) -> AclRules:
    """Rules from ``(path, parsed YAML)`` pairs, in file order (see the module docstring).

    Raises:
        AclConfigError: a document that is not a mapping, or any bad entry (nothing is half-built).
    """
    white: list[AddressMatcher] = []
    white_by_file: dict[str, tuple[str, ...]] = {}
    accounts: dict[str, Account] = {}
    versions: dict[str, DataVersion] = {}
    warnings: list[str] = []
    for path, doc in documents:
        if doc is None:
            versions[path] = DataVersion()
            continue
        if not isinstance(doc, dict):
            raise AclConfigError(f"{path}: expected a mapping with globalWhiteRemoteAddresses and accounts")
        entries = _str_list(doc.get("globalWhiteRemoteAddresses"), path, "globalWhiteRemoteAddresses")
        for entry in entries:
            try:
                white.append(parse_address_pattern(entry))
            except AddressPatternError as exc:
                raise AclConfigError(f"{path}: globalWhiteRemoteAddresses: {exc}") from None
        white_by_file[path] = entries
        raw_accounts = doc.get("accounts")
        if raw_accounts is not None and not isinstance(raw_accounts, list):
            raise AclConfigError(f"{path}: accounts must be a list")
        for i, raw in enumerate(raw_accounts or ()):
            account = build_account(parse_account(raw, f"{path} accounts[{i}]"), path)
            if account.access_key in accounts:
                warnings.append(
                    f"The accessKey {account.access_key} is repeated in multiple ACL files ({path})"
                )
                continue
            accounts[account.access_key] = account
        versions[path] = _data_version(doc.get("dataVersion"))
    return AclRules(
        global_white=tuple(white),
        accounts=accounts,
        global_white_by_file=white_by_file,
        versions=versions,
        files=tuple(path for path, _ in documents),
        warnings=tuple(warnings),
    )
