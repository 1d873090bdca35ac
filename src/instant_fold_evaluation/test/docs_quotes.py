"""What the docs tests share: the measured JSONs of docs/results/, the documents that quote them,
and one check that every quote is there (listing all the missing ones, not the first)."""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[3]
RESULTS = REPO / "docs" / "results"


def result(name: str) -> Any:
    """A measured JSON of docs/results/."""
    return json.loads((RESULTS / name).read_text())


def cpu_flags(run: str | dict) -> str:
    """The CPU a measured JSON (a docs/results name, or the JSON itself) was measured on: the
    digest of its flags. Rows compared in one table must share it: simulated folds reproduce bit
    for bit only on the CPU that simulated them."""
    return str((result(run) if isinstance(run, str) else run)["machine"]["cpu_flags_sha256"])


def doc(path: str | Path) -> str:
    """A document of the repository, as written (for tables, whose line breaks matter)."""
    return (REPO / path).read_text()


def flat_doc(path: str | Path) -> str:
    """A document with its whitespace runs folded to one space, so a quote may span a line break."""
    return " ".join(doc(path).split())


def assert_quoted(text: str, quotes: Iterable[str]) -> None:
    """Every quote is in `text`; the assertion lists the missing ones."""
    missing = [q for q in quotes if q not in text]
    assert not missing, missing


def row_of(name: str, row: str = "policy", split: str = "seen") -> Any:
    """One row's summary in an evaluation JSON: by default the policy on the seen folds."""
    return result(name)["rows"][row][split]


def counted(percent: float, of: int) -> int:
    """How many of `of` folds a percentage (Ctx. Acc., C-SR@95) counted."""
    return round(percent * of / 100)


def count(row: dict, metric: str) -> int:
    """How many of a summary row's rollouts a percentage metric counted."""
    return counted(row[metric]["mean"], row["rollouts"])


def successes(row: dict) -> int:
    """How many of a row's rollouts succeeded (C-SR@95 is their share, in %)."""
    return count(row, "csr95")


def csr_cell(row: dict) -> str:
    """A table's C-SR@95 cell: the rate and the successes it counts, "79.4 (50/63)"."""
    return f"{row['csr95']['mean']:.1f} ({successes(row)}/{row['rollouts']})"


def issue_28_bars(
    benchmark: str = "eval_cpu_k10_reference.json", garments: str = "eval_cpu_garments_k10_reference.json"
) -> dict[str, float]:
    """Issue 28's bars against the out-of-sample oracle of a benchmark's and its held-out garments'
    reference runs (by default the CPU benchmark's shipped banks of 10)."""
    seen = result(benchmark)["rows"]["oracle-out-of-sample"]["seen"]
    other = result(garments)["rows"]["oracle-out-of-sample"]["seen"]
    return {
        "csr": 0.8 * seen["csr95"]["mean"],
        "geom": 1.5 * seen["geom"]["mean"],
        "garments_csr": 0.6 * other["csr95"]["mean"],
    }


#: docs/evaluation.md's "Where the rows stand": (label, seen folds, held-out garments, main job) JSONs.
STANDINGS = (
    (
        "v5 (the previous default), rerun 2026-11-27",
        "eval_cpu_k10_v5_rerun.json",
        "eval_cpu_garments_k10_v5_rerun.json",
        "main_job_k10_v5_rerun.json",
    ),
    ("v5 recipe rebuilt from nothing", "eval_cpu_k10_from_nothing_v5.json", None, None),
    (
        "layouts-10k",
        "eval_cpu_k10_layouts_10k.json",
        "eval_cpu_garments_k10_layouts_10k.json",
        "main_job_k10_layouts_10k.json",
    ),
    (
        "16-layout recipe, 10,000 steps (v6, the default)",
        "eval_cpu_k10_recipe_l16.json",
        "eval_cpu_garments_k10_recipe_l16.json",
        "main_job_k10_recipe_l16.json",
    ),
    (
        "16-layout recipe, 10,000 steps, train seed 1",
        "eval_cpu_l16_seed1.json",
        "eval_cpu_garments_l16_seed1.json",
        "main_job_l16_seed1.json",
    ),
    (
        "16-layout recipe, 10,000 steps, train seed 2",
        "eval_cpu_l16_seed2.json",
        "eval_cpu_garments_l16_seed2.json",
        "main_job_l16_seed2.json",
    ),
    (
        "16-layout recipe, 14,000 steps",
        "eval_cpu_k10_l16_14k.json",
        "eval_cpu_garments_k10_l16_14k.json",
        "main_job_k10_l16_14k.json",
    ),
    (
        "registration replay",
        "eval_cpu_k10_registration_replay.json",
        "eval_cpu_garments_k10_registration_replay.json",
        "main_job_k10_registration_replay.json",
    ),
)
