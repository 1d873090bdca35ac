"""Release targets held for a carry: the latch keeps the first target read after a grasp; the
demonstration strategy carries the demonstrated release through the registration of its grasp,
matched grasp by grasp, and only for grasps where the demonstration grasped."""

from __future__ import annotations

import numpy as np
import pytest
from test_replay import CURRENT_DEPTH, HOME, D, N, current_cloth, demonstration

from instant_fold_core.tokens import TokenArrays
from instant_fold_learning.policy.event_targets import GRASP_MATCH_M, DemonstrationTargets, ReleaseLatch
from instant_fold_learning.policy.inference import PolicyInputError
from instant_fold_learning.policy.replay import ReplayConfig

CLOTH = TokenArrays(*current_cloth())


def test_release_latch_holds_a_carrying_arms_target_until_it_opens():
    """Closed -> the first query's target is kept; open again -> cleared; the other arm is free."""
    latch = ReleaseLatch()
    state = np.array([[0.0, 0.0, 1.0, 1.0], [0.3, 0.0, 1.0, 1.0]], np.float32)
    keypose = np.array([[0.1, 0.1, 0.95, 1.0], [0.2, 0.2, 0.95, 0.0]], np.float32)
    _, mask = latch.targets(CLOTH, state)
    latch.observe(state, keypose)
    assert not mask.any() and not latch.latched.any()  # both open: nothing to hold
    state[0, 3] = 0.0  # arm 0 grasps
    _, mask = latch.targets(CLOTH, state)
    assert not mask.any()  # the first query after the grasp reads its target from the cloth
    latch.observe(state, keypose)
    for shift in (0.05, 0.1):
        target, mask = latch.targets(CLOTH, state)
        np.testing.assert_array_equal(mask, [True, False])
        np.testing.assert_array_equal(target[0], keypose[0, :3])
        latch.observe(state, keypose + shift)  # later targets of a carry do not replace the first
    state[0, 3] = 1.0  # arm 0 lets go
    _, mask = latch.targets(CLOTH, state)
    assert not mask.any()
    with pytest.raises(PolicyInputError, match=r"arm_state: expected shape \[2, 4\]"):
        latch.targets(CLOTH, state[:, :3])


def demonstration_releases(**demo_kw) -> DemonstrationTargets:
    """The strategy over test_replay's demonstration (turned 50 degrees, shifted and 20 cm nearer
    than the current cloth): both arms grasp tokens 3 / 40 and let go over tokens 10 / 50 (2 cm
    above), then the left arm grasps token 20 and lets go over token 30."""
    return DemonstrationTargets(*demonstration_releases_args(**demo_kw))


def arms(left: np.ndarray, left_open: bool, right: np.ndarray = HOME[1, :3], right_open: bool = True) -> np.ndarray:
    return np.array([[*left, float(left_open)], [*right, float(right_open)]])


def grasp_at(token: int) -> np.ndarray:
    return CLOTH.positions[token]


def test_each_carry_lets_go_where_the_demonstration_did_on_this_cloth():
    """The n-th grasp of an arm carries to the demonstration's n-th release of that arm, through the
    registration (x, y of the current cloth's token, the demonstrated 2 cm above the current cloth's
    depth); held from the query that measures the grasp until the arm is measured open."""
    guide = demonstration_releases()
    pos = CLOTH.positions
    _, held = guide.targets(CLOTH, arms(pos[3] + [0, 0, -0.05], True, pos[40] + [0, 0, -0.05], True))
    assert not held.any()  # approaching: nothing held
    target, held = guide.targets(CLOTH, arms(grasp_at(3), False, grasp_at(40), False))
    np.testing.assert_array_equal(held, [True, True])
    np.testing.assert_allclose(target[0], pos[10] + [0, 0, -0.02], atol=0.01)
    np.testing.assert_allclose(target[1], pos[50] + [0, 0, -0.02], atol=0.01)
    lifted = TokenArrays(pos + np.array([0.0, 0.0, -0.1]), CLOTH.features, CLOTH.valid)  # the carry moves the cloth ...
    again, held = guide.targets(lifted, arms(pos[3] + [0, 0, -0.2], False, pos[40] + [0, 0, -0.2], False))
    np.testing.assert_array_equal(again, target)  # ... not the held targets
    _, held = guide.targets(CLOTH, arms(pos[10], True, pos[50], True))
    assert not held.any()  # let go: nothing held
    _, held = guide.targets(CLOTH, arms(grasp_at(20), False))  # the left arm's second grasp
    target, held = guide.targets(CLOTH, arms(grasp_at(20), False))
    np.testing.assert_array_equal(held, [True, False])
    np.testing.assert_allclose(target[0], pos[30] + [0, 0, -0.02], atol=0.01)
    assert abs(target[0, 2] - (CURRENT_DEPTH - 0.02)) < 0.01


