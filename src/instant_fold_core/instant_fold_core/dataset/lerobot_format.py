"""LeRobotDataset v3 folders: export of episodes and demonstrations, import as a demonstration.

Robot-learning users keep their data in LeRobotDataset v3 (Hugging Face conventions: parquet
frames, meta JSON and parquet), so episodes of the zarr store and demonstration files are written
in that layout, and an episode of such a folder can come back as the `Demonstration` the policy
server loads. Only pyarrow and Pillow are needed here: LeRobot itself (which pins another torch)
is not imported; a test reads the exports with LeRobot's own `LeRobotDataset` in its own
environment (docs/lerobot.md).

Layout written (LeRobot 0.4.4's, ``codebase_version`` v3.0)::

    meta/info.json                          features, fps, counts, path templates
    meta/stats.json                         min/max/mean/std/count of the numeric features
    meta/tasks.parquet                      task string (index) -> task_index
    meta/episodes/chunk-000/file-000.parquet  per episode: length, tasks, where its frames are
    meta/instant_fold.json                  ours: frame, units, each episode's source, name, mode, meta
    data/chunk-CCC/file-FFF.parquet         one file per episode (file = episode % 1000)

Colour is stored as PNG images inside the parquet (LeRobot's ``image`` dtype): lossless, so an
imported demonstration equals the exported one bit for bit (an MP4 would not). Depth is float32
metres and the cloth mask uint8, both as [H, W] arrays. Every frame is one row; a demonstration's
frames are its keyframes, a simulated episode's frames all its frames with its keyframes flagged, a
recorded demonstration's (a bag and the keyframes extracted from it) every frame of the bag with its
keyframes flagged. Frames are written in batches of `WRITE_BATCH` rows, so an episode's arrays may
be memory maps of a recording larger than memory.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from PIL import Image

from instant_fold_core.contracts import KeyframeEvent
from instant_fold_core.dataset.schema import ARM_NAMES, ARM_STATE_FIELDS, Episode
from instant_fold_core.demonstration import Demonstration, from_episode, image_frames
from instant_fold_core.errors import InvalidInputError

if TYPE_CHECKING:  # zarr 3 needs Python >= 3.11; the rest of this module does not
    from instant_fold_core.dataset.zarr_store import EpisodeStore

CODEBASE_VERSION = "v3.0"
CHUNKS_SIZE = 1000
IMAGE_KEY = "observation.images.overhead"
DEPTH_KEY = "observation.depth"
MASK_KEY = "observation.cloth_mask"
STATE_KEY = "observation.state"
ACTION_KEY = "action"
INTRINSICS_KEY = "observation.camera_intrinsics"
KEYFRAME_KEY = "keyframe"
EVENT_KEY = "gripper_event"
SOURCE_FRAME_KEY = "source_frame_index"
#: Our per-episode metadata beside LeRobot's (LeRobot ignores files it does not know).
INSTANT_FOLD_META = "meta/instant_fold.json"
#: The task string of a demonstration without a fold mode (a recorded human demonstration).
UNKNOWN_MODE_TASK = "fold the garment"
#: Frames per parquet row group: one batch of PNGs and depth arrays in memory at a time.
WRITE_BATCH = 64

_ARM_NAMES = [f"{arm}_{f}" for arm in ARM_NAMES for f in ARM_STATE_FIELDS]
_DATA_PATH = "data/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet"
_EPISODES_PATH = "meta/episodes/chunk-000/file-000.parquet"


class LeRobotFormatError(InvalidInputError):
    """A LeRobotDataset folder cannot be written or is not one this module can import."""


@dataclass
class LeRobotEpisode:
    """One episode as LeRobot frames: per-frame arrays of equal length T, one task string.

    Attributes:
        color: uint8 [T, H, W, 3]; depth: float32 [T, H, W] metres (0 invalid); mask: bool [T, H, W].
        intrinsics: float32 [3, 3] of the images.
        state: float32 [T, 2, 4] measured (x, y, z, openness) per arm, camera frame.
        action: float32 [T, 2, 4] absolute target per arm, camera frame.
        keyframe: bool [T] whether the frame is a context keyframe.
        events: uint8 [T, 2] `KeyframeEvent` per arm (NONE off the keyframes).
        source_frame: int64 [T] index of the frame in its source recording.
    """

    color: np.ndarray
    depth: np.ndarray
    mask: np.ndarray
    intrinsics: np.ndarray
    state: np.ndarray
    action: np.ndarray
    keyframe: np.ndarray
    events: np.ndarray
    source_frame: np.ndarray
    task: str
    info: dict[str, Any] = field(default_factory=dict)

    @property
    def num_frames(self) -> int:
        return int(self.color.shape[0])


def episode_frames(episode: Episode, name: str) -> LeRobotEpisode:
    """Every frame of a simulated episode; its keyframes flagged with the demonstration's events.

    The events are those `from_episode` derives (so importing the export gives the same
    demonstration as `from_episode` on the store's episode).
    """
    demo = from_episode(episode, name=name)
    t = episode.num_frames
    keyframe = np.zeros(t, bool)
    keyframe[episode.keyframes] = True
    events = np.full((t, 2), KeyframeEvent.NONE, np.uint8)
    events[episode.keyframes] = demo.events
    meta = episode.meta
    return LeRobotEpisode(
        color=episode.rgb, depth=episode.depth, mask=episode.mask, intrinsics=episode.intrinsics,
        state=episode.arm_state, action=episode.action, keyframe=keyframe, events=events,
        source_frame=np.arange(t, dtype=np.int64), task=str(meta.get("mode") or UNKNOWN_MODE_TASK),
        info={"source": "episode_store", "name": name, "mode": demo.mode, "description": demo.description,
              "meta": demo.meta},
    )  # fmt: skip


def demonstration_frames(demo: Demonstration) -> LeRobotEpisode:
    """A demonstration's keyframes as frames. Its action at keyframe k is the keypose of k + 1 (the
    next keypose, what the policy predicts from k), the last keyframe's its own."""
    demo.validate()
    action = np.concatenate([demo.keypose[1:], demo.keypose[-1:]])
    return LeRobotEpisode(
        color=demo.color, depth=demo.depth, mask=demo.mask, intrinsics=demo.intrinsics,
        state=demo.keypose, action=action, keyframe=np.ones(demo.num_keyframes, bool), events=demo.events,
        source_frame=demo.frame_index.astype(np.int64), task=demo.mode or UNKNOWN_MODE_TASK,
        info={"source": "demonstration", "name": demo.name, "mode": demo.mode, "description": demo.description,
              "meta": demo.meta},
    )  # fmt: skip


