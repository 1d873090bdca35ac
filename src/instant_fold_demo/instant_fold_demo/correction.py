"""The keyframe correction page: a small local web app (FastAPI + one canvas page) where a person
inspects the extracted keyframes and fixes wrong or missing interaction points (paper, appendix
E: "we manually inspect and correct any incorrect or missing interaction points by clicking on
cloth keypoints in the keyframes").

The page shows every keyframe's image with both arms' points; a point can be dragged, an arm's
event changed, a keyframe duplicated (to add an event), deleted or moved. On save the server
(`apply_edits`, plain Python) snaps each moved point onto the nearest cloth pixel of its
keyframe, lifts it to 3D with that keyframe's depth, validates the whole sequence (per arm,
grasps and releases alternate starting with a grasp; the last keyframe is TERMINAL; positions
finite; grasps on the cloth) and only then writes: the previous file is kept as
`<name>.v<N>.safetensors`, so every save is a new version, and the events JSON beside it
(`extract`'s evidence) is rewritten to the corrected events, its previous version kept the same
way. Serves on 127.0.0.1 by default.

Saves are versioned against what the page loaded: the page sends the version (a digest of the
file) it shows, and a save from a page that is behind the file (another tab, another program)
is refused, not written over the newer file. Saves are serialised (a lock in the process, a lock
on the folder across processes), the previous file is kept by a hard link before the new one
replaces it (the demonstration file never disappears), and files get the user's umask.

    python -m instant_fold_demo.correction demo.safetensors [--port 8765]
"""

from __future__ import annotations

import argparse
import fcntl
import hashlib
import io
import json
import os
import shutil
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
from fastapi import FastAPI, HTTPException
from fastapi.responses import FileResponse, Response
from pydantic import BaseModel

from instant_fold_core.contracts import KeyframeEvent
from instant_fold_core.demonstration import Demonstration, DemonstrationError, image_frames, load_demonstration
from instant_fold_demo.files import events_path, user_file_mode
from instant_fold_demo.hands import backproject, depth_at, project
from instant_fold_demo.keyframes import ARMS

STATIC = Path(__file__).parent / "static"
EVENT_NAMES = [e.name.lower() for e in KeyframeEvent]


class KeyframeEdit(BaseModel):
    """One keyframe as the page sends it back: which original keyframe it shows, per-arm pixel and event."""

    source: int  # index of the original keyframe whose image/depth/mask it shows
    pixels: list[list[float]]  # [2][2] (u, v) per arm
    events: list[str]  # [2] event names
    moved: list[bool]  # [2] whether the page moved the arm's point (else the keypose is kept)


class Edits(BaseModel):
    version: str  # the file version the page loaded (`file_version`)
    keyframes: list[KeyframeEdit]


def file_version(path: Path) -> str:
    """A version of the file on disk: a digest of its bytes (a save changes them, a copy does not)."""
    return hashlib.sha256(path.read_bytes()).hexdigest()[:16]


def keyframes_json(demo: Demonstration, version: str = "") -> dict:
    """What the page draws: per keyframe, arm pixels (keyposes projected; `in_view` false for a
    point outside the image, such as home, which the page pins to the border), events, openness,
    the event's frame and the frame whose image is shown."""
    k = demo.intrinsics
    h, w = demo.color.shape[1:3]
    shown = image_frames(demo)
    keyframes = []
    for i in range(demo.num_keyframes):
        pixels = [[round(float(c), 2) for c in project(demo.keypose[i, a, :3], k)] for a in (0, 1)]
        keyframes.append(
            {
                "source": i,
                "frame_index": int(demo.frame_index[i]),
                "image_frame": shown[i],
                "events": [EVENT_NAMES[int(e)] for e in demo.events[i]],
                "pixels": pixels,
                "in_view": [bool(0 <= u < w and 0 <= v < h) for u, v in pixels],
                "openness": [float(demo.keypose[i, a, 3]) for a in (0, 1)],
                "moved": [False, False],
            }
        )
    return {
        "name": demo.name,
        "version": version,
        "width": int(w),
        "height": int(h),
        "event_names": EVENT_NAMES,
        "keyframes": keyframes,
    }


