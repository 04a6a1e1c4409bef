"""The softmax Jacobian's diagonal, read back (issue 22): when the off-diagonal entries are
right, the diagonal the code wrote is fitted as a polynomial in p_i of degree at most 2, with
integer coefficients, and said beside the right one, p_i - p_i^2 (round X: ``1 - p_i``, the
factor p_i left out, had been said as "a term missing, doubled or overwritten")."""

from __future__ import annotations

import numpy as np

RIGHT = (0, 1, -1)  # p_i (1 - p_i) = 0 + 1 p_i - 1 p_i^2


def _polynomial(coefficients) -> str:
    """``(1, -1, 0)`` as ``1 - p_i``, ``(0, 2, -2)`` as ``2 p_i - 2 p_i^2``."""
    terms = []
    for power, c in enumerate(coefficients):
        if c == 0:
            continue
        size = f"{abs(c)}" if power == 0 else ("" if abs(c) == 1 else f"{abs(c)} ")
        terms.append(("-" if c < 0 else "+", size + ("", "p_i", "p_i^2")[power]))
    if not terms:
        return "0"
    head = ("-" if terms[0][0] == "-" else "") + terms[0][1]
    return head + "".join(f" {sign} {text}" for sign, text in terms[1:])


def _fitted(p: np.ndarray, diagonal: np.ndarray) -> tuple[int, ...] | None:
    """Integer coefficients (a, b, c) with a + b p + c p^2 equal to ``diagonal``, or None."""
    if len(np.unique(np.round(p, 9))) < 4:
        return None  # (three distinct values fit any quadratic)
    design = np.stack([np.ones_like(p), p, p * p], axis=1)  # (n, 3)
    solution, *_ = np.linalg.lstsq(design, diagonal, rcond=None)
    rounded = np.round(solution)
    if not np.allclose(solution, rounded, atol=1e-6) or np.abs(rounded).max() > 4:
        return None
    if not np.allclose(design @ rounded, diagonal, rtol=1e-7, atol=1e-9):
        return None
    return tuple(int(c) for c in rounded)


def jacobian_readback(exercise, case, output):
    if getattr(case, "must_raise", "") or not isinstance(output, np.ndarray):
        return None
    p = np.asarray(case.args[0] if case.args else case.kwargs.get("p"), dtype=np.float64)
    n = p.shape[-1] if p.ndim == 1 else 0
    if not n or output.shape != (n, n) or not np.isfinite(output).all():
        return None
    right = np.diag(p) - np.outer(p, p)  # (n, n)
    got = output.astype(np.float64)
    off = ~np.eye(n, dtype=bool)
    if not np.allclose(got[off], right[off], rtol=1e-6, atol=1e-9):
        return None
    found = _fitted(p, np.diagonal(got))
    if found is None or found == RIGHT:
        return None
    return ("readback:jacobian_diagonal", "read back from your output, the entries off the "
            "diagonal are right (-p_i p_j), and the diagonal holds "
            f"{_polynomial(found)} where p_i (1 - p_i) = p_i - p_i^2 belongs (the entry i == j "
            "is p_i (1 - p_i): the Kronecker delta's 1 times p_i, minus p_i p_i)")


READERS = {"softmax_jacobian": jacobian_readback}
