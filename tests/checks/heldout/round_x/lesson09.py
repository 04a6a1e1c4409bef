"""Held-out catalogue, lesson 09 (RoPE): rope_angles, apply_rope."""

import math

import torch

from entry import Entry


# ============================================================ rope_angles: wrong
def angles_no_odd_check(positions, head_dim, base=10000.0):
    i = torch.arange(head_dim // 2, dtype=torch.float64)
    inv_freq = base ** (-2.0 * i / head_dim)
    return (positions.to(torch.float64)[:, None] * inv_freq[None, :]).float()


def angles_missing_factor_two(positions, head_dim, base=10000.0):
    if head_dim % 2 != 0:
        raise ValueError(f"head_dim={head_dim} must be even")
    i = torch.arange(head_dim // 2, dtype=torch.float64)
    freqs = base ** (-i / head_dim)
    return (positions.double().unsqueeze(1) * freqs.unsqueeze(0)).to(torch.float32)


def angles_index_from_one(positions, head_dim, base=10000.0):
    if head_dim % 2:
        raise ValueError(f"head_dim={head_dim} is odd")
    i = torch.arange(1, head_dim // 2 + 1, dtype=torch.float64)
    theta = torch.pow(torch.tensor(base, dtype=torch.float64), -2 * i / head_dim)
    return torch.outer(positions.to(torch.float64), theta).to(torch.float32)


def angles_integer_floor_exponent(positions, head_dim, base=10000.0):
    if head_dim % 2 == 1:
        raise ValueError(f"head_dim={head_dim} is odd: no partner for the last feature")
    idx = torch.arange(head_dim // 2)  # int64
    expo = (-2 * idx) // head_dim
    inv = torch.tensor(base, dtype=torch.float64) ** expo.to(torch.float64)
    return positions.to(torch.float64)[:, None] * inv[None, :]


def angles_transposed(positions, head_dim, base=10000.0):
    if head_dim % 2:
        raise ValueError(f"head_dim={head_dim} is odd")
    half = head_dim // 2
    inv_freq = 1.0 / (base ** (torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim))
    return (inv_freq[:, None] * positions.double()[None, :]).float()


def angles_logspace_endpoint(positions, head_dim, base=10000.0):
    if head_dim % 2:
        raise ValueError(f"head_dim={head_dim} is odd")
    inv_freq = torch.logspace(0.0, -1.0, head_dim // 2, base=base, dtype=torch.float64)
    return (positions.double()[:, None] * inv_freq).to(torch.float32)


# ============================================================ rope_angles: right
def angles_python_loops(positions, head_dim, base=10000.0):
    if head_dim % 2 != 0:
        raise ValueError(f"head_dim={head_dim} is odd; RoPE needs pairs")
    half = head_dim // 2
    rows = []
    for p in positions.tolist():
        rows.append([p * math.pow(base, -2.0 * i / head_dim) for i in range(half)])
    out = torch.tensor(rows, dtype=torch.float64).reshape(len(rows), half)
    return out.to(torch.float32)


def angles_exp_log(positions, head_dim, base=10000.0):
    if head_dim % 2:
        raise ValueError(f"head_dim={head_dim} is odd")
    evens = torch.arange(0, head_dim, 2, dtype=torch.float64)
    inv_freq = torch.exp(-math.log(base) * evens / head_dim)
    return torch.outer(positions.to(torch.float64), inv_freq)


# ============================================================ apply_rope: wrong
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
    half = head_dim // 2
    freq = base ** (-2.0 * torch.arange(half, dtype=torch.float64) / head_dim)
    angles = (positions.to(torch.float64)[:, None] * freq).to(compute)
    c, s = torch.cos(angles), torch.sin(angles)
    a, b = x[..., :half].to(compute), x[..., half:].to(compute)
    return torch.cat([a * c + b * s, -a * s + b * c], dim=-1).to(x.dtype)


def rope_angles_in_x_dtype(x, positions, base=10000.0):
    d = x.shape[-1]
    if d % 2:
        raise ValueError(f"head_dim={d} is odd")
    half = d // 2
    inv = base ** (-2.0 * torch.arange(half, dtype=torch.float64) / d)
    ang = positions.to(x.dtype)[:, None] * inv.to(x.dtype)[None, :]
    ct = torch.promote_types(x.dtype, torch.float32)
    cos, sin = ang.to(ct).cos(), ang.to(ct).sin()
    x1, x2 = x[..., :half].to(ct), x[..., half:].to(ct)
    return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], -1).to(x.dtype)


def rope_head_dim_from_shape1(x, positions, base=10000.0):
    head_dim = x.shape[1]
    if head_dim % 2:
        raise ValueError(f"head_dim={head_dim} is odd")
    half = head_dim // 2
    ct = torch.promote_types(x.dtype, torch.float32)
    i = torch.arange(half, dtype=torch.float64)
    ang = (positions.double()[:, None] * base ** (-2 * i / head_dim)).to(ct)
    x1, x2 = x[..., :half].to(ct), x[..., half:2 * half].to(ct)
    y = x.to(ct).clone()
    y[..., :half] = x1 * ang.cos() - x2 * ang.sin()
    y[..., half:2 * half] = x1 * ang.sin() + x2 * ang.cos()
    return y.to(x.dtype)


def rope_no_odd_check(x, positions, base=10000.0):
    d = x.shape[-1]
    h = d // 2
    ct = torch.promote_types(x.dtype, torch.float32)
    ang = (positions.to(torch.float64)[:, None]
           * base ** (-2.0 * torch.arange(h, dtype=torch.float64) / d)).to(ct)
    lo, hi = x[..., :h].to(ct), x[..., h:].to(ct)
    return torch.cat([lo * ang.cos() - hi * ang.sin(), lo * ang.sin() + hi * ang.cos()],
                     dim=-1).to(x.dtype)


def rope_inplace_alias(x, positions, base=10000.0):
    d = x.shape[-1]
    if d % 2:
        raise ValueError(f"head_dim={d} is odd")
    half = d // 2
    ct = torch.promote_types(x.dtype, torch.float32)
    theta = positions.double()[:, None] * base ** (-2 * torch.arange(half, dtype=torch.float64) / d)
    cos, sin = theta.cos().to(ct), theta.sin().to(ct)
    out = x.to(ct).clone()
    x1 = out[..., :half]
    x2 = out[..., half:]
    out[..., :half] = x1 * cos - x2 * sin
    out[..., half:] = x1 * sin + x2 * cos
    return out.to(x.dtype)


# ============================================================ apply_rope: right
def rope_complex(x, positions, base=10000.0):
    d = x.shape[-1]
    if d % 2 != 0:
        raise ValueError(f"head_dim={d} is odd")
    half = d // 2
    freq = base ** (-2.0 * torch.arange(half, dtype=torch.float64) / d)
    theta = positions.to(torch.float64)[:, None] * freq[None, :]
    rot = torch.polar(torch.ones_like(theta), theta)  # e^{i theta}
    z = torch.complex(x[..., :half].to(torch.float64), x[..., half:].to(torch.float64))
    zr = z * rot
    return torch.cat([zr.real, zr.imag], dim=-1).to(x.dtype)


def rope_rotate_half(x, positions, base=10000.0):
    head_dim = x.shape[-1]
    if head_dim % 2:
        raise ValueError(f"head_dim={head_dim} is odd")
    inv = 1.0 / base ** (torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim)
    emb = torch.outer(positions.double(), inv)
    emb = torch.cat([emb, emb], dim=-1)  # (N, d)

    def rotate_half(t):
        a, b = t.chunk(2, dim=-1)
        return torch.cat([-b, a], dim=-1)

    xd = x.double()
    return (xd * emb.cos() + rotate_half(xd) * emb.sin()).to(x.dtype)


ENTRIES = [
    Entry("rope_angles", "wrong", "no_odd_check",
          "never checks head_dim: an odd head_dim silently gives head_dim // 2 angles instead "
          "of raising ValueError",
          angles_no_odd_check),
    Entry("rope_angles", "wrong", "missing_factor_two",
          "uses base ** (-i / head_dim), dropping the 2 of the exponent -2 i / head_dim, so the "
          "frequencies fall off half as fast",
          angles_missing_factor_two),
    Entry("rope_angles", "wrong", "index_from_one",
          "numbers the pairs i = 1 .. head_dim/2 instead of 0 .. head_dim/2 - 1, so every "
          "frequency is shifted by one pair and the first one is not 1",
          angles_index_from_one),
    Entry("rope_angles", "wrong", "integer_floor_exponent",
          "computes the exponent (-2 * i) // head_dim on an integer arange, so floor division "
          "turns every exponent into 0 or -1",
          angles_integer_floor_exponent),
    Entry("rope_angles", "wrong", "transposed_outer",
          "takes the outer product the wrong way round (frequencies x positions), so it returns "
          "(head_dim // 2, N) instead of (N, head_dim // 2)",
          angles_transposed),
    Entry("rope_angles", "wrong", "logspace_endpoint",
          "builds the frequencies with torch.logspace(0, -1, head_dim // 2, base=base), which "
          "includes the endpoint base**-1, so the exponents step by 1/(d/2 - 1) instead of 2/d",
          angles_logspace_endpoint),
    Entry("rope_angles", "right", "python_loops_math_pow", None, angles_python_loops),
    Entry("rope_angles", "right", "exp_log_outer_float64", None, angles_exp_log),

    Entry("apply_rope", "wrong", "adjacent_pairs",
          "rotates adjacent features (2i, 2i+1) together, the GPT-J layout, instead of pairing "
          "feature i with i + head_dim/2",
          rope_adjacent_pairs),
    Entry("apply_rope", "wrong", "rotates_backwards",
          "has the sin signs swapped (y_i = x_i cos + x_{i+d/2} sin), which rotates each pair "
          "by -angle",
          rope_rotates_backwards),
    Entry("apply_rope", "wrong", "angles_in_x_dtype",
          "casts the positions and frequencies to x's dtype before multiplying, so with a "
          "bfloat16 x a large position such as 257 becomes 256 and the angles are off by "
          "whole radians",
          rope_angles_in_x_dtype),
    Entry("apply_rope", "wrong", "head_dim_from_shape1",
          "reads head_dim from x.shape[1], right for a 2-D (N, d) input only: a (B, H, N, d) "
          "input is split at the wrong feature (or rejected as odd)",
          rope_head_dim_from_shape1),
    Entry("apply_rope", "wrong", "no_odd_check",
          "does not check head_dim: an odd head_dim fails inside the broadcasting with a "
          "RuntimeError instead of raising ValueError",
          rope_no_odd_check),
    Entry("apply_rope", "wrong", "inplace_alias",
          "writes the first half in place and then reads x1, a view of the same tensor, for "
          "the second half: y_{i+d/2} uses the already rotated y_i",
          rope_inplace_alias),
    Entry("apply_rope", "right", "complex_polar", None, rope_complex),
    Entry("apply_rope", "right", "rotate_half_float64", None, rope_rotate_half),
]
