"""Registration replay: demonstrated grasps land on the corresponding current cloth points,
releases go through the grasp's registration, progress follows the measured arm state only,
idle arms stay put, the fold ends at home; bad input and configurations are refused."""

from __future__ import annotations

import math

import numpy as np
import pytest

from instant_fold_core.contracts import ActionChunk
from instant_fold_core.errors import ConfigError, InvalidInputError
from instant_fold_core.pick_place import SCRIPTED, SIM_TO_REAL
from instant_fold_core.registration import local_shift
from instant_fold_learning.policy.replay import (
    MOTION,
    UP,
    Event,
    RegistrationReplay,
    ReplayConfig,
    demo_stages,
    follow,
    map_grasp,
    register_keyframe,
)

N, D = 64, 8
CURRENT_DEPTH, DEMO_DEPTH = 1.2, 1.0  # the table is 20 cm farther from the camera now
HOME = np.array([[-0.6, 0.3, 0.9, 1.0], [0.6, 0.3, 0.9, 1.0]])
ANGLE, SHIFT = math.radians(50.0), np.array([0.12, -0.07])  # demonstration cloth = current turned and shifted


def current_cloth() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """64 tokens on a T-shaped cloth (x, y in metres, around the origin) with distinct features."""
    rng = np.random.default_rng(0)
    xs, ys = np.meshgrid(np.linspace(-0.3, 0.3, 16), np.linspace(-0.25, 0.25, 16), indexing="ij")
    grid = np.stack([xs.ravel(), ys.ravel()], 1)
    shirt = grid[(np.abs(grid[:, 0]) <= 0.12) | (grid[:, 1] >= 0.13)]
    xy = shirt[rng.choice(len(shirt), N, replace=False)] + rng.normal(0, 0.003, (N, 2))
    positions = np.concatenate([xy, np.full((N, 1), CURRENT_DEPTH)], 1)
    return positions, rng.normal(size=(N, D)).astype(np.float32), np.ones(N, bool)


def to_demo(points: np.ndarray) -> np.ndarray:
    """Current-frame points [..., 3] where the demonstration saw them (turned, shifted, nearer)."""
    c, s = math.cos(ANGLE), math.sin(ANGLE)
    xy = points[..., :2] @ np.array([[c, -s], [s, c]]).T + SHIFT
    return np.concatenate([xy, points[..., 2:] - CURRENT_DEPTH + DEMO_DEPTH], -1)


def demonstration(right_moves: bool = True):
    """Keyframes: start, both grasp (tokens 3 and 40), both release (folded cloth), left grasps
    (token 20) and releases, terminal at home. `right_moves=False`: only the left arm acts."""
    pos, feat, _ = current_cloth()
    demo_cloth = to_demo(pos)
    folded = demo_cloth * [0.5, 0.5, 1.0]  # the cloth at release: folded, never registered
    grasp_left, grasp_right, grasp_again = demo_cloth[3], demo_cloth[40], demo_cloth[20]
    drop_left, drop_right, drop_again = to_demo(pos[[10, 50, 30]] + [0.0, 0.0, -0.02])
    state = np.repeat(HOME[None], 6, 0)
    state[1, 0] = [*grasp_left, 0.0]
    state[2, 0] = [*drop_left, 1.0]
    if right_moves:
        state[1, 1] = [*grasp_right, 0.0]
        state[2, 1] = [*drop_right, 1.0]
    state[3, 0] = [*grasp_again, 0.0]
    state[4, 0] = [*drop_again, 1.0]
    cloths = np.stack([demo_cloth, demo_cloth, folded, demo_cloth, folded, folded])
    return cloths, np.repeat(feat[None], 6, 0), state, np.ones((6, N), bool)


def replay(cfg: ReplayConfig | None = None, **demo_kw) -> RegistrationReplay:
    runner = RegistrationReplay(cfg or ReplayConfig(num_cloth_tokens=N, cloth_feature_dim=D))
    runner.load_demonstration(*demonstration(**demo_kw))
    return runner


def execute(chunk: ActionChunk, state: np.ndarray) -> np.ndarray:
    """A perfect robot: after the executed steps the arms are where the last of them said."""
    k = chunk.steps_to_execute - 1
    return np.concatenate([chunk.positions[k], chunk.openness[k][:, None]], 1).astype(np.float64)