def test_a_grasp_the_demonstration_did_not_make_keeps_the_policys_targets():
    """A grasp farther than the match distance from the demonstrated one (a first grasp here, with
    the first grasps' distance set to the others'), and one more grasp than the demonstration has,
    hold nothing; nor does a grasp by an arm that never grasped in the demonstration. By default a
    first grasp 12 cm off is still the demonstrated one (`FIRST_GRASP_MATCH_M`)."""
    off = arms(grasp_at(3) + np.array([0.12, 0.0, 0.0]), False)
    far = DemonstrationTargets(*demonstration_releases_args(), first_match_m=GRASP_MATCH_M)
    _, held = far.targets(CLOTH, off)
    assert not held.any()
    _, held = demonstration_releases().targets(CLOTH, off)
    np.testing.assert_array_equal(held, [True, False])
    only_left = demonstration_releases(right_moves=False)
    _, held = only_left.targets(CLOTH, arms(HOME[0, :3], True, grasp_at(40), False))
    assert not held.any()
    extra = demonstration_releases()
    for _ in range(2):  # the demonstration's two left carries ...
        extra.targets(CLOTH, arms(grasp_at(3), True))
        extra.targets(CLOTH, arms(grasp_at(3), False))
    extra.targets(CLOTH, arms(grasp_at(3), True))
    _, held = extra.targets(CLOTH, arms(grasp_at(3), False))  # ... and a third
    assert not held.any() and extra.grasps[0] == 3


def test_with_grasps_an_arm_aiming_near_its_demonstrated_grasp_holds_the_mapped_point():
    """`grasps`: a query that holds nothing reports the policy's own grasp target; near the
    demonstrated grasp (mapped onto this cloth) the arm holds the mapped point from the next
    query until the grasp is measured; aimed elsewhere, the policy's own target stays (first grasps
    matched here at the later grasps' distance)."""
    pos = CLOTH.positions
    guide = DemonstrationTargets(*demonstration_releases_args(), grasps=True, first_match_m=GRASP_MATCH_M)
    state = arms(pos[3] + [0, 0, -0.1], True, pos[40] + [0, 0, -0.1], True)
    _, held = guide.targets(CLOTH, state)
    assert not held.any()  # nothing reported yet
    policy_keypose = np.array([[*(pos[3] + [0.03, 0.0, 0.0]), 0.0], [*(pos[40] + [0.15, 0.0, 0.0]), 0.0]])
    guide.observe(state, policy_keypose)  # left: 3 cm off its demonstrated grasp; right: 15 cm
    target, held = guide.targets(CLOTH, state)
    np.testing.assert_array_equal(held, [True, False])
    np.testing.assert_allclose(target[0, :2], pos[3, :2], atol=0.01)
    assert abs(target[0, 2] - CURRENT_DEPTH) < 0.01  # the demonstrated height above this cloth
    guide.observe(state, np.array([[*target[0], 0.0], policy_keypose[1]]))
    target, held = guide.targets(CLOTH, arms(pos[3], False, pos[40] + [0, 0, -0.1], True))  # grasped
    np.testing.assert_array_equal(held, [True, False])
    np.testing.assert_allclose(target[0], pos[10] + [0, 0, -0.02], atol=0.01)  # now its release