def recording_frames(
    color: np.ndarray, depth: np.ndarray, mask: np.ndarray, intrinsics: np.ndarray, state: np.ndarray | None,
    demo: Demonstration, info: dict[str, Any],
) -> LeRobotEpisode:  # fmt: skip
    """Every frame of a recording, with the keyframes `demo` was extracted from it flagged.

    `color`, `depth`, `mask` are the recording's T frames (arrays or memory maps), `state` the arm
    state measured at each frame ([T, 2, 4]; None for a human demonstration, where no arm moved).
    The frames `demo.frame_index` names are flagged with their events (two keyframes at one frame,
    as a duplicated keyframe of the correction page: per arm the last event that is not MOTION).
    With a measured state the action of a frame is the next frame's state (the target reached
    there, as for a store episode); without one the state is the keypose of the latest keyframe at
    or before the frame and the action the next keyframe's keypose (what the policy predicts, as
    for an exported demonstration). The demonstration's own keyframes (frames, image frames,
    keyposes, events) go into `info["keyframes"]`, so `to_demonstration` gives it back exactly.
    """
    demo.validate()
    t = int(color.shape[0])
    frames = demo.frame_index.astype(np.int64)
    images = image_frames(demo)
    outside = [int(f) for f in (*frames, *images) if not 0 <= f < t]
    if outside:
        raise LeRobotFormatError(
            f"recording {info.get('name', demo.name)!r}: keyframes at frames {outside}, the recording has {t} frames "
            "(keyframes of another recording?)"
        )
    keyframe = np.zeros(t, bool)
    keyframe[frames] = True
    events = np.full((t, 2), KeyframeEvent.NONE, np.uint8)
    for frame, kf_events in zip(frames, demo.events, strict=True):
        for arm, event in enumerate(kf_events):
            if event != KeyframeEvent.MOTION or events[frame, arm] == KeyframeEvent.NONE:
                events[frame, arm] = event
    if state is None:
        order = np.argsort(frames, kind="stable")
        # for every frame, the latest keyframe at or before it (before the first: the first)
        latest = np.searchsorted(frames[order], np.arange(t), side="right") - 1
        held = demo.keypose[order]
        state = held[np.maximum(latest, 0)]
        action = held[np.minimum(latest + 1, demo.num_keyframes - 1)]
    elif state.shape != (t, 2, 4):
        raise LeRobotFormatError(
            f"recording {info.get('name', demo.name)!r}: state {state.shape}, expected {(t, 2, 4)}"
        )
    else:
        action = np.concatenate([state[1:], state[-1:]])
    keyframes = {"frame_index": frames.tolist(), "image_frames": images, "keypose": demo.keypose.tolist(),
                 "events": demo.events.tolist()}  # fmt: skip
    return LeRobotEpisode(
        color=color, depth=depth, mask=mask, intrinsics=intrinsics, state=state.astype(np.float32),
        action=action.astype(np.float32), keyframe=keyframe, events=events, source_frame=np.arange(t, dtype=np.int64),
        task=demo.mode or UNKNOWN_MODE_TASK,
        info={"name": demo.name, "mode": demo.mode, "description": demo.description, "meta": demo.meta, **info,
              "keyframes": keyframes},
    )  # fmt: skip


