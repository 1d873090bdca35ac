"""Cloth tokens as numpy arrays: what crosses process boundaries between tokenizer and policy."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from instant_fold_core.validation import ValidationError, check_array


class TokenArrays(NamedTuple):
    """N cloth tokens: positions [N, 3] (m, camera frame), features [N, D], valid [N] (bool)."""

    positions: np.ndarray
    features: np.ndarray
    valid: np.ndarray

    def validate(self, num_tokens: int | None = None, feature_dim: int | None = None) -> TokenArrays:
        """Check shapes/dtypes/finiteness (and N, D when given); at least one token must be valid."""
        check_array("tokens.positions", self.positions, (num_tokens, 3))
        n = self.positions.shape[0]
        check_array("tokens.features", self.features, (n, feature_dim))
        check_array("tokens.valid", self.valid, (n,), np.bool_)
        if not self.valid.any():
            raise ValidationError("tokens.valid: no valid token")
        return self
