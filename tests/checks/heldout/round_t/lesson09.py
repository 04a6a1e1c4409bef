"""Held-out catalogue, lesson 09 (rope): rope_angles, apply_rope."""

import math

import numpy as np
import torch

from entry import Entry

EX_ANG = "rope_angles"
EX_APPLY = "apply_rope"


def _need_even(head_dim):
    if head_dim % 2 != 0:
        raise ValueError(f"head_dim={head_dim} is odd: RoPE rotates features in pairs")


# ============================================================================ rope_angles
def angles_right_numpy_outer(positions, head_dim, base=10000.0):
    # numpy float64 outer product, then back to a torch tensor on positions' device
    _need_even(head_dim)
    pos = positions.detach().cpu().numpy().astype(np.float64)
    expo = np.arange(0, head_dim, 2, dtype=np.float64) / head_dim  # 2i / d
    freqs = np.power(float(base), -expo)
    return torch.from_numpy(np.outer(pos, freqs)).to(positions.device)


def angles_right_exp_log(positions, head_dim, base=10000.0):
    # base ** (-2i/d) written as exp(-(2i/d) ln base), broadcast product in float64
    if head_dim % 2:
        raise ValueError(f"head_dim={head_dim} must be even")
    i = torch.arange(head_dim // 2, dtype=torch.float64, device=positions.device)
    inv_freq = torch.exp(-(2.0 * i / head_dim) * math.log(base))
    return (positions.double().unsqueeze(-1) * inv_freq).float()


def angles_wrong_no_odd_guard(positions, head_dim, base=10000.0):
    half = head_dim // 2
    i = torch.arange(half, dtype=torch.float64)
    inv_freq = base ** (-2.0 * i / head_dim)
    return (positions.to(torch.float64)[:, None] * inv_freq[None, :]).float()


def angles_wrong_missing_two(positions, head_dim, base=10000.0):
    _need_even(head_dim)
    i = torch.arange(head_dim // 2, dtype=torch.float64)
    inv_freq = base ** (-i / head_dim)
    return (positions.to(torch.float64)[:, None] * inv_freq[None, :]).float()


def angles_wrong_precedence(positions, head_dim, base=10000.0):
    _need_even(head_dim)
    i = torch.arange(head_dim // 2, dtype=torch.float64)
    inv_freq = base ** -2 * i / head_dim
    return (positions.to(torch.float64)[:, None] * inv_freq[None, :]).float()


def angles_wrong_linspace_endpoint(positions, head_dim, base=10000.0):
    _need_even(head_dim)
    frac = torch.linspace(0.0, 1.0, head_dim // 2, dtype=torch.float64)  # meant to be 2i/d
    inv_freq = base ** (-frac)
    return (positions.to(torch.float64)[:, None] * inv_freq[None, :]).float()


def angles_wrong_outer_order(positions, head_dim, base=10000.0):
    _need_even(head_dim)
    i = torch.arange(head_dim // 2, dtype=torch.float64)
    inv_freq = base ** (-2.0 * i / head_dim)
    return torch.outer(inv_freq, positions.to(torch.float64)).float()


def angles_wrong_cast_to_positions_dtype(positions, head_dim, base=10000.0):
    _need_even(head_dim)
    i = torch.arange(head_dim // 2, dtype=torch.float64)
    inv_freq = base ** (-2.0 * i / head_dim)
    angles = positions.to(torch.float64)[:, None] * inv_freq[None, :]
    return angles.to(positions.dtype)  # "same dtype as the input"


# ============================================================================ apply_rope
def _angles64(positions, head_dim, base=10000.0):
    i = torch.arange(head_dim // 2, dtype=torch.float64, device=positions.device)
    return positions.to(torch.float64)[:, None] * (float(base) ** (-2.0 * i / head_dim))


def rope_right_complex(x, positions, base=10000.0):
    # pair (i, i + d/2) as the complex number x_i + i x_{i+d/2}, multiplied by e^{i theta}
    d = x.shape[-1]
    if d % 2:
        raise ValueError(f"head_dim={d} is odd")
    half = d // 2
    theta = _angles64(positions.to(x.device), d, base)  # (N, d/2)
    z = torch.complex(x[..., :half].double(), x[..., half:].double())
    z = z * torch.polar(torch.ones_like(theta), theta)
    return torch.cat((z.real, z.imag), dim=-1).to(x.dtype)


def rope_right_rotate_half(x, positions, base=10000.0):
    # the Hugging Face form: x * cos + rotate_half(x) * sin with cos / sin repeated twice
    d = x.shape[-1]
    if d % 2 == 1:
        raise ValueError(f"head_dim={d} is odd, RoPE needs pairs")
    theta = _angles64(positions.to(x.device), d, base)
    cos = torch.cat((theta.cos(), theta.cos()), dim=-1)  # (N, d)
    sin = torch.cat((theta.sin(), theta.sin()), dim=-1)
    xx = x.to(torch.float64)
    first, second = xx.chunk(2, dim=-1)
    rotated = torch.cat((-second, first), dim=-1)
    return (xx * cos + rotated * sin).to(x.dtype)


def _rope_parts(x, positions, base):
    d = x.shape[-1]
    _need_even(d)
    ct = torch.promote_types(x.dtype, torch.float32)
    ang = _angles64(positions.to(x.device), d, base).to(ct)
    return d // 2, ct, ang.cos(), ang.sin()


def rope_wrong_adjacent_pairs(x, positions, base=10000.0):
    half, ct, cos, sin = _rope_parts(x, positions, base)
    x1, x2 = x[..., 0::2].to(ct), x[..., 1::2].to(ct)
    y1 = x1 * cos - x2 * sin
    y2 = x1 * sin + x2 * cos
    return torch.cat([y1, y2], dim=-1).to(x.dtype)


def rope_wrong_sign(x, positions, base=10000.0):
    half, ct, cos, sin = _rope_parts(x, positions, base)
    x1, x2 = x[..., :half].to(ct), x[..., half:].to(ct)
    y1 = x1 * cos + x2 * sin
    y2 = -x1 * sin + x2 * cos
    return torch.cat([y1, y2], dim=-1).to(x.dtype)


def rope_wrong_angles_in_x_dtype(x, positions, base=10000.0):
    d = x.shape[-1]
    _need_even(d)
    half = d // 2
    ct = torch.promote_types(x.dtype, torch.float32)
    i = torch.arange(half, dtype=x.dtype, device=x.device)
    inv_freq = base ** (-2 * i / d)
    ang = (positions.to(x.dtype)[:, None] * inv_freq[None, :]).to(ct)
    cos, sin = ang.cos(), ang.sin()
    x1, x2 = x[..., :half].to(ct), x[..., half:].to(ct)
    return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1).to(x.dtype)


def rope_wrong_no_cast_back(x, positions, base=10000.0):
    half, ct, cos, sin = _rope_parts(x, positions, base)
    x1, x2 = x[..., :half].to(ct), x[..., half:].to(ct)
    return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1)


def rope_wrong_stack_interleaves(x, positions, base=10000.0):
    half, ct, cos, sin = _rope_parts(x, positions, base)
    x1, x2 = x[..., :half].to(ct), x[..., half:].to(ct)
    y = torch.stack([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1)  # (..., N, d/2, 2)
    return y.flatten(-2).to(x.dtype)


def rope_wrong_base_not_passed(x, positions, base=10000.0):
    half, ct, cos, sin = _rope_parts(x, positions, 10000.0)
    x1, x2 = x[..., :half].to(ct), x[..., half:].to(ct)
    return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1).to(x.dtype)


ENTRIES = [
    Entry(EX_ANG, "right", "numpy_outer_float64", None, angles_right_numpy_outer),
    Entry(EX_ANG, "right", "exp_of_log_base", None, angles_right_exp_log),
    Entry(EX_ANG, "wrong", "odd_head_dim_not_rejected",
          "Takes head_dim // 2 frequencies without checking that head_dim is even: an odd "
          "head_dim silently returns angles instead of raising ValueError.",
          angles_wrong_no_odd_guard),
    Entry(EX_ANG, "wrong", "exponent_missing_two",
          "Uses base ** (-i / head_dim) for pair i, dropping the factor 2 of -2i / head_dim: "
          "the frequencies fall off half as fast.",
          angles_wrong_missing_two),
    Entry(EX_ANG, "wrong", "power_precedence",
          "Writes base ** -2 * i / head_dim without parentheses: ** binds first, so it computes "
          "(base ** -2) * i / head_dim instead of base ** (-2 * i / head_dim).",
          angles_wrong_precedence),
    Entry(EX_ANG, "wrong", "linspace_includes_endpoint",
          "Builds the exponents 2i / head_dim with torch.linspace(0, 1, head_dim // 2), which "
          "includes 1 as its last point: the fractions are i / (head_dim/2 - 1), not 2i / head_dim.",
          angles_wrong_linspace_endpoint),
    Entry(EX_ANG, "wrong", "outer_product_order",
          "Calls torch.outer(inv_freq, positions), returning the transpose (head_dim // 2, N) "
          "instead of (N, head_dim // 2).",
          angles_wrong_outer_order),
    Entry(EX_ANG, "wrong", "cast_to_integer_dtype",
          "Casts the angles back to positions' dtype to 'keep the input dtype': integer "
          "positions truncate every angle to an integer.",
          angles_wrong_cast_to_positions_dtype),
    Entry(EX_APPLY, "right", "complex_polar_float64", None, rope_right_complex),
    Entry(EX_APPLY, "right", "rotate_half_float64", None, rope_right_rotate_half),
    Entry(EX_APPLY, "wrong", "adjacent_pairs",
          "Pairs adjacent features (0, 1), (2, 3), ... (the GPT-J layout) instead of feature i "
          "with feature i + d/2 (rotate half).",
          rope_wrong_adjacent_pairs),
    Entry(EX_APPLY, "wrong", "rotates_backwards",
          "Flips the signs of the sine terms (y_i = x_i cos + x_{i+d/2} sin, "
          "y_{i+d/2} = -x_i sin + x_{i+d/2} cos): every pair turns by -theta.",
          rope_wrong_sign),
    Entry(EX_APPLY, "wrong", "angles_in_half_precision",
          "Computes the positions and frequencies in x's dtype: in float16 / bfloat16 the "
          "product position * frequency is rounded (bfloat16 cannot even hold 257), so large "
          "positions get the wrong angle.",
          rope_wrong_angles_in_x_dtype),
    Entry(EX_APPLY, "wrong", "no_cast_back",
          "Rotates in float32 but returns the float32 result: float16 / bfloat16 x does not get "
          "its dtype back.",
          rope_wrong_no_cast_back),
    Entry(EX_APPLY, "wrong", "stack_interleaves_output",
          "Joins the two rotated halves with torch.stack(..., -1).flatten(-2), which interleaves "
          "y_i and y_{i+d/2} instead of putting the halves side by side (torch.cat).",
          rope_wrong_stack_interleaves),
    Entry(EX_APPLY, "wrong", "base_not_forwarded",
          "Computes the angles with the default base 10000 instead of passing the base argument "
          "on: any other base (e.g. 500000) is ignored.",
          rope_wrong_base_not_passed),
]
