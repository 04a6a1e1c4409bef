"""Read back the rotation a learner's RoPE code applied (issue 22).

``rope_angles`` returns ``positions[n] * f_i``: dividing by the positions gives each pair's
frequency ``f_i`` and its exponent ``e_i = -log(f_i) / log(base)``, which the contract fixes at
``2 i / head_dim``; the exponents read back name the slip (all 0 from an integer division, a
linspace that ends at 1, ``i / head_dim``...).

``apply_rope`` turns each pair of features by an angle: with the contract's pairing (feature i
with i + head_dim/2) a right answer keeps each pair's length, and the angle it turned by is read
back with atan2. A pairing that does not keep lengths while the interleaved one (2i, 2i + 1)
does is named; so are angles of the wrong sign, angles pi/2 - theta (cos and sin swapped), and
angles from another exponent or from 0, 1, 2... instead of the positions.
"""

from __future__ import annotations

import math

import numpy as np

_DTYPES = {"float32": np.float32, "float64": np.float64}


def _values(exercise, case):
    from mhalib.checks.case_inputs import named_inputs

    dtype = _DTYPES.get(getattr(case, "dtype", "float32"))
    if dtype is None:
        return None
    values = named_inputs(exercise, case)
    return {k: (np.asarray(v, dtype=dtype).astype(np.float64)
                if isinstance(v, np.ndarray) and v.dtype.kind == "f" else v)
            for k, v in values.items()}


