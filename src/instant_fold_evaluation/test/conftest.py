"""What the tests of this package share: one tiny evaluation (it simulates for about two minutes)
and the synthetic tokenised episodes the offline checks are probed on.

`config/benchmarks/tiny.yaml`: one garment, one start, two contexts, two oracle executions each,
four policy queries per rollout, with the default models of `models/`.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from instant_fold_evaluation.evaluate import main
from instant_fold_learning.policy.configuration import preset
from instant_fold_learning.policy.synthetic import MODES, synthetic_episodes
from instant_fold_ros.bringup_share import models_dir


@pytest.fixture(scope="session")
def tiny_run(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("tiny_eval")
    args = [
        "--benchmark", "tiny",
        "--checkpoint", str(models_dir() / "policy"),
        "--encoder", str(models_dir() / "encoder"),
        "--bank", str(root / "bank"),
        "--demo-dir", str(root / "demos"),
        "--out", str(root / "out"),
    ]  # fmt: skip
    assert main(args) == 0
    return root


@pytest.fixture(scope="module")
def episodes():
    """One garment, two start states, each folded in two modes (cpu-small's token layout)."""
    m = preset("cpu-small").model
    return synthetic_episodes(1, tuple(MODES)[:2], 2, m.cloth_feature_dim, m.num_cloth_tokens)
