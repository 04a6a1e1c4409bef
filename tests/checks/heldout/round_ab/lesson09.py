"""Held-out catalogue, lesson 09 (RoPE): rope_angles, apply_rope."""

import math

import numpy as np
import torch

from entry import Entry


# ============================================================================ rope_angles
def angles_linspace_endpoint(positions, head_dim, base=10000.0):
    if head_dim % 2:
        raise ValueError(f"head_dim={head_dim} is odd")
    half = head_dim // 2
    expo = torch.linspace(0.0, 1.0, half, dtype=torch.float64)  # i / (d/2) ... or so
    inv_freq = base ** (-expo)
    return positions.double()[:, None] * inv_freq[None, :]


def angles_double_two(positions, head_dim, base=10000.0):
    if head_dim % 2 != 0:
        raise ValueError(f"head_dim={head_dim} must be even")
    idx = torch.arange(0, head_dim, 2, dtype=torch.float64)  # 0, 2, 4, ...
    inv_freq = base ** (-2 * idx / head_dim)
    return (positions.to(torch.float64).unsqueeze(1) * inv_freq).float()


def angles_no_odd_guard(positions, head_dim, base=10000.0):
    half = head_dim // 2
    i = torch.arange(half, dtype=torch.float64)
    freqs = base ** (-2 * i / head_dim)
    return torch.outer(positions.to(torch.float64), freqs).to(torch.float32)