def _exponent_forms(d: int) -> list[tuple[np.ndarray, str]]:
    i = np.arange(d // 2, dtype=np.float64)
    half = max(d // 2 - 1, 1)
    return [
        (2 * i / d, ""),
        (np.zeros_like(i), "every pair turns by the position itself (exponent 0 for every "
                           "pair): 2 * i / head_dim was computed with integer division (//) "
                           "or left out; it must be a float division"),
        (i / half, "the exponents run from 0 to exactly 1 (like linspace(0, 1, head_dim // 2)); "
                   "they must stop at 1 - 2/head_dim: use arange(0, head_dim, 2) / head_dim"),
        (i / d, "the exponent is i / head_dim; the contract has 2 i / head_dim"),
        (4 * i / d, "the exponent is 4 i / head_dim, twice the contract's 2 i / head_dim (2 i "
                    "divided by head_dim / 2, or arange(0, head_dim, 2) doubled again)"),
        (np.ceil(2 * i / d), "the exponent is 1 for every pair but the first: an integer "
                             "division (-2 * i // head_dim rounds down to -1); divide as floats"),
        (2 * (i + 1) / d, "the pairs are counted from 1: pair 0 must turn by the position itself"),
        (-2 * i / d, "the exponent lost its minus sign: the frequencies must shrink with i"),
        (2 * i / (d - 2) if d > 2 else 2 * i, "the exponent divides by head_dim - 2 instead of "
                                              "head_dim"),
    ]


# an exponent a constant factor off, named: base ** x taken as exp(x * log(base)) with another
# logarithm, or the other way round
_LOG_FACTORS = {
    round(1 / np.log(10), 3): " (1 / ln 10: a log10 where the natural log belongs, as in "
                              "exp(-e * log10(base)); use math.log or torch.log)",
    round(1 / np.log(2), 3): " (1 / ln 2: a log2 where the natural log belongs; use math.log "
                             "or torch.log)",
    round(np.log(10), 3): " (ln 10: a natural log where log10 was meant, or 10 ** x for "
                          "exp(x))",
}


def _constant_factor(got: np.ndarray, right: np.ndarray) -> float | None:
    """``k`` when ``got`` is ``k * right`` on every pair but the first (whose exponent is 0)."""
    if len(right) < 3 or not np.allclose(got[0], 0, atol=2e-4):
        return None
    ratios = got[1:] / right[1:]
    k = float(ratios.mean())
    return k if k > 0 and not np.isclose(k, 1) and np.allclose(ratios, k, rtol=1e-3) else None


def _name_exponents(exponents: np.ndarray, d: int) -> tuple[str, str] | None:
    for form, sentence in _exponent_forms(d):
        if np.allclose(exponents, form, atol=2e-4):
            return (None if not sentence else ("readback:rope_exponent",
                                               f"read back from your output, {sentence}"))
    if np.allclose(exponents, 2 * np.arange(d // 2) / d, rtol=1e-2, atol=1e-3):
        return None  # the contract's exponents up to rounding (half precision): not the slip
    shown = ", ".join(f"{e:.3g}" for e in exponents[:4])
    right = ", ".join(f"{e:.3g}" for e in (2 * np.arange(d // 2) / d)[:4])
    factor = _constant_factor(exponents, 2 * np.arange(d // 2) / d)
    if factor is not None:
        return ("readback:rope_exponent",
                f"read back from your output, pair i turns by base ** (-e_i) per position with "
                f"e = {shown}, ...: {factor:.4g} times the contract's e_i = 2 i / head_dim = "
                f"{right}, ...{_LOG_FACTORS.get(round(factor, 3), '')}")
    return ("readback:rope_exponent",
            f"read back from your output, pair i turns by base ** (-e_i) per position with "
            f"e = {shown}, ... where the contract has e_i = 2 i / head_dim = {right}, ...")


def rope_angles_readback(exercise, case, output):
    values = _values(exercise, case)
    if values is None or not isinstance(output, np.ndarray) or output.ndim != 2:
        return None
    positions = np.asarray(values["positions"], dtype=np.float64)
    d, base = int(values["head_dim"]), float(values.get("base", 10000.0))
    if d % 2 or output.shape != (len(positions), d // 2) or base <= 1:
        return None
    rows = (positions > 0) & (positions < 1e4)
    if not rows.any() or not np.isfinite(output[rows]).all():
        return None
    freqs = output[rows].astype(np.float64) / positions[rows, None]  # (n, d/2)
    if not np.allclose(freqs, freqs[:1], rtol=1e-4, atol=1e-7) or (freqs[0] <= 0).any():
        return None
    found = _name_exponents(-np.log(freqs[0]) / math.log(base), d)
    return found


def _angles_of_pairs(x, y, first, second):
    """Angles (..., N, d/2) each pair (first[i], second[i]) turned by, or None when a pair's
    length changed (not a rotation)."""
    x1, x2, y1, y2 = x[..., first], x[..., second], y[..., first], y[..., second]
    if not np.allclose(np.hypot(y1, y2), np.hypot(x1, x2), rtol=2e-3, atol=1e-4):
        return None
    return np.arctan2(x1 * y2 - x2 * y1, x1 * y1 + x2 * y2)


def _unrotated_tail(x, y, positions) -> int | None:
    """``k`` when the output equals ``x`` on every feature from ``k`` on, and differs from it
    among the first ``k`` (at a position other than 0), else None."""
    d = x.shape[-1]
    same = np.isclose(y, x, rtol=1e-5, atol=1e-6).reshape(-1, d).all(axis=0)  # (d,)
    if same.all() or not same[-1]:
        return None
    k = d - int(np.argmin(same[::-1]))  # features k.. unchanged, k - 1 changed
    return k if 0 < k < d and (positions != 0).any() else None


def _same_angles(got, want) -> bool:
    return bool(np.allclose(np.angle(np.exp(1j * (got - want))), 0.0, atol=2e-3))


def apply_rope_readback(exercise, case, output):
    values = _values(exercise, case)
    if values is None or not isinstance(output, np.ndarray):
        return None
    x = values["x"]
    positions = np.asarray(values["positions"], dtype=np.float64)
    base = float(values.get("base", 10000.0))
    d = x.shape[-1]
    if d % 2 or output.shape != x.shape or not np.isfinite(output).all() or d < 4:
        return None
    y = output.astype(np.float64)
    kept = _unrotated_tail(x, y, positions)
    if kept is not None:
        return ("readback:rope_width", f"read back from your output, only the first {kept} "
                f"features of each head were rotated and the other {d - kept} came back as "
                f"they went in: the rotation used a width of {kept} where head_dim = {d} "
                "belongs (a size read off another axis of x, or a slice too short)")
    half = np.arange(d // 2)
    theta = _angles_of_pairs(x, y, half, half + d // 2)
    if theta is None:
        neighbours = _angles_of_pairs(x, y, 2 * half, 2 * half + 1)
        moving = positions != 0
        if neighbours is not None and (np.abs(neighbours[..., moving, :]) > 1e-6).any(
                axis=tuple(range(neighbours.ndim - 1))).all():  # (every pair turned)
            return ("readback:rope_pairs", "read back from your output, the rotated pairs are "
                    "(2i, 2i + 1), neighbours (the interleaved layout of GPT-J and Meta's "
                    "Llama); this course pairs feature i with i + head_dim/2 (rotate half)")
        return None
    used = np.abs(x[..., half]) + np.abs(x[..., half + d // 2]) > 1e-6
    theta = np.where(used, theta, 0.0)
    ranks = (1,) * (x.ndim - 2)
    for exponents, sentence in _exponent_forms(d):
        for pos, where in ((positions, ""), (np.arange(len(positions), dtype=np.float64),
                                             "arange")):
            table = pos[:, None] * base ** (-exponents)[None, :]  # (N, d/2)
            table = np.broadcast_to(table.reshape(ranks + table.shape), theta.shape)
            for turned, how in ((table, ""), (-table, "sign"), (np.pi / 2 - table, "swap")):
                if not _same_angles(theta, np.where(used, turned, 0.0)):
                    continue
                said = _rope_sentence(sentence, where, how)
                return None if said is None else ("readback:rope_rotation",
                                                  f"read back from your output, {said}")
    return None


def _rope_sentence(exponent_sentence: str, where: str, how: str) -> str | None:
    parts = []
    if how == "sign":
        parts.append("each pair turns the wrong way (by -angle): the sin terms have the wrong "
                     "signs; y_i = x_i cos - x_(i+d/2) sin and y_(i+d/2) = x_i sin + x_(i+d/2) "
                     "cos")
    if how == "swap":
        parts.append("each pair turns by pi/2 - angle: cos and sin were swapped")
    if where == "arange":
        parts.append("the angles use 0, 1, ..., N-1 instead of the positions passed in")
    if exponent_sentence:
        parts.append(exponent_sentence)
    return "; ".join(parts) if parts else None


READERS = {"rope_angles": rope_angles_readback, "apply_rope": apply_rope_readback}
