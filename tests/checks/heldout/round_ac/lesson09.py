"""Held-out catalogue, lesson 09 (RoPE): rope_angles, apply_rope."""

import math

import torch

from entry import Entry


# ============================================================ rope_angles: wrong
def angles_precedence(positions, head_dim, base=10000.0):
    if head_dim % 2 != 0:
        raise ValueError(f"head_dim={head_dim} is odd")
    i = torch.arange(head_dim // 2, dtype=torch.float64)
    inv_freq = base ** -2 * i / head_dim
    return (positions.double()[:, None] * inv_freq[None, :]).float()


def angles_index_from_one(positions, head_dim, base=10000.0):
    if head_dim % 2:
        raise ValueError(f"head_dim={head_dim} must be even")
    idx = torch.arange(1, head_dim // 2 + 1, dtype=torch.float64)
    freqs = base ** (-2 * idx / head_dim)
    return torch.outer(positions.to(torch.float64), freqs).to(torch.float32)


def angles_no_odd_check(positions, head_dim, base=10000.0):
    inv_freq = 1.0 / (base ** (torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim))
    return (positions.double().unsqueeze(1) * inv_freq.unsqueeze(0)).float()


def angles_transposed(positions, head_dim, base=10000.0):
    if head_dim % 2 == 1:
        raise ValueError(f"head_dim={head_dim} is odd")
    i = torch.arange(head_dim // 2, dtype=torch.float64)
    freq = torch.pow(torch.tensor(float(base), dtype=torch.float64), -2.0 * i / head_dim)
    return (freq[:, None] * positions.double()[None, :]).float()


def angles_bf16_positions(positions, head_dim, base=10000.0):
    if head_dim % 2:
        raise ValueError(f"odd head_dim={head_dim}")
    half = head_dim // 2
    inv = base ** (-2.0 * torch.arange(half, dtype=torch.float32) / head_dim)
    pos = positions.to(torch.bfloat16)  # the model runs in bf16
    return pos.float()[:, None] * inv[None, :]


def angles_linspace(positions, head_dim, base=10000.0):
    if head_dim % 2 != 0:
        raise ValueError(f"head_dim={head_dim} is odd, RoPE needs pairs")
    exponents = torch.linspace(0.0, 1.0, head_dim // 2, dtype=torch.float64)  # 2i/d
    inv_freq = base ** (-exponents)
    return (positions.to(torch.float64)[:, None] * inv_freq).to(torch.float32)


# ============================================================ rope_angles: right
def angles_exp_log(positions, head_dim, base=10000.0):
    if head_dim % 2:
        raise ValueError(f"head_dim={head_dim} is odd")
    i = torch.arange(head_dim // 2, dtype=torch.float64)
    inv_freq = torch.exp(-math.log(base) * (2.0 * i / head_dim))
    return torch.einsum("n,i->ni", positions.to(torch.float64), inv_freq)


def angles_python_lists(positions, head_dim, base=10000.0):
    if head_dim % 2 == 1:
        raise ValueError(f"head_dim={head_dim} is odd: no partner for the last feature")
    rows = []
    for p in positions.tolist():
        rows.append([p * base ** (-2 * i / head_dim) for i in range(head_dim // 2)])
    return torch.tensor(rows, dtype=torch.float64).reshape(len(rows), head_dim // 2)


# ============================================================ apply_rope: wrong
def rope_adjacent_pairs(x, positions, base=10000.0):
    d = x.shape[-1]
    if d % 2:
        raise ValueError(f"head_dim={d} is odd")
    ct = torch.promote_types(x.dtype, torch.float32)
    i = torch.arange(d // 2, dtype=torch.float64)
    ang = (positions.double()[:, None] * base ** (-2 * i / d)).to(ct)
    c, s = torch.cos(ang), torch.sin(ang)
    xe, xo = x[..., 0::2].to(ct), x[..., 1::2].to(ct)
    ye = xe * c - xo * s
    yo = xe * s + xo * c
    return torch.stack([ye, yo], dim=-1).flatten(-2).to(x.dtype)


def rope_rotates_backwards(x, positions, base=10000.0):
    head_dim = x.shape[-1]
    if head_dim % 2 != 0:
        raise ValueError(f"head_dim={head_dim} is odd")
    compute = torch.promote_types(x.dtype, torch.float32)
    half = head_dim // 2
    inv = base ** (-2.0 * torch.arange(half, dtype=torch.float64) / head_dim)
    theta = (positions.to(torch.float64)[:, None] * inv).to(compute)
    x1, x2 = x[..., :half].to(compute), x[..., half:].to(compute)
    y1 = x1 * torch.cos(theta) + x2 * torch.sin(theta)
    y2 = -x1 * torch.sin(theta) + x2 * torch.cos(theta)
    return torch.cat([y1, y2], dim=-1).to(x.dtype)


def rope_angles_in_x_dtype(x, positions, base=10000.0):
    d = x.shape[-1]
    if d % 2:
        raise ValueError(f"head_dim={d} is odd")
    half = d // 2
    inv = (base ** (-2.0 * torch.arange(half, dtype=torch.float64) / d)).to(x.dtype)
    angles = positions.to(x.dtype)[:, None] * inv[None, :]
    cos = torch.cos(angles.float())
    sin = torch.sin(angles.float())
    a, b = x[..., :half].float(), x[..., half:].float()
    return torch.cat([a * cos - b * sin, a * sin + b * cos], dim=-1).to(x.dtype)


def rope_repeat_interleave(x, positions, base=10000.0):
    d = x.shape[-1]
    if d % 2 == 1:
        raise ValueError(f"head_dim={d} is odd")
    ct = torch.promote_types(x.dtype, torch.float32)
    freqs = 1.0 / base ** (torch.arange(0, d, 2, dtype=torch.float64) / d)
    ang = (positions.double()[:, None] * freqs[None, :]).to(ct)
    emb = ang.repeat_interleave(2, dim=-1)  # (N, d)
    xc = x.to(ct)
    rotated = torch.cat([-xc[..., d // 2:], xc[..., : d // 2]], dim=-1)
    return (xc * emb.cos() + rotated * emb.sin()).to(x.dtype)


def rope_head_dim_from_n(x, positions, base=10000.0):
    n, head_dim = x.shape[-2], x.shape[-1]
    if head_dim % 2:
        raise ValueError(f"head_dim={head_dim} is odd")
    compute = torch.promote_types(x.dtype, torch.float32)
    half = head_dim // 2
    i = torch.arange(half, dtype=torch.float64)
    theta = positions.double()[:, None] * base ** (-2 * i / n)
    cos, sin = theta.cos().to(compute), theta.sin().to(compute)
    x1, x2 = x[..., :half].to(compute), x[..., half:].to(compute)
    return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], -1).to(x.dtype)


def rope_ignores_positions(x, positions, base=10000.0):
    n, d = x.shape[-2], x.shape[-1]
    if d % 2 != 0:
        raise ValueError(f"head_dim={d} is odd")
    compute = torch.promote_types(x.dtype, torch.float32)
    pos = torch.arange(n, dtype=torch.float64)  # token n sits at position n
    inv = base ** (-2 * torch.arange(d // 2, dtype=torch.float64) / d)
    ang = torch.outer(pos, inv).to(compute)
    lo, hi = x[..., : d // 2].to(compute), x[..., d // 2:].to(compute)
    out = torch.cat([lo * ang.cos() - hi * ang.sin(), lo * ang.sin() + hi * ang.cos()], dim=-1)
    return out.to(x.dtype)


# ============================================================ apply_rope: right
def rope_complex_polar(x, positions, base=10000.0):
    d = x.shape[-1]
    if d % 2:
        raise ValueError(f"head_dim={d} is odd")
    half = d // 2
    inv = torch.tensor([base ** (-2.0 * i / d) for i in range(half)], dtype=torch.float64)
    theta = positions.to(torch.float64)[:, None] * inv[None, :]  # (N, d/2)
    rot = torch.polar(torch.ones_like(theta), theta)  # e^{i theta}
    xx = x.to(torch.float64)
    z = torch.complex(xx[..., :half], xx[..., half:]) * rot
    return torch.cat([z.real, z.imag], dim=-1).to(x.dtype)


def rope_rotation_matrices(x, positions, base=10000.0):
    d = x.shape[-1]
    if d % 2 == 1:
        raise ValueError(f"head_dim={d} is odd")
    h = d // 2
    i = torch.arange(h, dtype=torch.float64)
    t = positions.double()[:, None] * torch.pow(torch.tensor(base, dtype=torch.float64),
                                                -2 * i / d)
    c, s = torch.cos(t), torch.sin(t)
    R = torch.stack([torch.stack([c, -s], -1), torch.stack([s, c], -1)], -2)  # (N, h, 2, 2)
    pairs = torch.stack([x[..., :h], x[..., h:]], dim=-1).double()  # (..., N, h, 2)
    turned = torch.einsum("nhij,...nhj->...nhi", R, pairs)
    return torch.cat([turned[..., 0], turned[..., 1]], dim=-1).to(x.dtype)


ENTRIES = [
    Entry("rope_angles", "wrong", "power-precedence",
          "writes base ** -2 * i / head_dim, which Python reads as (base ** -2) * i / head_dim: "
          "the exponent -2 i / d needs parentheses", angles_precedence),
    Entry("rope_angles", "wrong", "index-from-one",
          "numbers the pairs from 1 (arange(1, d/2 + 1)) instead of 0, so every pair gets the "
          "next pair's frequency and the fastest one (base ** 0 = 1 radian per position) is lost", angles_index_from_one),
    Entry("rope_angles", "wrong", "no-odd-check",
          "never checks head_dim: an odd head_dim returns angles (arange(0, d, 2) rounds up) "
          "instead of raising ValueError", angles_no_odd_check),
    Entry("rope_angles", "wrong", "outer-product-transposed",
          "builds the outer product frequencies x positions, returning (head_dim // 2, N) "
          "instead of (N, head_dim // 2) (when N == head_dim // 2 the shape fits but the "
          "values are transposed)", angles_transposed),
    Entry("rope_angles", "wrong", "bf16-positions",
          "casts the positions to bfloat16 before multiplying, so large positions are rounded "
          "(257 becomes 256) and the angles drift", angles_bf16_positions),
    Entry("rope_angles", "wrong", "linspace-endpoint",
          "uses torch.linspace(0, 1, d/2) for the exponents 2i/d, but linspace includes the "
          "endpoint 1, so the steps are 1/(d/2 - 1) rather than 2/d", angles_linspace),
    Entry("rope_angles", "right", "exp-log-einsum", None, angles_exp_log),
    Entry("rope_angles", "right", "python-lists", None, angles_python_lists),

    Entry("apply_rope", "wrong", "adjacent-pairs",
          "pairs adjacent features (0,1), (2,3), ... (the interleaved GPT-J layout) instead of "
          "feature i with feature i + d/2 (rotate-half)", rope_adjacent_pairs),
    Entry("apply_rope", "wrong", "rotates-backwards",
          "the signs of the sine terms are swapped (y_i = x_i cos + x_{i+d/2} sin), so each "
          "pair turns by -angle instead of +angle", rope_rotates_backwards),
    Entry("apply_rope", "wrong", "angles-in-x-dtype",
          "computes positions x frequencies in x's dtype (float16/bfloat16) before the cos/sin, "
          "so large positions and their angles are rounded and the rotation is off",
          rope_angles_in_x_dtype),
    Entry("apply_rope", "wrong", "repeat-interleave-angles",
          "widens the (N, d/2) angles to (N, d) with repeat_interleave (a, a, b, b, ...) "
          "while rotating halves, so feature i gets angle i // 2 instead of i % (d/2): "
          "torch.cat([ang, ang]) belongs there", rope_repeat_interleave),
    Entry("apply_rope", "wrong", "frequency-uses-n",
          "divides the exponent by N (x.shape[-2]) instead of head_dim (x.shape[-1]): the wrong "
          "axis of x is reused in base ** (-2 i / d)", rope_head_dim_from_n),
    Entry("apply_rope", "wrong", "ignores-positions",
          "rotates row n by arange(N)[n] instead of positions[n], so any positions other than "
          "0..N-1 (offsets, unsorted) are ignored", rope_ignores_positions),
    Entry("apply_rope", "right", "complex-polar", None, rope_complex_polar),
    Entry("apply_rope", "right", "rotation-matrix-einsum", None, rope_rotation_matrices),
]
