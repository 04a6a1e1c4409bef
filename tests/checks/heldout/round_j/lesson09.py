"""Lesson 09 (torch): rope_angles, apply_rope; round j entries."""

import math

import numpy as np
import torch

from entry import Entry

# ------------------------------------------------------------------------------- rope_angles


def _odd_guard(head_dim):
    if head_dim % 2:
        raise ValueError(f"head_dim={head_dim} must be even for RoPE")


def ra_missing_two(positions, head_dim, base=10000.0):
    _odd_guard(head_dim)
    i = torch.arange(head_dim // 2, dtype=torch.float64)
    inv = base ** (-i / head_dim)
    return (positions.double()[:, None] * inv[None, :]).float()


def ra_integer_exponent(positions, head_dim, base=10000.0):
    _odd_guard(head_dim)
    i = torch.arange(head_dim // 2)
    inv = 1.0 / base ** (2 * i // head_dim)
    return (positions[:, None] * inv[None, :]).float()


def ra_full_width(positions, head_dim, base=10000.0):
    _odd_guard(head_dim)
    inv = 1.0 / base ** (torch.arange(0, head_dim, dtype=torch.float64) / head_dim)
    return torch.outer(positions.double(), inv).float()


def ra_no_odd_check(positions, head_dim, base=10000.0):
    inv = 1.0 / base ** (torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim)
    return torch.outer(positions.double(), inv).float()


def ra_outer_transposed(positions, head_dim, base=10000.0):
    _odd_guard(head_dim)
    inv = 1.0 / base ** (torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim)
    return (inv[:, None] * positions.double()[None, :]).float()


def ra_half_positions(positions, head_dim, base=10000.0):
    _odd_guard(head_dim)
    inv = base ** (-2 * torch.arange(head_dim // 2, dtype=torch.float32) / head_dim)
    return positions.half()[:, None].float() * inv[None, :]


def ra_numpy_outer(positions, head_dim, base=10000.0):
    if head_dim % 2 != 0:
        raise ValueError(f"head_dim={head_dim} is odd; RoPE pairs features")
    pos = positions.cpu().numpy().astype(np.float64)
    freq = float(base) ** (-2.0 * np.arange(head_dim // 2) / head_dim)
    return torch.from_numpy(np.outer(pos, freq)).to(torch.float32)


def ra_exp_log(positions, head_dim, base=10000.0):
    if head_dim % 2:
        raise ValueError(f"head_dim={head_dim} is not even")
    i = torch.arange(head_dim // 2, dtype=torch.float64)
    freq = torch.exp(-(2.0 * i / head_dim) * math.log(base))
    return (positions.to(torch.float64).unsqueeze(-1) * freq).to(torch.float32)


# -------------------------------------------------------------------------------- apply_rope


def _angles64(positions, d, base):
    i = torch.arange(d // 2, dtype=torch.float64)
    return positions.double()[:, None] * base ** (-2.0 * i / d)


def rope_adjacent_pairs(x, positions, base=10000.0):
    d = x.shape[-1]
    _odd_guard(d)
    ang = _angles64(positions, d, base)
    c = torch.promote_types(x.dtype, torch.float32)
    cos, sin = ang.cos().to(c), ang.sin().to(c)
    x1, x2 = x[..., 0::2].to(c), x[..., 1::2].to(c)
    y = torch.stack([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1)
    return y.flatten(-2).to(x.dtype)


def rope_rotates_backwards(x, positions, base=10000.0):
    d = x.shape[-1]
    _odd_guard(d)
    ang = _angles64(positions, d, base)
    c = torch.promote_types(x.dtype, torch.float32)
    cos, sin = ang.cos().to(c), ang.sin().to(c)
    x1, x2 = x[..., : d // 2].to(c), x[..., d // 2:].to(c)
    return torch.cat([x1 * cos + x2 * sin, -x1 * sin + x2 * cos], -1).to(x.dtype)


def rope_returns_float32(x, positions, base=10000.0):
    d = x.shape[-1]
    _odd_guard(d)
    ang = _angles64(positions, d, base)
    cos, sin = ang.cos().float(), ang.sin().float()
    xf = x.float() if x.dtype != torch.float64 else x
    x1, x2 = xf[..., : d // 2], xf[..., d // 2:]
    return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], -1)


def rope_angles_in_x_dtype(x, positions, base=10000.0):
    d = x.shape[-1]
    _odd_guard(d)
    i = torch.arange(d // 2, dtype=x.dtype)
    ang = positions.to(x.dtype)[:, None] * (base ** (-2.0 * i / d)).to(x.dtype)
    cos, sin = ang.cos(), ang.sin()
    x1, x2 = x[..., : d // 2], x[..., d // 2:]
    return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], -1)


def rope_half_from_sequence_axis(x, positions, base=10000.0):
    d = x.shape[-1]
    _odd_guard(d)
    half = x.shape[-2] // 2
    ang = _angles64(positions, d, base)
    c = torch.promote_types(x.dtype, torch.float32)
    cos, sin = ang.cos().to(c), ang.sin().to(c)
    x1, x2 = x[..., :half].to(c), x[..., half:].to(c)
    return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], -1).to(x.dtype)


def rope_base_hardcoded(x, positions, base=10000.0):
    d = x.shape[-1]
    _odd_guard(d)
    ang = _angles64(positions, d, 10000.0)
    c = torch.promote_types(x.dtype, torch.float32)
    cos, sin = ang.cos().to(c), ang.sin().to(c)
    x1, x2 = x[..., : d // 2].to(c), x[..., d // 2:].to(c)
    return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], -1).to(x.dtype)


def rope_complex(x, positions, base=10000.0):
    d = x.shape[-1]
    if d % 2:
        raise ValueError(f"head_dim={d} (x.shape[-1]) is odd; RoPE needs pairs")
    h = d // 2
    z = torch.complex(x[..., :h].double(), x[..., h:].double())
    ang = positions.double()[:, None] * torch.pow(torch.tensor(float(base), dtype=torch.float64),
                                                  -2.0 * torch.arange(h, dtype=torch.float64) / d)
    rot = torch.polar(torch.ones_like(ang), ang)
    w = z * rot
    return torch.cat([w.real, w.imag], dim=-1).to(x.dtype)


def rope_rotation_matrices(x, positions, base=10000.0):
    d = x.shape[-1]
    if d % 2 != 0:
        raise ValueError(f"head_dim={d} must be even (x.shape={tuple(x.shape)})")
    h = d // 2
    ang = _angles64(positions, d, base)  # (N, h)
    c, s = torch.cos(ang), torch.sin(ang)
    rot = torch.stack([torch.stack([c, -s], -1), torch.stack([s, c], -1)], -2)  # (N, h, 2, 2)
    pairs = torch.stack([x[..., :h], x[..., h:]], dim=-1).double()  # (..., N, h, 2)
    y = torch.einsum("nhij,...nhj->...nhi", rot, pairs)
    return torch.cat([y[..., 0], y[..., 1]], dim=-1).to(x.dtype)


ENTRIES = [
    Entry("rope_angles", "wrong", "exponent_missing_factor_two",
          "Uses base ** (-i / head_dim) instead of base ** (-2 i / head_dim), so the "
          "frequencies fall off half as fast.", ra_missing_two),
    Entry("rope_angles", "wrong", "integer_division_in_exponent",
          "Computes the exponent 2 * i // head_dim on an integer arange, which floors to 0, "
          "so every frequency is 1.", ra_integer_exponent),
    Entry("rope_angles", "wrong", "one_frequency_per_feature",
          "Uses arange(0, head_dim) / head_dim instead of arange(0, head_dim, 2) / head_dim, "
          "returning head_dim angles per position instead of head_dim // 2.", ra_full_width),
    Entry("rope_angles", "wrong", "odd_head_dim_accepted",
          "Never checks that head_dim is even, so an odd head_dim returns angles instead of "
          "raising ValueError.", ra_no_odd_check),
    Entry("rope_angles", "wrong", "outer_product_transposed",
          "Multiplies frequencies[:, None] by positions[None, :], returning "
          "(head_dim // 2, N) instead of (N, head_dim // 2).", ra_outer_transposed),
    Entry("rope_angles", "wrong", "positions_cast_to_float16",
          "Casts positions to float16 first, which rounds large positions (and turns those "
          "above 65504 into inf).", ra_half_positions),
    Entry("rope_angles", "right", "numpy_outer_float64", None, ra_numpy_outer),
    Entry("rope_angles", "right", "exp_of_log_base", None, ra_exp_log),

    Entry("apply_rope", "wrong", "adjacent_pairs_layout",
          "Rotates adjacent pairs (2i, 2i+1), the GPT-J / interleaved layout, instead of "
          "pairing feature i with i + head_dim/2.", rope_adjacent_pairs),
    Entry("apply_rope", "wrong", "rotates_by_minus_angle",
          "Swaps the signs of the sine terms, y_i = x_i cos + x_{i+d/2} sin and "
          "y_{i+d/2} = -x_i sin + x_{i+d/2} cos, rotating by the negative angle.",
          rope_rotates_backwards),
    Entry("apply_rope", "wrong", "returns_float32",
          "Computes in float32 and returns float32 for half-precision inputs instead of x's "
          "dtype.", rope_returns_float32),
    Entry("apply_rope", "wrong", "angles_in_input_precision",
          "Computes the angles, cos and sin in x's own dtype, so for float16/bfloat16 inputs "
          "large position angles lose most of their precision.", rope_angles_in_x_dtype),
    Entry("apply_rope", "wrong", "half_width_from_sequence_axis",
          "Takes half = x.shape[-2] // 2 (half the sequence length) instead of half the head "
          "dimension when splitting the features.", rope_half_from_sequence_axis),
    Entry("apply_rope", "wrong", "base_hardcoded",
          "Always uses base 10000 for the angles, ignoring the base argument.",
          rope_base_hardcoded),
    Entry("apply_rope", "right", "complex_multiplication", None, rope_complex),
    Entry("apply_rope", "right", "rotation_matrix_einsum", None, rope_rotation_matrices),
]
