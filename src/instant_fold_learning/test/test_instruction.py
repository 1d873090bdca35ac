"""Instructions of the language variant: a context in words, and words as ids."""

from __future__ import annotations

import pytest

from instant_fold_learning.policy.instruction import InstructionError, Vocabulary, instruction_text, words

DOWN = "Fold both sleeves straight down along the sides of the body, then fold the shirt in half from side to side."


def test_an_instruction_says_the_variant_of_its_mode():
    meta = {"mode": "sleeves_down__side_fold", "variant": "SR", "description": DOWN, "family": "sleeves_first"}
    assert instruction_text(meta) == DOWN[:-1] + ", both sleeves at once, fold the left half onto the right."
    left = instruction_text({**meta, "variant": "LL"})
    assert left.endswith(", left sleeve first, fold the right half onto the left.")
    # A body-first side fold names its direction in the mode: its one variant adds nothing.
    side = {"mode": "body_side_fold_L__sleeves_down", "variant": "L", "description": "Fold it.", "family": "body_first"}
    assert instruction_text(side) == "Fold it."
    assert instruction_text({"mode": "bottom_up"}) == "bottom up"  # no description: the mode's words
    with pytest.raises(InstructionError, match="variant 'X'"):
        instruction_text({**meta, "variant": "X"})


def test_the_vocabulary_reads_only_its_words():
    vocabulary = Vocabulary.of(["Fold the hem up.", "fold the sleeves"])
    assert vocabulary.words == ["fold", "hem", "sleeves", "the", "up"] and words("Hem-UP, 2x") == ["hem", "up", "x"]
    assert vocabulary.encode("the sleeves up").tolist() == [4, 3, 5]  # 0 is padding
    assert Vocabulary.from_dict(vocabulary.to_dict()).ids == vocabulary.ids
    for text, why in (("fold the collar", r"never learned: \['collar'\]"), (" ,. ", "no words")):
        with pytest.raises(InstructionError, match=why):
            vocabulary.encode(text)
    with pytest.raises(InstructionError, match="at most 2"):
        vocabulary.encode("fold the hem", max_words=2)
    for bad in ({"words": ["two words"]}, {"vocabulary": []}, ["fold"]):
        with pytest.raises(InstructionError):
            Vocabulary.from_dict(bad)
