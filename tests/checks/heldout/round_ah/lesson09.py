"""Held-out learners' answers, lesson 09 (rope): rope_angles, apply_rope."""

import math

import numpy as np
import torch

from entry import Entry


# ============================================================================ rope_angles
def angles_no_odd_check(positions, head_dim, base=10000.0):
    i = torch.arange(head_dim // 2, dtype=torch.float64)
    inv = base ** (-2.0 * i / head_dim)
    return (positions.double()[:, None] * inv[None, :]).float()


def angles_exponent_missing_two(positions, head_dim, base=10000.0):
    if head_dim % 2 != 0:
        raise ValueError(f"head_dim={head_dim} is odd")
    idx = torch.arange(head_dim // 2, dtype=torch.float64)
    freqs = torch.pow(torch.tensor(float(base), dtype=torch.float64), -idx / head_dim)
    return positions.to(torch.float64).unsqueeze(1) * freqs.unsqueeze(0)


def angles_outer_transposed(positions, head_dim, base=10000.0):
    if head_dim % 2:
        raise ValueError(f"head_dim={head_dim} must be even")
    inv_freq = 1.0 / (base ** (torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim))
    return torch.outer(inv_freq, positions.to(torch.float64))


def angles_floor_division(positions, head_dim, base=10000.0):
    if head_dim % 2 == 1:
        raise ValueError(f"head_dim={head_dim} is odd, RoPE needs pairs")
    i = torch.arange(head_dim // 2)
    expo = -(2 * i // head_dim)
    inv = float(base) ** expo.to(torch.float64)
    return positions.to(torch.float64)[:, None] * inv


def angles_precedence(positions, head_dim, base=10000.0):
    if head_dim % 2:
        raise ValueError(f"odd head_dim={head_dim}")
    half = head_dim // 2
    rows = []
    for p in positions.tolist():
        rows.append([p * base ** -2 * i / head_dim for i in range(half)])
    return torch.tensor(rows, dtype=torch.float32).reshape(len(rows), half)


def angles_half_positions(positions, head_dim, base=10000.0):
    if head_dim % 2:
        raise ValueError(f"head_dim={head_dim} is odd")
    pos = positions.half()
    i = torch.arange(head_dim // 2, dtype=torch.float32)
    inv = (base ** (-2 * i / head_dim)).half()
    return (pos[:, None] * inv[None, :]).float()


def angles_right_numpy(positions, head_dim, base=10000.0):
    if head_dim % 2 != 0:
        raise ValueError(f"head_dim={head_dim} is odd: the last feature has no partner")
    pos = np.asarray(positions.cpu().tolist(), dtype=np.float64)
    inv = np.power(float(base), -np.arange(0, head_dim, 2, dtype=np.float64) / head_dim)
    return torch.from_numpy(np.multiply.outer(pos, inv)).to(positions.device)


def angles_right_exp_log(positions, head_dim, base=10000.0):
    if head_dim & 1:
        raise ValueError(f"head_dim={head_dim} is odd")
    i = torch.arange(head_dim // 2, dtype=torch.float64, device=positions.device)
    inv = torch.exp(-math.log(base) * (2.0 * i) / head_dim)
    return torch.einsum("n,i->ni", positions.to(torch.float64), inv)


# ============================================================================ apply_rope
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


def rope_rotates_backwards(x, positions, base=10000.0):
    d = x.shape[-1]
    if d % 2:
        raise ValueError(f"head_dim={d} is odd")
    ct = torch.promote_types(x.dtype, torch.float32)
    half = d // 2
    freq = base ** (-2.0 * torch.arange(half, dtype=torch.float64) / d)
    theta = (positions.to(torch.float64)[:, None] * freq).to(ct)
    cos, sin = torch.cos(theta), torch.sin(theta)
    a, b = x[..., :half].to(ct), x[..., half:].to(ct)
    return torch.cat([a * cos + b * sin, -a * sin + b * cos], dim=-1).to(x.dtype)


def rope_angles_in_x_dtype(x, positions, base=10000.0):
    d = x.shape[-1]
    if d % 2:
        raise ValueError(f"head_dim={d} is odd")
    half = d // 2
    inv = base ** (-2 * torch.arange(half, dtype=x.dtype) / d)
    theta = positions.to(x.dtype)[:, None] * inv[None, :]
    ct = torch.promote_types(x.dtype, torch.float32)
    cos, sin = theta.to(ct).cos(), theta.to(ct).sin()
    x1, x2 = x[..., :half].to(ct), x[..., half:].to(ct)
    out = torch.cat((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1)
    return out.to(x.dtype)


def rope_ignores_positions(x, positions, base=10000.0):
    n, d = x.shape[-2], x.shape[-1]
    if d % 2:
        raise ValueError(f"head_dim={d} is odd")
    ct = torch.promote_types(x.dtype, torch.float32)
    pos = torch.arange(n, dtype=torch.float64)
    inv = base ** (-2 * torch.arange(d // 2, dtype=torch.float64) / d)
    ang = (pos[:, None] * inv).to(ct)
    x1, x2 = x[..., : d // 2].to(ct), x[..., d // 2:].to(ct)
    return torch.cat([x1 * ang.cos() - x2 * ang.sin(), x1 * ang.sin() + x2 * ang.cos()],
                     -1).to(x.dtype)


def rope_output_interleaved(x, positions, base=10000.0):
    head_dim = x.shape[-1]
    if head_dim % 2:
        raise ValueError(f"head_dim={head_dim} is odd")
    half = head_dim // 2
    ct = torch.promote_types(x.dtype, torch.float32)
    k = torch.arange(half, dtype=torch.float64)
    angle = (positions.double().unsqueeze(-1) * torch.pow(float(base), -2 * k / head_dim)).to(ct)
    lo, hi = x[..., :half].to(ct), x[..., half:].to(ct)
    new_lo = lo * angle.cos() - hi * angle.sin()
    new_hi = lo * angle.sin() + hi * angle.cos()
    return torch.stack((new_lo, new_hi), dim=-1).reshape(x.shape).to(x.dtype)


def rope_parity_of_wrong_axis(x, positions, base=10000.0):
    n, d = x.shape[-2:]
    if x.shape[-2] % 2:
        raise ValueError(f"head_dim={x.shape[-2]} is odd")
    ct = torch.promote_types(x.dtype, torch.float32)
    h = d // 2
    inv = base ** (-2 * torch.arange(h, dtype=torch.float64) / d)
    ang = (positions.double()[:, None] * inv[None]).to(ct)
    c, s = torch.cos(ang), torch.sin(ang)
    u, w = x[..., :h].to(ct), x[..., h:].to(ct)
    return torch.cat([u * c - w * s, u * s + w * c], dim=-1).to(x.dtype)


def rope_right_complex(x, positions, base=10000.0):
    d = x.shape[-1]
    if d % 2 == 1:
        raise ValueError(f"head_dim={d} is odd")
    h = d // 2
    i = torch.arange(h, dtype=torch.float64)
    theta = positions.to(torch.float64)[:, None] * torch.exp(-(2 * i / d) * math.log(base))
    rot = torch.polar(torch.ones_like(theta), theta)  # e^{i theta}, complex128
    z = torch.complex(x[..., :h].to(torch.float64), x[..., h:].to(torch.float64))
    zr = z * rot
    return torch.cat([zr.real, zr.imag], dim=-1).to(x.dtype)


def rope_right_rotate_half(x, positions, base=10000.0):
    dim = x.shape[-1]
    if dim % 2:
        raise ValueError(f"head_dim={dim} is odd")
    inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.float64) / dim))
    freqs = torch.outer(positions.to(torch.float64), inv_freq)  # (N, d/2)
    emb = torch.cat((freqs, freqs), dim=-1)  # (N, d), as in Hugging Face Llama
    cos, sin = emb.cos(), emb.sin()

    def rotate_half(t):
        t1, t2 = t[..., : t.shape[-1] // 2], t[..., t.shape[-1] // 2:]
        return torch.cat((-t2, t1), dim=-1)

    x64 = x.to(torch.float64)
    return (x64 * cos + rotate_half(x64) * sin).to(x.dtype)


ENTRIES = [
    Entry("rope_angles", "wrong", "no_odd_head_dim_check",
          "never checks head_dim: an odd head_dim silently returns head_dim // 2 angles "
          "instead of raising ValueError",
          angles_no_odd_check),
    Entry("rope_angles", "wrong", "exponent_without_factor_two",
          "uses base ** (-i / head_dim), dropping the 2 of -2i/head_dim, so the frequencies "
          "fall off half as fast",
          angles_exponent_missing_two),
    Entry("rope_angles", "wrong", "outer_product_transposed",
          "takes torch.outer(inv_freq, positions): a (head_dim // 2, N) table, frequencies on "
          "the rows, instead of (N, head_dim // 2)",
          angles_outer_transposed),
    Entry("rope_angles", "wrong", "floor_division_in_exponent",
          "writes the exponent as 2 * i // head_dim with integer floor division, which is 0 "
          "for every i, so every frequency is 1 and each angle is just the position",
          angles_floor_division),
    Entry("rope_angles", "wrong", "exponent_precedence",
          "writes p * base ** -2 * i / head_dim, which Python reads as p * (base ** -2) * i / "
          "head_dim: the exponent needs parentheses, base ** (-2 * i / head_dim)",
          angles_precedence),
    Entry("rope_angles", "wrong", "positions_in_float16",
          "converts positions and frequencies to float16 before multiplying, so the "
          "frequencies and products are rounded to 11 bits (and positions past 65504 become "
          "inf): the angles are off, more so the larger the position",
          angles_half_positions),
    Entry("rope_angles", "right", "numpy_outer_float64", None, angles_right_numpy),
    Entry("rope_angles", "right", "exp_log_einsum", None, angles_right_exp_log),

    Entry("apply_rope", "wrong", "adjacent_pairs",
          "rotates adjacent features (2i, 2i+1) together, the original RoFormer layout, "
          "instead of the rotate-half pairs (i, i + d/2) the contract fixes",
          rope_adjacent_pairs),
    Entry("apply_rope", "wrong", "rotates_by_minus_angle",
          "swaps the signs of the sin terms (y_i = x_i cos + x_{i+d/2} sin, y_{i+d/2} = "
          "-x_i sin + x_{i+d/2} cos): the pair is rotated by -angle",
          rope_rotates_backwards),
    Entry("apply_rope", "wrong", "angles_in_half_precision",
          "computes the frequencies and angles in x's dtype, so float16 / bfloat16 inputs get "
          "positions and angles rounded (bfloat16 turns 257 into 256) and the rotation is off",
          rope_angles_in_x_dtype),
    Entry("apply_rope", "wrong", "ignores_positions_argument",
          "rotates row n by the angles of position n (torch.arange(N)) and ignores the "
          "positions it is given, wrong as soon as positions are not 0..N-1",
          rope_ignores_positions),
    Entry("apply_rope", "wrong", "writes_output_interleaved",
          "reads the pairs (i, i + d/2) correctly but writes them back with stack(..., -1) and "
          "a reshape, which interleaves y_i and y_{i+d/2} instead of concatenating the halves",
          rope_output_interleaved),
    Entry("apply_rope", "wrong", "checks_parity_of_n",
          "tests x.shape[-2] (N) for oddness instead of x.shape[-1] (head_dim): raises on a "
          "valid odd sequence length and misses an odd head_dim",
          rope_parity_of_wrong_axis),
    Entry("apply_rope", "right", "complex_multiplication", None, rope_right_complex),
    Entry("apply_rope", "right", "hf_rotate_half_float64", None, rope_right_rotate_half),
]
