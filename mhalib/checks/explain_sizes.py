"""Sizes and factors in a case's own words (``4 (num_heads)``, ``sqrt(d_head)``): shared by
the fallback diagnoses of :mod:`mhalib.checks.explain`, its error and its output-form readers."""

from __future__ import annotations

import math

import numpy as np


def names_of(value, named: dict[str, int]) -> list[str]:
    """The names in ``named`` whose size equals ``value``."""
    return [name for name, size in named.items() if size == value]


def say_size(value, named: dict[str, int]) -> str:
    """``"4 (num_heads)"`` or ``"4"``."""
    found = names_of(value, named)
    return f"{value} ({' = '.join(found[:2])})" if found else f"{value}"


CONSTANTS = {"2": 2.0, "4": 4.0, "1024": 1024.0, "2**20": 2.0 ** 20, "2**30": 2.0 ** 30,
             "1e3": 1e3, "1e6": 1e6, "1e9": 1e9}


def factor_name(ratio: float, named: dict[str, int], sizes_only: bool = False) -> str | None:
    """A constant factor in the case's words: 2, 1/2, d_head, sqrt(d_head), 1/sqrt(d_model),
    1024, bytes_per_element... (``sizes_only``: named by the case's sizes alone, as a scale
    is)."""
    names = all_factor_names(ratio, named, sizes_only)
    return names[0] if names else None


def all_factor_names(ratio: float, named: dict[str, int], sizes_only: bool = False) -> list[str]:
    """Every name :func:`factor_name` could give ``ratio``, constants first (``1/4`` and
    ``1/sqrt(d)`` where d = 16): a factor read on several cases is named by one they share."""
    if not np.isfinite(ratio) or ratio <= 0:
        return []
    candidates = {} if sizes_only else dict(CONSTANTS)
    for name, size in named.items():
        if size > 1:
            candidates.setdefault(name, float(size))
            candidates.setdefault(f"sqrt({name})", math.sqrt(size))
    found = []
    for name, value in candidates.items():
        if math.isclose(ratio, value, rel_tol=1e-3):
            found.append(name)
        elif math.isclose(ratio, 1 / value, rel_tol=1e-3):
            found.append(f"1/{name}")
    return found


def as_many_as(value: int, named: dict[str, int]) -> str:
    """``"8 (as many as G*d_head)"``: a size an error reports, beside the case's sizes it equals
    (which it may equal by chance: round P's 8 keys were 2 tokens x 4 heads, not N)."""
    found = names_of(value, named)
    return f"{value} (as many as {' = '.join(found[:2])})" if found else f"{value}"


def quotients(named: dict[str, int]) -> dict[str, int]:
    """``{"x.shape[2] / num_heads": 4}``: the sizes one of the case's sizes divided by another
    gives (a head width), when it divides."""
    return {f"{a} / {b}": va // vb for a, va in named.items() for b, vb in named.items()
            if a != b and 1 < vb < va and va % vb == 0 and "/" not in a + b}


def products(named: dict[str, int], ones: bool = False) -> dict[str, int]:
    """``{"x.shape[1]*x.shape[3]": 12}``: the products of two of the case's sizes (each above
    1 unless ``ones``), which a merged width is."""
    plain = [(a, va) for a, va in named.items()
             if (va > 1 or ones and va == 1) and not set("/*") & set(a)]
    return {f"{a}*{b}": va * vb for i, (a, va) in enumerate(plain) for b, vb in plain[i + 1:]}
