"""What writing the Rerun recording (`--rrd`) costs the main job: paired runs with and without it.

Why paired and alternating: the main job's wall time depends on what else the machine runs (on the
2-core development machine a training job shares the cores), which drifts over minutes. Each pair
runs the job once without and once with the recording, back to back, the order alternating from
pair to pair; the overhead is the median over pairs of (with - without) / without, and the load
average is kept beside every run so a reader can judge. Wall time on a shared machine swings by
more than the recording can cost, so the recording's CPU is measured too: the job process's own
CPU seconds (`metrics.json` `job_cpu_s`, all its threads, the nodes not included) with minus
without the recording, and that as a share of the job's wall time (what it can add at most where
the CPU is the bottleneck), beside the CPU of the whole graph (job and nodes). The folds
themselves must be identical (the main job is deterministic on one machine): same queries, same
Geom. to the last digit.

    OMP_NUM_THREADS=1 nice -n 15 python benchmarks/bench_rerun_main_job.py --pairs 3 \\
        --out docs/results/rerun_main_job.json | tee bench_rerun.log

The JSON is rewritten after every pair, and each run is printed as one JSON line, so an
interrupted benchmark (a main job takes 3 to 20 min on a loaded 2-core machine) still has its
finished pairs: `--summarize bench_rerun.log` writes the JSON from those lines without running.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any


def run_job(out: Path, rrd: bool, extra: list[str]) -> dict[str, Any]:
    """One main job (`python -m instant_fold.sim_fold`) as a user runs it; its wall time as seen
    from outside (process start to exit) and what its metrics.json says."""
    cmd = [sys.executable, "-m", "instant_fold.sim_fold", "--out", str(out), *extra, *(["--rrd"] if rrd else [])]
    load = os.getloadavg()
    cpu = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.monotonic()
    done = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    wall = time.monotonic() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"main job failed ({done.returncode}):\n{done.stdout[-3000:]}")
    metrics = json.loads((out / "metrics.json").read_text())
    rrd_file = out / "fold.rrd"
    return {
        "rrd": rrd,
        "process_wall_s": wall,
        "job_wall_s": metrics["wall_s"],
        "fold_duration_s": metrics["fold"]["duration_s"],
        "job_cpu_s": metrics["job_cpu_s"],
        "graph_cpu_s": (after.ru_utime + after.ru_stime) - (cpu.ru_utime + cpu.ru_stime),
        "policy_queries": metrics["fold"]["policy_queries"],
        "geom": metrics["same_init"].get("geom"),
        "rrd_bytes": rrd_file.stat().st_size if rrd_file.is_file() else 0,
        "load_average_1_5_15_at_start": [round(x, 2) for x in load],
    }


def overhead(pairs: list[tuple[dict[str, Any], dict[str, Any]]], key: str) -> dict[str, float]:
    """Median and per-pair relative cost of the recording on `key` (%)."""
    ratios = [100.0 * (rec[key] - plain[key]) / plain[key] for plain, rec in pairs]
    return {"median_pct": statistics.median(ratios), "per_pair_pct": ratios}


def pairs_from_log(path: Path) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """The complete pairs among the run lines an earlier invocation printed (in its order)."""
    runs = [json.loads(line) for line in path.read_text().splitlines() if line.startswith('{"rrd"')]
    pairs = []
    for first, second in zip(runs[0::2], runs[1::2], strict=False):  # a pair cut short is left out
        if first["rrd"] == second["rrd"]:
            raise SystemExit(f"{path}: two runs {'with' if first['rrd'] else 'without'} the recording in one pair")
        pairs.append((second, first) if first["rrd"] else (first, second))
    return pairs


def write_result(
    pairs: list[tuple[dict[str, Any], dict[str, Any]]], command: str, note: str, out: Path
) -> dict[str, Any]:
    identical = all(
        plain["policy_queries"] == rec["policy_queries"] and plain["geom"] == rec["geom"] for plain, rec in pairs
    )
    result = {
        "command": command,
        "note": note,
        "measured": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform(), "python": platform.python_version()},
        "pairs": [{"plain": plain, "rrd": rec} for plain, rec in pairs],
        "process_wall_overhead": overhead(pairs, "process_wall_s"),
        "job_wall_overhead": overhead(pairs, "job_wall_s"),
        "fold_duration_overhead": overhead(pairs, "fold_duration_s"),
        "recording_cpu_s": {
            "median": statistics.median(rec["job_cpu_s"] - plain["job_cpu_s"] for plain, rec in pairs),
            "per_pair": [rec["job_cpu_s"] - plain["job_cpu_s"] for plain, rec in pairs],
        },
        "recording_cpu_pct_of_job_wall": statistics.median(
            100.0 * (rec["job_cpu_s"] - plain["job_cpu_s"]) / plain["job_wall_s"] for plain, rec in pairs
        ),
        "graph_cpu_overhead": overhead(pairs, "graph_cpu_s"),
        "folds_identical": identical,
        "rrd_mb": statistics.median(rec["rrd_bytes"] for _, rec in pairs) / 1e6,
        "load_average_at_end": [round(x, 2) for x in os.getloadavg()],
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1) + "\n")
    return result


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--pairs", type=int, default=3)
    p.add_argument("--out", type=Path, required=True, help="JSON to write")
    p.add_argument("--keep", type=Path, default=None, help="keep the runs' folders here (default: a temporary one)")
    p.add_argument("--summarize", type=Path, default=None, help="write the JSON from this log's run lines, run nothing")
    p.add_argument("--note", default="", help="what the JSON should say about the machine (its load, ...)")
    p.add_argument("job_args", nargs="*", help="more arguments for the main job (after --)")
    args = p.parse_args(argv)
    given = list(argv if argv is not None else sys.argv[1:])
    if "--note" in given:  # the note has a field of its own
        del given[given.index("--note") : given.index("--note") + 2]
    command = "OMP_NUM_THREADS=1 nice -n 15 python benchmarks/bench_rerun_main_job.py " + " ".join(given)
    if args.summarize is not None:
        result = write_result(pairs_from_log(args.summarize), command, args.note, args.out)
    else:
        root = args.keep or Path(tempfile.mkdtemp(prefix="bench_rerun_"))
        pairs: list[tuple[dict[str, Any], dict[str, Any]]] = []
        for i in range(args.pairs):
            order = (False, True) if i % 2 == 0 else (True, False)
            runs = {}
            for rrd in order:
                runs[rrd] = run_job(root / f"pair{i}_{'rrd' if rrd else 'plain'}", rrd, args.job_args)
                print(json.dumps(runs[rrd]), flush=True)
            pairs.append((runs[False], runs[True]))
            result = write_result(pairs, command, args.note, args.out)
    summary = ("process_wall_overhead", "recording_cpu_s", "recording_cpu_pct_of_job_wall", "folds_identical")
    print(json.dumps({k: result[k] for k in summary}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
