"""Lesson 09 (torch): rope_angles, apply_rope."""

import math

import numpy as np
import torch

from entry import Entry


def _check_even(head_dim):
    if head_dim % 2 != 0:
        raise ValueError(f"head_dim={head_dim} must be even for RoPE")


# ---------------------------------------------------------------- rope_angles, wrong
def ra_missing_two(positions, head_dim, base=10000.0):
    _check_even(head_dim)
    i = torch.arange(head_dim // 2, dtype=torch.float64)
    return (positions.double()[:, None] * base ** (-i / head_dim)).float()


def ra_floor_division(positions, head_dim, base=10000.0):
    _check_even(head_dim)
    i = torch.arange(head_dim // 2)
    inv_freq = base ** (-2 * i // head_dim).double()
    return (positions.double()[:, None] * inv_freq).float()


def ra_no_odd_check(positions, head_dim, base=10000.0):
    i = torch.arange(head_dim // 2, dtype=torch.float64)
    return (positions.double()[:, None] * base ** (-2 * i / head_dim)).float()


def ra_transposed(positions, head_dim, base=10000.0):
    _check_even(head_dim)
    i = torch.arange(head_dim // 2, dtype=torch.float64)
    inv_freq = base ** (-2 * i / head_dim)
    return (inv_freq[:, None] * positions.double()[None, :]).float()


def ra_per_feature(positions, head_dim, base=10000.0):
    _check_even(head_dim)
    i = torch.arange(head_dim, dtype=torch.float64)
    return (positions.double()[:, None] * base ** (-2 * i / head_dim)).float()


def ra_index_from_one(positions, head_dim, base=10000.0):
    _check_even(head_dim)
    i = torch.arange(1, head_dim // 2 + 1, dtype=torch.float64)
    return (positions.double()[:, None] * base ** (-2 * i / head_dim)).float()


# ---------------------------------------------------------------- rope_angles, right
def ra_numpy_float64(positions, head_dim, base=10000.0):
    if head_dim % 2:
        raise ValueError(f"head_dim={head_dim} is odd")
    pos = positions.cpu().numpy().astype(np.float64)
    inv = 1.0 / np.power(float(base), np.arange(0, head_dim, 2, dtype=np.float64) / head_dim)
    return torch.from_numpy(np.outer(pos, inv))


def ra_exp_log(positions, head_dim, base=10000.0):
    if head_dim % 2 == 1:
        raise ValueError(f"head_dim={head_dim} cannot be split into pairs")
    i = torch.arange(0, head_dim, 2, dtype=torch.float64)
    inv_freq = torch.exp(-math.log(base) * i / head_dim)
    return torch.outer(positions.to(torch.float64), inv_freq).to(torch.float32)


# ---------------------------------------------------------------- apply_rope, wrong
def _angles64(positions, head_dim, base):
    i = torch.arange(head_dim // 2, dtype=torch.float64)
    return positions.double()[:, None] * base ** (-2 * i / head_dim)


def ar_adjacent_pairs(x, positions, base=10000.0):
    d = x.shape[-1]
    _check_even(d)
    c = torch.promote_types(x.dtype, torch.float32)
    ang = _angles64(positions, d, base).to(c)
    cos, sin = ang.cos(), ang.sin()
    x1, x2 = x[..., 0::2].to(c), x[..., 1::2].to(c)
    y = torch.stack([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1)
    return y.flatten(-2).to(x.dtype)


def ar_rotation_sign(x, positions, base=10000.0):
    d = x.shape[-1]
    _check_even(d)
    c = torch.promote_types(x.dtype, torch.float32)
    ang = _angles64(positions, d, base).to(c)
    cos, sin = ang.cos(), ang.sin()
    x1, x2 = x[..., :d // 2].to(c), x[..., d // 2:].to(c)
    return torch.cat([x1 * cos + x2 * sin, -x1 * sin + x2 * cos], dim=-1).to(x.dtype)


def ar_repeat_interleave_angles(x, positions, base=10000.0):
    d = x.shape[-1]
    _check_even(d)
    c = torch.promote_types(x.dtype, torch.float32)
    emb = _angles64(positions, d, base).repeat_interleave(2, dim=-1).to(c)  # (N, d)
    xc = x.to(c)
    rotated = torch.cat([-xc[..., d // 2:], xc[..., :d // 2]], dim=-1)
    return (xc * emb.cos() + rotated * emb.sin()).to(x.dtype)


def ar_returns_float32(x, positions, base=10000.0):
    d = x.shape[-1]
    _check_even(d)
    c = torch.promote_types(x.dtype, torch.float32)
    ang = _angles64(positions, d, base).to(c)
    cos, sin = ang.cos(), ang.sin()
    x1, x2 = x[..., :d // 2].to(c), x[..., d // 2:].to(c)
    return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1)


def ar_ignores_positions(x, positions, base=10000.0):
    d = x.shape[-1]
    _check_even(d)
    c = torch.promote_types(x.dtype, torch.float32)
    ang = _angles64(torch.arange(x.shape[-2]), d, base).to(c)
    cos, sin = ang.cos(), ang.sin()
    x1, x2 = x[..., :d // 2].to(c), x[..., d // 2:].to(c)
    return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1).to(x.dtype)


def ar_angles_in_input_dtype(x, positions, base=10000.0):
    d = x.shape[-1]
    _check_even(d)
    i = torch.arange(d // 2, dtype=x.dtype)
    inv_freq = base ** (-2 * i / d)
    ang = positions.to(x.dtype)[:, None] * inv_freq[None, :]
    cos, sin = ang.cos(), ang.sin()
    x1, x2 = x[..., :d // 2], x[..., d // 2:]
    return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1)


# ---------------------------------------------------------------- apply_rope, right
def ar_complex(x, positions, base=10000.0):
    d = x.shape[-1]
    if d % 2:
        raise ValueError(f"head_dim={d} is odd")
    half = d // 2
    i = torch.arange(half, dtype=torch.float64)
    ang = positions.to(torch.float64)[:, None] * torch.pow(torch.tensor(float(base),
                                                                     dtype=torch.float64),
                                                        -2.0 * i / d)
    x64 = x.to(torch.float64)
    z = torch.complex(x64[..., :half], x64[..., half:]) * torch.polar(torch.ones_like(ang), ang)
    return torch.cat([z.real, z.imag], dim=-1).to(x.dtype)


def ar_rotation_matrices(x, positions, base=10000.0):
    d = x.shape[-1]
    if d % 2:
        raise ValueError(f"head_dim={d} is odd")
    half = d // 2
    inv = float(base) ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
    ang = positions.double()[:, None] * inv  # (N, d/2)
    cos, sin = torch.cos(ang), torch.sin(ang)
    rot = torch.stack([torch.stack([cos, -sin], -1), torch.stack([sin, cos], -1)], -2)  # (N,h,2,2)
    pairs = torch.stack([x[..., :half], x[..., half:]], dim=-1).double()  # (..., N, h, 2)
    out = torch.einsum("nhij,...nhj->...nhi", rot, pairs)
    return torch.cat([out[..., 0], out[..., 1]], dim=-1).to(x.dtype)


E = Entry
ENTRIES = [
    E("rope_angles", "wrong", "exponent_missing_factor_two",
      "Uses base ** (-i / head_dim) instead of base ** (-2 i / head_dim).", ra_missing_two),
    E("rope_angles", "wrong", "floor_division_in_exponent",
      "Computes the exponent with integer floor division (-2 * i // head_dim), so every "
      "frequency but the first collapses to 1/base.", ra_floor_division),
    E("rope_angles", "wrong", "odd_head_dim_accepted",
      "Does not check that head_dim is even, so an odd head_dim returns angles instead of "
      "raising ValueError.", ra_no_odd_check),
    E("rope_angles", "wrong", "frequencies_by_positions",
      "Builds the outer product the wrong way round, returning (head_dim // 2, N).",
      ra_transposed),
    E("rope_angles", "wrong", "one_frequency_per_feature",
      "Makes one frequency per feature (head_dim columns) instead of one per pair "
      "(head_dim // 2).", ra_per_feature),
    E("rope_angles", "wrong", "pair_index_from_one",
      "Numbers the pairs from 1 instead of 0, so every frequency is shifted by one step.",
      ra_index_from_one),
    E("rope_angles", "right", "numpy_outer_float64", None, ra_numpy_float64),
    E("rope_angles", "right", "exp_log_outer", None, ra_exp_log),

    E("apply_rope", "wrong", "adjacent_pairs",
      "Pairs adjacent features (2i, 2i+1), the GPT-J layout, instead of i with i + d/2.",
      ar_adjacent_pairs),
    E("apply_rope", "wrong", "rotation_sign_flipped",
      "Rotates by the negative angle (y_i = x_i cos + x_{i+d/2} sin, ...).", ar_rotation_sign),
    E("apply_rope", "wrong", "angles_repeat_interleaved",
      "Expands the angles to width d with repeat_interleave (adjacent layout) while rotating "
      "halves, so feature i is turned by the angle of pair i // 2.",
      ar_repeat_interleave_angles),
    E("apply_rope", "wrong", "not_cast_back_to_input_dtype",
      "Computes in float32 and forgets to cast back, returning float32 for half-precision "
      "inputs.", ar_returns_float32),
    E("apply_rope", "wrong", "positions_ignored",
      "Uses torch.arange(N) for the positions instead of the positions argument.",
      ar_ignores_positions),
    E("apply_rope", "wrong", "angles_in_half_precision",
      "Computes the angles (position times frequency) and their sin/cos in the input's "
      "half precision, so large positions lose their precision.", ar_angles_in_input_dtype),
    E("apply_rope", "right", "complex_multiplication", None, ar_complex),
    E("apply_rope", "right", "per_pair_rotation_matrices", None, ar_rotation_matrices),
]
