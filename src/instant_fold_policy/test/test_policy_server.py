"""PolicyServer: checkpoints -> cached demonstration -> absolute action chunks; clear refusals."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from policy_fixtures import HOME, cloth_frame, make_demonstration

from instant_fold_core.contracts import ActionChunk, ChunkRepresentation
from instant_fold_core.errors import InvalidInputError
from instant_fold_learning.encoder.configuration import preset as encoder_preset
from instant_fold_learning.encoder.modeling import ClothEncoder
from instant_fold_learning.policy.event_targets import DemonstrationTargets
from instant_fold_learning.testing import untrained_checkpoints
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
    assert server.event_schedule is None
    encode_s = server.load_demonstration(make_demonstration())
    assert encode_s > 0 and server.expected_events == 2
    schedule = server.event_schedule  # the left arm grasps and lets go, the right makes nothing
    assert schedule is not None and schedule.counts.tolist() == [[1, 0], [2, 0], [2, 0]]
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
    other = ClothEncoder(config).save_pretrained(tmp_path / "tokenizer32")
    with pytest.raises(PolicyServerError, match="the policy expects 64 x 64"):
        PolicyServer.from_checkpoints(policy_dir, other, device="cpu")


#: HOME with the left gripper closed: the left arm carries.
CLOSED = HOME.copy()
CLOSED[0, 3] = 0.0


@pytest.fixture(scope="module")
def anchored(tmp_path_factory) -> tuple[Path, Path]:
    return untrained_checkpoints(tmp_path_factory.mktemp("anchored"), keypose_head="anchored")


def carry(server: PolicyServer, generator: torch.Generator | None = None) -> list[ActionChunk]:
    """One fold's queries while the cloth moves: left arm open, closed for three queries (a
    grasp, the carry), open again (the release); the right arm stays open."""
    states = [HOME, CLOSED, CLOSED, CLOSED, HOME]
    return [
        server.predict(server.tokenize(*cloth_frame(3.0 * i)), state, generator=generator)
        for i, state in enumerate(states)
    ]


def servers(anchored: tuple[Path, Path]) -> tuple[PolicyServer, PolicyServer]:
    """Servers of the same anchored checkpoint without and with latched release targets, demonstration loaded."""
    off, on = (PolicyServer.from_checkpoints(*anchored, device="cpu", event_targets=r) for r in ("policy", "latched"))
    for server in (off, on):
        server.load_demonstration(make_demonstration())
    return off, on


def test_latched_release_target_is_held_for_the_carry(anchored) -> None:
    """`event_targets="latched"`: from the first query after the left arm's grasp until it opens again, its
    reported target is the one read at that first query, while the cloth moves; the right arm's
    target and every query with no arm latched are bit-identical to the server without the option."""
    off, on = servers(anchored)
    free, held = carry(off, off.fold_generator()), carry(on, on.fold_generator())
    assert not np.array_equal(free[1].keypose[0, :3], free[2].keypose[0, :3])  # the cloth moves the target
    for i in (0, 1, 4):  # before the grasp, the grasp's first query, after the release: nothing held
        for a, b in ((free[i].positions, held[i].positions), (free[i].keypose, held[i].keypose)):
            np.testing.assert_array_equal(a, b)
    for i in (2, 3):
        np.testing.assert_array_equal(held[i].keypose[0, :3], free[1].keypose[0, :3])
        np.testing.assert_array_equal(held[i].keypose[1], free[i].keypose[1])


def test_each_fold_and_demonstration_starts_with_nothing_latched(anchored) -> None:
    """A fold that starts carrying reads its target from the cloth (not the last fold's latch), a
    predict-service call never touches a fold's latch, and a demonstration load clears the
    server's own."""
    off, on = servers(anchored)
    moved = off.tokenize(*cloth_frame(9.0))

    def held(server: PolicyServer, generator: torch.Generator | None = None) -> np.ndarray:
        """Two queries with the left arm closed, the cloth moving: the second's left target."""
        server.predict(server.tokenize(*cloth_frame(3.0)), CLOSED, generator=generator)
        return server.predict(moved, CLOSED, generator=generator).keypose[0]

    fresh = off.predict(moved, CLOSED, generator=off.fold_generator()).keypose
    latched = held(on, on.fold_generator())
    assert not np.array_equal(latched, fresh[0])
    fold = on.fold_generator()
    np.testing.assert_array_equal(on.predict(moved, CLOSED, generator=fold).keypose, fresh)
    on.predict(on.tokenize(*cloth_frame()), HOME)  # a predict-service call, the left arm open
    np.testing.assert_array_equal(on.predict(moved, CLOSED, generator=fold).keypose[0], fresh[0])
    np.testing.assert_array_equal(held(on), latched)  # the server's own stream latches too
    for server in (off, on):
        server.load_demonstration(make_demonstration())
    np.testing.assert_array_equal(on.predict(moved, CLOSED).keypose, off.predict(moved, CLOSED).keypose)


def test_held_event_targets_need_the_anchored_head(checkpoints) -> None:
    for held in ("latched", "demonstration_releases", "demonstration"):
        with pytest.raises(PolicyServerError, match="anchored keypose head"):
            PolicyServer.from_checkpoints(*checkpoints, device="cpu", event_targets=held)
    with pytest.raises(
        PolicyServerError,
        match=r"event_targets: expected one of \['auto', 'policy', 'latched', 'demonstration_releases', 'demonstration'\]",
    ):
        PolicyServer.from_checkpoints(*checkpoints, device="cpu", event_targets="latch")


def test_auto_event_targets_pick_the_demonstration_where_the_policy_takes_them(checkpoints, anchored) -> None:
    """ "auto" (config/policy.yaml's): `demonstration` for an anchored-head policy, `policy` for
    the paper's head and for registration replay, which cannot take held targets."""
    from instant_fold_learning.policy.replay import VARIANT

    replay = anchored[0].parent / "replay"
    replay.mkdir(exist_ok=True)
    (replay / "config.json").write_text(f'{{"variant": "{VARIANT}"}}')
    for policy_dir, expected in ((anchored[0], "demonstration"), (checkpoints[0], "policy"), (replay, "policy")):
        server = PolicyServer.from_checkpoints(policy_dir, anchored[1], device="cpu", event_targets="auto")
        assert server.event_targets == expected, policy_dir


def test_demonstration_release_target_is_the_demonstrated_one_on_this_cloth(anchored) -> None:
    """`event_targets="demonstration_releases"`: the left arm grasps where the demonstration did; from the
    query that measures the grasp until it lets go, it reports (and moves towards) the
    demonstration's release carried onto this cloth (the same cloth here: where the demonstration
    let go, near HOME), while the cloth moves; before and after, and the right arm, as without."""
    off, on = (
        PolicyServer.from_checkpoints(*anchored, device="cpu", event_targets=r)
        for r in ("policy", "demonstration_releases")
    )
    for server in (off, on):
        server.load_demonstration(make_demonstration())
    grasp = make_demonstration().keypose[0, 0]
    states = [HOME.copy() for _ in range(4)]
    states[0][0] = [*grasp[:3], 1.0]  # above the grasp point, open
    states[1][0] = grasp  # closed there
    states[2][0] = [*(grasp[:3] + np.array([0.0, 0.0, -0.1])), 0.0]  # lifted, carrying
    states[3][0] = [*HOME[0, :3], 1.0]  # let go

    def fold(server: PolicyServer) -> list[ActionChunk]:
        g = server.fold_generator()
        return [server.predict(server.tokenize(*cloth_frame(2.0 * i)), s, generator=g) for i, s in enumerate(states)]

    free, held = fold(off), fold(on)
    for i in (0, 3):
        np.testing.assert_array_equal(free[i].keypose, held[i].keypose)
    for i in (1, 2):
        np.testing.assert_allclose(held[i].keypose[0, :3], HOME[0, :3], atol=0.03)
        assert not np.allclose(free[i].keypose[0, :3], HOME[0, :3], atol=0.03)  # the untrained head's own
        np.testing.assert_array_equal(held[i].keypose[1], free[i].keypose[1])


def test_the_grasp_refinement_reaches_the_fold_strategy_and_must_be_a_distance(anchored) -> None:
    """`grasp_refinement_m` (the node's parameter, evaluate's flag) is the registration every
    fold's demonstration targets map grasps with; a window that is not a distance, or one that no
    strategy would use, is refused when the server is built, not in the middle of a fold."""
    server = PolicyServer.from_checkpoints(
        *anchored, device="cpu", event_targets="demonstration", grasp_refinement_m=0.12
    )
    server.load_demonstration(make_demonstration())
    strategy = server._release_strategy()
    assert isinstance(strategy, DemonstrationTargets) and strategy.cfg.grasp_refinement_m == 0.12
    with pytest.raises(PolicyServerError, match="only the demonstration event targets map grasps"):
        PolicyServer.from_checkpoints(*anchored, device="cpu", event_targets="policy", grasp_refinement_m=0.12)
    for bad in (float("nan"), -0.1):
        with pytest.raises(PolicyServerError, match="grasp_refinement_m"):
            PolicyServer.from_checkpoints(
                *anchored, device="cpu", event_targets="demonstration", grasp_refinement_m=bad
            )


@pytest.mark.parametrize(
    ("name", "attribute", "default"),
    [
        ("grasp_conflict_m", "conflict_m", 0.10),
        ("grasp_match_m", "match_m", 0.08),
        ("first_grasp_match_m", "first_match_m", 0.5),
    ],
)
def test_the_grasp_distances_reach_the_fold_strategy_and_must_be_distances(anchored, name, attribute, default) -> None:
    """`grasp_conflict_m`, `grasp_match_m` and `first_grasp_match_m` (the node's parameters,
    evaluate's flags) are what every fold's demonstration targets take as one point and as the
    policy naming the demonstrated grasp (its first, its later ones); not a distance: refused when
    the server is built."""
    made = PolicyServer.from_checkpoints(*anchored, device="cpu", event_targets="demonstration")
    zero = PolicyServer.from_checkpoints(*anchored, device="cpu", event_targets="demonstration", **{name: 0.0})
    wide = PolicyServer.from_checkpoints(*anchored, device="cpu", event_targets="demonstration", **{name: 0.3})
    for server, expected in ((made, default), (zero, 0.0), (wide, 0.3)):
        server.load_demonstration(make_demonstration())
        strategy = server._release_strategy()
        assert isinstance(strategy, DemonstrationTargets) and getattr(strategy, attribute) == expected
    for bad in (float("nan"), -0.1, float("inf")):
        with pytest.raises(PolicyServerError, match=name):
            PolicyServer.from_checkpoints(*anchored, device="cpu", event_targets="demonstration", **{name: bad})


def _count_encodings(server: PolicyServer) -> list[int]:
    """Count the runner's demonstration encodings (the real runner still does the work)."""
    count = [0]
    load = server.runner.load_demonstration

    def counted(*args, **kwargs):
        count[0] += 1
        return load(*args, **kwargs)

    server.runner.load_demonstration = counted
    return count


def test_the_demonstration_already_loaded_is_not_encoded_again(checkpoints) -> None:
    """The main job's goal names the demonstration the server started with: loading it again only
    restarts the noise (the same chunks as after the first load), it is not encoded again."""
    server = PolicyServer.from_checkpoints(*checkpoints, device="cpu")
    encodings = _count_encodings(server)
    tokens = server.tokenize(*cloth_frame())
    server.load_demonstration(make_demonstration())
    first = server.predict(tokens, HOME).targets
    server.predict(tokens, HOME)
    server.load_demonstration(make_demonstration())  # same arrays, another object
    assert encodings[0] == 1
    np.testing.assert_array_equal(server.predict(tokens, HOME).targets, first)
    other = make_demonstration()
    other.keypose[0, 0, 0] += 0.01
    server.load_demonstration(other)
    assert encodings[0] == 2


def test_a_keypoint_detector_serves_the_demonstration_event_targets(anchored, tmp_path) -> None:
    """`keypoint_detector`: loaded for the demonstration event targets (which then carry grasps by
    keypoint through a fold's queries), refused where no strategy maps grasps and where it reads
    other tokens than the encoder gives."""
    from instant_fold_core.config import override
    from instant_fold_learning.keypoints import PRESETS as KEYPOINT_PRESETS
    from instant_fold_learning.keypoints import KeypointDetector

    encoder = ClothEncoder.from_pretrained(anchored[1])
    dims = {"cloth_feature_dim": encoder.feature_dim, "num_cloth_tokens": encoder.num_tokens}
    KeypointDetector(override(KEYPOINT_PRESETS.get("cpu-small"), {"model": dims})).save_pretrained(tmp_path / "kp")
    server = PolicyServer.from_checkpoints(
        *anchored, device="cpu", event_targets="demonstration", keypoint_detector=tmp_path / "kp"
    )
    assert (
        server.keypoints is not None
        and server.keypoints.detector.config.model.cloth_feature_dim == dims["cloth_feature_dim"]
    )
    server.load_demonstration(make_demonstration())
    assert len(carry(server, server.fold_generator())) == 5  # the fold's queries map grasps with it
    with pytest.raises(PolicyServerError, match="keypoints: only the demonstration event targets map grasps"):
        PolicyServer.from_checkpoints(
            *anchored, device="cpu", event_targets="policy", keypoint_detector=tmp_path / "kp"
        )
    other = {**dims, "cloth_feature_dim": encoder.feature_dim + 1}
    KeypointDetector(override(KEYPOINT_PRESETS.get("cpu-small"), {"model": other})).save_pretrained(tmp_path / "kp2")
    with pytest.raises(PolicyServerError, match="keypoint detector .* reads"):
        PolicyServer.from_checkpoints(
            *anchored, device="cpu", event_targets="demonstration", keypoint_detector=tmp_path / "kp2"
        )


def test_each_fold_counts_its_own_gripper_events(tmp_path) -> None:
    """A policy reading its progress (`model.event_progress`) is told each arm's grasps and releases
    of the fold it serves: counted per fold, from zero, over the states the fold's queries show."""
    server = PolicyServer.from_checkpoints(*untrained_checkpoints(tmp_path, event_progress=True), device="cpu")
    server.load_demonstration(make_demonstration())
    seen: list[list[int]] = []
    runner_predict = server.runner.predict

    def recording(*args, event_count=None, **kwargs):
        seen.append(np.asarray(event_count).tolist())
        return runner_predict(*args, event_count=event_count, **kwargs)

    server.runner.predict = recording
    tokens = server.tokenize(*cloth_frame())
    fold, other = server.fold_generator(), server.fold_generator()
    for state in (HOME, CLOSED, CLOSED, HOME):
        server.predict(tokens, state, generator=fold)
    server.predict(tokens, CLOSED, generator=other)
    server.predict(tokens, HOME)  # a predict-service call: its own stream
    assert seen == [[0, 0], [1, 0], [1, 0], [2, 0], [1, 0], [0, 0]]
    server.load_demonstration(make_demonstration())
    server.predict(tokens, CLOSED, generator=fold)
    assert seen[-1] == [1, 0]  # a demonstration load starts every stream over, as it does held targets
    with pytest.raises(InvalidInputError, match="arm_state"):
        server.predict(tokens, HOME[:, :3], generator=fold)
