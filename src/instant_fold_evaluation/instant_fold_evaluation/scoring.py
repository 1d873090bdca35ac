"""From fold records to the paper's table: same-init families, reference rows, Table 1.

For each start state (an init) the oracle bank's executions of every benchmark context form a
`Family` (`instant_fold_evaluation.oracle_bank`), and a rollout is scored against the family of its start.

Rows (`ROWS`), all on the same starts and contexts:
- `policy`: each rollout scored against the context its demonstration shows;
- `wrong-demo`: the control that makes Ctx. Acc. meaningful: for each start and context c, the
  rollout whose demonstration showed another context c' (`BenchmarkSpec.wrong_context`), scored
  against c. A policy that follows its demonstration scores low here, and `follows_demo` (share
  classified as c') high; a policy that ignores demonstrations scores alike in both rows. The
  rollouts are those of the `policy` row (a rollout depends on its start and demonstration only);
- `oracle` (in-sample): every bank execution scored against its own family (Ctx. Acc. ~100 %,
  C-SR@95 = share at or under the 95th percentile by construction: (K-1)/K for K < 20);
- `oracle-out-of-sample`: every bank execution scored against its family calibrated without it
  (`Family.leave_out`: classifier voters, reference, envelope and first grasps from the other
  K-1 executions): what an execution of the scripted oracle scores as a fresh fold, the honest
  ceiling for a policy. Needs K >= 3; no W1 (the executions are the reference distribution);
- `do-nothing`: the start state left as it is (no grasp: context never correct, C-SR@95 = 0).

The `policy` and `oracle-out-of-sample` rows also carry each fold's first-grasp error and its
event errors (`instant_fold_evaluation.grasps`: per arm, the distance from where it first
closed, and from each of its grasps and releases, to the median of the oracle's executions of the
same start and context), in metres of the camera frame the policy acts in (sim metres times the
preset's `obs_scale`): the first says whether a fold starts right, the second which of its later
grasps or its releases (place points) go wrong. They also carry `primitives`: how often the
classified fold has the sleeve fold and the body fold of the context scored against (a held-out
fold recombines trained primitives, so this says which half of a missed fold the policy got).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

import numpy as np

from instant_fold_core.fold_record import FoldRecord
from instant_fold_evaluation.grasps import (
    LATER,
    EventError,
    FirstGraspError,
    summarize_events,
    summarize_first_grasps,
)
from instant_fold_evaluation.metrics import RolloutScore, summarize
from instant_fold_evaluation.oracle_bank import BankEntry, Context, Family
from instant_fold_sim.fold_split import mode_of, primitives
from instant_fold_sim.programs import FOLDING_MODES
from instant_fold_sim.rollout import preset

from .benchmark import BenchmarkSpec, Init

OUT_OF_SAMPLE = "oracle-out-of-sample"
ROWS = ("policy", "wrong-demo", "oracle", OUT_OF_SAMPLE, "do-nothing")
#: Rows with a first-grasp and an event error per fold (the others are scored against another
#: context's demonstration, the oracle's in-sample reference or no grasp at all).
GRASP_ROWS = ("policy", OUT_OF_SAMPLE)
SPLITS = ("seen", "heldout")
#: Rows of the per-context table: the policy beside its ceiling and its floor.
CONTEXT_ROWS = ("policy", OUT_OF_SAMPLE, "do-nothing")
#: Table labels of the reference rows, those of every run (the policy rows take the run's label).
REFERENCE_LABELS = {"oracle": "oracle (in-sample)", OUT_OF_SAMPLE: "oracle (out-of-sample)", "do-nothing": "do-nothing"}
#: Fewest executions per context for the out-of-sample row (leave one out, calibrate on >= 2).
MIN_RUNS_OUT_OF_SAMPLE = 3

Scored = tuple[str, RolloutScore, dict[str, Any]]  # (split, score, extra fields of its line)


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


def out_of_sample(fams: dict[Init, Family]) -> bool:
    """Whether every context of every family has enough executions for the out-of-sample row."""
    return all(len(e.runs) >= MIN_RUNS_OUT_OF_SAMPLE for fam in fams.values() for e in fam.entries.values())


def score_rows(
    spec: BenchmarkSpec,
    fams: dict[Init, Family],
    rollouts: dict[tuple[Init, str], FoldRecord] | None,
) -> dict[str, list[Scored]]:
    """Per row: (split, score, extra) for every scored fold. `rollouts` keyed (init, demonstrated
    context label); None for the reference rows only."""
    rows: dict[str, list[Scored]] = {r: [] for r in ROWS}
    scale = preset(spec.preset).obs_scale
    loo = out_of_sample(fams)
    for init, fam in fams.items():
        g = init.garment_id
        start = {"start_k": init.k}  # which of the garment's starts: every scored fold says it
        for c in spec.contexts:
            split = spec.split_of(c)
            for k, run in enumerate(fam.entries[c.label].runs):
                rows["oracle"].append((split, fam.score(g, c.label, run), start))
                if loo:
                    held = fam.leave_out(c.label, k)
                    errors = _errors(held, c.label, run, scale)
                    rows[OUT_OF_SAMPLE].append((split, held.score(g, c.label, run), start | errors))
            rows["do-nothing"].append((split, fam.score(g, c.label, fam.do_nothing()), start))
            if rollouts is None:
                continue
            record = rollouts[(init, c.label)]
            rows["policy"].append((split, fam.score(g, c.label, record), start | _errors(fam, c.label, record, scale)))
            if len(spec.contexts) < 2:
                continue  # no other demonstration to show
            wrong: Context = spec.wrong_context(c)
            s = fam.score(g, c.label, rollouts[(init, wrong.label)])
            follows = {"demo": wrong.label, "follows_demo": s.predicted == wrong.label}
            rows["wrong-demo"].append((split, s, start | follows))
    return {r: v for r, v in rows.items() if v}


def _errors(fam: Family, context: str, record: FoldRecord, scale: float) -> dict[str, Any]:
    """The grasp-row extras of a fold: its first-grasp and event errors against `context`."""
    return {
        "first_grasp": fam.first_grasp_error(context, record, scale),
        "events": fam.event_error(context, record, scale),
    }


def summarize_rows(rows: dict[str, list[Scored]], uv: dict[str, np.ndarray]) -> dict[str, dict[str, Any]]:
    """Per row and split: the paper's metrics (`summarize`; no W1 for the out-of-sample row),
    `follows_demo` for the wrong-demo row, and `first_grasp` (`summarize_first_grasps`) and
    `events` (`summarize_events`) where the folds have those errors."""
    out: dict[str, dict[str, Any]] = {}
    for row, scored in rows.items():
        out[row] = {}
        for split in SPLITS:
            scores = [s for sp, s, _ in scored if sp == split]
            if not scores:
                continue
            summary = summarize(scores, None if row == OUT_OF_SAMPLE else uv)
            extras = [e for sp, _, e in scored if sp == split]
            follows = [e["follows_demo"] for e in extras if "follows_demo" in e]
            if follows:
                summary["follows_demo"] = 100.0 * float(np.mean(follows))
            grasps = [e["first_grasp"] for e in extras if "first_grasp" in e]
            if grasps:
                summary["first_grasp"] = summarize_first_grasps(grasps)
            events = [e["events"] for e in extras if "events" in e]
            if events:
                summary["events"] = summarize_events(events)
            if row in GRASP_ROWS and (recognised := primitives_recognised(scores)):
                summary["primitives"] = recognised
            out[row][split] = summary
    return out


def primitives_recognised(scores: list[RolloutScore]) -> dict[str, Any] | None:
    """Shares (%) of folds classified as a context with the scored context's sleeve fold, its body
    fold, and both (in either order, whatever the variant: Ctx. Acc. also needs those), with their
    count; None unless every scored context is a composed folding mode (`fold_split.primitives`).
    Why: Ctx. Acc. says a held-out fold was missed, this says whether the sleeves or the body went
    the way of a trained neighbour."""
    if not scores or any(mode_of(s.context) not in FOLDING_MODES for s in scores):
        return None
    hits = []
    for s in scores:
        truth = primitives(mode_of(s.context))
        guess = primitives(mode_of(s.predicted)) if s.predicted and mode_of(s.predicted) in FOLDING_MODES else None
        hits.append([guess is not None and guess[i] == truth[i] for i in (0, 1)])
    sleeve, body = np.asarray(hits, dtype=bool).T
    return {
        "sleeve": 100.0 * float(sleeve.mean()),
        "body": 100.0 * float(body.mean()),
        "both": 100.0 * float((sleeve & body).mean()),
        "folds": len(scores),
    }


def _fold_stats(scores: list[RolloutScore]) -> dict[str, Any]:
    """Ctx. Acc. and C-SR@95 (%) and Geom. averaged over some folds of one row, with their count and
    `classified_as` (how many of them the classifier took for each context). Plain means: a
    breakdown has a few folds per cell, too few for an interval."""
    return {
        "ctx_acc": 100.0 * float(np.mean([s.context_correct for s in scores])),
        "csr95": 100.0 * float(np.mean([s.success for s in scores])),
        "geom": float(np.mean([s.geom for s in scores])),
        "folds": len(scores),
        "classified_as": dict(sorted(Counter(s.predicted for s in scores if s.predicted).items())),
    }


def _by(
    rows: dict[str, list[Scored]], key: Callable[[str, RolloutScore, dict[str, Any]], tuple[str, ...]]
) -> dict[tuple[str, ...], dict[str, Any]]:
    """For each row of `CONTEXT_ROWS` and each key its folds have, `_fold_stats` of those folds."""
    out: dict[tuple[str, ...], dict[str, Any]] = {}
    for row in CONTEXT_ROWS:
        groups: dict[tuple[str, ...], list[RolloutScore]] = {}
        for split, score, extra in rows.get(row, []):
            groups.setdefault(key(split, score, extra), []).append(score)
        for k, scores in groups.items():
            out.setdefault(k, {})[row] = _fold_stats(scores)
    return out


def summarize_contexts(rows: dict[str, list[Scored]]) -> dict[str, dict[str, Any]]:
    """Per folding context (the paper's per-context breakdown, appendix): its split and, for each
    row of `CONTEXT_ROWS` that scored it, `_fold_stats` of its folds (what a missed fold became
    included)."""
    split_of = {score.context: split for row in CONTEXT_ROWS for split, score, _ in rows.get(row, [])}
    return {
        context: {"split": split_of[context], **stats}
        for (context,), stats in _by(rows, lambda _, score, __: (score.context,)).items()
    }


def summarize_garments(rows: dict[str, list[Scored]]) -> dict[str, dict[str, dict[str, Any]]]:
    """Per split and garment, for each row of `CONTEXT_ROWS`, `_fold_stats` of that garment's folds,
    and the same per start of the garment (`starts`, keyed by its k): whether a row's failures
    gather on one garment or start (one a demonstration cannot be carried onto, say: docs/sim.md,
    "Known limitations") or spread over all."""
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for (split, garment), stats in _by(rows, lambda split, score, _: (split, score.garment)).items():
        out.setdefault(split, {})[garment] = stats
    by_start = _by(rows, lambda split, score, extra: (split, score.garment, str(extra["start_k"])))
    for (split, garment, k), stats in by_start.items():
        out[split][garment].setdefault("starts", {})[k] = stats
    return out


def score_line(row: str, split: str, score: RolloutScore, extra: dict[str, Any]) -> dict[str, Any]:
    """One line of `scores.jsonl`: a scored fold of a row."""
    fields = {k: (v.to_json() if isinstance(v, (FirstGraspError, EventError)) else v) for k, v in extra.items()}
    return {
        "row": row,
        "split": split,
        "garment": score.garment,
        "context": score.context,
        "predicted": score.predicted,
        "context_correct": score.context_correct,
        "geom": score.geom,
        "quality": score.quality,
        "fold_rate": score.fold_rate,
        "success": score.success,
        **fields,
    }


def notes(fams: dict[Init, Family], summaries: dict[str, dict[str, Any]]) -> list[str]:
    """What the summary cannot report and why (said in the summary rather than failing)."""
    out = []
    if not out_of_sample(fams):
        fewest = min(len(e.runs) for fam in fams.values() for e in fam.entries.values())
        out.append(
            f"no oracle (out-of-sample) row: leaving an execution out needs >= {MIN_RUNS_OUT_OF_SAMPLE} "
            f"oracle executions per context, the bank has {fewest}"
        )
    for row in GRASP_ROWS:
        for split, summary in summaries.get(row, {}).items():
            if summary.get("first_grasp", {}).get("arms") == 0:
                out.append(
                    f"{row} ({split}): no first-grasp error: the bank's oracle executions of these "
                    "contexts record no grasp by either arm"
                )
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


def context_table(contexts: dict[str, dict[str, Any]], order: list[str]) -> str:
    """Markdown of the per-context summaries (`summarize_contexts`) in `order` (the spec's: seen
    contexts, then held-out ones); "" for fewer than two contexts (the main table says it all)."""
    if len(contexts) < 2:
        return ""

    def cells(row: dict[str, Any] | None, keys: tuple[str, ...]) -> list[str]:
        if row is None:
            return ["–"] * len(keys)
        return [f"{row[k]:.2f}" if k == "geom" else f"{row[k]:.1f}" for k in keys]

    lines = []
    for context in sorted(contexts, key=lambda label: order.index(label) if label in order else len(order)):
        c = contexts[context]
        policy = c.get("policy")
        folds = str((policy or c.get("do-nothing") or {}).get("folds", "–"))
        row = [context, c["split"], folds]
        row += cells(policy, ("ctx_acc", "csr95", "geom"))
        row += cells(c.get(OUT_OF_SAMPLE), ("csr95", "geom"))
        row += cells(c.get("do-nothing"), ("geom",))
        lines.append("| " + " | ".join(row) + " |")
    head = (
        "| context | split | folds | Ctx. Acc. ↑ | C-SR@95 ↑ | Geom. ↓ | oracle (out-of-sample): C-SR@95 | Geom. "
        "| do-nothing: Geom. |\n|---|---|---|---|---|---|---|---|---|\n"
    )
    return head + "\n".join(lines) + "\n"


def _cm(stats: dict[str, float] | None, key: str) -> str:
    return "–" if stats is None else f"{100 * stats[key]:.1f}"


def _per_split_table(
    rows: list[tuple[str, dict[str, Any]]],
    key: str,
    width: int,
    cells: Callable[[dict[str, Any]], list[str]],
    head: str,
) -> str:
    """Markdown of one summary field (`key`) of the rows that have it in a split: a line per row,
    `width` cells per split (`cells` of the field, "–" where a split lacks it); "" if no row has it."""
    lines = []
    for label, splits in rows:
        found = [splits.get(split, {}).get(key) for split in SPLITS]
        if not any(found):
            continue
        row = [c for f in found for c in (cells(f) if f else ["–"] * width)]
        lines.append(f"| {label} | " + " | ".join(row) + " |")
    return head + "\n".join(lines) + "\n" if lines else ""


def grasp_table(rows: list[tuple[str, dict[str, Any]]]) -> str:
    """Markdown of the first-grasp errors (xy, cm) of the rows that have them; "" if none does."""

    def cells(g: dict[str, Any]) -> list[str]:
        if not g["arms"]:
            return ["–"] * 4
        within = f"{100 * g['within_5cm']:.1f}"
        return [_cm(g["xy_m"], "mean"), _cm(g["xy_m"], "median"), within, f"{g['measured']}/{g['arms']}"]

    head = (
        "| first grasp, xy (cm) | Seen: mean ↓ | median ↓ | within 5 cm (%) ↑ | grasped/expected "
        "| Held-out: mean ↓ | median ↓ | within 5 cm (%) ↑ | grasped/expected |\n"
        "|---|---|---|---|---|---|---|---|---|\n"
    )
    return _per_split_table(rows, "first_grasp", 4, cells, head)


def primitive_table(rows: list[tuple[str, dict[str, Any]]]) -> str:
    """Markdown of the rows' `primitives` (fold halves recognised, %); "" if no row has them."""
    head = (
        "| classified fold has the shown fold's (%) | Seen: sleeve fold ↑ | body fold ↑ | both ↑ "
        "| Held-out: sleeve fold ↑ | body fold ↑ | both ↑ |\n|---|---|---|---|---|---|---|\n"
    )
    return _per_split_table(rows, "primitives", 3, lambda p: [f"{p[k]:.1f}" for k in ("sleeve", "body", "both")], head)


def _event_order(name: str) -> tuple[float, str]:
    """Table order: grasp 1, release 1, grasp 2, ..., then `LATER` (summary.json sorts keys by name)."""
    return (float("inf"), name) if name == LATER else (int(name.split()[1]), name)


def event_table(rows: list[tuple[str, dict[str, Any]]]) -> str:
    """Markdown of the event errors (xy, cm) of the rows that have them, one line per row and
    event (grasp 1, release 1, grasp 2, ..., later); "" if no row has them."""
    lines = []
    for label, splits in rows:
        events = [splits.get(split, {}).get("events") or {} for split in SPLITS]
        for name in sorted(set(events[0]) | set(events[1]), key=_event_order):
            cells = []
            for e in (events[0].get(name), events[1].get(name)):
                if not e:
                    cells += ["–"] * 5
                    continue
                within = "–" if e["within_5cm"] is None else f"{100 * e['within_5cm']:.1f}"
                made = f"{e['measured']}/{e['expected']}"
                cells += [_cm(e["xy_m"], "mean"), _cm(e["xy_m"], "median"), within, made, str(e["extra"])]
            lines.append(f"| {label}: {name} | " + " | ".join(cells) + " |")
    if not lines:
        return ""
    head = (
        "| grasps and releases, xy (cm) | Seen: mean ↓ | median ↓ | within 5 cm (%) ↑ | made/expected | extra "
        "| Held-out: mean ↓ | median ↓ | within 5 cm (%) ↑ | made/expected | extra |\n"
        "|---|---|---|---|---|---|---|---|---|---|---|\n"
    )
    return head + "\n".join(lines) + "\n"
