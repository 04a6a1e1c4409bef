"""Held-out catalogue, lesson 09 (rope): rope_angles, apply_rope."""

import math

import numpy as np
import torch

from entry import Entry


# ----------------------------------------------------------------------------- rope_angles
def angles_no_odd_check(positions, head_dim, base=10000.0):
    i = torch.arange(head_dim // 2, dtype=torch.float64)
    inv_freq = base ** (-2.0 * i / head_dim)
    return (positions.double()[:, None] * inv_freq[None, :]).float()


def angles_missing_factor_two(positions, head_dim, base=10000.0):
    if head_dim % 2 != 0:
        raise ValueError(f"head_dim={head_dim} is odd")
    idx = torch.arange(0, head_dim // 2, dtype=torch.float64)
    freqs = base ** (-idx / head_dim)
    return torch.outer(positions.to(torch.float64), freqs).to(torch.float32)


def angles_precedence(positions, head_dim, base=10000.0):
    if head_dim % 2:
        raise ValueError(f"head_dim={head_dim} must be even")
    i = torch.arange(head_dim // 2, dtype=torch.float64)
    freqs = base ** -2 * i / head_dim
    return positions.to(torch.float64).unsqueeze(1) * freqs.unsqueeze(0)


def angles_index_from_one(positions, head_dim, base=10000.0):
    if head_dim % 2 == 1:
        raise ValueError(f"head_dim={head_dim} is odd: RoPE needs pairs")
    i = torch.arange(1, head_dim // 2 + 1, dtype=torch.float64)
    inv = 1.0 / (base ** (2 * i / head_dim))
    return (positions[:, None].double() * inv).float()


def angles_half_positions(positions, head_dim, base=10000.0):
    if head_dim % 2:
        raise ValueError(f"odd head_dim={head_dim}")
    i = torch.arange(head_dim // 2, dtype=torch.float32)
    inv_freq = (base ** (-2 * i / head_dim)).half()
    return positions.half()[:, None] * inv_freq[None, :]


def angles_transposed(positions, head_dim, base=10000.0):
    if head_dim % 2:
        raise ValueError(f"head_dim={head_dim} is odd")
    i = torch.arange(head_dim // 2, dtype=torch.float64)
    inv_freq = base ** (-2 * i / head_dim)
    return inv_freq[:, None] * positions.double()[None, :]


def angles_exp_log(positions, head_dim, base=10000.0):
    if head_dim % 2 != 0:
        raise ValueError(f"head_dim={head_dim} is odd, RoPE rotates pairs")
    half = head_dim // 2
    exponent = torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim  # 2i / d
    inv_freq = torch.exp(-exponent * math.log(base))
    return torch.outer(positions.to(torch.float64), inv_freq).reshape(-1, half)


def angles_numpy_loop(positions, head_dim, base=10000.0):
    if head_dim % 2:
        raise ValueError(f"head_dim={head_dim} is odd")
    pos = [int(p) for p in positions]
    table = np.zeros((len(pos), head_dim // 2), dtype=np.float64)
    for i in range(head_dim // 2):
        freq = math.pow(base, -2.0 * i / head_dim)
        for n, p in enumerate(pos):
            table[n, i] = p * freq
    return torch.from_numpy(table)


# ----------------------------------------------------------------------------- apply_rope
def rope_adjacent_pairs(x, positions, base=10000.0):
    d = x.shape[-1]
    if d % 2:
        raise ValueError(f"head_dim={d} is odd")
    ct = torch.promote_types(x.dtype, torch.float32)
    i = torch.arange(d // 2, dtype=torch.float64)
    ang = (positions.double()[:, None] * base ** (-2 * i / d)).to(ct)
    cos, sin = ang.cos(), ang.sin()
    xe, xo = x[..., 0::2].to(ct), x[..., 1::2].to(ct)  # pairs (2i, 2i+1)
    ye = xe * cos - xo * sin
    yo = xe * sin + xo * cos
    return torch.stack([ye, yo], dim=-1).flatten(-2).to(x.dtype)


def rope_wrong_sign(x, positions, base=10000.0):
    d = x.shape[-1]
    if d % 2:
        raise ValueError(f"head_dim={d} is odd")
    ct = torch.promote_types(x.dtype, torch.float32)
    half = d // 2
    i = torch.arange(half, dtype=torch.float64)
    theta = (positions.to(torch.float64)[:, None] * base ** (-2.0 * i / d)).to(ct)
    c, s = torch.cos(theta), torch.sin(theta)
    a, b = x[..., :half].to(ct), x[..., half:].to(ct)
    return torch.cat([a * c + b * s, -a * s + b * c], dim=-1).to(x.dtype)


def rope_angles_in_x_dtype(x, positions, base=10000.0):
    head_dim = x.shape[-1]
    if head_dim % 2:
        raise ValueError(f"head_dim={head_dim} is odd")
    half = head_dim // 2
    i = torch.arange(half, dtype=x.dtype)
    inv_freq = base ** (-2 * i / head_dim)
    angles = positions.to(x.dtype)[:, None] * inv_freq  # in x's dtype
    ct = torch.promote_types(x.dtype, torch.float32)
    cos, sin = angles.to(ct).cos(), angles.to(ct).sin()
    x1, x2 = x[..., :half].to(ct), x[..., half:].to(ct)
    return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], -1).to(x.dtype)


def rope_no_odd_check(x, positions, base=10000.0):
    head_dim = x.shape[-1]
    half = head_dim // 2
    ct = torch.promote_types(x.dtype, torch.float32)
    i = torch.arange(half, dtype=torch.float64)
    ang = (positions.double().unsqueeze(-1) * base ** (-2 * i / head_dim)).to(ct)
    x1 = x[..., :half].to(ct)
    x2 = x[..., half:].to(ct)
    y1 = x1 * ang.cos() - x2 * ang.sin()
    y2 = x1 * ang.sin() + x2 * ang.cos()
    return torch.cat((y1, y2), dim=-1).to(x.dtype)


def rope_half_in_exponent(x, positions, base=10000.0):
    d = x.shape[-1]
    if d % 2:
        raise ValueError(f"head_dim={d} is odd")
    half = d // 2
    ct = torch.promote_types(x.dtype, torch.float32)
    i = torch.arange(half, dtype=torch.float64)
    freqs = base ** (-2 * i / half)
    ang = (positions.double()[:, None] * freqs).to(ct)
    lo, hi = x[..., :half].to(ct), x[..., half:].to(ct)
    return torch.cat([lo * ang.cos() - hi * ang.sin(), lo * ang.sin() + hi * ang.cos()],
                     dim=-1).to(x.dtype)


def rope_halves_swapped(x, positions, base=10000.0):
    d = x.shape[-1]
    if d % 2:
        raise ValueError(f"head_dim={d} is odd")
    half = d // 2
    ct = torch.promote_types(x.dtype, torch.float32)
    i = torch.arange(half, dtype=torch.float64)
    ang = (positions.double()[:, None] * base ** (-2 * i / d)).to(ct)
    cos, sin = torch.cos(ang), torch.sin(ang)
    x1, x2 = x[..., :half].to(ct), x[..., half:].to(ct)
    y1 = x1 * cos - x2 * sin
    y2 = x1 * sin + x2 * cos
    return torch.cat([y2, y1], dim=-1).to(x.dtype)


def rope_complex(x, positions, base=10000.0):
    d = x.shape[-1]
    if d % 2:
        raise ValueError(f"head_dim={d} is odd: RoPE rotates features in pairs")
    half = d // 2
    freq = torch.tensor([base ** (-2.0 * i / d) for i in range(half)], dtype=torch.float64)
    theta = positions.to(torch.float64)[:, None] * freq  # (N, d/2)
    rot = torch.polar(torch.ones_like(theta), theta)  # e^{i theta}
    z = torch.complex(x[..., :half].double(), x[..., half:].double())  # x_i + i x_{i+d/2}
    w = z * rot
    return torch.cat([w.real, w.imag], dim=-1).to(x.dtype)


def rope_rotate_half_f32(x, positions, base=10000.0):
    d = x.shape[-1]
    if d % 2 == 1:
        raise ValueError(f"head_dim={d} is odd")
    work = torch.promote_types(x.dtype, torch.float32)
    inv_freq = 1.0 / (base ** (torch.arange(0, d, 2, dtype=torch.float64) / d))
    emb = torch.einsum("n,f->nf", positions.to(torch.float64), inv_freq)
    emb = torch.cat((emb, emb), dim=-1)  # (N, d): angle i repeated for i + d/2
    cos, sin = emb.cos().to(work), emb.sin().to(work)
    xw = x.to(work)
    x1, x2 = xw.chunk(2, dim=-1)
    rotated = torch.cat((-x2, x1), dim=-1)
    return (xw * cos + rotated * sin).to(x.dtype)


ENTRIES = [
    Entry("rope_angles", "wrong", "no_odd_check",
          "never checks head_dim: an odd head_dim silently returns head_dim // 2 columns "
          "instead of raising ValueError", angles_no_odd_check),
    Entry("rope_angles", "wrong", "exponent_missing_two",
          "uses base ** (-i / head_dim), dropping the factor 2 of the exponent -2i/head_dim, "
          "so the frequencies fall off half as fast", angles_missing_factor_two),
    Entry("rope_angles", "wrong", "power_before_product",
          "writes base ** -2 * i / head_dim without parentheses: ** binds first, giving "
          "base^-2 * i / head_dim instead of base^(-2i/head_dim)", angles_precedence),
    Entry("rope_angles", "wrong", "index_from_one",
          "counts the pair index i from 1 to head_dim/2 instead of 0 to head_dim/2 - 1, so "
          "every frequency is one step too low and the first pair does not turn at 1 rad "
          "per position", angles_index_from_one),
    Entry("rope_angles", "wrong", "positions_in_float16",
          "casts positions and frequencies to float16 before multiplying: the angles keep "
          "only 11 significant bits (about 1e-3 relative error even for small positions), "
          "positions above 2048 are not exact and 100000 becomes inf", angles_half_positions),
    Entry("rope_angles", "wrong", "outer_product_transposed",
          "builds the outer product frequency-by-position, returning its transpose "
          "(head_dim // 2, N) instead of (N, head_dim // 2)", angles_transposed),
    Entry("rope_angles", "right", "exp_log_outer", None, angles_exp_log),
    Entry("rope_angles", "right", "numpy_double_loop", None, angles_numpy_loop),

    Entry("apply_rope", "wrong", "adjacent_pairs",
          "rotates adjacent features (2i, 2i + 1), the interleaved GPT-J layout, instead of "
          "pairing feature i with i + head_dim/2 (rotate half)", rope_adjacent_pairs),
    Entry("apply_rope", "wrong", "rotation_sign_flipped",
          "puts the minus sign on the wrong term (y_i = x_i cos + x_{i+d/2} sin, "
          "y_{i+d/2} = -x_i sin + x_{i+d/2} cos), which rotates every pair by -angle",
          rope_wrong_sign),
    Entry("apply_rope", "wrong", "angles_in_x_dtype",
          "computes positions times frequencies in x's dtype, so for float16 / bfloat16 "
          "inputs large positions and their angles are rounded (257 becomes 256 in "
          "bfloat16) and the rotation is wrong", rope_angles_in_x_dtype),
    Entry("apply_rope", "wrong", "odd_head_dim_unchecked",
          "does not check that head_dim is even: an odd head_dim splits into halves of "
          "different widths and fails with a RuntimeError from broadcasting instead of a "
          "ValueError", rope_no_odd_check),
    Entry("apply_rope", "wrong", "exponent_over_half",
          "divides the exponent by head_dim // 2 (the variable at hand) instead of head_dim: "
          "base ** (-2i / (d/2)), so the frequencies decay twice as fast",
          rope_half_in_exponent),
    Entry("apply_rope", "wrong", "halves_swapped_in_cat",
          "concatenates the rotated halves in the wrong order, cat([y2, y1]), so the second "
          "feature of each pair lands in the first half", rope_halves_swapped),
    Entry("apply_rope", "right", "complex_multiply", None, rope_complex),
    Entry("apply_rope", "right", "rotate_half_cos_sin", None, rope_rotate_half_f32),
]
