"""One compute thread per process where a fold must reproduce: the determinism contract.

Why: torch's CPU kernels (the tokenizer, the policy, Isaac Lab's differential IK on the CPU)
split their reductions over the intra-op threads, and BLAS splits its products; another split
sums in another order and changes a result's last bits. A closed-loop fold amplifies last bits
into another fold: without `OMP_NUM_THREADS=1` the Isaac Lab main job folded differently, and
its Geom. reversed the docs' comparison with Newton, on the same machine (issue 31). So the programs whose numbers the docs quote (the main
job, `instant_fold.sim_fold`, its nodes and its simulator process; the bridge's simulator server)
fix the count themselves when they start, whatever the caller's environment says, rather than
relying on a wrapper script to set it.

Contract: such a program's results depend on its inputs (models, demonstration, garment, seed,
backend, device), the software versions and the CPU, not on the core count or `OMP_NUM_THREADS` /
`MKL_NUM_THREADS` / `OPENBLAS_NUM_THREADS`. One thread also suits the graph: its four nodes share
the CPU. Training and data generation are not bound by it (they use every core).

The CPU too: the same code, models and seed folded the main job's garment differently on the
machines of 2026-11-26 and 2026-11-27 (docs/evaluation.md, "The machine, not the code, moved v5's
numbers"): vectorised kernels can sum in another order on another instruction set.
So the runs whose numbers the docs quote record `machine_record()`, and two runs are compared on
like terms only where it matches.
"""

from __future__ import annotations

import hashlib
import os
import platform
import sys
from importlib import metadata

#: The count every reproducible process computes with.
DETERMINISTIC_THREADS = 1
#: What OpenMP, MKL and OpenBLAS read when they load (torch's intra-op pool included).
THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")


def pin_compute_threads(threads: int = DETERMINISTIC_THREADS) -> dict[str, str]:
    """Fix this process's compute threads at `threads`, and its future children's.

    The variables are overwritten (not defaulted: a caller's `OMP_NUM_THREADS=8` is exactly what
    must not change the numbers), so every process started from here reads them when its
    libraries load; torch, if this process has already loaded it, is told directly (it read the
    variables at its import). Returns the variables as set, for a run's record."""
    if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
        raise ValueError(f"threads: expected a positive integer, got {threads!r}")
    for name in THREAD_VARIABLES:
        os.environ[name] = str(threads)
    torch = sys.modules.get("torch")
    if torch is not None:
        torch.set_num_threads(threads)
    return {name: os.environ[name] for name in THREAD_VARIABLES}


#: The numeric libraries whose versions a fold's numbers depend on (distribution names).
NUMERIC_PACKAGES = ("numpy", "torch", "warp-lang", "newton")


def machine_record() -> dict[str, str]:
    """What a reproducible run's numbers depend on besides its inputs: the CPU (model name and a
    digest of its instruction-set flags, from /proc/cpuinfo where there is one) and the versions of
    Python and of the numeric libraries installed (`NUMERIC_PACKAGES`)."""
    cpu, flags = platform.processor(), ""
    try:
        with open("/proc/cpuinfo") as f:
            first = f.read().split("\n\n")[0]  # the first processor's block
        fields = {k.strip(): v.strip() for k, v in (line.split(":", 1) for line in first.splitlines() if ":" in line)}
        cpu, flags = fields.get("model name", cpu), fields.get("flags", "")
    except OSError:  # not Linux: the platform's processor string only
        pass
    record = {
        "cpu": cpu,
        "cpu_flags_sha256": hashlib.sha256(flags.encode()).hexdigest()[:12],
        "python": platform.python_version(),
    }
    for name in NUMERIC_PACKAGES:
        try:
            record[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return record
