"""The one strict config loader: dotted paths in errors, typed values, nested overrides, presets."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pytest

from instant_fold_core.config import (
    ModelRecipe,
    Presets,
    at_least_zero,
    build,
    check_keys,
    load_file,
    override,
    read_yaml,
)
from instant_fold_core.errors import ConfigError, InstantFoldError


@dataclass
class Inner:
    rate: float = 1.0
    steps: int = 3
    names: tuple[str, ...] = ("a",)
    extra: dict = field(default_factory=lambda: {"k": 1})


@dataclass
class Outer:
    name: str = "base"
    path: str | None = None
    flag: bool = True
    inner: Inner = field(default_factory=Inner)


def test_unknown_and_missing_keys_name_their_dotted_path() -> None:
    with pytest.raises(
        ConfigError, match=r"inner: unknown keys \['inner.rte'\] \(allowed: extra, names, rate, steps\)"
    ):
        build(Outer, {"inner": {"rte": 2.0}})
    with pytest.raises(ConfigError, match=r"arms.left: missing \['arms.left.host'\]"):
        check_keys("arms.left", {}, {"host"})
    with pytest.raises(ConfigError, match=r"<root>: expected a mapping, got list"):
        check_keys("", [1], {"host"})
    assert issubclass(ConfigError, InstantFoldError) and issubclass(ConfigError, ValueError)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"flag": 1}, r"flag: expected true/false, got 1"),
        ({"inner": {"steps": 2.5}}, r"inner.steps: expected an integer, got 2.5"),
        ({"inner": {"rate": "fast"}}, r"inner.rate: expected a number, got 'fast'"),
        ({"inner": {"names": ["a", 2]}}, r"inner.names\[1\]: expected text, got 2"),
        ({"path": 3}, r"path: expected text or null, got 3"),
        ({"inner": 4}, r"inner: expected a mapping, got int"),
    ],
)
def test_values_must_be_of_the_defaults_kind(data: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        build(Outer, data)


def test_overrides_merge_sections_key_by_key_and_replace_plain_mappings() -> None:
    base = Outer(name="p", inner=Inner(rate=2.0, steps=5, extra={"k": 1, "j": 2}))
    out = override(base, {"inner": {"steps": 7, "names": ["x", "y"], "extra": {"z": 0}}, "path": "/d"})
    assert out == Outer(name="p", path="/d", inner=Inner(rate=2.0, steps=7, names=("x", "y"), extra={"z": 0}))
    assert base.inner.steps == 5  # the preset object is not changed
    assert build(Outer, {"inner": {"rate": 3}}).inner.rate == 3.0
    assert isinstance(build(Outer, {"inner": {"rate": 3}}).inner.rate, float)
    layered = override(base, {"inner": {"extra": {"z": 0, "j": 3}}}, merge_mappings=True)
    assert layered.inner.extra == {"k": 1, "j": 3, "z": 0}  # a layered file keeps the mapping's other keys
    assert base.inner.extra == {"k": 1, "j": 2}
    with pytest.raises(ConfigError, match=r"inner.extra: expected a mapping, got 5"):
        override(base, {"inner": {"extra": 5}}, merge_mappings=True)


def test_presets_are_fresh_copies_and_unknown_names_list_the_known() -> None:
    presets: Presets[Outer] = Presets("demo")
    presets.register("small", lambda: Outer(name="small", inner=Inner(steps=1)))
    first = presets.get("small")
    first.inner.steps = 99
    assert presets.get("small").inner.steps == 1
    assert "small" in presets and list(presets) == ["small"]
    with pytest.raises(ConfigError, match=r"demo preset 'big' unknown; choose from \['small'\]"):
        presets.get("big")
    with pytest.raises(ValueError, match="registered twice"):
        presets.register("small", Outer)


def test_a_file_overrides_its_preset_or_the_default(tmp_path: Path) -> None:
    presets: Presets[Outer] = Presets("demo")
    presets.register("small", lambda: Outer(name="small", inner=Inner(steps=1, rate=4.0)))
    path = tmp_path / "c.yaml"
    path.write_text("preset: small\ninner:\n  steps: 2\n")
    assert load_file(path, presets, Outer) == Outer(name="small", inner=Inner(steps=2, rate=4.0))
    path.write_text("inner:\n  steps: 2\n")
    assert load_file(path, presets, lambda: Outer(name="custom")) == Outer(name="custom", inner=Inner(steps=2))
    path.write_text("preset: small\ninner:\n  stpes: 2\n")
    with pytest.raises(ConfigError, match=r"c.yaml: inner: unknown keys \['inner.stpes'\]"):
        load_file(path, presets, Outer)
    path.write_text("inner: [\n")
    with pytest.raises(ConfigError, match="cannot read demo config"):
        load_file(path, presets, Outer)
    path.write_text("")
    assert read_yaml(path) == {}


@pytest.mark.parametrize("value", [float("nan"), float("inf"), -0.01])
def test_a_distance_or_wait_is_finite_and_not_negative(value: float) -> None:
    """NaN compares False with everything: unchecked, it would switch a guard off silently."""
    assert at_least_zero("guard_m", 0.0) == 0.0 and at_least_zero("guard_m", 0.25) == 0.25
    with pytest.raises(ConfigError, match=r"guard_m: expected a finite number >= 0 \(seconds\), got"):
        at_least_zero("guard_m", value, "seconds")


@dataclass
class _Section:
    size: int = 1

    def validate(self) -> _Section:
        if self.size < 1:
            raise ConfigError("size: must be positive")
        return self


@dataclass
class _Recipe(ModelRecipe):
    name: str = "custom"
    model: _Section = field(default_factory=_Section)
    train: _Section = field(default_factory=_Section)


def test_a_recipe_round_trips_and_validates_each_section() -> None:
    recipe = _Recipe.from_dict({"name": "mine", "model": {"size": 3}})
    assert recipe == _Recipe("mine", _Section(3), _Section(1))
    assert _Recipe.from_dict(recipe.to_dict()) == recipe
    with pytest.raises(ConfigError, match="size: must be positive"):
        _Recipe.from_dict({"train": {"size": 0}})
    with pytest.raises(ConfigError, match="config: expected a mapping, got list"):
        _Recipe.from_dict([])
    with pytest.raises(ConfigError, match="model.width"):
        _Recipe.from_dict({"model": {"width": 2}})