def run(runner: RegistrationReplay, state: np.ndarray, queries: int = 200):
    """Query and execute until the walker is home; yields (stage, state, chunk) per query."""
    pos, feat, valid = current_cloth()
    for _ in range(queries):
        chunk = runner.predict(pos, feat, state, valid)
        yield runner.stage, state, chunk
        state = execute(chunk, state)


def events(trace) -> list[tuple[int, int, str, np.ndarray]]:
    """(query, arm, "close"/"open", measured position) whenever a commanded openness changes."""
    out, last = [], None
    for i, (_, state, chunk) in enumerate(trace):
        now = chunk.openness[0]
        if last is not None:
            out += [(i, a, "close" if now[a] < 0.5 else "open", state[a, :3]) for a in range(2) if now[a] != last[a]]
        last = now
    return out


def test_stages_from_openness():
    stages = demo_stages(demonstration()[2])
    assert [(s.keyframe, s.events) for s in stages] == [
        (1, {0: Event.GRASP, 1: Event.GRASP}),
        (2, {0: Event.RELEASE, 1: Event.RELEASE}),
        (3, {0: Event.GRASP}),
        (4, {0: Event.RELEASE}),
    ]
    closed_first = demo_stages(demonstration()[2][1:])[0]  # starts holding: a grasp at keyframe 0
    assert (closed_first.keyframe, closed_first.events) == (0, {0: Event.GRASP, 1: Event.GRASP})


def test_grasps_land_on_the_corresponding_current_points():
    pos = current_cloth()[0]
    trace = list(run(replay(), HOME.copy()))
    grasps = [(a, p) for _, a, kind, p in events(trace) if kind == "close"]
    assert [a for a, _ in grasps] == [0, 1, 0]
    for (_, where), token in zip(grasps, (3, 40, 20), strict=True):
        np.testing.assert_allclose(where[:2], pos[token, :2], atol=0.01)  # registered x, y
        assert abs(where[2] - CURRENT_DEPTH) < 0.01  # the current cloth's depth, not the demonstration's


def test_a_fold_continues_its_registrations_and_a_load_starts_afresh():
    """Each query's registration continues the fold's track; a demonstration load (a new fold)
    starts a new one."""
    pos, feat, valid = current_cloth()
    runner = replay()
    runner.predict(pos, feat, HOME.copy(), valid)
    track = runner._track
    assert set(track._by_key) == {1}  # the first stage's grasp keyframe
    runner.load_demonstration(*demonstration())
    assert runner._track is not track and not runner._track._by_key


def test_grasp_refinement_moves_the_mapped_grasp_by_the_local_fit():
    """`grasp_refinement_m` > 0: the mapped grasp is the rigid fit's plus `local_shift` around the
    demonstrated grasp (its own test: tests of `instant_fold_core.registration`); 0: the rigid
    fit's alone. The current cloth is the demonstration's moved rigidly except a block (a sleeve)
    lying 4 cm further along y, so the shift at the block's tip is not zero."""
    xs, ys = np.meshgrid(np.arange(0.0, 0.62, 0.03), np.arange(0.0, 0.42, 0.03))
    flat = np.stack((xs.ravel(), ys.ravel()), -1)
    flat = flat[(flat[:, 0] <= 0.4) | (flat[:, 1] >= 0.24)]  # a body and a block to its right
    block = flat[:, 0] > 0.43
    lying = flat + np.where(block[:, None], [0.0, 0.04], [0.0, 0.0])
    c, s_ = math.cos(0.4), math.sin(0.4)
    now = np.concatenate(
        (lying @ np.array([[c, s_], [-s_, c]]) + [0.1, -0.05], np.full((len(flat), 1), DEMO_DEPTH)), -1
    )
    demo_pos = np.concatenate((flat, np.full((len(flat), 1), DEMO_DEPTH)), -1)
    valid, feat = np.ones(len(flat), bool), np.zeros((len(flat), 4), np.float32)
    tip = int(np.argmax(np.where(block, flat[:, 0] + flat[:, 1], -1.0)))
    state = HOME[None].copy()
    state[0, 0, :3] = demo_pos[tip]
    demo, cloth = (demo_pos[None], feat[None], valid[None], state), (now, feat, valid)
    rigid_cfg, refined_cfg = (ReplayConfig(feature_weight=0.0, grasp_refinement_m=w) for w in (0.0, 0.1))
    fit = register_keyframe(rigid_cfg, demo, 0, cloth)
    rigid, _ = map_grasp(rigid_cfg, fit, demo, 0, 0, cloth)
    refined, _ = map_grasp(refined_cfg, fit, demo, 0, 0, cloth)
    shift = local_shift(fit, demo_pos, valid, now, valid, demo_pos[tip], 0.1)
    assert np.linalg.norm(shift) > 0.005
    np.testing.assert_allclose(refined[:2], rigid[:2] + shift, atol=1e-9)
    np.testing.assert_allclose(rigid[:2], np.asarray(fit.apply(demo_pos[tip][None, None]))[0, 0, :2], atol=1e-9)


