"""Loading frozen pydantic config models from RocketMQ ``.conf`` files and ``key=value`` overrides.

Order (docs/development.md, configuration): model defaults → the ``.conf`` file (Java properties, RocketMQ's camelCase
keys) → ``key=value`` overrides (``--set``/``-p`` style). Rules:

* a key may be written in camelCase (``listenPort``, the field's alias) or snake_case
  (``listen_port``, the attribute name);
* a real RocketMQ key that pocketmq does not implement (``known_foreign_keys``) never changes
  behaviour silently. A key that tunes Java machinery pocketmq has no counterpart of (thread
  pools, Netty buffers: mapped to ``None``) is accepted and logged as a warning, so an unchanged
  Java ``broker.conf`` still starts; a key of a RocketMQ *feature* pocketmq lacks (mapped to its
  RocketMQ default) loads only at that default, and any other value is a :class:`ConfigError`
  naming the key. Model fields kept for the same reason (listed in the model's
  ``DEFAULT_ONLY`` class attribute) follow the same rule;
* any other unknown key is a :class:`ConfigError` naming the key, its source (``file:line`` or
  ``override``) and the closest known key;
* a value asking for a feature not built yet (``aclEnable=true``, ``brokerRole=SLAVE``,
  ``tls.*``...: the table in :mod:`pocketmq.remoting.common.unsupported`) is a :class:`ConfigError`
  saying so;
* a value the field's type rejects is a :class:`ConfigError` naming the key, the value, the
  expected type and the source.

Several models can share one file (:func:`load_configs`): RocketMQ applies the same properties to
``BrokerConfig``, ``NettyServerConfig``, ``MessageStoreConfig``...; a key known to several models
sets all of them, as ``MixAll.properties2Object`` does.

Models are expected to use ``ConfigDict(frozen=True, extra="forbid", alias_generator=to_camel,
validate_by_name=True, validate_by_alias=True)`` (see :data:`CONFIG_MODEL_CONFIG`) with scalar
fields (str, int, float, bool, enums, Literals, optionals of those).
"""

from __future__ import annotations

import difflib
import enum
import logging
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError
from pydantic.alias_generators import to_camel, to_snake

from pocketmq.remoting.common import properties
from pocketmq.remoting.common.unsupported import Refusal, is_off_family_key, refusal_message

logger = logging.getLogger(__name__)

M = TypeVar("M", bound=BaseModel)

__all__ = [
    "CONFIG_MODEL_CONFIG",
    "ConfigError",
    "ConfigItem",
    "apply_config",
    "config_properties",
    "load_config",
    "load_configs",
    "parse_overrides",
    "read_conf_file",
    "render_config",
]

#: The ``model_config`` every component config model uses (docs/development.md).
CONFIG_MODEL_CONFIG = ConfigDict(
    frozen=True,
    extra="forbid",
    alias_generator=to_camel,
    validate_by_name=True,
    validate_by_alias=True,
)


class ConfigError(ValueError):
    """A configuration key or value that cannot be used; the message names key and source."""

    def __init__(self, message: str, *, key: str | None = None, source: str | None = None) -> None:
        super().__init__(message)
        self.key = key
        self.source = source


@dataclass(frozen=True, slots=True)
class ConfigItem:
    """One ``key=value`` setting and where it came from (``broker.conf:12``, ``override``)."""

    key: str
    value: str
    source: str


def read_conf_file(path: str | os.PathLike[str]) -> list[ConfigItem]:
    """Every entry of a ``.conf`` file, in order, tagged ``<path>:<line>``.

    Raises:
        ConfigError: the file cannot be read, is not UTF-8 or has a malformed escape.
    """
    try:
        with open(path, "rb") as f:
            text = f.read().decode("utf-8-sig")  # whole: the error's offset is the file's
    except OSError as exc:
        raise ConfigError(f"cannot read config file {os.fspath(path)}: {exc.strerror or exc}") from exc
    except UnicodeDecodeError as exc:
        # a raw traceback named neither the file nor the line (issue 23)
        line = exc.object[: exc.start].count(b"\n") + 1
        raise ConfigError(
            f"{os.fspath(path)}:{line}: not UTF-8 (byte 0x{exc.object[exc.start]:02x}); save the file as UTF-8",
            source=f"{os.fspath(path)}:{line}",
        ) from None
    try:
        entries = properties.parse_entries(text)
    except properties.PropertiesError as exc:
        raise ConfigError(f"{os.fspath(path)}: {exc}", source=f"{os.fspath(path)}:{exc.line}") from exc
    return [ConfigItem(e.key, e.value, f"{os.fspath(path)}:{e.line}") for e in entries]


