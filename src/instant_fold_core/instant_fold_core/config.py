"""Strict configuration loading and named presets: the one way every config in the workspace is read.

Encoder, policy and simulation configs (dataclasses), robot configs, graph files and benchmark
specs are all YAML written by hand, so a typo must fail loudly and point at the key: every
reader here rejects unknown keys with the key's dotted path (`arms.right.extra`,
`model.widht`), type-checks values against the dataclass defaults, and raises `ConfigError`
(callers catch the kind, not the text). Named presets of every kind live in one `Presets`
registry shape; a YAML file may start from a preset (`preset: NAME`) and override nested keys.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any, ClassVar, Generic, TypeVar

import yaml

from instant_fold_core.errors import ConfigError

T = TypeVar("T")
R = TypeVar("R", bound="ModelRecipe")


def dotted(where: str, key: object) -> str:
    """`where.key` (list indices as `where[i]`); the root (`where == ""`) is left out."""
    if isinstance(key, int):
        return f"{where}[{key}]"
    return f"{where}.{key}" if where else str(key)


def read_yaml(path: str | Path, what: str = "config") -> Any:
    """The data of a YAML file (an empty file reads as `{}`); unreadable files name the path."""
    path = Path(path)
    try:
        data = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise ConfigError(f"{path}: cannot read {what} ({exc})") from exc
    return {} if data is None else data


def check_keys(
    where: str, value: Any, required: Collection[str] = (), optional: Collection[str] = ()
) -> Mapping[str, Any]:
    """`value` as a mapping holding every `required` key and no key outside `required | optional`.

    `where` is the mapping's dotted path ("" for the file's root); messages name missing and
    unknown keys by their full dotted path.
    """
    if not isinstance(value, Mapping):
        raise ConfigError(f"{where or '<root>'}: expected a mapping, got {type(value).__name__}")
    missing = [dotted(where, k) for k in sorted(set(required) - set(value))]
    if missing:
        raise ConfigError(f"{where or '<root>'}: missing {missing}")
    allowed = set(required) | set(optional)
    unknown = [dotted(where, k) for k in sorted(map(str, set(value) - allowed))]
    if unknown:
        raise ConfigError(f"{where or '<root>'}: unknown keys {unknown} (allowed: {', '.join(sorted(allowed))})")
    return value


def build(kind: type[T], data: Any, where: str = "") -> T:
    """A `kind` dataclass from a mapping (YAML or a checkpoint's JSON): `override(kind(), data)`."""
    return override(kind(), data, where)


class ModelRecipe:
    """Base of a checkpoint's `config.json` (LeRobot's shape): a dataclass of a `name`, the network
    (`model`) and the run that trained it (`train`), each section validating itself. One place for
    what the policy's and the keypoint detector's configs both do."""

    #: What an error calls it ("policy config").
    what: ClassVar[str] = "config"
    model: Any
    train: Any

    def validate(self: R) -> R:
        self.model.validate()
        self.train.validate()
        return self

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)  # type: ignore[call-overload]

    @classmethod
    def from_dict(cls: type[R], data: Any) -> R:
        """From a nested mapping (a checkpoint's config.json); unknown keys are errors, so typos
        never pass silently."""
        if not isinstance(data, dict):
            raise ConfigError(f"{cls.what}: expected a mapping, got {type(data).__name__}")
        return build(cls, data).validate()


def override(config: T, overrides: Any, where: str = "", merge_mappings: bool = False) -> T:
    """A copy of the dataclass `config` with `overrides` (a mapping, possibly nested) applied.

    Unknown keys are refused; every value must be of the kind of the field's class default
    (booleans exactly; an integer where an integer belongs; a number where a float belongs,
    stored as a float; a list or tuple of the default's element kind where a tuple belongs;
    `None` or text where the default is `None`), so a string where a number belongs fails here,
    not deep inside a model. A field that is a dataclass takes nested overrides key by key; any
    other field is replaced whole, a mapping included unless `merge_mappings`: then a mapping
    field keeps its keys and takes the override's over them (a layered file, such as a pipeline
    recipe on its base, names only the keys it changes). The dataclass's own `__post_init__`
    checks run on the result.
    """
    if not dataclasses.is_dataclass(config) or isinstance(config, type):
        raise TypeError(f"override: {config!r} is not a dataclass instance")
    kind = type(config)
    names = [f.name for f in dataclasses.fields(config) if f.init]
    overrides = check_keys(where, overrides, optional=names)
    defaults = kind()
    changes: dict[str, Any] = {}
    for key, value in overrides.items():
        current, path = getattr(config, key), dotted(where, key)
        if dataclasses.is_dataclass(current) and not isinstance(current, type):
            changes[key] = override(current, value, path, merge_mappings)
        elif merge_mappings and isinstance(current, Mapping) and isinstance(value, Mapping):
            changes[key] = {**current, **value}
        else:
            changes[key] = _checked(path, value, getattr(defaults, key))
    return dataclasses.replace(config, **changes)


