"""The fold split: held-out folds recombine trained primitives, and generation can name either side."""

from __future__ import annotations

import pytest

from instant_fold_sim import fold_split
from instant_fold_sim.fold_split import HELDOUT_CONTEXTS, TRAINING_CONTEXTS, check_split, primitives
from instant_fold_sim.generate import _resolve_modes
from instant_fold_sim.programs import MODES


def test_the_split_is_the_papers_16_context_setting():
    check_split()
    assert len(TRAINING_CONTEXTS) == 16
    assert sorted(MODES[c.partition("/")[0]].mode_id for c in HELDOUT_CONTEXTS) == [7, 8, 10]
    assert primitives("sleeves_diagonal__shoulders_down") == ("diagonal", "shoulders_down")
    assert primitives("body_side_fold_R__sleeves_down") == ("down", "side_fold")
    # The default models' folds before the split stay trained on, with their variants.
    assert {"sleeves_down__bottom_up/S", "body_bottom_up__sleeves_down/S", "body_side_fold_L__sleeves_down/L"} <= set(
        TRAINING_CONTEXTS
    )


@pytest.mark.parametrize(
    ("training", "heldout", "why"),
    [
        (TRAINING_CONTEXTS[1:], HELDOUT_CONTEXTS, "exactly one side"),
        (TRAINING_CONTEXTS, ("sleeves_diagonal__shoulders_down/S", *HELDOUT_CONTEXTS[1:]), "not a mode/variant"),
        (tuple(c.replace("/S", "/L") for c in TRAINING_CONTEXTS), HELDOUT_CONTEXTS, "sleeve orders"),
    ],
)
def test_a_broken_split_is_refused(monkeypatch, training, heldout, why):
    monkeypatch.setattr(fold_split, "TRAINING_CONTEXTS", training)
    monkeypatch.setattr(fold_split, "HELDOUT_CONTEXTS", heldout)
    with pytest.raises(ValueError, match=why):
        check_split()


def test_a_held_out_fold_needs_its_primitives_in_training(monkeypatch):
    # Without the only diagonal training fold, the held-out diagonal folds recombine nothing seen.
    training = tuple(c for c in TRAINING_CONTEXTS if "diagonal" not in c)
    heldout = (*HELDOUT_CONTEXTS, "sleeves_diagonal__side_fold/RR")
    monkeypatch.setattr(fold_split, "TRAINING_CONTEXTS", training)
    monkeypatch.setattr(fold_split, "HELDOUT_CONTEXTS", heldout)
    with pytest.raises(ValueError, match="primitives no training fold shows"):
        check_split()


def test_generation_names_each_side_of_the_split():
    assert _resolve_modes("training-folds") == list(TRAINING_CONTEXTS)
    assert _resolve_modes("held-out-folds") == list(HELDOUT_CONTEXTS)


def test_held_out_folds_are_said_with_words_the_training_folds_use():
    """The language baseline's held-out rows mean something only if it can read their instructions."""
    from instant_fold_learning.policy.instruction import Vocabulary
    from instant_fold_sim.programs import instruction as said

    def instruction(context: str) -> str:
        return said(*context.split("/"))

    vocabulary = Vocabulary.of(instruction(c) for c in TRAINING_CONTEXTS)
    for context in HELDOUT_CONTEXTS:
        assert len(vocabulary.encode(instruction(context), 40)) > 10
    texts = [instruction(c) for c in TRAINING_CONTEXTS + HELDOUT_CONTEXTS]
    assert len(set(texts)) == len(texts)  # every context is its own instruction
