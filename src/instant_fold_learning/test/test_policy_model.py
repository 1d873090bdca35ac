"""Model-level tests of the in-context policy: shapes, masks, relative attention, cache, losses, I/O."""

from __future__ import annotations

import copy
import dataclasses
import json

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from instant_fold_core.checkpoint import CheckpointError
from instant_fold_core.contracts import ChunkRepresentation
from instant_fold_core.errors import ConfigError
from instant_fold_learning.policy.configuration import InstantFoldPolicyConfig, load_config, preset
from instant_fold_learning.policy.data import DemoTokens, ObservationTokens, collate
from instant_fold_learning.policy.dataset import PolicyDataset
from instant_fold_learning.policy.inference import PolicyInputError, PolicyRunner, sample_cached, sample_naive
from instant_fold_learning.policy.modeling import InstantFoldPolicy
from instant_fold_learning.policy.normalization import MinMaxNormalizer, NormalizerError
from instant_fold_learning.policy.synthetic import MODES, synthetic_episodes
from instant_fold_learning.policy.visualize import Expert, plot_demo_conditioning
from instant_fold_learning.testing import ANCHORED

ABLATIONS = (
    "use_context_encoder",
    "use_proprio_in_context",
    "use_keypose_aux",
    "use_alibi",
    "use_state_event_tokens",
    "use_summary_tokens",
)


def small_config(**model_overrides) -> InstantFoldPolicyConfig:
    cfg = preset("cpu-small")
    cfg.model = dataclasses.replace(cfg.model, **model_overrides).validate()
    return cfg


