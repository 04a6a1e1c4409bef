"""Held-out learners' answers, lesson 09 (RoPE): rope_angles, apply_rope."""

import math

import numpy as np
import torch

from entry import Entry


# ============================================================ rope_angles -- wrong
def angles_no_odd_check(positions, head_dim, base=10000.0):
    half = head_dim // 2
    i = torch.arange(half, dtype=torch.float64)
    freqs = base ** (-2 * i / head_dim)
    return (positions.double()[:, None] * freqs[None, :]).float()


def angles_step_two_doubled(positions, head_dim, base=10000.0):
    if head_dim % 2 != 0:
        raise ValueError(f"head_dim={head_dim} must be even")
    i = torch.arange(0, head_dim, 2, dtype=torch.float64)  # 0, 2, 4, ...
    inv_freq = 1.0 / base ** (2 * i / head_dim)
    return torch.outer(positions.to(torch.float64), inv_freq).to(torch.float32)


def angles_floor_division(positions, head_dim, base=10000.0):
    if head_dim % 2:
        raise ValueError(f"head_dim={head_dim} is odd")
    i = torch.arange(head_dim // 2)
    expo = (-2 * i // head_dim).double()
    inv_freq = base ** expo
    return positions.double().unsqueeze(1) * inv_freq.unsqueeze(0)


def angles_precedence(positions, head_dim, base=10000.0):
    if head_dim % 2 == 1:
        raise ValueError(f"head_dim={head_dim} is odd: RoPE needs pairs")
    i = torch.arange(head_dim // 2, dtype=torch.float64)
    theta = base ** -2 * i / head_dim
    return (positions.to(torch.float64)[:, None] * theta).float()


def angles_transposed(positions, head_dim, base=10000.0):
    if head_dim % 2:
        raise ValueError(f"head_dim={head_dim} is odd")
    i = torch.arange(head_dim // 2, dtype=torch.float64)
    inv_freq = torch.pow(torch.tensor(float(base), dtype=torch.float64), -2.0 * i / head_dim)
    return (inv_freq[:, None] * positions.double()[None, :]).float()


def angles_linspace(positions, head_dim, base=10000.0):
    if head_dim % 2:
        raise ValueError(f"head_dim={head_dim} is odd")
    frac = torch.linspace(0.0, 1.0, head_dim // 2, dtype=torch.float64)  # meant 2i/d
    inv_freq = base ** (-frac)
    return (positions.double()[:, None] * inv_freq).float()


# ============================================================ rope_angles -- right
def angles_numpy_float64(positions, head_dim, base=10000.0):
    if head_dim % 2 != 0:
        raise ValueError(f"head_dim={head_dim} is odd: no partner for the last feature")
    pos = np.array([int(p) for p in positions], dtype=np.float64)
    expo = -2.0 * np.arange(head_dim // 2, dtype=np.float64) / head_dim
    ang = np.multiply.outer(pos, np.power(float(base), expo)).reshape(len(pos), head_dim // 2)
    return torch.from_numpy(ang)


def angles_exp_log(positions, head_dim, base=10000.0):
    if head_dim % 2:
        raise ValueError(f"head_dim={head_dim} is odd")
    half = head_dim // 2
    log_base = math.log(base)
    freqs = torch.exp(torch.arange(half, dtype=torch.float64) * (-2.0 * log_base / head_dim))
    out = torch.empty((positions.shape[0], half), dtype=torch.float64)
    for n in range(positions.shape[0]):
        out[n] = float(positions[n]) * freqs
    return out


# ============================================================ apply_rope -- wrong
def rope_adjacent_pairs(x, positions, base=10000.0):
    d = x.shape[-1]
    if d % 2:
        raise ValueError(f"head_dim={d} is odd")
    ct = torch.promote_types(x.dtype, torch.float32)
    i = torch.arange(d // 2, dtype=torch.float64)
    ang = (positions.double()[:, None] * base ** (-2 * i / d)).to(ct)
    c, s = ang.cos(), ang.sin()
    xe, xo = x[..., 0::2].to(ct), x[..., 1::2].to(ct)
    ye = xe * c - xo * s
    yo = xe * s + xo * c
    return torch.stack([ye, yo], dim=-1).flatten(-2).to(x.dtype)


def rope_rotates_backwards(x, positions, base=10000.0):
    d = x.shape[-1]
    if d % 2:
        raise ValueError(f"head_dim={d} is odd")
    ct = torch.promote_types(x.dtype, torch.float32)
    half = d // 2
    inv = base ** (-2.0 * torch.arange(half, dtype=torch.float64) / d)
    ang = (positions.to(torch.float64)[:, None] * inv).to(ct)
    cos, sin = torch.cos(ang), torch.sin(ang)
    x1, x2 = x[..., :half].to(ct), x[..., half:].to(ct)
    return torch.cat([x1 * cos + x2 * sin, x2 * cos - x1 * sin], dim=-1).to(x.dtype)


def rope_repeat_interleave_mix(x, positions, base=10000.0):
    d = x.shape[-1]
    if d % 2:
        raise ValueError(f"head_dim={d} is odd")
    ct = torch.promote_types(x.dtype, torch.float32)
    inv = 1.0 / (base ** (torch.arange(0, d, 2, dtype=torch.float64) / d))
    freqs = positions.double()[:, None] * inv[None, :]
    emb = freqs.repeat_interleave(2, dim=-1).to(ct)  # (N, d)
    xf = x.to(ct)
    rotated = torch.cat([-xf[..., d // 2:], xf[..., : d // 2]], dim=-1)
    return (xf * emb.cos() + rotated * emb.sin()).to(x.dtype)


def rope_no_cast_back(x, positions, base=10000.0):
    d = x.shape[-1]
    if d % 2:
        raise ValueError(f"head_dim={d} is odd")
    work = torch.promote_types(x.dtype, torch.float32)
    half = d // 2
    i = torch.arange(half, dtype=torch.float64)
    theta = (positions.double()[:, None] * base ** (-2 * i / d)).to(work)
    a, b = x[..., :half].to(work), x[..., half:].to(work)
    return torch.cat([a * theta.cos() - b * theta.sin(), a * theta.sin() + b * theta.cos()], -1)


def rope_angles_in_x_dtype(x, positions, base=10000.0):
    d = x.shape[-1]
    if d % 2:
        raise ValueError(f"head_dim={d} is odd")
    half = d // 2
    i = torch.arange(half, dtype=x.dtype)
    inv = base ** (-2 * i / d)
    ang = positions.to(x.dtype)[:, None] * inv[None, :]
    work = torch.promote_types(x.dtype, torch.float32)
    cos, sin = ang.to(work).cos(), ang.to(work).sin()
    x1, x2 = x[..., :half].to(work), x[..., half:].to(work)
    return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1).to(x.dtype)


def rope_uses_row_index(x, positions, base=10000.0):
    n, d = x.shape[-2], x.shape[-1]
    if d % 2:
        raise ValueError(f"head_dim={d} is odd")
    half = d // 2
    ct = torch.promote_types(x.dtype, torch.float32)
    pos = torch.arange(n, dtype=torch.float64)
    ang = (pos[:, None] * base ** (-2 * torch.arange(half, dtype=torch.float64) / d)).to(ct)
    x1, x2 = x[..., :half].to(ct), x[..., half:].to(ct)
    y = torch.cat([x1 * ang.cos() - x2 * ang.sin(), x1 * ang.sin() + x2 * ang.cos()], dim=-1)
    return y.to(x.dtype)


# ============================================================ apply_rope -- right
def rope_complex(x, positions, base=10000.0):
    d = x.shape[-1]
    if d % 2:
        raise ValueError(f"head_dim={d} is odd: features rotate in pairs")
    half = d // 2
    expo = -2.0 * torch.arange(half, dtype=torch.float64) / d
    theta = positions.to(torch.float64).unsqueeze(-1) * torch.pow(float(base), expo)
    rot = torch.polar(torch.ones_like(theta), theta)  # e^{i theta}, complex128
    z = torch.complex(x[..., :half].double(), x[..., half:].double()) * rot
    return torch.cat([z.real, z.imag], dim=-1).to(x.dtype)


def rope_rotation_matrices(x, positions, base=10000.0):
    d = x.shape[-1]
    if d % 2:
        raise ValueError(f"head_dim={d} is odd")
    half = d // 2
    ang = torch.zeros((positions.shape[0], half), dtype=torch.float64)
    for i in range(half):
        ang[:, i] = positions.double() * (float(base) ** (-2.0 * i / d))
    c, s = torch.cos(ang), torch.sin(ang)
    R = torch.stack([torch.stack([c, -s], -1), torch.stack([s, c], -1)], -2)  # (N, d/2, 2, 2)
    pairs = torch.stack([x[..., :half], x[..., half:]], dim=-1).double()  # (..., N, d/2, 2)
    turned = torch.einsum("nirc,...nic->...nir", R, pairs)
    return torch.cat([turned[..., 0], turned[..., 1]], dim=-1).to(x.dtype)


ENTRIES = [
    Entry("rope_angles", "wrong", "no_odd_head_dim_check",
          "never checks head_dim: an odd head_dim silently gives head_dim // 2 angles instead "
          "of raising ValueError",
          angles_no_odd_check),
    Entry("rope_angles", "wrong", "arange_step_two_and_factor_two",
          "builds i with arange(0, head_dim, 2) (already 2i) and still multiplies by 2 in the "
          "exponent, so the frequencies are base ** (-4 i / head_dim)",
          angles_step_two_doubled),
    Entry("rope_angles", "wrong", "floor_division_exponent",
          "computes the exponent with integer floor division `-2 * i // head_dim`, which is 0 or "
          "-1, instead of the true division -2 i / head_dim",
          angles_floor_division),
    Entry("rope_angles", "wrong", "exponent_precedence",
          "writes `base ** -2 * i / head_dim`, which Python reads as (base ** -2) * i / head_dim: "
          "the exponent needs parentheses",
          angles_precedence),
    Entry("rope_angles", "wrong", "outer_product_transposed",
          "puts the frequencies on the rows and the positions on the columns, returning "
          "(head_dim // 2, N) instead of (N, head_dim // 2)",
          angles_transposed),
    Entry("rope_angles", "wrong", "linspace_includes_endpoint",
          "uses torch.linspace(0, 1, head_dim // 2) for 2i/head_dim, but linspace includes the "
          "endpoint, giving i / (head_dim/2 - 1) instead of 2i / head_dim",
          angles_linspace),
    Entry("rope_angles", "right", "numpy_float64", None, angles_numpy_float64),
    Entry("rope_angles", "right", "exp_log_rows_loop", None, angles_exp_log),

    Entry("apply_rope", "wrong", "adjacent_pairs",
          "rotates adjacent features (2i, 2i+1), the GPT-J/original layout, instead of pairing "
          "feature i with feature i + head_dim/2 (rotate half)",
          rope_adjacent_pairs),
    Entry("apply_rope", "wrong", "rotates_by_minus_angle",
          "swaps the signs of the sin terms (y1 = x1 cos + x2 sin, y2 = x2 cos - x1 sin), "
          "rotating each pair by -angle",
          rope_rotates_backwards),
    Entry("apply_rope", "wrong", "repeat_interleave_with_rotate_half",
          "expands the angles with repeat_interleave(2) (adjacent-pair layout) but rotates with "
          "rotate_half, so feature i gets the angle of pair i // 2 instead of pair i mod d/2",
          rope_repeat_interleave_mix),
    Entry("apply_rope", "wrong", "no_cast_back",
          "rotates in float32 for half-precision x and returns float32 instead of x's dtype",
          rope_no_cast_back),
    Entry("apply_rope", "wrong", "angles_in_x_dtype",
          "computes positions and frequencies in x's dtype, so in bfloat16 (8 significant bits) "
          "large positions and their angles are rounded badly before the cos/sin",
          rope_angles_in_x_dtype),
    Entry("apply_rope", "wrong", "row_index_not_positions",
          "rotates row n by the angle of position n (arange(N)) and ignores the positions "
          "argument, wrong for any positions other than 0..N-1",
          rope_uses_row_index),
    Entry("apply_rope", "right", "complex_multiplication", None, rope_complex),
    Entry("apply_rope", "right", "rotation_matrix_einsum", None, rope_rotation_matrices),
]
