"""Argument checks shared by the numpy answer key: errors name the argument and its value."""

from __future__ import annotations

import numpy as np


def as_float_array(name: str, value) -> np.ndarray:
    """Return ``value`` as a floating ndarray (keeping float32/float64) or raise ``TypeError``."""
    array = np.asarray(value)
    if array.dtype == object or not (
        np.issubdtype(array.dtype, np.floating) or np.issubdtype(array.dtype, np.integer)
    ):
        raise TypeError(f"{name} must be a numeric array, got dtype={array.dtype}")
    if not np.issubdtype(array.dtype, np.floating):
        array = array.astype(np.float64)
    return array


def require_ndim(name: str, array: np.ndarray, at_least: int) -> None:
    if array.ndim < at_least:
        raise ValueError(
            f"{name} must have at least {at_least} dimensions, got shape {tuple(array.shape)}"
        )


def positive_int(name: str, value) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name} must be an int, got {name}={value!r}")
    if value <= 0:
        raise ValueError(f"{name} must be positive, got {name}={value}")
    return int(value)
