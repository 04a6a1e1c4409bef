"""Held-out catalogue, lesson 09 (rope): rope_angles, apply_rope."""

import math

import numpy as np
import torch

from entry import Entry


# ============================================================ rope_angles: wrong
def angles_no_factor_two(positions, head_dim, base=10000.0):
    if head_dim % 2:
        raise ValueError(f"head_dim={head_dim} is odd")
    i = torch.arange(head_dim // 2, dtype=torch.float64)
    freqs = base ** (-i / head_dim)
    return (positions.double()[:, None] * freqs[None, :]).float()


def angles_no_odd_check(positions, head_dim, base=10000.0):
    half = head_dim // 2
    inv = 1.0 / (base ** (torch.arange(0, half, dtype=torch.float64) * 2 / head_dim))
    return torch.outer(positions.to(torch.float64), inv).to(torch.float32)


def angles_transposed(positions, head_dim, base=10000.0):
    if head_dim % 2 != 0:
        raise ValueError(f"head_dim={head_dim} must be even")
    idx = torch.arange(head_dim // 2, dtype=torch.float64)
    inv_freq = base ** (-2.0 * idx / head_dim)
    return (inv_freq[:, None] * positions.to(torch.float64)[None, :]).float()


def angles_precedence(positions, head_dim, base=10000.0):
    if head_dim % 2:
        raise ValueError(f"head_dim={head_dim} is odd")
    i = torch.arange(head_dim // 2, dtype=torch.float64)
    inv_freq = base ** -2 * i / head_dim
    return positions.double().unsqueeze(1) * inv_freq.unsqueeze(0)


def angles_hardcoded_base(positions, head_dim, base=10000.0):
    if head_dim % 2:
        raise ValueError(f"head_dim={head_dim} is odd: RoPE needs pairs")
    exps = torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim
    inv_freq = 10000.0 ** (-exps)
    return (positions.to(torch.float64)[:, None] * inv_freq).to(torch.float32)


def angles_index_from_one(positions, head_dim, base=10000.0):
    if head_dim % 2:
        raise ValueError(f"head_dim={head_dim} is odd")
    i = torch.arange(1, head_dim // 2 + 1, dtype=torch.float64)
    return (positions.double()[:, None] * base ** (-2 * i / head_dim)).float()


# ============================================================ rope_angles: right
def angles_numpy_outer(positions, head_dim, base=10000.0):
    if head_dim % 2 == 1:
        raise ValueError(f"head_dim={head_dim} is odd: features must pair up")
    pos = np.asarray(positions.cpu().numpy(), dtype=np.float64)
    inv = np.power(float(base), -np.arange(0, head_dim, 2, dtype=np.float64) / head_dim)
    return torch.from_numpy(np.outer(pos, inv)).to(positions.device)


def angles_exp_log(positions, head_dim, base=10000.0):
    if head_dim % 2:
        raise ValueError(f"head_dim={head_dim} is odd")
    half = head_dim // 2
    i = torch.arange(half, dtype=torch.float64)
    inv = torch.exp(-math.log(base) * (2.0 * i) / head_dim)
    return torch.einsum("n,i->ni", positions.to(torch.float64), inv).to(torch.float32)


# ============================================================ apply_rope: wrong
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


def rope_sign_flipped(x, positions, base=10000.0):
    d = x.shape[-1]
    if d % 2:
        raise ValueError(f"head_dim={d} is odd")
    ct = torch.promote_types(x.dtype, torch.float32)
    half = d // 2
    inv = base ** (-2.0 * torch.arange(half, dtype=torch.float64) / d)
    ang = (positions.to(torch.float64)[:, None] * inv).to(ct)
    cos, sin = torch.cos(ang), torch.sin(ang)
    x1, x2 = x[..., :half].to(ct), x[..., half:].to(ct)
    rotated = torch.cat([x2, -x1], dim=-1)  # "rotate half"
    y = x.to(ct) * torch.cat([cos, cos], -1) + rotated * torch.cat([sin, sin], -1)
    return y.to(x.dtype)


def rope_angles_in_x_dtype(x, positions, base=10000.0):
    d = x.shape[-1]
    if d % 2:
        raise ValueError(f"head_dim={d} is odd")
    half = d // 2
    ct = torch.promote_types(x.dtype, torch.float32)
    i = torch.arange(half, dtype=x.dtype)
    ang = positions.to(x.dtype)[:, None] * (base ** (-2 * i / d))
    cos, sin = ang.cos().to(ct), ang.sin().to(ct)
    x1, x2 = x[..., :half].to(ct), x[..., half:].to(ct)
    return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1).to(x.dtype)


def rope_interleaved_table(x, positions, base=10000.0):
    d = x.shape[-1]
    if d % 2:
        raise ValueError(f"head_dim={d} is odd")
    ct = torch.promote_types(x.dtype, torch.float32)
    inv = base ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
    ang = positions.double()[:, None] * inv[None, :]  # (N, d/2)
    emb = ang.repeat_interleave(2, dim=-1).to(ct)  # (N, d)
    half = d // 2
    xf = x.to(ct)
    rot = torch.cat([-xf[..., half:], xf[..., :half]], dim=-1)
    return (xf * emb.cos() + rot * emb.sin()).to(x.dtype)


def rope_ignores_positions(x, positions, base=10000.0):
    n, d = x.shape[-2], x.shape[-1]
    if d % 2:
        raise ValueError(f"head_dim={d} is odd")
    ct = torch.promote_types(x.dtype, torch.float32)
    pos = torch.arange(n, dtype=torch.float64)
    freq = base ** (-2 * torch.arange(d // 2, dtype=torch.float64) / d)
    ang = torch.outer(pos, freq).to(ct)
    h = d // 2
    a, b = x[..., :h].to(ct), x[..., h:].to(ct)
    return torch.cat([a * ang.cos() - b * ang.sin(), a * ang.sin() + b * ang.cos()], -1).to(x.dtype)


def rope_no_odd_check(x, positions, base=10000.0):
    d = x.shape[-1]
    half = d // 2
    ct = torch.promote_types(x.dtype, torch.float32)
    inv = base ** (-2.0 * torch.arange(half, dtype=torch.float64) / d)
    ang = (positions.double()[:, None] * inv).to(ct)
    x1 = x[..., :half].to(ct)
    x2 = x[..., half:].to(ct)
    y1 = x1 * ang.cos() - x2 * ang.sin()
    y2 = x1 * ang.sin() + x2 * ang.cos()
    return torch.cat([y1, y2], dim=-1).to(x.dtype)


# ============================================================ apply_rope: right
def rope_complex(x, positions, base=10000.0):
    d = x.shape[-1]
    if d % 2:
        raise ValueError(f"head_dim={d} is odd")
    h = d // 2
    freqs = float(base) ** (-2.0 * torch.arange(h, dtype=torch.float64) / d)
    theta = positions.to(torch.float64)[:, None] * freqs
    turn = torch.polar(torch.ones_like(theta), theta)  # e^{i theta}, complex128
    z = torch.complex(x[..., :h].double(), x[..., h:].double()) * turn
    return torch.cat([z.real, z.imag], dim=-1).to(x.dtype)


def rope_rotation_matrix(x, positions, base=10000.0):
    d = x.shape[-1]
    if d % 2:
        raise ValueError(f"head_dim={d} is odd: no partner for the last feature")
    n = x.shape[-2]
    h = d // 2
    rot = torch.zeros(n, d, d, dtype=torch.float64)
    for i in range(h):
        th = positions.double() * base ** (-2.0 * i / d)
        c, s = torch.cos(th), torch.sin(th)
        rot[:, i, i] = c
        rot[:, i, i + h] = -s
        rot[:, i + h, i] = s
        rot[:, i + h, i + h] = c
    y = torch.einsum("nij,...nj->...ni", rot, x.double())
    return y.to(x.dtype)


ENTRIES = [
    Entry("rope_angles", "wrong", "exponent_missing_two",
          "uses base ** (-i / head_dim) instead of base ** (-2 i / head_dim): the frequencies "
          "fall off half as fast", angles_no_factor_two),
    Entry("rope_angles", "wrong", "no_odd_head_dim_check",
          "never checks head_dim, so an odd head_dim silently returns head_dim // 2 columns "
          "instead of raising ValueError", angles_no_odd_check),
    Entry("rope_angles", "wrong", "outer_product_transposed",
          "builds inv_freq[:, None] * positions[None, :], the (head_dim // 2, N) transpose of "
          "the angle table", angles_transposed),
    Entry("rope_angles", "wrong", "power_precedence",
          "writes base ** -2 * i / head_dim, which Python reads as (base ** -2) * i / head_dim, "
          "not base ** (-2 * i / head_dim)", angles_precedence),
    Entry("rope_angles", "wrong", "hardcoded_base",
          "hard-codes 10000.0 in the frequencies instead of using the base argument, so any "
          "other base is ignored", angles_hardcoded_base),
    Entry("rope_angles", "wrong", "index_from_one",
          "counts the pair index i from 1 to head_dim // 2 instead of from 0, so the first "
          "pair does not turn at one radian per position and every frequency is shifted",
          angles_index_from_one),
    Entry("rope_angles", "right", "numpy_outer_float64", None, angles_numpy_outer),
    Entry("rope_angles", "right", "exp_log_einsum", None, angles_exp_log),

    Entry("apply_rope", "wrong", "adjacent_pairs",
          "rotates adjacent features (0, 1), (2, 3), ... (the GPT-J / interleaved layout) "
          "instead of pairing feature i with i + head_dim // 2", rope_adjacent_pairs),
    Entry("apply_rope", "wrong", "rotate_half_sign",
          "builds rotate_half as cat([x2, -x1]) instead of cat([-x2, x1]), so every pair "
          "turns by -angle", rope_sign_flipped),
    Entry("apply_rope", "wrong", "angles_in_half_precision",
          "computes positions and angles in x's dtype, so in bfloat16 / float16 large "
          "positions are rounded (257 becomes 256) before they are turned into angles",
          rope_angles_in_x_dtype),
    Entry("apply_rope", "wrong", "cos_table_repeat_interleave",
          "duplicates the angle table with repeat_interleave(2) (the interleaved layout's "
          "table) while rotating halves, so feature j gets the angle of pair j // 2 instead of "
          "j mod head_dim / 2", rope_interleaved_table),
    Entry("apply_rope", "wrong", "arange_instead_of_positions",
          "rotates row n by angles of torch.arange(N) and ignores the positions argument, so "
          "any other positions give wrong angles", rope_ignores_positions),
    Entry("apply_rope", "wrong", "no_odd_head_dim_check",
          "has no check for an odd head_dim: the halves then have different widths and the "
          "code fails with a RuntimeError about shapes instead of the ValueError the contract "
          "asks for", rope_no_odd_check),
    Entry("apply_rope", "right", "complex_multiply", None, rope_complex),
    Entry("apply_rope", "right", "explicit_rotation_matrices", None, rope_rotation_matrix),
]
