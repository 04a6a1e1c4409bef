"""Lesson 09 (torch): rope_angles and apply_rope, as learners write them."""

import math

import torch

from entry import Entry


# ----------------------------------------------------------------------------- rope_angles: wrong
def angles_missing_factor_two(positions, head_dim, base=10000.0):
    if head_dim % 2:
        raise ValueError(f"head_dim={head_dim} must be even")
    i = torch.arange(head_dim // 2, dtype=torch.float64)
    inv_freq = base ** (-i / head_dim)
    return (positions.double()[:, None] * inv_freq[None, :]).float()


def angles_positive_exponent(positions, head_dim, base=10000.0):
    if head_dim % 2:
        raise ValueError(f"head_dim={head_dim} must be even")
    i = torch.arange(head_dim // 2, dtype=torch.float64)
    inv_freq = base ** (2 * i / head_dim)
    return (positions.double()[:, None] * inv_freq[None, :]).float()


def angles_no_value_error(positions, head_dim, base=10000.0):
    inv_freq = 1.0 / (base ** (torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim))
    return (positions.double()[:, None] * inv_freq[None, :]).float()


def angles_floor_division(positions, head_dim, base=10000.0):
    if head_dim % 2:
        raise ValueError(f"head_dim={head_dim} must be even")
    i = torch.arange(head_dim // 2)
    inv_freq = base ** (-2 * i // head_dim)
    return positions[:, None].double() * inv_freq[None, :].double()


def angles_transposed(positions, head_dim, base=10000.0):
    if head_dim % 2:
        raise ValueError(f"head_dim={head_dim} must be even")
    i = torch.arange(head_dim // 2, dtype=torch.float64)
    inv_freq = base ** (-2 * i / head_dim)
    return torch.outer(inv_freq, positions.double()).float()  # (head_dim // 2, N)


def angles_duplicated_halves(positions, head_dim, base=10000.0):
    if head_dim % 2:
        raise ValueError(f"head_dim={head_dim} must be even")
    inv_freq = 1.0 / base ** (torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim)
    freqs = torch.outer(positions.double(), inv_freq)
    return torch.cat([freqs, freqs], dim=-1).float()  # as Hugging Face builds cos/sin


def angles_ignores_position_values(positions, head_dim, base=10000.0):
    if head_dim % 2:
        raise ValueError(f"head_dim={head_dim} must be even")
    n = torch.arange(positions.shape[0], dtype=torch.float64)
    inv_freq = base ** (-2 * torch.arange(head_dim // 2, dtype=torch.float64) / head_dim)
    return (n[:, None] * inv_freq[None, :]).float()


def angles_bfloat16(positions, head_dim, base=10000.0):
    if head_dim % 2:
        raise ValueError(f"head_dim={head_dim} must be even")
    i = torch.arange(head_dim // 2, dtype=torch.bfloat16)
    inv_freq = base ** (-2 * i / head_dim)
    return positions.to(torch.bfloat16)[:, None] * inv_freq[None, :]


# ----------------------------------------------------------------------------- rope_angles: right
def angles_outer_float64(positions, head_dim, base=10000.0):
    if head_dim % 2 != 0:
        raise ValueError(f"head_dim={head_dim} is odd")
    exponents = torch.arange(0, head_dim, 2, dtype=torch.float64, device=positions.device)
    inv_freq = torch.pow(torch.tensor(float(base), dtype=torch.float64), -exponents / head_dim)
    return torch.outer(positions.to(torch.float64), inv_freq)


def angles_log_space_float32(positions, head_dim, base=10000.0):
    if head_dim % 2:
        raise ValueError(f"head_dim={head_dim} must be even, RoPE rotates pairs")
    i = torch.arange(head_dim // 2, dtype=torch.float32, device=positions.device)
    inv_freq = torch.exp(-(2.0 * i / head_dim) * math.log(base))
    return torch.einsum("n,i->ni", positions.to(torch.float32), inv_freq)


# ----------------------------------------------------------------------------- apply_rope helpers
def _angles64(positions, head_dim, base, device):
    if head_dim % 2:
        raise ValueError(f"head_dim={head_dim} must be even")
    i = torch.arange(head_dim // 2, dtype=torch.float64, device=device)
    return positions.to(device=device, dtype=torch.float64)[:, None] * base ** (-2 * i / head_dim)


def _rotate(x, cos, sin):
    half = x.shape[-1] // 2
    x1, x2 = x[..., :half], x[..., half:]
    return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1)


# ----------------------------------------------------------------------------- apply_rope: wrong
def rope_adjacent_pairs(x, positions, base=10000.0):
    compute = torch.promote_types(x.dtype, torch.float32)
    angles = _angles64(positions, x.shape[-1], base, x.device).to(compute)
    cos, sin = angles.cos(), angles.sin()
    xc = x.to(compute)
    x_even, x_odd = xc[..., 0::2], xc[..., 1::2]
    y = torch.empty_like(xc)
    y[..., 0::2] = x_even * cos - x_odd * sin
    y[..., 1::2] = x_even * sin + x_odd * cos
    return y.to(x.dtype)


def rope_sign_flipped(x, positions, base=10000.0):
    compute = torch.promote_types(x.dtype, torch.float32)
    angles = _angles64(positions, x.shape[-1], base, x.device).to(compute)
    cos, sin = angles.cos(), angles.sin()
    half = x.shape[-1] // 2
    x1, x2 = x[..., :half].to(compute), x[..., half:].to(compute)
    y1 = x1 * cos + x2 * sin
    y2 = -x1 * sin + x2 * cos
    return torch.cat([y1, y2], dim=-1).to(x.dtype)


def rope_angles_in_x_dtype(x, positions, base=10000.0):
    d = x.shape[-1]
    if d % 2:
        raise ValueError(f"head_dim={d} must be even")
    i = torch.arange(d // 2, dtype=x.dtype, device=x.device)
    inv_freq = base ** (-2 * i / d)
    angles = positions.to(x.dtype)[:, None] * inv_freq[None, :]  # in x's dtype
    return _rotate(x, angles.cos(), angles.sin())


def rope_returns_float32(x, positions, base=10000.0):
    compute = torch.promote_types(x.dtype, torch.float32)
    angles = _angles64(positions, x.shape[-1], base, x.device).to(compute)
    return _rotate(x.to(compute), angles.cos(), angles.sin())  # never cast back


def rope_ignores_positions(x, positions, base=10000.0):
    compute = torch.promote_types(x.dtype, torch.float32)
    n = torch.arange(x.shape[-2], device=x.device)  # assumes positions 0 .. N-1
    angles = _angles64(n, x.shape[-1], base, x.device).to(compute)
    return _rotate(x.to(compute), angles.cos(), angles.sin()).to(x.dtype)


def rope_exponent_without_two(x, positions, base=10000.0):
    compute = torch.promote_types(x.dtype, torch.float32)
    d = x.shape[-1]
    if d % 2:
        raise ValueError(f"head_dim={d} must be even")
    i = torch.arange(d // 2, dtype=torch.float64, device=x.device)
    angles = positions.double()[:, None] * base ** (-i / d)
    angles = angles.to(compute)
    return _rotate(x.to(compute), angles.cos(), angles.sin()).to(x.dtype)


def rope_assumes_4d(x, positions, base=10000.0):
    compute = torch.promote_types(x.dtype, torch.float32)
    angles = _angles64(positions, x.shape[-1], base, x.device).to(compute)
    cos = angles.cos()[None, None, :, :]  # (1, 1, N, d/2) for x of shape (B, H, N, d)
    sin = angles.sin()[None, None, :, :]
    return _rotate(x.to(compute), cos, sin).to(x.dtype)


def rope_passes_odd_feature(x, positions, base=10000.0):
    compute = torch.promote_types(x.dtype, torch.float32)
    d = x.shape[-1]
    half = d // 2
    i = torch.arange(half, dtype=torch.float64, device=x.device)
    angles = (positions.double()[:, None] * base ** (-2 * i / (2 * half))).to(compute)
    cos, sin = angles.cos(), angles.sin()
    xc = x.to(compute)
    x1, x2, rest = xc[..., :half], xc[..., half:2 * half], xc[..., 2 * half:]
    y = torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos, rest], dim=-1)  # odd: last one kept
    return y.to(x.dtype)


# ----------------------------------------------------------------------------- apply_rope: right
def rope_hf_rotate_half(x, positions, base=10000.0):
    d = x.shape[-1]
    if d % 2:
        raise ValueError(f"head_dim={d} is odd")
    inv_freq = 1.0 / (base ** (torch.arange(0, d, 2, dtype=torch.float64, device=x.device) / d))
    freqs = torch.outer(positions.to(x.device).double(), inv_freq)
    emb = torch.cat((freqs, freqs), dim=-1).float()  # (N, d)
    cos, sin = emb.cos(), emb.sin()

    def rotate_half(t):
        t1, t2 = t[..., : d // 2], t[..., d // 2:]
        return torch.cat((-t2, t1), dim=-1)

    xf = x.float() if x.dtype != torch.float64 else x
    out = xf * cos.to(xf.dtype) + rotate_half(xf) * sin.to(xf.dtype)
    return out.to(x.dtype)


def rope_complex_float64(x, positions, base=10000.0):
    d = x.shape[-1]
    if d % 2:
        raise ValueError(f"head_dim={d} must be even")
    half = d // 2
    i = torch.arange(half, dtype=torch.float64, device=x.device)
    angles = positions.to(x.device).double()[:, None] * torch.exp(-2 * i / d * math.log(base))
    rot = torch.polar(torch.ones_like(angles), angles)  # e^{i angle}, (N, d/2)
    xd = x.double()
    z = torch.complex(xd[..., :half], xd[..., half:])  # pair (i, i + d/2) as one number
    w = z * rot
    return torch.cat([w.real, w.imag], dim=-1).to(x.dtype)


ENTRIES = [
    Entry("rope_angles", "wrong", "exponent_missing_factor_two",
          "Uses base ** (-i / head_dim) instead of base ** (-2 i / head_dim), so the "
          "frequencies fall off half as fast.", angles_missing_factor_two),
    Entry("rope_angles", "wrong", "positive_exponent",
          "Drops the minus sign of the exponent: frequencies grow as base ** (2 i / d) instead "
          "of shrinking.", angles_positive_exponent),
    Entry("rope_angles", "wrong", "no_value_error_for_odd_head_dim",
          "Builds the exponents with arange(0, head_dim, 2) and never checks head_dim, so an "
          "odd head_dim silently gets an extra column instead of raising ValueError.",
          angles_no_value_error),
    Entry("rope_angles", "wrong", "floor_division_in_exponent",
          "Writes -2 * i // head_dim, an integer floor division, so the exponent is -1 or 0 "
          "instead of -2i/d.", angles_floor_division),
    Entry("rope_angles", "wrong", "transposed",
          "Returns the outer product the other way round, (head_dim // 2, N) instead of "
          "(N, head_dim // 2).", angles_transposed),
    Entry("rope_angles", "wrong", "duplicated_halves",
          "Concatenates the angles with themselves (as Hugging Face does to build cos/sin), "
          "returning (N, head_dim) instead of (N, head_dim // 2).", angles_duplicated_halves),
    Entry("rope_angles", "wrong", "ignores_position_values",
          "Uses arange(N) instead of the given positions, which is only right when the "
          "positions are 0..N-1.", angles_ignores_position_values),
    Entry("rope_angles", "wrong", "computed_in_bfloat16",
          "Computes the angles in bfloat16, which cannot hold large positions or the "
          "frequencies precisely (257 becomes 256).", angles_bfloat16),
    Entry("rope_angles", "right", "outer_float64", None, angles_outer_float64),
    Entry("rope_angles", "right", "log_space_float32", None, angles_log_space_float32),

    Entry("apply_rope", "wrong", "adjacent_pairs",
          "Rotates adjacent pairs (2i, 2i + 1) instead of the rotate-half pairs (i, i + d/2).",
          rope_adjacent_pairs),
    Entry("apply_rope", "wrong", "rotation_sign_flipped",
          "Puts the minus sign on the wrong term, rotating each pair by -angle.",
          rope_sign_flipped),
    Entry("apply_rope", "wrong", "angles_in_x_dtype",
          "Computes the angles in x's dtype, so float16/bfloat16 inputs get badly rounded "
          "angles at large positions.", rope_angles_in_x_dtype),
    Entry("apply_rope", "wrong", "returns_compute_dtype",
          "Computes in float32 but never casts back, so half-precision x comes back as "
          "float32.", rope_returns_float32),
    Entry("apply_rope", "wrong", "ignores_positions",
          "Rotates row n by position n (arange(N)) instead of by positions[n].",
          rope_ignores_positions),
    Entry("apply_rope", "wrong", "exponent_without_two",
          "Computes its own frequencies as base ** (-i / d) instead of base ** (-2i / d).",
          rope_exponent_without_two),
    Entry("apply_rope", "wrong", "assumes_4d_input",
          "Reshapes cos and sin to (1, 1, N, d/2) assuming x is (B, H, N, d), so inputs with "
          "fewer leading axes come back with extra axes.", rope_assumes_4d),
    Entry("apply_rope", "wrong", "passes_odd_feature_through",
          "Lets an odd head_dim through, leaving the unpaired last feature unrotated, instead "
          "of raising ValueError.", rope_passes_odd_feature),
    Entry("apply_rope", "right", "hf_rotate_half", None, rope_hf_rotate_half),
    Entry("apply_rope", "right", "complex_float64", None, rope_complex_float64),
]
