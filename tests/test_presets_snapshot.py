"""Every named preset (encoder, encoder training, policy, sim) keeps the values it had, and the
shipped models' saved configs load to exactly what they hold.

The presets define the default models and the data they were trained on; a refactor of how
presets are registered or loaded must not move a single value. `data/presets_snapshot.json` was
written from the presets before issue 15's consolidation; the comparison is on JSON text, so an
integer turning into a float (8 -> 8.0) or a tuple turning into something else counts as a change.
Update the snapshot only together with a deliberate preset change (and new default models).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from instant_fold_learning.encoder.configuration import preset as encoder_preset
from instant_fold_learning.encoder.modeling import ClothEncoder
from instant_fold_learning.encoder.training import PRESETS as PRETRAIN_PRESETS
from instant_fold_learning.policy.configuration import (
    LEGACY_MODES,
    InstantFoldPolicyConfig,
    PolicyConfig,
    TrainingConfig,
)
from instant_fold_learning.policy.configuration import preset as policy_preset
from instant_fold_sim.rollout import preset as sim_preset

SNAPSHOT = Path(__file__).parent / "data" / "presets_snapshot.json"
MODELS = Path(__file__).parents[1] / "models"


def _text(value: Any) -> str:
    return json.dumps(value, indent=1, sort_keys=True)


def test_presets_are_unchanged() -> None:
    snapshot = json.loads(SNAPSHOT.read_text())
    current = {
        "encoder": {name: encoder_preset(name).to_dict() for name in snapshot["encoder"]},
        "encoder_training": {name: PRETRAIN_PRESETS.get(name).train.to_dict() for name in snapshot["encoder_training"]},
        "policy": {name: policy_preset(name).to_dict() for name in snapshot["policy"]},
        "sim": {name: sim_preset(name).to_dict() for name in snapshot["sim"]},
    }
    for registry, presets in snapshot.items():
        for name, values in presets.items():
            assert _text(current[registry][name]) == _text(values), f"{registry} preset {name!r} changed"


def test_shipped_model_configs_load_unchanged() -> None:
    """A config saved with weights reads back field for field: the loader may not drop, convert
    or default anything a shipped checkpoint relies on."""
    encoder = json.loads((MODELS / "encoder" / "config.json").read_text())["encoder"]
    assert _text(ClothEncoder.from_pretrained(MODELS / "encoder").config.to_dict()) == _text(encoder)
    policy = json.loads((MODELS / "policy" / "config.json").read_text())
    # Since v5: the mode-id table size, which a demonstration-conditioned policy never used, is
    # dropped; the language variant's instruction fields are added at their defaults, and so are
    # training options added since (off by default).
    migrated = {k: v for k, v in policy["model"].items() if k != LEGACY_MODES}
    model_added = ("vocabulary_size", "max_instruction_words", "event_progress", "progress_bias")
    added = {f: getattr(PolicyConfig(), f) for f in model_added if f not in policy["model"]}
    trained = {f: getattr(TrainingConfig(), f) for f in ("anchor_teacher_shift_m",) if f not in policy["train"]}
    expected = {**policy, "model": {**migrated, **added}, "train": {**policy["train"], **trained}}
    assert _text(InstantFoldPolicyConfig.from_dict(policy).to_dict()) == _text(expected)
