"""The protocol-faithful stand-in for the Isaac Lab process: the project's Newton scene behind
the same bridge server.

It is NOT Isaac Lab. It exists because the Isaac Lab scene cannot be exercised on every machine
(no GPU, no Python 3.12 environment), while the bridge (process start, loopback socket,
framing, scene hand-over, lockstep stepping, camera frames) and the ROS-side adapter must be
tested end to end everywhere. It receives the same `SceneSpec` the Isaac Lab backend receives,
builds a `ClothScene` (Newton VBD, the same simulator Isaac Lab's Newton backend wraps) from the
sent mesh and start state, drives the project's kinematic point grippers, and renders with the
project's renderer from the sent camera. `hello` says `stand_in: true`, and the adapter logs it.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from instant_fold_core.errors import ConfigError

from ..garments import GarmentMesh
from ..render import Appearance, Camera, render
from ..rollout import preset
from ..scene import ClothScene
from .backend import Backend, BackendError, BackendState
from .spec import SceneSpec


class NewtonStandIn(Backend):
    """A `ClothScene` stepped in simulation space; the bridge frame is that times `world_scale`."""

    name = "newton_stand_in"
    stand_in = True

    def __init__(self, device: str = "cpu") -> None:
        self.device = device
        self.scene: ClothScene | None = None
        self.spec: SceneSpec | None = None

    def detail(self) -> dict:
        import newton
        import warp

        return {"simulator": "newton (stand-in for Isaac Lab)", "newton": newton.__version__, "warp": warp.__version__}

    def reset(self, spec: SceneSpec) -> None:
        try:
            physics = preset(spec.physics_preset).sim
        except ConfigError as exc:
            raise BackendError(f"stand-in: {exc}") from exc
        sim = dataclasses.replace(physics, device=None if self.device == "auto" else self.device)
        s = spec.world_scale
        # The rest shape is the canonical mesh scaled to simulation space; GarmentMesh holds it
        # unscaled (ClothBatch applies `garment_scale`).
        garment = GarmentMesh(
            vertices=spec.rest_positions.astype(np.float64) / s / sim.garment_scale,
            faces=spec.faces,
            garment_id=spec.garment_id,
            split="",
            source="bridge",
        )
        scene = ClothScene.build(garment, sim)
        scene.set_positions(spec.positions / s, spec.velocities / s)
        for arm, g in enumerate(scene.grippers):
            g.position = spec.grippers[arm, :3] / s
        self.scene, self.spec = scene, spec
        self._camera = Camera(**spec.camera)
        self._appearance = Appearance(**{k: tuple(v) if isinstance(v, list) else v for k, v in spec.appearance.items()})

    def _scene(self) -> tuple[ClothScene, SceneSpec]:
        if self.scene is None or self.spec is None:
            raise BackendError("no scene (reset first)")
        return self.scene, self.spec

    def step(self, target: np.ndarray, openness: np.ndarray) -> None:
        scene, spec = self._scene()
        for arm in range(2):
            scene.command_gripper(arm, float(openness[arm]))
        scene.step_frame(list(np.asarray(target, np.float64) / spec.world_scale))

    def state(self) -> BackendState:
        scene, spec = self._scene()
        s = spec.world_scale
        g = scene.arm_states()
        g[:, :3] *= s
        return BackendState(scene.positions() * s, g, scene.cloth_speed() * s)

    def observe(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        scene, spec = self._scene()
        frame = render(self._camera, self._appearance, scene.positions(), scene.garment.faces)
        return frame.rgb, (frame.depth * spec.world_scale).astype(np.float32), frame.mask
