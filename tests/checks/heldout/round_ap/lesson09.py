"""Held-out catalogue, lesson 09 (rope): rope_angles, apply_rope."""

import math

import torch

from entry import Entry


# ========================================================================= rope_angles: wrong
def angles_double_two(positions, head_dim, base=10000.0):
    if head_dim % 2:
        raise ValueError(f"head_dim={head_dim} is odd")
    idx = torch.arange(0, head_dim, 2, dtype=torch.float64)  # 0, 2, 4, ...
    inv_freq = base ** (-2 * idx / head_dim)
    return (positions.double()[:, None] * inv_freq[None, :]).float()


def angles_precedence(positions, head_dim, base=10000.0):
    if head_dim % 2 != 0:
        raise ValueError(f"head_dim={head_dim} must be even")
    i = torch.arange(head_dim // 2, dtype=torch.float64)
    freq = base ** -2 * i / head_dim
    return positions.to(torch.float64).unsqueeze(1) * freq.unsqueeze(0)


def angles_no_odd_check(positions, head_dim, base=10000.0):
    half = head_dim // 2
    i = torch.arange(half, dtype=torch.float64)
    freq = torch.pow(torch.tensor(float(base), dtype=torch.float64), -2.0 * i / head_dim)
    return torch.outer(positions.double(), freq).to(torch.float32)


def angles_floor_division(positions, head_dim, base=10000.0):
    if head_dim % 2:
        raise ValueError(f"head_dim={head_dim} is odd")
    i = torch.arange(head_dim // 2)
    expo = -2 * i // head_dim
    freq = base ** expo.double()
    return positions.double()[:, None] * freq


def angles_transposed(positions, head_dim, base=10000.0):
    if head_dim % 2:
        raise ValueError(f"head_dim={head_dim} is odd")
    inv = base ** (-2.0 * torch.arange(head_dim // 2, dtype=torch.float64) / head_dim)
    return (inv[:, None] * positions.double()[None, :]).float()


def angles_linspace(positions, head_dim, base=10000.0):
    if head_dim % 2:
        raise ValueError(f"head_dim={head_dim} is odd")
    frac = torch.linspace(0, 1, head_dim // 2, dtype=torch.float64)  # meant to be 2i/d
    inv_freq = 1.0 / base ** frac
    return positions.double()[:, None] * inv_freq


# ========================================================================= rope_angles: right
def angles_exp_log(positions, head_dim, base=10000.0):
    if head_dim % 2 == 1:
        raise ValueError(f"head_dim={head_dim} is odd: RoPE needs pairs")
    i = torch.arange(head_dim // 2, dtype=torch.float64)
    inv_freq = torch.exp(-(2.0 * i / head_dim) * math.log(base))
    return torch.einsum("n,i->ni", positions.to(torch.float64), inv_freq)


def angles_python_loops(positions, head_dim, base=10000.0):
    if head_dim % 2:
        raise ValueError(f"head_dim={head_dim} is odd")
    half = head_dim // 2
    rows = []
    for p in positions.tolist():
        rows.append([p * math.pow(base, -2.0 * i / head_dim) for i in range(half)])
    return torch.tensor(rows, dtype=torch.float64).reshape(len(rows), half)


# ========================================================================== apply_rope: wrong
def rope_interleaved_pairs(x, positions, base=10000.0):
    d = x.shape[-1]
    if d % 2:
        raise ValueError(f"head_dim={d} is odd")
    ct = torch.promote_types(x.dtype, torch.float32)
    ang = positions.double()[:, None] * base ** (-2.0 * torch.arange(d // 2).double() / d)
    cos, sin = ang.cos().to(ct), ang.sin().to(ct)
    xe, xo = x[..., 0::2].to(ct), x[..., 1::2].to(ct)
    ye = xe * cos - xo * sin
    yo = xe * sin + xo * cos
    return torch.stack([ye, yo], dim=-1).flatten(-2).to(x.dtype)


def rope_wrong_direction(x, positions, base=10000.0):
    head_dim = x.shape[-1]
    if head_dim % 2:
        raise ValueError(f"head_dim={head_dim} is odd")
    compute = torch.promote_types(x.dtype, torch.float32)
    half = head_dim // 2
    inv = base ** (-2.0 * torch.arange(half, dtype=torch.float64) / head_dim)
    theta = positions.to(torch.float64)[:, None] * inv
    c, s = torch.cos(theta).to(compute), torch.sin(theta).to(compute)
    a, b = x[..., :half].to(compute), x[..., half:].to(compute)
    return torch.cat([a * c + b * s, -a * s + b * c], dim=-1).to(x.dtype)


def rope_half_precision_angles(x, positions, base=10000.0):
    d = x.shape[-1]
    if d % 2:
        raise ValueError(f"head_dim={d} is odd")
    half = d // 2
    i = torch.arange(half, dtype=x.dtype)
    theta = positions.to(x.dtype)[:, None] * base ** (-2 * i / d)
    compute = torch.promote_types(x.dtype, torch.float32)
    cos, sin = theta.to(compute).cos(), theta.to(compute).sin()
    x1, x2 = x[..., :half].to(compute), x[..., half:].to(compute)
    return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1).to(x.dtype)


def rope_no_odd_guard(x, positions, base=10000.0):
    d = x.shape[-1]
    half = d // 2
    compute = torch.promote_types(x.dtype, torch.float32)
    idx = torch.arange(half, dtype=torch.float64)
    ang = positions.double()[:, None] * base ** (-2.0 * idx / d)
    cos, sin = torch.cos(ang).to(compute), torch.sin(ang).to(compute)
    x1, x2 = x[..., :half].to(compute), x[..., half:].to(compute)
    y = torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1)
    return y.to(x.dtype)


def rope_cat_wrong_dim(x, positions, base=10000.0):
    d = x.shape[-1]
    if d % 2:
        raise ValueError(f"head_dim={d} is odd")
    half = d // 2
    compute = torch.promote_types(x.dtype, torch.float32)
    i = torch.arange(half, dtype=torch.float64)
    ang = positions.double().unsqueeze(-1) * torch.pow(float(base), -2.0 * i / d)
    cos, sin = ang.cos().to(compute), ang.sin().to(compute)
    lo, hi = x[..., :half].to(compute), x[..., half:].to(compute)
    y1 = lo * cos - hi * sin
    y2 = lo * sin + hi * cos
    return torch.cat([y1, y2], dim=-2).to(x.dtype)


def rope_ignores_positions(x, positions, base=10000.0):
    n, d = x.shape[-2], x.shape[-1]
    if d % 2:
        raise ValueError(f"head_dim={d} is odd")
    half = d // 2
    compute = torch.promote_types(x.dtype, torch.float32)
    pos = torch.arange(n, dtype=torch.float64)  # token n sits at position n
    ang = pos[:, None] * base ** (-2.0 * torch.arange(half, dtype=torch.float64) / d)
    cos, sin = ang.cos().to(compute), ang.sin().to(compute)
    x1, x2 = x[..., :half].to(compute), x[..., half:].to(compute)
    return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], -1).to(x.dtype)


# ========================================================================== apply_rope: right
def rope_complex_multiply(x, positions, base=10000.0):
    d = x.shape[-1]
    if d % 2 != 0:
        raise ValueError(f"head_dim={d} is odd")
    half = d // 2
    i = torch.arange(half, dtype=torch.float64)
    theta = positions.to(torch.float64)[:, None] * (float(base) ** (-2.0 * i / d))
    rot = torch.polar(torch.ones_like(theta), theta)  # e^{i theta}, complex128
    z = torch.complex(x[..., :half].double(), x[..., half:].double())
    w = z * rot
    return torch.cat([w.real, w.imag], dim=-1).to(x.dtype)


def rope_rotate_half_full_width(x, positions, base=10000.0):
    head_dim = x.shape[-1]
    if head_dim % 2:
        raise ValueError(f"head_dim={head_dim} is odd")
    half = head_dim // 2
    compute = torch.promote_types(x.dtype, torch.float32)
    inv_freq = 1.0 / (base ** (torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim))
    freqs = torch.outer(positions.to(torch.float64), inv_freq)
    emb = torch.cat([freqs, freqs], dim=-1)  # (N, d): the HF Llama layout
    cos, sin = emb.cos().to(compute), emb.sin().to(compute)
    xc = x.to(compute)
    rotated = torch.cat([-xc[..., half:], xc[..., :half]], dim=-1)
    return (xc * cos + rotated * sin).to(x.dtype)


ENTRIES = [
    Entry("rope_angles", "wrong", "two-counted-twice",
          "builds the exponents from arange(0, head_dim, 2) (already 2i) and still multiplies "
          "by -2, so the frequencies fall as base^(-4i/d)",
          angles_double_two),
    Entry("rope_angles", "wrong", "precedence",
          "writes base ** -2 * i / head_dim, which Python reads as (base ** -2) * i / head_dim, "
          "instead of base ** (-2 * i / head_dim)",
          angles_precedence),
    Entry("rope_angles", "wrong", "no-odd-check",
          "never checks head_dim: an odd head_dim silently gives head_dim // 2 angles instead "
          "of raising ValueError",
          angles_no_odd_check),
    Entry("rope_angles", "wrong", "integer-floor-division",
          "computes the exponent on an integer arange with //, so -2 * i // head_dim floors to "
          "0 or -1 instead of the fraction -2i/d",
          angles_floor_division),
    Entry("rope_angles", "wrong", "outer-transposed",
          "forms the outer product frequencies x positions, returning (head_dim // 2, N) "
          "instead of (N, head_dim // 2)",
          angles_transposed),
    Entry("rope_angles", "wrong", "linspace-endpoint",
          "builds the fractions 2i/d with torch.linspace(0, 1, head_dim // 2), which ends at "
          "1 instead of (d - 2)/d, so every frequency but the first is too low",
          angles_linspace),
    Entry("rope_angles", "right", "exp-log-einsum", None, angles_exp_log),
    Entry("rope_angles", "right", "python-loops-math-pow", None, angles_python_loops),

    Entry("apply_rope", "wrong", "adjacent-pairs",
          "rotates adjacent features (0, 1), (2, 3), ... (the GPT-J interleaved layout) "
          "instead of pairing feature i with i + d/2",
          rope_interleaved_pairs),
    Entry("apply_rope", "wrong", "rotates-backwards",
          "puts the sine terms with the wrong signs (y_i = x_i cos + x_{i+d/2} sin), so each "
          "pair turns by -angle",
          rope_wrong_direction),
    Entry("apply_rope", "wrong", "half-precision-angles",
          "computes positions * frequency in x's dtype, so in float16 / bfloat16 large "
          "positions and angles are rounded (bf16 turns 257 into 256) before cos and sin",
          rope_half_precision_angles),
    Entry("apply_rope", "wrong", "no-odd-guard",
          "does not check head_dim: for an odd width the two halves differ in size and the "
          "code fails with a RuntimeError instead of raising ValueError",
          rope_no_odd_guard),
    Entry("apply_rope", "wrong", "cat-along-positions",
          "concatenates the two rotated halves along dim -2 (the positions) instead of dim -1, "
          "giving (..., 2N, d/2)",
          rope_cat_wrong_dim),
    Entry("apply_rope", "wrong", "arange-not-positions",
          "ignores the positions argument and rotates row n by the angle of position n "
          "(arange(N)), wrong for unsorted or offset positions",
          rope_ignores_positions),
    Entry("apply_rope", "right", "complex-multiply", None, rope_complex_multiply),
    Entry("apply_rope", "right", "hf-rotate-half", None, rope_rotate_half_full_width),
]