def test_releases_go_through_the_grasp_registration():
    pos = current_cloth()[0]
    releases = [(a, p) for _, a, kind, p in events(list(run(replay(), HOME.copy()))) if kind == "open"]
    assert [a for a, _ in releases] == [0, 1, 0]
    for (_, where), token in zip(releases, (10, 50, 30), strict=True):
        np.testing.assert_allclose(where, pos[token] + [0.0, 0.0, -0.02], atol=0.01)


def test_walks_the_stages_in_order_and_ends_at_home():
    runner = replay()
    trace = list(run(runner, HOME.copy(), queries=150))
    stages = [stage for stage, _, _ in trace]
    assert stages == sorted(stages) and stages[-1] == len(runner.stages) == 4
    final = trace[-1][2]
    np.testing.assert_allclose(final.keypose, HOME, atol=1e-6)  # home, open: the fold loop's cue
    np.testing.assert_allclose(trace[-1][1], HOME, atol=1e-6)  # and the arms are there
    # Grasped together, carried together, arriving together: both arms switch in one chunk.
    switches = events(trace)
    first, second = switches[0][0], switches[2][0]
    assert [(q, a) for q, a, _, _ in switches[:4]] == [(first, 0), (first, 1), (second, 0), (second, 1)]
    carry = [(state, chunk) for stage, state, chunk in trace if stage == 1]
    start, drops = carry[0][0][:, :3], carry[0][1].keypose[:, :3]
    lengths = np.linalg.norm(drops - start, axis=1)
    assert abs(lengths[0] - lengths[1]) > 0.05  # unequal distances ...
    for state, _ in carry[1:-1]:  # ... covered at equal pace
        done = 1 - np.linalg.norm(drops - state[:, :3], axis=1) / lengths
        assert abs(done[0] - done[1]) < 0.15
    # Chunks move at most the free-move speed per step.
    for _, state, chunk in trace:
        path = np.concatenate([state[None, :, :3], chunk.positions], 0)
        assert np.linalg.norm(np.diff(path, axis=0), axis=2).max() <= MOTION.move_speed * chunk.step_duration + 1e-6


def test_progress_only_from_the_measured_state():
    """A robot that does not move keeps getting the same chunk, and a refused switch is repeated
    until the measured openness shows it."""
    runner = replay()
    pos, feat, valid = current_cloth()
    first = runner.predict(pos, feat, HOME, valid)
    for _ in range(5):
        again = runner.predict(pos, feat, HOME, valid)
        np.testing.assert_array_equal(again.positions, first.positions)
        assert runner.stage == 0 and (again.openness == 1).all()
    state = HOME.copy()
    while True:  # walk to the grasp
        chunk = runner.predict(pos, feat, state, valid)
        if (chunk.openness[0] == 0).all():
            break
        state = execute(chunk, state)
    for _ in range(3):  # the controller refused the switch: still open
        chunk = runner.predict(pos, feat, state, valid)
        assert runner.stage == 0 and (chunk.openness == 0).all()
    state = execute(chunk, state)
    runner.predict(pos, feat, state, valid)
    assert runner.stage == 1
    runner.load_demonstration(*demonstration())  # a new demonstration restarts the walk
    runner.predict(pos, feat, state, valid)
    assert runner.stage == 0


def test_arm_without_events_stays_put_until_home():
    runner = replay(right_moves=False)
    trace = list(run(runner, HOME.copy(), queries=120))
    for stage, _, chunk in trace:
        if stage < len(runner.stages):
            np.testing.assert_allclose(chunk.positions[:, 1], np.repeat(HOME[None, 1, :3], len(chunk.positions), 0))
    assert trace[-1][0] == len(runner.stages)


