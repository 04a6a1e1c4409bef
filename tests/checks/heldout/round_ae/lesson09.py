"""Held-out catalogue, lesson 09 (RoPE): rope_angles, apply_rope."""

import math

import torch

from entry import Entry


# ============================================================================ rope_angles
# ---------------------------------------------------------------------------- wrong
def angles_drops_two(positions, head_dim, base=10000.0):
    if head_dim % 2:
        raise ValueError(f"head_dim={head_dim} is odd")
    i = torch.arange(head_dim // 2, dtype=torch.float64)
    inv_freq = base ** (-i / head_dim)
    return (positions.double()[:, None] * inv_freq[None, :]).float()


def angles_index_from_one(positions, head_dim, base=10000.0):
    if head_dim % 2 != 0:
        raise ValueError(f"head_dim={head_dim} must be even")
    half = head_dim // 2
    idx = torch.arange(1, half + 1, dtype=torch.float64)
    freqs = torch.pow(torch.tensor(float(base), dtype=torch.float64), -2 * idx / head_dim)
    return torch.outer(positions.to(torch.float64), freqs).to(torch.float32)


def angles_no_odd_check(positions, head_dim, base=10000.0):
    exps = torch.arange(0, head_dim, 2, dtype=torch.float64)[: head_dim // 2] / head_dim
    inv = 1.0 / (base ** exps)
    return (positions.to(torch.float64).unsqueeze(1) * inv.unsqueeze(0)).to(torch.float32)


def angles_precedence(positions, head_dim, base=10000.0):
    if head_dim % 2 == 1:
        raise ValueError(f"head_dim={head_dim} is odd: RoPE needs pairs")
    i = torch.arange(head_dim // 2, dtype=torch.float64)
    inv_freq = base ** -2 * i / head_dim
    return (positions.double()[:, None] * inv_freq).float()


def angles_half_positions(positions, head_dim, base=10000.0):
    if head_dim % 2:
        raise ValueError(f"head_dim={head_dim} is odd")
    i = torch.arange(head_dim // 2, dtype=torch.float16)
    inv_freq = base ** (-2.0 * i / head_dim)
    pos = positions.to(torch.float16)
    return (pos[:, None] * inv_freq[None, :]).float()


def angles_transposed(positions, head_dim, base=10000.0):
    if head_dim % 2:
        raise ValueError(f"head_dim={head_dim} is odd")
    inv_freq = base ** (-torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim)
    return (inv_freq[:, None] * positions.double()[None, :]).float()


# ---------------------------------------------------------------------------- right
def angles_python_loops(positions, head_dim, base=10000.0):
    if head_dim % 2:
        raise ValueError(f"head_dim={head_dim} is odd: the last feature has no partner")
    half = head_dim // 2
    rows = []
    for p in positions.tolist():
        rows.append([p * math.pow(base, -2.0 * i / head_dim) for i in range(half)])
    flat = [a for row in rows for a in row]
    return torch.tensor(flat, dtype=torch.float64).reshape(len(rows), half).to(torch.float32)


def angles_exp_log(positions, head_dim, base=10000.0):
    if head_dim % 2 != 0:
        raise ValueError(f"head_dim={head_dim} is odd")
    i = torch.arange(head_dim // 2, dtype=torch.float64)
    freq = torch.exp(-math.log(base) * (2.0 * i) / head_dim)
    return torch.einsum("n,i->ni", positions.to(torch.float64), freq)


# ============================================================================ apply_rope
# ---------------------------------------------------------------------------- wrong
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


def rope_rotates_backwards(x, positions, base=10000.0):
    head_dim = x.shape[-1]
    if head_dim % 2:
        raise ValueError(f"head_dim={head_dim} is odd")
    compute = torch.promote_types(x.dtype, torch.float32)
    inv = base ** (-2.0 * torch.arange(head_dim // 2, dtype=torch.float64) / head_dim)
    theta = (positions.to(torch.float64)[:, None] * inv).to(compute)
    c, s = torch.cos(theta), torch.sin(theta)
    h = head_dim // 2
    a, b = x[..., :h].to(compute), x[..., h:].to(compute)
    return torch.cat([a * c + b * s, -a * s + b * c], dim=-1).to(x.dtype)


def rope_angles_in_x_dtype(x, positions, base=10000.0):
    d = x.shape[-1]
    if d % 2:
        raise ValueError(f"head_dim={d} is odd")
    half = d // 2
    inv_freq = base ** (-2 * torch.arange(half, dtype=x.dtype) / d)
    ang = positions.to(x.dtype)[:, None] * inv_freq[None, :]
    cos, sin = ang.cos().float(), ang.sin().float()
    x1, x2 = x[..., :half].float(), x[..., half:].float()
    y = torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1)
    return y.to(x.dtype)


def rope_repeat_interleave(x, positions, base=10000.0):
    d = x.shape[-1]
    if d % 2:
        raise ValueError(f"head_dim={d} is odd")
    ct = torch.promote_types(x.dtype, torch.float32)
    freqs = base ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
    ang = (positions.double()[:, None] * freqs[None, :]).to(ct)  # (N, d/2)
    cos = ang.cos().repeat_interleave(2, dim=-1)  # (N, d)
    sin = ang.sin().repeat_interleave(2, dim=-1)
    xc = x.to(ct)
    x1, x2 = xc[..., : d // 2], xc[..., d // 2:]
    rotated = torch.cat([-x2, x1], dim=-1)
    return (xc * cos + rotated * sin).to(x.dtype)


def rope_ignores_positions(x, positions, base=10000.0):
    *_, n, dim = x.shape
    if dim % 2:
        raise ValueError(f"head_dim={dim} is odd")
    ct = torch.promote_types(x.dtype, torch.float32)
    pos = torch.arange(n, dtype=torch.float64)
    k = torch.arange(dim // 2, dtype=torch.float64)
    ang = (pos[:, None] * torch.pow(base, -2 * k / dim)[None, :]).to(ct)
    lo, hi = x[..., : dim // 2].to(ct), x[..., dim // 2:].to(ct)
    out = torch.cat((lo * ang.cos() - hi * ang.sin(), lo * ang.sin() + hi * ang.cos()), -1)
    return out.to(x.dtype)


def rope_no_odd_check(x, positions, base=10000.0):
    d = x.shape[-1]
    half = d // 2
    compute = torch.promote_types(x.dtype, torch.float32)
    i = torch.arange(half, dtype=torch.float64)
    theta = (positions.double().unsqueeze(-1) * base ** (-2 * i / d)).to(compute)
    x1 = x[..., :half].to(compute)
    x2 = x[..., half:].to(compute)
    y1 = x1 * theta.cos() - x2 * theta.sin()
    y2 = x1 * theta.sin() + x2 * theta.cos()
    return torch.cat([y1, y2], dim=-1).to(x.dtype)


# ---------------------------------------------------------------------------- right
def rope_complex_f64(x, positions, base=10000.0):
    d = x.shape[-1]
    if d % 2:
        raise ValueError(f"head_dim={d} is odd: RoPE rotates pairs")
    half = d // 2
    i = torch.arange(half, dtype=torch.float64)
    theta = positions.to(torch.float64)[:, None] * base ** (-2.0 * i / d)
    rot = torch.polar(torch.ones_like(theta), theta)  # e^{i theta}, (N, d/2)
    z = torch.complex(x[..., :half].double(), x[..., half:].double()) * rot
    return torch.cat([z.real, z.imag], dim=-1).to(x.dtype)


def rope_rotate_half(x, positions, base=10000.0):
    dim = x.shape[-1]
    if dim % 2 == 1:
        raise ValueError(f"head_dim={dim} is odd")
    f = torch.promote_types(x.dtype, torch.float32)
    inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.float64) / dim))
    emb = torch.outer(positions.to(torch.float64), inv_freq)
    emb = torch.cat([emb, emb], dim=-1).to(f)  # (N, d): the same angle for i and i + d/2

    def rotate_half(t):
        a, b = t.chunk(2, dim=-1)
        return torch.cat([-b, a], dim=-1)

    xf = x.to(f)
    return (xf * emb.cos() + rotate_half(xf) * emb.sin()).to(x.dtype)


ENTRIES = [
    Entry("rope_angles", "wrong", "exponent_without_two",
          "uses base ** (-i / head_dim), dropping the factor 2 of the exponent, so the "
          "frequencies fall off half as fast as they should",
          angles_drops_two),
    Entry("rope_angles", "wrong", "index_from_one",
          "numbers the pairs i = 1 .. head_dim / 2 instead of 0 .. head_dim / 2 - 1, so the "
          "first pair does not turn at one radian per position and every frequency is shifted",
          angles_index_from_one),
    Entry("rope_angles", "wrong", "no_odd_check",
          "never checks head_dim, so an odd head_dim returns angles instead of raising "
          "ValueError",
          angles_no_odd_check),
    Entry("rope_angles", "wrong", "exponent_precedence",
          "writes base ** -2 * i / head_dim, which Python reads as (base ** -2) * i / head_dim: "
          "the exponent needs parentheses",
          angles_precedence),
    Entry("rope_angles", "wrong", "float16_positions",
          "computes the positions and frequencies in float16, so the frequencies are rounded "
          "to 11 bits and large positions are rounded or overflow to inf (float16 stops at "
          "65504)",
          angles_half_positions),
    Entry("rope_angles", "wrong", "transposed_outer",
          "builds the outer product frequencies x positions, returning the transpose "
          "(head_dim // 2, N) instead of (N, head_dim // 2)",
          angles_transposed),
    Entry("rope_angles", "right", "python_loops_math_pow", None, angles_python_loops),
    Entry("rope_angles", "right", "exp_log_einsum_float64", None, angles_exp_log),

    Entry("apply_rope", "wrong", "adjacent_pairs",
          "rotates adjacent features (2i, 2i + 1) as in the original RoPE paper instead of the "
          "rotate-half pairs (i, i + d/2) the contract fixes",
          rope_adjacent_pairs),
    Entry("apply_rope", "wrong", "rotation_sign_flipped",
          "puts the minus sign on the wrong term (y_i = x_i cos + x_{i+d/2} sin, y_{i+d/2} = "
          "-x_i sin + x_{i+d/2} cos), rotating every pair by -angle",
          rope_rotates_backwards),
    Entry("apply_rope", "wrong", "angles_in_half_precision",
          "computes the positions, frequencies and angles in x's dtype, so for bfloat16 / "
          "float16 inputs large positions are rounded (257 becomes 256) before the rotation",
          rope_angles_in_x_dtype),
    Entry("apply_rope", "wrong", "repeat_interleave_angles",
          "spreads the angles over d features with repeat_interleave (i, i, i+1, i+1, ...) "
          "instead of repeating the block [angles, angles], so the rotate-half pairs get "
          "mismatched angles",
          rope_repeat_interleave),
    Entry("apply_rope", "wrong", "ignores_positions",
          "rotates row n by torch.arange(N)[n] instead of positions[n], ignoring the "
          "positions argument",
          rope_ignores_positions),
    Entry("apply_rope", "wrong", "no_odd_check",
          "does not check head_dim, so an odd head_dim fails with a RuntimeError from the "
          "halves' shape mismatch instead of a ValueError naming head_dim",
          rope_no_odd_check),
    Entry("apply_rope", "right", "complex_polar_float64", None, rope_complex_f64),
    Entry("apply_rope", "right", "hf_rotate_half", None, rope_rotate_half),
]
