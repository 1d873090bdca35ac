"""Array validation with errors that name the offending field.

Every boundary (message conversions, dataset readers, model inputs) checks its arrays through
`check_array`, so a malformed input is reported as e.g. ``ClothTokens.positions: expected shape
(64, 3), got (63, 3)`` instead of failing deep inside a model.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from instant_fold_core.errors import InvalidInputError


class ValidationError(InvalidInputError):
    """An array does not have the shape, dtype or values its field requires."""


def check_array(
    name: str,
    value: object,
    shape: Sequence[int | None],
    dtype: npt.DTypeLike | None = None,
    *,
    finite: bool = True,
) -> np.ndarray:
    """Return `value` as an ndarray after checking it.

    Args:
        name: field name used in error messages.
        value: the array to check (anything `np.asarray` accepts is *not* accepted: it must
            already be an ndarray, so list/scalar mix-ups surface here).
        shape: expected shape; `None` entries accept any size on that axis.
        dtype: expected dtype (exact match), or None to accept any.
        finite: for floating arrays, reject NaN and infinite values.
    """
    if not isinstance(value, np.ndarray):
        raise ValidationError(f"{name}: expected a numpy array, got {type(value).__name__}")
    if value.ndim != len(shape) or any(s is not None and s != v for s, v in zip(shape, value.shape, strict=True)):
        want = ", ".join("*" if s is None else str(s) for s in shape)
        raise ValidationError(f"{name}: expected shape ({want}{',' if len(shape) == 1 else ''}), got {value.shape}")
    if dtype is not None and value.dtype != np.dtype(dtype):
        raise ValidationError(f"{name}: expected dtype {np.dtype(dtype)}, got {value.dtype}")
    if finite and value.dtype.kind in "fc" and value.size and not np.isfinite(value).all():
        bad = int(np.size(value) - np.count_nonzero(np.isfinite(value)))
        raise ValidationError(f"{name}: contains {bad} NaN or infinite value(s)")
    return value
