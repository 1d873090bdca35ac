"""Correspondence probe and PCA visualisation of cloth-token features (paper appendix B).

The probe measures how well features track cloth points: for each query token of a source
frame, the k most cosine-similar tokens of a target frame predict its 3D position by
similarity-weighted averaging, compared with the ground truth: the target-frame position of the
particle nearest to the query (intra- and cross-trajectory, same cloth), or of the same semantic
keypoint (cross-cloth, where particle ids are not shared). Reported: mean error (cm) with its
standard deviation, PCK@2 cm and PCK@5 cm (%).
"""

from __future__ import annotations

import itertools
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from instant_fold_core.dataset.filtering import motion_filter
from instant_fold_core.dataset.schema import Episode
from instant_fold_core.plotting import save_figure

from .data import load_frames
from .losses import assign_tokens_to_particles, keypoint_features
from .modeling import ClothEncoder


@dataclass
class EncodedTrajectory:
    """Tokens of a trajectory's probed frames plus the ground truth they are scored against."""

    cloth: str
    positions: torch.Tensor  # [T, N, 3]
    features: torch.Tensor  # [T, N, D], L2-normalised
    valid: torch.Tensor  # [T, N]
    particles: torch.Tensor  # [T, M, 3]
    particle_visible: torch.Tensor  # [T, M]
    keypoints: torch.Tensor  # [T, K, 3]
    keypoint_visible: torch.Tensor  # [T, K]
    pixels: torch.Tensor | None = None


@torch.no_grad()
def encode_trajectory(
    encoder: ClothEncoder, episode: Episode, max_frames: int = 15, batch: int = 16
) -> EncodedTrajectory:
    """Tokenize the motion-filtered frames of an episode (FPS from index 0: deterministic)."""
    frames = motion_filter(episode.particles, max_frames=max_frames)
    data = load_frames(episode, frames, encoder.config.image_size)
    device = next(encoder.parameters()).device
    pos, feat, valid = [], [], []
    for i in range(0, len(frames), batch):
        sl = slice(i, i + batch)
        tokens = encoder(
            data["rgb"][sl].to(device),
            data["depth"][sl].to(device),
            data["mask"][sl].to(device),
            data["intrinsics"][sl].to(device),
            deterministic=True,
        )
        pos.append(tokens.positions.cpu())
        feat.append(F.normalize(tokens.features.float(), dim=-1).cpu())
        valid.append(tokens.valid.cpu())
    return EncodedTrajectory(
        str(episode.meta.get("garment_id")),
        torch.cat(pos),
        torch.cat(feat),
        torch.cat(valid),
        data["particles"],
        data["particle_visible"],
        data["keypoints"],
        data["keypoint_visible"],
    )


def knn_predict(
    query: torch.Tensor, feat: torch.Tensor, pos: torch.Tensor, valid: torch.Tensor, k: int
) -> torch.Tensor:
    """Similarity-weighted mean position of the k most cosine-similar valid target tokens."""
    sim = (query @ feat.T).masked_fill(~valid[None, :], -2.0)
    top, idx = sim.topk(min(k, int(valid.sum())), dim=1)
    w = top.clamp_min(0) + 1e-6
    return (w[..., None] * pos[idx]).sum(1) / w.sum(1, keepdim=True)


def particle_correspondence_errors(
    src: EncodedTrajectory, s: int, dst: EncodedTrajectory, t: int, k: int
) -> torch.Tensor:
    """Errors (m) of source-frame tokens predicted in the target frame, ground truth = target
    position of each token's nearest visible source particle (skipped when hidden in the target)."""
    assign, _ = assign_tokens_to_particles(
        src.positions[s : s + 1], src.particles[s : s + 1], src.particle_visible[s : s + 1]
    )
    a = assign[0]
    ok = src.valid[s] & (a >= 0)
    ok = ok & dst.particle_visible[t][a.clamp_min(0)]
    if not ok.any():
        return torch.empty(0)
    pred = knn_predict(src.features[s][ok], dst.features[t], dst.positions[t], dst.valid[t], k)
    return torch.linalg.norm(pred - dst.particles[t][a[ok]], dim=-1)


def keypoint_correspondence_errors(
    src: EncodedTrajectory, s: int, dst: EncodedTrajectory, t: int, k: int, radius: float
) -> torch.Tensor:
    """Errors (m) of source keypoint features (from nearby tokens) predicted in the target frame
    against the target's same keypoint; keypoints hidden in either frame are skipped."""
    feat, ok = keypoint_features(
        src.positions[s : s + 1],
        src.features[s : s + 1],
        src.valid[s : s + 1],
        src.keypoints[s : s + 1],
        src.keypoint_visible[s : s + 1],
        radius,
    )
    ok = ok[0] & dst.keypoint_visible[t]
    if not ok.any():
        return torch.empty(0)
    pred = knn_predict(feat[0][ok], dst.features[t], dst.positions[t], dst.valid[t], k)
    return torch.linalg.norm(pred - dst.keypoints[t][ok], dim=-1)


