"""Lesson 09 (RoPE, torch): rope_angles, apply_rope."""

import math

import torch

from entry import Entry


def _odd(head_dim):
    if head_dim % 2:
        raise ValueError(f"head_dim={head_dim} must be even")


# ============================================================================ rope_angles
def ra_w_missing_two(positions, head_dim, base=10000.0):
    _odd(head_dim)
    i = torch.arange(head_dim // 2, dtype=torch.float64)
    return (positions.double()[:, None] * base ** (-i / head_dim)).float()


def ra_w_full_width(positions, head_dim, base=10000.0):
    _odd(head_dim)
    i = torch.arange(head_dim, dtype=torch.float64)
    return (positions.double()[:, None] * base ** (-2 * i / head_dim)).float()


def ra_w_no_odd_check(positions, head_dim, base=10000.0):
    i = torch.arange(head_dim // 2, dtype=torch.float64)
    return (positions.double()[:, None] * base ** (-2 * i / head_dim)).float()


def ra_w_positive_exponent(positions, head_dim, base=10000.0):
    _odd(head_dim)
    i = torch.arange(head_dim // 2, dtype=torch.float64)
    return (positions.double()[:, None] * base ** (2 * i / head_dim)).float()


def ra_w_linspace(positions, head_dim, base=10000.0):
    _odd(head_dim)
    expo = torch.linspace(0, 1, head_dim // 2, dtype=torch.float64)  # ends at 1, not 1 - 2/d
    return (positions.double()[:, None] * base ** (-expo)).float()


def ra_w_transposed(positions, head_dim, base=10000.0):
    _odd(head_dim)
    i = torch.arange(head_dim // 2, dtype=torch.float64)
    return (base ** (-2 * i / head_dim))[:, None] * positions.double()[None, :]


def ra_w_assert(positions, head_dim, base=10000.0):
    assert head_dim % 2 == 0, "head_dim must be even"
    i = torch.arange(head_dim // 2, dtype=torch.float64)
    return (positions.double()[:, None] * base ** (-2 * i / head_dim)).float()


def ra_w_float16(positions, head_dim, base=10000.0):
    _odd(head_dim)
    inv = 1.0 / base ** (torch.arange(0, head_dim, 2).float() / head_dim)
    return positions.half()[:, None] * inv.half()[None, :]  # half precision "to save memory"


def ra_r_arange_step2(positions, head_dim, base=10000.0):
    if head_dim % 2 != 0:
        raise ValueError(f"head_dim={head_dim} is odd")
    inv_freq = 1.0 / (base ** (torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim))
    return torch.outer(positions.float(), inv_freq)


def ra_r_exp_log(positions, head_dim, base=10000.0):
    if head_dim % 2:
        raise ValueError(f"odd head_dim={head_dim}")
    i = torch.arange(head_dim // 2, dtype=torch.float64)
    return positions.to(torch.float64)[:, None] * torch.exp(-math.log(base) * 2 * i / head_dim)


def ra_r_loop(positions, head_dim, base=10000.0):
    if head_dim % 2:
        raise ValueError(f"head_dim={head_dim} is odd")
    out = torch.zeros(len(positions), head_dim // 2, dtype=torch.float64)
    for n, p in enumerate(positions.tolist()):
        for i in range(head_dim // 2):
            out[n, i] = p * base ** (-2 * i / head_dim)
    return out


# ============================================================================ apply_rope
def _angles64(positions, d, base):
    i = torch.arange(d // 2, dtype=torch.float64)
    return positions.double()[:, None] * base ** (-2 * i / d)


def _rope(x, positions, base, *, layout="half", sign=1, angle_dtype=None, cast=True,
          swap_cs=False, use_positions=True):
    d = x.shape[-1]
    _odd(d)
    c = torch.promote_types(x.dtype, torch.float32)
    pos = positions if use_positions else torch.arange(x.shape[-2])
    ang = _angles64(pos, d, base)
    if angle_dtype is not None:
        ang = (pos.to(angle_dtype)[:, None] * (base ** (-2 * torch.arange(d // 2) / d)).to(
            angle_dtype)).to(c)
    else:
        ang = ang.to(c)
    cos, sin = torch.cos(ang), torch.sin(ang)
    if swap_cs:
        cos, sin = sin, cos
    xc = x.to(c)
    if layout == "half":
        x1, x2 = xc[..., :d // 2], xc[..., d // 2:]
    else:
        x1, x2 = xc[..., 0::2], xc[..., 1::2]
    y1 = x1 * cos - sign * x2 * sin
    y2 = sign * x1 * sin + x2 * cos
    if layout == "half":
        y = torch.cat([y1, y2], -1)
    else:
        y = torch.stack([y1, y2], -1).flatten(-2)
    return y.to(x.dtype) if cast else y


def ar_w_adjacent_pairs(x, positions, base=10000.0):
    return _rope(x, positions, base, layout="adjacent")


def ar_w_rotates_backwards(x, positions, base=10000.0):
    return _rope(x, positions, base, sign=-1)


def ar_w_angles_in_x_dtype(x, positions, base=10000.0):
    return _rope(x, positions, base, angle_dtype=x.dtype)


def ar_w_compute_dtype(x, positions, base=10000.0):
    return _rope(x, positions, base, cast=False)


def ar_w_cos_sin_swapped(x, positions, base=10000.0):
    return _rope(x, positions, base, swap_cs=True)


def ar_w_arange_positions(x, positions, base=10000.0):
    return _rope(x, positions, base, use_positions=False)


def ar_w_half_dim_angles(x, positions, base=10000.0):
    """Builds the angles with head_dim // 2 as the width in the exponent."""
    d = x.shape[-1]
    _odd(d)
    c = torch.promote_types(x.dtype, torch.float32)
    i = torch.arange(d // 2, dtype=torch.float64)
    ang = (positions.double()[:, None] * base ** (-2 * i / (d // 2))).to(c)
    x1, x2 = x[..., :d // 2].to(c), x[..., d // 2:].to(c)
    return torch.cat([x1 * ang.cos() - x2 * ang.sin(), x1 * ang.sin() + x2 * ang.cos()],
                     -1).to(x.dtype)


def ar_r_complex(x, positions, base=10000.0):
    d = x.shape[-1]
    if d % 2:
        raise ValueError(f"head_dim={d} is odd")
    ang = _angles64(positions, d, base)
    z = torch.complex(x[..., :d // 2].double(), x[..., d // 2:].double())
    z = z * torch.polar(torch.ones_like(ang), ang)
    return torch.cat([z.real, z.imag], -1).to(x.dtype)


def ar_r_rotate_half(x, positions, base=10000.0):
    d = x.shape[-1]
    if d % 2:
        raise ValueError(f"head_dim={d} is odd")
    c = torch.promote_types(x.dtype, torch.float32)
    inv_freq = 1.0 / (base ** (torch.arange(0, d, 2, dtype=torch.float64) / d))
    freqs = torch.outer(positions.double(), inv_freq)
    emb = torch.cat([freqs, freqs], -1).to(c)
    xc = x.to(c)
    rotated = torch.cat([-xc[..., d // 2:], xc[..., :d // 2]], -1)
    return (xc * emb.cos() + rotated * emb.sin()).to(x.dtype)


def ar_r_rotation_matrices(x, positions, base=10000.0):
    d = x.shape[-1]
    if d % 2:
        raise ValueError(f"head_dim={d} is odd")
    ang = _angles64(positions, d, base)
    cos, sin = ang.cos(), ang.sin()
    rot = torch.stack([torch.stack([cos, -sin], -1), torch.stack([sin, cos], -1)], -2)
    pairs = torch.stack([x[..., :d // 2], x[..., d // 2:]], -1).double()  # (..., N, d/2, 2)
    y = torch.einsum("nirc,...nic->...nir", rot, pairs)
    return torch.cat([y[..., 0], y[..., 1]], -1).to(x.dtype)


E = Entry
ENTRIES = [
    E("rope_angles", "wrong", "exponent_without_two",
      "Uses base ** (-i / head_dim), dropping the factor 2 in the exponent.", ra_w_missing_two),
    E("rope_angles", "wrong", "head_dim_columns",
      "Returns head_dim angle columns instead of head_dim // 2.", ra_w_full_width),
    E("rope_angles", "wrong", "no_odd_check",
      "Never checks head_dim, so an odd head_dim silently drops a feature instead of raising.",
      ra_w_no_odd_check),
    E("rope_angles", "wrong", "positive_exponent",
      "Uses base ** (+2i/d), so frequencies grow instead of shrink.", ra_w_positive_exponent),
    E("rope_angles", "wrong", "linspace_to_one",
      "Builds the exponents with linspace(0, 1, d/2), ending at 1 instead of 1 - 2/d.",
      ra_w_linspace),
    E("rope_angles", "wrong", "transposed",
      "Returns (head_dim // 2, N) instead of (N, head_dim // 2).", ra_w_transposed),
    E("rope_angles", "wrong", "assert_not_valueerror",
      "Checks head_dim with assert, raising AssertionError instead of ValueError.", ra_w_assert),
    E("rope_angles", "wrong", "half_precision_angles",
      "Computes the angles in float16, which overflows or rounds large positions.",
      ra_w_float16),
    E("rope_angles", "right", "arange_step_two_outer", None, ra_r_arange_step2),
    E("rope_angles", "right", "exp_log_float64", None, ra_r_exp_log),
    E("rope_angles", "right", "python_loops", None, ra_r_loop),
    E("apply_rope", "wrong", "adjacent_pairs",
      "Pairs adjacent features (2i, 2i+1) as in GPT-J instead of i and i + d/2.",
      ar_w_adjacent_pairs),
    E("apply_rope", "wrong", "rotates_backwards",
      "Flips the sign of the sine terms, rotating by -angle.", ar_w_rotates_backwards),
    E("apply_rope", "wrong", "angles_in_input_dtype",
      "Computes the angles in x's dtype, so float16/bfloat16 inputs get badly rounded angles "
      "at large positions.", ar_w_angles_in_x_dtype),
    E("apply_rope", "wrong", "left_in_float32",
      "Returns the float32 result without casting back to x's dtype.", ar_w_compute_dtype),
    E("apply_rope", "wrong", "cos_sin_swapped",
      "Uses sin where cos belongs and vice versa.", ar_w_cos_sin_swapped),
    E("apply_rope", "wrong", "ignores_positions",
      "Uses arange(N) as positions instead of the positions argument.", ar_w_arange_positions),
    E("apply_rope", "wrong", "exponent_over_half_width",
      "Divides by head_dim // 2 instead of head_dim in the frequency exponent.",
      ar_w_half_dim_angles),
    E("apply_rope", "right", "complex_polar", None, ar_r_complex),
    E("apply_rope", "right", "rotate_half_hf_style", None, ar_r_rotate_half),
    E("apply_rope", "right", "rotation_matrices_einsum", None, ar_r_rotation_matrices),
]
