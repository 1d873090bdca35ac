"""The fold split: which folding contexts the default models train on and which are held out.

The paper's main benchmark trains on 8 sleeves-first modes and holds out modes 7, 8 and 10
(diagonal sleeves + shoulders down, diagonal sleeves + bottom up, centre sleeves + shoulders down);
its context-scaling study adds the body-first modes 16-19 for 16 training contexts. A held-out
fold there is new as a whole but made of primitives training shows: the diagonal sleeve fold
appears in mode 9, the centre sleeve fold in modes 11-12, shoulders-down and bottom-up in
several modes. The split here is that 16-context setting: every folding mode except 7, 8 and 10
is trained on.

One execution variant per mode (a context is `mode/variant`; docs/sim.md, "The fold split"):
the CPU budget buys about three episodes per garment and context, and a mode's variants are
different folds to the policy (left-first is not right-first), so more variants per mode would
leave fewer than two episodes per garment and context, too few for a demonstration and a
different query. The variants are chosen so that training still shows every execution order:
simultaneous, left-first and right-first sleeves, side folds in both directions. The three modes
of the default models before the split (2/S, 16/S, 18/L) keep their variant, so the CPU
benchmark's seen folds stay seen.
"""

from __future__ import annotations

from .programs import BODY_SUBACTIONS, FOLDING_MODES, MODES, SLEEVE_SUBACTIONS

#: Contexts the default models train on: every folding mode but the held-out ones, one variant each.
TRAINING_CONTEXTS: tuple[str, ...] = (
    "sleeves_down__shoulders_down/S",
    "sleeves_down__bottom_up/S",
    "sleeves_down__side_fold/SR",
    "sleeves_cross__shoulders_down/L",
    "sleeves_cross__bottom_up/R",
    "sleeves_cross__side_fold/LL",
    "sleeves_diagonal__side_fold/RR",
    "sleeves_center__bottom_up/L",
    "sleeves_center__side_fold/LR",
    "sleeves_asymmetric__shoulders_down/R",
    "sleeves_asymmetric__bottom_up/L",
    "sleeves_asymmetric__side_fold/RL",
    "body_bottom_up__sleeves_down/S",
    "body_bottom_up__sleeves_center/R",
    "body_side_fold_L__sleeves_down/L",
    "body_side_fold_R__sleeves_down/R",
)

#: The paper's held-out folds (modes 7, 8, 10), never in pretraining or policy training.
HELDOUT_CONTEXTS: tuple[str, ...] = (
    "sleeves_diagonal__shoulders_down/L",
    "sleeves_diagonal__bottom_up/R",
    "sleeves_center__shoulders_down/R",
)


def mode_of(context: str) -> str:
    """The mode name of a `mode/variant` context."""
    return context.partition("/")[0]


def primitives(mode: str) -> tuple[str, str]:
    """(sleeve subaction, body subaction) a folding mode is composed of, whatever its order."""
    m = MODES[mode]
    sleeve = next(s for s in SLEEVE_SUBACTIONS if f"sleeves_{s}" in m.name)
    body = next(b for b in BODY_SUBACTIONS if b in m.name)
    return sleeve, body


def check_split() -> None:
    """Raise ValueError unless the split is what the docs say: valid contexts, every folding mode
    in exactly one side, each held-out fold made of primitives that training folds show."""
    contexts = TRAINING_CONTEXTS + HELDOUT_CONTEXTS
    for context in contexts:
        mode, _, variant = context.partition("/")
        if mode not in MODES or variant not in MODES[mode].variants:
            raise ValueError(f"fold split: {context!r} is not a mode/variant of the mode bank")
    modes = [mode_of(c) for c in contexts]
    if sorted(modes) != sorted(FOLDING_MODES):
        raise ValueError("fold split: every folding mode must be in exactly one side of the split")
    seen = {p for c in TRAINING_CONTEXTS for p in primitives(mode_of(c))}
    for context in HELDOUT_CONTEXTS:
        missing = set(primitives(mode_of(context))) - seen
        if missing:
            raise ValueError(f"fold split: held-out {context!r} uses primitives no training fold shows: {missing}")
    sleeves_first = [c.partition("/")[2] for c in TRAINING_CONTEXTS if MODES[mode_of(c)].family == "sleeves_first"]
    orders = {v[0] for v in sleeves_first}
    directions = {v[1] for v in sleeves_first if len(v) == 2}
    if orders != {"L", "R", "S"} or directions != {"L", "R"}:
        raise ValueError(f"fold split: training shows sleeve orders {orders} and side-fold directions {directions}")
