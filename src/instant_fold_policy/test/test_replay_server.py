"""PolicyServer.from_checkpoints loads a registration-replay directory (config.json only) as the
runner, identifies it without weights, and serves absolute chunks from a demonstration."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from policy_fixtures import HOME, cloth_frame, make_demonstration

from instant_fold_core.checkpoint import CheckpointError
from instant_fold_core.contracts import ChunkRepresentation
from instant_fold_core.errors import ConfigError, InvalidInputError
from instant_fold_learning.policy.inference import PolicyRunner
from instant_fold_learning.policy.replay import RegistrationReplay
from instant_fold_learning.testing import untrained_checkpoints
from instant_fold_policy.server import PolicyServer, PolicyServerError, policy_checkpoint_id

#: The repository's models (the installed share holds a copy made at build time).
MODELS = Path(__file__).resolve().parents[3] / "models"


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory) -> tuple[Path, Path]:
    return untrained_checkpoints(tmp_path_factory.mktemp("ckpt"))


def replay_dir(root: Path, **config) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "config.json").write_text(json.dumps({"variant": "registration_replay", **config}))
    return root


def test_replay_directory_loads_as_the_runner(checkpoints, tmp_path: Path) -> None:
    policy_dir, encoder_dir = checkpoints
    directory = replay_dir(tmp_path / "replay", horizon=6, execute_steps=3)
    server = PolicyServer.from_checkpoints(directory, encoder_dir, device="cpu")
    assert isinstance(server.runner, RegistrationReplay) and server.conditioning == "demo" and server.horizon == 6
    tokens = server.tokenize(*cloth_frame())
    server.load_demonstration(make_demonstration())
    assert server.expected_events == 2
    chunk = server.predict(tokens, HOME)
    assert chunk.representation is ChunkRepresentation.ABSOLUTE and chunk.positions.shape == (6, 2, 3)
    assert chunk.steps_to_execute == 3 and chunk.step_duration == 0.05  # the config's cadence
    assert chunk.keypose is not None and chunk.keypose[0, 3] == 0.0  # the left arm's grasp comes first
    # The learned policy stays the default, and a deployment's cadence overrides the config's.
    assert isinstance(PolicyServer.from_checkpoints(policy_dir, encoder_dir, device="cpu").runner, PolicyRunner)
    paced = PolicyServer.from_checkpoints(directory, encoder_dir, device="cpu", step_duration=0.1)
    paced.load_demonstration(make_demonstration())
    assert paced.predict(tokens, HOME).step_duration == 0.1
    with pytest.raises(InvalidInputError, match="reads no instruction"):
        server.load_instruction("fold both sleeves down")
    # Loading restarts the walker, so even the same demonstration is loaded again: a second fold
    # starts from the first stage (the learned policy's server skips that encoding).
    restarted = PolicyServer.from_checkpoints(directory, encoder_dir, device="cpu")
    restarted.load_demonstration(make_demonstration())
    start = restarted.predict(tokens, HOME).keypose
    restarted.runner._stage = 1  # a fold went on to the next stage
    restarted.load_demonstration(make_demonstration())
    assert restarted.runner._stage == 0
    np.testing.assert_array_equal(restarted.predict(tokens, HOME).keypose, start)


def test_identified_by_its_configuration(checkpoints, tmp_path: Path) -> None:
    policy_dir, _ = checkpoints
    a = policy_checkpoint_id(replay_dir(tmp_path / "a", horizon=6, execute_steps=3))
    assert a == policy_checkpoint_id(replay_dir(tmp_path / "a2", execute_steps=3, horizon=6))
    assert a != policy_checkpoint_id(replay_dir(tmp_path / "b", horizon=8))
    assert len(a) == 12
    assert len(policy_checkpoint_id(policy_dir)) == 12  # a learned checkpoint: its weights too
    with pytest.raises(CheckpointError):
        policy_checkpoint_id(tmp_path / "nothing")


def test_bad_replay_configuration_is_refused(checkpoints, tmp_path: Path) -> None:
    _, encoder_dir = checkpoints
    with pytest.raises(ConfigError, match="unknown keys"):
        PolicyServer.from_checkpoints(replay_dir(tmp_path / "typo", horizn=6), encoder_dir, device="cpu")
    with pytest.raises(PolicyServerError, match="gives 64 x 64 tokens, the policy expects 64 x 32"):
        PolicyServer.from_checkpoints(replay_dir(tmp_path / "dims", cloth_feature_dim=32), encoder_dir, device="cpu")


def test_shipped_replay_matches_the_shipped_encoder() -> None:
    server = PolicyServer.from_checkpoints(MODELS / "registration_replay", MODELS / "encoder", device="cpu")
    assert isinstance(server.runner, RegistrationReplay) and server.encoder_id
