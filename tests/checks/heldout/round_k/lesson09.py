"""Round k, lesson 09 (torch): rope_angles, apply_rope."""

import math

import numpy as np
import torch

from entry import Entry

ENTRIES = []


def add(exercise, kind, label, mistake=None):
    def deco(func):
        ENTRIES.append(Entry(exercise, kind, label, mistake, func))
        return func
    return deco


def _require_even(head_dim):
    if head_dim % 2:
        raise ValueError(f"head_dim={head_dim} must be even")


# ============================================================================ rope_angles
@add("rope_angles", "wrong", "exponent_missing_two",
     "The exponent is -i / head_dim instead of -2 i / head_dim, so the frequencies fall off "
     "half as fast as they should.")
def angles_no_two(positions, head_dim, base=10000.0):
    _require_even(head_dim)
    i = torch.arange(head_dim // 2, dtype=torch.float64)
    inv = base ** (-i / head_dim)
    return (positions.double()[:, None] * inv[None, :]).float()


@add("rope_angles", "wrong", "index_starts_at_one",
     "The frequency index runs from 1 to head_dim / 2 instead of from 0, so every pair gets the "
     "next pair's frequency and pair 0 no longer turns at one radian per position.")
def angles_from_one(positions, head_dim, base=10000.0):
    _require_even(head_dim)
    i = torch.arange(1, head_dim // 2 + 1, dtype=torch.float64)
    inv = 1.0 / base ** (2 * i / head_dim)
    return positions.double().unsqueeze(1) * inv.unsqueeze(0)


@add("rope_angles", "wrong", "outer_order_swapped",
     "It calls torch.outer(inv_freq, positions), which gives the transpose, (head_dim // 2, N), "
     "instead of (N, head_dim // 2).")
def angles_outer_swapped(positions, head_dim, base=10000.0):
    _require_even(head_dim)
    inv = base ** (-torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim)
    return torch.outer(inv, positions.double())


@add("rope_angles", "wrong", "floor_division_exponent",
     "It writes the exponent with // (integer floor division), so -2 i // head_dim is -1 for "
     "every i > 0 and all pairs but the first share the frequency 1 / base.")
def angles_floordiv(positions, head_dim, base=10000.0):
    _require_even(head_dim)
    i = torch.arange(head_dim // 2)
    inv = base ** (-2 * i // head_dim)
    return positions[:, None].double() * inv[None, :].double()


@add("rope_angles", "wrong", "guard_misses_odd",
     "Its guard only rejects head_dim < 2, so an odd head_dim is silently accepted instead of "
     "raising ValueError.")
def angles_weak_guard(positions, head_dim, base=10000.0):
    if head_dim < 2:
        raise ValueError(f"head_dim={head_dim} is too small")
    i = torch.arange(head_dim // 2, dtype=torch.float64)
    inv = torch.pow(torch.tensor(base, dtype=torch.float64), -2 * i / head_dim)
    return positions.double()[:, None] * inv


@add("rope_angles", "wrong", "power_precedence",
     "It writes base ** -2 * i / head_dim, which Python reads as (base ** -2) * i / head_dim, "
     "not base ** (-2 i / head_dim).")
def angles_precedence(positions, head_dim, base=10000.0):
    _require_even(head_dim)
    i = torch.arange(head_dim // 2, dtype=torch.float64)
    inv = base ** -2 * i / head_dim
    return positions.double()[:, None] * inv[None, :]


@add("rope_angles", "right", "numpy_float64_loop")
def angles_numpy(positions, head_dim, base=10000.0):
    if head_dim % 2 != 0:
        raise ValueError(f"head_dim={head_dim} is odd; RoPE needs pairs")
    pos = positions.cpu().numpy().astype(np.float64)
    half = head_dim // 2
    out = np.empty((len(pos), half))
    for col in range(half):
        out[:, col] = pos * math.pow(base, -2.0 * col / head_dim)
    return torch.from_numpy(out).to(torch.float32)


@add("rope_angles", "right", "exp_log_form")
def angles_exp_log(positions, head_dim, base=10000.0):
    if head_dim % 2:
        raise ValueError(f"head_dim={head_dim} must be even for rotary pairs")
    i = torch.arange(head_dim // 2, dtype=torch.float64)
    inv = torch.exp(-math.log(base) * 2.0 * i / head_dim)
    return positions.to(torch.float64)[:, None] * inv


# ============================================================================ apply_rope
def _angles64(positions, head_dim, base):
    i = torch.arange(head_dim // 2, dtype=torch.float64)
    return positions.double()[:, None] * base ** (-2.0 * i / head_dim)


@add("apply_rope", "wrong", "adjacent_pairs",
     "It rotates adjacent features (2i, 2i+1), the GPT-J/Meta layout, instead of pairing "
     "feature i with i + head_dim/2 as the contract's rotate-half layout does.")
def rope_adjacent(x, positions, base=10000.0):
    d = x.shape[-1]
    _require_even(d)
    ang = _angles64(positions, d, base)
    cos, sin = torch.cos(ang), torch.sin(ang)
    xe, xo = x[..., 0::2].double(), x[..., 1::2].double()
    ye = xe * cos - xo * sin
    yo = xe * sin + xo * cos
    return torch.stack([ye, yo], dim=-1).flatten(-2).to(x.dtype)


@add("apply_rope", "wrong", "rotates_backwards",
     "The sin terms have the wrong signs (y_i = x_i cos + x_{i+d/2} sin), so each pair is "
     "rotated by -angle instead of +angle.")
def rope_backwards(x, positions, base=10000.0):
    d = x.shape[-1]
    _require_even(d)
    ang = _angles64(positions, d, base)
    cos, sin = ang.cos(), ang.sin()
    x1, x2 = x[..., :d // 2].double(), x[..., d // 2:].double()
    return torch.cat([x1 * cos + x2 * sin, -x1 * sin + x2 * cos], dim=-1).to(x.dtype)


@add("apply_rope", "wrong", "cos_sin_repeat_interleave",
     "With the rotate_half formula it duplicates cos and sin with repeat_interleave "
     "(c0 c0 c1 c1 ...) instead of concatenating them (c0 c1 ... c0 c1 ...), so the angles no "
     "longer match the (i, i + d/2) pairs.")
def rope_interleaved_cos(x, positions, base=10000.0):
    d = x.shape[-1]
    _require_even(d)
    ang = _angles64(positions, d, base)
    cos = ang.cos().repeat_interleave(2, dim=-1)
    sin = ang.sin().repeat_interleave(2, dim=-1)
    x1, x2 = x[..., :d // 2], x[..., d // 2:]
    rotated = torch.cat([-x2, x1], dim=-1).double()
    return (x.double() * cos + rotated * sin).to(x.dtype)


@add("apply_rope", "wrong", "returns_compute_dtype",
     "It does the rotation in float32 and returns that, never casting back to x's dtype, so "
     "float16, bfloat16 and float64 inputs come back as float32.")
def rope_float32_out(x, positions, base=10000.0):
    d = x.shape[-1]
    _require_even(d)
    ang = _angles64(positions, d, base).float()
    cos, sin = torch.cos(ang), torch.sin(ang)
    x1, x2 = x[..., :d // 2].float(), x[..., d // 2:].float()
    return torch.cat((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1)


@add("apply_rope", "wrong", "ignores_positions",
     "It builds the angles from torch.arange(N) instead of the positions argument, which is "
     "wrong whenever the positions are not 0, 1, ..., N-1.")
def rope_arange(x, positions, base=10000.0):
    n, d = x.shape[-2], x.shape[-1]
    _require_even(d)
    ang = _angles64(torch.arange(n), d, base)
    cos, sin = torch.cos(ang), torch.sin(ang)
    x1, x2 = x[..., :d // 2].double(), x[..., d // 2:].double()
    return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1).to(x.dtype)


@add("apply_rope", "wrong", "no_even_check",
     "It never checks that head_dim is even, so an odd head_dim fails with a RuntimeError from "
     "mismatched halves instead of a ValueError naming head_dim.")
def rope_no_guard(x, positions, base=10000.0):
    d = x.shape[-1]
    half = d // 2
    ang = _angles64(positions, d, base)
    cos, sin = torch.cos(ang), torch.sin(ang)
    x1, x2 = x[..., :half].double(), x[..., half:].double()
    return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1).to(x.dtype)


@add("apply_rope", "right", "complex_multiply")
def rope_complex(x, positions, base=10000.0):
    d = x.shape[-1]
    if d % 2:
        raise ValueError(f"head_dim={d} (x.shape[-1]) must be even")
    half = d // 2
    i = torch.arange(half, dtype=torch.float64)
    theta = positions.to(torch.float64)[:, None] * torch.pow(base, -2.0 * i / d)
    rot = torch.polar(torch.ones_like(theta), theta)
    z = torch.complex(x[..., :half].double(), x[..., half:].double()) * rot
    return torch.cat([z.real, z.imag], dim=-1).to(x.dtype)


@add("apply_rope", "right", "rotation_matrix_einsum")
def rope_matrix(x, positions, base=10000.0):
    d = x.shape[-1]
    if d % 2 != 0:
        raise ValueError(f"head_dim={d} is odd")
    half = d // 2
    theta = _angles64(positions, d, base)
    c, s = torch.cos(theta), torch.sin(theta)
    rot = torch.stack([torch.stack([c, -s], -1), torch.stack([s, c], -1)], -2)
    pairs = torch.stack([x[..., :half], x[..., half:]], dim=-1).double()
    out = torch.einsum("nirc,...nic->...nir", rot, pairs)
    return torch.cat([out[..., 0], out[..., 1]], dim=-1).to(x.dtype)
