"""The timing tables in docs/control.md are those of the measured docs/results/bench_control.json."""

from __future__ import annotations

import json
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]


def test_the_control_timing_tables_are_the_measured_ones() -> None:
    bench = json.loads((REPO / "docs" / "results" / "bench_control.json").read_text())
    docs = (REPO / "docs" / "control.md").read_text()
    rows = []
    for c in bench["cases"]:
        i, j = c["tick_interval_ms"], c["jitter_ms"]
        rows.append(
            f"| {c['robot']} | {c['timer']} | {c['load_processes']} | {c['rate_hz']:.1f} | "
            f"{i['p50']:.1f} / {i['p95']:.1f} / {i['max']:.1f} | {j['p50']:.2f} / {j['p95']:.2f} / {j['max']:.1f} | "
            f"{c['late_ticks_over_1_5_periods']} |"
        )
        for arm, s in c.get("dobot_servo_p", {}).items():
            if arm in ("left", "right"):
                iv = s["interval_ms"]
                rows.append(
                    f"| {c['timer']} | {c['load_processes']} | {arm} | {s['rate_hz']:.1f} | "
                    f"{iv['p50']:.1f} / {iv['p99']:.1f} / {iv['max']:.1f} | {s['late_over_1_5_periods']} |"
                )
    missing = [r for r in rows if r not in docs]
    assert len(rows) == 16 and not missing, missing
    idle_franka = [c for c in bench["cases"] if c["robot"] == "franka" and c["load_processes"] == 0]
    assert all(c["rate_hz"] >= 95.0 for c in idle_franka)  # the ">= 95 Hz" claim in the text
