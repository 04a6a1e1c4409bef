"""Held-out catalogue, lesson 09 (rope): rope_angles, apply_rope."""

import math

import numpy as np
import torch

from entry import Entry


# ----------------------------------------------------------------------------- rope_angles
def angles_missing_factor_two(positions, head_dim, base=10000.0):
    if head_dim % 2:
        raise ValueError(f"head_dim={head_dim} is odd")
    i = torch.arange(head_dim // 2, dtype=torch.float64)
    freq = base ** (-i / head_dim)
    return (positions.double()[:, None] * freq[None, :]).float()


def angles_assert_guard(positions, head_dim, base=10000.0):
    assert head_dim % 2 == 0, "head_dim must be even"
    half = head_dim // 2
    inv = torch.tensor([base ** (-2 * i / head_dim) for i in range(half)], dtype=torch.float64)
    return (positions.to(torch.float64).unsqueeze(1) * inv).to(torch.float32)


def angles_positive_exponent(positions, head_dim, base=10000.0):
    if head_dim % 2 != 0:
        raise ValueError(f"head_dim={head_dim} must be even")
    i = torch.arange(0, head_dim, 2, dtype=torch.float64)
    inv_freq = base ** (i / head_dim)
    return torch.outer(positions.double(), inv_freq).float()


def angles_precedence(positions, head_dim, base=10000.0):
    if head_dim % 2:
        raise ValueError(f"head_dim={head_dim} is odd")
    i = torch.arange(head_dim // 2, dtype=torch.float64)
    inv_freq = base ** -2 * i / head_dim
    return positions.double()[:, None] * inv_freq


def angles_transposed(positions, head_dim, base=10000.0):
    if head_dim % 2:
        raise ValueError(f"head_dim={head_dim} is odd")
    i = torch.arange(head_dim // 2, dtype=torch.float64)
    inv_freq = base ** (-2.0 * i / head_dim)
    return (inv_freq[:, None] * positions.double()[None, :]).float()


def angles_linspace(positions, head_dim, base=10000.0):
    if head_dim % 2:
        raise ValueError(f"head_dim={head_dim} is odd")
    half = head_dim // 2
    expo = torch.linspace(0.0, 1.0, half, dtype=torch.float64)
    inv_freq = base ** (-expo)
    return (positions.double()[:, None] * inv_freq).float()


def angles_numpy(positions, head_dim, base=10000.0):
    if head_dim % 2 == 1:
        raise ValueError(f"head_dim={head_dim} is odd: no partner for the last feature")
    pos = np.asarray(positions.tolist(), dtype=np.float64).reshape(-1)
    expo = -2.0 * np.arange(head_dim // 2, dtype=np.float64) / head_dim
    table = np.multiply.outer(pos, np.power(float(base), expo))
    return torch.from_numpy(table.reshape(len(pos), head_dim // 2))


def angles_exp_log(positions, head_dim, base=10000.0):
    if head_dim % 2:
        raise ValueError(f"head_dim={head_dim} is odd")
    even = torch.arange(0, head_dim, 2, dtype=torch.float64)
    inv_freq = torch.exp(-math.log(base) * even / head_dim)
    return torch.einsum("n,i->ni", positions.to(torch.float64), inv_freq).to(torch.float32)


# ----------------------------------------------------------------------------- apply_rope
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


def rope_rotation_sign(x, positions, base=10000.0):
    head_dim = x.shape[-1]
    if head_dim % 2:
        raise ValueError(f"head_dim={head_dim} is odd")
    compute = torch.promote_types(x.dtype, torch.float32)
    half = head_dim // 2
    inv = base ** (-2.0 * torch.arange(half, dtype=torch.float64) / head_dim)
    theta = (positions.to(torch.float64)[:, None] * inv).to(compute)
    cos, sin = torch.cos(theta), torch.sin(theta)
    a, b = x[..., :half].to(compute), x[..., half:].to(compute)
    return torch.cat([a * cos + b * sin, -a * sin + b * cos], dim=-1).to(x.dtype)


def rope_repeat_interleave(x, positions, base=10000.0):
    d = x.shape[-1]
    if d % 2:
        raise ValueError(f"head_dim={d} is odd")
    ct = torch.promote_types(x.dtype, torch.float32)
    inv = base ** (-2.0 * torch.arange(d // 2, dtype=torch.float64) / d)
    ang = (positions.double()[:, None] * inv).to(ct)
    ang = ang.repeat_interleave(2, dim=-1)
    xc = x.to(ct)
    rot = torch.cat([-xc[..., d // 2:], xc[..., : d // 2]], dim=-1)
    return (xc * ang.cos() + rot * ang.sin()).to(x.dtype)


def rope_angles_in_x_dtype(x, positions, base=10000.0):
    d = x.shape[-1]
    if d % 2:
        raise ValueError(f"head_dim={d} is odd")
    i = torch.arange(d // 2, dtype=x.dtype)
    inv = base ** (-2 * i / d)
    ang = positions.to(x.dtype)[:, None] * inv
    cos, sin = ang.float().cos(), ang.float().sin()
    x1, x2 = x[..., : d // 2].float(), x[..., d // 2:].float()
    out = torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1)
    return out.to(x.dtype)


def rope_ignores_positions(x, positions, base=10000.0):
    n, d = x.shape[-2], x.shape[-1]
    if d % 2:
        raise ValueError(f"head_dim={d} is odd")
    compute = torch.promote_types(x.dtype, torch.float32)
    pos = torch.arange(n, dtype=torch.float64)
    inv = base ** (-2.0 * torch.arange(d // 2, dtype=torch.float64) / d)
    ang = (pos[:, None] * inv).to(compute)
    h = d // 2
    x1, x2 = x[..., :h].to(compute), x[..., h:].to(compute)
    return torch.cat([x1 * ang.cos() - x2 * ang.sin(), x1 * ang.sin() + x2 * ang.cos()],
                     dim=-1).to(x.dtype)


def rope_head_dim_from_wrong_axis(x, positions, base=10000.0):
    head_dim = x.shape[-2]
    if head_dim % 2:
        raise ValueError(f"head_dim={head_dim} is odd")
    compute = torch.promote_types(x.dtype, torch.float32)
    half = head_dim // 2
    inv = base ** (-2.0 * torch.arange(half, dtype=torch.float64) / head_dim)
    ang = (positions.double()[:, None] * inv).to(compute)
    x1, x2 = x[..., :half].to(compute), x[..., half:].to(compute)
    return torch.cat([x1 * ang.cos() - x2 * ang.sin(), x1 * ang.sin() + x2 * ang.cos()],
                     dim=-1).to(x.dtype)


def rope_complex(x, positions, base=10000.0):
    d = x.shape[-1]
    if d % 2:
        raise ValueError(f"head_dim={d} is odd")
    h = d // 2
    xd = x.to(torch.float64)
    z = torch.complex(xd[..., :h], xd[..., h:])
    freqs = base ** (-2.0 * torch.arange(h, dtype=torch.float64) / d)
    theta = positions.to(torch.float64)[:, None] * freqs
    turned = z * torch.polar(torch.ones_like(theta), theta)
    return torch.cat([turned.real, turned.imag], dim=-1).to(x.dtype)


def rope_rotate_half_matrix(x, positions, base=10000.0):
    # y = x * cos + rotate_half(x) * sin with rotate_half written as a (d, d) matrix
    d = x.shape[-1]
    if d % 2:
        raise ValueError(f"head_dim={d} is odd")
    h = d // 2
    ct = torch.promote_types(x.dtype, torch.float32)
    inv = torch.tensor([base ** (-2.0 * i / d) for i in range(h)], dtype=torch.float64)
    ang = positions.to(torch.float64)[:, None] * inv
    cos = torch.cat([ang.cos(), ang.cos()], dim=-1).to(ct)
    sin = torch.cat([ang.sin(), ang.sin()], dim=-1).to(ct)
    rot = torch.zeros((d, d), dtype=ct)
    for i in range(h):
        rot[i + h, i] = -1.0  # y_i picks -x_{i+h}
        rot[i, i + h] = 1.0  # y_{i+h} picks x_i
    xc = x.to(ct)
    return (xc * cos + (xc @ rot) * sin).to(x.dtype)


ENTRIES = [
    Entry("rope_angles", "wrong", "missing_factor_two",
          "loops i over range(head_dim // 2) but uses the exponent -i / head_dim, dropping the "
          "factor 2, so the frequencies fall only half as fast", angles_missing_factor_two),
    Entry("rope_angles", "wrong", "assert_instead_of_valueerror",
          "checks the odd head_dim with assert, which raises AssertionError instead of the "
          "ValueError the contract asks for", angles_assert_guard),
    Entry("rope_angles", "wrong", "positive_exponent",
          "writes base ** (2i / head_dim) without the minus sign, so the frequencies grow with i "
          "instead of shrinking", angles_positive_exponent),
    Entry("rope_angles", "wrong", "exponent_precedence",
          "writes base ** -2 * i / head_dim, which Python reads as (base ** -2) * i / head_dim: "
          "the exponent needs parentheses", angles_precedence),
    Entry("rope_angles", "wrong", "outer_product_transposed",
          "builds the outer product as inv_freq[:, None] * positions[None, :], returning "
          "(head_dim // 2, N) instead of (N, head_dim // 2)", angles_transposed),
    Entry("rope_angles", "wrong", "linspace_endpoint",
          "takes the exponents from torch.linspace(0, 1, head_dim // 2), which ends at 1, instead "
          "of 2i / head_dim, which ends at (head_dim - 2) / head_dim", angles_linspace),
    Entry("rope_angles", "right", "numpy_outer_float64", None, angles_numpy),
    Entry("rope_angles", "right", "exp_log_einsum", None, angles_exp_log),

    Entry("apply_rope", "wrong", "adjacent_pairs",
          "rotates adjacent pairs (0, 1), (2, 3), ... (the GPT-J interleaved layout) instead of "
          "pairing feature i with feature i + head_dim / 2", rope_adjacent_pairs),
    Entry("apply_rope", "wrong", "rotation_sign",
          "puts the minus sign on the wrong term (y_i = x_i cos + x_{i+d/2} sin), which rotates "
          "every pair by -angle", rope_rotation_sign),
    Entry("apply_rope", "wrong", "repeat_interleave_angles",
          "widens the angles to head_dim with repeat_interleave (each angle twice in a row) while "
          "using the rotate-half pairing, which needs the angles tiled ([a, a], repeat or cat)",
          rope_repeat_interleave),
    Entry("apply_rope", "wrong", "angles_in_half_precision",
          "computes the positions and frequencies in x's dtype, so in float16 / bfloat16 large "
          "positions and their angles are rounded before cos and sin", rope_angles_in_x_dtype),
    Entry("apply_rope", "wrong", "ignores_positions",
          "rotates row n by the angles of position n (torch.arange(N)) and ignores the positions "
          "argument", rope_ignores_positions),
    Entry("apply_rope", "wrong", "head_dim_from_wrong_axis",
          "reads head_dim from x.shape[-2] (the sequence axis) instead of x.shape[-1]",
          rope_head_dim_from_wrong_axis),
    Entry("apply_rope", "right", "complex_multiply", None, rope_complex),
    Entry("apply_rope", "right", "rotate_half_matrix", None, rope_rotate_half_matrix),
]
