"""Held-out catalogue, lesson 09 (RoPE): rope_angles, apply_rope."""

import math

import numpy as np
import torch

from entry import Entry


def _odd_check(head_dim):
    if head_dim % 2 != 0:
        raise ValueError(f"head_dim={head_dim} is odd")


# ============================================================ rope_angles: wrong
def angles_missing_factor_two(positions, head_dim, base=10000.0):
    _odd_check(head_dim)
    i = torch.arange(head_dim // 2, dtype=torch.float64)
    inv_freq = base ** (-i / head_dim)
    return (positions.double()[:, None] * inv_freq[None, :]).float()


def angles_index_from_one(positions, head_dim, base=10000.0):
    _odd_check(head_dim)
    i = torch.arange(1, head_dim // 2 + 1, dtype=torch.float64)
    inv_freq = base ** (-2 * i / head_dim)
    return (positions.double()[:, None] * inv_freq).float()


def angles_no_odd_check(positions, head_dim, base=10000.0):
    i = torch.arange(head_dim // 2, dtype=torch.float64)
    inv_freq = torch.pow(torch.tensor(float(base), dtype=torch.float64), -2.0 * i / head_dim)
    return torch.outer(positions.double(), inv_freq).float()


def angles_floor_division(positions, head_dim, base=10000.0):
    if head_dim % 2:
        raise ValueError(f"head_dim={head_dim} must be even")
    i = torch.arange(head_dim // 2)
    inv_freq = base ** (-2 * i // head_dim)
    return positions.double()[:, None] * inv_freq.double()[None, :]


def angles_precedence(positions, head_dim, base=10000.0):
    if head_dim % 2:
        raise ValueError(f"head_dim={head_dim} must be even")
    i = torch.arange(head_dim // 2, dtype=torch.float64)
    inv_freq = base ** -2 * i / head_dim
    return (positions.double()[:, None] * inv_freq[None, :]).to(torch.float32)


def angles_transposed_outer(positions, head_dim, base=10000.0):
    if head_dim % 2:
        raise ValueError(f"head_dim={head_dim} must be even")
    i = torch.arange(head_dim // 2, dtype=torch.float64)
    inv_freq = base ** (-2 * i / head_dim)
    return (inv_freq[:, None] * positions.double()[None, :]).float()


# ============================================================ rope_angles: right
def angles_numpy_float64(positions, head_dim, base=10000.0):
    if head_dim % 2 == 1:
        raise ValueError(f"head_dim={head_dim} is odd: RoPE needs pairs")
    pos = np.asarray(positions.cpu(), dtype=np.float64)
    expo = np.arange(0, head_dim, 2, dtype=np.float64) / head_dim  # 2i / d
    ang = np.multiply.outer(pos, np.power(float(base), -expo))
    return torch.from_numpy(ang).to(positions.device)


def angles_exp_log(positions, head_dim, base=10000.0):
    if head_dim % 2:
        raise ValueError(f"head_dim={head_dim} is odd")
    half = head_dim // 2
    freq = torch.exp(-math.log(base) * torch.arange(half, dtype=torch.float64) * (2.0 / head_dim))
    ang = positions.to(torch.float64).unsqueeze(-1) * freq
    return ang.to(torch.float32)


# ============================================================ apply_rope: helpers
def _angles64(positions, d, base):
    i = torch.arange(d // 2, dtype=torch.float64)
    return positions.to(torch.float64)[:, None] * (float(base) ** (-2.0 * i / d))[None, :]


# ============================================================ apply_rope: wrong
def rope_adjacent_pairs(x, positions, base=10000.0):
    d = x.shape[-1]
    _odd_check(d)
    ct = torch.promote_types(x.dtype, torch.float32)
    ang = _angles64(positions, d, base).to(ct)
    c, s = ang.cos(), ang.sin()
    xe, xo = x[..., 0::2].to(ct), x[..., 1::2].to(ct)
    ye = xe * c - xo * s
    yo = xe * s + xo * c
    return torch.stack([ye, yo], dim=-1).flatten(-2).to(x.dtype)


def rope_reversed_rotation(x, positions, base=10000.0):
    d = x.shape[-1]
    _odd_check(d)
    ct = torch.promote_types(x.dtype, torch.float32)
    ang = _angles64(positions, d, base).to(ct)
    cos, sin = torch.cos(ang), torch.sin(ang)
    h = d // 2
    x1, x2 = x[..., :h].to(ct), x[..., h:].to(ct)
    y1 = x1 * cos + x2 * sin
    y2 = -x1 * sin + x2 * cos
    return torch.cat([y1, y2], dim=-1).to(x.dtype)


def rope_angles_in_x_dtype(x, positions, base=10000.0):
    d = x.shape[-1]
    _odd_check(d)
    ct = torch.promote_types(x.dtype, torch.float32)
    ang = _angles64(positions, d, base).to(x.dtype)
    cos, sin = torch.cos(ang).to(ct), torch.sin(ang).to(ct)
    h = d // 2
    x1, x2 = x[..., :h].to(ct), x[..., h:].to(ct)
    return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1).to(x.dtype)


def rope_base_not_passed(x, positions, base=10000.0):
    d = x.shape[-1]
    _odd_check(d)
    ct = torch.promote_types(x.dtype, torch.float32)
    ang = _angles64(positions, d, 10000.0).to(ct)
    cos, sin = torch.cos(ang), torch.sin(ang)
    h = d // 2
    x1, x2 = x[..., :h].to(ct), x[..., h:].to(ct)
    return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1).to(x.dtype)


def rope_no_odd_check(x, positions, base=10000.0):
    d = x.shape[-1]
    ct = torch.promote_types(x.dtype, torch.float32)
    i = torch.arange(d // 2, dtype=torch.float64)
    ang = (positions.double()[:, None] * base ** (-2.0 * i / d)).to(ct)
    cos, sin = torch.cos(ang), torch.sin(ang)
    h = d // 2
    x1, x2 = x[..., :h].to(ct), x[..., h:].to(ct)
    return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1).to(x.dtype)


def rope_overwritten_first_half(x, positions, base=10000.0):
    d = x.shape[-1]
    _odd_check(d)
    ct = torch.promote_types(x.dtype, torch.float32)
    ang = _angles64(positions, d, base).to(ct)
    cos, sin = torch.cos(ang), torch.sin(ang)
    h = d // 2
    x1, x2 = x[..., :h].to(ct), x[..., h:].to(ct)
    x1 = x1 * cos - x2 * sin
    x2 = x1 * sin + x2 * cos
    return torch.cat([x1, x2], dim=-1).to(x.dtype)


# ============================================================ apply_rope: right
def rope_complex(x, positions, base=10000.0):
    d = x.shape[-1]
    if d % 2:
        raise ValueError(f"head_dim={d} is odd")
    h = d // 2
    z = torch.complex(x[..., :h].double(), x[..., h:].double())  # x_i + i x_{i+d/2}
    rot = torch.polar(torch.ones(positions.shape[0], h, dtype=torch.float64),
                      _angles64(positions, d, base))
    w = z * rot
    return torch.cat([w.real, w.imag], dim=-1).to(x.dtype)


def rope_rotation_matrix(x, positions, base=10000.0):
    d = x.shape[-1]
    if d % 2 != 0:
        raise ValueError(f"head_dim={d} is odd; RoPE needs an even head_dim")
    h = d // 2
    n = positions.shape[0]
    ang = _angles64(positions, d, base)
    rot = torch.zeros(n, d, d, dtype=torch.float64)
    idx = torch.arange(h)
    rot[:, idx, idx] = ang.cos()
    rot[:, idx, idx + h] = -ang.sin()
    rot[:, idx + h, idx] = ang.sin()
    rot[:, idx + h, idx + h] = ang.cos()
    y = torch.einsum("nij,...nj->...ni", rot, x.double())
    return y.to(x.dtype)


A = "rope_angles"
R = "apply_rope"
ENTRIES = [
    Entry(A, "wrong", "missing_factor_two", "The exponent is -i / head_dim instead of "
          "-2 i / head_dim, so the frequencies fall off half as fast as RoPE's.",
          angles_missing_factor_two),
    Entry(A, "wrong", "index_from_one", "The pair index runs 1 .. head_dim/2 instead of "
          "0 .. head_dim/2 - 1, so the first pair does not turn at one radian per position and "
          "every frequency is shifted by one step.", angles_index_from_one),
    Entry(A, "wrong", "no_odd_check", "There is no check on head_dim: an odd head_dim "
          "silently returns angles instead of raising ValueError.", angles_no_odd_check),
    Entry(A, "wrong", "floor_division_exponent", "The exponent is written -2 * i // head_dim "
          "on an integer arange: floor division where true division belongs, so every "
          "exponent is 0 or -1.", angles_floor_division),
    Entry(A, "wrong", "precedence_base_power", "base ** -2 * i / head_dim parses as "
          "(base ** -2) * i / head_dim: the exponent needs parentheses, "
          "base ** (-2 * i / head_dim).", angles_precedence),
    Entry(A, "wrong", "transposed_outer_product", "The outer product is taken frequencies x "
          "positions, giving (head_dim // 2, N) instead of (N, head_dim // 2).",
          angles_transposed_outer),
    Entry(A, "right", "numpy_float64", None, angles_numpy_float64),
    Entry(A, "right", "exp_log_frequencies", None, angles_exp_log),
    Entry(R, "wrong", "adjacent_pairs", "It rotates adjacent features (2i, 2i+1), the GPT-J "
          "interleaved layout, instead of pairing feature i with i + head_dim/2 (rotate half).",
          rope_adjacent_pairs),
    Entry(R, "wrong", "reversed_rotation", "The sin terms have the wrong signs (y_i = x_i cos + "
          "x_{i+d/2} sin, y_{i+d/2} = -x_i sin + x_{i+d/2} cos): it rotates by -angle, the "
          "transposed rotation matrix.", rope_reversed_rotation),
    Entry(R, "wrong", "angles_cast_to_x_dtype", "The angles are cast to x's dtype before cos "
          "and sin, so in half precision (bfloat16 most of all) a large position times a "
          "frequency is rounded by whole radians and the rotation is wrong.", rope_angles_in_x_dtype),
    Entry(R, "wrong", "base_not_passed", "The angles are computed with the default base 10000 "
          "instead of the base argument, so any other base is ignored.", rope_base_not_passed),
    Entry(R, "wrong", "no_odd_check", "No ValueError for an odd head_dim: the two halves have "
          "different widths and the product raises a RuntimeError (shape mismatch) instead.",
          rope_no_odd_check),
    Entry(R, "wrong", "overwritten_first_half_reused", "x1 is overwritten by its rotated value "
          "and then reused to compute the partner, so y_{i+d/2} uses y_i instead of the "
          "original x_i.", rope_overwritten_first_half),
    Entry(R, "right", "complex_polar", None, rope_complex),
    Entry(R, "right", "rotation_matrix_einsum", None, rope_rotation_matrix),
]
