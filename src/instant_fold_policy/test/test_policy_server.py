"""PolicyServer: checkpoints -> cached demonstration -> absolute action chunks; clear refusals."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from policy_fixtures import HOME, cloth_frame, make_demonstration

from instant_fold_core.contracts import ChunkRepresentation
from instant_fold_core.encoder.configuration import preset as encoder_preset
from instant_fold_core.encoder.modeling import ClothTokenizer
from instant_fold_core.errors import InvalidInputError
from instant_fold_core.testing import untrained_checkpoints
from instant_fold_policy.server import PolicyServer, PolicyServerError


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory) -> tuple[Path, Path]:
    return untrained_checkpoints(tmp_path_factory.mktemp("ckpt"))


@pytest.fixture(scope="module")
def server(checkpoints) -> PolicyServer:
    return PolicyServer.from_checkpoints(*checkpoints, device="cpu")


def test_predicts_absolute_chunks_from_the_cached_demonstration(server: PolicyServer) -> None:
    frame, mask = cloth_frame()
    tokens = server.tokenize(frame, mask)
    with pytest.raises(PolicyServerError, match="no demonstration loaded"):
        server.predict(tokens, HOME)
    encode_s = server.load_demonstration(make_demonstration())
    assert encode_s > 0 and server.expected_events == 2
    np.testing.assert_array_equal(server.home, HOME[:, :3])
    prediction = server.predict(tokens, HOME)
    assert prediction.representation is ChunkRepresentation.ABSOLUTE and prediction.step_duration == 0.1
    assert prediction.targets.shape == (server.horizon, 2, 4) and np.isfinite(prediction.targets).all()
    assert set(np.unique(prediction.targets[..., 3])) <= {0.0, 1.0}
    assert prediction.keypose is not None and prediction.keypose.shape == (2, 4)
    assert 1 <= prediction.steps_to_execute <= server.horizon
    assert server.predict(tokens, HOME, steps_to_execute=1).steps_to_execute == 1
    with pytest.raises(InvalidInputError, match=rf"steps_to_execute: must be in \[1, {server.horizon}\]"):
        server.predict(tokens, HOME, steps_to_execute=server.horizon + 1)


def test_folds_are_repeatable_from_each_demonstration_load(server: PolicyServer) -> None:
    """The sampler's noise is reseeded with every demonstration: the same queries, the same chunks
    (torch's global generator would differ per process), while successive queries still differ."""
    tokens = server.tokenize(*cloth_frame())

    def fold() -> list[np.ndarray]:
        server.load_demonstration(make_demonstration())
        return [server.predict(tokens, HOME).targets for _ in range(3)]

    torch.manual_seed(123)
    first = fold()
    torch.manual_seed(456)
    second = fold()
    for a, b in zip(first, second, strict=True):
        np.testing.assert_array_equal(a, b)
    assert not np.array_equal(first[0], first[1])


def test_tokens_of_another_encoder_are_refused(server: PolicyServer) -> None:
    server.load_demonstration(make_demonstration())
    tokens = server.tokenize(*cloth_frame())
    with pytest.raises(PolicyServerError, match="tokens come from encoder other"):
        server.predict(tokens, HOME, encoder_id="other")
    server.predict(tokens, HOME, encoder_id=server.encoder_id)


def test_tokenizer_and_policy_must_agree(checkpoints, tmp_path: Path) -> None:
    policy_dir, _ = checkpoints
    config = encoder_preset("cpu-small")
    config.feature_dim = 32
    torch.manual_seed(0)
    other = ClothTokenizer(config).save_pretrained(tmp_path / "tokenizer32")
    with pytest.raises(PolicyServerError, match="the policy expects 64 x 64"):
        PolicyServer.from_checkpoints(policy_dir, other, device="cpu")
