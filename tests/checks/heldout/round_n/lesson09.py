"""Lesson 09 (RoPE): rope_angles, apply_rope."""

import math

import numpy as np
import torch

from entry import Entry


# ============================================================================ rope_angles
def angles_precedence(positions, head_dim, base=10000.0):
    if head_dim % 2:
        raise ValueError(f"head_dim={head_dim} is odd")
    i = torch.arange(head_dim // 2, dtype=torch.float64)
    inv_freq = base ** -2 * i / head_dim
    return (positions.double()[:, None] * inv_freq[None, :]).float()


def angles_even_indices_doubled(positions, head_dim, base=10000.0):
    if head_dim % 2 != 0:
        raise ValueError(f"head_dim={head_dim} must be even")
    i = torch.arange(0, head_dim, 2, dtype=torch.float64)  # 0, 2, 4, ...
    inv_freq = base ** (-2 * i / head_dim)
    return torch.outer(positions.to(torch.float64), inv_freq).to(torch.float32)


def angles_linspace(positions, head_dim, base=10000.0):
    if head_dim % 2 == 1:
        raise ValueError(f"head_dim={head_dim} is odd")
    half = head_dim // 2
    frac = torch.linspace(0, 1, half, dtype=torch.float64)  # meant to be 2i/d
    inv_freq = base ** (-frac)
    return (positions.to(torch.float64).unsqueeze(1) * inv_freq).float()


def angles_assert_guard(positions, head_dim, base=10000.0):
    assert head_dim % 2 == 0, f"head_dim={head_dim} must be even"
    i = torch.arange(head_dim // 2, dtype=torch.float64)
    inv_freq = torch.pow(torch.tensor(float(base), dtype=torch.float64), -2.0 * i / head_dim)
    return (positions.to(torch.float64)[:, None] * inv_freq).to(torch.float32)


def angles_floor_division(positions, head_dim, base=10000.0):
    if head_dim % 2:
        raise ValueError(f"head_dim={head_dim} is odd")
    i = torch.arange(head_dim // 2)
    exponent = -2 * i // head_dim
    inv_freq = base ** exponent.to(torch.float64)
    return (positions[:, None].to(torch.float64) * inv_freq[None, :]).float()


def angles_outer_transposed(positions, head_dim, base=10000.0):
    if head_dim % 2:
        raise ValueError(f"head_dim={head_dim} is odd")
    inv_freq = 1.0 / (base ** (torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim))
    return torch.outer(inv_freq, positions.to(torch.float64)).float()


def angles_right_numpy_loops(positions, head_dim, base=10000.0):
    if head_dim % 2:
        raise ValueError(f"head_dim={head_dim} is odd: RoPE needs pairs of features")
    pos = positions.cpu().numpy().astype(np.float64)
    half = head_dim // 2
    table = np.empty((pos.shape[0], half), dtype=np.float64)
    for i in range(half):
        table[:, i] = pos * math.pow(base, -2.0 * i / head_dim)
    return torch.from_numpy(table)


def angles_right_exp_log(positions, head_dim, base=10000.0):
    if head_dim % 2 != 0:
        raise ValueError(f"head_dim={head_dim} is odd")
    i = torch.arange(head_dim // 2, dtype=torch.float64)
    inv_freq = torch.exp(-math.log(base) * (2.0 * i) / head_dim)
    return torch.einsum("n,f->nf", positions.to(torch.float64), inv_freq)


# ============================================================================ apply_rope
def rope_adjacent_pairs(x, positions, base=10000.0):
    d = x.shape[-1]
    if d % 2:
        raise ValueError(f"head_dim={d} is odd")
    ct = torch.promote_types(x.dtype, torch.float32)
    i = torch.arange(d // 2, dtype=torch.float64)
    ang = (positions.double()[:, None] * base ** (-2 * i / d)).to(ct)
    cos, sin = ang.cos(), ang.sin()
    xe, xo = x[..., 0::2].to(ct), x[..., 1::2].to(ct)  # features 2i and 2i+1
    ye = xe * cos - xo * sin
    yo = xe * sin + xo * cos
    return torch.stack([ye, yo], dim=-1).flatten(-2).to(x.dtype)


def rope_rotation_sign(x, positions, base=10000.0):
    d = x.shape[-1]
    if d % 2:
        raise ValueError(f"head_dim={d} is odd")
    ct = torch.promote_types(x.dtype, torch.float32)
    half = d // 2
    inv = base ** (-2.0 * torch.arange(half, dtype=torch.float64) / d)
    ang = (positions.to(torch.float64)[:, None] * inv).to(ct)
    c, s = torch.cos(ang), torch.sin(ang)
    x1, x2 = x[..., :half].to(ct), x[..., half:].to(ct)
    return torch.cat([x1 * c + x2 * s, x2 * c - x1 * s], dim=-1).to(x.dtype)


def rope_angles_in_x_dtype(x, positions, base=10000.0):
    d = x.shape[-1]
    if d % 2:
        raise ValueError(f"head_dim={d} is odd")
    half = d // 2
    inv = base ** (-2.0 * torch.arange(half, dtype=torch.float32) / d)
    ang = positions.to(x.dtype)[:, None] * inv.to(x.dtype)  # angles in x's dtype
    ct = torch.promote_types(x.dtype, torch.float32)
    c, s = torch.cos(ang.to(ct)), torch.sin(ang.to(ct))
    x1, x2 = x[..., :half].to(ct), x[..., half:].to(ct)
    return torch.cat([x1 * c - x2 * s, x1 * s + x2 * c], dim=-1).to(x.dtype)


def rope_no_odd_check(x, positions, base=10000.0):
    d = x.shape[-1]
    half = d // 2
    ct = torch.promote_types(x.dtype, torch.float32)
    inv = base ** (-2.0 * torch.arange(half, dtype=torch.float64) / d)
    ang = (positions.to(torch.float64)[:, None] * inv).to(ct)
    c, s = torch.cos(ang), torch.sin(ang)
    x1, x2 = x[..., :half].to(ct), x[..., half:].to(ct)
    y1 = x1 * c - x2 * s
    y2 = x1 * s + x2 * c
    return torch.cat([y1, y2], dim=-1).to(x.dtype)


def rope_in_place(x, positions, base=10000.0):
    d = x.shape[-1]
    if d % 2:
        raise ValueError(f"head_dim={d} is odd")
    half = d // 2
    ct = torch.promote_types(x.dtype, torch.float32)
    inv = base ** (-2.0 * torch.arange(half, dtype=torch.float64) / d)
    ang = (positions.to(torch.float64)[:, None] * inv).to(ct)
    c, s = torch.cos(ang), torch.sin(ang)
    y = x.to(ct).clone()
    a, b = y[..., :half], y[..., half:]  # views into y
    a.copy_(a * c - b * s)
    b.copy_(a * s + b * c)
    return y.to(x.dtype)


def rope_ignores_positions(x, positions, base=10000.0):
    n, d = x.shape[-2], x.shape[-1]
    if d % 2:
        raise ValueError(f"head_dim={d} is odd")
    half = d // 2
    ct = torch.promote_types(x.dtype, torch.float32)
    pos = torch.arange(n, dtype=torch.float64)  # row n sits at position n
    ang = (pos[:, None] * base ** (-2.0 * torch.arange(half, dtype=torch.float64) / d)).to(ct)
    c, s = ang.cos(), ang.sin()
    x1, x2 = x[..., :half].to(ct), x[..., half:].to(ct)
    return torch.cat([x1 * c - x2 * s, x1 * s + x2 * c], dim=-1).to(x.dtype)


def rope_right_complex(x, positions, base=10000.0):
    d = x.shape[-1]
    if d % 2:
        raise ValueError(f"head_dim={d} is odd")
    half = d // 2
    x64 = x.to(torch.float64)
    z = torch.complex(x64[..., :half], x64[..., half:])  # x_i + i x_{i+d/2}
    theta = positions.to(torch.float64)[:, None] * torch.pow(
        torch.tensor(base, dtype=torch.float64), -2.0 * torch.arange(half, dtype=torch.float64) / d)
    rot = torch.polar(torch.ones_like(theta), theta)
    zr = z * rot
    return torch.cat([zr.real, zr.imag], dim=-1).to(x.dtype)


def rope_right_rotate_half_hf(x, positions, base=10000.0):
    head_dim = x.shape[-1]
    if head_dim % 2 == 1:
        raise ValueError(f"head_dim={head_dim} is odd")

    def rotate_half(t):
        t1, t2 = t.chunk(2, dim=-1)
        return torch.cat((-t2, t1), dim=-1)

    inv_freq = 1.0 / (base ** (torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim))
    freqs = positions.to(torch.float64)[:, None] * inv_freq[None, :]
    emb = torch.cat((freqs, freqs), dim=-1)
    xd = x.to(torch.float64)
    return (xd * emb.cos() + rotate_half(xd) * emb.sin()).to(x.dtype)


ENTRIES = [
    Entry("rope_angles", "wrong", "exponent_precedence",
          "Writes base ** -2 * i / head_dim, which Python reads as (base ** -2) * i / head_dim, "
          "instead of base ** (-2 * i / head_dim).", angles_precedence),
    Entry("rope_angles", "wrong", "even_indices_times_two",
          "Takes i from arange(0, head_dim, 2) (already 2i) and still uses -2 * i / head_dim, "
          "so the exponent is doubled and the frequencies fall off twice as fast.",
          angles_even_indices_doubled),
    Entry("rope_angles", "wrong", "linspace_includes_endpoint",
          "Builds the exponents 2i/d with torch.linspace(0, 1, d/2), which includes 1 as its "
          "last point, instead of steps of 2/d that stop at (d-2)/d.", angles_linspace),
    Entry("rope_angles", "wrong", "assert_instead_of_valueerror",
          "Guards the odd head_dim with an assert, which raises AssertionError instead of the "
          "required ValueError.", angles_assert_guard),
    Entry("rope_angles", "wrong", "integer_floor_division",
          "Computes the exponent -2 * i // head_dim on integer tensors, so floor division "
          "rounds it to -1 (or 0 for i = 0) instead of the fraction -2i/d.",
          angles_floor_division),
    Entry("rope_angles", "wrong", "outer_product_transposed",
          "Calls torch.outer(inv_freq, positions), which returns (head_dim // 2, N) with "
          "frequencies along the rows instead of (N, head_dim // 2).", angles_outer_transposed),
    Entry("rope_angles", "right", "numpy_column_loop", None, angles_right_numpy_loops),
    Entry("rope_angles", "right", "exp_log_einsum_float64", None, angles_right_exp_log),

    Entry("apply_rope", "wrong", "adjacent_pairs",
          "Rotates adjacent features (2i, 2i+1) as in GPT-J instead of pairing feature i with "
          "i + head_dim // 2 (the rotate-half layout the contract fixes).", rope_adjacent_pairs),
    Entry("apply_rope", "wrong", "rotation_sign_flipped",
          "Writes y_i = x_i cos + x_{i+d/2} sin and y_{i+d/2} = x_{i+d/2} cos - x_i sin, a "
          "rotation by minus the angle.", rope_rotation_sign),
    Entry("apply_rope", "wrong", "angles_in_half_precision",
          "Computes positions * frequencies in x's dtype, so for float16 and bfloat16 inputs "
          "large positions and their angles are rounded before the cos and sin.",
          rope_angles_in_x_dtype),
    Entry("apply_rope", "wrong", "odd_head_dim_runtime_error",
          "Never checks that head_dim is even, so an odd head_dim fails with a RuntimeError "
          "from halves of unequal width instead of the required ValueError.",
          rope_no_odd_check),
    Entry("apply_rope", "wrong", "in_place_first_half_overwritten",
          "Rotates in place through views: the first half is overwritten with y_i before the "
          "second half is computed, so y_{i+d/2} uses the rotated y_i instead of x_i.",
          rope_in_place),
    Entry("apply_rope", "wrong", "ignores_positions",
          "Rotates row n by the angle of position n (torch.arange(N)) and ignores the positions "
          "argument, which is wrong whenever the positions are not 0 .. N-1.",
          rope_ignores_positions),
    Entry("apply_rope", "right", "complex_multiplication", None, rope_right_complex),
    Entry("apply_rope", "right", "hf_rotate_half_float64", None, rope_right_rotate_half_hf),
]
