"""Lesson 09 (torch): rope_angles, apply_rope."""

import math

import torch

from entry import Entry


def _even(head_dim):
    if head_dim % 2:
        raise ValueError(f"head_dim={head_dim} must be even for RoPE")


# ------------------------------------------------------------------ rope_angles, wrong
def ang_missing_two(positions, head_dim, base=10000.0):
    _even(head_dim)
    i = torch.arange(head_dim // 2, dtype=torch.float64)
    return (positions.double()[:, None] * base ** (-i / head_dim)[None, :]).float()


def ang_index_from_one(positions, head_dim, base=10000.0):
    _even(head_dim)
    i = torch.arange(1, head_dim // 2 + 1, dtype=torch.float64)
    return (positions.double()[:, None] * base ** (-2 * i / head_dim)[None, :]).float()


def ang_integer_division(positions, head_dim, base=10000.0):
    _even(head_dim)
    i = torch.arange(head_dim // 2)  # integer tensor
    expo = (-2 * i) // head_dim
    return positions.double()[:, None] * torch.pow(base, expo.double())[None, :]


def ang_no_odd_check(positions, head_dim, base=10000.0):
    i = torch.arange(head_dim // 2, dtype=torch.float64)
    return (positions.double()[:, None] * base ** (-2 * i / head_dim)[None, :]).float()


def ang_assert(positions, head_dim, base=10000.0):
    assert head_dim % 2 == 0, "head_dim must be even"
    i = torch.arange(head_dim // 2, dtype=torch.float64)
    return (positions.double()[:, None] * base ** (-2 * i / head_dim)[None, :]).float()


def ang_positive_exponent(positions, head_dim, base=10000.0):
    _even(head_dim)
    i = torch.arange(head_dim // 2, dtype=torch.float64)
    return (positions.double()[:, None] * base ** (2 * i / head_dim)[None, :]).float()


def ang_outer_transposed(positions, head_dim, base=10000.0):
    _even(head_dim)
    inv = 1.0 / base ** (torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim)
    return torch.outer(inv, positions.double()).float()


# ------------------------------------------------------------------ rope_angles, right
def ang_hf_style(positions, head_dim, base=10000.0):
    if head_dim % 2 != 0:
        raise ValueError(f"head_dim={head_dim} is odd")
    inv_freq = 1.0 / (base ** (torch.arange(0, head_dim, 2, dtype=torch.int64).double() / head_dim))
    return torch.outer(positions.double(), inv_freq).to(torch.float32)


def ang_math_loop(positions, head_dim, base=10000.0):
    if head_dim % 2:
        raise ValueError(f"head_dim={head_dim} must be even")
    rows = [[int(p) * math.exp(-2 * i / head_dim * math.log(base)) for i in range(head_dim // 2)]
            for p in positions.tolist()]
    return torch.tensor(rows, dtype=torch.float64).reshape(len(rows), head_dim // 2)


# ------------------------------------------------------------------ apply_rope helpers
def _angles(positions, d, base, dtype=torch.float64):
    i = torch.arange(d // 2, dtype=torch.float64)
    return (positions.double()[:, None] * base ** (-2 * i / d)[None, :]).to(dtype)


# ------------------------------------------------------------------ apply_rope, wrong
def rope_adjacent_pairs(x, positions, base=10000.0):
    d = x.shape[-1]
    _even(d)
    c = torch.promote_types(x.dtype, torch.float32)
    a = _angles(positions, d, base).to(c)
    cos, sin = a.cos(), a.sin()
    x1, x2 = x[..., 0::2].to(c), x[..., 1::2].to(c)
    y = torch.stack([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1).flatten(-2)
    return y.to(x.dtype)


def rope_rotates_backwards(x, positions, base=10000.0):
    d = x.shape[-1]
    _even(d)
    c = torch.promote_types(x.dtype, torch.float32)
    a = _angles(positions, d, base).to(c)
    cos, sin = a.cos(), a.sin()
    x1, x2 = x[..., : d // 2].to(c), x[..., d // 2:].to(c)
    return torch.cat([x1 * cos + x2 * sin, -x1 * sin + x2 * cos], -1).to(x.dtype)


def rope_no_cast_back(x, positions, base=10000.0):
    d = x.shape[-1]
    _even(d)
    c = torch.promote_types(x.dtype, torch.float32)
    a = _angles(positions, d, base).to(c)
    cos, sin = a.cos(), a.sin()
    x1, x2 = x[..., : d // 2].to(c), x[..., d // 2:].to(c)
    return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], -1)


def rope_angles_in_x_dtype(x, positions, base=10000.0):
    d = x.shape[-1]
    _even(d)
    i = torch.arange(d // 2, dtype=x.dtype)
    a = positions.to(x.dtype)[:, None] * (base ** (-2 * i / d))[None, :]
    cos, sin = a.cos(), a.sin()
    x1, x2 = x[..., : d // 2], x[..., d // 2:]
    return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], -1)


def rope_half_width_frequencies(x, positions, base=10000.0):
    d = x.shape[-1]
    _even(d)
    half = d // 2
    c = torch.promote_types(x.dtype, torch.float32)
    i = torch.arange(half, dtype=torch.float64)
    a = (positions.double()[:, None] * base ** (-2 * i / half)[None, :]).to(c)
    x1, x2 = x[..., :half].to(c), x[..., half:].to(c)
    return torch.cat([x1 * a.cos() - x2 * a.sin(), x1 * a.sin() + x2 * a.cos()], -1).to(x.dtype)


def rope_assumes_bnhd(x, positions, base=10000.0):
    d = x.shape[-1]
    _even(d)
    c = torch.promote_types(x.dtype, torch.float32)
    a = _angles(positions, d, base).to(c)[:, None, :]  # (N, 1, d/2) for a (B, N, H, d) layout
    x1, x2 = x[..., : d // 2].to(c), x[..., d // 2:].to(c)
    return torch.cat([x1 * a.cos() - x2 * a.sin(), x1 * a.sin() + x2 * a.cos()], -1).to(x.dtype)


def rope_no_even_check(x, positions, base=10000.0):
    d = x.shape[-1]
    half = d // 2
    c = torch.promote_types(x.dtype, torch.float32)
    a = _angles(positions, d, base).to(c)
    x1, x2 = x[..., :half].to(c), x[..., half:].to(c)
    return torch.cat([x1 * a.cos() - x2 * a.sin(), x1 * a.sin() + x2 * a.cos()], -1).to(x.dtype)


# ------------------------------------------------------------------ apply_rope, right
def rope_complex(x, positions, base=10000.0):
    d = x.shape[-1]
    if d % 2:
        raise ValueError(f"head_dim={d} must be even")
    half = d // 2
    a = _angles(positions, d, base)
    rot = torch.polar(torch.ones_like(a), a)  # e^{i angle}, complex128
    z = torch.complex(x[..., :half].double(), x[..., half:].double()) * rot
    return torch.cat([z.real, z.imag], dim=-1).to(x.dtype)


def rope_rotate_half(x, positions, base=10000.0):
    d = x.shape[-1]
    if d % 2 != 0:
        raise ValueError(f"x.shape[-1]={d} is odd")
    a = _angles(positions, d, base)
    emb = torch.cat([a, a], dim=-1)  # (N, d)
    x64 = x.double()
    rotated = torch.cat([-x64[..., d // 2:], x64[..., : d // 2]], dim=-1)
    return (x64 * emb.cos() + rotated * emb.sin()).to(x.dtype)


ENTRIES = [
    Entry("rope_angles", "wrong", "exponent_missing_two", "Uses base ** (-i / head_dim) instead "
          "of base ** (-2 i / head_dim).", ang_missing_two),
    Entry("rope_angles", "wrong", "index_starts_at_one", "Lets the frequency index run "
          "1 .. head_dim/2 instead of 0 .. head_dim/2 - 1.", ang_index_from_one),
    Entry("rope_angles", "wrong", "integer_division_in_exponent", "Computes the exponent "
          "(-2 i) // head_dim with integer floor division, so every exponent is 0 or -1.",
          ang_integer_division),
    Entry("rope_angles", "wrong", "no_odd_check", "Does not check head_dim, so an odd head_dim "
          "silently returns head_dim // 2 columns instead of raising ValueError.",
          ang_no_odd_check),
    Entry("rope_angles", "wrong", "assert_for_odd", "Checks head_dim with assert, raising "
          "AssertionError instead of ValueError.", ang_assert),
    Entry("rope_angles", "wrong", "positive_exponent", "Uses base ** (+2 i / head_dim), "
          "multiplying by the frequency's inverse (angles grow with i).", ang_positive_exponent),
    Entry("rope_angles", "wrong", "outer_product_transposed", "Takes the outer product in the "
          "wrong order, returning (head_dim // 2, N) instead of (N, head_dim // 2).",
          ang_outer_transposed),
    Entry("rope_angles", "right", "hf_inv_freq_outer", None, ang_hf_style),
    Entry("rope_angles", "right", "math_exp_log_loop", None, ang_math_loop),

    Entry("apply_rope", "wrong", "adjacent_pairs", "Pairs adjacent features (2i, 2i+1) "
          "instead of feature i with i + head_dim/2.", rope_adjacent_pairs),
    Entry("apply_rope", "wrong", "rotates_by_minus_angle", "Flips the sign of the sine terms, "
          "rotating each pair by -angle.", rope_rotates_backwards),
    Entry("apply_rope", "wrong", "forgets_cast_back", "Computes in float32 but forgets to cast "
          "the result back to x's dtype.", rope_no_cast_back),
    Entry("apply_rope", "wrong", "angles_in_x_dtype", "Builds the angles in x's (half) dtype, "
          "so position times frequency loses its precision at large positions.",
          rope_angles_in_x_dtype),
    Entry("apply_rope", "wrong", "frequencies_over_half_width", "Computes the frequencies with "
          "head_dim/2 in the exponent's denominator (base ** (-2 i / (d/2))) instead of "
          "head_dim.", rope_half_width_frequencies),
    Entry("apply_rope", "wrong", "assumes_b_n_h_d_layout", "Inserts a head axis into cos/sin "
          "as if x were (B, N, H, d), so the angles broadcast against the wrong axes.",
          rope_assumes_bnhd),
    Entry("apply_rope", "wrong", "no_even_check", "Does not check that head_dim is even, so an "
          "odd width fails with a RuntimeError instead of a ValueError.", rope_no_even_check),
    Entry("apply_rope", "right", "complex_multiplication", None, rope_complex),
    Entry("apply_rope", "right", "rotate_half_float64", None, rope_rotate_half),
]
