"""Tolerant comparison of a learner's output with an expected one, with a readable difference."""

from __future__ import annotations

import numpy as np

# (rtol, atol) by the least precise float dtype involved. float64 inputs allow float32 arithmetic:
# any correct answer written with float32 intermediates must pass.
TOLERANCES = {"float64": (2e-4, 2e-5), "float32": (2e-3, 2e-4), "float16": (3e-2, 3e-2)}


def tolerance_for(*arrays) -> tuple[float, float]:
    names = [a.dtype.name for a in arrays if isinstance(a, np.ndarray) and a.dtype.kind == "f"]
    for name in ("float16", "float32"):
        if name in names:
            return TOLERANCES[name]
    return TOLERANCES["float64"]


def tolerance_of(exercise, case) -> tuple:
    """``(rtol, atol)`` the exercise compares ``case``'s output with: its own per-case
    tolerance where it has one (the torch exercises, by dtype), else its fixed rtol and atol
    (None: by dtype)."""
    if hasattr(exercise, "tolerance"):
        return tuple(exercise.tolerance(case))
    return exercise.rtol, exercise.atol


def describe(value) -> str:
    """A short description of a value: shape and dtype for arrays."""
    if isinstance(value, np.ndarray):
        return f"array of shape {value.shape} ({value.dtype})"
    if isinstance(value, tuple):
        return f"tuple of {len(value)}: (" + ", ".join(describe(v) for v in value) + ")"
    if isinstance(value, dict):
        return "dict with keys " + ", ".join(sorted(value))
    return f"{type(value).__name__} {value!r}"[:200]


def difference(expected, received, rtol=None, atol=None, path="output") -> str | None:
    """None when ``received`` matches ``expected``, else one sentence saying where it differs."""
    if isinstance(expected, tuple):
        if not isinstance(received, tuple) or len(received) != len(expected):
            return f"{path}: expected {describe(expected)}, got {describe(received)}"
        for i, (e, r) in enumerate(zip(expected, received)):
            problem = difference(e, r, rtol, atol, f"{path}[{i}]")
            if problem:
                return problem
        return None
    if isinstance(expected, dict):
        if not isinstance(received, dict):
            return f"{path}: expected {describe(expected)}, got {describe(received)}"
        missing = sorted(set(expected) - set(received))
        if missing:
            return f"{path}: missing keys {missing}"
        for key in expected:
            problem = difference(expected[key], received[key], rtol, atol, f"{path}[{key!r}]")
            if problem:
                return problem
        return None
    if isinstance(expected, np.ndarray) or isinstance(received, np.ndarray):
        return _array_difference(np.asarray(expected), received, rtol, atol, path)
    if isinstance(expected, bool) or expected is None or isinstance(expected, str):
        return None if received == expected else f"{path}: expected {expected!r}, got {received!r}"
    if isinstance(expected, (int, float)):
        if isinstance(received, bool) or not isinstance(received, (int, float)):
            return f"{path}: expected a number ({expected!r}), got {describe(received)}"
        return _array_difference(np.asarray(float(expected)), np.asarray(float(received)),
                                 rtol, atol, path)
    return None if received == expected else f"{path}: expected {expected!r}, got {received!r}"


def _array_difference(expected, received, rtol, atol, path) -> str | None:
    if not isinstance(received, np.ndarray):
        if isinstance(received, (int, float)) and not isinstance(received, bool):
            received = np.asarray(received)
        else:
            return f"{path}: expected {describe(expected)}, got {describe(received)}"
    if received.shape != expected.shape:
        return f"{path}: expected shape {expected.shape}, got shape {received.shape}"
    if expected.dtype == np.bool_ or received.dtype == np.bool_:
        if expected.dtype != received.dtype:
            return f"{path}: expected dtype {expected.dtype}, got {received.dtype}"
        wrong = np.argwhere(expected != received)
        if len(wrong):
            index = tuple(int(i) for i in wrong[0])
            return (f"{path}: {len(wrong)} of {expected.size} entries differ, first at {index}: "
                    f"expected {expected[index]}, got {received[index]}")
        return None
    if received.dtype.kind not in "fiu":
        return f"{path}: expected numbers, got dtype {received.dtype}"
    default_rtol, default_atol = tolerance_for(expected, received)
    rtol = default_rtol if rtol is None else rtol
    atol = default_atol if atol is None else atol
    e = expected.astype(np.float64)
    r = received.astype(np.float64)
    if np.isnan(r).any() and not np.isnan(e).any():
        index = tuple(int(i) for i in np.argwhere(np.isnan(r))[0])
        return f"{path}: contains NaN (first at {index}), expected {e[index]:.6g} there"
    magnitude = max(1.0, float(np.max(np.abs(e), initial=0.0, where=np.isfinite(e))))
    same_inf = ((e == r) & np.isinf(e)) | (np.isnan(e) & np.isnan(r))
    with np.errstate(invalid="ignore"):
        # an infinite expected value is matched only by the same infinity (same_inf): rtol * inf
        # would otherwise accept any number there
        close = same_inf | (np.isfinite(e)
                            & (np.abs(e - r) <= atol * magnitude + rtol * np.abs(e)))
    if close.all():
        return None
    with np.errstate(invalid="ignore"):
        gap = np.where(close, 0.0, np.abs(e - r))
    gap = np.nan_to_num(gap, nan=np.inf)
    index = np.unravel_index(int(np.argmax(gap)), gap.shape) if gap.ndim else ()
    index = tuple(int(i) for i in index)
    where = f" at index {index}" if index else ""
    return (f"{path}: {int((~close).sum())} of {close.size} values differ; largest difference"
            f"{where}: expected {e[index]:.6g}, got {r[index]:.6g}")


def nan_where_empty(wrong, received):
    """``received`` with NaN entries set to 0 where ``wrong`` is 0 (inside tuples too): a slip
    whose model gives a zero row where the learner's code divides 0 by 0 is the same slip. An
    output that is NaN everywhere is left as it is: nothing in it agrees with the model (round
    X: scores of 0 / 0 over no queries matched a model of zeros read above the diagonal)."""
    if isinstance(wrong, tuple) and isinstance(received, tuple) and len(wrong) == len(received):
        return tuple(nan_where_empty(w, r) for w, r in zip(wrong, received))
    if (isinstance(wrong, np.ndarray) and isinstance(received, np.ndarray)
            and wrong.shape == received.shape and received.dtype.kind == "f"
            and not np.isnan(received).all()):
        return np.where(np.isnan(received) & (wrong == 0), 0.0, received)
    return received
