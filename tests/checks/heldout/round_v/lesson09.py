"""Held-out catalogue, lesson 09 (RoPE): rope_angles, apply_rope."""

import math

import numpy as np
import torch

from entry import Entry


# ============================================================== rope_angles
def angles_missing_two(positions, head_dim, base=10000.0):
    if head_dim % 2:
        raise ValueError(f"head_dim={head_dim} is odd")
    i = torch.arange(head_dim // 2, dtype=torch.float64)
    freq = base ** (-i / head_dim)
    return positions.double()[:, None] * freq[None, :]


def angles_even_index_doubled(positions, head_dim, base=10000.0):
    if head_dim % 2 != 0:
        raise ValueError(f"head_dim={head_dim} must be even")
    i = torch.arange(0, head_dim, 2, dtype=torch.float64)  # 0, 2, 4, ...
    inv = base ** (-2 * i / head_dim)
    return torch.outer(positions.to(torch.float64), inv)


def angles_no_odd_check(positions, head_dim, base=10000.0):
    half = head_dim // 2
    exps = torch.arange(half, dtype=torch.float64) * (-2.0 / head_dim)
    return positions.to(torch.float64).unsqueeze(1) * torch.pow(float(base), exps).unsqueeze(0)


def angles_half_positions(positions, head_dim, base=10000.0):
    if head_dim % 2 == 1:
        raise ValueError(f"head_dim={head_dim} is odd: RoPE needs pairs")
    pos = positions.to(torch.float16)
    inv_freq = 1.0 / (base ** (torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim))
    return pos.float()[:, None] * inv_freq[None, :]


def angles_transposed(positions, head_dim, base=10000.0):
    if head_dim % 2:
        raise ValueError(f"head_dim={head_dim} is odd")
    idx = torch.arange(head_dim // 2, dtype=torch.float64)
    inv_freq = base ** (-2.0 * idx / head_dim)
    return positions.double()[None, :] * inv_freq[:, None]


def angles_precedence(positions, head_dim, base=10000.0):
    if head_dim % 2:
        raise ValueError(f"head_dim={head_dim} is odd")
    i = torch.arange(head_dim // 2, dtype=torch.float64)
    inv_freq = 1.0 / base ** 2 * i / head_dim
    return positions.double()[:, None] * inv_freq[None, :]


def angles_numpy_outer(positions, head_dim, base=10000.0):
    if int(head_dim) % 2 == 1:
        raise ValueError(f"head_dim={head_dim} is odd")
    pos = np.asarray(positions.cpu().numpy(), dtype=np.float64)
    freqs = np.power(float(base), -np.arange(0, head_dim, 2, dtype=np.float64) / head_dim)
    return torch.from_numpy(np.outer(pos, freqs))


def angles_exp_log(positions, head_dim, base=10000.0):
    if head_dim % 2:
        raise ValueError(f"head_dim={head_dim} is odd; RoPE rotates pairs")
    half = head_dim // 2
    rows = []
    for i in range(half):
        rows.append(math.exp(-2.0 * i / head_dim * math.log(base)))
    inv = torch.tensor(rows, dtype=torch.float64)
    return positions.to(torch.float64).reshape(-1, 1) * inv.reshape(1, -1)


# ============================================================== apply_rope
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


def rope_sin_sign_flipped(x, positions, base=10000.0):
    d = x.shape[-1]
    if d % 2:
        raise ValueError(f"head_dim={d} is odd")
    ct = torch.promote_types(x.dtype, torch.float32)
    i = torch.arange(d // 2, dtype=torch.float64)
    ang = (positions.double()[:, None] * base ** (-2 * i / d)).to(ct)
    cos, sin = torch.cos(ang), torch.sin(ang)
    x1, x2 = x[..., : d // 2].to(ct), x[..., d // 2:].to(ct)
    return torch.cat([x1 * cos + x2 * sin, -x1 * sin + x2 * cos], dim=-1).to(x.dtype)


def rope_angles_in_x_dtype(x, positions, base=10000.0):
    d = x.shape[-1]
    if d % 2:
        raise ValueError(f"head_dim={d} is odd")
    half = d // 2
    ang = positions.to(x.dtype)[:, None] * (base ** (-2 * torch.arange(half, dtype=torch.float64)
                                                     / d)).to(x.dtype)[None, :]
    ct = torch.promote_types(x.dtype, torch.float32)
    cos, sin = ang.to(ct).cos(), ang.to(ct).sin()
    a, b = x[..., :half].to(ct), x[..., half:].to(ct)
    return torch.cat((a * cos - b * sin, a * sin + b * cos), -1).to(x.dtype)


def rope_no_odd_guard(x, positions, base=10000.0):
    d = x.shape[-1]
    half = d // 2
    ct = torch.promote_types(x.dtype, torch.float32)
    freq = torch.tensor([base ** (-2 * i / d) for i in range(half)], dtype=torch.float64)
    ang = (positions.double().unsqueeze(-1) * freq).to(ct)
    a, b = x[..., :half].to(ct), x[..., half:].to(ct)
    out = torch.cat([a * ang.cos() - b * ang.sin(), a * ang.sin() + b * ang.cos()], dim=-1)
    return out.to(x.dtype)


def rope_ignores_positions(x, positions, base=10000.0):
    n, d = x.shape[-2], x.shape[-1]
    if d % 2:
        raise ValueError(f"head_dim={d} is odd")
    ct = torch.promote_types(x.dtype, torch.float32)
    pos = torch.arange(n, dtype=torch.float64)
    ang = (pos[:, None] * base ** (-2 * torch.arange(d // 2, dtype=torch.float64) / d)).to(ct)
    c, s = torch.cos(ang), torch.sin(ang)
    x1, x2 = x[..., : d // 2].to(ct), x[..., d // 2:].to(ct)
    return torch.cat([x1 * c - x2 * s, x1 * s + x2 * c], dim=-1).to(x.dtype)


def rope_default_base_hardcoded(x, positions, base=10000.0):
    d = x.shape[-1]
    if d % 2:
        raise ValueError(f"head_dim={d} is odd")
    ct = torch.promote_types(x.dtype, torch.float32)
    theta = 10000.0 ** (-2 * torch.arange(d // 2, dtype=torch.float64) / d)
    ang = (positions.double()[:, None] * theta[None, :]).to(ct)
    c, s = torch.cos(ang), torch.sin(ang)
    x1, x2 = x[..., : d // 2].to(ct), x[..., d // 2:].to(ct)
    return torch.cat([x1 * c - x2 * s, x1 * s + x2 * c], dim=-1).to(x.dtype)


def rope_complex(x, positions, base=10000.0):
    d = x.shape[-1]
    if d % 2 == 1:
        raise ValueError(f"head_dim={d} is odd")
    h = d // 2
    inv = torch.pow(torch.tensor(float(base), dtype=torch.float64),
                    -torch.arange(h, dtype=torch.float64) * 2 / d)
    theta = positions.to(torch.float64)[:, None] * inv
    rot = torch.polar(torch.ones_like(theta), theta)  # e^{i theta}, complex128
    z = torch.complex(x[..., :h].to(torch.float64), x[..., h:].to(torch.float64)) * rot
    return torch.cat([z.real, z.imag], dim=-1).to(x.dtype)


def rope_rotate_half(x, positions, base=10000.0):
    dim = x.shape[-1]
    if dim % 2:
        raise ValueError(f"head_dim={dim} is odd")
    inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.float64) / dim))
    freqs = torch.einsum("n,f->nf", positions.to(torch.float64), inv_freq)
    emb = torch.cat((freqs, freqs), dim=-1)  # (N, d)
    x64 = x.to(torch.float64)
    x1, x2 = x64[..., : dim // 2], x64[..., dim // 2:]
    rotated = torch.cat((-x2, x1), dim=-1)
    return (x64 * emb.cos() + rotated * emb.sin()).to(x.dtype)


ENTRIES = [
    Entry("rope_angles", "wrong", "exponent_missing_factor_two",
          "the frequency is base ** (-i / head_dim): the factor 2 of -2i/head_dim is missing, "
          "so the frequencies fall off half as fast",
          angles_missing_two),
    Entry("rope_angles", "wrong", "even_index_and_factor_two",
          "takes i over 0, 2, 4, ... (the even feature index) and still multiplies by 2 in "
          "-2i/head_dim, so every exponent after the first is doubled",
          angles_even_index_doubled),
    Entry("rope_angles", "wrong", "odd_head_dim_accepted",
          "no check for an odd head_dim: it returns head_dim // 2 angles instead of raising "
          "ValueError",
          angles_no_odd_check),
    Entry("rope_angles", "wrong", "positions_cast_to_float16",
          "casts the positions to float16, which overflows to inf above 65504 and rounds "
          "large positions, so large positions give wrong (or infinite) angles",
          angles_half_positions),
    Entry("rope_angles", "wrong", "outer_product_transposed",
          "the outer product puts positions on the columns and frequencies on the rows, "
          "returning (head_dim // 2, N) instead of (N, head_dim // 2)",
          angles_transposed),
    Entry("rope_angles", "wrong", "precedence_in_frequency",
          "writes 1.0 / base ** 2 * i / head_dim, which Python reads as (1/base**2) * i / "
          "head_dim, instead of 1 / base ** (2 * i / head_dim)",
          angles_precedence),
    Entry("rope_angles", "right", "numpy_outer_float64", None, angles_numpy_outer),
    Entry("rope_angles", "right", "exp_log_loop", None, angles_exp_log),

    Entry("apply_rope", "wrong", "adjacent_pairs",
          "rotates adjacent features (0,1), (2,3), ... (the interleaved GPT-J layout) instead "
          "of pairing feature i with i + d/2",
          rope_adjacent_pairs),
    Entry("apply_rope", "wrong", "rotates_backwards",
          "the sin terms have the wrong signs (y_i = x_i cos + x_{i+d/2} sin), a rotation by "
          "-angle instead of +angle",
          rope_sin_sign_flipped),
    Entry("apply_rope", "wrong", "angles_in_half_precision",
          "computes the angles in x's dtype: for a bfloat16 (or float16) x the products position "
          "x frequency are rounded at large positions, so cos and sin are visibly off",
          rope_angles_in_x_dtype),
    Entry("apply_rope", "wrong", "no_odd_head_dim_check",
          "no check for an odd head_dim: the halves have different widths and torch raises a "
          "RuntimeError instead of the ValueError the contract asks for",
          rope_no_odd_guard),
    Entry("apply_rope", "wrong", "ignores_positions",
          "uses arange(N) as the positions instead of the positions argument, wrong for "
          "positions that do not start at 0 or are not in order",
          rope_ignores_positions),
    Entry("apply_rope", "wrong", "base_hardcoded",
          "hard-codes 10000.0 for the base instead of using the base argument",
          rope_default_base_hardcoded),
    Entry("apply_rope", "right", "complex_multiply", None, rope_complex),
    Entry("apply_rope", "right", "rotate_half_full_width_float64", None, rope_rotate_half),
]