def _features(height: int, width: int) -> dict[str, dict[str, Any]]:
    """LeRobot feature descriptions (info.json), our features first, then LeRobot's default five."""
    scalar = {"shape": [1], "names": None}
    return {
        IMAGE_KEY: {"dtype": "image", "shape": [height, width, 3], "names": ["height", "width", "channels"]},
        DEPTH_KEY: {"dtype": "float32", "shape": [height, width], "names": ["height", "width"]},
        MASK_KEY: {"dtype": "uint8", "shape": [height, width], "names": ["height", "width"]},
        STATE_KEY: {"dtype": "float32", "shape": [8], "names": _ARM_NAMES},
        ACTION_KEY: {"dtype": "float32", "shape": [8], "names": _ARM_NAMES},
        INTRINSICS_KEY: {"dtype": "float32", "shape": [9], "names": [f"k{r}{c}" for r in range(3) for c in range(3)]},
        KEYFRAME_KEY: {"dtype": "bool", **scalar},
        EVENT_KEY: {"dtype": "int64", "shape": [2], "names": list(ARM_NAMES)},
        SOURCE_FRAME_KEY: {"dtype": "int64", **scalar},
        "timestamp": {"dtype": "float32", **scalar},
        "frame_index": {"dtype": "int64", **scalar},
        "episode_index": {"dtype": "int64", **scalar},
        "index": {"dtype": "int64", **scalar},
        "task_index": {"dtype": "int64", **scalar},
    }


