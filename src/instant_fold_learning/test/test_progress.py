"""Progress through a fold (`model.event_progress`, `model.progress_bias`): event counts agree
between training, the demonstration's keyframes and a fold's runner, and the policy reads them."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

from instant_fold_core.dataset.keyframes import arm_events, extract_keyframes
from instant_fold_core.errors import ConfigError, InvalidInputError
from instant_fold_learning.policy.configuration import preset as policy_preset
from instant_fold_learning.policy.data import DemoTokens, ObservationTokens, collate, keyframe_tokens
from instant_fold_learning.policy.dataset import PolicyDataset
from instant_fold_learning.policy.inference import PolicyInputError, PolicyRunner
from instant_fold_learning.policy.progress import (
    PROGRESS_SPAN,
    EventCounter,
    ProgressBias,
    episode_event_counts,
    event_counts,
)
from instant_fold_learning.policy.synthetic import synthetic_episodes
from instant_fold_learning.testing import ANCHORED, untrained_policy


@pytest.fixture(scope="module")
def episode():
    """One synthetic bottom-up fold of the cpu-small configuration's token shape."""
    m = policy_preset("cpu-small").model
    return synthetic_episodes(1, ("bottom_up",), 1, m.cloth_feature_dim, m.num_cloth_tokens)[0]


def states(openness: list[list[float]]) -> np.ndarray:
    """[T, 2, 4] arm states at the origin with the given per-frame openness [T, 2]."""
    out = np.zeros((len(openness), 2, 4), np.float32)
    out[..., 3] = openness
    return out


def _keyframe_demo(episode) -> DemoTokens:
    """The episode's keyframes as a demonstration of one sample."""
    kf = episode.keyframes
    return keyframe_tokens(
        episode.cloth_positions[kf],
        episode.cloth_features[kf],
        episode.cloth_valid[kf],
        episode.arm_state[kf],
        1,
        "cpu",
    )


def _observation(episode, t: int, counts: list[int]) -> ObservationTokens:
    """The episode's frame t as one query, with the arms' event `counts`."""
    return ObservationTokens(
        *(torch.from_numpy(a[t][None]) for a in (episode.cloth_positions, episode.cloth_features)),
        torch.from_numpy(episode.cloth_valid[t][None]),
        torch.from_numpy(episode.arm_state[t][None]),
        torch.tensor([counts]),
    )


def test_counts_every_grasp_and_release_of_each_arm() -> None:
    seq = states([[1, 1], [0, 1], [0, 1], [1, 0], [1, 0], [0, 1]])
    expected = [[0, 0], [1, 0], [1, 0], [2, 1], [2, 1], [3, 2]]
    np.testing.assert_array_equal(event_counts(torch.from_numpy(seq)).numpy(), expected)
    np.testing.assert_array_equal(episode_event_counts(seq), expected)
    counter = EventCounter()
    np.testing.assert_array_equal([counter.observe(state) for state in seq], expected)
    # Grippers start open, for every counter: a sequence that starts holding has made one event.
    held = states([[0, 1], [1, 1]])
    assert episode_event_counts(held).tolist() == [[1, 0], [2, 0]]
    assert [EventCounter().observe(held[0]).tolist()] == [[1, 0]]


def test_keyframes_count_as_the_episode_does(episode) -> None:
    """What the policy reads at a demonstration keyframe is what it read at that frame in training
    (the keyframes keep every gripper event), and the counts follow `arm_events`' grasps and releases."""
    keyframes = extract_keyframes(episode.arm_state)
    along_keyframes = event_counts(torch.from_numpy(episode.arm_state[keyframes])).numpy()
    np.testing.assert_array_equal(along_keyframes, episode_event_counts(episode.arm_state)[keyframes])
    events = arm_events(episode.arm_state)
    np.testing.assert_array_equal(episode_event_counts(episode.arm_state)[-1], [len(e) for e in events])
    assert sum(len(e) for e in events) >= 2  # the episode grasps and releases


def test_counter_refuses_a_malformed_state_without_counting() -> None:
    counter = EventCounter()
    counter.observe(states([[0, 1]])[0])
    with pytest.raises(InvalidInputError, match=r"arm_state: expected shape \(2, 4\), got \(2, 3\)"):
        counter.observe(np.zeros((2, 3)))
    with pytest.raises(InvalidInputError, match="arm_state: contains 8 NaN or infinite value"):
        counter.observe(np.full((2, 4), np.nan))
    assert counter.observe(states([[0, 1]])[0]).tolist() == [1, 0]


