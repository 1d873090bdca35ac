"""The policy server's logic: checkpoints -> cached demonstration -> action-chunk predictions.

The demonstration is tokenized (cloth encoder, deterministic FPS) and encoded by the policy
once when it is loaded; each prediction then only fuses the current observation with that cached
context (the policy's fast path). Predictions are absolute dual-arm targets in the camera frame.
"""

from __future__ import annotations

import dataclasses
import functools
import time
import weakref
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch

from instant_fold_core.checkpoint import checkpoint_id
from instant_fold_core.config import at_least_zero
from instant_fold_core.contracts import ActionChunk, KeyframeEvent
from instant_fold_core.demonstration import Demonstration
from instant_fold_core.device import resolve_device
from instant_fold_core.errors import ConfigError, InstantFoldError, InvalidInputError
from instant_fold_core.rgbd import RGBDFrame
from instant_fold_core.tokens import TokenArrays
from instant_fold_learning.encoder.tokenize import tokenize_frame
from instant_fold_learning.keypoints.mapping import KeypointCarrier
from instant_fold_learning.keypoints.modeling import KeypointDetector
from instant_fold_learning.policy.event_targets import (
    FIRST_GRASP_MATCH_M,
    GRASP_CONFLICT_M,
    GRASP_MATCH_M,
    DemonstrationTargets,
    EventTargets,
    ReleaseLatch,
    resolve,
)
from instant_fold_learning.policy.progress import EventCounter
from instant_fold_policy.event_order import EventSchedule

#: Tokenizes one frame with its cloth mask.
FrameTokenizer = Callable[[RGBDFrame, np.ndarray], TokenArrays]

#: Most keyframes a demonstration may have (the policy server's `max_keyframes` parameter). The
#: server tokenizes and encodes every keyframe when a demonstration is loaded (about 0.5 s and
#: 0.7 MB each on a CPU, while the load request waits), so a demonstration of hundreds of keyframes
#: (the correction page saved one of 213, 112 MB) held the server for minutes. The project's
#: demonstrations have 2 to about 20 (the scripted folds, `extract`'s rules); 64 leaves room for long
#: folds and refuses only what no fold needs.
MAX_DEMONSTRATION_KEYFRAMES = 64


class PolicyServerError(InstantFoldError, RuntimeError):
    """A request cannot be served (no demonstration, tokens of another encoder, ...)."""


class DemonstrationRefused(InvalidInputError):
    """A demonstration the server will not encode (more keyframes than its `max_keyframes`)."""


def policy_checkpoint_id(policy_dir: str | Path) -> str:
    """Short, stable identifier of what `PolicyServer.from_checkpoints` loads from `policy_dir`:
    `checkpoint_id` (configuration and weights) of a learned policy, the configuration's hash of a
    registration replay (which has no weights)."""
    from instant_fold_learning.policy.replay import is_replay_checkpoint, replay_id

    return replay_id(policy_dir) if is_replay_checkpoint(policy_dir) else checkpoint_id(policy_dir)