def test_each_arms_first_grasp_takes_the_first_match_distance_and_later_grasps_the_other():
    """`first_match_m` (here 50 cm) decides whether an arm's first grasp of the fold is the
    demonstrated one, `match_m` (8 cm) its later grasps: the left arm aimed 15 cm off both its first
    and its second demonstrated grasp holds the first mapped grasp, not the second."""
    pos = CLOTH.positions
    guide = DemonstrationTargets(*demonstration_releases_args(), grasps=True, first_match_m=0.5)
    away = np.array([0.15, 0.0, 0.0])
    state = arms(pos[3] + [0, 0, -0.1], True, pos[40] + [0, 0, -0.1], True)
    guide.targets(CLOTH, state)
    guide.observe(state, np.array([[*(pos[3] + away), 0.0], [*(pos[40] + away), 0.0]]))
    target, held = guide.targets(CLOTH, state)
    np.testing.assert_array_equal(held, [True, True])
    np.testing.assert_allclose(target[:, :2], pos[[3, 40], :2], atol=0.01)
    guide.targets(CLOTH, arms(grasp_at(3), False, grasp_at(40), False))
    state = arms(pos[10], True, pos[50], True)  # both carries let go; the left arm's second grasp is next
    guide.targets(CLOTH, state)
    guide.observe(state, np.array([[*(pos[20] + away), 0.0], [*pos[50], 1.0]]))
    _, held = guide.targets(CLOTH, state)
    assert not held.any()  # 15 cm is no second grasp's match
    guide.observe(state, np.array([[*(pos[20] + [0.03, 0.0, 0.0]), 0.0], [*pos[50], 1.0]]))
    target, held = guide.targets(CLOTH, state)
    np.testing.assert_array_equal(held, [True, False])
    np.testing.assert_allclose(target[0, :2], pos[20, :2], atol=0.01)


def test_a_folds_mapped_grasps_continue_its_registrations():
    """Each strategy (one per fold) registers on a track of its own: the grasp keyframe's
    registration at a query continues the previous query's."""
    first, second = (DemonstrationTargets(*demonstration_releases_args(), grasps=True) for _ in range(2))
    assert first.track is not second.track
    state = arms(HOME[0, :3], True, HOME[1, :3], True)
    first.targets(CLOTH, state)
    kept = first.track._by_key[1]  # the first grasp's keyframe
    first.targets(CLOTH, state)
    assert first.track._by_key[1] is not kept and not second.track._by_key


def test_with_grasps_two_arms_aimed_at_one_point_each_take_their_demonstrated_grasp():
    """Both arms report grasps within `conflict_m` of each other (here both at the right arm's
    demonstrated grasp, a hem corner the left arm cannot share): each holds its own mapped grasp
    from the next query. The same aims farther apart keep the policy's target for the far arm."""
    pos = CLOTH.positions
    state = arms(pos[3] + [0, 0, -0.1], True, pos[40] + [0, 0, -0.1], True)
    both_at_40 = np.array([[*(pos[40] + [0.04, 0.0, 0.0]), 0.0], [*pos[40], 0.0]])
    assert np.linalg.norm(pos[3, :2] - pos[40, :2]) > 0.2  # the left arm's own grasp is far from it
    for conflict_m, left_held in ((0.10, True), (0.03, False)):
        guide = DemonstrationTargets(*demonstration_releases_args(), grasps=True, conflict_m=conflict_m)
        guide.targets(CLOTH, state)
        guide.observe(state, both_at_40)
        target, held = guide.targets(CLOTH, state)
        np.testing.assert_array_equal(held, [left_held, True])
        np.testing.assert_allclose(target[1, :2], pos[40, :2], atol=0.01)
        if left_held:
            np.testing.assert_allclose(target[0, :2], pos[3, :2], atol=0.01)
    # An arm already holding its grasp reports it; the other aiming there later is sent to its own.
    guide = DemonstrationTargets(*demonstration_releases_args(), grasps=True)
    guide.targets(CLOTH, state)
    guide.observe(state, np.array([[*pos[3], 1.0], [*pos[40], 0.0]]))  # the left arm not grasping yet
    target, held = guide.targets(CLOTH, state)
    np.testing.assert_array_equal(held, [False, True])
    guide.observe(state, np.array([[*(pos[40] + [0.05, 0.0, 0.0]), 0.0], [*target[1], 0.0]]))
    target, held = guide.targets(CLOTH, state)
    np.testing.assert_array_equal(held, [True, True])
    np.testing.assert_allclose(target[0, :2], pos[3, :2], atol=0.01)


