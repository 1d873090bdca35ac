"""The replayed-frames table in docs/sim.md is that of the measured docs/results/bench_sim_capture_*.json."""

from __future__ import annotations

import json
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]


def _bench(capture: str) -> dict:
    return json.loads((REPO / "docs" / "results" / f"bench_sim_capture_{capture}.json").read_text())


def replayed_frames_rows() -> list[str]:
    """The table's rows: each setting's physics from the run that used it for its episodes too."""
    rows = []
    for capture, label, physics in (
        ("off", "launched kernel by kernel (`--capture off`)", "physics_launched"),
        ("on", "recorded once, replayed (the default on the CPU)", "physics"),
    ):
        b = _bench(capture)
        p = b[physics]
        assert p["capture"] == (capture == "on") and b["capture"] == capture
        rows.append(
            f"| {label} | {p['ms_per_frame']:.1f} | {p['real_time_factor']:.2f} | "
            f"{b['seconds_per_episode']:.1f} | {b['episodes_per_hour_per_process']:.0f} |"
        )
    return rows


def test_the_replayed_frames_table_is_the_measured_one() -> None:
    on, off = _bench("on"), _bench("off")
    docs = (REPO / "docs" / "sim.md").read_text()
    missing = [r for r in replayed_frames_rows() if r not in docs]
    assert not missing, missing
    # Both runs on one machine and the same episodes (same frames: the same folds, simulated both ways).
    assert on["machine"] == off["machine"] and on["machine"]["cpu_flags_sha256"] in docs
    assert [r["frames"] for r in on["runs"]] == [r["frames"] for r in off["runs"]]
    assert [r["oracle_max_error"] for r in on["runs"]] == [r["oracle_max_error"] for r in off["runs"]]
    # "about twice as fast" stepping alone; "less" for a whole episode.
    speedup = off["physics_launched"]["ms_per_frame"] / on["physics"]["ms_per_frame"]
    episode = off["seconds_per_episode"] / on["seconds_per_episode"]
    assert 1.7 < speedup < 2.3 and 1.0 < episode < speedup