def test_training_samples_carry_their_frames_counts(episode) -> None:
    policy, config = untrained_policy([episode], event_progress=True)
    dataset = PolicyDataset([episode], policy.cfg.horizon, config.train)
    counts = episode_event_counts(episode.arm_state)
    rng = np.random.default_rng(0)
    for i in range(0, len(dataset), 5):
        _, t = dataset.index[i]
        np.testing.assert_array_equal(dataset.sample(i, rng).event_count, counts[t])
    batch = collate([dataset.sample(i, rng) for i in range(3)])
    assert batch.obs.event_count is not None and batch.obs.event_count.dtype == torch.int64
    assert torch.isfinite(policy.compute_loss(batch)["loss"])


@pytest.mark.parametrize("bias", [False, True], ids=["counts", "counts and bias"])
def test_policy_reads_the_counts_and_the_runner_requires_them(episode, bias: bool) -> None:
    policy, _ = untrained_policy([episode], event_progress=True, progress_bias=bias)
    policy.eval()
    kf = episode.keyframes
    context = policy.encode_context(_keyframe_demo(episode))
    t = int(kf[1])

    def scene(counts: list[int]) -> torch.Tensor:
        """The fused scene's keys and the trajectory's proprio condition (an untrained decoder's
        zero-initialised output reads nothing yet)."""
        with torch.no_grad():
            cache = policy.prepare_scene(_observation(episode, t, counts), context)
        return torch.cat((cache.proprio.flatten(), cache.context_kv[0].k.flatten()))

    assert not torch.allclose(scene([0, 0]), scene([2, 0]))
    torch.testing.assert_close(scene([2, 0]), scene([2, 0]))
    runner = PolicyRunner(policy, device="cpu")
    runner.load_demonstration(
        episode.cloth_positions[kf], episode.cloth_features[kf], episode.arm_state[kf], episode.cloth_valid[kf]
    )
    args = (episode.cloth_positions[t], episode.cloth_features[t], episode.arm_state[t], episode.cloth_valid[t])
    with pytest.raises(PolicyInputError, match="event_count"):
        runner.predict(*args)
    with pytest.raises(PolicyInputError, match="event_count"):
        runner.predict(*args, event_count=np.array([-1, 0]))
    assert np.isfinite(runner.predict(*args, event_count=np.array([1, 0])).targets).all()


#: The cloth-anchored policy with progress: the cpu-folds recipe's model without the bias, which
#: the tests below add.
COUNTED = {**ANCHORED, "event_progress": True}


def test_progress_bias_is_looked_up_per_arm_and_laid_out_per_keyframe() -> None:
    bias = ProgressBias(num_heads=2)
    with torch.no_grad():
        bias.table.copy_(torch.arange(bias.table.numel(), dtype=torch.float32).view_as(bias.table))
    counts = torch.tensor([[[0, 0], [1, 0], [2, 1], [9, 1]]])  # 4 keyframes, [B, K, 2]
    current = torch.tensor([[1, 0]])
    out = bias(counts, current)
    assert out.shape == (1, 2, 4)
    for k, (left, right) in enumerate(counts[0].tolist()):
        ahead = [min(max(c - n, -PROGRESS_SPAN), PROGRESS_SPAN) + PROGRESS_SPAN for c, n in ((left, 1), (right, 0))]
        for h in range(2):
            assert out[0, h, k] == bias.table[0, h, ahead[0]] + bias.table[1, h, ahead[1]]
    laid = bias.tokens(counts, current, per_keyframe=3, before=2, after=1)
    assert laid.shape == (1, 2, 1, 2 + 4 * 3 + 1)
    assert (laid[..., :2] == 0).all() and (laid[..., -1] == 0).all()
    torch.testing.assert_close(laid[0, :, 0, 2:-1], out[0].repeat_interleave(3, -1))


def test_progress_bias_needs_the_counts() -> None:
    with pytest.raises(ConfigError, match="progress_bias: needs model.event_progress"):
        untrained_policy(progress_bias=True)


