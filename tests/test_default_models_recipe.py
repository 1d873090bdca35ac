"""The shipped policy is what `scripts/train_default_models.sh` trains by default: its cpu-small
policy stage (steps, training keys, model keys) is the configuration saved with the weights, so the
script and the model card cannot drift apart."""

from __future__ import annotations

import json
import re
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]


def _cpu_small_defaults(script: str) -> dict[str, str]:
    """The variables the script's cpu-small branch sets (`name=${ENV:-default}` or `name="..."`)."""
    branch = script.split("\nelse\n", 1)[1].split("\nfi\n", 1)[0]
    values = dict(re.findall(r"(\w+)=\$\{\w+:-([^}]*)\}", branch))
    values.update(re.findall(r'(\w+)="([^"]*)"', branch))
    return values


def test_the_shipped_policy_is_the_scripts_default_recipe() -> None:
    defaults = _cpu_small_defaults((REPO / "scripts" / "train_default_models.sh").read_text())
    shipped = json.loads((REPO / "models" / "policy" / "config.json").read_text())
    train = yaml.safe_load("{" + defaults["policy_train"] + "}")
    model = yaml.safe_load(defaults["policy_model"])
    assert shipped["train"]["steps"] == int(defaults["policy_steps"])
    assert {k: shipped["train"][k] for k in train} == train
    assert {k: shipped["model"][k] for k in model} == model


def test_the_language_row_is_the_default_recipe_told_in_words() -> None:
    """config/policies/cpu_small_language.yaml (the language row of the paper's orderings) trains as
    the script's default policy does, told the fold in words instead of shown a demonstration."""
    defaults = _cpu_small_defaults((REPO / "scripts" / "train_default_models.sh").read_text())
    language = yaml.safe_load((REPO / "config" / "policies" / "cpu_small_language.yaml").read_text())
    train = yaml.safe_load("{" + defaults["policy_train"] + "}")
    assert {k: language["train"][k] for k in train} == train
    assert language["train"]["steps"] == int(defaults["policy_steps"])
    demonstration_only = ("demo_alignment", "registration_rotations")  # nothing to align without one
    model = {k: v for k, v in yaml.safe_load(defaults["policy_model"]).items() if k not in demonstration_only}
    assert language["model"] == {**model, "conditioning": "language"}
