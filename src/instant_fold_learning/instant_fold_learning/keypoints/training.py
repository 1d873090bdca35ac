"""Training and evaluation of the keypoint detector on tokenised simulated episodes.

The frames are those of episodes whose token files carry keypoints (`TokenizedEpisode.keypoints`,
written by the tokeniser for simulated episodes), every `frame_stride`-th; a batch draws frames
uniformly, and with probability `se2_prob` moves a frame's tokens and keypoints by the policy's
SE(2) augmentation (`PlanarTransform`), so the detector reads parts of a garment, not places in
the image. One process (the detector is small: minutes on one core); the run directory follows the
training scaffold (`trainer.py`: `train_state/` to resume from, `log.jsonl`), and the random draws
of step s depend on (seed, s) only, so a resumed run repeats an uninterrupted one.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from instant_fold_core.dataset.schema import KEYPOINT_NAMES
from instant_fold_learning.keypoints.configuration import KeypointDetectorConfig, KeypointTrainingConfig
from instant_fold_learning.keypoints.modeling import KeypointDetector, keypoint_losses
from instant_fold_learning.policy.data import PolicyDataError, TokenizedEpisode
from instant_fold_learning.policy.dataset import PlanarTransform
from instant_fold_learning.trainer import (
    TRAIN_STATE_DIR,
    Distributed,
    RunLog,
    check_finite_loss,
    check_new_run,
    learning_rate,
    read_train_state,
    save_train_state,
)

#: The deployable detector inside a run directory.
DETECTOR_DIR = "detector"
#: Distances (m) the evaluation reports the share of keypoints within.
WITHIN_M = (0.03, 0.05)


@dataclass
class KeypointBatch:
    positions: torch.Tensor  # [B, N, 3]
    features: torch.Tensor  # [B, N, D]
    valid: torch.Tensor  # [B, N]
    keypoints: torch.Tensor  # [B, K, 3]
    visible: torch.Tensor  # [B, K]

    def to(self, device: str | torch.device) -> KeypointBatch:
        return KeypointBatch(
            *(getattr(self, f).to(device) for f in ("positions", "features", "valid", "keypoints", "visible"))
        )


class KeypointFrames:
    """Every `stride`-th frame of episodes with keypoints, as (episode, frame) pairs."""

    def __init__(self, episodes: list[TokenizedEpisode], stride: int) -> None:
        self.episodes = [e for e in episodes if e.keypoints is not None]
        if not self.episodes:
            raise PolicyDataError("keypoint detector: no episode carries keypoints (tokenise simulated episodes)")
        self.index = [(i, t) for i, e in enumerate(self.episodes) for t in range(0, e.num_frames, stride)]

    def __len__(self) -> int:
        return len(self.index)

    def batch(
        self, items: list[int], rng: np.random.Generator | None = None, train: KeypointTrainingConfig | None = None
    ) -> KeypointBatch:
        """The frames `items` (indices into the index); when `rng` and `train` are given, each moved
        by a drawn SE(2) transform with probability `train.se2_prob` and its tokens left out with
        probability `train.token_dropout` each."""
        rows = []
        for item in items:
            i, t = self.index[item]
            e = self.episodes[i]
            pos, kp = e.cloth_positions[t], e.keypoints[t]  # type: ignore[index]
            if rng is not None and train is not None and rng.random() < train.se2_prob:
                move = PlanarTransform.draw(rng, train.se2_rotation_deg, train.se2_translation_m)
                pos, kp = move.points(pos), move.points(kp)
            valid = e.cloth_valid[t]
            if rng is not None and train is not None and train.token_dropout > 0:
                kept = valid & (rng.random(valid.shape) >= train.token_dropout)
                valid = kept if kept.any() else valid
            rows.append((pos, e.cloth_features[t], valid, kp, e.keypoint_visible[t]))  # type: ignore[index]
        pos, feat, valid, kp, vis = (np.stack(c) for c in zip(*rows, strict=True))
        return KeypointBatch(
            torch.as_tensor(pos, dtype=torch.float32),
            torch.as_tensor(feat, dtype=torch.float32),
            torch.as_tensor(valid),
            torch.as_tensor(kp, dtype=torch.float32),
            torch.as_tensor(vis),
        )


def load_keypoint_episodes(directory: str | Path) -> list[TokenizedEpisode]:
    """The token files of `directory` (`*.npz`); a PolicyDataError when there are none."""
    files = sorted(Path(directory).glob("*.npz"))
    if not files:
        raise PolicyDataError(f"{directory}: no .npz tokenised episodes found")
    return [TokenizedEpisode.load(f) for f in files]


@torch.no_grad()
def evaluate(model: KeypointDetector, frames: KeypointFrames, batch_size: int = 256) -> dict[str, Any]:
    """x, y error of the visible keypoints, per keypoint and pooled: mean (cm), median (cm), the
    share within each of `WITHIN_M`; and the visibility accuracy."""
    model.eval()
    device = next(model.parameters()).device
    errors, visible, correct = [], [], []
    for start in range(0, len(frames), batch_size):
        b = frames.batch(list(range(start, min(start + batch_size, len(frames))))).to(device)
        out = model(b.positions, b.features, b.valid)
        errors.append(torch.linalg.norm(out.position[..., :2] - b.keypoints[..., :2], dim=-1).cpu())
        visible.append(b.visible.cpu())
        correct.append(((out.visible_logit > 0) == b.visible).cpu())
    err, vis = torch.cat(errors).numpy(), torch.cat(visible).numpy()

    def summary(e: np.ndarray) -> dict[str, float | int]:
        row: dict[str, float | int] = {"count": int(e.size)}
        if e.size:
            row |= {"mean_cm": round(float(e.mean() * 100), 2), "median_cm": round(float(np.median(e) * 100), 2)}
            row |= {f"within_{round(d * 100)}cm": round(float((e < d).mean()), 4) for d in WITHIN_M}
        return row

    return {
        "frames": len(frames),
        "all": summary(err[vis]),
        "keypoints": {name: summary(err[:, k][vis[:, k]]) for k, name in enumerate(KEYPOINT_NAMES)},
        "visibility_accuracy": round(float(torch.cat(correct).float().mean()), 4),
    }


def train(
    cfg: KeypointDetectorConfig,
    episodes: list[TokenizedEpisode],
    out: str | Path,
    eval_episodes: list[TokenizedEpisode] | None = None,
    device: str = "cpu",
    resume: bool = False,
    echo: bool = True,
) -> dict[str, Any]:
    """Train (or resume) a detector into `out`; returns the end record (losses, evaluations)."""
    out = Path(out)
    cfg.validate()
    check_new_run(out, resume, (DETECTOR_DIR,))
    tr = cfg.train
    frames = KeypointFrames(episodes, tr.frame_stride)
    torch.manual_seed(tr.seed)
    model = KeypointDetector(cfg).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=tr.lr, weight_decay=tr.weight_decay)
    start = 0
    if resume and (out / TRAIN_STATE_DIR).is_dir():
        start = read_train_state(out / TRAIN_STATE_DIR).restore(model, optimizer)
    log = RunLog(out, Distributed(), "keypoints", echo)
    if start == 0:
        log.write({"event": "start", "config": cfg.name, "frames": len(frames), "episodes": len(frames.episodes)})
    model.train()
    for step in range(start, tr.steps):
        rng = np.random.default_rng([tr.seed, step])
        b = frames.batch(rng.integers(len(frames), size=tr.batch_size).tolist(), rng, tr)
        for group in optimizer.param_groups:
            group["lr"] = learning_rate(step, tr.lr, tr.steps, tr.warmup_steps, 0.05)
        b = b.to(device)
        losses = keypoint_losses(model(b.positions, b.features, b.valid), b.positions, b.valid, b.keypoints, b.visible)
        loss = sum(losses.values(), torch.zeros((), device=device))
        check_finite_loss(loss, step)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        done = step + 1
        if done % tr.log_every == 0 or done == tr.steps:
            log.write(
                {
                    "event": "train",
                    "step": done,
                    "loss": float(loss.detach()),
                    **{k: float(v.detach()) for k, v in losses.items()},
                }
            )
        if done % tr.checkpoint_every == 0 or done == tr.steps:
            save_train_state(out, done, model, optimizer, cfg.to_dict())
    model.save_pretrained(out / DETECTOR_DIR)
    end: dict[str, Any] = {"event": "end", "step": tr.steps, "train": evaluate(model, frames)}
    if eval_episodes:
        end["eval"] = evaluate(model, KeypointFrames(eval_episodes, tr.frame_stride))
    log.write(end)
    return end
