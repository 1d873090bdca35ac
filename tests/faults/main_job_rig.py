"""The main job (`python -m instant_fold.sim_fold`) started as a user would, on untrained
checkpoints, for tests that signal it or kill its nodes mid-fold."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def start_untrained_main_job(tmp_path: Path, env: dict[str, str]) -> tuple[subprocess.Popen[str], Path]:
    """The running job (stdout and stderr merged, unbuffered) and its output folder; 1,000 steps,
    no evaluation, so it is still folding when the test acts."""
    from instant_fold_learning.testing import untrained_checkpoints

    policy, encoder = untrained_checkpoints(tmp_path / "models")
    out = tmp_path / "run"
    args = ["--checkpoint", str(policy), "--encoder", str(encoder), "--no-evaluate", "--out", str(out)]
    job = subprocess.Popen(
        [sys.executable, "-u", "-m", "instant_fold.sim_fold", *args, "--max-steps", "1000"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    return job, out
