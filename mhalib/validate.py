"""Argument checks shared by the whole package: plain ints, numpy arrays and torch tensors.

Every error names the argument and the value it got, e.g.
``ValueError: d_model=512 is not divisible by num_heads=7``; a wrong type, dtype or device is a
``TypeError``, a wrong value or shape a ``ValueError``. Only numpy and the standard library are
imported at module level, so plain-int accounting and the numpy lessons never pay for torch.
"""

from __future__ import annotations

import numbers

import numpy as np

FLOAT_DTYPE_NAMES = ("float16", "bfloat16", "float32", "float64")


def positive_int(name: str, value) -> int:
    """Return ``value`` as a plain ``int`` if it is a positive integer, else raise."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an int, got {name}={value!r} ({type(value).__name__})")
    if value <= 0:
        raise ValueError(f"{name} must be positive, got {name}={value}")
    return int(value)


def non_negative_int(name: str, value) -> int:
    """Return ``value`` as a plain ``int`` if it is an integer >= 0, else raise."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an int, got {name}={value!r} ({type(value).__name__})")
    if value < 0:
        raise ValueError(f"{name} must be >= 0, got {name}={value}")
    return int(value)


def divisible(num_name: str, num: int, den_name: str, den: int) -> None:
    """Raise ``ValueError`` unless ``num`` is a multiple of ``den``."""
    if num % den != 0:
        raise ValueError(f"{num_name}={num} is not divisible by {den_name}={den}")


def boolean(name: str, value) -> bool:
    """Return ``value`` if it is a real ``bool`` (not 0/1, not a tensor)."""
    if not isinstance(value, bool):
        raise TypeError(f"{name} must be a bool, got {name}={value!r} ({type(value).__name__})")
    return value


def tensor(name: str, value, ndim: int | None = None, layout: str = ""):
    """Check that ``value`` is a floating-point ``torch.Tensor`` with ``ndim`` dimensions.

    ``layout`` (e.g. ``"(B, N, d_model)"``) is only used in the error message.
    """
    import torch

    if not isinstance(value, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {name} of type {type(value).__name__}")
    if not value.is_floating_point():
        raise TypeError(
            f"{name} must be a floating-point tensor ({', '.join(FLOAT_DTYPE_NAMES)}), "
            f"got {name}.dtype={value.dtype}"
        )
    if ndim is not None and value.dim() != ndim:
        raise ValueError(
            f"{name} must have {ndim} dimensions {layout}".rstrip()
            + f", got {name}.shape={tuple(value.shape)}"
        )
    return value


def same_dtype_and_device(**tensors) -> None:
    """Raise ``TypeError`` unless all keyword tensors share one dtype and one device."""
    items = list(tensors.items())
    first_name, first = items[0]
    for name, other in items[1:]:
        if other.dtype != first.dtype:
            raise TypeError(
                f"{name}.dtype={other.dtype} does not match {first_name}.dtype={first.dtype}"
            )
        if other.device != first.device:
            raise TypeError(
                f"{name}.device={other.device} does not match {first_name}.device={first.device}"
            )


def shape_equals(name: str, value, expected: tuple, layout: str = "") -> None:
    """Raise ``ValueError`` unless ``tuple(value.shape) == expected``."""
    if tuple(value.shape) != tuple(expected):
        hint = f" {layout}" if layout else ""
        raise ValueError(
            f"{name}.shape={tuple(value.shape)} does not match the expected shape "
            f"{tuple(expected)}{hint}"
        )


def attention_mask(name: str, mask, batch_size: int, num_heads: int, n_q: int, n_k: int):
    """Check a boolean mask (True = may attend) broadcastable to (B, H, N_q, N_k).

    Returns the mask unchanged; ``None`` passes through.
    """
    import torch

    if mask is None:
        return None
    if not isinstance(mask, torch.Tensor):
        raise TypeError(f"{name} must be a bool torch.Tensor, got type {type(mask).__name__}")
    if mask.dtype != torch.bool:
        raise TypeError(
            f"{name} must be a bool tensor (True = may attend), got {name}.dtype={mask.dtype}"
        )
    target = (batch_size, num_heads, n_q, n_k)
    if mask.dim() > 4 or not _broadcasts(tuple(mask.shape), target):
        raise ValueError(
            f"{name}.shape={tuple(mask.shape)} does not broadcast to (B, H, N_q, N_k)={target}"
        )
    return mask


def _broadcasts(shape: tuple, target: tuple) -> bool:
    """True if ``shape`` broadcasts to ``target`` without changing ``target``."""
    if len(shape) > len(target):
        return False
    for size, want in zip(reversed(shape), reversed(target)):
        if size not in (1, want):
            return False
    return True


# -- numpy arrays ------------------------------------------------------------------------------
def as_float_array(name: str, value) -> np.ndarray:
    """Return ``value`` as a floating ndarray (keeping float32/float64) or raise ``TypeError``."""
    array = np.asarray(value)
    if array.dtype == object or not (
        np.issubdtype(array.dtype, np.floating) or np.issubdtype(array.dtype, np.integer)
    ):
        raise TypeError(f"{name} must be a numeric array, got {name}.dtype={array.dtype}")
    if not np.issubdtype(array.dtype, np.floating):
        array = array.astype(np.float64)
    return array


def require_ndim(name: str, array: np.ndarray, at_least: int) -> None:
    """Raise ``ValueError`` unless ``array`` has at least ``at_least`` dimensions."""
    if array.ndim < at_least:
        raise ValueError(f"{name} must have at least {at_least} dimensions, "
                         f"got {name}.shape={tuple(array.shape)}")