def _hf_features(features: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The `datasets` feature description LeRobot writes into the parquet schema metadata."""
    out: dict[str, Any] = {}
    for key, ft in features.items():
        if ft["dtype"] == "image":
            out[key] = {"_type": "Image"}
        elif ft["shape"] == [1]:
            out[key] = {"dtype": ft["dtype"], "_type": "Value"}
        elif len(ft["shape"]) == 1:
            out[key] = {"feature": {"dtype": ft["dtype"], "_type": "Value"}, "length": ft["shape"][0], "_type": "List"}
        else:
            out[key] = {"shape": ft["shape"], "dtype": ft["dtype"], "_type": "Array2D"}
    return out


def _png(image: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    Image.fromarray(image).save(buffer, format="PNG", compress_level=1)
    return buffer.getvalue()


def _table(
    ep: LeRobotEpisode, rows: range, episode_index: int, first_index: int, task_index: int, fps: float
) -> pa.Table:
    """Frames `rows` (a contiguous range) of `ep` as parquet rows; `first_index` is the episode's
    first frame's index in the dataset."""
    t = len(rows)
    h, w = ep.color.shape[1:3]
    part = slice(rows.start, rows.stop)
    f32, i64 = pa.float32(), pa.int64()

    def fixed(values: np.ndarray, size: int, kind: pa.DataType) -> pa.Array:
        return pa.FixedSizeListArray.from_arrays(pa.array(values.reshape(-1), kind), size)

    def images2d(values: np.ndarray, kind: pa.DataType) -> pa.Array:
        # [T, H, W] as list<list<>> (what `datasets.Array2D` reads), with fixed sizes throughout
        inner = pa.FixedSizeListArray.from_arrays(pa.array(values.reshape(-1), kind), w)
        return pa.ListArray.from_arrays(pa.array(np.arange(0, t * h + 1, h, dtype=np.int32)), inner)

    frame = np.arange(rows.start, rows.stop, dtype=np.int64)
    columns = {
        IMAGE_KEY: pa.array([{"bytes": _png(np.asarray(img)), "path": None} for img in ep.color[part]],
                            pa.struct([("bytes", pa.binary()), ("path", pa.string())])),
        DEPTH_KEY: images2d(np.asarray(ep.depth[part], np.float32), f32),
        MASK_KEY: images2d(np.asarray(ep.mask[part], np.uint8), pa.uint8()),
        STATE_KEY: fixed(ep.state[part].astype(np.float32), 8, f32),
        ACTION_KEY: fixed(ep.action[part].astype(np.float32), 8, f32),
        INTRINSICS_KEY: fixed(np.tile(ep.intrinsics.astype(np.float32).reshape(1, 9), (t, 1)), 9, f32),
        KEYFRAME_KEY: pa.array(ep.keyframe[part].astype(bool)),
        EVENT_KEY: fixed(ep.events[part].astype(np.int64), 2, i64),
        SOURCE_FRAME_KEY: pa.array(ep.source_frame[part].astype(np.int64)),
        "timestamp": pa.array((frame / fps).astype(np.float32)),
        "frame_index": pa.array(frame),
        "episode_index": pa.array(np.full(t, episode_index, np.int64)),
        "index": pa.array(frame + first_index),
        "task_index": pa.array(np.full(t, task_index, np.int64)),
    }  # fmt: skip
    table = pa.table(columns)
    hf = {"info": {"features": _hf_features(_features(h, w))}}
    return table.replace_schema_metadata({"huggingface": json.dumps(hf)})


def _check(ep: LeRobotEpisode, shape: tuple[int, int] | None, where: str) -> None:
    """One clear error for an episode the folder cannot hold (LeRobot features have one shape)."""
    t, h, w = ep.color.shape[:3]
    if t == 0:
        raise LeRobotFormatError(f"{where}: no frames")
    if shape is not None and (h, w) != shape:
        raise LeRobotFormatError(
            f"{where}: images are {h}x{w}, the dataset's are {shape[0]}x{shape[1]} (one size per dataset)"
        )
    for name, arr, expected in (("depth", ep.depth, (t, h, w)), ("mask", ep.mask, (t, h, w)),
                                ("state", ep.state, (t, 2, 4)), ("action", ep.action, (t, 2, 4)),
                                ("events", ep.events, (t, 2)), ("keyframe", ep.keyframe, (t,)),
                                ("source_frame", ep.source_frame, (t,)), ("intrinsics", ep.intrinsics, (3, 3))):  # fmt: skip
        if arr.shape != expected:
            raise LeRobotFormatError(f"{where}: {name} has shape {arr.shape}, expected {expected}")


def _stats(values: np.ndarray) -> dict[str, list[Any]]:
    """LeRobot's per-feature statistics over frames (axis 0), enough for its normalisers."""
    v = values.astype(np.float64)
    return {"min": v.min(0).tolist(), "max": v.max(0).tolist(), "mean": v.mean(0).tolist(),
            "std": v.std(0).tolist(), "count": [int(v.shape[0])]}  # fmt: skip


def write_lerobot_dataset(
    out: str | Path, episodes: Iterable[LeRobotEpisode], fps: float, robot_type: str = "instant_fold_dual_arm"
) -> dict[str, Any]:
    """Write `episodes` (streamed: one in memory at a time) as a LeRobotDataset v3 folder at `out`.

    `out` must not exist or be an empty folder (an export never merges into another dataset). The
    folder is written beside `out` under a hidden name and renamed into place when complete, so a
    failed export (a bad episode, a full disk) leaves nothing that looks like a dataset.
    Returns the info.json written.
    """
    final = Path(out)
    if final.exists() and (not final.is_dir() or any(final.iterdir())):
        raise LeRobotFormatError(f"{final}: exists and is not an empty folder (remove it or choose another --out)")
    if not fps > 0:
        raise LeRobotFormatError(f"fps must be positive, got {fps}")
    final.parent.mkdir(parents=True, exist_ok=True)
    out = final.with_name(f".{final.name}.tmp-{uuid.uuid4().hex[:8]}")
    try:
        info = _write(out, episodes, fps, robot_type)
        if final.exists():
            final.rmdir()
        os.replace(out, final)
        return info
    finally:
        if out.exists():
            shutil.rmtree(out, ignore_errors=True)


def _write(out: Path, episodes: Iterable[LeRobotEpisode], fps: float, robot_type: str) -> dict[str, Any]:
    tasks: dict[str, int] = {}
    rows: list[dict[str, Any]] = []
    ours: list[dict[str, Any]] = []
    sums: dict[str, list[np.ndarray]] = {STATE_KEY: [], ACTION_KEY: []}
    shape: tuple[int, int] | None = None
    total = 0
    for index, ep in enumerate(episodes):
        _check(ep, shape, f"episode {index} ({ep.info.get('name', '')})")
        shape = (int(ep.color.shape[1]), int(ep.color.shape[2]))
        task_index = tasks.setdefault(ep.task, len(tasks))
        chunk, file = divmod(index, CHUNKS_SIZE)
        path = out / _DATA_PATH.format(chunk_index=chunk, file_index=file)
        path.parent.mkdir(parents=True, exist_ok=True)
        # zstd: a third of snappy's size on float depth (27.9 vs 74.4 MB for two cpu-small folds)
        batches = [range(a, min(a + WRITE_BATCH, ep.num_frames)) for a in range(0, ep.num_frames, WRITE_BATCH)]
        first = _table(ep, batches[0], index, total, task_index, fps)
        with pq.ParquetWriter(path, first.schema, compression="zstd") as writer:
            writer.write_table(first)
            for batch in batches[1:]:
                writer.write_table(_table(ep, batch, index, total, task_index, fps))
        rows.append({"episode_index": index, "tasks": [ep.task], "length": ep.num_frames,
                     "data/chunk_index": chunk, "data/file_index": file, "dataset_from_index": total,
                     "dataset_to_index": total + ep.num_frames, "meta/episodes/chunk_index": 0,
                     "meta/episodes/file_index": 0})  # fmt: skip
        ours.append({"episode_index": index, **ep.info})
        sums[STATE_KEY].append(ep.state.reshape(-1, 8))
        sums[ACTION_KEY].append(ep.action.reshape(-1, 8))
        total += ep.num_frames
    if shape is None:
        raise LeRobotFormatError("nothing to export: no episodes")
    (out / "meta" / "episodes" / "chunk-000").mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows), out / _EPISODES_PATH)
    _write_tasks(out / "meta" / "tasks.parquet", tasks)
    features = _features(*shape)
    info = {
        "codebase_version": CODEBASE_VERSION, "robot_type": robot_type, "total_episodes": len(rows),
        "total_frames": total, "total_tasks": len(tasks), "chunks_size": CHUNKS_SIZE, "data_files_size_in_mb": 100,
        "video_files_size_in_mb": 200, "fps": fps, "splits": {"train": f"0:{len(rows)}"},
        "data_path": "data/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet", "video_path": None,
        "features": features,
    }  # fmt: skip
    (out / "meta" / "info.json").write_text(json.dumps(info, indent=2))
    stats = {key: _stats(np.concatenate(values)) for key, values in sums.items()}
    (out / "meta" / "stats.json").write_text(json.dumps(stats, indent=2))
    (out / INSTANT_FOLD_META).write_text(json.dumps(
        {"format": "instant_fold_lerobot", "version": 1, "frame": "camera_optical", "units": "m",
         "arm_order": list(ARM_NAMES), "events": {e.name: int(e) for e in KeyframeEvent}, "episodes": ours},
        indent=2, default=_json_default))  # fmt: skip
    return info