def test_progress_bias_starts_as_the_policy_without_it(episode) -> None:
    """The tables start at zero: the same weights give the same losses with and without the bias."""
    plain, config = untrained_policy([episode], **COUNTED)
    biased, _ = untrained_policy([episode], **COUNTED, progress_bias=True)
    missing, unexpected = biased.load_state_dict(plain.state_dict(), strict=False)
    assert not unexpected and missing and all("progress" in k for k in missing)
    dataset = PolicyDataset([episode], plain.cfg.horizon, config.train)
    rng = np.random.default_rng(0)
    batch = collate([dataset.sample(i, rng) for i in range(0, len(dataset), max(1, len(dataset) // 4))])
    losses = [m.compute_loss(batch, generator=torch.Generator().manual_seed(1)) for m in (plain, biased)]
    torch.testing.assert_close(losses[0]["loss"], losses[1]["loss"])
    losses[1]["loss"].backward()
    assert biased.fusion_progress is not None and biased.anchor_progress is not None
    assert all(b.table.grad is not None and b.table.grad.abs().sum() > 0 for b in biased.fusion_progress)
    assert biased.anchor_progress.table.grad is not None and biased.anchor_progress.table.grad.abs().sum() > 0


def test_progress_bias_lets_the_scene_read_only_the_keyframe_ahead(episode) -> None:
    """With a large bias for "the left arm's next event" the fused scene reads that keyframe's
    tokens only: replacing every other keyframe's context tokens changes nothing, replacing its own
    changes the scene."""
    policy, _ = untrained_policy([episode], **COUNTED, progress_bias=True)
    policy.eval()
    assert policy.fusion_progress is not None
    with torch.no_grad():
        for bias in policy.fusion_progress:
            bias.table[0, :, PROGRESS_SPAN + 1] = 60.0  # the left arm one event ahead
        context = policy.encode_context(_keyframe_demo(episode))
    assert context.counts is not None
    t = int(episode.keyframes[1])
    current = episode_event_counts(episode.arm_state)[t].tolist()
    ahead = (context.counts[0, :, 0] == current[0] + 1).nonzero()[:, 0].tolist()
    assert ahead and len(ahead) < context.counts.shape[1]
    per_keyframe = context.keyframe_tokens
    others = torch.ones(context.tokens.shape[1], dtype=torch.bool)
    for k in ahead:
        others[k * per_keyframe : (k + 1) * per_keyframe] = False
    noise = torch.randn(context.tokens.shape, generator=torch.Generator().manual_seed(0))

    def fused(replaced: torch.Tensor) -> torch.Tensor:
        """The fused scene's keys with the context tokens `replaced` [L] by noise."""
        ctx = dataclasses.replace(context, tokens=torch.where(replaced[None, :, None], noise, context.tokens))
        with torch.no_grad():
            return policy.prepare_scene(_observation(episode, t, current), ctx).context_kv[0].k

    unchanged = fused(torch.zeros_like(others))
    torch.testing.assert_close(fused(others), unchanged)
    assert not torch.allclose(fused(~others), unchanged)


def test_progress_bias_lets_the_anchored_head_read_only_the_events_ahead(episode) -> None:
    """With a large bias for "the left arm's next event" in the anchored head's read, its pointer
    reads that keyframe's state-event tokens only: replacing every other keyframe's changes nothing,
    replacing its own changes the pointer."""
    policy, _ = untrained_policy([episode], **COUNTED, progress_bias=True)
    policy.eval()
    assert policy.anchor_progress is not None
    with torch.no_grad():
        policy.anchor_progress.table[0, :, PROGRESS_SPAN + 1] = 60.0
        context = policy.encode_context(_keyframe_demo(episode))
    assert context.counts is not None and context.event_tokens is not None
    t = int(episode.keyframes[1])
    current = episode_event_counts(episode.arm_state)[t].tolist()
    ahead = (context.counts[0, :, 0] == current[0] + 1).nonzero()[:, 0].tolist()
    assert ahead and len(ahead) < context.counts.shape[1]
    others = torch.ones(context.event_tokens.shape[1], dtype=torch.bool)
    for k in ahead:
        others[2 * k : 2 * k + 2] = False  # two state-event tokens per keyframe
    events = context.event_tokens
    noise = torch.randn(events.shape, generator=torch.Generator().manual_seed(0))

    def pointer(replaced: torch.Tensor) -> torch.Tensor:
        """The pointer's logits with the state-event tokens `replaced` [2K] by noise."""
        ctx = dataclasses.replace(context, event_tokens=torch.where(replaced[None, :, None], noise, events))
        with torch.no_grad():
            anchor = policy.prepare_scene(_observation(episode, t, current), ctx).anchor
        assert anchor is not None
        return anchor.logits

    unchanged = pointer(torch.zeros_like(others))
    torch.testing.assert_close(pointer(others), unchanged)
    assert not torch.allclose(pointer(~others), unchanged)


def test_a_biased_policy_refuses_an_uncounted_context(episode) -> None:
    policy, _ = untrained_policy([episode], **COUNTED, progress_bias=True)
    context = dataclasses.replace(policy.encode_context(_keyframe_demo(episode)), counts=None)
    t = int(episode.keyframes[1])
    with pytest.raises(ValueError, match="progress_bias: needs the keyframes' and the observation's event counts"):
        policy.prepare_scene(_observation(episode, t, [1, 1]), context)