def angles_floor_division(positions, head_dim, base=10000.0):
    if head_dim % 2:
        raise ValueError(f"head_dim={head_dim} is odd")
    i = torch.arange(head_dim // 2)
    inv_freq = torch.pow(torch.tensor(float(base), dtype=torch.float64), -2 * i // head_dim)
    return positions[:, None].double() * inv_freq[None, :]


def angles_transposed(positions, head_dim, base=10000.0):
    if head_dim % 2 == 1:
        raise ValueError(f"head_dim={head_dim} is odd")
    i = torch.arange(head_dim // 2, dtype=torch.float64)
    inv_freq = base ** (-2.0 * i / head_dim)
    return inv_freq[:, None] * positions.to(torch.float64)[None, :]


def angles_precedence(positions, head_dim, base=10000.0):
    if head_dim % 2:
        raise ValueError(f"head_dim={head_dim} is odd")
    i = torch.arange(head_dim // 2, dtype=torch.float64)
    inv_freq = base ** -2 * i / head_dim
    return positions.to(torch.float64)[:, None] * inv_freq


def angles_numpy(positions, head_dim, base=10000.0):
    if head_dim % 2:
        raise ValueError(f"head_dim={head_dim} is odd: RoPE needs pairs")
    pos = positions.detach().cpu().numpy().astype(np.float64)
    inv = np.power(float(base), -np.arange(0, head_dim, 2, dtype=np.float64) / head_dim)
    return torch.from_numpy(np.outer(pos, inv)).to(positions.device)


def angles_exp_log(positions, head_dim, base=10000.0):
    if head_dim & 1:
        raise ValueError(f"head_dim={head_dim} is odd")
    half = head_dim // 2
    rates = torch.exp(-math.log(base) * torch.arange(half, dtype=torch.float64) * 2.0 / head_dim)
    table = torch.zeros((positions.shape[0], half), dtype=torch.float64)
    for n, p in enumerate(positions.tolist()):
        table[n] = p * rates
    return table


# ============================================================================ apply_rope
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


def rope_rotate_half_sign(x, positions, base=10000.0):
    d = x.shape[-1]
    if d % 2:
        raise ValueError(f"head_dim={d} is odd")
    ct = torch.promote_types(x.dtype, torch.float32)
    half = d // 2
    inv = base ** (-2 * torch.arange(half, dtype=torch.float64) / d)
    ang = positions.double()[:, None] * inv
    emb = torch.cat([ang, ang], dim=-1).to(ct)  # (N, d)
    xf = x.to(ct)
    rotated = torch.cat([xf[..., half:], -xf[..., :half]], dim=-1)
    return (xf * emb.cos() + rotated * emb.sin()).to(x.dtype)


def rope_angles_in_x_dtype(x, positions, base=10000.0):
    d = x.shape[-1]
    if d % 2:
        raise ValueError(f"head_dim={d} is odd")
    half = d // 2
    inv = (base ** (-2 * torch.arange(half, dtype=torch.float64) / d)).to(x.dtype)
    ang = positions.to(x.dtype)[:, None] * inv[None, :]
    ct = torch.promote_types(x.dtype, torch.float32)
    c, s = ang.to(ct).cos(), ang.to(ct).sin()
    x1, x2 = x[..., :half].to(ct), x[..., half:].to(ct)
    return torch.cat([x1 * c - x2 * s, x1 * s + x2 * c], dim=-1).to(x.dtype)


def rope_repeat_interleave(x, positions, base=10000.0):
    d = x.shape[-1]
    if d % 2:
        raise ValueError(f"head_dim={d} is odd")
    ct = torch.promote_types(x.dtype, torch.float32)
    half = d // 2
    freqs = 1.0 / base ** (torch.arange(0, d, 2, dtype=torch.float64) / d)
    ang = torch.outer(positions.double(), freqs)
    emb = ang.repeat_interleave(2, dim=-1).to(ct)  # (N, d)
    xf = x.to(ct)
    rot = torch.cat((-xf[..., half:], xf[..., :half]), dim=-1)
    return (xf * emb.cos() + rot * emb.sin()).to(x.dtype)


def rope_no_odd_guard(x, positions, base=10000.0):
    d = x.shape[-1]
    ct = torch.promote_types(x.dtype, torch.float32)
    h = d // 2
    i = torch.arange(h, dtype=torch.float64)
    a = (positions.double()[:, None] * base ** (-2 * i / d)).to(ct)
    x1, x2 = x[..., :h].to(ct), x[..., h:].to(ct)
    y1 = x1 * a.cos() - x2 * a.sin()
    y2 = x1 * a.sin() + x2 * a.cos()
    return torch.cat([y1, y2], -1).to(x.dtype)


def rope_ignores_positions(x, positions, base=10000.0):
    n, d = x.shape[-2], x.shape[-1]
    if d % 2:
        raise ValueError(f"head_dim={d} is odd")
    ct = torch.promote_types(x.dtype, torch.float32)
    pos = torch.arange(n, dtype=torch.float64)
    i = torch.arange(d // 2, dtype=torch.float64)
    ang = (pos[:, None] * base ** (-2 * i / d)).to(ct)
    x1, x2 = x[..., : d // 2].to(ct), x[..., d // 2:].to(ct)
    return torch.cat([x1 * ang.cos() - x2 * ang.sin(),
                      x1 * ang.sin() + x2 * ang.cos()], dim=-1).to(x.dtype)


def rope_complex(x, positions, base=10000.0):
    d = x.shape[-1]
    if d % 2:
        raise ValueError(f"head_dim={d} is odd")
    half = d // 2
    theta = positions.double()[:, None] * torch.pow(
        torch.tensor(float(base), dtype=torch.float64),
        -torch.arange(half, dtype=torch.float64) * 2 / d)
    z = torch.complex(x[..., :half].double(), x[..., half:].double())
    z = z * torch.polar(torch.ones_like(theta), theta)
    return torch.cat([z.real, z.imag], dim=-1).to(x.dtype)


def rope_rotation_matrix(x, positions, base=10000.0):
    n, d = x.shape[-2], x.shape[-1]
    if d % 2 != 0:
        raise ValueError(f"head_dim={d} is odd")
    half = d // 2
    i = torch.arange(half, dtype=torch.float64)
    ang = positions.double()[:, None] * base ** (-2 * i / d)  # (N, d/2)
    c, s = torch.cos(ang), torch.sin(ang)
    rot = torch.zeros((n, d, d), dtype=torch.float64)  # y[e] = sum_f x[f] rot[n, f, e]
    idx = torch.arange(half)
    rot[:, idx, idx] = c
    rot[:, idx + half, idx] = -s
    rot[:, idx, idx + half] = s
    rot[:, idx + half, idx + half] = c
    y = torch.einsum("...nf,nfe->...ne", x.double(), rot)
    return y.to(x.dtype)


A = "rope_angles"
R = "apply_rope"
ENTRIES = [
    Entry(A, "wrong", "linspace_endpoint",
          "builds the exponents with torch.linspace(0, 1, head_dim // 2), which includes the "
          "endpoint 1, so the exponents are i / (d/2 - 1) instead of 2 i / d",
          angles_linspace_endpoint),
    Entry(A, "wrong", "factor_two_twice",
          "takes i from arange(0, head_dim, 2) (already 2 i) and still multiplies by 2 in the "
          "exponent, so the frequencies fall twice as fast", angles_double_two),
    Entry(A, "wrong", "no_odd_guard",
          "never checks head_dim: an odd head_dim quietly gives head_dim // 2 angles instead "
          "of raising ValueError", angles_no_odd_guard),
    Entry(A, "wrong", "floor_division_exponent",
          "writes the exponent as -2 * i // head_dim with integer i: floor division makes it "
          "-1 or 0 instead of -2 i / head_dim", angles_floor_division),
    Entry(A, "wrong", "transposed_outer_product",
          "puts the frequencies on the rows and the positions on the columns, returning "
          "(head_dim // 2, N) instead of (N, head_dim // 2)", angles_transposed),
    Entry(A, "wrong", "exponent_precedence",
          "writes base ** -2 * i / head_dim: ** binds tighter, so it computes "
          "base^-2 * i / head_dim instead of base ** (-2 * i / head_dim)",
          angles_precedence),
    Entry(A, "right", "numpy_float64", None, angles_numpy),
    Entry(A, "right", "exp_log_rows", None, angles_exp_log),
    Entry(R, "wrong", "adjacent_pairs",
          "rotates adjacent features (0, 1), (2, 3), ... (the interleaved layout) instead of "
          "pairing feature i with i + head_dim // 2", rope_adjacent_pairs),
    Entry(R, "wrong", "rotate_half_sign",
          "builds rotate_half as cat(x2, -x1) instead of cat(-x2, x1), so every pair turns "
          "by -angle", rope_rotate_half_sign),
    Entry(R, "wrong", "angles_in_half_precision",
          "computes positions times frequencies in x's dtype: bfloat16 cannot hold "
          "positions like 257 or 1500 (nor their products with the frequencies) exactly, so "
          "low-precision inputs rotate by the wrong angles", rope_angles_in_x_dtype),
    Entry(R, "wrong", "repeat_interleave_angles",
          "expands the angles to width d with repeat_interleave(2) (angle i // 2 at feature "
          "i) while pairing i with i + d/2; the rotate-half layout needs cat([a, a])",
          rope_repeat_interleave),
    Entry(R, "wrong", "no_odd_guard",
          "never checks head_dim, so an odd head_dim fails with torch's RuntimeError on "
          "mismatched halves instead of a ValueError", rope_no_odd_guard),
    Entry(R, "wrong", "ignores_positions",
          "rotates by arange(N) instead of the given positions, assuming tokens sit at "
          "0 .. N-1", rope_ignores_positions),
    Entry(R, "right", "complex_polar", None, rope_complex),
    Entry(R, "right", "rotation_matrix_einsum", None, rope_rotation_matrix),
]
