"""What the ROS side tells a simulator backend about the scene: `SceneSpec`, and its message form.

The start state is computed once, on the ROS side, by the project's own generator
(`rollout.start_state`: garment mesh, keypoint ids, seeded layout/drop/settle, camera and
appearance), and handed to the backend as data. So the Isaac Lab process needs none of the
project's simulation code and starts from exactly the garment state the Newton sim starts from
(same mesh, same keypoint ids, same seed -> same layout).

Units: the *bridge frame* is the Newton world frame (z up, table top at z = 0) in real metres,
i.e. simulation-space metres times `world_scale` (the project's `obs_scale`, 1.13 / 2): robots
are real-sized, and the camera sees the garment exactly as the observations scale it. Depth
comes back in real metres along the optical axis. Pure numpy + standard library (both venvs).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .protocol import ProtocolError, require


@dataclass
class SceneSpec:
    """One garment start state, camera and grippers, in the bridge frame (real metres)."""

    garment_id: str
    rest_positions: np.ndarray  # float32 [V, 3] the flat canonical mesh (rest shape), bridge metres
    faces: np.ndarray  # int32 [F, 3]
    positions: np.ndarray  # float32 [V, 3] settled start positions, bridge frame
    velocities: np.ndarray  # float32 [V, 3] bridge metres / s
    keypoint_ids: np.ndarray  # int64 [K] particle ids of the semantic keypoints
    intrinsics: np.ndarray  # float64 [3, 3]
    T_world_camera: np.ndarray  # float64 [4, 4] camera optical frame (x right, y down, z forward) -> world
    resolution: int  # square images
    grippers: np.ndarray  # float64 [2, 4] initial (x, y, z, openness) per arm (0 left, 1 right), world
    home: np.ndarray  # float64 [2, 3] arms' rest poses, world
    fps: float  # control frames per simulated second
    world_scale: float  # bridge metres per simulation-space metre
    grasp_radius: float  # bridge metres: particles within it of a closing gripper are held
    physics_preset: str = "cpu-small"  # the Newton preset of the start state (the stand-in steps with it)
    camera: dict[str, Any] = field(default_factory=dict)  # the project's Camera fields (sim-space height)
    appearance: dict[str, Any] = field(default_factory=dict)  # the project's Appearance fields

    def to_message(self) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        header = {
            "type": "reset",
            "garment_id": self.garment_id,
            "resolution": int(self.resolution),
            "fps": float(self.fps),
            "world_scale": float(self.world_scale),
            "grasp_radius": float(self.grasp_radius),
            "physics_preset": self.physics_preset,
            "camera": self.camera,
            "appearance": self.appearance,
        }
        arrays = {
            "rest_positions": np.asarray(self.rest_positions, np.float32),
            "faces": np.asarray(self.faces, np.int32),
            "positions": np.asarray(self.positions, np.float32),
            "velocities": np.asarray(self.velocities, np.float32),
            "keypoint_ids": np.asarray(self.keypoint_ids, np.int64),
            "intrinsics": np.asarray(self.intrinsics, np.float64),
            "T_world_camera": np.asarray(self.T_world_camera, np.float64),
            "grippers": np.asarray(self.grippers, np.float64),
            "home": np.asarray(self.home, np.float64),
        }
        return header, arrays

    @classmethod
    def from_message(cls, header: dict[str, Any], arrays: dict[str, np.ndarray]) -> SceneSpec:
        """Parse and check a `reset` message (shapes, index ranges, finiteness)."""
        try:
            rest = require(arrays, "rest_positions", (None, 3))
            n = rest.shape[0]
            faces = require(arrays, "faces", (None, 3), "iu")
            if faces.size and (faces.min() < 0 or faces.max() >= n):
                raise ProtocolError(f"faces index particles outside 0..{n - 1}")
            kp = require(arrays, "keypoint_ids", (None,), "iu")
            if kp.size and (kp.min() < 0 or kp.max() >= n):
                raise ProtocolError(f"keypoint_ids outside 0..{n - 1}")
            spec = cls(
                garment_id=str(header["garment_id"]),
                rest_positions=rest.astype(np.float32),
                faces=faces.astype(np.int32),
                positions=require(arrays, "positions", (n, 3)).astype(np.float32),
                velocities=require(arrays, "velocities", (n, 3)).astype(np.float32),
                keypoint_ids=kp.astype(np.int64),
                intrinsics=require(arrays, "intrinsics", (3, 3)).astype(np.float64),
                T_world_camera=require(arrays, "T_world_camera", (4, 4)).astype(np.float64),
                resolution=int(header["resolution"]),
                grippers=require(arrays, "grippers", (2, 4)).astype(np.float64),
                home=require(arrays, "home", (2, 3)).astype(np.float64),
                fps=float(header["fps"]),
                world_scale=float(header["world_scale"]),
                grasp_radius=float(header["grasp_radius"]),
                physics_preset=str(header.get("physics_preset", "cpu-small")),
                camera=dict(header.get("camera", {})),
                appearance=dict(header.get("appearance", {})),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise ProtocolError(f"reset: bad or missing field: {exc}") from exc
        if not (spec.fps > 0 and spec.world_scale > 0 and spec.grasp_radius > 0 and spec.resolution > 0):
            raise ProtocolError("reset: fps, world_scale, grasp_radius and resolution must be positive")
        return spec
