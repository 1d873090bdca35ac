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
