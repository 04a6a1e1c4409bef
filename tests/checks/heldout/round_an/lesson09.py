"""Held-out catalogue, lesson 09 (RoPE): rope_angles, apply_rope."""

import math

import numpy as np
import torch

from entry import Entry


# ============================================================ rope_angles: wrong
def angles_forgets_two(positions, head_dim, base=10000.0):
    if head_dim % 2:
        raise ValueError(f"head_dim={head_dim} is odd")
    i = torch.arange(head_dim // 2, dtype=torch.float64)
    inv_freq = base ** (-i / head_dim)
    return (positions.double()[:, None] * inv_freq[None, :]).float()


def angles_linspace_endpoint(positions, head_dim, base=10000.0):
    if head_dim % 2 != 0:
        raise ValueError(f"head_dim={head_dim} must be even")
    expo = torch.linspace(0.0, 1.0, head_dim // 2, dtype=torch.float64)
    freqs = base ** (-expo)
    return torch.outer(positions.to(torch.float64), freqs).to(torch.float32)


def angles_no_odd_guard(positions, head_dim, base=10000.0):
    half = head_dim // 2
    idx = torch.arange(half, dtype=torch.float64)
    freq = torch.pow(torch.tensor(float(base), dtype=torch.float64), -2.0 * idx / head_dim)
    return (positions.to(torch.float64).unsqueeze(1) * freq.unsqueeze(0)).float()


def angles_floor_division(positions, head_dim, base=10000.0):
    if head_dim % 2:
        raise ValueError(f"head_dim={head_dim} is odd")
    i = torch.arange(head_dim // 2)
    expo = -2 * i // head_dim
    inv = float(base) ** expo.double()
    return (positions.double()[:, None] * inv).float()


def angles_transposed_outer(positions, head_dim, base=10000.0):
    if head_dim % 2:
        raise ValueError(f"head_dim={head_dim} is odd")
    i = torch.arange(0, head_dim, 2, dtype=torch.float64)
    inv_freq = 1.0 / (base ** (i / head_dim))
    return (inv_freq[:, None] * positions.double()[None, :]).to(torch.float32)


def angles_ignores_positions(positions, head_dim, base=10000.0):
    if head_dim % 2:
        raise ValueError(f"head_dim={head_dim} is odd")
    n = positions.shape[0]
    pos = torch.arange(n, dtype=torch.float64)
    inv = base ** (-2.0 * torch.arange(head_dim // 2, dtype=torch.float64) / head_dim)
    return (pos[:, None] * inv[None, :]).float()


# ============================================================ rope_angles: right
def angles_numpy_exp_log(positions, head_dim, base=10000.0):
    if head_dim % 2 == 1:
        raise ValueError(f"head_dim={head_dim} is odd: RoPE needs pairs")
    pos = np.asarray(positions.cpu().numpy(), dtype=np.float64)
    i = np.arange(head_dim // 2, dtype=np.float64)
    inv = np.exp(-np.log(float(base)) * 2.0 * i / head_dim)
    return torch.from_numpy(np.multiply.outer(pos, inv)).to(positions.device)


def angles_nested_lists(positions, head_dim, base=10000.0):
    if head_dim % 2:
        raise ValueError("head_dim=%d is odd" % head_dim)
    half = head_dim // 2
    rows = []
    for p in positions.tolist():
        rows.append([p * math.pow(base, -2.0 * i / head_dim) for i in range(half)])
    return torch.tensor(rows, dtype=torch.float32).reshape(len(rows), half)


# ============================================================ apply_rope: wrong
def rope_adjacent_pairs(x, positions, base=10000.0):
    d = x.shape[-1]
    if d % 2:
        raise ValueError(f"head_dim={d} is odd")
    ct = torch.promote_types(x.dtype, torch.float32)
    inv = base ** (-2.0 * torch.arange(d // 2, dtype=torch.float64) / d)
    ang = (positions.double()[:, None] * inv).to(ct)
    cos, sin = ang.cos(), ang.sin()
    xe, xo = x[..., 0::2].to(ct), x[..., 1::2].to(ct)
    ye = xe * cos - xo * sin
    yo = xe * sin + xo * cos
    return torch.stack([ye, yo], dim=-1).flatten(-2).to(x.dtype)


def rope_rotates_backwards(x, positions, base=10000.0):
    head_dim = x.shape[-1]
    if head_dim % 2:
        raise ValueError(f"head_dim={head_dim} is odd")
    compute = torch.promote_types(x.dtype, torch.float32)
    half = head_dim // 2
    freqs = base ** (-2.0 * torch.arange(half, dtype=torch.float64) / head_dim)
    angles = (positions.to(torch.float64)[:, None] * freqs[None, :]).to(compute)
    c, s = torch.cos(angles), torch.sin(angles)
    x1, x2 = x[..., :half].to(compute), x[..., half:].to(compute)
    y1 = x1 * c + x2 * s
    y2 = -x1 * s + x2 * c
    return torch.cat([y1, y2], dim=-1).to(x.dtype)


def rope_angles_in_x_dtype(x, positions, base=10000.0):
    d = x.shape[-1]
    if d % 2:
        raise ValueError(f"head_dim={d} is odd")
    half = d // 2
    inv_freq = (base ** (-2.0 * torch.arange(half, dtype=torch.float32) / d)).to(x.dtype)
    theta = positions.to(x.dtype)[:, None] * inv_freq[None, :]
    cos, sin = theta.float().cos(), theta.float().sin()
    a, b = x[..., :half].float(), x[..., half:].float()
    return torch.cat([a * cos - b * sin, a * sin + b * cos], dim=-1).to(x.dtype)


def rope_cat_dim0(x, positions, base=10000.0):
    dim = x.shape[-1]
    if dim % 2:
        raise ValueError(f"head_dim={dim} is odd")
    comp = torch.promote_types(x.dtype, torch.float32)
    h = dim // 2
    inv = torch.tensor([base ** (-2.0 * i / dim) for i in range(h)], dtype=torch.float64)
    ang = torch.outer(positions.double(), inv).to(comp)
    lo, hi = x[..., :h].to(comp), x[..., h:].to(comp)
    first = lo * ang.cos() - hi * ang.sin()
    second = lo * ang.sin() + hi * ang.cos()
    return torch.cat([first, second]).to(x.dtype)


def rope_half_from_wrong_axis(x, positions, base=10000.0):
    n, head_dim = x.shape[-2], x.shape[-1]
    if head_dim % 2:
        raise ValueError(f"head_dim={head_dim} is odd")
    compute = torch.promote_types(x.dtype, torch.float32)
    half = x.shape[-2] // 2
    i = torch.arange(half, dtype=torch.float64)
    angles = (positions.double()[:, None] * base ** (-2.0 * i / head_dim)).to(compute)
    x1, x2 = x[..., :half].to(compute), x[..., half:].to(compute)
    y1 = x1 * angles.cos() - x2 * angles.sin()
    y2 = x1 * angles.sin() + x2 * angles.cos()
    return torch.cat([y1, y2], dim=-1).to(x.dtype)


def rope_no_odd_guard(x, positions, base=10000.0):
    d = x.shape[-1]
    half = d // 2
    compute = torch.promote_types(x.dtype, torch.float32)
    inv = base ** (-2.0 * torch.arange(half, dtype=torch.float64) / d)
    theta = (positions.double().unsqueeze(-1) * inv).to(compute)
    x1 = x[..., :half].to(compute)
    x2 = x[..., half:].to(compute)
    out = torch.cat([x1 * theta.cos() - x2 * theta.sin(), x1 * theta.sin() + x2 * theta.cos()], -1)
    return out.to(x.dtype)


# ============================================================ apply_rope: right
def rope_complex_polar(x, positions, base=10000.0):
    d = x.shape[-1]
    if d % 2:
        raise ValueError(f"head_dim={d} is odd: no partner for the last feature")
    half = d // 2
    inv = torch.tensor(float(base), dtype=torch.float64) ** (
        -torch.arange(0, d, 2, dtype=torch.float64) / d)
    theta = positions.double()[:, None] * inv[None, :]  # (N, d/2)
    rot = torch.polar(torch.ones_like(theta), theta)  # e^{i theta}
    z = torch.complex(x[..., :half].double(), x[..., half:].double())
    w = z * rot
    return torch.cat([w.real, w.imag], dim=-1).to(x.dtype)


def rope_rotate_half_hf(x, positions, base=10000.0):
    head_dim = x.shape[-1]
    if head_dim % 2 != 0:
        raise ValueError(f"head_dim={head_dim} is odd")
    inv_freq = 1.0 / (base ** (torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim))
    freqs = positions.to(torch.float64)[:, None] * inv_freq[None, :]
    emb = torch.cat((freqs, freqs), dim=-1)  # (N, d)
    cos, sin = emb.cos(), emb.sin()
    xd = x.to(torch.float64)
    x1, x2 = xd[..., : head_dim // 2], xd[..., head_dim // 2:]
    rotated = torch.cat((-x2, x1), dim=-1)
    return (xd * cos + rotated * sin).to(x.dtype)


ENTRIES = [
    Entry("rope_angles", "wrong", "forgets_two",
          "uses base ** (-i / head_dim): the factor 2 of the exponent is missing, so the "
          "frequencies fall too slowly", angles_forgets_two),
    Entry("rope_angles", "wrong", "linspace_endpoint",
          "builds the exponents with torch.linspace(0, 1, head_dim // 2), which includes the "
          "endpoint 1: exponents i / (d/2 - 1) instead of 2 i / d", angles_linspace_endpoint),
    Entry("rope_angles", "wrong", "no_odd_guard",
          "never checks head_dim: an odd head_dim silently returns head_dim // 2 angles instead "
          "of raising ValueError", angles_no_odd_guard),
    Entry("rope_angles", "wrong", "floor_division",
          "writes -2 * i // head_dim: floor division on integers turns the exponent into -1 "
          "(or 0) instead of the fraction -2 i / d", angles_floor_division),
    Entry("rope_angles", "wrong", "transposed_outer",
          "builds the outer product as frequencies x positions, so the result is the "
          "transpose, (head_dim // 2, N) instead of (N, head_dim // 2) (wrong values even when "
          "both are equal)", angles_transposed_outer),
    Entry("rope_angles", "wrong", "ignores_positions",
          "uses torch.arange(N) as the positions instead of the positions given, wrong for "
          "unsorted or offset positions", angles_ignores_positions),
    Entry("rope_angles", "right", "numpy_exp_log_float64", None, angles_numpy_exp_log),
    Entry("rope_angles", "right", "nested_lists_math_pow", None, angles_nested_lists),
    Entry("apply_rope", "wrong", "adjacent_pairs",
          "rotates adjacent features (0,1), (2,3), ... (the interleaved GPT-J layout) instead of "
          "pairing feature i with i + d/2", rope_adjacent_pairs),
    Entry("apply_rope", "wrong", "rotates_backwards",
          "the signs of sin are swapped (y1 = x1 cos + x2 sin, y2 = -x1 sin + x2 cos): each pair "
          "turns by -angle", rope_rotates_backwards),
    Entry("apply_rope", "wrong", "angles_in_x_dtype",
          "computes positions * frequency in x's half-precision dtype, so at large positions the "
          "angles (bfloat16 most of all) are off by whole radians before the cos and sin", rope_angles_in_x_dtype),
    Entry("apply_rope", "wrong", "cat_dim0",
          "concatenates the two rotated halves with torch.cat's default dim=0 instead of the "
          "feature axis, so the shape is wrong", rope_cat_dim0),
    Entry("apply_rope", "wrong", "half_from_wrong_axis",
          "takes half = x.shape[-2] // 2 (half of N, not of head_dim) to split the features, so "
          "the halves are wrong and the call raises or rotates the wrong pairs",
          rope_half_from_wrong_axis),
    Entry("apply_rope", "wrong", "no_odd_guard",
          "never checks head_dim: an odd head_dim hits a shape RuntimeError deep inside instead "
          "of the ValueError naming head_dim", rope_no_odd_guard),
    Entry("apply_rope", "right", "complex_polar_float64", None, rope_complex_polar),
    Entry("apply_rope", "right", "rotate_half_hf_float64", None, rope_rotate_half_hf),
]
