"""Semantic events of a fold: the 19-D event descriptor of its grasp-release episodes.

The paper classifies which folding context a rollout executed from a "19-D semantic-event
descriptor" of its first two grasp-release episodes (appendix, Evaluation Metric Details) without
listing the dimensions. Ours, chosen so that the descriptor is invariant to where the garment lies
and how it is rotated on the table, and so that it separates the contexts the paper names
(which part is folded first, by which arm, where to, one arm or two at once):

- Positions are expressed in the *garment frame* of the start state (`GarmentFrame`): origin at
  the centre keypoint, u from the left side to the right side, v towards the shoulders, both in
  units of the garment size.
- The gripper episodes are grouped into *phases* (`phases`): a phase ends when an arm that has
  already grasped in it grasps again: a bimanual fold is one phase, "both sleeves (one arm
  each, in either order), then the hem with both arms" two, one arm folding three parts in turn
  three. Which arm went first within a phase is the order dimension.
- For each of the first two phases, 9 numbers: the order `clip((t_R - t_L) / 1 s, -1, 1)` of the
  two arms' grasp times (+1 when only the left arm grasped, -1 when only the right one did, 0 for
  an empty phase), then the left arm's grasp uv and release uv and the right arm's grasp uv and
  release uv (zeros for an arm that did not grasp in the phase) -> 18 dimensions;
- the 19th: min(number of phases, 4) / 4.

A fold without any grasp has no descriptor (`None`): it cannot be classified as any context.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from instant_fold_core.dataset.schema import KEYPOINT_NAMES
from instant_fold_core.fold_record import GraspEpisode, MetricsError, finite_array

DESCRIPTOR_DIM = 19
#: Seconds of grasp-time difference that saturate the order dimension.
ORDER_SCALE_S = 1.0
_PHASE_DIM = 9
_MAX_PHASES = 4
_KP = {name: i for i, name in enumerate(KEYPOINT_NAMES)}


@dataclass(frozen=True)
class GarmentFrame:
    """A 2-D frame attached to the garment's start state on the table (see module docstring)."""

    origin: np.ndarray  # [2] world xy of the centre keypoint
    axes: np.ndarray  # [2, 2] rows u, v (unit, orthogonal)
    size: float  # garment size (m): uv distances are in garment sizes

    @classmethod
    def from_keypoints(cls, keypoints: np.ndarray, size: float) -> GarmentFrame:
        """The frame of semantic keypoints [7, 3] (`KEYPOINT_NAMES` order)."""
        kp = finite_array("keypoints", keypoints, (len(KEYPOINT_NAMES), 3))[:, :2]
        if not np.isfinite(size) or size <= 0:
            raise MetricsError(f"garment size must be positive, got {size}")
        left = (kp[_KP["left_shoulder"]] + kp[_KP["bottom_left"]]) / 2
        right = (kp[_KP["right_shoulder"]] + kp[_KP["bottom_right"]]) / 2
        across = right - left
        norm = float(np.linalg.norm(across))
        if norm < 1e-9:
            raise MetricsError("keypoints: left and right sides coincide, the garment frame is undefined")
        u = across / norm
        v = np.array([-u[1], u[0]])
        origin = kp[_KP["center"]]
        shoulders = (kp[_KP["left_shoulder"]] + kp[_KP["right_shoulder"]]) / 2
        if float((shoulders - origin) @ v) < 0:
            v = -v
        return cls(origin, np.stack([u, v]), float(size))

    def to_garment(self, points: np.ndarray) -> np.ndarray:
        """World points [..., 2|3] -> garment-frame uv [..., 2] (in garment sizes)."""
        p = np.asarray(points, dtype=np.float64)[..., :2]
        return (p - self.origin) @ self.axes.T / self.size


def phases(episodes: list[GraspEpisode] | tuple[GraspEpisode, ...]) -> list[dict[int, GraspEpisode]]:
    """Episodes (in grasp order) grouped into phases: a new phase starts when an arm grasps again."""
    out: list[dict[int, GraspEpisode]] = []
    for e in sorted(episodes, key=lambda e: (e.grasp_frame, e.arm)):
        if not out or e.arm in out[-1]:
            out.append({})
        out[-1][e.arm] = e
    return out


def _phase_features(phase: dict[int, GraspEpisode], frame: GarmentFrame, fps: float) -> np.ndarray:
    f = np.zeros(_PHASE_DIM)
    left, right = phase.get(0), phase.get(1)
    if left is not None and right is not None:
        f[0] = np.clip((right.grasp_frame - left.grasp_frame) / fps / ORDER_SCALE_S, -1.0, 1.0)
    elif left is not None:
        f[0] = 1.0
    elif right is not None:
        f[0] = -1.0
    for arm, e in phase.items():
        f[1 + 4 * arm : 3 + 4 * arm] = frame.to_garment(e.grasp)
        f[3 + 4 * arm : 5 + 4 * arm] = frame.to_garment(e.release)
    return f


def descriptor_from_episodes(
    episodes: list[GraspEpisode] | tuple[GraspEpisode, ...], frame: GarmentFrame, fps: float
) -> np.ndarray | None:
    """The 19-D event descriptor (module docstring) of a fold's episodes; None without any grasp."""
    if fps <= 0:
        raise MetricsError(f"fps must be positive, got {fps}")
    ph = phases(episodes)
    if not ph:
        return None
    d = np.zeros(DESCRIPTOR_DIM)
    for i, phase in enumerate(ph[:2]):
        d[i * _PHASE_DIM : (i + 1) * _PHASE_DIM] = _phase_features(phase, frame, fps)
    d[-1] = min(len(ph), _MAX_PHASES) / _MAX_PHASES
    return d