def _summary(errors: list[torch.Tensor]) -> dict[str, float]:
    e = torch.cat(errors) if errors else torch.empty(0)
    if e.numel() == 0:
        return {"err_cm": float("nan"), "err_std_cm": float("nan"), "pck2": float("nan"), "pck5": float("nan"), "n": 0}
    cm = e * 100
    return {
        "err_cm": float(cm.mean()),
        "err_std_cm": float(cm.std()) if cm.numel() > 1 else 0.0,
        "pck2": float((cm < 2).float().mean() * 100),
        "pck5": float((cm < 5).float().mean() * 100),
        "n": int(cm.numel()),
    }


def correspondence_probe(
    encoder: ClothEncoder,
    episodes: Sequence[Episode],
    k: int = 5,
    max_pairs: int = 200,
    keypoint_radius: float = 0.05,
    seed: int = 0,
) -> dict[str, dict]:
    """Intra-trajectory, cross-trajectory and cross-cloth correspondence metrics.

    Frame pairs: every ordered pair within a trajectory; for trajectory pairs (same cloth, or
    different cloths) frames are paired by index. At most `max_pairs` random pairs per category.
    """
    encoded = [encode_trajectory(encoder, ep) for ep in episodes]
    rng = np.random.default_rng(seed)
    pairs: dict[str, list] = defaultdict(list)
    for i, tr in enumerate(encoded):
        n = tr.positions.shape[0]
        pairs["intra_trajectory"] += [(i, s, i, t) for s, t in itertools.permutations(range(n), 2)]
    for i, j in itertools.permutations(range(len(encoded)), 2):
        n = min(encoded[i].positions.shape[0], encoded[j].positions.shape[0])
        key = "cross_trajectory" if encoded[i].cloth == encoded[j].cloth else "cross_cloth"
        pairs[key] += [(i, s, j, s) for s in range(n)]
    results = {}
    for key in ("intra_trajectory", "cross_trajectory", "cross_cloth"):
        chosen = pairs[key]
        if len(chosen) > max_pairs:
            chosen = [chosen[x] for x in rng.choice(len(chosen), max_pairs, replace=False)]
        if key == "cross_cloth":
            errs = [
                keypoint_correspondence_errors(encoded[i], s, encoded[j], t, k, keypoint_radius)
                for i, s, j, t in chosen
            ]
        else:
            errs = [particle_correspondence_errors(encoded[i], s, encoded[j], t, k) for i, s, j, t in chosen]
        results[key] = _summary(errs)
    return results


def format_probe_table(rows: dict[str, dict[str, dict]]) -> str:
    """Markdown table: one row per model, Err/PCK@2/PCK@5 per category."""
    cats = ("intra_trajectory", "cross_trajectory", "cross_cloth")
    head = "| model | " + " | ".join(f"{c} err cm / PCK@2 / PCK@5" for c in cats) + " |"
    lines = [head, "|---" * (len(cats) + 1) + "|"]
    for name, res in rows.items():
        cells = [f"{res[c]['err_cm']:.2f} / {res[c]['pck2']:.1f} / {res[c]['pck5']:.1f}" for c in cats]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


@torch.no_grad()
def pca_colours(features: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
    """Shared PCA basis over all valid tokens -> RGB in [0,1] per token ([T,N,D] -> [T,N,3])."""
    x = features[valid].double()
    mean = x.mean(0)
    _, _, v = torch.linalg.svd(x - mean, full_matrices=False)
    proj = (features.double() - mean) @ v[:3].T
    lo = torch.quantile(proj[valid], 0.02, dim=0)
    hi = torch.quantile(proj[valid], 0.98, dim=0)
    return ((proj - lo) / (hi - lo + 1e-9)).clamp(0, 1).float()


@torch.no_grad()
def pca_figure(models: dict[str, ClothEncoder], episode: Episode, path: str | Path, max_frames: int = 6) -> Path:
    """PNG: the trajectory's RGB frames, then per model the token features coloured by a PCA basis
    shared across the frames, painted back onto the cloth (each cloth pixel takes the colour of
    its nearest token in the image)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from instant_fold_core.geometry import project_points

    frames = motion_filter(episode.particles, max_frames=max_frames)
    fig, axes = plt.subplots(
        len(models) + 1, len(frames), figsize=(2.2 * len(frames), 2.3 * (len(models) + 1)), squeeze=False
    )
    for col, f in enumerate(frames):
        axes[0, col].imshow(episode.rgb[f])
        axes[0, col].set_title(f"frame {f}", fontsize=8)
    for row, (name, tok) in enumerate(models.items(), start=1):
        enc = encode_trajectory(tok, episode, max_frames=max_frames)
        colours = pca_colours(enc.features, enc.valid)
        data = load_frames(episode, frames, tok.config.image_size)
        size = tok.config.image_size
        for col in range(len(frames)):
            img = np.ones((size, size, 3), dtype=np.float32)
            mask = data["mask"][col]
            ys, xs = torch.nonzero(mask, as_tuple=True)
            uv = project_points(enc.positions[col : col + 1], data["intrinsics"][col : col + 1])[0]
            d = (torch.stack([xs, ys], 1).float()[:, None, :] - uv[None]).norm(dim=-1)
            d = d.masked_fill(~enc.valid[col][None, :], float("inf"))
            img[ys.numpy(), xs.numpy()] = colours[col][d.argmin(1)].numpy()
            axes[row, col].imshow(img)
        axes[row, 0].set_ylabel(name, fontsize=9)
    for ax in axes.flat:
        ax.set_xticks([])
        ax.set_yticks([])
    return save_figure(fig, path)
