"""Lesson 09 (RoPE): rope_angles, apply_rope, torch."""

import math

import numpy as np
import torch

from entry import Entry


def _odd(head_dim):
    if head_dim % 2:
        raise ValueError(f"head_dim={head_dim} must be even for RoPE")


# ---------------------------------------------------------------- rope_angles
def ra_no_factor_two(positions, head_dim, base=10000.0):
    _odd(head_dim)
    i = torch.arange(head_dim // 2, dtype=torch.float64)
    return (positions.double()[:, None] * base ** (-i / head_dim)).float()


def ra_floor_division(positions, head_dim, base=10000.0):
    _odd(head_dim)
    i = torch.arange(head_dim // 2)
    return (positions.double()[:, None] * base ** (-2 * i // head_dim)).float()


def ra_outer_swapped(positions, head_dim, base=10000.0):
    _odd(head_dim)
    i = torch.arange(head_dim // 2, dtype=torch.float64)
    return torch.outer(base ** (-2 * i / head_dim), positions.double()).float()


def ra_guard_floor_div(positions, head_dim, base=10000.0):
    if head_dim // 2 == 0:
        raise ValueError(f"head_dim={head_dim} must be even")
    i = torch.arange(head_dim // 2, dtype=torch.float64)
    return (positions.double()[:, None] * base ** (-2 * i / head_dim)).float()


def ra_precedence(positions, head_dim, base=10000.0):
    _odd(head_dim)
    i = torch.arange(head_dim // 2, dtype=torch.float64)
    inv_freq = 1.0 / base ** 2 * i / head_dim
    return (positions.double()[:, None] * inv_freq).float()


def ra_index_from_one(positions, head_dim, base=10000.0):
    _odd(head_dim)
    i = torch.arange(1, head_dim // 2 + 1, dtype=torch.float64)
    return (positions.double()[:, None] * base ** (-2 * i / head_dim)).float()


def ra_numpy(positions, head_dim, base=10000.0):
    if head_dim % 2 != 0:
        raise ValueError(f"head_dim={head_dim} is odd; RoPE needs an even head_dim")
    pos = np.asarray(positions.cpu().numpy(), dtype=np.float64)
    freqs = np.power(float(base), -np.arange(0, head_dim, 2, dtype=np.float64) / head_dim)
    return torch.from_numpy(np.multiply.outer(pos, freqs)).to(torch.float32)


def ra_exp_log(positions, head_dim, base=10000.0):
    if head_dim % 2 == 1:
        raise ValueError(f"odd head_dim={head_dim}: features cannot be paired")
    i = torch.arange(0, head_dim // 2, dtype=torch.float64)
    inv = torch.exp(-math.log(base) * (2.0 * i / head_dim))
    return torch.einsum("n,f->nf", positions.to(torch.float64), inv).to(torch.float32)


# ---------------------------------------------------------------- apply_rope
def _angles64(positions, d, base):
    i = torch.arange(d // 2, dtype=torch.float64)
    return positions.double()[:, None] * base ** (-2 * i / d)


def _work(dtype):
    return torch.float64 if dtype == torch.float64 else torch.float32


def ar_adjacent_pairs(x, positions, base=10000.0):
    d = x.shape[-1]
    _odd(d)
    w = _work(x.dtype)
    a = _angles64(positions, d, base).to(w)
    c, s = a.cos(), a.sin()
    x1, x2 = x[..., 0::2].to(w), x[..., 1::2].to(w)
    y = torch.stack([x1 * c - x2 * s, x1 * s + x2 * c], dim=-1).flatten(-2)
    return y.to(x.dtype)


def ar_wrong_direction(x, positions, base=10000.0):
    d = x.shape[-1]
    _odd(d)
    w = _work(x.dtype)
    a = _angles64(positions, d, base).to(w)
    c, s = a.cos(), a.sin()
    x1, x2 = x[..., : d // 2].to(w), x[..., d // 2:].to(w)
    return torch.cat([x1 * c + x2 * s, -x1 * s + x2 * c], dim=-1).to(x.dtype)


def ar_keeps_float32(x, positions, base=10000.0):
    d = x.shape[-1]
    _odd(d)
    w = _work(x.dtype)
    a = _angles64(positions, d, base).to(w)
    c, s = a.cos(), a.sin()
    x1, x2 = x[..., : d // 2].to(w), x[..., d // 2:].to(w)
    return torch.cat([x1 * c - x2 * s, x1 * s + x2 * c], dim=-1)


def ar_angles_in_x_dtype(x, positions, base=10000.0):
    d = x.shape[-1]
    _odd(d)
    i = torch.arange(d // 2, dtype=x.dtype)
    a = positions.to(x.dtype)[:, None] * base ** (-2 * i / d)
    c, s = a.cos(), a.sin()
    x1, x2 = x[..., : d // 2], x[..., d // 2:]
    return torch.cat([x1 * c - x2 * s, x1 * s + x2 * c], dim=-1)


def ar_cos_interleaved(x, positions, base=10000.0):
    d = x.shape[-1]
    _odd(d)
    w = _work(x.dtype)
    a = _angles64(positions, d, base).to(w)
    cos = a.cos().repeat_interleave(2, dim=-1)
    sin = a.sin().repeat_interleave(2, dim=-1)
    xw = x.to(w)
    rotated = torch.cat([-xw[..., d // 2:], xw[..., : d // 2]], dim=-1)
    return (xw * cos + rotated * sin).to(x.dtype)


def ar_ignores_positions(x, positions, base=10000.0):
    d = x.shape[-1]
    _odd(d)
    w = _work(x.dtype)
    a = _angles64(torch.arange(x.shape[-2]), d, base).to(w)
    c, s = a.cos(), a.sin()
    x1, x2 = x[..., : d // 2].to(w), x[..., d // 2:].to(w)
    return torch.cat([x1 * c - x2 * s, x1 * s + x2 * c], dim=-1).to(x.dtype)


def ar_complex(x, positions, base=10000.0):
    d = x.shape[-1]
    if d % 2:
        raise ValueError(f"head_dim={d} (x.shape[-1]) must be even")
    half = d // 2
    xd = x.to(torch.float64)
    z = torch.complex(xd[..., :half], xd[..., half:])
    theta = _angles64(positions, d, base)
    z = z * torch.polar(torch.ones_like(theta), theta)
    return torch.cat([z.real, z.imag], dim=-1).to(x.dtype)


def ar_rotation_matrices(x, positions, base=10000.0):
    d = x.shape[-1]
    if d % 2 != 0:
        raise ValueError(f"head_dim={d} (x.shape[-1]) is odd: it must be even")
    half = d // 2
    theta = _angles64(positions, d, base)
    c, s = torch.cos(theta), torch.sin(theta)
    rot = torch.stack([torch.stack([c, -s], -1), torch.stack([s, c], -1)], -2)  # (N, d/2, 2, 2)
    pairs = torch.stack([x[..., :half], x[..., half:]], dim=-1).to(torch.float64)
    y = torch.einsum("nfij,...nfj->...nfi", rot, pairs)
    return torch.cat([y[..., 0], y[..., 1]], dim=-1).to(x.dtype)


E = "rope_angles"
ENTRIES = [
    Entry(E, "wrong", "exponent_missing_two", "The exponent is -i / head_dim instead of "
          "-2 i / head_dim, so the frequencies fall off half as fast.", ra_no_factor_two),
    Entry(E, "wrong", "floor_division_exponent", "On an integer arange, -2 * i // head_dim is "
          "floor division, so the exponents collapse to whole numbers.", ra_floor_division),
    Entry(E, "wrong", "outer_arguments_swapped", "torch.outer gets the frequencies first and the "
          "positions second, returning (head_dim // 2, N) instead of (N, head_dim // 2).",
          ra_outer_swapped),
    Entry(E, "wrong", "guard_uses_floor_division", "The odd check is written head_dim // 2 == 0 "
          "instead of head_dim % 2, so odd head dims are not rejected.", ra_guard_floor_div),
    Entry(E, "wrong", "power_precedence", "1.0 / base ** 2 * i / head_dim is read as "
          "(i / base^2) / head_dim instead of base ** (-2 i / head_dim).", ra_precedence),
    Entry(E, "wrong", "index_from_one", "The frequency index runs 1..d/2 instead of 0..d/2-1, "
          "so every pair gets the next pair's frequency.", ra_index_from_one),
    Entry(E, "right", "numpy_outer_float64", None, ra_numpy),
    Entry(E, "right", "exp_log_einsum", None, ra_exp_log),
]

E = "apply_rope"
ENTRIES += [
    Entry(E, "wrong", "adjacent_pairs", "It rotates adjacent pairs (2i, 2i + 1), the GPT-J "
          "layout, instead of pairing feature i with i + d/2.", ar_adjacent_pairs),
    Entry(E, "wrong", "rotates_backwards", "The sin terms have the wrong signs, rotating each "
          "pair by -angle instead of +angle.", ar_wrong_direction),
    Entry(E, "wrong", "returns_compute_dtype", "It returns the float32 compute result without "
          "casting back to x's dtype.", ar_keeps_float32),
    Entry(E, "wrong", "angles_in_x_dtype", "The angles are computed in x's dtype, so for "
          "float16 / bfloat16 inputs position times frequency loses most of its precision.",
          ar_angles_in_x_dtype),
    Entry(E, "wrong", "cos_sin_interleaved", "cos and sin are repeated with repeat_interleave "
          "(the adjacent-pair layout) while the features are paired by halves.",
          ar_cos_interleaved),
    Entry(E, "wrong", "ignores_positions", "It builds the angles from arange(N) instead of the "
          "positions passed in.", ar_ignores_positions),
    Entry(E, "right", "complex_multiply", None, ar_complex),
    Entry(E, "right", "rotation_matrices_einsum", None, ar_rotation_matrices),
]
