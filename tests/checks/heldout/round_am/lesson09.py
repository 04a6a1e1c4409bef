"""Held-out catalogue, lesson 09 (rope): rope_angles, apply_rope."""

import math

import numpy as np
import torch

from entry import Entry


# ========================================================================= rope_angles -- wrong
def angles_missing_two(positions, head_dim, base=10000.0):
    if head_dim % 2 != 0:
        raise ValueError(f"head_dim={head_dim} is odd")
    i = torch.arange(head_dim // 2, dtype=torch.float64)
    inv_freq = base ** (-i / head_dim)
    return (positions.double()[:, None] * inv_freq[None, :]).float()


def angles_index_from_one(positions, head_dim, base=10000.0):
    if head_dim % 2:
        raise ValueError(f"head_dim={head_dim} must be even")
    i = torch.arange(1, head_dim // 2 + 1, dtype=torch.float64)
    freqs = torch.pow(torch.tensor(float(base), dtype=torch.float64), -2.0 * i / head_dim)
    return torch.outer(positions.to(torch.float64), freqs).to(torch.float32)


def angles_precedence(positions, head_dim, base=10000.0):
    if head_dim % 2 == 1:
        raise ValueError(f"odd head_dim={head_dim}")
    i = torch.arange(head_dim // 2, dtype=torch.float64)
    inv = base ** -2 * i / head_dim
    return positions.double().unsqueeze(1) * inv.unsqueeze(0)


def angles_transposed_outer(positions, head_dim, base=10000.0):
    if head_dim % 2:
        raise ValueError(f"head_dim={head_dim} is odd")
    idx = torch.arange(0, head_dim, 2, dtype=torch.float64)  # 2 i
    inv_freq = 1.0 / (base ** (idx / head_dim))
    return (positions.double()[None, :] * inv_freq[:, None]).float()


def angles_floor_division(positions, head_dim, base=10000.0):
    if head_dim % 2:
        raise ValueError(f"head_dim={head_dim} is odd")
    i = torch.arange(head_dim // 2)
    inv = 1.0 / (base ** (2 * i // head_dim))
    return positions.to(torch.float64)[:, None] * inv.to(torch.float64)[None, :]


def angles_assert_guard(positions, head_dim, base=10000.0):
    assert head_dim % 2 == 0, "head_dim must be even"
    half = head_dim // 2
    theta = base ** (-2.0 * torch.arange(half, dtype=torch.float64) / head_dim)
    return (positions.to(torch.float64).reshape(-1, 1) * theta.reshape(1, -1)).to(torch.float32)


# ========================================================================= rope_angles -- right
def angles_numpy_outer(positions, head_dim, base=10000.0):
    if head_dim % 2 != 0:
        raise ValueError(f"head_dim={head_dim} is odd: RoPE needs pairs")
    pos = np.asarray(positions.cpu().tolist(), dtype=np.float64)
    freqs = np.power(float(base), -np.arange(0, head_dim, 2, dtype=np.float64) / head_dim)
    return torch.from_numpy(np.outer(pos, freqs).reshape(len(pos), head_dim // 2))


def angles_exp_log(positions, head_dim, base=10000.0):
    if head_dim & 1:
        raise ValueError(f"head_dim={head_dim} is odd")
    half = head_dim // 2
    log_inv = -(2.0 / head_dim) * math.log(base) * torch.arange(half, dtype=torch.float64)
    out = torch.empty((positions.shape[0], half), dtype=torch.float64)
    for col in range(half):
        out[:, col] = positions.to(torch.float64) * math.exp(log_inv[col].item())
    return out


# ========================================================================== apply_rope -- wrong
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


def rope_wrong_direction(x, positions, base=10000.0):
    head_dim = x.shape[-1]
    if head_dim % 2:
        raise ValueError(f"head_dim={head_dim} is odd")
    compute = torch.promote_types(x.dtype, torch.float32)
    inv = base ** (-2.0 * torch.arange(head_dim // 2, dtype=torch.float64) / head_dim)
    theta = (positions.to(torch.float64)[:, None] * inv).to(compute)
    c, s = torch.cos(theta), torch.sin(theta)
    half = head_dim // 2
    a, b = x[..., :half].to(compute), x[..., half:].to(compute)
    return torch.cat([a * c + b * s, -a * s + b * c], dim=-1).to(x.dtype)


def rope_angles_in_x_dtype(x, positions, base=10000.0):
    d = x.size(-1)
    if d % 2:
        raise ValueError(f"head_dim={d} is odd")
    half = d // 2
    freq = base ** (-2.0 * torch.arange(half, dtype=torch.float32) / d)
    ang = positions.to(x.dtype)[:, None] * freq.to(x.dtype)[None, :]
    up = torch.promote_types(x.dtype, torch.float32)
    cos, sin = ang.to(up).cos(), ang.to(up).sin()
    x1, x2 = x[..., :half].to(up), x[..., half:].to(up)
    return torch.cat((x1 * cos - x2 * sin, x1 * sin + x2 * cos), -1).to(x.dtype)


def rope_returns_float32(x, positions, base=10000.0):
    n, d = x.shape[-2:]
    if d % 2:
        raise ValueError(f"head_dim={d} is odd")
    work = torch.promote_types(x.dtype, torch.float32)
    k = torch.arange(d // 2, dtype=torch.float64)
    ang = positions.double().unsqueeze(-1) * torch.pow(float(base), -2 * k / d)
    cos, sin = ang.cos().to(work), ang.sin().to(work)
    lo, hi = x[..., : d // 2].to(work), x[..., d // 2:].to(work)
    return torch.cat([lo * cos - hi * sin, lo * sin + hi * cos], dim=-1)


def rope_half_in_exponent(x, positions, base=10000.0):
    head_dim = x.shape[-1]
    if head_dim % 2:
        raise ValueError(f"head_dim={head_dim} is odd")
    half = head_dim // 2
    compute = torch.promote_types(x.dtype, torch.float32)
    i = torch.arange(half, dtype=torch.float64)
    angles = (positions.double()[:, None] * base ** (-2 * i / half)).to(compute)
    x1, x2 = x[..., :half].to(compute), x[..., half:].to(compute)
    y1 = x1 * angles.cos() - x2 * angles.sin()
    y2 = x1 * angles.sin() + x2 * angles.cos()
    return torch.cat([y1, y2], dim=-1).to(x.dtype)


def rope_no_odd_check(x, positions, base=10000.0):
    d = x.shape[-1]
    half = d // 2
    compute = torch.promote_types(x.dtype, torch.float32)
    i = torch.arange(half, dtype=torch.float64)
    theta = (positions.double()[:, None] * base ** (-2 * i / d)).to(compute)
    cos, sin = torch.cos(theta), torch.sin(theta)
    x1, x2 = x[..., :half].to(compute), x[..., half:].to(compute)
    y1 = x1 * cos - x2 * sin
    y2 = x1 * sin + x2 * cos
    return torch.cat([y1, y2], dim=-1).to(x.dtype)


# ========================================================================== apply_rope -- right
def rope_complex_polar(x, positions, base=10000.0):
    d = x.shape[-1]
    if d % 2:
        raise ValueError(f"head_dim={d} is odd")
    h = d // 2
    theta = positions.double()[:, None] * torch.exp(
        -2.0 * torch.arange(h, dtype=torch.float64) / d * math.log(base))
    rot = torch.polar(torch.ones_like(theta), theta)  # e^{i theta}
    z = torch.complex(x[..., :h].double(), x[..., h:].double()) * rot
    return torch.cat([z.real, z.imag], dim=-1).to(x.dtype)


def rope_rotation_matrices(x, positions, base=10000.0):
    d = x.shape[-1]
    if d % 2 == 1:
        raise ValueError(f"head_dim={d} is odd")
    h = d // 2
    ang = positions.double()[:, None] * (float(base) ** (-torch.arange(0, d, 2).double() / d))
    c, s = torch.cos(ang), torch.sin(ang)
    rot = torch.stack([torch.stack([c, -s], -1), torch.stack([s, c], -1)], -2)  # (N, h, 2, 2)
    pairs = torch.stack([x[..., :h], x[..., h:]], dim=-1).double()  # (..., N, h, 2)
    turned = torch.einsum("nhij,...nhj->...nhi", rot, pairs)
    return torch.cat([turned[..., 0], turned[..., 1]], dim=-1).to(x.dtype)


ENTRIES = [
    Entry("rope_angles", "wrong", "exponent-missing-2",
          "uses base ** (-i / head_dim), forgetting the factor 2 in the exponent "
          "-2 i / head_dim, so the frequencies fall off half as fast",
          angles_missing_two),
    Entry("rope_angles", "wrong", "index-from-1",
          "numbers the pairs i = 1 .. head_dim/2 instead of 0 .. head_dim/2 - 1, so every "
          "frequency is one step too low (pair 0 does not turn at base**0 = 1 rad/position)",
          angles_index_from_one),
    Entry("rope_angles", "wrong", "power-precedence",
          "writes base ** -2 * i / head_dim, which Python reads as (base ** -2) * i / head_dim: "
          "the exponent needs parentheses",
          angles_precedence),
    Entry("rope_angles", "wrong", "transposed-outer",
          "builds the outer product as inv_freq[:, None] * positions[None, :], returning "
          "(head_dim // 2, N) instead of (N, head_dim // 2)",
          angles_transposed_outer),
    Entry("rope_angles", "wrong", "floor-division-in-exponent",
          "computes the exponent with 2 * i // head_dim, integer floor division, which is 0 for "
          "every pair, so all frequencies are 1",
          angles_floor_division),
    Entry("rope_angles", "wrong", "assert-not-valueerror",
          "checks an odd head_dim with assert, which raises AssertionError instead of the "
          "ValueError the contract requires",
          angles_assert_guard),
    Entry("rope_angles", "right", "numpy-outer-float64", None, angles_numpy_outer),
    Entry("rope_angles", "right", "exp-log-column-loop", None, angles_exp_log),

    Entry("apply_rope", "wrong", "adjacent-pairs",
          "rotates adjacent features (2i, 2i + 1), the GPT-J interleaved layout, instead of "
          "pairing feature i with i + head_dim/2 (rotate half)",
          rope_adjacent_pairs),
    Entry("apply_rope", "wrong", "rotates-backwards",
          "swaps the signs of the sine terms (y1 = x1 cos + x2 sin, y2 = -x1 sin + x2 cos), "
          "rotating by -angle",
          rope_wrong_direction),
    Entry("apply_rope", "wrong", "angles-in-x-dtype",
          "computes positions * frequency in x's dtype, so in bfloat16/float16 the positions and "
          "angles are rounded (position 257 becomes 256) before cos and sin",
          rope_angles_in_x_dtype),
    Entry("apply_rope", "wrong", "returns-float32",
          "does the rotation in float32 and forgets to cast back, returning float32 for "
          "float16 / bfloat16 x",
          rope_returns_float32),
    Entry("apply_rope", "wrong", "half-as-head-dim-in-exponent",
          "divides by half = head_dim // 2 in the exponent (base ** (-2 i / half)) where "
          "head_dim belongs, so the frequencies fall off twice as fast",
          rope_half_in_exponent),
    Entry("apply_rope", "wrong", "no-odd-head-dim-check",
          "never checks for an odd head_dim: x[..., half:] is one feature wider than cos, so "
          "the call raises a broadcasting RuntimeError instead of ValueError",
          rope_no_odd_check),
    Entry("apply_rope", "right", "complex-polar", None, rope_complex_polar),
    Entry("apply_rope", "right", "rotation-matrices-einsum", None, rope_rotation_matrices),
]