def snap_to_cloth(mask: np.ndarray, depth: np.ndarray, u: float, v: float) -> tuple[float, float]:
    """The nearest cloth pixel with valid depth to (u, v) (itself when it is one)."""
    ys, xs = np.nonzero(mask & (depth > 0))
    if xs.size == 0:
        raise DemonstrationError("keyframe has no cloth pixel with valid depth")
    j = int(np.argmin((xs - u) ** 2 + (ys - v) ** 2))
    return float(xs[j]), float(ys[j])


def validate_events(events: np.ndarray) -> None:
    """Per arm: grasps and releases alternate, starting with a grasp and ending released; the last
    keyframe (and only it) is TERMINAL."""
    if events.shape[0] < 2:
        raise DemonstrationError("a demonstration needs at least a start and a terminal keyframe")
    for arm, name in enumerate(("left", "right")):
        closed = False
        for i, e in enumerate(events[:, arm]):
            if e == KeyframeEvent.GRASP:
                if closed:
                    raise DemonstrationError(f"keyframe {i}: {name} arm grasps again without releasing first")
                closed = True
            elif e == KeyframeEvent.RELEASE:
                if not closed:
                    raise DemonstrationError(f"keyframe {i}: {name} arm releases without a grasp before it")
                closed = False
            elif e == KeyframeEvent.TERMINAL and i != len(events) - 1:
                raise DemonstrationError(f"keyframe {i}: TERMINAL is only for the last keyframe")
        if closed:
            raise DemonstrationError(f"{name} arm never releases its last grasp")
        if events[-1, arm] != KeyframeEvent.TERMINAL:
            raise DemonstrationError(f"the last keyframe must be TERMINAL for the {name} arm")


def apply_edits(demo: Demonstration, edits: Edits) -> Demonstration:
    """The corrected demonstration (validated), or a `DemonstrationError` saying what is wrong."""
    if not edits.keyframes:
        raise DemonstrationError("no keyframes left")
    sources = [e.source for e in edits.keyframes]
    if any(not 0 <= s < demo.num_keyframes for s in sources):
        raise DemonstrationError(f"unknown source keyframe in {sources}")
    keypose = demo.keypose[sources].copy()
    events = np.zeros((len(sources), 2), np.uint8)
    for i, edit in enumerate(edits.keyframes):
        if len(edit.pixels) != 2 or len(edit.events) != 2 or len(edit.moved) != 2:
            raise DemonstrationError(f"keyframe {i}: expected two arms")
        for arm in (0, 1):
            if edit.events[arm] not in EVENT_NAMES:
                raise DemonstrationError(f"keyframe {i}: unknown event {edit.events[arm]!r}")
            events[i, arm] = EVENT_NAMES.index(edit.events[arm])
            if not edit.moved[arm]:
                continue
            u, v = edit.pixels[arm]
            if not (np.isfinite(u) and np.isfinite(v)):
                raise DemonstrationError(f"keyframe {i}: point of arm {arm} is not finite")
            mask, depth = demo.mask[edit.source], demo.depth[edit.source]
            u, v = snap_to_cloth(mask, depth, u, v)
            z = depth_at(depth, u, v, 5, mask)
            keypose[i, arm, :3] = backproject(u, v, z, demo.intrinsics)
    # openness follows the events: closed after a grasp until the release
    for arm in (0, 1):
        closed = False
        for i in range(len(sources)):
            closed = {KeyframeEvent.GRASP: True, KeyframeEvent.RELEASE: False}.get(
                KeyframeEvent(events[i, arm]), closed
            )
            keypose[i, arm, 3] = 0.0 if closed else 1.0
    validate_events(events)
    if not np.isfinite(keypose).all():
        raise DemonstrationError("a keypose is not finite")
    for i, edit in enumerate(edits.keyframes):
        for arm in (0, 1):
            if events[i, arm] == KeyframeEvent.GRASP:
                u, v = project(keypose[i, arm, :3], demo.intrinsics)
                x, y = round(float(u)), round(float(v))
                h, w = demo.mask.shape[1:]
                if not (
                    0 <= y < h
                    and 0 <= x < w
                    and demo.mask[edit.source][max(0, y - 2) : y + 3, max(0, x - 2) : x + 3].any()
                ):
                    raise DemonstrationError(
                        f"keyframe {i}: the {('left', 'right')[arm]} arm's grasp is not on the cloth"
                    )
    return replace(
        demo,
        color=demo.color[sources],
        depth=demo.depth[sources],
        mask=demo.mask[sources],
        keypose=keypose.astype(np.float32),
        events=events,
        frame_index=demo.frame_index[sources],
        meta={**demo.meta, "corrected": True, "image_frames": [image_frames(demo)[s] for s in sources]},
    ).validate()


