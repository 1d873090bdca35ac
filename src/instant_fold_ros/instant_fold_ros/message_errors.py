"""The error of every message <-> array conversion, shared by `conversions` and the image bridge
(`standins.image_bridge`), so callers catch one kind whichever module refused the message."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from instant_fold_core.errors import InvalidInputError
from instant_fold_core.validation import ValidationError, check_array


class MessageConversionError(InvalidInputError):
    """A message or array cannot be converted; the text names the field."""


def check_field(
    name: str, value: object, shape: tuple[int | None, ...], dtype: npt.DTypeLike | None = None
) -> np.ndarray:
    try:
        return check_array(name, value, shape, dtype)
    except ValidationError as exc:
        raise MessageConversionError(str(exc)) from None
