"""A fold as a Rerun recording (`.rrd`): what the camera saw, what the policy was shown and answered,
what the arms did and where the oracle would have left the cloth, on one simulated-time axis.

Why one module: the in-process evaluator (`instant_fold_evaluation.closed_loop`, fed by the objects
it drives) and the ROS main job (`instant_fold.sim_fold`, fed from the graph's topics through
`instant_fold_ros.recording_tap`) record a fold into the same entities, so a recording of either
opens the same way in the viewer and one test checks the layout (`ENTITIES`). No rclpy here; rerun
is imported when a recording is opened, so the core imports without it.

Time: the `sim_time` timeline (seconds of the observations' clock: simulated time under a
simulator), plus a `query` sequence on what each policy query logged. Everything is in the camera
optical frame (x right, y down, z forward, metres), the frame of tokens, states and actions.

Live: with `stream_to` (a Rerun gRPC address, e.g. `rerun_web.serve_live`'s proxy) everything is
also streamed to that viewer as it is logged, so a fold can be watched while it runs; the file is
written all the same.

Thread-safe: the main job logs from several executor threads (rerun's time cursor is per thread,
so every log sets its own time under one lock).
"""

from __future__ import annotations

import re
import threading
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType
from typing import Any

import numpy as np

from instant_fold_core.contracts import ActionChunk, ChunkRepresentation, KeyframeEvent, gripper_closed
from instant_fold_core.dataset.schema import ARM_NAMES, KEYPOINT_NAMES
from instant_fold_core.demonstration import Demonstration
from instant_fold_core.errors import InvalidInputError

#: Entity paths and what each holds (the layout tests and docs/rerun.md refer to).
ENTITIES: dict[str, str] = {
    "camera": "Pinhole with the camera's intrinsics (static)",
    "camera/rgb": "colour image [H, W, 3], JPEG, per observation",
    "camera/mask": "cloth mask [H, W] (1 = cloth), per observation",
    "cloth/tokens": "valid cloth tokens as a point cloud [N, 3], per observation",
    "demonstration/keyframes": "the demonstration's keyframe images side by side [H, K*W, 3] (static)",
    "demonstration/keyposes": "the demonstration's keyposes [2K, 3], labelled with their events (static)",
    "demonstration/path": "each arm's path through the demonstration's keyposes (static)",
    "policy/keypose": "the predicted next keypose [2, 3], per query",
    "policy/chunk": "the action chunk sent, one strip [H, 3] per arm, per query",
    "arms/position": "measured arm positions [2, 3], per control tick",
    "arms/path": "each arm's executed path (static, written on close)",
    "oracle/keypoints": "the oracle's final keypoints from the same start, the target [7, 3] (static)",
    "cloth/final_keypoints": "the fold's final keypoints [7, 3] (static)",
    "latency": "per-query latencies in ms, one time series per name (latency/<name>)",
    "events": "text lines: demonstration events, the fold's outcome",
}

SIM_TIME = "sim_time"
QUERY = "query"
ARM_COLOURS = ((255, 200, 0), (0, 200, 255))  # left yellow, right cyan
KEYPOSE_COLOURS = ((255, 120, 0), (0, 110, 255))
ORACLE_COLOUR = (0, 230, 90)
FINAL_COLOUR = (230, 40, 200)
TOKEN_COLOUR = (170, 170, 170)
MASK_COLOUR = (0, 255, 120, 255)
#: Where the 3D view looks from, relative to the cloth (camera frame: -z is up, away from the
#: table): above the table, off to one side, so the arms' lifts show as heights.
EYE_OFFSET_M = (-0.6, 0.75, -0.8)
_LATENCY_NAME = re.compile(r"[a-z][a-z0-9_]*")
#: Longest wait on close for a live viewer to take what is still queued for it (s): one that
#: stopped answering must not hold the fold's end.
FLUSH_TIMEOUT_S = 30.0
#: The address schemes of a Rerun gRPC server a recording can stream to.
STREAM_SCHEMES = ("rerun://", "rerun+http://", "rerun+https://")


