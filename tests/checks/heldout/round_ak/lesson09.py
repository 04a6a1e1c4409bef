"""Held-out catalogue, lesson 09 (rope): rope_angles, apply_rope."""

import math

import numpy as np
import torch

from entry import Entry


# ============================================================ rope_angles: wrong
def angles_missing_two(positions, head_dim, base=10000.0):
    if head_dim % 2 != 0:
        raise ValueError(f"head_dim={head_dim} is odd")
    i = torch.arange(head_dim // 2, dtype=torch.float64)
    inv_freq = base ** (-i / head_dim)
    return (positions.double()[:, None] * inv_freq[None, :]).float()


def angles_step_two_and_factor_two(positions, head_dim, base=10000.0):
    if head_dim % 2:
        raise ValueError(f"head_dim={head_dim} must be even")
    idx = torch.arange(0, head_dim, 2, dtype=torch.float64)  # 0, 2, 4, ...
    freqs = 1.0 / (base ** (2 * idx / head_dim))
    return torch.outer(positions.to(torch.float64), freqs).to(torch.float32)


def angles_no_odd_guard(positions, head_dim, base=10000.0):
    half = head_dim // 2
    expo = -2.0 * torch.arange(half, dtype=torch.float64) / head_dim
    return positions.to(torch.float64).unsqueeze(1) * torch.pow(base, expo).unsqueeze(0)


def angles_integer_floor_division(positions, head_dim, base=10000.0):
    if head_dim % 2 == 1:
        raise ValueError(f"head_dim={head_dim} is odd")
    i = torch.arange(head_dim // 2)
    theta = base ** (-2 * i // head_dim)
    return positions[:, None].to(torch.float64) * theta[None, :].to(torch.float64)


def angles_outer_transposed(positions, head_dim, base=10000.0):
    if head_dim % 2:
        raise ValueError(f"head_dim={head_dim} is odd")
    inv = base ** (-2.0 * torch.arange(head_dim // 2, dtype=torch.float64) / head_dim)
    return torch.outer(inv, positions.to(torch.float64)).float()


def angles_hardcoded_base(positions, head_dim, base=10000.0):
    if head_dim % 2:
        raise ValueError(f"head_dim={head_dim} is odd")
    i = torch.arange(head_dim // 2, dtype=torch.float64)
    inv_freq = 10000.0 ** (-2 * i / head_dim)
    return (positions.to(torch.float64)[:, None] * inv_freq).to(torch.float32)


# ============================================================ rope_angles: right
def angles_numpy_exp_log(positions, head_dim, base=10000.0):
    if head_dim % 2 != 0:
        raise ValueError(f"head_dim={head_dim} is odd: RoPE needs pairs")
    pos = positions.cpu().numpy().astype(np.float64)
    i = np.arange(head_dim // 2, dtype=np.float64)
    inv = np.exp(-np.log(base) * 2.0 * i / head_dim)
    return torch.from_numpy(pos[:, None] * inv[None, :]).to(positions.device)


def angles_python_loops(positions, head_dim, base=10000.0):
    if head_dim % 2 == 1:
        raise ValueError(f"head_dim={head_dim} is odd")
    half = head_dim // 2
    freqs = [math.pow(base, -2.0 * i / head_dim) for i in range(half)]
    rows = [[int(p) * f for f in freqs] for p in positions]
    return torch.tensor(rows, dtype=torch.float64).reshape(len(rows), half)


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


def rope_sign_swapped(x, positions, base=10000.0):
    d = x.shape[-1]
    if d % 2:
        raise ValueError(f"head_dim={d} is odd")
    half = d // 2
    ct = torch.promote_types(x.dtype, torch.float32)
    inv = base ** (-2.0 * torch.arange(half, dtype=torch.float64) / d)
    ang = (positions.to(torch.float64)[:, None] * inv).to(ct)
    cos, sin = ang.cos(), ang.sin()
    a, b = x[..., :half].to(ct), x[..., half:].to(ct)
    return torch.cat([a * cos + b * sin, -a * sin + b * cos], dim=-1).to(x.dtype)


def rope_angles_in_x_dtype(x, positions, base=10000.0):
    d = x.shape[-1]
    if d % 2:
        raise ValueError(f"head_dim={d} is odd")
    half = d // 2
    pos = positions.to(x.dtype)
    inv = base ** (-2.0 * torch.arange(half, dtype=x.dtype) / d)
    angles = pos[:, None] * inv[None, :]
    ct = torch.promote_types(x.dtype, torch.float32)
    cos, sin = angles.to(ct).cos(), angles.to(ct).sin()
    x1, x2 = x[..., :half].to(ct), x[..., half:].to(ct)
    return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1).to(x.dtype)


def rope_partner_typo(x, positions, base=10000.0):
    d = x.shape[-1]
    if d % 2:
        raise ValueError(f"head_dim={d} is odd")
    h = d // 2
    ct = torch.promote_types(x.dtype, torch.float32)
    theta = positions.double()[:, None] * torch.pow(base, -2 * torch.arange(h).double() / d)
    cos, sin = torch.cos(theta).to(ct), torch.sin(theta).to(ct)
    x1, x2 = x[..., :h].to(ct), x[..., h:].to(ct)
    y1 = x1 * cos - x2 * sin
    y2 = x1 * sin + x1 * cos
    return torch.cat((y1, y2), dim=-1).to(x.dtype)


def rope_no_odd_guard(x, positions, base=10000.0):
    d = x.shape[-1]
    half = d // 2
    ct = torch.promote_types(x.dtype, torch.float32)
    inv = base ** (-2.0 * torch.arange(half, dtype=torch.float64) / d)
    ang = (positions.double().unsqueeze(-1) * inv).to(ct)
    x1, x2 = x[..., :half].to(ct), x[..., half:].to(ct)
    y = torch.cat([x1 * ang.cos() - x2 * ang.sin(), x1 * ang.sin() + x2 * ang.cos()], -1)
    return y.to(x.dtype)


def rope_ignores_positions(x, positions, base=10000.0):
    n, d = x.shape[-2], x.shape[-1]
    if d % 2:
        raise ValueError(f"head_dim={d} is odd")
    half = d // 2
    ct = torch.promote_types(x.dtype, torch.float32)
    pos = torch.arange(n, dtype=torch.float64)  # 0 .. N-1
    inv = base ** (-2.0 * torch.arange(half, dtype=torch.float64) / d)
    ang = (pos[:, None] * inv).to(ct)
    x1, x2 = x[..., :half].to(ct), x[..., half:].to(ct)
    out = torch.cat([x1 * ang.cos() - x2 * ang.sin(), x1 * ang.sin() + x2 * ang.cos()], -1)
    return out.to(x.dtype)


# ============================================================ apply_rope: right
def rope_complex_polar(x, positions, base=10000.0):
    d = x.shape[-1]
    if d % 2 != 0:
        raise ValueError(f"head_dim={d} is odd")
    half = d // 2
    i = torch.arange(half, dtype=torch.float64)
    theta = positions.to(torch.float64)[:, None] * torch.exp(-math.log(base) * 2 * i / d)
    rot = torch.polar(torch.ones_like(theta), theta)  # (N, d/2) complex128
    z = torch.complex(x[..., :half].to(torch.float64), x[..., half:].to(torch.float64))
    zr = z * rot
    return torch.cat([zr.real, zr.imag], dim=-1).to(x.dtype)


def rope_rotate_half_full_width(x, positions, base=10000.0):
    d = x.shape[-1]
    if d % 2:
        raise ValueError(f"head_dim={d} is odd")
    wd = torch.promote_types(x.dtype, torch.float32)
    inv_freq = 1.0 / (base ** (torch.arange(0, d, 2, dtype=torch.float64) / d))
    freqs = torch.einsum("n,f->nf", positions.to(torch.float64), inv_freq)
    emb = torch.cat([freqs, freqs], dim=-1)  # (N, d)
    cos, sin = emb.cos().to(wd), emb.sin().to(wd)

    def rotate_half(t):
        first, second = t.chunk(2, dim=-1)
        return torch.cat([-second, first], dim=-1)

    xw = x.to(wd)
    return (xw * cos + rotate_half(xw) * sin).to(x.dtype)


ENTRIES = [
    Entry("rope_angles", "wrong", "exponent_missing_two", (
        "the exponent is -i / head_dim instead of -2 i / head_dim, so every frequency after "
        "the first decays only half as fast"),
        angles_missing_two),
    Entry("rope_angles", "wrong", "even_indices_and_factor_two", (
        "mixes the two textbook forms: takes the even indices arange(0, head_dim, 2) and still "
        "multiplies them by 2, so the exponent is -4 i / head_dim"),
        angles_step_two_and_factor_two),
    Entry("rope_angles", "wrong", "no_odd_head_dim_check", (
        "never checks that head_dim is even, so an odd head_dim returns angles instead of "
        "raising ValueError"),
        angles_no_odd_guard),
    Entry("rope_angles", "wrong", "integer_floor_division", (
        "-2 * i // head_dim on an integer arange is floor division, not a fraction: the "
        "exponent is -1 for every i > 0 instead of -2 i / head_dim"),
        angles_integer_floor_division),
    Entry("rope_angles", "wrong", "outer_product_transposed", (
        "torch.outer(inv_freq, positions) puts the frequencies first: the result is "
        "(head_dim // 2, N), the transpose of the (N, head_dim // 2) angles"),
        angles_outer_transposed),
    Entry("rope_angles", "wrong", "hardcoded_base", (
        "writes 10000.0 ** (...) with the literal instead of the base argument, so any other "
        "base is ignored"),
        angles_hardcoded_base),
    Entry("rope_angles", "right", "numpy_exp_log_float64", None, angles_numpy_exp_log),
    Entry("rope_angles", "right", "python_loops_math_pow", None, angles_python_loops),

    Entry("apply_rope", "wrong", "adjacent_pairs_layout", (
        "rotates adjacent features (2i, 2i + 1), the GPT-J interleaved layout, instead of "
        "pairing feature i with feature i + head_dim / 2 (rotate half)"),
        rope_adjacent_pairs),
    Entry("apply_rope", "wrong", "rotation_sign_flipped", (
        "the sin terms have the wrong signs (y_i = x_i cos + x_{i+d/2} sin, "
        "y_{i+d/2} = -x_i sin + x_{i+d/2} cos): it rotates by -angle"),
        rope_sign_swapped),
    Entry("apply_rope", "wrong", "angles_in_x_dtype", (
        "builds the positions and frequencies in x's dtype, so in float16 / bfloat16 large "
        "positions are rounded (bfloat16 turns 257 into 256) before the rotation"),
        rope_angles_in_x_dtype),
    Entry("apply_rope", "wrong", "partner_uses_x1_twice", (
        "the second half reuses x1 where x2 belongs: y_{i+d/2} = x_i sin + x_i cos instead of "
        "x_i sin + x_{i+d/2} cos"),
        rope_partner_typo),
    Entry("apply_rope", "wrong", "no_odd_head_dim_check", (
        "never checks that head_dim is even: an odd head_dim fails later in the broadcasting "
        "with a RuntimeError instead of the ValueError the contract asks for"),
        rope_no_odd_guard),
    Entry("apply_rope", "wrong", "arange_instead_of_positions", (
        "rotates row n by n (torch.arange(N)) and ignores the positions argument, which can "
        "be unsorted or start anywhere"),
        rope_ignores_positions),
    Entry("apply_rope", "right", "complex_polar_float64", None, rope_complex_polar),
    Entry("apply_rope", "right", "hf_rotate_half_full_width", None,
          rope_rotate_half_full_width),
]
