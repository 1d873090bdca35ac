"""Episode viewer: an MP4 or GIF of the rollout and a PNG strip of its keyframes with the mode name,
or a Rerun recording (`.rrd`) to look at the images, the cloth in 3D and the arms together.

python -m instant_fold_sim.viewer --store data/sim.zarr --episode NAME --out out/NAME [--format mp4|gif|rrd]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw

from instant_fold_core.contracts import gripper_closed
from instant_fold_core.dataset.schema import Episode
from instant_fold_core.dataset.zarr_store import EpisodeStore, StoreError

KEYPOINT_COLOURS = [
    (255, 0, 0),
    (0, 160, 255),
    (255, 160, 0),
    (0, 200, 80),
    (200, 0, 200),
    (0, 220, 220),
    (255, 255, 255),
]


def _project(ep: Episode, points: np.ndarray) -> np.ndarray:
    k = ep.intrinsics.astype(np.float64)
    z = np.maximum(points[..., 2], 1e-6)
    return np.stack([k[0, 0] * points[..., 0] / z + k[0, 2], k[1, 1] * points[..., 1] / z + k[1, 2]], -1)


def annotate(ep: Episode, t: int, label: str | None = None) -> Image.Image:
    """Frame `t` with keypoints, gripper positions (filled = closed) and an optional label."""
    img = Image.fromarray(ep.rgb[t]).convert("RGB")
    draw = ImageDraw.Draw(img)
    for (u, v), colour in zip(_project(ep, ep.keypoints[t].astype(np.float64)), KEYPOINT_COLOURS, strict=True):
        draw.ellipse([u - 3, v - 3, u + 3, v + 3], outline=colour, width=2)
    for arm, (u, v) in enumerate(_project(ep, ep.arm_state[t, :, :3].astype(np.float64))):
        closed = gripper_closed(ep.arm_state[t, arm, 3])
        box = [u - 5, v - 5, u + 5, v + 5]
        draw.rectangle(box, outline=(255, 255, 0), fill=(255, 255, 0) if closed else None, width=2)
    if label:
        draw.rectangle([0, 0, img.width, 12], fill=(0, 0, 0))
        draw.text((2, 0), label, fill=(255, 255, 255))
    return img


def keyframe_strip(ep: Episode, path: str | Path, max_panels: int = 16) -> Path:
    """PNG strip of the keyframes, the mode name and variant in the first panel; at most
    `max_panels` of them, evenly spread with the first and the last kept (a hesitant policy
    rollout can have hundreds of gripper events)."""
    title = f"{ep.meta.get('mode', '?')} [{ep.meta.get('variant', '')}]"
    keyframes = ep.keyframes
    if len(keyframes) > max_panels:
        keyframes = keyframes[np.unique(np.linspace(0, len(keyframes) - 1, max_panels).round().astype(int))]
    panels = [annotate(ep, int(t), title if i == 0 else f"t={int(t)}") for i, t in enumerate(keyframes)]
    strip = Image.new("RGB", (sum(p.width for p in panels), panels[0].height))
    x = 0
    for p in panels:
        strip.paste(p, (x, 0))
        x += p.width
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    strip.save(path)
    return path


def video(ep: Episode, path: str | Path, fps: float | None = None) -> Path:
    """MP4 (needs imageio-ffmpeg) or GIF, chosen by the file suffix."""
    import imageio.v3 as iio

    fps = fps or float(ep.meta.get("fps", 20.0))
    title = f"{ep.meta.get('mode', '?')} [{ep.meta.get('variant', '')}]"
    frames = np.stack([np.asarray(annotate(ep, t, title)) for t in range(ep.num_frames)])
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.suffix == ".gif":
        iio.imwrite(path, frames, duration=1000 / fps, loop=0)
    else:
        iio.imwrite(path, frames, fps=fps, codec="libx264", macro_block_size=1)
    return path


def recording(ep: Episode, path: str | Path, fps: float | None = None) -> Path:
    """A Rerun recording of the episode, on a `frame` timeline, everything in the camera frame.

    Per frame: the colour image (JPEG), the depth (millimetres) and the cloth mask under a pinhole
    camera with the episode's intrinsics; the cloth particles (visible ones bright), the semantic
    keypoints and both arms' positions (bright yellow = closed) and targets (orange) in 3D; the gripper
    openness as time series. Once: each arm's whole path, and a log line per keyframe with its
    events, so the viewer shows where the demonstration's keyframes are.
    """
    import rerun as rr

    from instant_fold_core.contracts import KeyframeEvent
    from instant_fold_core.dataset.schema import ARM_NAMES, KEYPOINT_NAMES
    from instant_fold_core.demonstration import from_episode

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    h, w = ep.rgb.shape[1:3]
    fps = fps or float(ep.meta.get("fps", 20.0))
    events = from_episode(ep).events if ep.keyframes.size else np.zeros((0, 2), np.uint8)
    rec = rr.RecordingStream("instant_fold", recording_id=str(ep.meta.get("episode_id", "")) or None)
    rec.save(path)
    rec.log("camera", rr.ViewCoordinates.RDF, static=True)  # camera optical frame: x right, y down, z forward
    rec.log("camera", rr.Pinhole(image_from_camera=ep.intrinsics, resolution=[w, h]), static=True)
    paths = rr.LineStrips3D([ep.arm_state[:, arm, :3] for arm in range(2)], labels=list(ARM_NAMES))
    rec.log("arms/path", paths, static=True)
    keyframes = {int(t): e for t, e in zip(ep.keyframes, events, strict=True)}
    for t in range(ep.num_frames):
        rec.set_time("frame", sequence=t)
        rec.set_time("time", duration=t / fps)
        rec.log("camera/rgb", rr.Image(ep.rgb[t]).compress(jpeg_quality=90))
        rec.log("camera/depth", rr.DepthImage(np.round(ep.depth[t] * 1000).astype(np.uint16), meter=1000.0))
        rec.log("camera/mask", rr.SegmentationImage(ep.mask[t].astype(np.uint8)))
        if ep.particles.shape[1]:
            bright = np.where(ep.particle_visible[t, :, None], [[90, 200, 255]], [[40, 70, 90]]).astype(np.uint8)
            rec.log("cloth/particles", rr.Points3D(ep.particles[t], colors=bright, radii=0.004))
        rec.log(
            "cloth/keypoints",
            rr.Points3D(ep.keypoints[t], colors=KEYPOINT_COLOURS, labels=list(KEYPOINT_NAMES), radii=0.008),
        )
        closed = gripper_closed(ep.arm_state[t, :, 3])
        colors = [(255, 255, 0) if c else (120, 120, 0) for c in closed]
        rec.log("arms/state", rr.Points3D(ep.arm_state[t, :, :3], labels=list(ARM_NAMES), radii=0.015, colors=colors))
        rec.log("arms/target", rr.Points3D(ep.action[t, :, :3], radii=0.008, colors=[(255, 128, 0)] * 2))
        for arm, name in enumerate(ARM_NAMES):
            rec.log(f"openness/{name}", rr.Scalars(float(ep.arm_state[t, arm, 3])))
        if t in keyframes:
            names = ", ".join(
                f"{arm} {KeyframeEvent(int(e)).name}" for arm, e in zip(ARM_NAMES, keyframes[t], strict=True)
            )
            rec.log("keyframes", rr.TextLog(f"keyframe at frame {t}: {names}"))
    rec.flush()
    rec.disconnect()
    return path


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m instant_fold_sim.viewer", description=__doc__)
    p.add_argument("--store", required=True)
    p.add_argument("--episode", default=None, help="episode name (default: the first)")
    p.add_argument(
        "--out", required=True, help="output prefix: writes <out>.mp4|gif and <out>_keyframes.png, or <out>.rrd"
    )
    p.add_argument("--format", choices=["mp4", "gif", "rrd"], default="mp4", help="rrd: a Rerun recording")
    args = p.parse_args(argv)
    try:
        store = EpisodeStore(args.store)
        names = store.names()
        if not names:
            raise StoreError(f"{args.store}: no episodes")
        ep = store.read(args.episode or names[0])
    except StoreError as exc:  # a missing, empty or foreign store, an unknown or damaged episode
        print(f"viewer: {exc}", file=sys.stderr)
        return 1
    if args.format == "rrd":
        print(recording(ep, f"{args.out}.rrd"))
        return 0
    print(video(ep, f"{args.out}.{args.format}"))
    print(keyframe_strip(ep, f"{args.out}_keyframes.png"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
