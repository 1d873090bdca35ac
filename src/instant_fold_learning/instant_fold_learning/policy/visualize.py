"""Pictures of what the policy does with a demonstration (top-down, camera frame; needs matplotlib).

`plot_demo_conditioning` answers "does the policy follow the demonstration?": one current
observation, several demonstrations, and for each the predicted chunk and next keypose of both
arms, optionally next to the expert's.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from instant_fold_core.plotting import save_figure
from instant_fold_learning.policy.data import TokenizedEpisode, chunk_targets
from instant_fold_learning.policy.inference import PolicyRunner
from instant_fold_learning.policy.progress import episode_event_counts


@dataclass
class Expert:
    """What an expert did from the plotted observation: absolute chunk [H, 2, 3] and keypose [2, 3]."""

    chunk: np.ndarray
    keypose: np.ndarray

    @classmethod
    def from_episode(cls, episode: TokenizedEpisode, frame: int, horizon: int) -> Expert:
        deltas, _, keypose_delta, _ = chunk_targets(episode, frame, horizon)
        current = episode.arm_state[frame, :, :3]
        return cls(current + np.cumsum(deltas, 0), current + keypose_delta)


def plot_demo_conditioning(
    runner: PolicyRunner,
    episode: TokenizedEpisode,
    frame: int,
    demos: dict[str, TokenizedEpisode],
    path: str | Path,
    experts: dict[str, Expert] | None = None,
    seed: int = 0,
) -> Path:
    """Top-down plot of `episode` at `frame` with the policy's answer for each named demonstration."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    fig, ax = plt.subplots(figsize=(9, 6))
    cloth = episode.cloth_positions[frame][episode.cloth_valid[frame]]
    ax.scatter(cloth[:, 0], cloth[:, 1], s=14, c="0.7", label="cloth tokens (now)")
    state = episode.arm_state[frame]
    ax.scatter(state[:, 0], state[:, 1], s=90, c="k", marker="s", label="grippers (now)")
    counts = episode_event_counts(episode.arm_state)[frame]
    for i, (name, demo) in enumerate(demos.items()):
        colour = colours[i % len(colours)]
        kf = demo.keyframes
        runner.load_demonstration(demo.cloth_positions[kf], demo.cloth_features[kf], demo.arm_state[kf])
        chunk = runner.predict(
            episode.cloth_positions[frame],
            episode.cloth_features[frame],
            state,
            episode.cloth_valid[frame],
            generator=torch.Generator().manual_seed(seed),
            event_count=counts,
        )
        for arm in range(2):
            path_xy = np.concatenate([state[None, arm, :2], chunk.targets[:, arm, :2]])
            ax.plot(
                path_xy[:, 0],
                path_xy[:, 1],
                "-o",
                c=colour,
                ms=3,
                label=f"{name}: chunk" if arm == 0 else None,
            )
        if chunk.keypose is not None:
            ax.scatter(
                chunk.keypose[:, 0],
                chunk.keypose[:, 1],
                s=180,
                marker="*",
                color=colour,
                label=f"{name}: next keypose",
            )
        if experts and name in experts:
            e = experts[name]
            for arm in range(2):
                xy = np.concatenate([state[None, arm, :2], e.chunk[:, arm, :2]])
                ax.plot(xy[:, 0], xy[:, 1], "--", c=colour, lw=1, label=f"{name}: expert" if arm == 0 else None)
            ax.scatter(e.keypose[:, 0], e.keypose[:, 1], s=180, marker="*", facecolors="none", edgecolors=colour)
    ax.set_aspect("equal")
    ax.invert_yaxis()  # camera optical frame: y points down in the image
    ax.set_xlabel("x (m, camera frame)")
    ax.set_ylabel("y (m, camera frame)")
    ax.set_title("policy answer per demonstration (same observation)")
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.02, 1.0))
    return save_figure(fig, path)