def demonstration_releases_args(**demo_kw) -> tuple[TokenArrays, np.ndarray, ReplayConfig]:
    cloths, feat, state, valid = demonstration(**demo_kw)
    return TokenArrays(cloths, feat, valid), state, ReplayConfig(num_cloth_tokens=N, cloth_feature_dim=D)


def test_the_strategy_asked_for_is_the_one_the_policy_can_take():
    from instant_fold_learning.policy.event_targets import AUTO, resolve

    assert resolve(AUTO, "anchored", "demo") == "demonstration"
    assert resolve(AUTO, "anchored", "language") == resolve(AUTO, "flow", "demo") == "policy"
    assert resolve("latched", "anchored", "language") == "latched"  # reads nothing of a demonstration
    with pytest.raises(ValueError, match="told the fold in words has no demonstration"):
        resolve("demonstration", "anchored", "language")
    with pytest.raises(ValueError, match="anchored keypose head"):
        resolve("demonstration_releases", "flow", "demo")
    with pytest.raises(ValueError, match="expected one of"):
        resolve("latch", "anchored", "demo")


def test_a_keypoint_shift_is_found_while_the_arm_is_away_and_kept_once_it_is_over_the_grasp():
    """With a keypoint detector, the mapped grasp is the registration's point moved by the keypoint
    shift found on the current cloth; once the arm is within `keypoint_latch_m` of it, a cloth the
    arm now hides part of does not change the shift (the registration is still renewed); away again,
    the shift is found anew. (An untrained detector that sees every keypoint and calls every grasp one: only
    the bookkeeping is tested here, the detector in test_keypoints.py.)"""
    import torch

    from instant_fold_core.config import override
    from instant_fold_learning.keypoints import PRESETS, KeypointDetector
    from instant_fold_learning.keypoints.mapping import KeypointCarrier, keypoint_shift
    from instant_fold_learning.policy.replay import map_grasp, register_keyframe

    torch.manual_seed(0)
    detector = KeypointDetector(override(PRESETS.get("cpu-small"), {"model": {"cloth_feature_dim": D}})).eval()
    torch.nn.init.constant_(detector.visible[-1].bias, 5.0)  # it sees every keypoint
    carrier = KeypointCarrier(detector, match_m=10.0, min_shift_m=0.0)
    tokens, state, cfg = demonstration_releases_args()
    guide = DemonstrationTargets(tokens, state, cfg, grasps=True, keypoints=carrier)
    demo = (tokens.positions.astype(np.float64), tokens.features, tokens.valid, state.astype(np.float64))
    k = guide.carries[0][0][0]

    def expected(cloth: TokenArrays, shift_from: TokenArrays) -> np.ndarray:
        """The left arm's first grasp mapped onto `cloth`, with the keypoint shift found on `shift_from`."""
        now, found = (tuple(np.asarray(x) for x in c) for c in (cloth, shift_from))
        fit_found = register_keyframe(cfg, demo, k, found)  # type: ignore[arg-type]
        shift = keypoint_shift(carrier, fit_found, demo, k, 0, found)  # type: ignore[arg-type]
        return map_grasp(cfg, register_keyframe(cfg, demo, k, now), demo, k, 0, now, shift)[0]  # type: ignore[arg-type]

    away = arms(HOME[0, :3], True)
    guide.targets(CLOTH, away)
    aim = expected(CLOTH, CLOTH)
    guide.observe(away, np.array([[*aim, 0.0], [*HOME[1, :3], 1.0]]))  # the policy aims at it: held
    covered = TokenArrays(CLOTH.positions, -CLOTH.features, CLOTH.valid)  # what the arm over it does to the features
    over = arms(aim - np.array([0.0, 0.0, 0.05]), True)
    target, held = guide.targets(covered, over)
    assert held[0]
    np.testing.assert_allclose(target[0], expected(covered, CLOTH), atol=1e-9)  # the shift kept
    assert np.linalg.norm(expected(covered, covered)[:2] - target[0, :2]) > 1e-4  # found anew, it would move
    target, _ = guide.targets(covered, away)
    np.testing.assert_allclose(target[0], expected(covered, covered), atol=1e-9)  # away: found anew
