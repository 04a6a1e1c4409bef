"""Held-out catalogue, lesson 09 (RoPE): rope_angles, apply_rope."""

import math

import numpy as np
import torch

from entry import Entry


# ============================================================ rope_angles: wrong
def angles_missing_two(positions, head_dim, base=10000.0):
    if head_dim % 2:
        raise ValueError(f"head_dim={head_dim} is odd")
    i = torch.arange(head_dim // 2, dtype=torch.float64)
    inv = base ** (-i / head_dim)
    return (positions.double()[:, None] * inv[None, :]).float()


def angles_index_from_one(positions, head_dim, base=10000.0):
    if head_dim % 2 != 0:
        raise ValueError(f"head_dim={head_dim} must be even")
    i = torch.arange(1, head_dim // 2 + 1, dtype=torch.float64)
    freqs = base ** (-2 * i / head_dim)
    return torch.outer(positions.to(torch.float64), freqs).to(torch.float32)


def angles_precedence(positions, head_dim, base=10000.0):
    if head_dim % 2:
        raise ValueError(f"head_dim={head_dim} is odd")
    i = torch.arange(head_dim // 2, dtype=torch.float64)
    freq = base ** -2 * i / head_dim
    return positions.double().unsqueeze(1) * freq.unsqueeze(0)


def angles_no_odd_check(positions, head_dim, base=10000.0):
    half = head_dim // 2
    exponents = torch.arange(0, 2 * half, 2, dtype=torch.float64) / head_dim
    inv_freq = 1.0 / (base ** exponents)
    return (positions[:, None].double() * inv_freq).float()


def angles_in_half(positions, head_dim, base=10000.0):
    if head_dim % 2:
        raise ValueError(f"head_dim={head_dim} is odd")
    inv = base ** (-2.0 * torch.arange(head_dim // 2, dtype=torch.float32) / head_dim)
    pos = positions.to(torch.float16)  # angles go into half-precision q/k anyway
    return (pos[:, None] * inv.half()[None, :]).float()


def angles_transposed(positions, head_dim, base=10000.0):
    if head_dim % 2:
        raise ValueError(f"head_dim={head_dim} is odd")
    inv = base ** (-2.0 * torch.arange(head_dim // 2, dtype=torch.float64) / head_dim)
    return (inv[:, None] * positions.double()[None, :]).float()


# ============================================================ rope_angles: right
def angles_numpy_f64(positions, head_dim, base=10000.0):
    if head_dim % 2 == 1:
        raise ValueError(f"head_dim={head_dim} is odd: RoPE needs pairs")
    pos = positions.cpu().numpy().astype(np.float64)
    i = np.arange(head_dim // 2, dtype=np.float64)
    ang = pos[:, None] * np.power(float(base), -2.0 * i / head_dim)[None, :]
    return torch.from_numpy(ang.reshape(len(pos), head_dim // 2))


def angles_exp_log(positions, head_dim, base=10000.0):
    if head_dim & 1:
        raise ValueError(f"head_dim={head_dim} must be even")
    rate = -2.0 * math.log(base) / head_dim
    freqs = torch.exp(rate * torch.arange(head_dim // 2, dtype=torch.float64))
    return torch.outer(positions.to(torch.float64), freqs).to(torch.float32)


# ============================================================ apply_rope: wrong
def rope_adjacent_pairs(x, positions, base=10000.0):
    d = x.shape[-1]
    if d % 2:
        raise ValueError(f"head_dim={d} is odd")
    ct = torch.promote_types(x.dtype, torch.float32)
    inv = base ** (-2.0 * torch.arange(d // 2, dtype=torch.float64) / d)
    ang = (positions.double()[:, None] * inv).to(ct)
    c, s = ang.cos(), ang.sin()
    xe, xo = x[..., 0::2].to(ct), x[..., 1::2].to(ct)
    ye = xe * c - xo * s
    yo = xe * s + xo * c
    return torch.stack([ye, yo], dim=-1).flatten(-2).to(x.dtype)


def rope_sign_flipped(x, positions, base=10000.0):
    d = x.shape[-1]
    if d % 2:
        raise ValueError(f"head_dim={d} is odd")
    h = d // 2
    f = torch.promote_types(x.dtype, torch.float32)
    theta = positions.to(torch.float64)[:, None] * base ** (
        -2 * torch.arange(h, dtype=torch.float64) / d)
    cos, sin = torch.cos(theta).to(f), torch.sin(theta).to(f)
    a, b = x[..., :h].to(f), x[..., h:].to(f)
    return torch.cat([a * cos + b * sin, b * cos - a * sin], dim=-1).to(x.dtype)


def rope_angles_in_x_dtype(x, positions, base=10000.0):
    head_dim = x.shape[-1]
    if head_dim % 2:
        raise ValueError(f"head_dim={head_dim} is odd")
    half = head_dim // 2
    idx = torch.arange(half, dtype=x.dtype)
    angles = positions.to(x.dtype)[:, None] * base ** (-2 * idx / head_dim)
    compute = torch.promote_types(x.dtype, torch.float32)
    cos, sin = angles.to(compute).cos(), angles.to(compute).sin()
    x1, x2 = x[..., :half].to(compute), x[..., half:].to(compute)
    return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], -1).to(x.dtype)


def rope_interleaved_cos_table(x, positions, base=10000.0):
    dim = x.shape[-1]
    if dim % 2:
        raise ValueError(f"head_dim={dim} is odd")
    wd = torch.promote_types(x.dtype, torch.float32)
    freqs = positions.double()[:, None] * base ** (
        -torch.arange(0, dim, 2, dtype=torch.float64) / dim)
    emb = freqs.repeat_interleave(2, dim=-1).to(wd)  # (N, d)
    xf = x.to(wd)
    rotated = torch.cat([-xf[..., dim // 2:], xf[..., :dim // 2]], dim=-1)
    return (xf * emb.cos() + rotated * emb.sin()).to(x.dtype)


def rope_chunk_wrong_dim(x, positions, base=10000.0):
    d = x.shape[-1]
    if d % 2:
        raise ValueError(f"head_dim={d} is odd")
    ct = torch.promote_types(x.dtype, torch.float32)
    ang = positions.double()[:, None] * base ** (-2.0 * torch.arange(d // 2).double() / d)
    cos, sin = ang.cos().to(ct), ang.sin().to(ct)
    x1, x2 = x.to(ct).chunk(2, dim=-2)
    return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1).to(x.dtype)


def rope_no_odd_check(x, positions, base=10000.0):
    d = x.shape[-1]
    half = d // 2
    ct = torch.promote_types(x.dtype, torch.float32)
    inv = base ** (-2.0 * torch.arange(half, dtype=torch.float64) / d)
    theta = (positions.double()[:, None] * inv).to(ct)
    x1, x2 = x[..., :half].to(ct), x[..., half:].to(ct)
    y = torch.cat([x1 * theta.cos() - x2 * theta.sin(), x1 * theta.sin() + x2 * theta.cos()],
                  dim=-1)
    return y.to(x.dtype)


# ============================================================ apply_rope: right
def rope_complex(x, positions, base=10000.0):
    d = x.shape[-1]
    if d % 2:
        raise ValueError(f"head_dim={d} is odd")
    h = d // 2
    xd = x.to(torch.float64)
    z = torch.complex(xd[..., :h], xd[..., h:])  # pair (i, i + d/2) as one complex number
    theta = positions.to(torch.float64)[:, None] * torch.pow(
        torch.tensor(float(base), dtype=torch.float64),
        -2.0 * torch.arange(h, dtype=torch.float64) / d)
    zr = z * torch.polar(torch.ones_like(theta), theta)
    return torch.cat([zr.real, zr.imag], dim=-1).to(x.dtype)


def rope_rotation_matrices(x, positions, base=10000.0):
    d = x.shape[-1]
    if d % 2 != 0:
        raise ValueError(f"head_dim={d} is odd")
    h = d // 2
    i = torch.arange(h, dtype=torch.float64)
    th = positions.to(torch.float64).view(-1, 1) * (float(base) ** (-2.0 * i / d))  # (N, h)
    c, s = torch.cos(th), torch.sin(th)
    rot = torch.stack([torch.stack([c, -s], -1), torch.stack([s, c], -1)], -2)  # (N, h, 2, 2)
    pairs = torch.stack([x[..., :h], x[..., h:]], dim=-1).to(torch.float64)  # (..., N, h, 2)
    out = torch.einsum("nhij,...nhj->...nhi", rot, pairs)
    return torch.cat([out[..., 0], out[..., 1]], dim=-1).to(x.dtype)


ENTRIES = [
    Entry("rope_angles", "wrong", "exponent-missing-two",
          "writes the frequency as base ** (-i / head_dim), dropping the factor 2 of "
          "-2 i / head_dim, so every pair after the first turns too fast",
          angles_missing_two),
    Entry("rope_angles", "wrong", "index-from-one",
          "counts the pairs i = 1 .. head_dim/2 instead of 0 .. head_dim/2 - 1, so the first "
          "pair no longer turns by exactly the position",
          angles_index_from_one),
    Entry("rope_angles", "wrong", "precedence",
          "writes base ** -2 * i / head_dim, which Python reads as (base ** -2) * i / head_dim "
          "instead of base ** (-2 * i / head_dim)",
          angles_precedence),
    Entry("rope_angles", "wrong", "no-odd-check",
          "never checks head_dim: an odd head_dim is silently floored to head_dim // 2 pairs "
          "instead of raising ValueError",
          angles_no_odd_check),
    Entry("rope_angles", "wrong", "positions-in-float16",
          "computes the angles in float16 (positions and frequencies cast to half), so every "
          "angle is rounded to about 3 digits and positions above 65504 become inf, where "
          "float32/64 keep them exact",
          angles_in_half),
    Entry("rope_angles", "wrong", "outer-product-transposed",
          "builds the outer product as inv_freq[:, None] * positions[None, :], giving "
          "(head_dim/2, N) instead of (N, head_dim/2)",
          angles_transposed),
    Entry("rope_angles", "right", "numpy-float64", None, angles_numpy_f64),
    Entry("rope_angles", "right", "exp-of-log-outer", None, angles_exp_log),
    Entry("apply_rope", "wrong", "adjacent-pairs",
          "rotates adjacent features (2i, 2i+1), the GPT-J/original layout, instead of the "
          "rotate-half pairs (i, i + d/2) the lesson fixes",
          rope_adjacent_pairs),
    Entry("apply_rope", "wrong", "rotation-sign-flipped",
          "puts the minus sign on the wrong term (y_i = x_i cos + x_{i+d/2} sin, "
          "y_{i+d/2} = x_{i+d/2} cos - x_i sin), rotating by -angle",
          rope_sign_flipped),
    Entry("apply_rope", "wrong", "angles-in-x-dtype",
          "computes positions and frequencies in x's dtype, so with float16/bfloat16 inputs "
          "large positions and their angles are rounded before the rotation",
          rope_angles_in_x_dtype),
    Entry("apply_rope", "wrong", "interleaved-cos-table",
          "mixes the two conventions: builds the cos/sin table with repeat_interleave (the "
          "adjacent-pair layout) but rotates with rotate-half, where the table must be "
          "cat([freqs, freqs])",
          rope_interleaved_cos_table),
    Entry("apply_rope", "wrong", "chunk-along-positions",
          "splits x into halves with chunk(2, dim=-2), along the positions axis instead of "
          "the feature axis (raises or pairs the wrong numbers)",
          rope_chunk_wrong_dim),
    Entry("apply_rope", "wrong", "no-odd-check",
          "never checks head_dim, so an odd head_dim fails with a RuntimeError from "
          "mismatched halves instead of the ValueError the contract asks for",
          rope_no_odd_check),
    Entry("apply_rope", "right", "complex-multiply", None, rope_complex),
    Entry("apply_rope", "right", "2x2-rotation-einsum", None, rope_rotation_matrices),
]
