"""The keypoint detector: what it predicts, how it learns, its checkpoints, its CLI, and how a
demonstrated grasp is carried by a keypoint."""

from __future__ import annotations

import dataclasses
import json
import math

import numpy as np
import pytest
import torch

from instant_fold_core.checkpoint import CheckpointError
from instant_fold_core.config import override
from instant_fold_core.registration import PlanarRigid
from instant_fold_core.tokens import TokenArrays
from instant_fold_learning import train_keypoints
from instant_fold_learning.keypoints import PRESETS, KeypointDetector, KeypointOutput, Keypoints, keypoint_losses
from instant_fold_learning.keypoints.mapping import KeypointCarrier, carry_by_keypoint, keypoint_shift
from instant_fold_learning.keypoints.training import KeypointFrames, evaluate, train
from instant_fold_learning.policy.data import PolicyDataError, TokenizedEpisode
from instant_fold_learning.policy.replay import ReplayConfig, map_grasp, register_keyframe
from instant_fold_learning.policy.synthetic import synthetic_episodes

K = 7


def with_keypoints(episodes: list[TokenizedEpisode]) -> list[TokenizedEpisode]:
    """Synthetic episodes whose 7 keypoints are material points of the sheet: the tokens whose
    features are those of 7 tokens of the first frame (the features are a fixed function of the
    material coordinates, so the same points are found in every frame and episode)."""
    first = episodes[0]
    reference = first.cloth_features[0][np.linspace(0, first.cloth_features.shape[1] - 1, K).astype(int)]
    out = []
    for e in episodes:
        match = np.linalg.norm(e.cloth_features[:, None] - reference[None, :, None], axis=-1).argmin(-1)  # [T, K]
        keypoints = np.take_along_axis(e.cloth_positions, match[..., None], axis=1)
        out.append(dataclasses.replace(e, keypoints=keypoints, keypoint_visible=np.ones(keypoints.shape[:2], bool)))
    return out


@pytest.fixture(scope="module")
def episodes() -> list[TokenizedEpisode]:
    return with_keypoints(synthetic_episodes(3, ("bottom_up", "right_over_left"), 2, 64, 64))


def small(steps: int, **train: object):
    return override(PRESETS.get("cpu-small"), {"train": {"steps": steps, "batch_size": 16, "log_every": 10, **train}})


def test_predictions_lie_on_the_valid_cloth():
    """A keypoint is a windowed mean of valid tokens plus a bounded offset: padding is never pointed
    at, and no prediction lies farther from a valid token than the window and the offset allow."""
    torch.manual_seed(0)
    cfg = PRESETS.get("cpu-small")
    model = KeypointDetector(cfg).eval()
    positions = torch.rand(3, 64, 3) * torch.tensor([0.4, 0.4, 0.05]) + torch.tensor([0.0, 0.0, 0.8])
    valid = torch.ones(3, 64, dtype=torch.bool)
    valid[:, 40:] = False
    positions[:, 40:, :2] += 5.0  # padding far away: any weight on it would show
    out = model(positions, torch.randn(3, 64, 64), valid)
    assert out.position.shape == (3, K, 3) and out.visible_logit.shape == (3, K)
    assert torch.isinf(out.logits[:, :, 40:]).all() and torch.isfinite(out.logits[:, :, :40]).all()
    nearest = torch.cdist(out.position[..., :2], positions[:, :40, :2]).min(-1).values
    m = cfg.model
    assert (nearest <= m.window_m + m.offset_xy_m * math.sqrt(2) + 1e-6).all()


def test_losses_follow_their_definition():
    """Pointer cross-entropy towards the token nearest each visible keypoint, smooth-L1 in units of
    5 cm over the visible ones, visibility BCE over all."""
    positions = torch.tensor([[[0.0, 0.0, 1.0], [0.1, 0.0, 1.0], [0.0, 0.1, 1.0]]])
    valid = torch.tensor([[True, True, True]])
    keypoints = torch.tensor([[[0.09, 0.01, 1.0], [0.0, 0.0, 1.0]]])
    visible = torch.tensor([[True, False]])
    logits = torch.tensor([[[0.0, 2.0, 0.0], [5.0, 0.0, 0.0]]])
    position = torch.tensor([[[0.12, 0.01, 1.0], [0.3, 0.3, 1.0]]])
    visible_logit = torch.tensor([[1.0, -1.0]])
    losses = keypoint_losses(KeypointOutput(logits, position, visible_logit), positions, valid, keypoints, visible)
    expected_ce = -math.log(math.exp(2.0) / (2 + math.exp(2.0)))  # token 1 is nearest the first keypoint
    d = 0.03 / 0.05  # 0.6 < 1: quadratic branch of smooth-L1
    expected_bce = (math.log(1 + math.exp(-1.0)) + math.log(1 + math.exp(-1.0))) / 2
    assert losses["pointer"].item() == pytest.approx(expected_ce, rel=1e-5)
    assert losses["position"].item() == pytest.approx(0.5 * d * d, rel=1e-4)
    assert losses["visible"].item() == pytest.approx(expected_bce, rel=1e-5)


