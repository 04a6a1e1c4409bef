"""Held-out catalogue, lesson 09 (rope): rope_angles, apply_rope."""

import math

import torch

from entry import Entry


# ========================================================================= rope_angles: wrong
def angles_missing_factor_two(positions, head_dim, base=10000.0):
    if head_dim % 2:
        raise ValueError(f"head_dim={head_dim} is odd")
    i = torch.arange(head_dim // 2, dtype=torch.float64)
    inv_freq = base ** (-i / head_dim)
    return (positions.double()[:, None] * inv_freq[None, :]).float()


def angles_bfloat16_positions(positions, head_dim, base=10000.0):
    if head_dim % 2 != 0:
        raise ValueError(f"head_dim={head_dim} must be even")
    half = head_dim // 2
    freqs = 1.0 / (base ** (torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim))
    pos = positions.to(torch.bfloat16).float()  # half-size positions to save memory
    return torch.outer(pos, freqs)[:, :half]


def angles_no_odd_check(positions, head_dim, base=10000.0):
    half = head_dim // 2
    expo = torch.arange(half, dtype=torch.float64) * (-2.0 / head_dim)
    return (positions.to(torch.float64).unsqueeze(1) * torch.pow(base, expo)).to(torch.float32)


def angles_precedence(positions, head_dim, base=10000.0):
    if head_dim % 2:
        raise ValueError(f"head_dim={head_dim} is odd")
    i = torch.arange(head_dim // 2, dtype=torch.float64)
    inv = base ** -2 * i / head_dim
    return (positions.double()[:, None] * inv).float()


def angles_transposed_outer(positions, head_dim, base=10000.0):
    if head_dim % 2:
        raise ValueError(f"head_dim={head_dim} is odd")
    i = torch.arange(head_dim // 2, dtype=torch.float64)
    inv = base ** (-2.0 * i / head_dim)
    ang = inv[:, None] * positions.double()[None, :]  # (d/2, N)
    return ang.reshape(positions.shape[0], head_dim // 2).float()


def angles_linspace(positions, head_dim, base=10000.0):
    if head_dim % 2:
        raise ValueError(f"head_dim={head_dim} is odd")
    half = head_dim // 2
    frac = torch.linspace(0.0, 1.0, half, dtype=torch.float64)  # meant to be 2 i / d
    inv = base ** (-frac)
    return (positions.double().unsqueeze(-1) * inv).float()


# ========================================================================= rope_angles: right
def angles_exp_log(positions, head_dim, base=10000.0):
    if head_dim % 2 == 1:
        raise ValueError(f"head_dim={head_dim} is odd: RoPE needs pairs")
    i = torch.arange(head_dim // 2, dtype=torch.float64)
    inv_freq = torch.exp(-math.log(base) * 2.0 * i / head_dim)
    return torch.outer(positions.to(torch.float64), inv_freq)


def angles_python_lists(positions, head_dim, base=10000.0):
    if head_dim % 2:
        raise ValueError(f"head_dim={head_dim} must be even")
    half = head_dim // 2
    freqs = [math.pow(base, -2.0 * i / head_dim) for i in range(half)]
    rows = [[int(p) * f for f in freqs] for p in positions]
    return torch.tensor(rows, dtype=torch.float64).reshape(len(rows), half)


# ========================================================================== apply_rope: wrong
def rope_adjacent_pairs(x, positions, base=10000.0):
    d = x.shape[-1]
    if d % 2:
        raise ValueError(f"head_dim={d} is odd")
    ct = torch.promote_types(x.dtype, torch.float32)
    i = torch.arange(d // 2, dtype=torch.float64)
    ang = (positions.double()[:, None] * base ** (-2.0 * i / d)).to(ct)
    cos, sin = ang.cos(), ang.sin()
    xe, xo = x[..., 0::2].to(ct), x[..., 1::2].to(ct)
    ye = xe * cos - xo * sin
    yo = xe * sin + xo * cos
    return torch.stack([ye, yo], dim=-1).flatten(-2).to(x.dtype)


def rope_rotates_backwards(x, positions, base=10000.0):
    d = x.shape[-1]
    if d % 2:
        raise ValueError(f"head_dim={d} is odd")
    h = d // 2
    work = torch.promote_types(x.dtype, torch.float32)
    inv = base ** (-2.0 * torch.arange(h, dtype=torch.float64) / d)
    theta = (positions.double()[:, None] * inv).to(work)
    c, s = torch.cos(theta), torch.sin(theta)
    a, b = x[..., :h].to(work), x[..., h:].to(work)
    return torch.cat([a * c + b * s, -a * s + b * c], dim=-1).to(x.dtype)


def rope_returns_float32(x, positions, base=10000.0):
    d = x.shape[-1]
    if d % 2:
        raise ValueError(f"head_dim={d} is odd")
    half = d // 2
    f32 = torch.promote_types(x.dtype, torch.float32)
    inv = base ** (-2.0 * torch.arange(half, dtype=torch.float64) / d)
    ang = (positions.double().unsqueeze(1) * inv.unsqueeze(0)).to(f32)
    x1, x2 = x[..., :half].to(f32), x[..., half:].to(f32)
    return torch.cat([x1 * ang.cos() - x2 * ang.sin(), x1 * ang.sin() + x2 * ang.cos()], -1)


def rope_angles_in_x_dtype(x, positions, base=10000.0):
    d = x.shape[-1]
    if d % 2:
        raise ValueError(f"head_dim={d} is odd")
    half = d // 2
    pos = positions.to(x.dtype)
    inv = (base ** (-2.0 * torch.arange(half, dtype=torch.float64) / d)).to(x.dtype)
    ang = (pos[:, None] * inv[None, :]).float()
    x1, x2 = x[..., :half].float(), x[..., half:].float()
    y = torch.cat([x1 * ang.cos() - x2 * ang.sin(), x1 * ang.sin() + x2 * ang.cos()], dim=-1)
    return y.to(x.dtype)


def rope_ignores_positions(x, positions, base=10000.0):
    n, d = x.shape[-2], x.shape[-1]
    if d % 2:
        raise ValueError(f"head_dim={d} is odd")
    half = d // 2
    comp = torch.promote_types(x.dtype, torch.float32)
    pos = torch.arange(n, dtype=torch.float64)
    theta = (pos[:, None] * base ** (-2.0 * torch.arange(half, dtype=torch.float64) / d)).to(comp)
    lo, hi = x[..., :half].to(comp), x[..., half:].to(comp)
    out = torch.cat([lo * theta.cos() - hi * theta.sin(), lo * theta.sin() + hi * theta.cos()], -1)
    return out.to(x.dtype)


def _rope_table(positions, head_dim, base=10000.0):
    if head_dim % 2:
        raise ValueError(f"head_dim={head_dim} is odd")
    i = torch.arange(head_dim // 2, dtype=torch.float64)
    return positions.double()[:, None] * base ** (-2.0 * i / head_dim)


def rope_base_not_passed(x, positions, base=10000.0):
    d = x.shape[-1]
    comp = torch.promote_types(x.dtype, torch.float32)
    ang = _rope_table(positions, d).to(comp)
    half = d // 2
    x1, x2 = x[..., :half].to(comp), x[..., half:].to(comp)
    y1 = x1 * torch.cos(ang) - x2 * torch.sin(ang)
    y2 = x1 * torch.sin(ang) + x2 * torch.cos(ang)
    return torch.cat((y1, y2), dim=-1).to(x.dtype)


# ========================================================================== apply_rope: right
def rope_complex_float64(x, positions, base=10000.0):
    d = x.shape[-1]
    if d % 2:
        raise ValueError(f"head_dim={d} is odd")
    half = d // 2
    i = torch.arange(half, dtype=torch.float64)
    theta = positions.to(torch.float64)[:, None] * base ** (-2.0 * i / d)
    rot = torch.polar(torch.ones_like(theta), theta)  # e^{i theta}, complex128
    z = torch.complex(x[..., :half].double(), x[..., half:].double()) * rot
    return torch.cat([z.real, z.imag], dim=-1).to(x.dtype)


def rope_rotate_half_hf(x, positions, base=10000.0):
    dim = x.shape[-1]
    if dim % 2 != 0:
        raise ValueError(f"head_dim={dim} is odd")
    work = torch.promote_types(x.dtype, torch.float32)
    inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.float64) / dim))
    freqs = torch.outer(positions.double(), inv_freq)
    emb = torch.cat((freqs, freqs), dim=-1).to(work)  # (N, d)
    xw = x.to(work)
    first, second = xw[..., : dim // 2], xw[..., dim // 2:]
    rotated = torch.cat((-second, first), dim=-1)
    return (xw * emb.cos() + rotated * emb.sin()).to(x.dtype)


ENTRIES = [
    Entry("rope_angles", "wrong", "exponent_without_2",
          "Uses base ** (-i / head_dim), dropping the factor 2 of the exponent -2 i / head_dim, "
          "so the frequencies fall off too slowly.",
          angles_missing_factor_two),
    Entry("rope_angles", "wrong", "positions_in_bfloat16",
          "Casts the positions to bfloat16 before multiplying, which rounds large positions "
          "(257 becomes 256, 100000 loses hundreds), so the angles are wrong there.",
          angles_bfloat16_positions),
    Entry("rope_angles", "wrong", "odd_head_dim_not_rejected",
          "Never checks that head_dim is even: an odd head_dim silently returns head_dim // 2 "
          "angles instead of raising ValueError.",
          angles_no_odd_check),
    Entry("rope_angles", "wrong", "power_precedence",
          "Writes base ** -2 * i / head_dim, which Python reads as (base ** -2) * i / head_dim, "
          "not base ** (-2 * i / head_dim).",
          angles_precedence),
    Entry("rope_angles", "wrong", "outer_product_transposed",
          "Builds the outer product as frequencies x positions, (head_dim/2, N), and reshapes "
          "it to (N, head_dim/2), scrambling which angle goes with which position.",
          angles_transposed_outer),
    Entry("rope_angles", "wrong", "linspace_includes_endpoint",
          "Builds the exponents with torch.linspace(0, 1, head_dim // 2), which includes 1 "
          "as the last value, so exponent i is i/(d/2 - 1) instead of 2 i / d.",
          angles_linspace),
    Entry("rope_angles", "right", "exp_log_outer_float64", None, angles_exp_log),
    Entry("rope_angles", "right", "python_lists_math_pow", None, angles_python_lists),
    Entry("apply_rope", "wrong", "adjacent_pairs",
          "Pairs adjacent features (0,1), (2,3), ... (the GPT-J interleaved layout) instead of "
          "feature i with feature i + d/2 (rotate half).",
          rope_adjacent_pairs),
    Entry("apply_rope", "wrong", "rotates_backwards",
          "The signs of sin are swapped (y_i = x_i cos + x_{i+d/2} sin, y_{i+d/2} = -x_i sin + "
          "x_{i+d/2} cos): each pair is rotated by -angle.",
          rope_rotates_backwards),
    Entry("apply_rope", "wrong", "returns_float32",
          "Does the rotation in float32 but never casts back, so float16 / bfloat16 inputs "
          "come back as float32 instead of x's dtype.",
          rope_returns_float32),
    Entry("apply_rope", "wrong", "angles_in_x_dtype",
          "Casts the positions and frequencies to x's dtype before multiplying, so for "
          "half-precision x the positions and angles are rounded (in bfloat16 257 -> 256) and "
          "the rotation is wrong.",
          rope_angles_in_x_dtype),
    Entry("apply_rope", "wrong", "uses_index_not_positions",
          "Rotates row n by the angle of position n (torch.arange(N)) and ignores the "
          "positions argument.",
          rope_ignores_positions),
    Entry("apply_rope", "wrong", "base_not_passed_on",
          "Calls its angle helper without passing base, so the default 10000 is always used "
          "and a different base is ignored.",
          rope_base_not_passed),
    Entry("apply_rope", "right", "complex_polar_float64", None, rope_complex_float64),
    Entry("apply_rope", "right", "hf_rotate_half_duplicated_freqs", None, rope_rotate_half_hf),
]
