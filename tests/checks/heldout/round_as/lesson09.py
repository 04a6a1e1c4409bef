"""Held-out catalogue, lesson 09 (RoPE): rope_angles, apply_rope."""

import math

import numpy as np
import torch

from entry import Entry


# =============================================================================================
# rope_angles
# =============================================================================================

def angles_step2_and_factor2(positions, head_dim, base=10000.0):
    if head_dim % 2:
        raise ValueError(f"head_dim={head_dim} is odd")
    j = torch.arange(0, head_dim, 2, dtype=torch.float64)  # 0, 2, 4, ...
    inv_freq = base ** (-2 * j / head_dim)
    return (positions.double()[:, None] * inv_freq[None, :]).float()


def angles_no_odd_check(positions, head_dim, base=10000.0):
    half = head_dim // 2
    i = torch.arange(half, dtype=torch.float64)
    freqs = base ** (-2.0 * i / head_dim)
    return torch.outer(positions.to(torch.float64), freqs).to(torch.float32)


def angles_transposed_outer(positions, head_dim, base=10000.0):
    if head_dim % 2 != 0:
        raise ValueError(f"head_dim={head_dim} must be even")
    i = torch.arange(head_dim // 2, dtype=torch.float64)
    inv = base ** (-2 * i / head_dim)
    return positions.double()[None, :] * inv[:, None]


def angles_precedence(positions, head_dim, base=10000.0):
    if head_dim % 2:
        raise ValueError(f"head_dim={head_dim} is odd: RoPE needs pairs")
    i = torch.arange(head_dim // 2, dtype=torch.float64)
    theta = base ** -2 * i / head_dim
    return positions.double().unsqueeze(1) * theta.unsqueeze(0)


def angles_ignores_base(positions, head_dim, base=10000.0):
    if head_dim % 2:
        raise ValueError(f"head_dim={head_dim} is odd")
    i = torch.arange(head_dim // 2, dtype=torch.float64)
    inv_freq = 1.0 / (10000.0 ** (2 * i / head_dim))
    return positions.double()[:, None] * inv_freq


def angles_index_from_one(positions, head_dim, base=10000.0):
    if head_dim % 2:
        raise ValueError(f"head_dim={head_dim} is odd")
    i = torch.arange(1, head_dim // 2 + 1, dtype=torch.float64)
    inv_freq = base ** (-2 * i / head_dim)
    return positions.double()[:, None] * inv_freq[None, :]


def angles_right_numpy_outer(positions, head_dim, base=10000.0):
    if head_dim % 2 == 1:
        raise ValueError(f"head_dim={head_dim} is odd")
    pos = positions.detach().cpu().numpy().astype(np.float64)
    inv = np.power(float(base), -np.arange(0, head_dim, 2, dtype=np.float64) / head_dim)
    return torch.from_numpy(np.outer(pos, inv)).to(positions.device)


def angles_right_exp_log(positions, head_dim, base=10000.0):
    half, odd = divmod(head_dim, 2)
    if odd:
        raise ValueError(f"head_dim={head_dim} is odd")
    k = torch.arange(half, dtype=torch.float64)
    inv_freq = torch.exp(-math.log(base) * (2.0 * k) / head_dim)
    return torch.einsum("n,i->ni", positions.to(torch.float64), inv_freq).float()


# =============================================================================================
# apply_rope
# =============================================================================================

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


def rope_rotate_half_sign(x, positions, base=10000.0):
    d = x.shape[-1]
    if d % 2:
        raise ValueError(f"head_dim={d} is odd")
    wd = torch.promote_types(x.dtype, torch.float32)
    h = d // 2
    inv = base ** (-2 * torch.arange(h, dtype=torch.float64) / d)
    theta = positions.double()[:, None] * inv
    cos = torch.cat([theta.cos(), theta.cos()], dim=-1).to(wd)
    sin = torch.cat([theta.sin(), theta.sin()], dim=-1).to(wd)
    xf = x.to(wd)
    rotated = torch.cat([xf[..., h:], -xf[..., :h]], dim=-1)
    return (xf * cos + rotated * sin).to(x.dtype)


def rope_half_as_head_dim(x, positions, base=10000.0):
    head_dim = x.shape[-1]
    if head_dim % 2:
        raise ValueError(f"head_dim={head_dim} is odd")
    half = head_dim // 2
    ct = torch.promote_types(x.dtype, torch.float32)
    i = torch.arange(half, dtype=torch.float64)
    angles = positions.double()[:, None] * base ** (-2 * i / half)
    c, s = angles.cos().to(ct), angles.sin().to(ct)
    x1, x2 = x[..., :half].to(ct), x[..., half:].to(ct)
    return torch.cat([x1 * c - x2 * s, x1 * s + x2 * c], dim=-1).to(x.dtype)


def rope_angles_in_x_dtype(x, positions, base=10000.0):
    d = x.shape[-1]
    if d % 2:
        raise ValueError(f"head_dim={d} is odd")
    half = d // 2
    i = torch.arange(half, dtype=x.dtype)
    ang = positions.to(x.dtype)[:, None] * (base ** (-2 * i / d))
    cos, sin = torch.cos(ang), torch.sin(ang)
    ct = torch.promote_types(x.dtype, torch.float32)
    cos, sin = cos.to(ct), sin.to(ct)
    a, b = x[..., :half].to(ct), x[..., half:].to(ct)
    return torch.cat((a * cos - b * sin, a * sin + b * cos), -1).to(x.dtype)


def rope_no_odd_check(x, positions, base=10000.0):
    d = x.shape[-1]
    half = d // 2
    ct = torch.promote_types(x.dtype, torch.float32)
    i = torch.arange(half, dtype=torch.float64)
    ang = (positions.double()[:, None] * base ** (-2 * i / d)).to(ct)
    cos, sin = ang.cos(), ang.sin()
    x1, x2 = x[..., :half].to(ct), x[..., half:].to(ct)
    return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1).to(x.dtype)


def rope_ignores_positions(x, positions, base=10000.0):
    n, d = x.shape[-2], x.shape[-1]
    if d % 2:
        raise ValueError(f"head_dim={d} is odd")
    half = d // 2
    ct = torch.promote_types(x.dtype, torch.float32)
    pos = torch.arange(n, dtype=torch.float64)
    ang = (pos[:, None] * base ** (-2 * torch.arange(half, dtype=torch.float64) / d)).to(ct)
    x1, x2 = x[..., :half].to(ct), x[..., half:].to(ct)
    y = torch.cat([x1 * ang.cos() - x2 * ang.sin(), x1 * ang.sin() + x2 * ang.cos()], -1)
    return y.to(x.dtype)


def rope_right_complex(x, positions, base=10000.0):
    d = x.shape[-1]
    if d % 2:
        raise ValueError(f"head_dim={d} is odd")
    h = d // 2
    freq = torch.tensor([float(base) ** (-2.0 * i / d) for i in range(h)], dtype=torch.float64)
    theta = positions.to(torch.float64)[:, None] * freq[None, :]  # (N, h)
    phase = torch.polar(torch.ones_like(theta), theta)  # e^{i theta}
    z = torch.complex(x[..., :h].double(), x[..., h:].double()) * phase
    return torch.cat([z.real, z.imag], dim=-1).to(x.dtype)


def rope_right_rotation_matrix(x, positions, base=10000.0):
    d = x.shape[-1]
    if d % 2:
        raise ValueError(f"head_dim={d} is odd")
    h = d // 2
    n = positions.shape[0]
    ct = torch.promote_types(x.dtype, torch.float32)
    ang = positions.double()[:, None] * base ** (-2.0 * torch.arange(h, dtype=torch.float64) / d)
    c, s = ang.cos(), ang.sin()
    rot = torch.zeros((n, d, d), dtype=torch.float64)  # y[n] = rot[n] @ x[n]
    idx = torch.arange(h)
    rot[:, idx, idx] = c
    rot[:, idx, idx + h] = -s
    rot[:, idx + h, idx] = s
    rot[:, idx + h, idx + h] = c
    y = torch.einsum("nij,...nj->...ni", rot.to(ct), x.to(ct))
    return y.to(x.dtype)


ENTRIES = [
    Entry("rope_angles", "wrong", "step2_index_times_2",
          "takes i from torch.arange(0, head_dim, 2), which is already 2i, and still multiplies "
          "by 2 in the exponent: the frequencies are base ** (-4i / head_dim)",
          angles_step2_and_factor2),
    Entry("rope_angles", "wrong", "no_odd_head_dim_check",
          "never checks head_dim: an odd head_dim silently returns head_dim // 2 angles instead "
          "of raising ValueError",
          angles_no_odd_check),
    Entry("rope_angles", "wrong", "outer_product_transposed",
          "puts the positions on the column axis (positions[None, :] * inv_freq[:, None]): the "
          "result is (head_dim // 2, N), the transpose of the angles",
          angles_transposed_outer),
    Entry("rope_angles", "wrong", "exponent_precedence",
          "writes base ** -2 * i / head_dim without parentheses: ** binds first, so it computes "
          "base**-2 * i / head_dim instead of base ** (-2 * i / head_dim)",
          angles_precedence),
    Entry("rope_angles", "wrong", "hard_coded_base",
          "hard-codes 10000.0 in the frequencies and never uses the base argument, so any other "
          "base gives the default's angles",
          angles_ignores_base),
    Entry("rope_angles", "wrong", "pair_index_from_one",
          "numbers the pairs from 1 to head_dim // 2 (arange(1, half + 1)): the first pair "
          "should turn at frequency 1 (i = 0), every frequency is shifted by one step",
          angles_index_from_one),
    Entry("rope_angles", "right", "numpy_outer_float64", None, angles_right_numpy_outer),
    Entry("rope_angles", "right", "exp_log_einsum", None, angles_right_exp_log),

    Entry("apply_rope", "wrong", "adjacent_pairs",
          "rotates adjacent features (0, 1), (2, 3), ... (the GPT-J interleaved layout) instead "
          "of pairing feature i with i + head_dim/2 (rotate half)",
          rope_adjacent_pairs),
    Entry("apply_rope", "wrong", "rotate_half_sign",
          "builds rotate_half as cat(x2, -x1) instead of cat(-x2, x1): every pair turns by "
          "-angle, the opposite direction",
          rope_rotate_half_sign),
    Entry("apply_rope", "wrong", "half_used_as_head_dim",
          "divides by half = head_dim // 2 in the frequency exponent instead of by head_dim: "
          "the frequencies are base ** (-2i / (d/2)), far too low",
          rope_half_as_head_dim),
    Entry("apply_rope", "wrong", "angles_in_x_dtype",
          "computes positions * frequency in x's dtype: in bfloat16 a large position (257, 1500, "
          "...) and its angles are rounded before the cos and sin, off by whole radians",
          rope_angles_in_x_dtype),
    Entry("apply_rope", "wrong", "no_odd_head_dim_check",
          "does not check that head_dim is even: with an odd head_dim the two halves have "
          "different widths and the code fails with a RuntimeError instead of a ValueError",
          rope_no_odd_check),
    Entry("apply_rope", "wrong", "positions_assumed_arange",
          "ignores the positions argument and rotates row n by n (torch.arange(N)), which is "
          "wrong whenever the positions are not 0, 1, ..., N-1",
          rope_ignores_positions),
    Entry("apply_rope", "right", "complex_multiplication", None, rope_right_complex),
    Entry("apply_rope", "right", "rotation_matrix_einsum", None, rope_right_rotation_matrix),
]