def test_the_detector_learns_keypoints_and_reports_their_errors(episodes, tmp_path):
    """From the features alone (the sheet moves and folds), a cpu-small detector finds the 7
    material points far better than its untrained self, on episodes it did not train on."""
    train_eps, held_out = episodes[:-2], episodes[-2:]
    frames = KeypointFrames(held_out, 2)
    torch.manual_seed(0)
    before = evaluate(KeypointDetector(small(1)), frames)["all"]["mean_cm"]
    end = train(small(300, lr=3e-3), train_eps, tmp_path / "run", held_out, echo=False)
    after = end["eval"]["all"]
    assert after["mean_cm"] < 2.0 < 6.0 < before, (before, after)
    assert set(end["eval"]["keypoints"]) >= {"top_left", "bottom_right", "center"}
    assert end["eval"]["visibility_accuracy"] == 1.0  # every synthetic keypoint is visible


def test_checkpoint_round_trip_and_clear_errors(episodes, tmp_path):
    torch.manual_seed(1)
    model = KeypointDetector(PRESETS.get("cpu-small")).eval()
    model.save_pretrained(tmp_path / "det")
    loaded = KeypointDetector.from_pretrained(tmp_path / "det")
    e = episodes[0]
    tokens = TokenArrays(e.cloth_positions[3], e.cloth_features[3], e.cloth_valid[3])
    a, b = model.predict(tokens), loaded.predict(tokens)
    np.testing.assert_array_equal(a.positions, b.positions)
    np.testing.assert_array_equal(a.visible, b.visible)
    config = json.loads((tmp_path / "det" / "config.json").read_text())
    (tmp_path / "det" / "config.json").write_text(json.dumps({**config, "kind": "policy"}))
    with pytest.raises(CheckpointError, match="not describe a keypoint detector"):
        KeypointDetector.from_pretrained(tmp_path / "det")
    (tmp_path / "det" / "config.json").write_text(json.dumps({**config, "model": {**config["model"], "width": 7}}))
    with pytest.raises(CheckpointError, match="invalid config.json"):
        KeypointDetector.from_pretrained(tmp_path / "det")
    with pytest.raises(CheckpointError, match="no such directory"):
        KeypointDetector.from_pretrained(tmp_path / "missing")


def test_frames_without_keypoints_are_refused(episodes):
    bare = [dataclasses.replace(e, keypoints=None, keypoint_visible=None) for e in episodes]
    with pytest.raises(PolicyDataError, match="no episode carries keypoints"):
        KeypointFrames(bare, 1)


def test_cli_trains_refuses_to_overwrite_and_resumes(episodes, tmp_path, capsys):
    tokens = tmp_path / "tokens"
    tokens.mkdir()
    for i, e in enumerate(episodes[:2]):
        e.save(tokens / f"ep{i}.npz")
    args = ["--tokens", str(tokens), "--eval-tokens", str(tokens), "--out", str(tmp_path / "run"), "--device", "cpu"]
    assert train_keypoints.main([*args, "--steps", "4"]) == 0
    assert (tmp_path / "run" / "detector" / "model.safetensors").is_file()
    assert train_keypoints.main([*args, "--steps", "4"]) == 2
    assert "already holds a training run" in capsys.readouterr().err
    for bad, message in (
        (["--tokens", str(tmp_path / "none")], "no .npz tokenised episodes"),
        (["--config", "cpu_small"], "neither a YAML file nor a keypoint detector preset"),
        (["--device", "cuda:7"], "device 'cuda:7'"),
    ):
        assert train_keypoints.main([*args, "--out", str(tmp_path / "other"), *bad]) == 2
        assert message in capsys.readouterr().err
    assert train_keypoints.main([*args, "--steps", "6", "--resume"]) == 0
    log = [json.loads(line) for line in (tmp_path / "run" / "log.jsonl").read_text().splitlines()]
    assert [r["event"] for r in log].count("start") == 1
    assert [r["step"] for r in log if r["event"] == "end"] == [4, 6]