def _json_default(obj: Any) -> Any:
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if isinstance(obj, np.generic):
        return obj.item()
    raise TypeError(f"not JSON serialisable: {type(obj).__name__}")


def _write_tasks(path: Path, tasks: dict[str, int]) -> None:
    """tasks.parquet as pandas writes it (LeRobot reads it with pandas: task string = index)."""
    index = "__index_level_0__"
    pandas_meta = {
        "index_columns": [index],
        "column_indexes": [{"name": None, "field_name": None, "pandas_type": "unicode", "numpy_type": "object",
                            "metadata": {"encoding": "UTF-8"}}],
        "columns": [{"name": "task_index", "field_name": "task_index", "pandas_type": "int64", "numpy_type": "int64",
                     "metadata": None},
                    {"name": None, "field_name": index, "pandas_type": "unicode", "numpy_type": "object",
                     "metadata": None}],
        "attributes": {}, "creator": {"library": "pyarrow", "version": pa.__version__}, "pandas_version": "2.2.3",
    }  # fmt: skip
    table = pa.table({"task_index": pa.array(list(tasks.values()), pa.int64()), index: pa.array(list(tasks))})
    pq.write_table(table.replace_schema_metadata({"pandas": json.dumps(pandas_meta)}), path)


# ---------------------------------------------------------------------- reading back


