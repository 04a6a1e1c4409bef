"""Properties a right output has, checked on the recorded failing outputs (issue 22).

A :class:`Property` states one idea of the lesson (rows of weights sum to 1, a count is a plain
int, weights on hidden keys are 0...) as ``broken(case, received) -> str | None``: None where it
holds, else where it fails (an index, a value). The judge asks an exercise's ``properties()``
only when no mistake model matched; the first property a failing output breaks is named with
the input and what it implies about the code.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np


@dataclass(frozen=True)
class Property:
    name: str
    statement: str  # what holds for every right answer
    implication: str  # what breaking it says about the code
    broken: Callable[[Any, Any], str | None]


def first_broken(exercise, properties: list[Property], recorded) -> tuple[str, str] | None:
    """``(flag, message)`` of the first property broken on a failing output, or None."""
    for prop in properties:
        for case, result in recorded:
            try:
                where = prop.broken(case, result.get("output"))
            except Exception:
                where = None
            if where:
                return (f"property:{prop.name}",
                        f"{prop.statement}, but on the case '{case.label}' {where}: "
                        f"{prop.implication}")
    return None


def component(received, index: int | None):
    """``received[index]`` of a tuple output (the output itself for None)."""
    if index is None:
        return received
    return received[index] if isinstance(received, tuple) and len(received) > index else None


def rows_sum_to_one(index: int | None = None, axis: int = -1) -> Property:
    """Rows of weights (along ``axis``) sum to 1, except rows with no allowed key (all 0)."""
    def broken(case, received):
        w = component(received, index)
        if not isinstance(w, np.ndarray) or w.dtype.kind != "f" or not np.isfinite(w).all():
            return None
        sums = w.sum(axis=axis)
        bad = ~(np.isclose(sums, 1.0, atol=1e-3) | np.isclose(sums, 0.0, atol=1e-6))
        if not bad.any():
            return None
        at = tuple(int(i) for i in np.argwhere(bad)[0])
        return f"the weights along axis {axis} at {at} sum to {float(sums[at]):.4g}"
    return Property("rows_sum_to_one", "every row of weights sums to 1 (over the keys)",
                    "the normalisation is missing, or is taken over the wrong axis.", broken)


def nonnegative(index: int | None = None) -> Property:
    def broken(case, received):
        w = component(received, index)
        if not isinstance(w, np.ndarray) or w.dtype.kind != "f" or not (w < -1e-9).any():
            return None
        at = tuple(int(i) for i in np.argwhere(w < -1e-9)[0])
        return f"the weight at {at} is {float(w[at]):.4g}"
    return Property("nonnegative", "weights are never negative",
                    "something other than exp (or a softmax) made them.", broken)


def plain_int(path: str = "the count") -> Property:
    """A count is a plain int (not a float, even 2.0 * d), in a dict or alone."""
    def broken(case, received):
        values = received.items() if isinstance(received, dict) else [(None, received)]
        for key, value in values:
            if isinstance(value, float) or isinstance(value, np.floating):
                where = f"[{key!r}]" if key is not None else ""
                return f"{path}{where} is the float {value!r}"
        return None
    return Property("plain_int", "FLOP, parameter and byte counts are plain Python ints",
                    "a '/', math.pow, a float literal (0.0, 2.0) or a float factor makes a "
                    "float; use //, ** and int literals and factors (int(...) at the end also "
                    "works).", broken)
