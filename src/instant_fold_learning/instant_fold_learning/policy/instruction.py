"""Instructions of the language-conditioned variant: a fold said in words, and the words as ids.

The paper's language baseline is told each fold by its description. A table of one learned vector
per mode id cannot say anything about a fold it never trained on, so its held-out rows would
measure nothing. Here the policy reads the instruction's words (`InstantFoldPolicy` embeds each
word, with its position, as one context token): the held-out folds are new sentences made of words
the training folds use ("diagonally", "shoulders down"), as they are new combinations of seen
primitives. Not a pretrained sentence encoder (no weights can be fetched here, and random ones
would carry nothing): the vocabulary is the training instructions' words, saved with the weights,
and an instruction with another word is refused.

An episode's instruction is its mode's description followed by its execution variant in words
(`instruction_text`), so that the variants of a mode (left sleeve first, right sleeve first) are
different instructions, as they are different folds.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from instant_fold_core.errors import InvalidInputError

#: Id of the padding word (an instruction shorter than the batch's longest).
PAD = 0
#: Sleeve order, the first letter of a variant (docs/sim.md, "Folding programs").
SLEEVE_ORDER = {"L": "left sleeve first", "R": "right sleeve first", "S": "both sleeves at once"}
#: Side-fold direction, the second letter of a sleeves-first side-fold variant.
SIDE_FOLD_DIRECTION = {"L": "fold the right half onto the left", "R": "fold the left half onto the right"}


class InstructionError(InvalidInputError):
    """An instruction the policy cannot read (empty, too long, a word it never learned)."""


def words(text: str) -> list[str]:
    """Lower-case words of `text` (letters only: punctuation and digits separate words)."""
    return re.findall(r"[a-z]+", text.lower())


def instruction_text(meta: Mapping[str, Any]) -> str:
    """The instruction of an episode's `meta`: its `description` (else the mode name's words)
    and its `variant` in words. A body-first side fold carries its direction in the mode, and
    its one variant says nothing more."""
    mode = str(meta["mode"])
    text = str(meta.get("description") or mode.replace("_", " "))
    variant = str(meta.get("variant") or "")
    if not variant or (meta.get("family") == "body_first" and "side_fold" in mode):
        return text
    try:
        clauses = [SLEEVE_ORDER[variant[0]]] + [SIDE_FOLD_DIRECTION[d] for d in variant[1:]]
    except KeyError:
        raise InstructionError(
            f"variant {variant!r} of mode {mode!r}: not a sleeve order and side-fold direction"
        ) from None
    return f"{text.rstrip('.')}, {', '.join(clauses)}."


class Vocabulary:
    """The words of the training instructions, each with an id (1..; 0 is padding)."""

    def __init__(self, words_: Iterable[str]) -> None:
        self.words = sorted(set(words_))
        self.ids = {w: i + 1 for i, w in enumerate(self.words)}

    @classmethod
    def of(cls, texts: Iterable[str]) -> Vocabulary:
        return cls(w for t in texts for w in words(t))

    def __len__(self) -> int:
        return len(self.words)

    def encode(self, text: str, max_words: int | None = None) -> np.ndarray:
        """Word ids int64 [L] of `text` (at most `max_words`); InstructionError naming what is wrong otherwise."""
        found = words(text)
        if not found:
            raise InstructionError(f"instruction {text!r}: no words")
        if max_words is not None and len(found) > max_words:
            raise InstructionError(f"instruction {text!r}: {len(found)} words, the policy reads at most {max_words}")
        unknown = sorted({w for w in found if w not in self.ids})
        if unknown:
            raise InstructionError(
                f"instruction {text!r}: words the policy never learned: {unknown} (it knows {len(self)} words)"
            )
        return np.array([self.ids[w] for w in found], np.int64)

    def to_dict(self) -> dict[str, list[str]]:
        return {"words": list(self.words)}

    @classmethod
    def from_dict(cls, data: Any) -> Vocabulary:
        if not isinstance(data, dict) or not isinstance(data.get("words"), list):
            raise InstructionError("vocabulary: expected {'words': [...]}")
        if not all(isinstance(w, str) and words(w) == [w] for w in data["words"]):
            raise InstructionError("vocabulary: every entry must be one lower-case word")
        return cls(data["words"])
