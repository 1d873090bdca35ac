"""Sim in the loop without ROS: a garment scene stepped by external gripper commands.

`SimWorld` is what the sim node serves: the start state of an episode seed (the same layout,
camera and initial gripper poses as the generated episode with that seed), stepped frame by
frame towards gripper targets given in the camera optical frame in real metres (the frame of
every observation and action in the system), rendered as the camera sees it, recorded as an
`Episode`, and scored at the end against the scripted oracle run from the same start
(the paper's *same-init* protocol, appendix "Evaluation").

Time is a frame counter: simulated time is `frames / fps`, so stamps derived from it are exact
and a slow CPU never changes what the policy sees (the controller advances time explicitly).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, cast

import numpy as np

from instant_fold_core.dataset.schema import KEYPOINT_NAMES, Episode
from instant_fold_core.errors import InvalidInputError
from instant_fold_core.fold_record import FoldRecord

from .coverage import Coverage
from .garments import resolve_garment
from .outcome import init_info, record_fold
from .programs import resolve_mode
from .render import Frame, particle_visibility
from .rollout import PRESETS, FoldingRollout, GenerationConfig, _to_episode, preset, run_program, start_state

if TYPE_CHECKING:
    from .isaac_lab.client import BridgeClient, RemoteScene
    from .scene import ClothScene

#: Largest normalised keypoint error (same-init, vs the oracle's final state) counted as a success;
#: the same tolerance as the oracle check of the scripted programs.
SUCCESS_TOLERANCE = 0.10
#: Most simulated time one `step` may advance (s). The controller advances a frame per call; a
#: longer request is no command but a mistake, and an unbounded one would never return.
MAX_STEP_S = 1.0
#: Farthest one `step` may move a gripper (m, real scale). The controller's safety layer keeps
#: every command within `max_speed` per tick; whoever calls the simulator without it (a script,
#: a mistyped service call) must not teleport the grippers metres away.
MAX_STEP_MOVE_M = 1.0


class SimWorldError(InvalidInputError):
    """A command or configuration the simulator cannot honour; the message says which."""


@dataclass(frozen=True)
class SimObservation:
    """What the overhead camera sees now (camera optical frame, real metres)."""

    rgb: np.ndarray  # uint8 [H, W, 3]
    depth: np.ndarray  # float32 [H, W], metres along the optical axis
    mask: np.ndarray  # bool [H, W], cloth pixels
    intrinsics: np.ndarray  # float64 [3, 3]
    frame: int  # simulated frames since the start


class SimWorld:
    """One garment from one episode seed, driven by camera-frame gripper commands."""

    def __init__(
        self,
        garment: str,
        seed: int,
        config: GenerationConfig | str = "cpu-small",
        record: bool = True,
        bridge: BridgeClient | None = None,
    ) -> None:
        """`record`: render and keep every frame for `episode()` (video, keyframe strip); the
        evaluator turns it off and renders only the frames the policy sees.

        `bridge`: step another simulator (Isaac Lab, or its stand-in) over the bridge instead of
        the local Newton scene. The start state is still computed here by the project's
        generator and handed over, so both backends start from the same garment state; the
        camera frames then come from that simulator, and the same-init score compares its final
        keypoints with the Newton oracle run from the same start."""
        # The stand-in steps with the named preset's physics; a custom config has no name to send.
        preset_name = config if isinstance(config, str) else next((k for k in PRESETS if preset(k) == config), "custom")
        self.config = preset(config) if isinstance(config, str) else config
        self.garment_spec, self.seed = garment, int(seed)
        self.garment = resolve_garment(
            garment, spacing=self.config.garment_spacing, max_particles=self.config.max_particles
        )
        self.start = start_state(self.garment, self.seed, self.config)
        self.scene: ClothScene = self.start.scene
        self.bridge = bridge
        if bridge is not None:
            from .isaac_lab.client import RemoteScene

            # RemoteScene has the part of ClothScene's interface that SimWorld, the rollout
            # bookkeeping and record_fold use (test_isaac_bridge runs them all on it).
            self.scene = cast("ClothScene", RemoteScene(bridge, self.start, self.config, preset_name))
        self.camera = self.start.dr.camera
        self.scale = self.config.obs_scale
        self.fps = self.scene.config.fps
        self.frames = 0
        self.initial_keypoints = self.keypoints_world()
        # Recording reuses the generator's rollout bookkeeping, so a policy rollout becomes an
        # `Episode` exactly like a generated one (same viewer, same store, same keyframes).
        # A bridged simulator records its own camera's frames (Isaac Lab: the Frankas in view, the
        # garment in its episode colour), so the rollout video and strip show what it rendered.
        self._rollout = FoldingRollout(
            self.scene,
            self.start.dr,
            self.start.keypoint_ids,
            self.config,
            record,
            camera=self._bridge_frame if bridge is not None else None,
        )
        self.init = init_info(self.scene, self.start.keypoint_ids)
        self._coverage = Coverage(self.scene.positions(), self.garment.faces)

    # ------------------------------------------------------------------ frames and time

    @property
    def sim_time(self) -> float:
        return self.frames / self.fps

    def stamp_ns(self, frame: int | None = None) -> int:
        """Exact nanosecond stamp of a frame (default: now)."""
        return round((self.frames if frame is None else frame) * 1_000_000_000 / self.fps)

    def camera_from_world(self, p: np.ndarray) -> np.ndarray:
        return self.camera.world_to_camera(np.asarray(p, dtype=np.float64)) * self.scale

    def world_from_camera(self, p: np.ndarray) -> np.ndarray:
        t = self.camera.T_world_camera
        return (np.asarray(p, dtype=np.float64) / self.scale) @ t[:3, :3].T + t[:3, 3]

    # ------------------------------------------------------------------ state and observation

    def arm_state(self) -> np.ndarray:
        """[2, 4] (x, y, z, openness) per arm, camera frame, real metres."""
        s = self.scene.arm_states()
        return np.concatenate([self.camera_from_world(s[:, :3]), s[:, 3:]], axis=1)

    def home(self) -> np.ndarray:
        """[2, 3] home poses of the arms (where the scripted programs end), camera frame."""
        return self.camera_from_world(np.asarray(self.config.motion.home, dtype=np.float64))

    def keypoints_world(self) -> np.ndarray:
        return self.scene.positions()[self.start.keypoint_ids]

    def observe(self) -> SimObservation:
        from .render import render

        if self.bridge is not None:  # the other simulator's own camera (already real metres)
            rgb, depth, mask = cast("RemoteScene", self.scene).observe()
            return SimObservation(rgb, depth.astype(np.float32), mask, self.camera.intrinsics, self.frames)
        frame = render(self.camera, self.start.dr.appearance, self.scene.positions(), self.garment.faces)
        return SimObservation(
            frame.rgb, (frame.depth * self.scale).astype(np.float32), frame.mask, self.camera.intrinsics, self.frames
        )

    def _bridge_frame(self, particles: np.ndarray) -> Frame:
        """The bridged simulator's camera frame now, as the rollout records frames (depth in
        simulation metres; particle visibility against that camera's depth, so cloth under an
        arm counts as hidden). `RemoteScene.observe` renders each simulated frame once, so the
        frame the sim node publishes and the one recorded here are one render."""
        rgb, depth, mask = cast("RemoteScene", self.scene).observe()
        depth = depth.astype(np.float64) / self.scale
        return Frame(rgb, depth.astype(np.float32), mask, particle_visibility(self.camera, particles, depth))

    # ------------------------------------------------------------------ stepping

    def step(self, target: np.ndarray, openness: np.ndarray, until: float) -> int:
        """Advance to simulated time `until`, moving the grippers to `target` ([2, 3], camera frame).

        The gripper commands apply first (closing grasps where the gripper is, opening
        releases), then the grippers move linearly to the target over the frames stepped.
        `until` at or before now steps nothing; more than `MAX_STEP_S` ahead, or a target more
        than `MAX_STEP_MOVE_M` from a gripper, is refused. Returns the number of frames simulated.
        """
        target = np.asarray(target, dtype=np.float64)
        openness = np.asarray(openness, dtype=np.float64)
        if target.shape != (2, 3) or not np.isfinite(target).all():
            raise SimWorldError(f"target: expected finite [2, 3] camera-frame positions, got {target.tolist()}")
        if openness.shape != (2,) or not np.isfinite(openness).all():
            raise SimWorldError(f"openness: expected 2 finite values, got {openness.tolist()}")
        if not np.isfinite(until):
            raise SimWorldError(f"until: expected a finite time, got {until}")
        if until - self.sim_time > MAX_STEP_S:
            raise SimWorldError(
                f"until: {until:g} s is {until - self.sim_time:g} s ahead; one step advances at most {MAX_STEP_S:g} s"
            )
        n = int(np.floor((until - self.sim_time) * self.fps + 1e-6))
        if n <= 0:
            return 0
        move = np.linalg.norm(target - self.arm_state()[:, :3], axis=1)
        if (move > MAX_STEP_MOVE_M).any():
            raise SimWorldError(
                f"target: {move.max():.2f} m from the gripper; one step moves a gripper at most {MAX_STEP_MOVE_M:g} m"
            )
        goal = self.world_from_camera(target)
        start = self.scene.arm_states()[:, :3]
        for k in range(1, n + 1):
            waypoint = start + (goal - start) * (k / n)
            self._rollout.execute([[(waypoint[arm], float(openness[arm])) for arm in range(2)]])
            self.frames += 1
        return n

    # ------------------------------------------------------------------ outcome

    def record(self) -> FoldRecord:
        """The fold so far as the evaluation keeps it (events, final keypoints, fold rate)."""
        return record_fold(self._rollout.trace, self.scene, self.start.keypoint_ids, self._coverage)

    def episode(self, mode: str = "", variant: str = "") -> Episode:
        """The rollout so far as an `Episode` (camera frame, real metres), final frame included.

        The final observation is appended for the conversion and removed again, so stepping can
        go on afterwards (a fold resumed after an evaluation).
        """
        if not self._rollout.record:
            raise SimWorldError("episode: this world does not record frames (built with record=False)")
        self._rollout._observe(None)
        try:
            episode = _to_episode(self._rollout, self.config)
        finally:
            for series in vars(self._rollout.rec).values():
                if isinstance(series, list):
                    del series[-1]
        episode.meta.update(
            {
                "mode": mode,
                "variant": variant,
                "seed": self.seed,
                "garment_id": self.garment.garment_id,
                # whose camera drew the frames: the project's renderer, or the bridged simulator's
                "camera": "project" if self.bridge is None else str(self.bridge.hello.get("backend", "bridge")),
            }
        )
        return episode

    def evaluate(self, mode: str, variant: str) -> dict:
        """Same-init score: final keypoints vs the oracle program run from this world's start.

        Errors are in-plane keypoint distances normalised by the garment size (as the oracle
        check); `start_error_*` is the same measure for the untouched start state, the score of
        doing nothing. `oracle_keypoints` and `final_keypoints` are the two sets compared, in the
        camera frame (real metres, `KEYPOINT_NAMES` order), for views of the fold (a Rerun recording).
        """
        folding_mode = resolve_mode(mode)
        if variant not in folding_mode.variants:
            raise SimWorldError(f"variant {variant!r} not in {folding_mode.name}'s variants {folding_mode.variants}")
        t0 = time.perf_counter()
        reference_start = start_state(self.garment, self.seed, self.config, self.start.keypoint_ids)
        reference = run_program(reference_start, folding_mode, variant, self.seed, self.config, record=False)
        oracle = reference.keypoints()
        size = self.garment.size() * self.config.sim.garment_scale
        final = self.keypoints_world()

        def errors(kps: np.ndarray) -> np.ndarray:
            return np.linalg.norm(kps[:, :2] - oracle[:, :2], axis=1) / size

        err, start_err = errors(final), errors(self.initial_keypoints)
        below = int(np.count_nonzero(self.scene.positions()[:, 2] < -0.01))
        return {
            "mode": folding_mode.name,
            "mode_id": folding_mode.mode_id,
            "variant": variant,
            "garment": self.garment.garment_id,
            "seed": self.seed,
            "frames": self.frames,
            "sim_time_s": self.sim_time,
            "keypoint_error": dict(zip(KEYPOINT_NAMES, map(float, err), strict=True)),
            "keypoint_error_max": float(err.max()),
            "keypoint_error_mean": float(err.mean()),
            "oracle_keypoints": self.camera_from_world(oracle).tolist(),
            "final_keypoints": self.camera_from_world(final).tolist(),
            "start_error_max": float(start_err.max()),
            "start_error_mean": float(start_err.mean()),
            "success_tolerance": SUCCESS_TOLERANCE,
            "success": bool(err.max() <= SUCCESS_TOLERANCE),
            "oracle_move_errors_max": max((o["error"] for o in reference.oracle), default=0.0),
            "particles_below_table": below,
            "evaluate_s": time.perf_counter() - t0,
        }
