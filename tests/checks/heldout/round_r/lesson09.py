"""Held-out catalogue, lesson 09 (rope): rope_angles, apply_rope."""

import math

import torch

from entry import Entry


def _check_even(head_dim):
    if head_dim % 2 != 0:
        raise ValueError(f"head_dim={head_dim} is odd")


# ============================================================ rope_angles: wrong
def ra_missing_factor_two(positions, head_dim, base=10000.0):
    _check_even(head_dim)
    i = torch.arange(head_dim // 2, dtype=torch.float64)
    inv_freq = base ** (-i / head_dim)
    return (positions.double()[:, None] * inv_freq[None, :]).float()


def ra_even_indices_doubled(positions, head_dim, base=10000.0):
    _check_even(head_dim)
    i = torch.arange(0, head_dim, 2, dtype=torch.float64)  # 0, 2, 4, ...
    inv_freq = 1.0 / base ** (2 * i / head_dim)
    return torch.outer(positions.double(), inv_freq).float()


def ra_no_odd_check(positions, head_dim, base=10000.0):
    half = head_dim // 2
    i = torch.arange(half, dtype=torch.float64)
    freqs = base ** (-2.0 * i / head_dim)
    return (positions.to(torch.float64).unsqueeze(1) * freqs).to(torch.float32)


def ra_integer_exponent(positions, head_dim, base=10000.0):
    _check_even(head_dim)
    i = torch.arange(head_dim // 2)  # int64
    exponent = -2 * i // head_dim  # floor division on ints
    inv_freq = base ** exponent.double()
    return positions.double()[:, None] * inv_freq[None, :]


def ra_transposed(positions, head_dim, base=10000.0):
    _check_even(head_dim)
    i = torch.arange(head_dim // 2, dtype=torch.float64)
    inv_freq = base ** (-2 * i / head_dim)
    return (inv_freq[:, None] * positions.double()[None, :]).float()  # (d/2, N)


def ra_float16_positions(positions, head_dim, base=10000.0):
    _check_even(head_dim)
    pos = positions.half().float()
    i = torch.arange(head_dim // 2, dtype=torch.float32)
    return pos[:, None] * base ** (-2 * i / head_dim)[None, :]


# ============================================================ rope_angles: right
def ra_python_math(positions, head_dim, base=10000.0):
    if head_dim % 2:
        raise ValueError(f"head_dim={head_dim} must be even")
    half = head_dim // 2
    rows = [[int(p) * math.pow(base, -2.0 * i / head_dim) for i in range(half)]
            for p in positions.tolist()]
    return torch.tensor(rows, dtype=torch.float64).reshape(len(rows), half).to(torch.float32)


def ra_exp_log(positions, head_dim, base=10000.0):
    if head_dim % 2 == 1:
        raise ValueError(f"odd head_dim={head_dim}")
    two_i = torch.arange(0, head_dim, 2, dtype=torch.float64)  # 2i
    inv_freq = torch.exp(-math.log(base) * two_i / head_dim)
    return torch.einsum("n,f->nf", positions.to(torch.float64), inv_freq).float()


# ============================================================ apply_rope: wrong
def _angles64(positions, head_dim, base):
    if head_dim % 2:
        raise ValueError(f"head_dim={head_dim} is odd")
    i = torch.arange(head_dim // 2, dtype=torch.float64)
    return positions.double()[:, None] * base ** (-2.0 * i / head_dim)


def ar_adjacent_pairs(x, positions, base=10000.0):
    ct = torch.promote_types(x.dtype, torch.float32)
    ang = _angles64(positions, x.shape[-1], base).to(ct)
    cos, sin = ang.cos(), ang.sin()
    xe, xo = x[..., 0::2].to(ct), x[..., 1::2].to(ct)
    ye = xe * cos - xo * sin
    yo = xe * sin + xo * cos
    return torch.stack([ye, yo], dim=-1).flatten(-2).to(x.dtype)


def ar_sign_swapped(x, positions, base=10000.0):
    ct = torch.promote_types(x.dtype, torch.float32)
    d = x.shape[-1]
    ang = _angles64(positions, d, base).to(ct)
    c, s = torch.cos(ang), torch.sin(ang)
    a, b = x[..., : d // 2].to(ct), x[..., d // 2:].to(ct)
    return torch.cat([a * c + b * s, b * c - a * s], dim=-1).to(x.dtype)


def ar_not_cast_back(x, positions, base=10000.0):
    compute = torch.promote_types(x.dtype, torch.float32)
    d = x.shape[-1]
    ang = _angles64(positions, d, base).to(compute)
    cos, sin = ang.cos(), ang.sin()
    x1, x2 = x[..., : d // 2].to(compute), x[..., d // 2:].to(compute)
    return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1)


def ar_angles_in_x_dtype(x, positions, base=10000.0):
    d = x.shape[-1]
    if d % 2:
        raise ValueError(f"head_dim={d} is odd")
    i = torch.arange(d // 2, dtype=x.dtype)
    inv_freq = (base ** (-2 * i.float() / d)).to(x.dtype)
    ang = positions.to(x.dtype)[:, None] * inv_freq[None, :]  # in x's dtype
    compute = torch.promote_types(x.dtype, torch.float32)
    cos, sin = ang.to(compute).cos(), ang.to(compute).sin()
    x1, x2 = x[..., : d // 2].to(compute), x[..., d // 2:].to(compute)
    return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1).to(x.dtype)


def ar_repeat_interleave(x, positions, base=10000.0):
    d = x.shape[-1]
    ct = torch.promote_types(x.dtype, torch.float32)
    ang = _angles64(positions, d, base)
    emb = torch.repeat_interleave(ang, 2, dim=-1).to(ct)  # (N, d)
    xc = x.to(ct)
    rotated = torch.cat([-xc[..., d // 2:], xc[..., : d // 2]], dim=-1)  # rotate_half
    return (xc * emb.cos() + rotated * emb.sin()).to(x.dtype)


def ar_assumes_arange(x, positions, base=10000.0):
    n, d = x.shape[-2], x.shape[-1]
    ct = torch.promote_types(x.dtype, torch.float32)
    ang = _angles64(torch.arange(n), d, base).to(ct)
    cos, sin = ang.cos(), ang.sin()
    x1, x2 = x[..., : d // 2].to(ct), x[..., d // 2:].to(ct)
    return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1).to(x.dtype)


# ============================================================ apply_rope: right
def ar_complex(x, positions, base=10000.0):
    d = x.shape[-1]
    if d % 2:
        raise ValueError(f"head_dim={d} is odd: features rotate in pairs")
    half = d // 2
    ang = _angles64(positions, d, base)  # (N, d/2) float64
    rot = torch.polar(torch.ones_like(ang), ang)  # e^{i angle}
    z = torch.complex(x[..., :half].double(), x[..., half:].double()) * rot
    return torch.cat([z.real, z.imag], dim=-1).to(x.dtype)


def ar_rotation_matrices(x, positions, base=10000.0):
    d = x.shape[-1]
    if d % 2 == 1:
        raise ValueError(f"head_dim={d} is odd")
    half = d // 2
    theta = _angles64(positions, d, base)
    c, s = torch.cos(theta), torch.sin(theta)
    rot = torch.stack([torch.stack([c, -s], -1), torch.stack([s, c], -1)], -2)  # (N, d/2, 2, 2)
    pairs = torch.stack([x[..., :half], x[..., half:]], dim=-1).double()  # (..., N, d/2, 2)
    turned = torch.einsum("nfij,...nfj->...nfi", rot, pairs)
    return torch.cat([turned[..., 0], turned[..., 1]], dim=-1).to(x.dtype)


E = Entry
ENTRIES = [
    E("rope_angles", "wrong", "exponent_missing_factor_two",
      "uses base ** (-i / head_dim), dropping the 2 of -2i/d, so the frequencies fall off "
      "half as fast as they should", ra_missing_factor_two),
    E("rope_angles", "wrong", "even_indices_times_two",
      "takes i from arange(0, head_dim, 2) (already 2i, as in the Hugging Face code) and then "
      "multiplies by 2 again, so the exponent is -4i/d", ra_even_indices_doubled),
    E("rope_angles", "wrong", "no_odd_head_dim_check",
      "never checks head_dim: an odd head_dim is silently floored to head_dim // 2 pairs "
      "instead of raising ValueError", ra_no_odd_check),
    E("rope_angles", "wrong", "integer_floor_division_exponent",
      "writes -2 * i // head_dim on integer tensors, a floor division, so the exponent is "
      "0 or -1 instead of the fraction -2i/d", ra_integer_exponent),
    E("rope_angles", "wrong", "outer_product_transposed",
      "builds the outer product as frequencies x positions and returns (head_dim // 2, N) "
      "instead of (N, head_dim // 2)", ra_transposed),
    E("rope_angles", "wrong", "positions_cast_to_float16",
      "casts the integer positions to float16, which rounds large positions and turns those "
      "above 65504 into inf", ra_float16_positions),
    E("rope_angles", "right", "python_math_pow", None, ra_python_math),
    E("rope_angles", "right", "exp_of_log_base_einsum", None, ra_exp_log),

    E("apply_rope", "wrong", "adjacent_pairs",
      "rotates adjacent features (0, 1), (2, 3), ... (the GPT-J / Meta layout) instead of "
      "pairing feature i with i + d/2 (rotate half)", ar_adjacent_pairs),
    E("apply_rope", "wrong", "rotation_sign_swapped",
      "puts the minus sign on the wrong term (y_i = x_i cos + x_{i+d/2} sin, y_{i+d/2} = "
      "x_{i+d/2} cos - x_i sin): it rotates by -angle", ar_sign_swapped),
    E("apply_rope", "wrong", "result_not_cast_back",
      "computes in float32 but forgets to cast back, so float16/bfloat16 inputs come back as "
      "float32 instead of x's dtype", ar_not_cast_back),
    E("apply_rope", "wrong", "angles_in_half_precision",
      "builds the angles in x's dtype, so for float16/bfloat16 the positions and angles round "
      "(position 257 becomes 256 in bfloat16) and large positions are rotated wrongly",
      ar_angles_in_x_dtype),
    E("apply_rope", "wrong", "angles_repeat_interleaved",
      "duplicates the angles with repeat_interleave (a0 a0 a1 a1 ...) where rotate-half needs "
      "them concatenated (a0 a1 ... a0 a1 ...), so most features get another pair's angle",
      ar_repeat_interleave),
    E("apply_rope", "wrong", "positions_assumed_arange",
      "ignores the positions argument and rotates row n by angle(n), assuming positions are "
      "0 .. N-1", ar_assumes_arange),
    E("apply_rope", "right", "complex_multiplication", None, ar_complex),
    E("apply_rope", "right", "per_pair_rotation_matrices_einsum", None, ar_rotation_matrices),
]
