"""Held-out catalogue, lesson 09 (rope): rope_angles, apply_rope."""

import math

import numpy as np
import torch

from entry import Entry


def _even(head_dim):
    if head_dim % 2 != 0:
        raise ValueError(f"head_dim={head_dim} must be even")


# ======================================================================= rope_angles: wrong
def angles_no_odd_check(positions, head_dim, base=10000.0):
    i = torch.arange(head_dim // 2, dtype=torch.float64)  # slip: odd head_dim never rejected
    inv = base ** (-2 * i / head_dim)
    return (positions.double()[:, None] * inv[None, :]).float()


def angles_missing_two(positions, head_dim, base=10000.0):
    _even(head_dim)
    i = torch.arange(head_dim // 2, dtype=torch.float64)
    inv = base ** (-i / head_dim)  # slip: exponent -i/d, the factor 2 is lost
    return (positions.double()[:, None] * inv[None, :]).float()


def angles_index_from_one(positions, head_dim, base=10000.0):
    _even(head_dim)
    i = torch.arange(1, head_dim // 2 + 1, dtype=torch.float64)  # slip: i starts at 1
    inv = base ** (-2 * i / head_dim)
    return (positions.double()[:, None] * inv[None, :]).float()


def angles_transposed(positions, head_dim, base=10000.0):
    _even(head_dim)
    i = torch.arange(head_dim // 2, dtype=torch.float64)
    inv = base ** (-2 * i / head_dim)
    return torch.outer(inv, positions.double()).float()  # slip: (d/2, N), outer the wrong way


def angles_precedence(positions, head_dim, base=10000.0):
    _even(head_dim)
    i = torch.arange(head_dim // 2, dtype=torch.float64)
    inv = base ** -2 * i / head_dim  # slip: means (base ** -2) * i / head_dim
    return (positions.double()[:, None] * inv[None, :]).float()


def angles_cast_to_positions_dtype(positions, head_dim, base=10000.0):
    _even(head_dim)
    i = torch.arange(head_dim // 2, dtype=torch.float64)
    inv = base ** (-2 * i / head_dim)
    ang = positions[:, None] * inv[None, :]
    return ang.to(positions.dtype)  # slip: cast back to the integer dtype, truncating


# ======================================================================= rope_angles: right
def angles_numpy_f64(positions, head_dim, base=10000.0):
    if head_dim % 2:
        raise ValueError(f"head_dim={head_dim} is odd")
    pos = positions.cpu().numpy().astype(np.float64)
    expo = np.arange(0, head_dim, 2, dtype=np.float64) / head_dim  # 2i / d
    ang = pos[:, None] / np.power(float(base), expo)[None, :]
    return torch.from_numpy(ang).to(positions.device)


def angles_exp_log(positions, head_dim, base=10000.0):
    if head_dim % 2 == 1:
        raise ValueError("head_dim must be even, got head_dim=%d" % head_dim)
    half = head_dim // 2
    freqs = torch.exp(-math.log(base) * torch.arange(half, dtype=torch.float64) * 2.0 / head_dim)
    return torch.outer(positions.to(torch.float64), freqs).to(torch.float32)


# ======================================================================== apply_rope: wrong
def _angles64(positions, head_dim, base):
    i = torch.arange(head_dim // 2, dtype=torch.float64)
    return positions.double()[:, None] * (base ** (-2 * i / head_dim))[None, :]


def rope_adjacent_pairs(x, positions, base=10000.0):
    d = x.shape[-1]
    _even(d)
    ct = torch.promote_types(x.dtype, torch.float32)
    ang = _angles64(positions, d, base).to(ct)
    c, s = ang.cos(), ang.sin()
    xe, xo = x[..., 0::2].to(ct), x[..., 1::2].to(ct)  # slip: pairs (2i, 2i+1)
    ye = xe * c - xo * s
    yo = xe * s + xo * c
    return torch.stack([ye, yo], dim=-1).flatten(-2).to(x.dtype)


def rope_rotates_backwards(x, positions, base=10000.0):
    d = x.shape[-1]
    _even(d)
    h = d // 2
    ct = torch.promote_types(x.dtype, torch.float32)
    ang = _angles64(positions, d, base).to(ct)
    c, s = ang.cos(), ang.sin()
    x1, x2 = x[..., :h].to(ct), x[..., h:].to(ct)
    y1 = x1 * c + x2 * s  # slip: sin terms with the wrong signs (rotation by -angle)
    y2 = -x1 * s + x2 * c
    return torch.cat([y1, y2], -1).to(x.dtype)


def rope_angles_in_half(x, positions, base=10000.0):
    d = x.shape[-1]
    _even(d)
    h = d // 2
    i = torch.arange(h, dtype=x.dtype)
    ang = positions.to(x.dtype)[:, None] * base ** (-2 * i / d)  # slip: angles in x's (half) dtype
    c, s = ang.cos(), ang.sin()
    x1, x2 = x[..., :h], x[..., h:]
    return torch.cat([x1 * c - x2 * s, x1 * s + x2 * c], -1).to(x.dtype)


def rope_interleaved_cos(x, positions, base=10000.0):
    d = x.shape[-1]
    _even(d)
    h = d // 2
    ct = torch.promote_types(x.dtype, torch.float32)
    ang = _angles64(positions, d, base).to(ct)
    cos = ang.cos().repeat_interleave(2, dim=-1)  # slip: interleaved expansion, rotate-half layout
    sin = ang.sin().repeat_interleave(2, dim=-1)
    xc = x.to(ct)
    rot = torch.cat([-xc[..., h:], xc[..., :h]], dim=-1)
    return (xc * cos + rot * sin).to(x.dtype)


def rope_ignores_positions(x, positions, base=10000.0):
    n, d = x.shape[-2], x.shape[-1]
    _even(d)
    h = d // 2
    ct = torch.promote_types(x.dtype, torch.float32)
    ang = _angles64(torch.arange(n), d, base).to(ct)  # slip: 0..N-1 instead of positions
    c, s = ang.cos(), ang.sin()
    x1, x2 = x[..., :h].to(ct), x[..., h:].to(ct)
    return torch.cat([x1 * c - x2 * s, x1 * s + x2 * c], -1).to(x.dtype)


def rope_returns_float32(x, positions, base=10000.0):
    d = x.shape[-1]
    _even(d)
    h = d // 2
    ct = torch.promote_types(x.dtype, torch.float32)
    ang = _angles64(positions, d, base).to(ct)
    c, s = ang.cos(), ang.sin()
    x1, x2 = x[..., :h].to(ct), x[..., h:].to(ct)
    return torch.cat([x1 * c - x2 * s, x1 * s + x2 * c], -1)  # slip: not cast back to x.dtype


# ======================================================================== apply_rope: right
def rope_complex_polar(x, positions, base=10000.0):
    d = x.shape[-1]
    if d % 2:
        raise ValueError(f"head_dim={d} (x.shape[-1]) must be even")
    h = d // 2
    ang = _angles64(positions, d, base)
    rot = torch.polar(torch.ones_like(ang), ang)  # e^{i angle}, complex128
    z = torch.complex(x[..., :h].double(), x[..., h:].double()) * rot
    return torch.cat([z.real, z.imag], dim=-1).to(x.dtype)


def rope_rotation_matrices(x, positions, base=10000.0):
    d = x.shape[-1]
    if d % 2 != 0:
        raise ValueError(f"odd head_dim={d}")
    h = d // 2
    ang = _angles64(positions, d, base)  # (N, h)
    c, s = torch.cos(ang), torch.sin(ang)
    R = torch.stack([torch.stack([c, -s], -1), torch.stack([s, c], -1)], -2)  # (N, h, 2, 2)
    pairs = torch.stack([x[..., :h], x[..., h:]], dim=-1).double()  # (..., N, h, 2)
    y = torch.einsum("nhij,...nhj->...nhi", R, pairs)
    return torch.cat([y[..., 0], y[..., 1]], dim=-1).to(x.dtype)


A = "rope_angles"
R = "apply_rope"
ENTRIES = [
    Entry(A, "wrong", "odd_head_dim_accepted", "There is no check that head_dim is even, so an "
          "odd head_dim returns angles instead of raising ValueError.", angles_no_odd_check),
    Entry(A, "wrong", "exponent_missing_factor_two", "The exponent is -i / head_dim instead of "
          "-2 i / head_dim, so the frequencies fall off half as fast.", angles_missing_two),
    Entry(A, "wrong", "index_starts_at_one", "The pair index i runs from 1 to head_dim / 2 "
          "instead of from 0, so every column is one frequency too low and the first column is "
          "not the raw position.", angles_index_from_one),
    Entry(A, "wrong", "outer_product_transposed", "torch.outer(inv_freq, positions) gives "
          "(head_dim // 2, N) angles: the outer product is taken the wrong way round.",
          angles_transposed),
    Entry(A, "wrong", "power_precedence", "base ** -2 * i / head_dim is parsed as "
          "(base ** -2) * i / head_dim: the exponent needs parentheses.", angles_precedence),
    Entry(A, "wrong", "cast_to_integer_positions_dtype", "The angles are cast back to the "
          "positions' integer dtype, truncating them to whole radians.",
          angles_cast_to_positions_dtype),
    Entry(A, "right", "numpy_float64_division", None, angles_numpy_f64),
    Entry(A, "right", "exp_of_log_base", None, angles_exp_log),
    Entry(R, "wrong", "adjacent_pairs", "It rotates adjacent pairs (2i, 2i + 1), the original "
          "RoFormer layout, instead of pairing feature i with i + head_dim / 2.",
          rope_adjacent_pairs),
    Entry(R, "wrong", "rotates_backwards", "The sin terms have the wrong signs (y_i = x_i cos + "
          "x_{i+d/2} sin), so each pair is rotated by -angle.", rope_rotates_backwards),
    Entry(R, "wrong", "angles_in_half_precision", "The angles (and the rotation) are computed in x's dtype, so for "
          "half-precision inputs (bfloat16 worst) positions in the thousands lose whole radians "
          "before cos/sin.",
          rope_angles_in_half),
    Entry(R, "wrong", "cos_sin_repeat_interleave", "cos and sin are expanded with "
          "repeat_interleave(2) (the adjacent-pair layout) while the features are paired "
          "rotate-half style, so most features get another pair's angle.", rope_interleaved_cos),
    Entry(R, "wrong", "arange_instead_of_positions", "It builds the angles from torch.arange(N) "
          "and ignores the positions argument.", rope_ignores_positions),
    Entry(R, "wrong", "result_left_in_float32", "The rotation is computed in float32 and never "
          "cast back, so half-precision x comes back as float32.", rope_returns_float32),
    Entry(R, "right", "complex_polar", None, rope_complex_polar),
    Entry(R, "right", "rotation_matrices_einsum", None, rope_rotation_matrices),
]
