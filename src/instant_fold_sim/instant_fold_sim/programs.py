"""Folding programs: the paper's mode bank as compositions of keypoint-conditioned pick-and-place.

A *subaction* is one or two concurrent `PickPlace`s: an arm grasps the particle of a semantic
keypoint and places it at a target defined from the keypoints' positions when the subaction
starts (e.g. "left sleeve tip to the middle of the left body side"). A *program* is an ordered
list of subactions; every pick-and-place ends with a retraction. The sleeves-first family is
5 sleeve subactions x 3 body subactions (modes 1-15, numbered sleeve-major), the body-first
family has 4 modes (16-19), and random-deformation programs drag one or two garment regions
for encoder pretraining.

Execution variants: the sleeve stage runs left-first (`L`), right-first (`R`) or simultaneous
(`S`, only for sleeve motions that keep the arms apart); side folds add a direction letter
(`L`: the right half is folded onto the left, `R`: the reverse).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from instant_fold_core.dataset.schema import KEYPOINT_NAMES

KP = {name: i for i, name in enumerate(KEYPOINT_NAMES)}
LEFT, RIGHT = 0, 1

#: Target of a placement from the keypoint positions [7, 3] at the start of the subaction.
TargetFn = Callable[[np.ndarray], np.ndarray]


def _lerp(a: str, b: str, t: float) -> TargetFn:
    return lambda k: (1 - t) * k[KP[a]] + t * k[KP[b]]


def _at(name: str) -> TargetFn:
    return lambda k: k[KP[name]].copy()


@dataclass(frozen=True)
class PickPlace:
    """Arm `arm` grasps keypoint `pick` and places it at `target(keypoints)`."""

    arm: int
    pick: str
    target: TargetFn
    label: str = ""


@dataclass(frozen=True)
class Subaction:
    """Pick-and-places that run together (`sequential=False`) or one after the other."""

    name: str
    moves: tuple[PickPlace, ...]
    sequential: bool = False


@dataclass(frozen=True)
class FoldingMode:
    """A named folding context with its language description and stable id."""

    mode_id: int
    name: str
    description: str
    family: str  # "sleeves_first" | "body_first" | "random"
    variants: tuple[str, ...]
    build: Callable[[str], list[Subaction]] = field(repr=False)
    regions: int = 0  # random-deformation modes: how many regions are dragged

    def program(self, variant: str) -> list[Subaction]:
        if variant not in self.variants:
            raise ValueError(f"variant: {variant!r} is not one of {self.variants} for mode {self.name}")
        return self.build(variant)


# --------------------------------------------------------------------------- sleeve subactions

# Per sleeve: (tip keypoint, target) for the left sleeve; the right one is mirrored by name.
_SLEEVE_TARGETS: dict[str, tuple[Callable[[str], TargetFn], bool]] = {
    # (target builder taking the side "left"/"right", simultaneous execution allowed)
    "down": (lambda s: _lerp(f"{s}_shoulder", f"bottom_{s}", 0.45), True),
    "cross": (lambda s: _lerp(f"{_other(s)}_shoulder", "center", 0.35), False),
    "diagonal": (lambda s: _lerp("center", f"bottom_{_other(s)}", 0.45), False),
    "center": (lambda s: _at("center"), False),
    "asymmetric": (lambda s: _lerp(f"{s}_shoulder", f"bottom_{s}", 0.45) if s == "left" else _at("center"), False),
}

SLEEVE_SUBACTIONS = ("down", "cross", "diagonal", "center", "asymmetric")
BODY_SUBACTIONS = ("shoulders_down", "bottom_up", "side_fold")

_SLEEVE_TEXT = {
    "down": "fold both sleeves straight down along the sides of the body",
    "cross": "fold each sleeve across the chest towards the opposite shoulder",
    "diagonal": "fold each sleeve diagonally towards the opposite bottom corner",
    "center": "fold both sleeve tips to the centre of the shirt",
    "asymmetric": "fold the left sleeve down and the right sleeve to the centre",
}
_BODY_TEXT = {
    "shoulders_down": "fold the shoulders down onto the hem",
    "bottom_up": "fold the hem up to the shoulders",
    "side_fold": "fold the shirt in half from side to side",
}


def _other(side: str) -> str:
    return "right" if side == "left" else "left"


def sleeve_subaction(kind: str, order: str) -> Subaction:
    """Both sleeves by `kind`; `order` L / R / S (S falls back to L when unsafe)."""
    target_of, simultaneous_ok = _SLEEVE_TARGETS[kind]
    moves = [
        PickPlace(arm, f"top_{side}", target_of(side), f"{side}_sleeve_{kind}")
        for arm, side in ((LEFT, "left"), (RIGHT, "right"))
    ]
    if order == "R":
        moves.reverse()
    return Subaction(f"sleeves_{kind}", tuple(moves), sequential=not (order == "S" and simultaneous_ok))


def body_subaction(kind: str, direction: str = "L") -> Subaction:
    """A two-handed body fold; `direction` only matters for side folds."""
    if kind == "shoulders_down":
        moves = (
            PickPlace(LEFT, "left_shoulder", _lerp("bottom_left", "left_shoulder", 0.08)),
            PickPlace(RIGHT, "right_shoulder", _lerp("bottom_right", "right_shoulder", 0.08)),
        )
    elif kind == "bottom_up":
        moves = (
            PickPlace(LEFT, "bottom_left", _lerp("left_shoulder", "bottom_left", 0.08)),
            PickPlace(RIGHT, "bottom_right", _lerp("right_shoulder", "bottom_right", 0.08)),
        )
    elif kind == "side_fold":
        src, dst = ("right", "left") if direction == "L" else ("left", "right")
        moves = (
            PickPlace(LEFT, f"{src}_shoulder", _lerp(f"{dst}_shoulder", f"{src}_shoulder", 0.08)),
            PickPlace(RIGHT, f"bottom_{src}", _lerp(f"bottom_{dst}", f"bottom_{src}", 0.08)),
        )
    else:
        raise ValueError(f"body subaction: unknown kind {kind!r}")
    return Subaction(kind if kind != "side_fold" else f"side_fold_{direction}", moves, sequential=False)


def _sleeve_orders(kind: str) -> tuple[str, ...]:
    return ("L", "R", "S") if _SLEEVE_TARGETS[kind][1] else ("L", "R")


def _sleeves_first(mode_id: int, sleeve: str, body: str) -> FoldingMode:
    orders = _sleeve_orders(sleeve)
    variants = tuple(o + d for o in orders for d in "LR") if body == "side_fold" else orders

    def build(variant: str) -> list[Subaction]:
        direction = variant[1] if len(variant) > 1 else "L"
        return [sleeve_subaction(sleeve, variant[0]), body_subaction(body, direction)]

    return FoldingMode(
        mode_id,
        f"sleeves_{sleeve}__{body}",
        f"{_SLEEVE_TEXT[sleeve].capitalize()}, then {_BODY_TEXT[body]}.",
        "sleeves_first",
        variants,
        build,
    )


def _body_first(mode_id: int, body: str, sleeve: str) -> FoldingMode:
    if body == "side_fold":
        # After a side fold both sleeves lie on one side: one arm folds the stacked sleeves down.
        direction = "L" if sleeve == "left" else "R"
        side = "left" if direction == "L" else "right"
        arm = LEFT if side == "left" else RIGHT

        def build(variant: str) -> list[Subaction]:
            stacked = Subaction(
                "stacked_sleeves_down",
                (
                    PickPlace(
                        arm, f"top_{side}", _lerp(f"{side}_shoulder", f"bottom_{side}", 0.45), "stacked_sleeves_down"
                    ),
                ),
            )
            return [body_subaction("side_fold", direction), stacked]

        return FoldingMode(
            mode_id,
            f"body_side_fold_{direction}__sleeves_down",
            f"Fold the shirt in half towards the {side}, then fold the stacked sleeves down.",
            "body_first",
            (direction,),
            build,
        )
    orders = _sleeve_orders(sleeve)

    def build_bu(variant: str) -> list[Subaction]:
        return [body_subaction("bottom_up"), sleeve_subaction(sleeve, variant)]

    return FoldingMode(
        mode_id,
        f"body_bottom_up__sleeves_{sleeve}",
        f"Fold the hem up to the shoulders, then {_SLEEVE_TEXT[sleeve]}.",
        "body_first",
        orders,
        build_bu,
    )


def _random_mode(mode_id: int, n_regions: int) -> FoldingMode:
    def build(variant: str) -> list[Subaction]:
        raise ValueError("random-deformation programs are sampled with `random_deformation_program`")

    return FoldingMode(
        mode_id,
        f"random_drag_{n_regions}",
        f"Drag {n_regions} garment region{'s' if n_regions > 1 else ''} to random places.",
        "random",
        ("S",),
        build,
        regions=n_regions,
    )


def _build_modes() -> dict[str, FoldingMode]:
    modes: list[FoldingMode] = []
    for i, sleeve in enumerate(SLEEVE_SUBACTIONS):
        for j, body in enumerate(BODY_SUBACTIONS):
            modes.append(_sleeves_first(1 + 3 * i + j, sleeve, body))
    modes += [
        _body_first(16, "bottom_up", "down"),
        _body_first(17, "bottom_up", "center"),
        _body_first(18, "side_fold", "left"),
        _body_first(19, "side_fold", "right"),
    ]
    modes += [_random_mode(20, 1), _random_mode(21, 2)]
    return {m.name: m for m in modes}


#: Every mode by name; ids are stable (1-15 sleeves-first, 16-19 body-first, 20-21 random).
MODES: dict[str, FoldingMode] = _build_modes()
FOLDING_MODES: tuple[str, ...] = tuple(n for n, m in MODES.items() if m.family != "random")


def mode_by_id(mode_id: int) -> FoldingMode:
    for m in MODES.values():
        if m.mode_id == mode_id:
            return m
    raise KeyError(f"mode id {mode_id} not in 1..{len(MODES)}")


def instruction(mode: str, variant: str) -> str:
    """A folding context said in words, as the language-conditioned policy is told it: the mode's
    description and its variant (`instant_fold_learning.policy.instruction.instruction_text`, which
    says a training episode's fold the same way from its meta)."""
    from instant_fold_learning.policy.instruction import instruction_text  # the policy package imports torch

    m = MODES[mode]
    return instruction_text({"mode": m.name, "variant": variant, "description": m.description, "family": m.family})


def resolve_mode(spec: str | int) -> FoldingMode:
    """A mode by name or numeric id (as string or int)."""
    if isinstance(spec, int) or str(spec).isdigit():
        return mode_by_id(int(spec))
    if spec not in MODES:
        raise KeyError(f"mode {spec!r} unknown; choose from {sorted(MODES)}")
    return MODES[spec]


def random_deformation_program(rng: np.random.Generator, n_regions: int, garment_size: float) -> list[Subaction]:
    """Drag one or two random keypoint regions by 15-35 % of the garment size in random directions."""
    names = rng.choice(len(KEYPOINT_NAMES), size=n_regions, replace=False)
    moves = []
    for arm, idx in zip((LEFT, RIGHT), sorted(names), strict=False):
        angle = rng.uniform(0, 2 * np.pi)
        offset = rng.uniform(0.15, 0.35) * garment_size * np.array([np.cos(angle), np.sin(angle), 0.0])
        name = KEYPOINT_NAMES[idx]
        moves.append(PickPlace(arm, name, (lambda o, i: lambda k: k[i] + o)(offset, idx), f"drag_{name}"))
    return [Subaction("random_drag", tuple(moves), sequential=False)]