def parse_overrides(overrides: Iterable[str], *, source: str = "override") -> list[ConfigItem]:
    """Turn ``["key=value", ...]`` into items; whitespace around key and value is trimmed.

    Raises:
        ConfigError: an entry without ``=`` or with an empty key.
    """
    items: list[ConfigItem] = []
    for raw in overrides:
        key, sep, value = raw.partition("=")
        key = key.strip()
        if not sep or not key:
            raise ConfigError(f"{source} {raw!r}: expected key=value", source=source)
        items.append(ConfigItem(key, value.strip(), f"{source} {key}"))
    return items


def _field_key(model_cls: type[BaseModel], name: str) -> str:
    alias = model_cls.model_fields[name].alias
    return alias if isinstance(alias, str) else name


def _key_index(model_cls: type[BaseModel]) -> dict[str, str]:
    """Accepted spelling → attribute name (alias, attribute name, camelCase of the name)."""
    index: dict[str, str] = {}
    for name in model_cls.model_fields:
        for spelling in (name, _field_key(model_cls, name), to_camel(name)):
            index.setdefault(spelling, name)
    return index


#: ``known_foreign_keys``: key names (each a Java tuning knob), or key -> RocketMQ's default as a
#: string (a feature accepted only at that default) or None (a tuning knob)
ForeignKeys = Iterable[str] | Mapping[str, str | None]


def _foreign_index(known_foreign_keys: ForeignKeys) -> dict[str, str | None]:
    """Every spelling (camelCase and snake_case) -> the default the key is held to, or None."""
    defaults: Mapping[str, str | None] = (
        known_foreign_keys if isinstance(known_foreign_keys, Mapping) else dict.fromkeys(known_foreign_keys)
    )
    spellings: dict[str, str | None] = {}
    for key, default in defaults.items():
        spellings[key] = default
        spellings[to_snake(key)] = default
    return spellings


def _same_setting(value: str, default: str) -> bool:
    """Whether a ``.conf`` string says the same as RocketMQ's default (``TRUE`` is ``true``,
    ``40`` is ``40.0``)."""
    a, b = value.strip(), default.strip()
    if a.lower() == b.lower():
        return True
    try:
        return float(a) == float(b)
    except ValueError:
        return False


def _default_only_error(key: str, value: object, default: object, source: str) -> ConfigError:
    return ConfigError(
        f"{source}: {key}={value} is not supported: pocketmq does not implement {key!r}, "
        f"so only RocketMQ's default ({default}) is accepted; remove the key or set it to that",
        key=key,
        source=source,
    )


def _unknown_key_error(key: str, source: str, candidates: Sequence[str]) -> ConfigError:
    lowered = {c.lower(): c for c in candidates}
    hint = lowered.get(key.lower())
    if hint is None:
        close = difflib.get_close_matches(key, candidates, n=1, cutoff=0.6)
        hint = close[0] if close else None
    suggestion = f"; did you mean {hint!r}?" if hint else ""
    return ConfigError(f"{source}: unknown config key {key!r}{suggestion}", key=key, source=source)


def _expected_type(model_cls: type[BaseModel], name: str) -> str:
    annotation = model_cls.model_fields[name].annotation
    if isinstance(annotation, type):
        if issubclass(annotation, enum.Enum):
            return "one of " + ", ".join(m.name for m in annotation)
        return annotation.__name__
    return str(annotation).replace("typing.", "")


def _validate(model_cls: type[M], data: dict[str, Any], origin: dict[str, ConfigItem]) -> M:
    try:
        return model_cls.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        if not err["loc"]:
            raise ConfigError(f"invalid configuration: {err['msg']}") from exc
        loc = err["loc"][0]
        name = _key_index(model_cls).get(str(loc), str(loc))
        item = origin.get(name)
        key = (
            item.key if item else _field_key(model_cls, name) if name in model_cls.model_fields else str(loc)
        )
        source = item.source if item else "defaults"
        value = item.value if item else data.get(str(loc))
        expected = _expected_type(model_cls, name) if name in model_cls.model_fields else "?"
        raise ConfigError(
            f"{source}: bad value {value!r} for {key!r}: expected {expected} ({err['msg']})",
            key=key,
            source=source,
        ) from exc