class FoldRecordingError(InvalidInputError):
    """A value the recording cannot take (wrong shape, NaN, unknown name) or a closed recording."""


def _points(name: str, value: object, count: int | None = None) -> np.ndarray:
    """`value` as finite float32 [count, 3] points (any count when None), or FoldRecordingError."""
    arr = np.asarray(value, dtype=np.float32)
    if arr.ndim != 2 or arr.shape[1] != 3 or (count is not None and arr.shape[0] != count):
        want = f"[{count if count is not None else 'N'}, 3]"
        raise FoldRecordingError(f"{name}: expected points {want}, got shape {arr.shape}")
    if not np.isfinite(arr).all():
        raise FoldRecordingError(f"{name}: NaN or infinite values")
    return arr


def _arm_state(name: str, value: object) -> np.ndarray:
    arr = np.asarray(value, dtype=np.float32)
    if arr.shape != (2, 4) or not np.isfinite(arr).all():
        raise FoldRecordingError(f"{name}: expected a finite arm state [2, 4], got shape {arr.shape}")
    return arr


def _stamp(value: float) -> float:
    stamp = float(value)
    if not np.isfinite(stamp) or stamp < 0:
        raise FoldRecordingError(f"stamp_s: expected a finite time >= 0, got {value}")
    return stamp


