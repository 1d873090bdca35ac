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


def counted(percent: float, of: int) -> int:
    """How many of `of` folds a percentage (Ctx. Acc., C-SR@95) counted."""
    return round(percent * of / 100)


def count(row: dict, metric: str) -> int:
    """How many of a summary row's rollouts a percentage metric counted."""
    return counted(row[metric]["mean"], row["rollouts"])


def successes(row: dict) -> int:
    """How many of a row's rollouts succeeded (C-SR@95 is their share, in %)."""
    return count(row, "csr95")


def issue_28_bars() -> dict[str, float]:
    """Issue 28's bars against the out-of-sample oracle of the shipped banks of 10."""
    seen = result("eval_cpu_k10_reference.json")["rows"]["oracle-out-of-sample"]["seen"]
    garments = result("eval_cpu_garments_k10_reference.json")["rows"]["oracle-out-of-sample"]["seen"]
    return {
        "csr": 0.8 * seen["csr95"]["mean"],
        "geom": 1.5 * seen["geom"]["mean"],
        "garments_csr": 0.6 * garments["csr95"]["mean"],
    }