def randomise(policy: InstantFoldPolicy, seed: int = 0) -> InstantFoldPolicy:
    """Random weights everywhere (AdaLN-Zero gates included) so no block is an identity at init."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in policy.parameters():
            p.copy_(torch.randn(p.shape, generator=g) * 0.2)
    return policy


@pytest.fixture(scope="module")
def episodes():
    cfg = preset("cpu-small").model
    return synthetic_episodes(1, tuple(MODES)[:2], 2, cfg.cloth_feature_dim, cfg.num_cloth_tokens)


def make_policy(cfg: InstantFoldPolicyConfig, episodes, seed: int = 0) -> tuple[InstantFoldPolicy, PolicyDataset]:
    torch.manual_seed(seed)
    policy = InstantFoldPolicy(cfg.model)
    dataset = PolicyDataset(episodes, cfg.model.horizon, cfg.train, cfg.model.conditioning == "language")
    dataset.calibrate(policy.normalizers)
    policy.mode_ids, policy.vocabulary = dataset.mode_ids, dataset.vocabulary
    return randomise(policy, seed).eval(), dataset


def make_batch(dataset: PolicyDataset, n: int = 4, seed: int = 0):
    rng = np.random.default_rng(seed)
    return collate([dataset.sample(int(i), rng) for i in rng.integers(len(dataset), size=n)])


def fixed_velocity(policy, batch, seed: int = 1):
    """Decoder output on fixed noisy actions (t = 0.5) through the full uncached path."""
    g = torch.Generator().manual_seed(seed)
    b, h = batch.obs.arm_state.shape[0], policy.cfg.horizon
    z, zk = torch.randn(b, h, 2, 3, generator=g), torch.randn(b, 2, 3, generator=g)
    scene = policy.prepare_scene(batch.obs, policy.encode_context(batch.demo))
    return policy.velocity(scene, z, zk if policy.cfg.flow_keypose else None, torch.full((b,), 0.5))


def test_output_shapes(episodes):
    policy, dataset = make_policy(small_config(), episodes)
    batch = make_batch(dataset)
    out = fixed_velocity(policy, batch)
    h = policy.cfg.horizon
    assert out.traj_velocity.shape == (4, h, 2, 3)
    assert out.traj_gripper_logit.shape == (4, h, 2)
    assert out.keypose_velocity.shape == (4, 2, 3) and out.keypose_gripper_logit.shape == (4, 2)
    assert torch.isfinite(out.traj_velocity).all()


def _pad_demo(demo: DemoTokens, extra: int, g: torch.Generator) -> DemoTokens:
    """Append `extra` keyframes of random content, marked as padding by the frame mask."""
    b, _, n, d = demo.cloth_features.shape

    def cat(a: torch.Tensor, new: torch.Tensor) -> torch.Tensor:
        return torch.cat((a, new), 1)

    return DemoTokens(
        cat(demo.cloth_positions, torch.randn(b, extra, n, 3, generator=g)),
        cat(demo.cloth_features, torch.randn(b, extra, n, d, generator=g) * 5),
        cat(demo.cloth_valid, torch.rand(b, extra, n, generator=g) > 0.5),
        cat(demo.arm_state, torch.randn(b, extra, 2, 4, generator=g)),
        cat(demo.frame_mask, torch.zeros(b, extra, dtype=torch.bool)),
        demo.instruction,
    )


@pytest.mark.parametrize("ablation", (None, *ABLATIONS, "anchored"))
def test_padding_never_changes_valid_outputs(episodes, ablation):
    """Padded keyframes and invalid cloth tokens (with random content) do not change the actions."""
    overrides = ANCHORED if ablation == "anchored" else ({ablation: False} if ablation else {})
    cfg = small_config(**overrides)
    policy, dataset = make_policy(cfg, episodes)
    batch = make_batch(dataset)
    reference = fixed_velocity(policy, batch)
    g = torch.Generator().manual_seed(5)
    # Extra invalid cloth tokens in the current observation, with arbitrary content.
    obs = batch.obs
    b, _, d = obs.cloth_features.shape
    padded_obs = ObservationTokens(
        torch.cat((obs.cloth_positions, torch.randn(b, 7, 3, generator=g)), 1),
        torch.cat((obs.cloth_features, torch.randn(b, 7, d, generator=g) * 5), 1),
        torch.cat((obs.cloth_valid, torch.zeros(b, 7, dtype=torch.bool)), 1),
        obs.arm_state,
    )
    padded = dataclasses.replace(batch, demo=_pad_demo(batch.demo, 3, g), obs=padded_obs)
    out = fixed_velocity(policy, padded)
    torch.testing.assert_close(out.traj_velocity, reference.traj_velocity, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(out.traj_gripper_logit, reference.traj_gripper_logit, atol=1e-5, rtol=1e-5)
    if cfg.model.flow_keypose:
        torch.testing.assert_close(out.keypose_velocity, reference.keypose_velocity, atol=1e-5, rtol=1e-5)


def test_invalid_tokens_matter_when_valid(episodes):
    """Control for the padding test: the same garbage, marked valid, does change the output."""
    policy, dataset = make_policy(small_config(), episodes)
    batch = make_batch(dataset)
    reference = fixed_velocity(policy, batch)
    g = torch.Generator().manual_seed(5)
    demo = _pad_demo(batch.demo, 3, g)
    demo.frame_mask[:] = True
    demo.cloth_valid[:] = True
    out = fixed_velocity(policy, dataclasses.replace(batch, demo=demo))
    assert (out.traj_velocity - reference.traj_velocity).abs().max() > 1e-3


def test_relative_attention_is_translation_invariant(episodes):
    """RoPE + 3D ALiBi see only relative positions: shifting every position leaves velocities equal."""
    policy, dataset = make_policy(small_config(), episodes)
    batch = make_batch(dataset)
    reference = fixed_velocity(policy, batch)
    shift = torch.tensor([0.07, -0.05, 0.03])
    demo, obs = batch.demo, batch.obs

    def shift_state(s: torch.Tensor) -> torch.Tensor:
        return torch.cat((s[..., :3] + shift, s[..., 3:]), -1)

    moved = dataclasses.replace(
        batch,
        demo=dataclasses.replace(
            demo, cloth_positions=demo.cloth_positions + shift, arm_state=shift_state(demo.arm_state)
        ),
        obs=dataclasses.replace(obs, cloth_positions=obs.cloth_positions + shift, arm_state=shift_state(obs.arm_state)),
    )
    # The state encoders see absolute states, so compare with them made translation-blind.
    for module in (policy.tokenizer.state_encoder[0], policy.state_events.mlp[0]):
        module.weight.data[:, :3] = 0
    reference = fixed_velocity(policy, batch)
    out = fixed_velocity(policy, moved)
    torch.testing.assert_close(out.traj_velocity, reference.traj_velocity, atol=2e-4, rtol=1e-4)


@pytest.mark.parametrize("alignment", ["none", "centroid"])
def test_cached_inference_equals_uncached(episodes, alignment):
    """The cached context holds no per-query state: with centroid alignment the offset to the
    current cloth is part of the scene, so cached and uncached paths still agree."""
    policy, dataset = make_policy(small_config(demo_alignment=alignment), episodes)
    batch = make_batch(dataset)
    with torch.no_grad():
        fast = sample_cached(policy, batch.obs, policy.encode_context(batch.demo), torch.Generator().manual_seed(3))
        slow = sample_naive(policy, batch.demo, batch.obs, torch.Generator().manual_seed(3))
    torch.testing.assert_close(fast.traj, slow.traj, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(fast.keypose, slow.keypose, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(fast.traj_gripper_logit, slow.traj_gripper_logit, atol=1e-5, rtol=1e-5)


def test_flow_loss_matches_formula(episodes):
    """compute_loss = ||v - (eps - x)||^2 + BCE + 0.5 (keypose terms) on z_t = (1 - t) x + t eps."""
    policy, dataset = make_policy(small_config(), episodes)
    batch = make_batch(dataset)
    g = torch.Generator().manual_seed(2)
    b, h = 4, policy.cfg.horizon
    t = torch.tensor([0.0, 0.25, 0.6, 1.0])
    eps, eps_k = torch.randn(b, h, 2, 3, generator=g), torch.randn(b, 2, 3, generator=g)
    losses = policy.compute_loss(batch, t=t, noise=(eps, eps_k))
    # Hand-built reference: normalise targets by the min-max formula, interpolate, query the model.
    n = policy.normalizers
    x = 2 * (batch.target.traj_delta - n.delta.low) / (n.delta.high - n.delta.low) - 1
    xk = 2 * (batch.target.keypose_delta - n.keypose.low) / (n.keypose.high - n.keypose.low) - 1
    z = (1 - t.view(b, 1, 1, 1)) * x + t.view(b, 1, 1, 1) * eps
    zk = (1 - t.view(b, 1, 1)) * xk + t.view(b, 1, 1) * eps_k
    out = policy.velocity(policy.prepare_scene(batch.obs, policy.encode_context(batch.demo)), z, zk, t)
    flow = ((out.traj_velocity - (eps - x)) ** 2).mean()
    p = torch.sigmoid(out.traj_gripper_logit)
    y = batch.target.traj_gripper
    bce = -(y * p.log() + (1 - y) * (1 - p).log()).mean()
    kp = ((out.keypose_velocity - (eps_k - xk)) ** 2).mean() + F.binary_cross_entropy_with_logits(
        out.keypose_gripper_logit, batch.target.keypose_gripper
    )
    torch.testing.assert_close(losses["flow"], flow, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(losses["gripper"], bce, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(losses["loss"], flow + bce + 0.5 * kp, atol=1e-5, rtol=1e-5)


def test_flow_target_on_hand_computed_case():
    """A 1-D case by hand: x = 0.5, eps = -1, t = 0.25 -> z = 0.125, target eps - x = -1.5."""
    x, eps, t = torch.tensor(0.5), torch.tensor(-1.0), 0.25
    z = (1 - t) * x + t * eps
    assert float(z) == pytest.approx(0.125)
    # An Euler step of size t with the exact velocity lands on the data point.
    assert float(z - t * (eps - x)) == pytest.approx(0.5)


@pytest.mark.parametrize("ablation", ABLATIONS)
def test_each_ablation_builds_trains_and_samples(episodes, ablation):
    cfg = small_config(**{ablation: False})
    policy, dataset = make_policy(cfg, episodes)
    full, _ = make_policy(small_config(), episodes)
    assert sum(p.numel() for p in policy.parameters()) != sum(p.numel() for p in full.parameters()) or ablation in (
        "use_alibi",
        "use_proprio_in_context",
    )
    batch = make_batch(dataset)
    policy.train()
    losses = policy.compute_loss(batch, generator=torch.Generator().manual_seed(0))
    losses["loss"].backward()
    assert ("keypose_flow" in losses) == cfg.model.use_keypose_aux
    unused = [n for n, p in policy.named_parameters() if p.grad is None]
    assert not unused, f"parameters without gradient (would break DDP): {unused}"
    with torch.no_grad():
        out = sample_cached(policy.eval(), batch.obs, policy.encode_context(batch.demo))
    assert torch.isfinite(out.traj).all() and (out.keypose is None) == (not cfg.model.use_keypose_aux)


def test_ablation_switches_change_the_computation(episodes):
    """use_alibi / use_proprio_in_context keep the parameter count but change the outputs."""
    for ablation in ("use_alibi", "use_proprio_in_context"):
        full, dataset = make_policy(small_config(), episodes)
        ablated, _ = make_policy(small_config(**{ablation: False}), episodes)
        ablated.load_state_dict(full.state_dict())
        batch = make_batch(dataset)
        delta = fixed_velocity(full, batch).traj_velocity - fixed_velocity(ablated, batch).traj_velocity
        assert delta.abs().max() > 1e-4, ablation


def test_language_conditioned_variant_reads_its_instruction_word_by_word(episodes, tmp_path):
    cfg = small_config(conditioning="language")
    policy, dataset = make_policy(cfg, episodes)
    assert dataset.instructions[:2] == ["right over left", "bottom up"]  # synthetic meta: mode names only
    batch = make_batch(dataset)
    assert batch.demo.instruction.shape[0] == 4 and (batch.demo.instruction > 0).any(1).all()
    losses = policy.compute_loss(batch, generator=torch.Generator().manual_seed(0))
    assert torch.isfinite(losses["loss"])
    ep = episodes[0]

    def predict(text: str, runner: PolicyRunner | None = None) -> np.ndarray:
        runner = runner or PolicyRunner(policy)
        runner.load_instruction(text)
        obs = (ep.cloth_positions[0], ep.cloth_features[0], ep.arm_state[0])
        return runner.predict(*obs, generator=torch.Generator().manual_seed(0)).targets

    bottom_up, right_over_left = predict("Bottom up."), predict("right over left")
    assert bottom_up.shape == (policy.cfg.horizon, 2, 4)
    assert np.abs(bottom_up - right_over_left).max() > 1e-6  # the words condition the actions
    # A sentence never trained on, made of known words, is read: what held-out folds are.
    assert np.abs(predict("left over right") - right_over_left).max() > 1e-6
    runner = PolicyRunner(policy)
    for text, why in (
        ("diagonal up", r"never learned: \['diagonal'\]"),
        ("...", "no words"),
        ("up " * 41, "at most 40"),
    ):
        with pytest.raises(PolicyInputError, match=why):
            runner.load_instruction(text)
    with pytest.raises(PolicyInputError, match="language-conditioned"):
        runner.load_demonstration(ep.cloth_positions[:2], ep.cloth_features[:2], ep.arm_state[:2])
    # The vocabulary is saved with the weights: the loaded policy reads the same words the same way.
    policy.save_pretrained(tmp_path / "language", cfg)
    loaded, _ = InstantFoldPolicy.from_pretrained(tmp_path / "language")
    assert loaded.vocabulary is not None and loaded.vocabulary.words == ["bottom", "left", "over", "right", "up"]
    np.testing.assert_array_equal(predict("bottom up", PolicyRunner(loaded.eval())), bottom_up)
    (tmp_path / "language" / "vocabulary.json").write_text('{"words": ["Bottom up"]}')
    with pytest.raises(CheckpointError, match="one lower-case word"):
        InstantFoldPolicy.from_pretrained(tmp_path / "language")


def test_the_anchored_head_reads_targets_for_a_language_policy_too(episodes):
    """The cloth-anchored head points at the current cloth from the fused scene, whatever the scene
    was fused with: a language policy gets the same head as the demonstration one it is compared
    with (and no demonstration alignment: there is none)."""
    policy, dataset = make_policy(small_config(conditioning="language", **ANCHORED), episodes)
    assert policy.anchor is not None and policy.word_embedding is not None
    losses = policy.compute_loss(make_batch(dataset), generator=torch.Generator().manual_seed(0))
    assert torch.isfinite(losses["loss"])
    runner = PolicyRunner(policy)
    runner.load_instruction("bottom up")
    ep = episodes[0]
    chunk = runner.predict(ep.cloth_positions[0], ep.cloth_features[0], ep.arm_state[0])
    assert chunk.keypose is not None and np.isfinite(chunk.keypose).all()


def test_configs_of_older_checkpoints_load_or_say_why_not():
    """v5 and older saved the mode-id table size, unused by a demonstration-conditioned policy; a
    language variant told mode ids cannot be read as one told words."""
    data = small_config().to_dict()
    demo = {**data, "model": {**data["model"], "num_modes": 4}}
    assert InstantFoldPolicyConfig.from_dict(demo) == InstantFoldPolicyConfig.from_dict(data)
    language = {**data, "model": {**data["model"], "num_modes": 4, "conditioning": "language"}}
    with pytest.raises(ConfigError, match="retrain"):
        InstantFoldPolicyConfig.from_dict(language)


def test_runner_predicts_absolute_chunk_and_rejects_bad_input(episodes):
    policy, _ = make_policy(small_config(), episodes)
    runner = PolicyRunner(policy)
    ep = episodes[0]
    obs = (ep.cloth_positions[3], ep.cloth_features[3], ep.arm_state[3])
    with pytest.raises(PolicyInputError, match="no demonstration loaded"):
        runner.predict(*obs)
    kf = ep.keyframes
    runner.load_demonstration(ep.cloth_positions[kf], ep.cloth_features[kf], ep.arm_state[kf])
    chunk = runner.predict(*obs, generator=torch.Generator().manual_seed(0))
    h = policy.cfg.horizon
    assert chunk.targets.shape == (h, 2, 4) and chunk.keypose.shape == (2, 4)
    assert chunk.representation is ChunkRepresentation.ABSOLUTE and chunk.step_duration == runner.step_duration
    assert set(np.unique(chunk.targets[..., 3])) <= {0.0, 1.0}
    assert chunk.steps_to_execute == policy.cfg.execute_steps
    bad = obs[0].copy()
    bad[5, 1] = np.nan
    with pytest.raises(PolicyInputError, match="cloth_positions: contains NaN"):
        runner.predict(bad, obs[1], obs[2])
    with pytest.raises(PolicyInputError, match="cloth_features: expected shape"):
        runner.predict(obs[0], obs[1][:, :-1], obs[2])
    with pytest.raises(PolicyInputError, match="cloth_positions: expected shape"):
        runner.predict(obs[0][:-1], obs[1], obs[2])
    with pytest.raises(PolicyInputError, match="arm_state: expected shape"):
        runner.predict(obs[0], obs[1], obs[2][0])
    with pytest.raises(PolicyInputError, match="cloth_valid: a frame has no valid"):
        runner.predict(*obs, cloth_valid=np.zeros(len(obs[0]), bool))
    with pytest.raises(PolicyInputError, match=r"demo\.arm_state"):
        runner.load_demonstration(ep.cloth_positions[kf], ep.cloth_features[kf], ep.arm_state[kf][:-1])
    runner.clear_demonstration()
    assert not runner.has_demonstration


def test_checkpoint_round_trip_is_exact(episodes, tmp_path):
    cfg = small_config()
    policy, dataset = make_policy(cfg, episodes)
    policy.save_pretrained(tmp_path / "ckpt", cfg)
    policy.save_pretrained(tmp_path / "mismatch", cfg)
    loaded, loaded_cfg = InstantFoldPolicy.from_pretrained(tmp_path / "ckpt")
    assert loaded_cfg == cfg
    for (k, a), (k2, b) in zip(policy.state_dict().items(), loaded.state_dict().items(), strict=True):
        assert k == k2 and torch.equal(a, b), k
    assert loaded.normalizers.to_dict() == policy.normalizers.to_dict()
    assert loaded.mode_ids == policy.mode_ids == {"right_over_left": 0, "bottom_up": 1}
    batch = make_batch(dataset)
    assert torch.equal(fixed_velocity(policy, batch).traj_velocity, fixed_velocity(loaded.eval(), batch).traj_velocity)
    # Corrupt and incomplete checkpoints are clear errors.
    (tmp_path / "ckpt" / "normalizers.json").write_text("{}")
    with pytest.raises(CheckpointError, match="missing 'delta'"):
        InstantFoldPolicy.from_pretrained(tmp_path / "ckpt")
    (tmp_path / "ckpt" / "model.safetensors").write_bytes(b"garbage")
    with pytest.raises(CheckpointError, match="corrupt"):
        InstantFoldPolicy.from_pretrained(tmp_path / "ckpt")
    small_config(width=96, num_heads=4).to_yaml(tmp_path / "other.yaml")
    (tmp_path / "mismatch" / "config.json").write_text(json.dumps(load_config(tmp_path / "other.yaml").to_dict()))
    with pytest.raises(CheckpointError, match="do not match the config"):
        InstantFoldPolicy.from_pretrained(tmp_path / "mismatch")
    with pytest.raises(CheckpointError, match="no such directory"):
        InstantFoldPolicy.from_pretrained(tmp_path / "missing")


def test_config_yaml_round_trip_and_errors(tmp_path):
    for name in ("paper", "paper-real", "cpu-small"):
        cfg = preset(name)
        cfg.to_yaml(tmp_path / f"{name}.yaml")
        assert load_config(tmp_path / f"{name}.yaml") == cfg
    paper = preset("paper")
    assert (
        paper.model.width,
        paper.train.batch_size,
        paper.model.horizon,
        paper.model.num_inference_steps,
    ) == (384, 64, 4, 10)
    assert preset("paper-real").model.horizon == 8 and preset("paper-real").model.execute_steps == 4
    (tmp_path / "bad.yaml").write_text("model:\n  widht: 12\n")
    with pytest.raises(ConfigError, match="unknown keys"):
        load_config(tmp_path / "bad.yaml")
    (tmp_path / "bad2.yaml").write_text("model:\n  width: 100\n  num_heads: 8\n")
    with pytest.raises(ConfigError, match=r"model\.width"):
        load_config(tmp_path / "bad2.yaml")
    with pytest.raises(ConfigError, match="neither a YAML file nor a policy preset"):
        load_config("papr")


def test_minmax_normalizer_maps_range_and_rejects_garbage():
    n = MinMaxNormalizer(3).calibrate(np.array([[0.0, -1.0, 2.0], [1.0, 1.0, 4.0]]), margin=0.0)
    y = n.normalize(torch.tensor([[0.0, -1.0, 2.0], [1.0, 1.0, 4.0], [0.5, 0.0, 3.0]]))
    torch.testing.assert_close(y, torch.tensor([[-1.0, -1.0, -1.0], [1.0, 1.0, 1.0], [0.0, 0.0, 0.0]]))
    torch.testing.assert_close(n.unnormalize(y)[2], torch.tensor([0.5, 0.0, 3.0]))
    with pytest.raises(NormalizerError, match="NaN"):
        MinMaxNormalizer(3).calibrate(np.array([[np.nan, 0, 0]]))
    with pytest.raises(NormalizerError, match="never calibrated"):
        MinMaxNormalizer(3).to_dict()
    flat = MinMaxNormalizer(1).calibrate(np.zeros((4, 1)))  # motionless axis: no division by zero
    assert torch.isfinite(flat.normalize(torch.zeros(1))).all()


def test_runner_half_precision_matches_float32(episodes):
    """bf16 (the GPU inference dtype; bf16 kernels also exist on CPU) gives nearly the float32 chunk."""
    policy, _ = make_policy(small_config(), episodes)
    ep = episodes[0]
    kf = ep.keyframes
    chunks = []
    for dtype in (torch.float32, torch.bfloat16):
        runner = PolicyRunner(copy.deepcopy(policy), dtype=dtype)  # the runner casts its policy
        runner.load_demonstration(ep.cloth_positions[kf], ep.cloth_features[kf], ep.arm_state[kf])
        chunks.append(
            runner.predict(
                ep.cloth_positions[3],
                ep.cloth_features[3],
                ep.arm_state[3],
                generator=torch.Generator().manual_seed(0),
            )
        )
    assert np.isfinite(chunks[1].targets).all()
    assert np.abs(chunks[0].targets[..., :3] - chunks[1].targets[..., :3]).max() < 0.02


@pytest.mark.slow
def test_compiled_runner_matches_eager(episodes):
    policy, _ = make_policy(small_config(), episodes)
    ep = episodes[0]
    kf = ep.keyframes
    targets = []
    for compile_ in (False, True):
        runner = PolicyRunner(copy.deepcopy(policy), compile=compile_)
        runner.load_demonstration(ep.cloth_positions[kf], ep.cloth_features[kf], ep.arm_state[kf])
        chunk = runner.predict(
            ep.cloth_positions[2],
            ep.cloth_features[2],
            ep.arm_state[2],
            generator=torch.Generator().manual_seed(0),
        )
        targets.append(chunk.targets)
    np.testing.assert_allclose(targets[0], targets[1], atol=1e-4)


def test_demo_conditioning_plot(episodes, tmp_path):
    policy, _ = make_policy(small_config(), episodes)
    runner = PolicyRunner(policy)
    demos = {"A": episodes[2], "B": episodes[3]}
    experts = {"A": Expert.from_episode(episodes[0], 0, 4), "B": Expert.from_episode(episodes[1], 0, 4)}
    path = plot_demo_conditioning(runner, episodes[0], 0, demos, tmp_path / "cond.png", experts)
    assert path.stat().st_size > 10_000
    np.testing.assert_allclose(experts["A"].chunk[-1], episodes[0].action[3, :, :3], atol=1e-6)


def test_noise_repeats_share_the_scene_and_equal_a_repeated_batch(episodes):
    """repeats = R gives exactly the loss of the batch with every sample repeated R times."""
    policy, dataset = make_policy(small_config(), episodes)
    g = torch.Generator().manual_seed(3)
    r, h = 2, policy.cfg.horizon
    t = torch.rand(3 * r, generator=g)
    noise = (torch.randn(3 * r, h, 2, 3, generator=g), torch.randn(3 * r, 2, 3, generator=g))
    # Same demonstration draw for a sample and its copy: one generator seed per sample.
    direct = collate([dataset.sample(i, np.random.default_rng(i)) for i in (0, 1, 2)])
    repeated = collate([dataset.sample(i, np.random.default_rng(i)) for i in (0, 0, 1, 1, 2, 2)])
    shared = policy.compute_loss(direct, t=t, noise=noise, repeats=r)
    reference = policy.compute_loss(repeated, t=t, noise=noise)
    for key in reference:
        torch.testing.assert_close(shared[key], reference[key], atol=1e-5, rtol=1e-5)
    assert shared["loss"].requires_grad


def test_yaml_overrides_a_preset(tmp_path):
    (tmp_path / "run.yaml").write_text("preset: cpu-small\ntrain: {steps: 7, noise_samples: 4, frames: moving}\n")
    cfg = load_config(tmp_path / "run.yaml")
    assert cfg.name == "cpu-small" and cfg.model == preset("cpu-small").model
    assert (cfg.train.steps, cfg.train.noise_samples, cfg.train.frames, cfg.train.lr) == (7, 4, "moving", 2e-3)
    (tmp_path / "bad.yaml").write_text("preset: cpu-small\ntrain: {frames: some}\n")
    with pytest.raises(ConfigError, match=r"train\.frames"):
        load_config(tmp_path / "bad.yaml")
    (tmp_path / "bad2.yaml").write_text("preset: cpu-small\ntrain: {noise_samples: 0}\n")
    with pytest.raises(ConfigError, match=r"train\.noise_samples"):
        load_config(tmp_path / "bad2.yaml")


def test_shared_demonstrations_equal_per_sample_copies(episodes):
    """A batch whose samples share demonstrations (demo_index) gives exactly the loss of the batch
    in which every sample carries its own copy, and the batch holds each demonstration once."""
    cfg = small_config()
    cfg.train = dataclasses.replace(cfg.train, demos_per_batch=2)
    policy, dataset = make_policy(cfg, episodes)
    shared = dataset.draw_batch(np.random.default_rng(5), 6)
    assert shared.demo.cloth_positions.shape[0] == 2 and shared.demo_index.tolist() == [0, 0, 0, 1, 1, 1]
    copies = dataclasses.replace(
        shared,
        demo=type(shared.demo)(
            *(getattr(shared.demo, f.name)[shared.demo_index] for f in dataclasses.fields(shared.demo))
        ),
        demo_index=None,
    )
    g = torch.Generator().manual_seed(4)
    t = torch.rand(6, generator=g)
    noise = (torch.randn(6, cfg.model.horizon, 2, 3, generator=g), torch.randn(6, 2, 3, generator=g))
    a, b = policy.compute_loss(shared, t=t, noise=noise), policy.compute_loss(copies, t=t, noise=noise)
    for key in a:
        torch.testing.assert_close(a[key], b[key], atol=1e-5, rtol=1e-5)


def test_centroid_alignment_makes_the_policy_blind_to_where_the_demonstration_lies(episodes):
    """With `demo_alignment: centroid` the demonstration is moved onto the current cloth centroid, so
    shifting the demonstration alone (another layout on the table) leaves the prediction unchanged;
    without alignment the same shift changes it (relative attention across the two layouts)."""
    shift = torch.tensor([0.12, -0.09, 0.02])

    def shifted_demo(batch):
        demo = batch.demo
        state = torch.cat((demo.arm_state[..., :3] + shift, demo.arm_state[..., 3:]), -1)
        return dataclasses.replace(
            batch, demo=dataclasses.replace(demo, cloth_positions=demo.cloth_positions + shift, arm_state=state)
        )

    for alignment, blind in (("centroid", True), ("none", False)):
        policy, dataset = make_policy(small_config(demo_alignment=alignment), episodes)
        # The state encoders see absolute states; make them translation-blind to isolate attention.
        for module in (policy.tokenizer.state_encoder[0], policy.state_events.mlp[0]):
            module.weight.data[:, :3] = 0
        batch = make_batch(dataset)
        reference = fixed_velocity(policy, batch)
        out = fixed_velocity(policy, shifted_demo(batch))
        gap = (out.traj_velocity - reference.traj_velocity).abs().max().item()
        assert (gap < 2e-4) if blind else (gap > 1e-3), (alignment, gap)


def test_centroid_alignment_anchors_on_the_first_keyframe(episodes):
    """The anchor is the cloth centroid of the demonstration's first keyframe (its start layout)."""
    policy, dataset = make_policy(small_config(demo_alignment="centroid"), episodes)
    batch = make_batch(dataset)
    context = policy.encode_context(batch.demo)
    first = batch.demo.cloth_positions[:, 0]
    w = batch.demo.cloth_valid[:, 0, :, None].float()
    torch.testing.assert_close(context.anchor, (first * w).sum(1) / w.sum(1))
    with pytest.raises(ConfigError, match="demo_alignment"):
        small_config(demo_alignment="pca")