class FoldRecording:
    """Writes one fold to `path` (created with its folder; an existing file is replaced) and, with
    `stream_to` (`rerun+http://host:port/proxy`), streams it to that viewer as well.

    Call `camera` once, then in any order `demonstration`, `observation`, `tokens`, `query`,
    `arm_state`, `keypoints`, `event`; `close` (or leaving the `with` block) writes the executed
    paths and the file's end. Every method checks its input and raises `FoldRecordingError`.
    """

    def __init__(
        self, path: str | Path, name: str = "instant_fold", jpeg_quality: int = 85, stream_to: str | None = None
    ) -> None:
        import rerun as rr

        if not 1 <= jpeg_quality <= 100:
            raise FoldRecordingError(f"jpeg_quality: expected 1..100, got {jpeg_quality}")
        if stream_to is not None and not stream_to.startswith(STREAM_SCHEMES):
            raise FoldRecordingError(f"stream_to: expected a Rerun gRPC address ({'|'.join(STREAM_SCHEMES)}...), "
                                     f"got {stream_to!r}")  # fmt: skip
        self.path = Path(path)
        if self.path.suffix != ".rrd":
            raise FoldRecordingError(f"{self.path}: a Rerun recording's name ends in .rrd")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._rr = rr
        self._jpeg_quality = jpeg_quality
        self._lock = threading.Lock()
        self._size: tuple[int, int] | None = None  # (width, height) of the camera's images
        self._path: list[np.ndarray] = []  # executed arm positions [2, 3] per tick
        self._cloth_centre: np.ndarray | None = None  # of the first tokens: where the 3D view looks
        self._last_state_stamp = -1.0
        self._closed = False
        #: Why streaming to `stream_to` failed, if it did (the file is written regardless).
        self.stream_error: str | None = None
        self._rec = rr.RecordingStream(name)
        if stream_to is None:
            self._rec.save(self.path, default_blueprint=_blueprint())
        else:
            self._rec.set_sinks(rr.FileSink(self.path), rr.GrpcSink(stream_to), default_blueprint=_blueprint())

    # ------------------------------------------------------------------ plumbing

    def _log(self, entity: str, data: Any, stamp_s: float | None = None, query: int | None = None) -> None:
        """Log `data` at `entity`: static without a stamp, else at `stamp_s` (and query `query`)."""
        with self._lock:
            if self._closed:
                raise FoldRecordingError(f"{self.path}: the recording is closed")
            if stamp_s is None:
                self._rec.log(entity, data, static=True)
                return
            self._rec.reset_time()
            self._rec.set_time(SIM_TIME, duration=stamp_s)
            if query is not None:
                self._rec.set_time(QUERY, sequence=query)
            self._rec.log(entity, data)

    @property
    def has_camera(self) -> bool:
        """Whether `camera` was called (hosts that learn the camera from the first frame ask)."""
        return self._size is not None

    # ------------------------------------------------------------------ what a fold logs

    def camera(self, intrinsics: np.ndarray, width: int, height: int) -> None:
        """The camera the images come from: its 3x3 intrinsics and image size (pixels)."""
        k = np.asarray(intrinsics, dtype=np.float64)
        if k.shape != (3, 3) or not np.isfinite(k).all() or k[0, 0] <= 0 or k[1, 1] <= 0:
            raise FoldRecordingError(f"intrinsics: expected a 3x3 camera matrix with positive focal lengths, got {k}")
        if width < 1 or height < 1:
            raise FoldRecordingError(f"image size: expected positive width and height, got {width}x{height}")
        rr = self._rr
        self._size = (int(width), int(height))
        self._log("camera", rr.ViewCoordinates.RDF)  # camera optical frame: x right, y down, z forward
        self._log("camera", rr.Pinhole(image_from_camera=k, resolution=[width, height]))
        # the mask's classes, for every image under the camera
        self._log("camera", rr.AnnotationContext([(0, "table", (0, 0, 0, 0)), (1, "cloth", MASK_COLOUR)]))

    def _image(self, name: str, image: np.ndarray, channels: int | None) -> np.ndarray:
        arr = np.asarray(image)
        shape = arr.shape[:2]
        if (channels is None and arr.ndim != 2) or (channels is not None and arr.shape[2:] != (channels,)):
            raise FoldRecordingError(f"{name}: expected an image [H, W{', 3' if channels else ''}], got {arr.shape}")
        if self._size is not None and shape != self._size[::-1]:
            raise FoldRecordingError(
                f"{name}: {shape[1]}x{shape[0]} image, the camera's are {self._size[0]}x{self._size[1]}"
            )
        return arr

    def observation(self, stamp_s: float, rgb: np.ndarray | None = None, mask: np.ndarray | None = None) -> None:
        """A camera frame: uint8 colour [H, W, 3] and/or the cloth mask [H, W] (bool, or non-zero = cloth)."""
        stamp = _stamp(stamp_s)
        rr = self._rr
        if rgb is not None:
            colour = self._image("rgb", rgb, 3)
            if colour.dtype != np.uint8:
                raise FoldRecordingError(f"rgb: expected uint8, got {colour.dtype}")
            self._log("camera/rgb", rr.Image(colour).compress(jpeg_quality=self._jpeg_quality), stamp)
        if mask is not None:
            cloth = (self._image("mask", mask, None) != 0).astype(np.uint8)
            self._log("camera/mask", rr.SegmentationImage(cloth, opacity=0.35), stamp)

    def tokens(self, stamp_s: float, positions: np.ndarray, valid: np.ndarray | None = None) -> None:
        """The cloth tokens of one observation: positions [N, 3]; only the `valid` ones are drawn."""
        stamp = _stamp(stamp_s)
        points = _points("tokens", positions)
        if valid is not None:
            keep = np.asarray(valid)
            if keep.shape != (points.shape[0],) or keep.dtype != np.bool_:
                raise FoldRecordingError(f"valid: expected bool [{points.shape[0]}], got {keep.dtype} {keep.shape}")
            points = points[keep]
        if self._cloth_centre is None and len(points):
            self._cloth_centre = np.median(points, axis=0)
        self._log("cloth/tokens", self._rr.Points3D(points, colors=[TOKEN_COLOUR], radii=0.003), stamp)

    def query(
        self, index: int, stamp_s: float, chunk: ActionChunk, latency_ms: Mapping[str, float] | None = None
    ) -> None:
        """Policy query `index` on the observation of `stamp_s`: the chunk sent (ABSOLUTE targets),
        its predicted next keypose, and the query's latencies (name -> milliseconds, lower-case
        names; each becomes the time series `latency/<name>`)."""
        stamp = _stamp(stamp_s)
        if not isinstance(chunk, ActionChunk):
            raise FoldRecordingError(f"chunk: expected an ActionChunk, got {type(chunk).__name__}")
        if index < 0:
            raise FoldRecordingError(f"query index: expected >= 0, got {index}")
        latencies = dict(latency_ms or {})
        for name, value in latencies.items():
            if not _LATENCY_NAME.fullmatch(name) or not np.isfinite(value) or value < 0:
                raise FoldRecordingError(
                    f"latency {name!r}: expected a lower-case name and a finite ms >= 0, got {value}"
                )
        rr = self._rr
        if chunk.representation == ChunkRepresentation.ABSOLUTE:  # DELTA steps are no positions to draw
            strips = [chunk.positions[:, arm, :].astype(np.float32) for arm in range(2)]
            self._log(
                "policy/chunk",
                rr.LineStrips3D(strips, colors=list(ARM_COLOURS), radii=0.002, labels=list(ARM_NAMES)),
                stamp,
                index,
            )
        if chunk.keypose is not None:
            closed = gripper_closed(chunk.keypose[:, 3])
            labels = [f"{arm} {'closed' if c else 'open'}" for arm, c in zip(ARM_NAMES, closed, strict=True)]
            self._log(
                "policy/keypose",
                rr.Points3D(chunk.keypose[:, :3], colors=list(KEYPOSE_COLOURS), radii=0.012, labels=labels),
                stamp,
                index,
            )
        for name, value in latencies.items():
            self._log(f"latency/{name}", rr.Scalars(float(value)), stamp, index)

    def arm_state(self, stamp_s: float, state: np.ndarray) -> None:
        """A measured arm state [2, 4] (x, y, z, openness per arm); a stamp already logged is skipped
        (a state topic repeats its latest measurement while simulated time stands still)."""
        stamp = _stamp(stamp_s)
        arms = _arm_state("arm state", state)
        with self._lock:
            if stamp <= self._last_state_stamp:
                return
            self._last_state_stamp = stamp
            self._path.append(arms[:, :3].copy())
        rr = self._rr
        radii = [0.016 if gripper_closed(o) else 0.01 for o in arms[:, 3]]  # closed grippers drawn larger
        self._log("arms/position", rr.Points3D(arms[:, :3], colors=list(ARM_COLOURS), radii=radii), stamp)
        for arm, name in enumerate(ARM_NAMES):
            self._log(f"arms/openness/{name}", rr.Scalars(float(arms[arm, 3])), stamp)

    def demonstration(self, demo: Demonstration) -> None:
        """The demonstration the policy was conditioned on: its keyframe images side by side, its
        keyposes (labelled `k<i> <arm> <event>`) and each arm's path through them."""
        if not isinstance(demo, Demonstration):
            raise FoldRecordingError(f"demonstration: expected a Demonstration, got {type(demo).__name__}")
        rr = self._rr
        strip = np.concatenate(list(demo.color), axis=1)
        self._log("demonstration/keyframes", rr.Image(strip).compress(jpeg_quality=self._jpeg_quality))
        positions = demo.keypose[:, :, :3].astype(np.float32)
        labels = [
            f"k{i} {arm} {KeyframeEvent(int(demo.events[i, a])).name}"
            for i in range(demo.num_keyframes)
            for a, arm in enumerate(ARM_NAMES)
        ]
        colours = [ARM_COLOURS[a] for _ in range(demo.num_keyframes) for a in range(2)]
        self._log(
            "demonstration/keyposes",
            rr.Points3D(positions.reshape(-1, 3), colors=colours, radii=0.008, labels=labels, show_labels=False),
        )
        self._log(
            "demonstration/path",
            rr.LineStrips3D([positions[:, a] for a in range(2)], colors=list(ARM_COLOURS), radii=0.0015),
        )
        lines = [f"demonstration '{demo.name}' ({demo.mode or 'no mode'}): {demo.num_keyframes} keyframes"]
        lines += [label for label in labels if not label.endswith(("MOTION", "NONE"))]
        self._log("events", rr.TextLog("\n".join(lines)))

    def keypoints(self, oracle: np.ndarray, final: np.ndarray | None = None) -> None:
        """The oracle's final keypoints from the same start (the fold's target) and the fold's own
        final keypoints, [7, 3] each in `KEYPOINT_NAMES` order."""
        rr = self._rr
        n = len(KEYPOINT_NAMES)
        target = _points("oracle keypoints", oracle, n)
        self._log(
            "oracle/keypoints",
            rr.Points3D(
                target,
                colors=[ORACLE_COLOUR],
                radii=0.01,
                labels=[f"oracle {k}" for k in KEYPOINT_NAMES],
                show_labels=False,
            ),
        )
        if final is not None:
            reached = _points("final keypoints", final, n)
            self._log(
                "cloth/final_keypoints",
                rr.Points3D(
                    reached, colors=[FINAL_COLOUR], radii=0.008, labels=list(KEYPOINT_NAMES), show_labels=False
                ),
            )
            error = rr.LineStrips3D(np.stack([target, reached], axis=1), colors=[FINAL_COLOUR], radii=0.001)
            self._log("cloth/final_keypoints/error", error)

    def event(self, stamp_s: float | None, text: str) -> None:
        """One line in the `events` log (the fold's outcome, a refusal), at `stamp_s` or static."""
        self._log("events", self._rr.TextLog(str(text)), None if stamp_s is None else _stamp(stamp_s))

    # ------------------------------------------------------------------ end

    def close(self) -> Path:
        """Write each arm's executed path and finish the file; the recording takes nothing after."""
        with self._lock:
            if self._closed:
                return self.path
            path = np.stack(self._path) if self._path else np.zeros((0, 2, 3), np.float32)
        if len(path) > 1:
            strips = [path[:, arm] for arm in range(2)]
            self._log("arms/path", self._rr.LineStrips3D(strips, colors=list(ARM_COLOURS), radii=0.002))
        with self._lock:
            self._closed = True
            if self._cloth_centre is not None:  # the 3D view aimed at the cloth
                self._rec.send_blueprint(_blueprint(self._cloth_centre))
            try:
                self._rec.flush(timeout_sec=FLUSH_TIMEOUT_S)
            except RuntimeError as exc:  # the live viewer went away (or never came): the file is whole
                self.stream_error = str(exc)
            self._rec.disconnect()
        return self.path

    def __enter__(self) -> FoldRecording:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, value: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self.close()