def test_a_grasp_at_a_keypoint_follows_that_keypoint():
    """The demonstrated grasp 1 cm from the demonstration's left sleeve tip lands 1 cm (turned by the
    registration) from where the current cloth's sleeve tip is, even where the rigid motion would put
    it elsewhere; a grasp away from every keypoint, or at one not seen in both frames, is not carried."""
    xy = [[-0.2, 0.15], [0.2, 0.15], [-0.12, -0.2], [0.12, -0.2], [-0.08, 0.12], [0.08, 0.12], [0.0, 0.0]]
    demo = Keypoints(np.c_[np.array(xy), np.full(K, 0.8)], np.ones(K))
    turn = PlanarRigid.from_angle(torch.tensor([0.3], dtype=torch.float64), torch.tensor([[0.02, -0.01]]))
    current_xy = np.asarray(turn.apply(demo.positions[None]))[0]
    current_xy[0, :2] += [0.10, 0.05]  # the sleeve tip lies elsewhere than a rigid motion says
    current = Keypoints(current_xy, np.ones(K))
    grasp = demo.positions[0] + [0.01, 0.0, 0.0]
    match = carry_by_keypoint(demo, current, turn, grasp, 0.05)
    assert match is not None and match.keypoint == 0 and match.distance_m == pytest.approx(0.01)
    rotation = turn.rotation[0].numpy()
    np.testing.assert_allclose(match.point_xy, current_xy[0, :2] + rotation @ [0.01, 0.0], atol=1e-12)
    far = np.array([0.0, -0.08, 0.8])  # 8 cm from the centre, farther from every other keypoint
    assert carry_by_keypoint(demo, current, turn, far, 0.05) is None
    assert carry_by_keypoint(demo, current, turn, far, 0.09).keypoint == 6  # type: ignore[union-attr]
    hidden = Keypoints(current.positions, np.r_[0.2, np.ones(K - 1)])
    assert carry_by_keypoint(demo, hidden, turn, grasp, 0.05) is None


def test_map_grasp_moves_the_grasp_by_the_keypoint_shift(episodes):
    """`keypoint_shift` is how far the carrier moves a grasp from the rigid fit's point: `map_grasp`
    given it lands where the carrier says (x, y); a grasp at no keypoint, or one the carry would move
    less than `min_shift_m`, has no shift and keeps the fit (the current cloth is stretched, so the
    two differ)."""
    torch.manual_seed(2)
    detector = KeypointDetector(PRESETS.get("cpu-small")).eval()
    torch.nn.init.constant_(detector.visible[-1].bias, 5.0)  # it sees every keypoint
    demo_ep, now = episodes[0], episodes[1]
    state = now.arm_state[:1].astype(np.float64).copy()
    state[0, 0, :3] = demo_ep.cloth_positions[0, 5]
    demo = (demo_ep.cloth_positions[:1].astype(np.float64), demo_ep.cloth_features[:1], demo_ep.cloth_valid[:1], state)
    stretched = now.cloth_positions[4].astype(np.float64)
    stretched[:, :2] = (stretched[:, :2] - stretched[:, :2].mean(0)) * 1.3  # no rigid motion fits it
    cloth = (stretched, now.cloth_features[4], now.cloth_valid[4])
    cfg = ReplayConfig()
    fit = register_keyframe(cfg, demo, 0, cloth)
    rigid, _ = map_grasp(cfg, fit, demo, 0, 0, cloth)
    everywhere = KeypointCarrier(detector, match_m=10.0, min_shift_m=0.0)  # every grasp is at some keypoint
    shift = keypoint_shift(everywhere, fit, demo, 0, 0, cloth)
    match = everywhere.carry(fit, TokenArrays(demo[0][0], demo[1][0], demo[2][0]), TokenArrays(*cloth), state[0, 0, :3])
    assert shift is not None and match is not None and np.linalg.norm(shift) > 1e-4
    carried, _ = map_grasp(cfg, fit, demo, 0, 0, cloth, shift)
    np.testing.assert_allclose(carried[:2], match.point_xy, atol=1e-12)
    np.testing.assert_allclose(carried[:2], rigid[:2] + shift, atol=1e-12)
    assert keypoint_shift(KeypointCarrier(detector, match_m=0.0), fit, demo, 0, 0, cloth) is None
    above = float(np.linalg.norm(shift)) + 1e-6  # a carry that moves the grasp less than min_shift_m is not taken
    assert keypoint_shift(KeypointCarrier(detector, 10.0, min_shift_m=above), fit, demo, 0, 0, cloth) is None


@pytest.mark.parametrize("name", ["cpu-small", "paper"])
def test_both_presets_read_their_encoders_tokens(name: str) -> None:
    """Each preset takes the tokens of the encoder preset of its name (features and count)."""
    from instant_fold_learning.encoder.configuration import preset as encoder_preset

    cfg = PRESETS.get(name)
    encoder = encoder_preset(name)
    assert (cfg.model.cloth_feature_dim, cfg.model.num_cloth_tokens) == (encoder.feature_dim, encoder.num_tokens)
    out = KeypointDetector(cfg)(
        torch.rand(1, encoder.num_tokens, 3),
        torch.randn(1, encoder.num_tokens, encoder.feature_dim),
        torch.ones(1, encoder.num_tokens, dtype=torch.bool),
    )
    assert out.position.shape == (1, K, 3)
