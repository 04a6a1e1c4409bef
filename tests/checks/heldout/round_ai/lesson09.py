"""Held-out catalogue, lesson 09 (rope): rope_angles, apply_rope."""

import math

import numpy as np
import torch

from entry import Entry


# ----------------------------------------------------------------- rope_angles
def angles_precedence(positions, head_dim, base=10000.0):
    if head_dim % 2:
        raise ValueError(f"head_dim={head_dim} is odd")
    i = torch.arange(head_dim // 2, dtype=torch.float64)
    inv_freq = base ** -2 * i / head_dim
    return (positions.double()[:, None] * inv_freq[None, :]).float()


def angles_index_from_one(positions, head_dim, base=10000.0):
    if head_dim % 2 != 0:
        raise ValueError(f"head_dim={head_dim} must be even")
    idx = torch.arange(1, head_dim // 2 + 1, dtype=torch.float64)
    freqs = base ** (-2 * idx / head_dim)
    return torch.outer(positions.to(torch.float64), freqs).to(torch.float32)


def angles_floor_division(positions, head_dim, base=10000.0):
    if head_dim % 2:
        raise ValueError(f"head_dim={head_dim} is odd")
    i = torch.arange(head_dim // 2)
    expo = (-2 * i) // head_dim
    inv = torch.tensor(base, dtype=torch.float64) ** expo.double()
    return (positions.double().unsqueeze(1) * inv.unsqueeze(0)).float()


def angles_no_odd_check(positions, head_dim, base=10000.0):
    half = head_dim // 2
    i = torch.arange(half, dtype=torch.float64)
    theta = base ** (-2.0 * i / head_dim)
    return (positions.to(torch.float64)[:, None] * theta).to(torch.float32)


def angles_outer_transposed(positions, head_dim, base=10000.0):
    if head_dim % 2:
        raise ValueError(f"head_dim={head_dim} is odd")
    inv_freq = 1.0 / base ** (torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim)
    return torch.outer(inv_freq, positions.double()).float()


def angles_in_float16(positions, head_dim, base=10000.0):
    if head_dim % 2:
        raise ValueError(f"head_dim={head_dim} is odd")
    i = torch.arange(head_dim // 2, dtype=torch.float16)
    inv_freq = base ** (-2.0 * i / head_dim)
    return positions.to(torch.float16)[:, None] * inv_freq[None, :]


def angles_right_numpy(positions, head_dim, base=10000.0):
    if head_dim % 2 == 1:
        raise ValueError(f"head_dim={head_dim} is odd: features rotate in pairs")
    pos = np.asarray(positions.tolist(), dtype=np.float64)
    inv = np.power(float(base), -np.arange(0, head_dim, 2, dtype=np.float64) / head_dim)
    return torch.from_numpy(np.outer(pos, inv).reshape(len(pos), head_dim // 2)).float()


def angles_right_exp_log(positions, head_dim, base=10000.0):
    if head_dim & 1:
        raise ValueError(f"head_dim={head_dim} must be even")
    k = torch.arange(head_dim // 2, dtype=torch.float64)
    freq = torch.exp(-(2.0 * k / head_dim) * math.log(base))
    return (positions.to(torch.float64).reshape(-1, 1) * freq.reshape(1, -1)).to(torch.float32)


# ----------------------------------------------------------------- apply_rope
def rope_adjacent_pairs(x, positions, base=10000.0):
    d = x.shape[-1]
    if d % 2:
        raise ValueError(f"head_dim={d} is odd")
    ct = torch.promote_types(x.dtype, torch.float32)
    i = torch.arange(d // 2, dtype=torch.float64)
    ang = (positions.double()[:, None] * base ** (-2 * i / d)).to(ct)
    cos, sin = ang.cos(), ang.sin()
    xe, xo = x[..., 0::2].to(ct), x[..., 1::2].to(ct)
    ye = xe * cos - xo * sin
    yo = xe * sin + xo * cos
    return torch.stack([ye, yo], dim=-1).flatten(-2).to(x.dtype)


def rope_rotates_backwards(x, positions, base=10000.0):
    d = x.shape[-1]
    if d % 2:
        raise ValueError(f"head_dim={d} is odd")
    ct = torch.promote_types(x.dtype, torch.float32)
    h = d // 2
    i = torch.arange(h, dtype=torch.float64)
    ang = (positions.double()[:, None] * base ** (-2 * i / d)).to(ct)
    c, s = torch.cos(ang), torch.sin(ang)
    a, b = x[..., :h].to(ct), x[..., h:].to(ct)
    return torch.cat([a * c + b * s, b * c - a * s], dim=-1).to(x.dtype)


def rope_repeat_interleave(x, positions, base=10000.0):
    d = x.shape[-1]
    if d % 2:
        raise ValueError(f"head_dim={d} is odd")
    ct = torch.promote_types(x.dtype, torch.float32)
    i = torch.arange(d // 2, dtype=torch.float64)
    ang = (positions.double()[:, None] * base ** (-2 * i / d)).to(ct)
    cos = ang.cos().repeat_interleave(2, dim=-1)  # (N, d)
    sin = ang.sin().repeat_interleave(2, dim=-1)
    xf = x.to(ct)
    rot = torch.cat([-xf[..., d // 2:], xf[..., : d // 2]], dim=-1)
    return (xf * cos + rot * sin).to(x.dtype)


def rope_angles_in_x_dtype(x, positions, base=10000.0):
    d = x.shape[-1]
    if d % 2:
        raise ValueError(f"head_dim={d} is odd")
    ct = torch.promote_types(x.dtype, torch.float32)
    i = torch.arange(d // 2, dtype=x.dtype)
    ang = positions.to(x.dtype)[:, None] * (base ** (-2 * i / d))
    cos, sin = ang.cos().to(ct), ang.sin().to(ct)
    x1, x2 = x[..., : d // 2].to(ct), x[..., d // 2:].to(ct)
    return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1).to(x.dtype)


def rope_ignores_positions(x, positions, base=10000.0):
    n, d = x.shape[-2], x.shape[-1]
    if d % 2:
        raise ValueError(f"head_dim={d} is odd")
    ct = torch.promote_types(x.dtype, torch.float32)
    pos = torch.arange(n, dtype=torch.float64)
    i = torch.arange(d // 2, dtype=torch.float64)
    ang = (pos[:, None] * base ** (-2 * i / d)).to(ct)
    x1, x2 = x[..., : d // 2].to(ct), x[..., d // 2:].to(ct)
    y = torch.cat([x1 * ang.cos() - x2 * ang.sin(), x1 * ang.sin() + x2 * ang.cos()], dim=-1)
    return y.to(x.dtype)


def rope_no_odd_guard(x, positions, base=10000.0):
    d = x.shape[-1]
    half = d // 2
    ct = torch.promote_types(x.dtype, torch.float32)
    i = torch.arange(half, dtype=torch.float64)
    ang = (positions.double()[:, None] * base ** (-2 * i / d)).to(ct)
    x1, x2 = x[..., :half].to(ct), x[..., half:].to(ct)
    y1 = x1 * ang.cos() - x2 * ang.sin()
    y2 = x1 * ang.sin() + x2 * ang.cos()
    return torch.cat([y1, y2], dim=-1).to(x.dtype)


def rope_right_complex(x, positions, base=10000.0):
    d = x.shape[-1]
    if d % 2:
        raise ValueError(f"head_dim={d} is odd: RoPE needs pairs")
    half = d // 2
    theta = positions.to(torch.float64)[:, None] * torch.pow(
        torch.tensor(float(base), dtype=torch.float64),
        -torch.arange(half, dtype=torch.float64) * 2 / d)
    z = torch.complex(x[..., :half].to(torch.float64), x[..., half:].to(torch.float64))
    turned = z * torch.polar(torch.ones_like(theta), theta)
    return torch.cat([turned.real, turned.imag], dim=-1).to(x.dtype)


def rope_right_rotation_matrix(x, positions, base=10000.0):
    d = x.shape[-1]
    if d % 2:
        raise ValueError(f"head_dim={d} is odd")
    n, h = x.shape[-2], d // 2
    theta = positions.double()[:, None] / (float(base) ** (torch.arange(h).double() * 2 / d))
    rot = torch.zeros(n, d, d, dtype=torch.float64)  # y[n] = R[n] @ x[n]
    idx = torch.arange(h)
    rot[:, idx, idx] = torch.cos(theta)
    rot[:, idx, idx + h] = -torch.sin(theta)
    rot[:, idx + h, idx] = torch.sin(theta)
    rot[:, idx + h, idx + h] = torch.cos(theta)
    y = torch.einsum("nij,...nj->...ni", rot, x.double())
    return y.to(x.dtype)


ENTRIES = [
    Entry("rope_angles", "wrong", "exponent_precedence",
          "writes base ** -2 * i / head_dim, which Python reads as (base ** -2) * i / head_dim, "
          "instead of base ** (-2 * i / head_dim)", angles_precedence),
    Entry("rope_angles", "wrong", "index_from_one",
          "numbers the frequency pairs i = 1 .. head_dim/2 instead of 0 .. head_dim/2 - 1, so "
          "every frequency is one step too slow (the first is not 1)", angles_index_from_one),
    Entry("rope_angles", "wrong", "floor_division_exponent",
          "computes the exponent with // on integer tensors, so -2*i // head_dim floors to -1 "
          "or 0 instead of the fraction -2i/head_dim", angles_floor_division),
    Entry("rope_angles", "wrong", "no_odd_head_dim_check",
          "never checks that head_dim is even, so an odd head_dim returns angles instead of "
          "raising ValueError", angles_no_odd_check),
    Entry("rope_angles", "wrong", "outer_transposed",
          "takes torch.outer(inv_freq, positions), giving (head_dim/2, N) angles, the transpose "
          "of (N, head_dim/2)", angles_outer_transposed),
    Entry("rope_angles", "wrong", "computed_in_float16",
          "computes positions and angles in float16, so the angles are rounded to float16 "
          "precision (and positions above 65504 overflow to inf)", angles_in_float16),
    Entry("rope_angles", "right", "numpy_outer_float64", None, angles_right_numpy),
    Entry("rope_angles", "right", "exp_log_frequencies", None, angles_right_exp_log),

    Entry("apply_rope", "wrong", "adjacent_pairs",
          "rotates adjacent features (2i, 2i+1) as in the original RoPE paper instead of the "
          "rotate-half pairs (i, i + d/2) the contract fixes", rope_adjacent_pairs),
    Entry("apply_rope", "wrong", "rotates_backwards",
          "puts the sine terms with the wrong signs (x_i cos + x_{i+d/2} sin, ...), rotating "
          "each pair by -angle", rope_rotates_backwards),
    Entry("apply_rope", "wrong", "repeat_interleave_cos",
          "widens cos and sin to d features with repeat_interleave (c0 c0 c1 c1 ...) where the "
          "rotate-half layout needs repeat / cat (c0 c1 ... c0 c1 ...)", rope_repeat_interleave),
    Entry("apply_rope", "wrong", "angles_in_x_dtype",
          "computes positions and angles in x's dtype, so in bfloat16 / float16 large "
          "positions are rounded (2047 -> 2048) before the cos and sin", rope_angles_in_x_dtype),
    Entry("apply_rope", "wrong", "ignores_positions",
          "rotates row n by angle n (torch.arange(N)) instead of by the given positions[n]",
          rope_ignores_positions),
    Entry("apply_rope", "wrong", "no_odd_head_dim_guard",
          "does not check for an odd head_dim: the halves then differ in width and the "
          "broadcast raises a RuntimeError instead of the ValueError the contract asks for",
          rope_no_odd_guard),
    Entry("apply_rope", "right", "complex_multiply", None, rope_right_complex),
    Entry("apply_rope", "right", "rotation_matrix_einsum", None, rope_right_rotation_matrix),
]