def _dispatch(
    model_classes: Sequence[type[BaseModel]],
    items: Iterable[ConfigItem],
    known_foreign_keys: ForeignKeys,
) -> list[dict[str, ConfigItem]]:
    """Assign every item to the models that know its key (later items win)."""
    indexes = [_key_index(cls) for cls in model_classes]
    foreign = _foreign_index(known_foreign_keys)
    per_model: list[dict[str, ConfigItem]] = [{} for _ in model_classes]
    warned: set[str] = set()

    def applies(row: Refusal) -> bool:
        return row.key.endswith("*") or row.key in foreign or any(row.key in index for index in indexes)

    for item in items:
        refused = refusal_message(item.key, item.value, item.source, applies=applies)
        if refused is not None:
            raise ConfigError(refused, key=item.key, source=item.source)
        if is_off_family_key(item.key):
            continue  # e.g. tls.enable=false: the default, nothing to set
        hit = False
        for index, assigned in zip(indexes, per_model, strict=True):
            name = index.get(item.key)
            if name is not None:
                assigned[name] = item
                hit = True
        if hit:
            continue
        if item.key in foreign:
            default = foreign[item.key]
            if default is not None:
                if not _same_setting(item.value, default):
                    raise _default_only_error(item.key, item.value, default, item.source)
                continue
            if item.key not in warned:
                warned.add(item.key)
                logger.warning(
                    "%s: %r tunes Java machinery pocketmq does not have (one event loop, no thread "
                    "pools); it has no effect",
                    item.source,
                    item.key,
                )
            continue
        candidates = sorted(
            {_field_key(cls, n) for cls in model_classes for n in cls.model_fields} | set(foreign)
        )
        raise _unknown_key_error(item.key, item.source, candidates)
    return per_model


def _build(model_cls: type[M], base: M | None, assigned: dict[str, ConfigItem]) -> M:
    data: dict[str, Any] = {}
    if base is not None:
        # Re-validate the base's python values together with the new strings.
        data = {_field_key(model_cls, n): getattr(base, n) for n in model_cls.model_fields}
    for name, item in assigned.items():
        data[_field_key(model_cls, name)] = item.value
    model = _validate(model_cls, data, assigned)
    default_only: frozenset[str] = getattr(model_cls, "DEFAULT_ONLY", frozenset())
    for name in default_only & assigned.keys():
        value, default = getattr(model, name), model_cls.model_fields[name].default
        if value != default and not (default is None and value == ""):  # blank: unset, as in Java
            item = assigned[name]
            raise _default_only_error(item.key, item.value, default, item.source)
    return model


def load_configs(
    model_classes: Sequence[type[BaseModel]],
    conf_path: str | os.PathLike[str] | None = None,
    overrides: Iterable[str] = (),
    *,
    known_foreign_keys: ForeignKeys = frozenset(),
) -> list[BaseModel]:
    """Build one instance of each model from defaults, the file, then the overrides.

    Raises:
        ConfigError: unreadable file, unknown key, or a value of the wrong type.
    """
    items: list[ConfigItem] = []
    if conf_path is not None:
        items.extend(read_conf_file(conf_path))
    items.extend(parse_overrides(overrides))
    per_model = _dispatch(model_classes, items, known_foreign_keys)
    return [_build(cls, None, assigned) for cls, assigned in zip(model_classes, per_model, strict=True)]


def load_config(
    model_cls: type[M],
    conf_path: str | os.PathLike[str] | None = None,
    overrides: Iterable[str] = (),
    *,
    known_foreign_keys: ForeignKeys = frozenset(),
) -> M:
    """Build ``model_cls`` from defaults, the ``.conf`` file, then ``key=value`` overrides.

    Raises:
        ConfigError: unreadable file, unknown key, or a value of the wrong type.
    """
    (model,) = load_configs([model_cls], conf_path, overrides, known_foreign_keys=known_foreign_keys)
    assert isinstance(model, model_cls)
    return model


def apply_config(
    model: M,
    updates: Mapping[str, str] | Iterable[ConfigItem],
    *,
    known_foreign_keys: ForeignKeys = frozenset(),
    source: str = "update",
) -> M:
    """A copy of ``model`` with string ``updates`` applied (UPDATE_NAMESRV/BROKER_CONFIG bodies).

    Raises:
        ConfigError: unknown key or bad value; ``model`` is unchanged either way (it is frozen).
    """
    if isinstance(updates, Mapping):
        items = [ConfigItem(k, v, f"{source} {k}") for k, v in updates.items()]
    else:
        items = list(updates)
    (assigned,) = _dispatch([type(model)], items, known_foreign_keys)
    return _build(type(model), model, assigned)


def _java_string(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, enum.Enum):
        return value.name if not isinstance(value.value, str) else value.value
    return str(value)


def config_properties(model: BaseModel) -> dict[str, str]:
    """The model as ``camelCaseKey → Java string`` in field order (GET_*_CONFIG, ``-p``)."""
    cls = type(model)
    return {_field_key(cls, name): _java_string(getattr(model, name)) for name in cls.model_fields}


def render_config(*models: BaseModel) -> str:
    """Java properties text of one or more models, camelCase keys (what ``mqbroker -p`` prints)."""
    merged: dict[str, str] = {}
    for model in models:
        merged.update(config_properties(model))
    return properties.dumps(merged)