def _blueprint(look_at: np.ndarray | None = None) -> Any:
    """The default layout: the fold in 3D beside the camera, the demonstration and the latencies;
    the 3D view looks at `look_at` (the cloth) from `EYE_OFFSET_M` when given."""
    import rerun.blueprint as rrb

    eye = None
    if look_at is not None:
        target = np.asarray(look_at, dtype=np.float64)
        eye = rrb.EyeControls3D(position=target + EYE_OFFSET_M, look_target=target, eye_up=(0.0, 0.0, -1.0))
    return rrb.Blueprint(
        rrb.Horizontal(
            rrb.Spatial3DView(
                name="fold (camera frame)",
                origin="/",
                contents=["+ /**", "- /demonstration/keyframes", "- /camera/mask"],
                eye_controls=eye,
            ),
            rrb.Vertical(
                rrb.Spatial2DView(name="camera", origin="/camera"),
                rrb.Spatial2DView(name="demonstration keyframes", origin="/demonstration/keyframes"),
                rrb.TimeSeriesView(name="latency per query (ms)", origin="/latency"),
                row_shares=[3, 1, 2],
            ),
            column_shares=[3, 2],
        ),
        rrb.SelectionPanel(state="collapsed"),
        rrb.BlueprintPanel(state="collapsed"),
        rrb.TimePanel(state="collapsed", play_state="following"),  # opens at the fold's end
    )