def test_noise_scale_scales_the_start_noise_and_zero_makes_sampling_deterministic(episodes):
    """noise_scale = 0 integrates from the origin (same sample whatever the generator); other scales
    draw the same noise times the scale; a negative or NaN scale is refused."""
    policy, dataset = make_policy(small_config(noise_scale=0.0), episodes)
    batch = make_batch(dataset)
    context = policy.encode_context(batch.demo)
    with torch.no_grad():
        a = sample_cached(policy, batch.obs, context, torch.Generator().manual_seed(1))
        b = sample_cached(policy, batch.obs, context, torch.Generator().manual_seed(2))
        torch.testing.assert_close(a.traj, b.traj)
        torch.testing.assert_close(a.keypose, b.keypose)
        policy.cfg = dataclasses.replace(policy.cfg, noise_scale=1.0)
        c = sample_cached(policy, batch.obs, context, torch.Generator().manual_seed(1))
        d = sample_cached(policy, batch.obs, context, torch.Generator().manual_seed(2))
    assert not torch.allclose(c.traj, d.traj) and not torch.allclose(a.traj, c.traj)
    for bad in (-0.1, float("nan"), float("inf")):
        with pytest.raises(ConfigError, match="noise_scale"):
            small_config(noise_scale=bad)


def test_the_recipes_in_config_policies_load():
    from pathlib import Path

    recipes = sorted((Path(__file__).resolve().parents[3] / "config" / "policies").glob("*.yaml"))
    assert len(recipes) >= 4
    loaded = {p.stem: InstantFoldPolicyConfig.from_yaml(p) for p in recipes}
    language = loaded["cpu_small_language"]
    assert language.model.conditioning == "language" and language.model.keypose_head == "anchored"
    assert language.train.recovery_mode == "rejoin" and language.train.steps == 6000