class PolicyServer:
    """Holds the policy runner, the tokenize function (the cloth encoder) for demonstration keyframes,
    and the loaded demo."""

    def __init__(
        self,
        runner,
        tokenize: FrameTokenizer,
        encoder_id: str = "",
        seed: int = 0,
        max_keyframes: int = MAX_DEMONSTRATION_KEYFRAMES,
        event_targets: str = "policy",
        grasp_refinement_m: float = 0.0,
        keypoints: KeypointCarrier | None = None,
        grasp_conflict_m: float = GRASP_CONFLICT_M,
        grasp_match_m: float = GRASP_MATCH_M,
        first_grasp_match_m: float = FIRST_GRASP_MATCH_M,
    ) -> None:
        """`event_targets`: where the arms grasp and let go, one of `EVENT_TARGETS` or "auto"
        (`instant_fold_learning.policy.event_targets`; other than "policy" only for a learned policy
        with the anchored keypose head; "auto" picks for the policy). The strategy it resolves to
        is `self.event_targets`. `grasp_refinement_m`: the window in which a demonstrated grasp the
        strategy maps onto the cloth is refined locally (`ReplayConfig.grasp_refinement_m`; 0: off).
        `keypoints`: the strategy carries a grasp made at a keypoint to that keypoint of the current
        cloth (`instant_fold_learning.keypoints`; None: the registration alone). `grasp_conflict_m`: the
        demonstration strategy sends each arm to its own demonstrated grasp when the policy aims both
        this close to each other (`DemonstrationTargets.observe`; 0: off). `grasp_match_m`: the
        demonstration strategy makes a grasp the policy aims this close to where the arm's next
        demonstrated grasp maps at that mapped point (`DemonstrationTargets.observe`; 0: never);
        `first_grasp_match_m`: the same for each arm's first grasp of a fold."""
        from instant_fold_learning.policy.replay import ReplayConfig

        cfg = getattr(runner, "cfg", None)
        try:
            event_targets = resolve(
                event_targets, getattr(cfg, "keypose_head", None), str(getattr(cfg, "conditioning", ""))
            )
            #: The registration the event-target strategies map the demonstration with.
            self.registration = ReplayConfig(grasp_refinement_m=grasp_refinement_m)
            self.grasp_conflict_m = at_least_zero("grasp_conflict_m", grasp_conflict_m)
            self.grasp_match_m = at_least_zero("grasp_match_m", grasp_match_m)
            self.first_grasp_match_m = at_least_zero("first_grasp_match_m", first_grasp_match_m)
        except (ValueError, ConfigError) as exc:
            raise PolicyServerError(str(exc)) from None
        for name, value in (("grasp_refinement_m", grasp_refinement_m), ("keypoints", keypoints)):
            if value and not event_targets.startswith("demonstration"):
                # Set and silently unused, a results folder would record a mapping that never ran.
                raise PolicyServerError(
                    f"{name}: only the demonstration event targets map grasps (event targets here: "
                    f"{event_targets!r}; registration replay sets its own in its config.json)"
                )
        self.keypoints = keypoints
        self.runner = runner
        self.max_keyframes = max_keyframes
        self.tokenize = tokenize
        self.encoder_id = encoder_id
        self.demonstration: Demonstration | None = None
        self._fingerprint: str | None = None  # of the demonstration the runner has encoded
        self._demo_tokens: TokenArrays | None = None  # its tokens per keyframe [K, N, ...]
        # The flow sampler's noise comes from a generator seeded with `seed` (torch's global one is
        # seeded at random in each process): ad-hoc predictions draw from this one, reseeded with
        # every demonstration; a fold draws from one of its own (`fold_generator`), so no other
        # caller's predictions can change what the fold does.
        self.seed = seed
        self.generator = torch.Generator().manual_seed(seed)
        # Held targets belong to a stream of queries, as the noise does: the server's own
        # predictions and each fold, told apart by the generator they draw from. A fold's
        # generator is new (`fold_generator`), so every fold starts with nothing held, and
        # predict-service calls made meanwhile never touch its targets.
        self.event_targets = event_targets
        self._held: weakref.WeakKeyDictionary[torch.Generator, EventTargets] = weakref.WeakKeyDictionary()
        # So do the event counts a policy with `model.event_progress` reads (`progress.EventCounter`).
        self._counters: weakref.WeakKeyDictionary[torch.Generator, EventCounter] = weakref.WeakKeyDictionary()

    @classmethod
    def from_checkpoints(
        cls,
        policy_dir: str | Path,
        encoder_dir: str | Path,
        device: str = "auto",
        seed: int = 0,
        step_duration: float | None = None,
        max_keyframes: int = MAX_DEMONSTRATION_KEYFRAMES,
        event_targets: str = "policy",
        grasp_refinement_m: float = 0.0,
        keypoint_detector: str | Path | None = None,
        grasp_conflict_m: float = GRASP_CONFLICT_M,
        grasp_match_m: float = GRASP_MATCH_M,
        first_grasp_match_m: float = FIRST_GRASP_MATCH_M,
    ) -> PolicyServer:
        """`step_duration`: seconds between the steps of the predicted chunks (None: the runner's default);
        `max_keyframes`: see `MAX_DEMONSTRATION_KEYFRAMES`; `event_targets`, `grasp_refinement_m`,
        `grasp_conflict_m`, `grasp_match_m`, `first_grasp_match_m`: see `__init__`;
        `keypoint_detector`: a `KeypointDetector` directory trained on this encoder's tokens (the
        `keypoints` of `__init__`; None or "": none).

        `policy_dir` is a learned policy's checkpoint, or a directory whose `config.json` names the
        `registration_replay` variant (`instant_fold_learning.policy.replay`: no weights, no training)."""
        from instant_fold_learning.encoder.modeling import ClothEncoder
        from instant_fold_learning.policy.inference import DEFAULT_STEP_DURATION, PolicyRunner
        from instant_fold_learning.policy.replay import RegistrationReplay, is_replay_checkpoint

        dev = resolve_device(device)
        runner: PolicyRunner | RegistrationReplay
        if is_replay_checkpoint(policy_dir):
            runner = RegistrationReplay.from_checkpoint(policy_dir, step_duration)
        else:
            runner = PolicyRunner.from_checkpoint(
                policy_dir, device=dev, step_duration=DEFAULT_STEP_DURATION if step_duration is None else step_duration
            )
        encoder = ClothEncoder.from_pretrained(encoder_dir, device=dev)
        if encoder.feature_dim != runner.cfg.cloth_feature_dim or encoder.num_tokens != runner.cfg.num_cloth_tokens:
            raise PolicyServerError(
                f"encoder {encoder_dir} gives {encoder.num_tokens} x {encoder.feature_dim} tokens, the policy "
                f"expects {runner.cfg.num_cloth_tokens} x {runner.cfg.cloth_feature_dim}"
            )
        keypoints = None
        if keypoint_detector:
            detector = KeypointDetector.from_pretrained(keypoint_detector, device=dev)
            m = detector.config.model
            if (m.num_cloth_tokens, m.cloth_feature_dim) != (encoder.num_tokens, encoder.feature_dim):
                raise PolicyServerError(
                    f"keypoint detector {keypoint_detector} reads {m.num_cloth_tokens} x {m.cloth_feature_dim} "
                    f"tokens, the encoder {encoder_dir} gives {encoder.num_tokens} x {encoder.feature_dim}"
                )
            keypoints = KeypointCarrier(detector)
        return cls(
            runner,
            lambda frame, mask: tokenize_frame(encoder, frame, mask),
            checkpoint_id(encoder_dir),
            seed,
            max_keyframes,
            event_targets,
            grasp_refinement_m,
            keypoints,
            grasp_conflict_m,
            grasp_match_m,
            first_grasp_match_m,
        )

    @property
    def horizon(self) -> int:
        return int(self.runner.cfg.horizon)

    def check_keyframes(self, count: int) -> None:
        """Refuse a demonstration of `count` keyframes if it is longer than `max_keyframes`: callers
        holding a demonstration message check its length before converting its images."""
        if count > self.max_keyframes:
            raise DemonstrationRefused(
                f"demonstration of {count} keyframes refused: more than the server's max_keyframes "
                f"({self.max_keyframes})"
            )

    def load_demonstration(self, demo: Demonstration) -> float:
        """Tokenize and encode the keyframes once (after `check_keyframes`); return the seconds it
        took. The demonstration already loaded (same arrays, `Demonstration.fingerprint`) is not
        encoded again by a runner whose load keeps no fold progress (`RESTARTS_ON_LOAD`): the main job names in its goal the demonstration the server started with,
        which cost the fold's first query the whole encoding again (2.9 s for the paper
        configuration on a CPU). Either way the server's noise and held targets start afresh."""
        self.check_keyframes(demo.num_keyframes)
        start = time.perf_counter()
        demo.validate()
        fingerprint = demo.fingerprint()
        if fingerprint != self._fingerprint or self.runner.RESTARTS_ON_LOAD or not self.runner.has_demonstration:
            tokens = [self.tokenize(demo.frame(i), demo.mask[i]) for i in range(demo.num_keyframes)]
            stacked = TokenArrays(*(np.stack(field) for field in zip(*tokens, strict=True)))
            self.runner.load_demonstration(stacked.positions, stacked.features, demo.keypose, stacked.valid)
            self._fingerprint, self._demo_tokens = fingerprint, stacked
        self.demonstration = demo
        self.generator.manual_seed(self.seed)
        self._held.clear()
        self._counters.clear()
        return time.perf_counter() - start

    def load_instruction(self, text: str) -> None:
        """Condition a language-conditioned policy on a fold said in words instead of a demonstration."""
        self.runner.load_instruction(text)
        self.demonstration, self._fingerprint, self._demo_tokens = None, None, None
        self.generator.manual_seed(self.seed)
        self._held.clear()
        self._counters.clear()

    def fold_generator(self) -> torch.Generator:
        """The sampler's noise for one fold, seeded as a demonstration load seeds `generator`: a
        fold run alone draws exactly what `predict` without a generator drew before. It also
        names the fold's stream of queries: the fold's held targets are its own."""
        return torch.Generator().manual_seed(self.seed)

    def _release_strategy(self) -> EventTargets:
        """A fresh `event_targets` strategy for a stream of queries."""
        if self.event_targets == "latched":
            return ReleaseLatch()
        if self._demo_tokens is None or self.demonstration is None:
            raise PolicyServerError(
                f"event_targets {self.event_targets!r}: no demonstration loaded (a policy told the fold in words "
                "has none)"
            )
        return DemonstrationTargets(
            self._demo_tokens,
            self.demonstration.keypose,
            registration=self.registration,
            grasps=self.event_targets == "demonstration",
            keypoints=self.keypoints,
            conflict_m=self.grasp_conflict_m,
            match_m=self.grasp_match_m,
            first_match_m=self.first_grasp_match_m,
        )

    @property
    def conditioning(self) -> str:
        """ "demo" or "language": what the policy is conditioned on."""
        return str(self.runner.cfg.conditioning)

    @property
    def expected_events(self) -> int:
        """Grasps and releases the loaded demonstration performs (both arms)."""
        if self.demonstration is None:
            return 0
        events = self.demonstration.events
        return int(np.isin(events, (KeyframeEvent.GRASP, KeyframeEvent.RELEASE)).sum())

    @property
    def event_schedule(self) -> EventSchedule | None:
        """The order of the loaded demonstration's gripper events, which a fold loop with
        `event_order` holds the arms to; None without a demonstration."""
        return None if self.demonstration is None else EventSchedule.from_keypose(self.demonstration.keypose)

    @property
    def home(self) -> np.ndarray | None:
        """Home positions [2, 3]: where the demonstration's terminal keyframe leaves the arms."""
        return None if self.demonstration is None else self.demonstration.keypose[-1, :, :3].astype(np.float64)

    def predict(
        self,
        tokens: TokenArrays,
        arm_state: np.ndarray,
        steps_to_execute: int = 0,
        encoder_id: str = "",
        generator: torch.Generator | None = None,
    ) -> ActionChunk:
        """One query -> an ABSOLUTE chunk; `steps_to_execute` 0 = the policy's configured receding
        horizon (another value outside [1, H] raises `InvalidInputError`); the noise comes from
        `generator` (a fold's) or else from the server's own, and so do held targets."""
        if self.demonstration is None and not self.runner.has_demonstration:
            raise PolicyServerError("no demonstration loaded: call load_demonstration first")
        if encoder_id and self.encoder_id and encoder_id != self.encoder_id:
            raise PolicyServerError(f"tokens come from encoder {encoder_id}, the server uses {self.encoder_id}")
        noise = self.generator if generator is None else generator
        progress = {}
        if getattr(getattr(self.runner, "cfg", None), "event_progress", False):
            counter = self._counters.setdefault(noise, EventCounter())
            progress["event_count"] = counter.observe(arm_state)
        predict = functools.partial(
            self.runner.predict, tokens.positions, tokens.features, arm_state, tokens.valid, noise, **progress
        )
        if self.event_targets == "policy":
            chunk = predict()
        else:
            held = self._held.get(noise)
            if held is None:
                held = self._held[noise] = self._release_strategy()
            chunk = predict(*held.targets(tokens, arm_state))
            held.observe(arm_state, chunk.keypose)
        if steps_to_execute and steps_to_execute != chunk.steps_to_execute:
            chunk = dataclasses.replace(chunk, steps_to_execute=steps_to_execute)
        return chunk