def read_info(root: str | Path) -> dict[str, Any]:
    """info.json of a LeRobotDataset v3 folder, refused with one line when it is not one."""
    path = Path(root) / "meta" / "info.json"
    try:
        info = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise LeRobotFormatError(f"{root}: not a LeRobotDataset folder ({path}: {exc})") from None
    if not isinstance(info, dict) or info.get("codebase_version") != CODEBASE_VERSION:
        version = info.get("codebase_version") if isinstance(info, dict) else None
        raise LeRobotFormatError(f"{root}: LeRobotDataset {version!r}, only {CODEBASE_VERSION} is read")
    return info


def read_episode(root: str | Path, episode_index: int) -> LeRobotEpisode:
    """Episode `episode_index` of a LeRobotDataset v3 folder with this module's features; a damaged
    folder (truncated parquet, bad PNG, missing column) is refused with one line naming it."""
    root = Path(root)
    info = read_info(root)
    try:
        return _read_episode(root, info, episode_index)
    except LeRobotFormatError:
        raise
    except (pa.ArrowException, OSError, KeyError, ValueError) as exc:
        raise LeRobotFormatError(f"{root}: episode {episode_index} cannot be read ({exc})") from exc


def _read_episode(root: Path, info: dict[str, Any], episode_index: int) -> LeRobotEpisode:
    if not 0 <= episode_index < int(info["total_episodes"]):
        raise LeRobotFormatError(f"{root}: no episode {episode_index} (it has {info['total_episodes']})")
    needed = (IMAGE_KEY, DEPTH_KEY, MASK_KEY, STATE_KEY, INTRINSICS_KEY, KEYFRAME_KEY, EVENT_KEY, SOURCE_FRAME_KEY)
    missing = [key for key in needed if key not in info["features"]]
    if missing:
        raise LeRobotFormatError(f"{root}: features {missing} missing (a demonstration needs RGB-D, mask and events)")
    if info["features"][IMAGE_KEY]["dtype"] != "image":
        raise LeRobotFormatError(f"{root}: {IMAGE_KEY} is {info['features'][IMAGE_KEY]['dtype']}, only images are read")
    episodes = pq.read_table(root / _EPISODES_PATH).to_pylist()
    row = next((r for r in episodes if r["episode_index"] == episode_index), None)
    if row is None:
        raise LeRobotFormatError(f"{root}: episode {episode_index} missing from {_EPISODES_PATH}")
    path = root / info["data_path"].format(chunk_index=row["data/chunk_index"], file_index=row["data/file_index"])
    table = pq.read_table(path, filters=[("episode_index", "=", episode_index)])
    table = table.sort_by("frame_index")
    if table.num_rows != row["length"]:
        raise LeRobotFormatError(
            f"{path}: episode {episode_index} has {table.num_rows} frames, meta says {row['length']}"
        )
    h, w = info["features"][IMAGE_KEY]["shape"][:2]
    t = table.num_rows

    def flat(key: str, dtype: type, shape: tuple[int, ...]) -> np.ndarray:
        values = table.column(key).combine_chunks()
        while isinstance(values.type, (pa.ListType, pa.FixedSizeListType, pa.LargeListType)):
            values = values.flatten()
        return values.to_numpy(zero_copy_only=False).astype(dtype).reshape(shape)

    color = np.stack([np.asarray(Image.open(io.BytesIO(cell["bytes"])).convert("RGB"))
                      for cell in table.column(IMAGE_KEY).to_pylist()])  # fmt: skip
    if color.shape != (t, h, w, 3):
        raise LeRobotFormatError(f"{path}: images are {color.shape[1:]}, info.json says {(h, w, 3)}")
    tasks = pq.read_table(root / "meta" / "tasks.parquet").to_pylist()
    task_index = int(flat("task_index", np.int64, (t,))[0])
    task = next(
        (str(r.get("__index_level_0__", r.get("task", ""))) for r in tasks if r["task_index"] == task_index), ""
    )
    ours_path = root / INSTANT_FOLD_META
    ours = json.loads(ours_path.read_text())["episodes"] if ours_path.is_file() else []
    extra: dict[str, Any] = next((e for e in ours if e.get("episode_index") == episode_index), {})
    return LeRobotEpisode(
        color=color, depth=flat(DEPTH_KEY, np.float32, (t, h, w)), mask=flat(MASK_KEY, np.uint8, (t, h, w)) > 0,
        intrinsics=flat(INTRINSICS_KEY, np.float32, (t, 3, 3))[0], state=flat(STATE_KEY, np.float32, (t, 2, 4)),
        action=flat(ACTION_KEY, np.float32, (t, 2, 4)), keyframe=flat(KEYFRAME_KEY, bool, (t,)),
        events=flat(EVENT_KEY, np.uint8, (t, 2)), source_frame=flat(SOURCE_FRAME_KEY, np.int64, (t,)), task=task,
        info={k: v for k, v in extra.items() if k != "episode_index"},
    )  # fmt: skip


