"""Held-out catalogue, lesson 09 (RoPE): rope_angles, apply_rope."""

import math

import torch

from entry import Entry


# ========================================================================= rope_angles: wrong
def angles_no_factor_two(positions, head_dim, base=10000.0):
    if head_dim % 2:
        raise ValueError(f"head_dim={head_dim} is odd")
    i = torch.arange(head_dim // 2, dtype=torch.float64)
    inv = base ** (-i / head_dim)
    return (positions.double()[:, None] * inv[None, :]).float()


def angles_even_index_doubled(positions, head_dim, base=10000.0):
    if head_dim % 2 != 0:
        raise ValueError(f"head_dim={head_dim} must be even")
    i = torch.arange(0, head_dim, 2, dtype=torch.float64)  # 0, 2, 4, ...
    inv_freq = 1.0 / (base ** (2 * i / head_dim))
    return torch.outer(positions.to(torch.float64), inv_freq).to(torch.float32)


def angles_no_odd_check(positions, head_dim, base=10000.0):
    half = head_dim // 2
    i = torch.arange(half, dtype=torch.float64)
    freqs = base ** (-2.0 * i / head_dim)
    return positions.to(torch.float64).unsqueeze(1) * freqs.unsqueeze(0)


def angles_floor_division(positions, head_dim, base=10000.0):
    if head_dim % 2:
        raise ValueError(f"head_dim={head_dim} is odd")
    i = torch.arange(head_dim // 2)
    expo = (-2 * i // head_dim).to(torch.float64)
    freqs = torch.pow(torch.tensor(base, dtype=torch.float64), expo)
    return positions[:, None].double() * freqs


def angles_transposed(positions, head_dim, base=10000.0):
    if head_dim % 2:
        raise ValueError(f"head_dim={head_dim} is odd")
    i = torch.arange(head_dim // 2, dtype=torch.float64)
    inv = base ** (-2 * i / head_dim)
    return (inv[:, None] * positions.double()[None, :]).float()


def angles_precedence(positions, head_dim, base=10000.0):
    if head_dim % 2:
        raise ValueError(f"head_dim={head_dim} is odd")
    i = torch.arange(head_dim // 2, dtype=torch.float64)
    inv = base ** -2 * i / head_dim
    return positions.double()[:, None] * inv


# ========================================================================= rope_angles: right
def angles_exp_log(positions, head_dim, base=10000.0):
    if head_dim % 2 == 1:
        raise ValueError(f"head_dim={head_dim} is odd: RoPE needs pairs")
    half = head_dim // 2
    frac = torch.arange(half, dtype=torch.float64) * (2.0 / head_dim)
    inv = torch.exp(-frac * math.log(base))
    return torch.outer(positions.to(torch.float64), inv)


def angles_python_loops(positions, head_dim, base=10000.0):
    if head_dim % 2:
        raise ValueError(f"head_dim={head_dim} is odd")
    half = head_dim // 2
    pos = [int(p) for p in positions]
    table = torch.zeros((len(pos), half), dtype=torch.float64)
    for n, p in enumerate(pos):
        for i in range(half):
            table[n, i] = p * math.pow(base, -2.0 * i / head_dim)
    return table


# ========================================================================== apply_rope: wrong
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
    y = torch.stack([ye, yo], dim=-1).flatten(-2)
    return y.to(x.dtype)


def rope_negative_angle(x, positions, base=10000.0):
    d = x.shape[-1]
    if d % 2:
        raise ValueError(f"head_dim={d} is odd")
    h = d // 2
    ct = torch.promote_types(x.dtype, torch.float32)
    i = torch.arange(h, dtype=torch.float64)
    theta = (positions.to(torch.float64)[:, None] * base ** (-2 * i / d)).to(ct)
    cos, sin = torch.cos(theta), torch.sin(theta)
    a, b = x[..., :h].to(ct), x[..., h:].to(ct)
    return torch.cat([a * cos + b * sin, -a * sin + b * cos], dim=-1).to(x.dtype)


def rope_angles_in_x_dtype(x, positions, base=10000.0):
    d = x.shape[-1]
    if d % 2:
        raise ValueError(f"head_dim={d} is odd")
    half = d // 2
    i = torch.arange(half, dtype=x.dtype)
    inv_freq = base ** (-2 * i / d)
    angles = positions.to(x.dtype)[:, None] * inv_freq[None, :]
    ct = torch.promote_types(x.dtype, torch.float32)
    cos, sin = angles.cos().to(ct), angles.sin().to(ct)
    x1, x2 = x[..., :half].to(ct), x[..., half:].to(ct)
    return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], -1).to(x.dtype)


def rope_repeat_interleave(x, positions, base=10000.0):
    d = x.shape[-1]
    if d % 2:
        raise ValueError(f"head_dim={d} is odd")
    ct = torch.promote_types(x.dtype, torch.float32)
    i = torch.arange(d // 2, dtype=torch.float64)
    freqs = positions.double()[:, None] * base ** (-2 * i / d)
    emb = freqs.repeat_interleave(2, dim=-1).to(ct)  # (N, d)
    xc = x.to(ct)
    rotated = torch.cat([-xc[..., d // 2:], xc[..., :d // 2]], dim=-1)
    return (xc * emb.cos() + rotated * emb.sin()).to(x.dtype)


def rope_no_odd_check(x, positions, base=10000.0):
    dim = x.shape[-1]
    half = dim // 2
    ct = torch.promote_types(x.dtype, torch.float32)
    idx = torch.arange(half, dtype=torch.float64)
    ang = (positions.double().unsqueeze(-1) * torch.pow(base, -2 * idx / dim)).to(ct)
    c, s = torch.cos(ang), torch.sin(ang)
    lo, hi = x[..., :half].to(ct), x[..., half:].to(ct)
    return torch.cat((lo * c - hi * s, lo * s + hi * c), dim=-1).to(x.dtype)


def rope_ignores_positions(x, positions, base=10000.0):
    n, d = x.shape[-2], x.shape[-1]
    if d % 2:
        raise ValueError(f"head_dim={d} is odd")
    half = d // 2
    ct = torch.promote_types(x.dtype, torch.float32)
    pos = torch.arange(n, dtype=torch.float64)
    i = torch.arange(half, dtype=torch.float64)
    ang = (pos[:, None] * base ** (-2 * i / d)).to(ct)
    x1, x2 = x[..., :half].to(ct), x[..., half:].to(ct)
    y = torch.cat([x1 * ang.cos() - x2 * ang.sin(), x1 * ang.sin() + x2 * ang.cos()], dim=-1)
    return y.to(x.dtype)


# ========================================================================== apply_rope: right
def rope_complex_polar(x, positions, base=10000.0):
    d = x.shape[-1]
    if d % 2 == 1:
        raise ValueError(f"head_dim={d} is odd")
    half = d // 2
    freqs = base ** (-torch.arange(half, dtype=torch.float64) * 2 / d)
    theta = positions.to(torch.float64).reshape(-1, 1) * freqs.reshape(1, -1)
    rot = torch.polar(torch.ones_like(theta), theta)  # e^{i theta}, complex128
    z = torch.complex(x[..., :half].double(), x[..., half:].double())
    w = z * rot
    return torch.cat([w.real, w.imag], dim=-1).to(x.dtype)


def rope_rotation_matrices(x, positions, base=10000.0):
    n, d = x.shape[-2], x.shape[-1]
    if d % 2:
        raise ValueError(f"head_dim={d} is odd")
    h = d // 2
    theta = torch.outer(positions.double(), base ** (-2.0 * torch.arange(h).double() / d))
    R = torch.zeros((n, d, d), dtype=torch.float64)  # y[n] = R[n] @ x[n]
    idx = torch.arange(h)
    R[:, idx, idx] = theta.cos()
    R[:, idx, idx + h] = -theta.sin()
    R[:, idx + h, idx] = theta.sin()
    R[:, idx + h, idx + h] = theta.cos()
    y = torch.einsum("nij,...nj->...ni", R, x.double())
    return y.to(x.dtype)


ENTRIES = [
    Entry("rope_angles", "wrong", "no_factor_two",
          "uses base ** (-i / head_dim), dropping the factor 2 in the exponent, so the "
          "frequencies fall off half as fast",
          angles_no_factor_two),
    Entry("rope_angles", "wrong", "even_index_doubled",
          "takes i from arange(0, head_dim, 2) (the even feature indices) and still puts 2 * i "
          "in the exponent, so the factor 2 is counted twice",
          angles_even_index_doubled),
    Entry("rope_angles", "wrong", "no_odd_check",
          "never checks head_dim, so an odd head_dim silently gives head_dim // 2 angles "
          "instead of raising ValueError",
          angles_no_odd_check),
    Entry("rope_angles", "wrong", "floor_division_exponent",
          "writes the exponent with integer floor division, -2 * i // head_dim, so it is "
          "0 or -1 instead of the fraction -2i/head_dim",
          angles_floor_division),
    Entry("rope_angles", "wrong", "transposed_outer",
          "puts the frequencies on the rows and the positions on the columns, returning "
          "(head_dim // 2, N) instead of (N, head_dim // 2)",
          angles_transposed),
    Entry("rope_angles", "wrong", "exponent_precedence",
          "writes base ** -2 * i / head_dim, which Python reads as (base ** -2) * i / head_dim, "
          "instead of base ** (-2 * i / head_dim)",
          angles_precedence),
    Entry("rope_angles", "right", "exp_log_outer", None, angles_exp_log),
    Entry("rope_angles", "right", "python_loops", None, angles_python_loops),

    Entry("apply_rope", "wrong", "adjacent_pairs",
          "rotates adjacent features (0, 1), (2, 3), ... (the interleaved GPT-J layout) "
          "instead of pairing feature i with feature i + d/2",
          rope_adjacent_pairs),
    Entry("apply_rope", "wrong", "negative_angle",
          "puts the minus sign on the wrong term (y_i = x_i cos + x_{i+d/2} sin, "
          "y_{i+d/2} = -x_i sin + x_{i+d/2} cos), rotating every pair by -angle",
          rope_negative_angle),
    Entry("apply_rope", "wrong", "angles_in_x_dtype",
          "computes positions and frequencies in x's dtype, so in bfloat16 the positions "
          "themselves are rounded (257 becomes 256) and the rotation angles come out wrong",
          rope_angles_in_x_dtype),
    Entry("apply_rope", "wrong", "repeat_interleave_angles",
          "widens the angles to d with repeat_interleave (angle of feature j is j // 2, the "
          "adjacent-pair layout) while rotating half with feature i + d/2, so the two layouts "
          "are mixed",
          rope_repeat_interleave),
    Entry("apply_rope", "wrong", "no_odd_check",
          "does not check head_dim, so an odd head_dim fails inside the arithmetic with a "
          "RuntimeError (mismatched halves) instead of raising ValueError",
          rope_no_odd_check),
    Entry("apply_rope", "wrong", "ignores_positions",
          "rotates row n by the angle of position n (arange(N)) instead of the given "
          "positions[n], so offset or unsorted positions are wrong",
          rope_ignores_positions),
    Entry("apply_rope", "right", "complex_polar", None, rope_complex_polar),
    Entry("apply_rope", "right", "rotation_matrices_einsum", None, rope_rotation_matrices),
]