def test_approach_from_above_and_retreat_upwards():
    """Below the scripted hover height an arm only ever is straight above its grasp target; after a
    release, both arms first rise straight up (the left to its next grasp, the right on its way home)."""
    trace = list(run(replay(), HOME.copy()))
    target = next(c.keypose[0, :3] for stage, _, c in trace if stage == 0)
    hover_z = target[2] + MOTION.hover * UP[2]
    for stage, state, chunk in trace:
        if stage == 0:
            for p in (state[0, :3], *chunk.positions[:, 0]):
                if p[2] > hover_z + 1e-6:
                    assert np.linalg.norm(p[:2] - target[:2]) <= 0.01
    stage, state, chunk = next(t for t in trace if t[0] == 2)
    for a in range(2):
        np.testing.assert_allclose(chunk.positions[0, a, :2], state[a, :2], atol=1e-6)
        assert chunk.positions[0, a, 2] < state[a, 2]


def test_pick_place_profile():
    real = SCRIPTED.scaled(SIM_TO_REAL)
    assert real.hover == pytest.approx(0.15 * 1.13 / 2) and real.arc_speed == pytest.approx(0.9 * 1.13 / 2)
    pick, drop = np.array([0.0, 0.0, 1.2]), np.array([0.3, 0.0, 1.18])
    np.testing.assert_allclose(real.arc_point(pick, drop, 0.0, UP), pick)
    np.testing.assert_allclose(real.arc_point(pick, drop, 1.0, UP), drop, atol=1e-12)
    apex = real.arc_point(pick, drop, 0.5, UP)
    assert apex[2] == pytest.approx(1.19 - real.lift(0.3)) and real.lift(0.3) == pytest.approx(max(0.15, real.min_lift))
    np.testing.assert_allclose(follow(pick, drop[None], 0.1, 5)[-1], drop)
    assert np.linalg.norm(follow(pick, drop[None], 0.1, 5)[0] - pick) == pytest.approx(0.1)


def test_bad_input_is_refused():
    runner = RegistrationReplay(ReplayConfig(num_cloth_tokens=N, cloth_feature_dim=D))
    pos, feat, valid = current_cloth()
    assert not runner.has_demonstration
    with pytest.raises(InvalidInputError, match="no demonstration loaded"):
        runner.predict(pos, feat, HOME, valid)
    with pytest.raises(InvalidInputError, match="reads no instruction"):
        runner.load_instruction("fold both sleeves down")
    cloths, feats, state, valids = demonstration()
    with pytest.raises(InvalidInputError, match="demo.arm_state"):
        runner.load_demonstration(cloths, feats, state[:3], valids)
    with pytest.raises(InvalidInputError, match="demo.cloth_positions"):
        runner.load_demonstration(cloths[..., :2], feats, state, valids)
    empty = valids.copy()
    empty[2] = False
    with pytest.raises(InvalidInputError, match="no valid cloth token"):
        runner.load_demonstration(cloths, feats, state, empty)
    runner.load_demonstration(cloths, feats, state, valids)
    assert runner.has_demonstration
    with pytest.raises(InvalidInputError, match="arm_state"):
        runner.predict(pos, feat, HOME[:, :3], valid)
    with pytest.raises(InvalidInputError, match="cloth_positions"):
        runner.predict(pos * np.nan, feat, HOME, valid)
    runner.clear_demonstration()
    assert not runner.has_demonstration


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"variant": "learned"}, "variant"),
        ({"conditioning": "language"}, "conditioning"),
        ({"execute_steps": 9}, "execute_steps"),
        ({"reach_tolerance_m": 0.0}, "reach_tolerance_m"),
        ({"feature_weight": -1.0}, "feature_weight"),
        ({"grasp_refinement_m": -0.1}, "grasp_refinement_m"),
        ({"grasp_refinement_m": float("nan")}, "grasp_refinement_m"),
    ],
)
def test_bad_configurations(overrides, message):
    with pytest.raises(ConfigError, match=message):
        ReplayConfig(**overrides)


def test_config_from_dict_refuses_unknown_keys():
    assert ReplayConfig.from_dict({"horizon": 6, "execute_steps": 3}).horizon == 6
    with pytest.raises(ConfigError, match="unknown keys"):
        ReplayConfig.from_dict({"horizn": 6})