def to_demonstration(ep: LeRobotEpisode) -> Demonstration:
    """The keyframes of an episode as the policy server's `Demonstration` (validated).

    A flagged frame is a keyframe: its state the keypose, its images the observation. A recorded
    demonstration's episode (`recording_frames`) names its keyframes itself, with their keyposes
    and the frames whose images they show (a grasp shows the cloth before the hand came), and
    those are taken."""
    where = f"episode {ep.info.get('name', '')!r}"
    recorded = ep.info.get("keyframes")
    if recorded is None:
        frames = images = np.flatnonzero(ep.keyframe)
        if frames.size == 0:
            raise LeRobotFormatError(f"{where}: no frame is flagged as a keyframe")
        keypose, events = ep.state[frames], ep.events[frames]
    else:
        try:
            frames = np.asarray(recorded["frame_index"], np.int64).reshape(-1)
            images = np.asarray(recorded["image_frames"], np.int64).reshape(frames.size)
            keypose = np.asarray(recorded["keypose"], np.float32).reshape(frames.size, 2, 4)
            events = np.asarray(recorded["events"], np.uint8).reshape(frames.size, 2)
        except (KeyError, TypeError, ValueError) as exc:
            raise LeRobotFormatError(f"{where}: bad keyframes in {INSTANT_FOLD_META} ({exc})") from None
        both = np.concatenate([frames, images])
        if frames.size == 0 or not ((both >= 0) & (both < ep.num_frames)).all():
            raise LeRobotFormatError(f"{where}: keyframes {both.tolist()} of {INSTANT_FOLD_META} outside its "
                                     f"{ep.num_frames} frames")  # fmt: skip
    return Demonstration(
        color=ep.color[images], depth=ep.depth[images], mask=ep.mask[images],
        intrinsics=ep.intrinsics.astype(np.float32), keypose=keypose.astype(np.float32),
        events=events.astype(np.uint8), frame_index=ep.source_frame[frames].astype(np.int32),
        name=str(ep.info.get("name", "")), mode=str(ep.info.get("mode", ep.task)),
        description=str(ep.info.get("description", "")), meta=dict(ep.info.get("meta", {})),
    ).validate()  # fmt: skip


def iter_store_episodes(store: EpisodeStore, names: Iterable[str]) -> Iterator[LeRobotEpisode]:
    """Episodes of an `EpisodeStore`, read one at a time (a store may not fit in memory)."""
    for name in names:
        yield episode_frames(store.read(name), name)