class StaleVersionError(DemonstrationError):
    """The page's edits start from another version of the file than the one on disk."""


@contextmanager
def folder_lock(folder: Path) -> Iterator[None]:
    """An exclusive lock on a folder (flock on its descriptor), held by one save at a time across
    processes (two correction pages, or a page and a script, on one file)."""
    fd = os.open(folder, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _link_or_copy(src: Path, dst: Path) -> None:
    """Keep `src` as `dst` (which must not exist: FileExistsError): a hard link, atomic and
    instant; on a file system without hard links, an exclusive copy."""
    try:
        os.link(src, dst)
    except FileExistsError:
        raise
    except OSError:
        with src.open("rb") as source, dst.open("xb") as target:
            shutil.copyfileobj(source, target)


def _keep(path: Path) -> Path:
    """Keep `path` as the first free `<stem>.v<N>.safetensors` and return that path."""
    stem = path.name.removesuffix(".safetensors")
    n = 1
    while True:
        kept = path.with_name(f"{stem}.v{n}.safetensors")
        try:
            _link_or_copy(path, kept)
            return kept
        except FileExistsError:
            n += 1


def corrected_events(demo: Demonstration, previous: list[dict]) -> list[dict]:
    """The events of a corrected demonstration as the events JSON lists them; an event that the
    extraction found (same arm, kind and position within 1 mm) keeps its evidence."""
    shown = image_frames(demo)
    out = []
    for i in range(demo.num_keyframes):
        for arm in (0, 1):
            kind = {KeyframeEvent.GRASP: "grasp", KeyframeEvent.RELEASE: "release"}.get(
                KeyframeEvent(demo.events[i, arm])
            )
            if kind is None:
                continue
            position = [round(float(c), 5) for c in demo.keypose[i, arm, :3]]
            found = next(
                (
                    e
                    for e in previous
                    if e.get("arm") == ARMS[arm]
                    and e.get("kind") == kind
                    and np.allclose(e.get("position", [np.nan] * 3), position, atol=1e-3)
                ),
                None,
            )
            evidence = found["evidence"] if found else {"position_from": "set on the correction page"}
            out.append(
                {
                    "arm": ARMS[arm],
                    "kind": kind,
                    "frame": int(demo.frame_index[i]),
                    "image_frame": shown[i],
                    "pixel": [round(float(c), 2) for c in project(demo.keypose[i, arm, :3], demo.intrinsics)],
                    "position": position,
                    "evidence": evidence,
                }
            )
    return out


def save_versioned(demo: Demonstration, path: Path, version: str | None = None) -> Path | None:
    """Write `demo` to `path`, keeping the existing file as the next `<stem>.v<N>.safetensors`
    (and the events JSON beside it as `<stem>.v<N>.events.json`, rewritten to the new events).

    With `version`, refuse (`StaleVersionError`) when the file on disk is not that version."""
    with folder_lock(path.parent):
        kept = None
        if path.exists():
            if version is not None and file_version(path) != version:
                raise StaleVersionError(
                    f"{path.name} changed since this page loaded it (saved from another tab or program): "
                    "reload the page to see the newer version, then correct it again"
                )
            kept = _keep(path)
        elif version:
            raise StaleVersionError(f"{path} no longer exists: it was moved or deleted since the page loaded it")
        demo.save(path)
        path.chmod(user_file_mode())
        report_path = events_path(path)
        if report_path.is_file():
            report = json.loads(report_path.read_text())
            if kept is not None and not events_path(kept).exists():
                _link_or_copy(report_path, events_path(kept))
            report["events"] = corrected_events(demo, report.get("events", []))
            report["corrected"] = {"previous": kept.name if kept else None, "keyframes": demo.num_keyframes}
            tmp = report_path.with_name(report_path.name + ".tmp")
            tmp.write_text(json.dumps(report, indent=2))
            tmp.chmod(user_file_mode())
            tmp.replace(report_path)
        return kept


def create_app(path: str | Path) -> FastAPI:
    """The correction app for one demonstration file (loaded now: a broken file fails here)."""
    path = Path(path)
    state: dict[str, Any] = {"demo": load_demonstration(path), "version": file_version(path)}
    lock = threading.Lock()  # FastAPI runs these handlers in a thread pool
    app = FastAPI(title="Instant-Fold keyframe correction")

    def current() -> tuple[Demonstration, str]:
        """The file as it is on disk now (another program may have saved it)."""
        with lock:
            version = file_version(path)
            if version != state["version"]:
                state["demo"], state["version"] = load_demonstration(path), version
            return state["demo"], version

    @app.get("/")
    def page() -> FileResponse:
        return FileResponse(STATIC / "correction.html")

    @app.get("/api/demo")
    def demo_json() -> dict:
        demo, version = current()
        return keyframes_json(demo, version)

    @app.get("/api/image/{index}.png")
    def image(index: int, version: str = "") -> Response:
        from PIL import Image

        demo, now = current()
        if version and version != now:
            raise HTTPException(409, "the demonstration was saved since: reload the page")
        if not 0 <= index < demo.num_keyframes:
            raise HTTPException(404, f"no keyframe {index}")
        rgb = demo.color[index].astype(np.float32)
        rgb[demo.mask[index]] = 0.75 * rgb[demo.mask[index]] + 0.25 * np.array([0, 255, 0])  # cloth tinted
        buffer = io.BytesIO()
        Image.fromarray(rgb.astype(np.uint8)).save(buffer, format="PNG")
        return Response(buffer.getvalue(), media_type="image/png")

    @app.post("/api/save")
    def save(edits: Edits) -> dict:
        with lock:
            try:
                if edits.version != state["version"]:  # the edits index this version's keyframes
                    raise StaleVersionError(
                        "this page shows an older version of the demonstration (it was saved since, "
                        "from another tab or program): reload the page, then correct it again"
                    )
                corrected = apply_edits(state["demo"], edits)
                kept = save_versioned(corrected, path, edits.version)
            except StaleVersionError as exc:
                raise HTTPException(409, str(exc)) from exc
            except DemonstrationError as exc:
                raise HTTPException(422, str(exc)) from exc
            except OSError as exc:
                raise HTTPException(507, f"not written ({exc.strerror or exc}); the file on disk is unchanged") from exc
            state["demo"], state["version"] = corrected, file_version(path)
        return {
            "saved": str(path),
            "previous": str(kept) if kept else None,
            "keyframes": corrected.num_keyframes,
            "version": state["version"],
        }

    return app


def serve(path: str | Path, host: str = "127.0.0.1", port: int = 8765) -> None:
    import uvicorn

    print(f"correction page for {path}: http://{host}:{port}/ (Ctrl-C to stop)")
    uvicorn.run(create_app(path), host=host, port=port, log_level="warning")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m instant_fold_demo.correction", description=__doc__.splitlines()[0])
    p.add_argument("demo", type=Path)
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8765)
    args = p.parse_args(argv)
    try:
        serve(args.demo, args.host, args.port)
    except DemonstrationError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
