"""Lesson 09 (RoPE, torch): rope_angles, apply_rope."""

import math

import numpy as np
import torch

from entry import Entry


def _need_even(head_dim):
    if head_dim % 2 != 0:
        raise ValueError(f"head_dim={head_dim} must be even for RoPE")


# ----------------------------------------------------------------------------- rope_angles
def ra_missing_two(positions, head_dim, base=10000.0):
    _need_even(head_dim)
    i = torch.arange(head_dim // 2, dtype=torch.float64)
    inv = base ** (-i / head_dim)
    return (positions.double()[:, None] * inv[None, :]).float()


def ra_half_denominator(positions, head_dim, base=10000.0):
    _need_even(head_dim)
    two_i = torch.arange(0, head_dim, 2, dtype=torch.float64)
    inv = 1.0 / base ** (two_i / (head_dim // 2))
    return torch.outer(positions.double(), inv).float()


def ra_positive_exponent(positions, head_dim, base=10000.0):
    _need_even(head_dim)
    i = torch.arange(head_dim // 2, dtype=torch.float64)
    freqs = torch.pow(torch.tensor(base, dtype=torch.float64), 2 * i / head_dim)
    return positions.double().unsqueeze(1) * freqs


def ra_no_odd_check(positions, head_dim, base=10000.0):
    half = head_dim // 2
    i = torch.arange(half, dtype=torch.float64)
    inv = base ** (-2.0 * i / head_dim)
    return positions.double()[:, None] * inv


def ra_transposed(positions, head_dim, base=10000.0):
    _need_even(head_dim)
    i = torch.arange(head_dim // 2, dtype=torch.float64)
    inv = base ** (-2.0 * i / head_dim)
    return inv[:, None] * positions.double()[None, :]


def ra_integer_division(positions, head_dim, base=10000.0):
    _need_even(head_dim)
    i = torch.arange(head_dim // 2)
    expo = (-2 * i) // head_dim  # stays an integer tensor
    return positions.double()[:, None] * (base ** expo.double())[None, :]


def ra_log_space(positions, head_dim, base=10000.0):
    if head_dim % 2:
        raise ValueError(f"head_dim={head_dim} is odd; RoPE needs an even head_dim")
    i = np.arange(head_dim // 2, dtype=np.float64)
    inv = np.exp(-2.0 * i / head_dim * math.log(base))
    pos = positions.cpu().numpy().astype(np.float64)
    return torch.from_numpy(np.multiply.outer(pos, inv)).to(torch.float32)


def ra_einsum(positions, head_dim, base=10000.0):
    if head_dim % 2 == 1:
        raise ValueError(f"head_dim must be even, got head_dim={head_dim}")
    exps = torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim
    inv = torch.tensor(float(base), dtype=torch.float64) ** (-exps)
    return torch.einsum("n,i->ni", positions.to(torch.float64), inv)


# ----------------------------------------------------------------------------- apply_rope
def _angles(positions, d, base):
    i = torch.arange(d // 2, dtype=torch.float64)
    return positions.double()[:, None] * base ** (-2.0 * i / d)


def ar_adjacent_pairs(x, positions, base=10000.0):
    d = x.shape[-1]
    _need_even(d)
    ang = _angles(positions, d, base)
    cos, sin = ang.cos(), ang.sin()
    xe, xo = x[..., 0::2].double(), x[..., 1::2].double()
    ye = xe * cos - xo * sin
    yo = xe * sin + xo * cos
    return torch.stack([ye, yo], dim=-1).flatten(-2).to(x.dtype)


def ar_rotate_half_sign(x, positions, base=10000.0):
    d = x.shape[-1]
    _need_even(d)
    ang = _angles(positions, d, base)
    emb = torch.cat([ang, ang], dim=-1)
    xf = x.double()
    x1, x2 = xf[..., : d // 2], xf[..., d // 2:]
    rotated = torch.cat([x2, -x1], dim=-1)
    return (xf * emb.cos() + rotated * emb.sin()).to(x.dtype)


def ar_half_precision_angles(x, positions, base=10000.0):
    d = x.shape[-1]
    _need_even(d)
    i = torch.arange(d // 2, dtype=x.dtype)
    inv = base ** (-2.0 * i / d)
    ang = positions.to(x.dtype)[:, None] * inv[None, :]
    c, s = torch.cos(ang), torch.sin(ang)
    x1, x2 = x[..., : d // 2], x[..., d // 2:]
    return torch.cat([x1 * c - x2 * s, x1 * s + x2 * c], dim=-1)


def ar_no_cast_back(x, positions, base=10000.0):
    d = x.shape[-1]
    _need_even(d)
    ang = _angles(positions, d, base).float()
    c, s = ang.cos(), ang.sin()
    xf = x.float()
    x1, x2 = xf[..., : d // 2], xf[..., d // 2:]
    return torch.cat([x1 * c - x2 * s, x1 * s + x2 * c], dim=-1)


def ar_interleaved_table(x, positions, base=10000.0):
    d = x.shape[-1]
    _need_even(d)
    ang = _angles(positions, d, base).repeat_interleave(2, dim=-1)  # (N, d)
    xf = x.double()
    x1, x2 = xf[..., : d // 2], xf[..., d // 2:]
    rot = torch.cat([-x2, x1], dim=-1)
    return (xf * ang.cos() + rot * ang.sin()).to(x.dtype)


def ar_positions_reversed(x, positions, base=10000.0):
    d = x.shape[-1]
    _need_even(d)
    n = x.shape[-2]
    ang = _angles(torch.arange(n), d, base)  # uses 0..N-1 instead of the given positions
    c, s = ang.cos(), ang.sin()
    x1, x2 = x[..., : d // 2].double(), x[..., d // 2:].double()
    return torch.cat([x1 * c - x2 * s, x1 * s + x2 * c], -1).to(x.dtype)


def ar_complex(x, positions, base=10000.0):
    d = x.shape[-1]
    if d % 2:
        raise ValueError(f"head_dim={d} (x.shape[-1]) must be even for RoPE")
    half = d // 2
    xd = x.to(torch.float64)
    z = torch.complex(xd[..., :half], xd[..., half:])  # x_i + i x_{i+d/2}
    ang = _angles(positions, d, base)
    rotated = z * torch.polar(torch.ones_like(ang), ang)
    return torch.cat([rotated.real, rotated.imag], dim=-1).to(x.dtype)


def ar_rotation_matrices(x, positions, base=10000.0):
    d = x.shape[-1]
    if d % 2:
        raise ValueError(f"x.shape[-1]={d}: head_dim must be even")
    half = d // 2
    ang = _angles(positions, d, base)  # (N, half)
    c, s = ang.cos(), ang.sin()
    R = torch.stack([torch.stack([c, -s], -1), torch.stack([s, c], -1)], -2)  # (N, half, 2, 2)
    pairs = torch.stack([x[..., :half], x[..., half:]], dim=-1).double()  # (..., N, half, 2)
    y = torch.einsum("nhij,...nhj->...nhi", R, pairs)
    return torch.cat([y[..., 0], y[..., 1]], dim=-1).to(x.dtype)


ENTRIES = [
    Entry("rope_angles", "wrong", "missing-factor-2", "Uses the exponent -i / head_dim instead of -2 i / head_dim.", ra_missing_two),
    Entry("rope_angles", "wrong", "half-denominator", "Builds 2i with arange(0, d, 2) and then divides by head_dim // 2 instead of head_dim, doubling the exponent.", ra_half_denominator),
    Entry("rope_angles", "wrong", "positive-exponent", "Raises base to +2i/d instead of -2i/d, so the frequencies grow instead of shrink.", ra_positive_exponent),
    Entry("rope_angles", "wrong", "no-odd-check", "Never checks that head_dim is even, so an odd head_dim silently returns angles instead of raising ValueError.", ra_no_odd_check),
    Entry("rope_angles", "wrong", "transposed", "Takes the outer product in the wrong order, returning (head_dim // 2, N) instead of (N, head_dim // 2).", ra_transposed),
    Entry("rope_angles", "wrong", "integer-division", "Computes the exponent -2i // head_dim with integer floor division, so it is 0 or -1 instead of a fraction.", ra_integer_division),
    Entry("rope_angles", "right", "numpy-log-space", None, ra_log_space),
    Entry("rope_angles", "right", "einsum-float64", None, ra_einsum),
    Entry("apply_rope", "wrong", "adjacent-pairs", "Rotates adjacent pairs (2i, 2i+1) instead of pairing feature i with i + head_dim/2.", ar_adjacent_pairs),
    Entry("apply_rope", "wrong", "rotate-half-sign", "Builds rotate_half as cat([x2, -x1]) instead of cat([-x2, x1]), rotating each pair the wrong way.", ar_rotate_half_sign),
    Entry("apply_rope", "wrong", "half-precision-angles", "Computes the angles in x's half-precision dtype, so large positions lose their precision before the cos/sin.", ar_half_precision_angles),
    Entry("apply_rope", "wrong", "no-cast-back", "Computes in float32 and forgets to cast the result back, returning float32 whatever x's dtype.", ar_no_cast_back),
    Entry("apply_rope", "wrong", "interleaved-angle-table", "Duplicates the angle table with repeat_interleave (the adjacent-pair layout) while splitting x in halves, so feature j uses angle j // 2.", ar_interleaved_table),
    Entry("apply_rope", "wrong", "ignores-positions", "Uses arange(N) as positions instead of the positions argument.", ar_positions_reversed),
    Entry("apply_rope", "right", "complex-multiply", None, ar_complex),
    Entry("apply_rope", "right", "rotation-matrices", None, ar_rotation_matrices),
]
