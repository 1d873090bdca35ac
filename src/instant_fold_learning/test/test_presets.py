"""The encoder and policy presets of each scale plug together (token count and feature width)."""

from __future__ import annotations

import pytest

from instant_fold_learning.encoder.configuration import preset as encoder_preset
from instant_fold_learning.policy.configuration import preset as policy_preset


@pytest.mark.parametrize(
    ("encoder", "policy"), [("paper", "paper"), ("paper", "paper-real"), ("cpu-small", "cpu-small")]
)
def test_tokenizer_output_matches_policy_input(encoder: str, policy: str) -> None:
    enc, pol = encoder_preset(encoder), policy_preset(policy).model
    assert (enc.num_tokens, enc.feature_dim) == (pol.num_cloth_tokens, pol.cloth_feature_dim)
