"""From fold records to the paper's table: same-init families, reference rows, Table 1.

For each start state (an init) the oracle bank's executions of every benchmark context form a
`Family` (`instant_fold_sim.oracle_bank`), and a rollout is scored against the family of its start.

Rows (`ROWS`), all on the same starts and contexts:
- `policy`: each rollout scored against the context its demonstration shows;
- `wrong-demo`: the control that makes Ctx. Acc. meaningful: for each start and context c, the
  rollout whose demonstration showed another context c' (`BenchmarkSpec.wrong_context`), scored
  against c. A policy that follows its demonstration scores low here, and `follows_demo` (share
  classified as c') high; a policy that ignores demonstrations scores alike in both rows. The
  rollouts are those of the `policy` row (a rollout depends on its start and demonstration only);
- `oracle`: every bank execution scored against its own family (Ctx. Acc. ~100 %, C-SR@95 =
  share at or under the 95th percentile by construction: (K-1)/K for K < 20);
- `do-nothing`: the start state left as it is (no grasp: context never correct, C-SR@95 = 0).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from instant_fold_core.evaluation.metrics import RolloutScore, summarize
from instant_fold_sim.oracle_bank import BankEntry, Context, Family
from instant_fold_sim.outcome import FoldRecord

from .benchmark import BenchmarkSpec, Init

ROWS = ("policy", "wrong-demo", "oracle", "do-nothing")
SPLITS = ("seen", "heldout")


def families(spec: BenchmarkSpec, entries: dict[tuple[str, int, str], BankEntry]) -> dict[Init, Family]:
    """One family per start of the spec, from bank entries keyed (garment, seed, context label)."""
    return {
        i: Family.build({c.label: entries[(i.garment, i.seed, c.label)] for c in spec.contexts}) for i in spec.inits()
    }


def oracle_uv(fams: dict[Init, Family]) -> dict[str, np.ndarray]:
    """Every context's oracle final geometry pooled over starts (the W1 reference distribution)."""
    pooled: dict[str, list[np.ndarray]] = {}
    for fam in fams.values():
        for label, entry in fam.entries.items():
            pooled.setdefault(label, []).extend(fam.frame.to_garment(r.final_keypoints) for r in entry.runs)
    return {label: np.stack(v) for label, v in pooled.items()}


def score_rows(
    spec: BenchmarkSpec,
    fams: dict[Init, Family],
    rollouts: dict[tuple[Init, str], FoldRecord] | None,
) -> dict[str, list[tuple[str, RolloutScore, dict[str, Any]]]]:
    """Per row: (split, score, extra) for every scored fold. `rollouts` keyed (init, demonstrated
    context label); None for the reference rows only."""
    rows: dict[str, list[tuple[str, RolloutScore, dict[str, Any]]]] = {r: [] for r in ROWS}
    for init, fam in fams.items():
        g = init.garment_id
        for c in spec.contexts:
            split = spec.split_of(c)
            for run in fam.entries[c.label].runs:
                rows["oracle"].append((split, fam.score(g, c.label, run), {}))
            rows["do-nothing"].append((split, fam.score(g, c.label, fam.do_nothing()), {}))
            if rollouts is None:
                continue
            rows["policy"].append((split, fam.score(g, c.label, rollouts[(init, c.label)]), {}))
            if len(spec.contexts) < 2:
                continue  # no other demonstration to show
            wrong: Context = spec.wrong_context(c)
            s = fam.score(g, c.label, rollouts[(init, wrong.label)])
            rows["wrong-demo"].append((split, s, {"demo": wrong.label, "follows_demo": s.predicted == wrong.label}))
    return {r: v for r, v in rows.items() if v}


def summarize_rows(
    rows: dict[str, list[tuple[str, RolloutScore, dict[str, Any]]]], uv: dict[str, np.ndarray]
) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for row, scored in rows.items():
        out[row] = {}
        for split in SPLITS:
            scores = [s for sp, s, _ in scored if sp == split]
            if not scores:
                continue
            summary = summarize(scores, uv)
            extras = [e for sp, _, e in scored if sp == split and "follows_demo" in e]
            if extras:
                summary["follows_demo"] = 100.0 * float(np.mean([e["follows_demo"] for e in extras]))
            out[row][split] = summary
    return out


def _cell(metric: dict[str, Any] | float | None, digits: int) -> str:
    if metric is None:
        return "–"
    if isinstance(metric, dict):
        return f"{metric['mean']:.{digits}f} ± {metric['ci95']:.{digits}f}"
    return f"{metric:.3f}"


def table(rows: list[tuple[str, dict[str, Any]]]) -> str:
    """Markdown in the shape of the paper's Table 1: one line per (label, split summaries)."""
    head = (
        "| | Seen: Ctx. Acc. ↑ | C-SR@95 ↑ | Geom. ↓ | W1 ↓ | Held-out: Ctx. Acc. ↑ | C-SR@95 ↑ | Geom. ↓ | W1 ↓ |\n"
        "|---|---|---|---|---|---|---|---|---|\n"
    )
    lines = []
    for label, splits in rows:
        cells = []
        for split in SPLITS:
            s = splits.get(split)
            cells += [
                _cell(s and s["ctx_acc"], 1),
                _cell(s and s["csr95"], 1),
                _cell(s and s["geom"], 2),
                _cell(s and s["w1"], 3),
            ]
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return head + "\n".join(lines) + "\n"