def _checked(where: str, value: Any, default: Any) -> Any:
    """`value` if it is of the kind of `default` (floats widened from integers), else ConfigError."""
    if default is None:  # optional paths and names
        if value is None or isinstance(value, str):
            return value
    elif isinstance(default, bool) or isinstance(value, bool):
        if isinstance(value, bool) and isinstance(default, bool):
            return value
    elif isinstance(default, int):
        if isinstance(value, int):
            return value
    elif isinstance(default, float):
        if isinstance(value, int | float):
            if not math.isfinite(value):  # YAML's .nan/.inf and JSON's NaN/Infinity parse as floats
                raise ConfigError(f"{where}: must be a finite number, got {value!r}")
            return float(value)
    elif isinstance(default, tuple):
        if isinstance(value, list | tuple):
            if not default:
                return tuple(value)
            return tuple(_checked(f"{where}[{i}]", v, default[0]) for i, v in enumerate(value))
    elif isinstance(value, type(default)):
        return value
    raise ConfigError(f"{where}: expected {_kind(default)}, got {value!r}")


def _numbers(value: Any) -> Iterator[float]:
    """The numbers in a field's value: the value itself, or the items of a list, tuple or mapping."""
    items = value.values() if isinstance(value, Mapping) else value if isinstance(value, list | tuple) else (value,)
    yield from (v for v in items if isinstance(v, int | float) and not isinstance(v, bool))


def check_numbers(
    where: str,
    config: Any,
    positive: Iterable[str] = (),
    non_negative: Iterable[str] = (),
    unit_interval: Iterable[str] = (),
) -> None:
    """Range checks of a config dataclass, the one place they are written.

    Every numeric field of `config` (numbers; lists, tuples and mappings of numbers) must be finite: a NaN
    or infinite rate, weight or ratio otherwise trains on a NaN loss or fails deep inside a model.
    The fields named in `positive` must also be > 0, in `non_negative` >= 0, in `unit_interval` in
    [0, 1]. Errors name the field as `where.name` (`where` "" for a top-level config).
    """
    for f in dataclasses.fields(config):
        value = getattr(config, f.name)
        if any(not math.isfinite(v) for v in _numbers(value)):
            raise ConfigError(f"{dotted(where, f.name)}: must be finite, got {value!r}")
    ranges = (
        (positive, lambda v: v > 0, "must be positive"),
        (non_negative, lambda v: v >= 0, "must be >= 0"),
        (unit_interval, lambda v: 0 <= v <= 1, "must be in [0, 1]"),
    )
    for names, ok, requirement in ranges:
        for name in names:
            value = getattr(config, name)
            if not ok(value):
                raise ConfigError(f"{dotted(where, name)}: {requirement}, got {value!r}")


def at_least_zero(name: str, value: float, unit: str = "metres") -> float:
    """`value`, when it is a finite number >= 0 (a distance, a wait; 0 often means off); else a
    ConfigError naming `name` (a NaN would compare False everywhere and switch a check off silently)."""
    if not (math.isfinite(value) and value >= 0):
        raise ConfigError(f"{name}: expected a finite number >= 0 ({unit}), got {value!r}")
    return value


def _kind(default: Any) -> str:
    if default is None:
        return "text or null"
    if isinstance(default, tuple):
        return f"a list of {_plural(default[0])}" if default else "a list"
    names = {bool: "true/false", int: "an integer", float: "a number", str: "text", dict: "a mapping"}
    return names.get(type(default), f"a {type(default).__name__}")


def _plural(default: Any) -> str:
    """What the items of a list must be, e.g. "integers" for a list whose default item is 3."""
    names = {bool: "true/false values", int: "integers", float: "numbers", str: "texts", dict: "mappings"}
    return names.get(type(default), f"{type(default).__name__} values")


class Presets(Generic[T]):
    """Named configurations of one kind (encoder, policy, sim, ...), each built fresh on request.

    A preset is a factory, not a shared object, so a caller that changes the config it received
    changes nobody else's.
    """

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self._factories: dict[str, Callable[[], T]] = {}

    def register(self, name: str, factory: Callable[[], T]) -> None:
        if name in self._factories:
            raise ValueError(f"{self.kind} preset {name!r} registered twice")
        self._factories[name] = factory

    def get(self, name: str) -> T:
        if name not in self._factories:
            raise ConfigError(f"{self.kind} preset {name!r} unknown; choose from {list(self._factories)}")
        return self._factories[name]()

    def names(self) -> tuple[str, ...]:
        return tuple(self._factories)

    def __contains__(self, name: object) -> bool:
        return name in self._factories

    def __iter__(self) -> Iterator[str]:
        return iter(self._factories)


def load_file(path: str | Path, presets: Presets[T], default: Callable[[], T]) -> T:
    """A config from a YAML file of the dataclass's keys (nested sections as mappings).

    With a top-level `preset: NAME` the file's other keys override that preset's values; without
    it they override `default()`.
    """
    data = read_yaml(path, f"{presets.kind} config")
    base = default()
    names = [f.name for f in dataclasses.fields(base) if f.init]  # type: ignore[arg-type]
    data = dict(check_keys("", data, optional=[*names, "preset"]))
    if "preset" in data:
        name = data.pop("preset")
        if not isinstance(name, str):
            raise ConfigError(f"preset: expected a preset name, got {name!r}")
        base = presets.get(name)
    try:
        return override(base, data)
    except ConfigError as exc:
        raise ConfigError(f"{path}: {exc}") from None
