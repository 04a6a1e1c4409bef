"""Held-out catalogue, lesson 09 (rope): rope_angles, apply_rope."""

import math

import numpy as np
import torch

from entry import Entry


# ============================================================== rope_angles
def _check_even(head_dim):
    if head_dim % 2 != 0:
        raise ValueError(f"head_dim={head_dim} is odd")


def angles_missing_factor_two(positions, head_dim, base=10000.0):
    _check_even(head_dim)
    i = torch.arange(head_dim // 2, dtype=torch.float64)
    inv_freq = base ** (-i / head_dim)
    return (positions.double()[:, None] * inv_freq[None, :]).float()


def angles_index_from_one(positions, head_dim, base=10000.0):
    _check_even(head_dim)
    i = torch.arange(1, head_dim // 2 + 1, dtype=torch.float64)
    inv_freq = base ** (-2.0 * i / head_dim)
    return torch.outer(positions.double(), inv_freq).float()


def angles_no_odd_check(positions, head_dim, base=10000.0):
    half = head_dim // 2
    i = torch.arange(half, dtype=torch.float64)
    theta = torch.pow(float(base), -2.0 * i / head_dim)
    return (positions.to(torch.float64).unsqueeze(1) * theta).to(torch.float32)


def angles_positive_exponent(positions, head_dim, base=10000.0):
    if head_dim % 2:
        raise ValueError(f"head_dim={head_dim} must be even")
    exps = 2.0 * torch.arange(head_dim // 2, dtype=torch.float64) / head_dim
    freqs = base ** exps
    return (positions.double()[:, None] * freqs).float()


def angles_floor_division(positions, head_dim, base=10000.0):
    if head_dim % 2:
        raise ValueError(f"head_dim={head_dim} is odd")
    i = torch.arange(head_dim // 2)
    exponent = (2 * i) // head_dim
    inv_freq = base ** (-exponent.to(torch.float64))
    return (positions[:, None].to(torch.float64) * inv_freq[None, :]).float()


def angles_transposed(positions, head_dim, base=10000.0):
    _check_even(head_dim)
    inv_freq = 1.0 / (base ** (torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim))
    return (inv_freq[:, None] * positions.double()[None, :]).float()


def angles_numpy_float64(positions, head_dim, base=10000.0):
    if head_dim % 2 == 1:
        raise ValueError(f"head_dim={head_dim} is odd: no partner for the last feature")
    pos = np.asarray(positions.cpu().tolist(), dtype=np.float64).reshape(-1)
    i = np.arange(head_dim // 2, dtype=np.float64)
    table = np.outer(pos, np.power(float(base), -2.0 * i / head_dim))
    return torch.from_numpy(table.astype(np.float32)).to(positions.device)


def angles_log_space_loops(positions, head_dim, base=10000.0):
    if head_dim % 2:
        raise ValueError(f"head_dim={head_dim} must be even")
    half = head_dim // 2
    log_base = math.log(base)
    rows = []
    for p in positions.tolist():
        rows.append([p * math.exp(-2.0 * i * log_base / head_dim) for i in range(half)])
    return torch.tensor(rows, dtype=torch.float32).reshape(len(rows), half)


# ============================================================== apply_rope
def _angles64(positions, head_dim, base):
    if head_dim % 2:
        raise ValueError(f"head_dim={head_dim} is odd")
    i = torch.arange(head_dim // 2, dtype=torch.float64)
    return positions.to(torch.float64)[:, None] * (float(base) ** (-2.0 * i / head_dim))


def rope_adjacent_pairs(x, positions, base=10000.0):
    d = x.shape[-1]
    ct = torch.promote_types(x.dtype, torch.float32)
    ang = _angles64(positions, d, base).to(ct)
    cos, sin = ang.cos(), ang.sin()
    x_even, x_odd = x[..., 0::2].to(ct), x[..., 1::2].to(ct)
    y_even = x_even * cos - x_odd * sin
    y_odd = x_even * sin + x_odd * cos
    return torch.stack([y_even, y_odd], dim=-1).flatten(-2).to(x.dtype)


def rope_rotates_backwards(x, positions, base=10000.0):
    d = x.shape[-1]
    half = d // 2
    ct = torch.promote_types(x.dtype, torch.float32)
    ang = _angles64(positions, d, base).to(ct)
    c, s = torch.cos(ang), torch.sin(ang)
    a, b = x[..., :half].to(ct), x[..., half:].to(ct)
    return torch.cat([a * c + b * s, -a * s + b * c], dim=-1).to(x.dtype)


def rope_angles_in_x_dtype(x, positions, base=10000.0):
    d = x.shape[-1]
    half = d // 2
    ang = _angles64(positions, d, base).to(x.dtype)  # same dtype as x before cos / sin
    ct = torch.promote_types(x.dtype, torch.float32)
    c, s = torch.cos(ang.to(ct)), torch.sin(ang.to(ct))
    x1, x2 = x[..., :half].to(ct), x[..., half:].to(ct)
    return torch.cat([x1 * c - x2 * s, x1 * s + x2 * c], dim=-1).to(x.dtype)


def rope_uses_arange(x, positions, base=10000.0):
    n, d = x.shape[-2], x.shape[-1]
    half = d // 2
    pos = torch.arange(n)
    ang = _angles64(pos, d, base)
    ct = torch.promote_types(x.dtype, torch.float32)
    c, s = ang.cos().to(ct), ang.sin().to(ct)
    x1, x2 = x[..., :half].to(ct), x[..., half:].to(ct)
    return torch.cat([x1 * c - x2 * s, x1 * s + x2 * c], dim=-1).to(x.dtype)


def rope_base_not_forwarded(x, positions, base=10000.0):
    d = x.shape[-1]
    half = d // 2
    ang = _angles64(positions, d, 10000.0)
    ct = torch.promote_types(x.dtype, torch.float32)
    c, s = ang.cos().to(ct), ang.sin().to(ct)
    x1, x2 = x[..., :half].to(ct), x[..., half:].to(ct)
    return torch.cat([x1 * c - x2 * s, x1 * s + x2 * c], dim=-1).to(x.dtype)


def rope_no_odd_check(x, positions, base=10000.0):
    d = x.shape[-1]
    half = d // 2
    inv_freq = float(base) ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
    ang = positions.double()[:, None] * inv_freq[None, :]
    ct = torch.promote_types(x.dtype, torch.float32)
    c, s = ang.cos().to(ct), ang.sin().to(ct)
    x1, x2 = x[..., :half].to(ct), x[..., half:].to(ct)
    return torch.cat([x1 * c - x2 * s, x1 * s + x2 * c], dim=-1).to(x.dtype)


def rope_complex_multiply(x, positions, base=10000.0):
    d = x.shape[-1]
    if d % 2:
        raise ValueError(f"head_dim={d} is odd")
    half = d // 2
    ang = _angles64(positions, d, base)  # (N, d/2) float64
    rot = torch.polar(torch.ones_like(ang), ang)  # e^{i angle}, complex128
    xd = x.to(torch.float64)
    z = torch.complex(xd[..., :half], xd[..., half:])  # pair (i, i + d/2) as one number
    w = z * rot
    return torch.cat([w.real, w.imag], dim=-1).to(x.dtype)


def rope_rotate_half(x, positions, base=10000.0):
    d = x.shape[-1]
    if d % 2 != 0:
        raise ValueError(f"head_dim={d} is odd")
    ct = torch.promote_types(x.dtype, torch.float32)
    ang = _angles64(positions, d, base)
    full = torch.cat([ang, ang], dim=-1)  # (N, d): each angle twice
    cos, sin = full.cos().to(ct), full.sin().to(ct)
    xc = x.to(ct)
    rotated = torch.cat([-xc[..., d // 2:], xc[..., : d // 2]], dim=-1)
    return (xc * cos + rotated * sin).to(x.dtype)


ENTRIES = [
    Entry("rope_angles", "wrong", "exponent_missing_factor_two",
          "uses base ** (-i / head_dim) instead of base ** (-2 i / head_dim), so the "
          "frequencies fall only half as fast across the pairs",
          angles_missing_factor_two),
    Entry("rope_angles", "wrong", "pair_index_from_one",
          "numbers the pairs i = 1 .. head_dim/2 instead of 0 .. head_dim/2 - 1, so the first "
          "column is not the position itself and every frequency is one step too low",
          angles_index_from_one),
    Entry("rope_angles", "wrong", "no_odd_head_dim_check",
          "never checks head_dim: an odd head_dim is silently truncated by // 2 instead of "
          "raising ValueError",
          angles_no_odd_check),
    Entry("rope_angles", "wrong", "exponent_sign_flipped",
          "multiplies positions by base ** (+2 i / head_dim) instead of base ** (-2 i / "
          "head_dim): the frequencies grow instead of shrinking",
          angles_positive_exponent),
    Entry("rope_angles", "wrong", "integer_floor_division",
          "computes the exponent with integer floor division (2 * i) // head_dim, which is 0 "
          "for every pair, so every column equals the position",
          angles_floor_division),
    Entry("rope_angles", "wrong", "outer_product_transposed",
          "builds the outer product as inv_freq[:, None] * positions[None, :], returning "
          "the transposed table (head_dim // 2, N) instead of (N, head_dim // 2)",
          angles_transposed),
    Entry("rope_angles", "right", "numpy_outer_float64", None, angles_numpy_float64),
    Entry("rope_angles", "right", "scalar_loops_log_space", None, angles_log_space_loops),
    Entry("apply_rope", "wrong", "adjacent_pairs",
          "rotates adjacent features (2i, 2i + 1), the interleaved GPT-J layout, instead of "
          "the rotate-half pairs (i, i + d/2) the contract fixes",
          rope_adjacent_pairs),
    Entry("apply_rope", "wrong", "rotation_sign_swapped",
          "puts the minus sign on the wrong term (y_i = x_i cos + x_{i+d/2} sin, y_{i+d/2} = "
          "-x_i sin + x_{i+d/2} cos), rotating every pair by -angle",
          rope_rotates_backwards),
    Entry("apply_rope", "wrong", "angles_cast_to_x_dtype",
          "casts the angles to x's dtype before taking cos and sin, so in half precision "
          "(bfloat16 keeps 8 bits) large angles are rounded and the rotation is wrong",
          rope_angles_in_x_dtype),
    Entry("apply_rope", "wrong", "ignores_positions_argument",
          "builds the angles from torch.arange(N) instead of the given positions, which only "
          "agrees when the positions are 0 .. N-1",
          rope_uses_arange),
    Entry("apply_rope", "wrong", "base_not_passed_on",
          "computes the angles with the default base 10000 instead of passing the base "
          "argument on",
          rope_base_not_forwarded),
    Entry("apply_rope", "wrong", "no_odd_head_dim_check",
          "does not check head_dim, so an odd head_dim fails with a RuntimeError from "
          "mismatched shapes instead of the ValueError the contract asks for",
          rope_no_odd_check),
    Entry("apply_rope", "right", "complex_multiplication", None, rope_complex_multiply),
    Entry("apply_rope", "right", "rotate_half_duplicated_angles", None, rope_rotate_half),
]
