"""Lesson 09 (RoPE, torch): rope_angles, apply_rope."""

import math

import torch

from entry import Entry


def _even(head_dim):
    if head_dim % 2 != 0:
        raise ValueError(f"head_dim={head_dim} must be even for RoPE")


# ------------------------------------------------------------------ rope_angles: wrong
def ra_no_factor_two(positions, head_dim, base=10000.0):
    _even(head_dim)
    i = torch.arange(head_dim // 2, dtype=torch.float64)
    inv = base ** (-i / head_dim)
    return (positions.double()[:, None] * inv[None, :]).float()


def ra_even_steps_doubled(positions, head_dim, base=10000.0):
    _even(head_dim)
    i = torch.arange(0, head_dim, 2, dtype=torch.float64)
    inv = base ** (-2 * i / head_dim)
    return torch.outer(positions.double(), inv).float()


def ra_assert(positions, head_dim, base=10000.0):
    assert head_dim % 2 == 0, "head_dim must be even"
    i = torch.arange(head_dim // 2, dtype=torch.float64)
    return torch.outer(positions.double(), base ** (-2 * i / head_dim)).float()


def ra_floor_division(positions, head_dim, base=10000.0):
    _even(head_dim)
    i = torch.arange(head_dim // 2)
    inv = base ** (-2 * i // head_dim).double()
    return torch.outer(positions.double(), inv).float()


def ra_inverse_frequency(positions, head_dim, base=10000.0):
    _even(head_dim)
    i = torch.arange(head_dim // 2, dtype=torch.float64)
    freq = base ** (2 * i / head_dim)
    return (positions.double()[:, None] * freq).float()


def ra_no_odd_check(positions, head_dim, base=10000.0):
    half = head_dim // 2
    i = torch.arange(half, dtype=torch.float64)
    return torch.outer(positions.double(), base ** (-2 * i / head_dim)).float()


def ra_transposed(positions, head_dim, base=10000.0):
    _even(head_dim)
    i = torch.arange(head_dim // 2, dtype=torch.float64)
    inv = base ** (-2 * i / head_dim)
    return (inv[:, None] * positions.double()[None, :]).float()


# ------------------------------------------------------------------ rope_angles: right
def ra_exp_log(positions, head_dim, base=10000.0):
    if head_dim % 2:
        raise ValueError(f"head_dim={head_dim} is odd; RoPE needs an even head_dim")
    i = torch.arange(head_dim // 2, dtype=torch.float64)
    inv = torch.exp(-math.log(base) * 2.0 * i / head_dim)
    return positions.to(torch.float64).unsqueeze(1) * inv.unsqueeze(0)


def ra_python_lists(positions, head_dim, base=10000.0):
    if head_dim % 2 == 1:
        raise ValueError(f"head_dim={head_dim} must be even")
    rows = [[int(p) * base ** (-2 * i / head_dim) for i in range(head_dim // 2)]
            for p in positions.tolist()]
    return torch.tensor(rows, dtype=torch.float64).reshape(len(rows), head_dim // 2)


# ------------------------------------------------------------------ apply_rope helpers
def _angles(positions, head_dim, base):
    i = torch.arange(head_dim // 2, dtype=torch.float64)
    return positions.double()[:, None] * base ** (-2 * i / head_dim)


# ------------------------------------------------------------------ apply_rope: wrong
def ar_adjacent_pairs(x, positions, base=10000.0):
    d = x.shape[-1]
    _even(d)
    ang = _angles(positions, d, base)
    cos, sin = ang.cos(), ang.sin()
    xe, xo = x[..., 0::2].double(), x[..., 1::2].double()
    ye = xe * cos - xo * sin
    yo = xe * sin + xo * cos
    return torch.stack([ye, yo], dim=-1).flatten(-2).to(x.dtype)


def ar_sign_flipped(x, positions, base=10000.0):
    d = x.shape[-1]
    _even(d)
    ang = _angles(positions, d, base)
    cos, sin = ang.cos(), ang.sin()
    x1, x2 = x[..., :d // 2].double(), x[..., d // 2:].double()
    return torch.cat([x1 * cos + x2 * sin, -x1 * sin + x2 * cos], dim=-1).to(x.dtype)


def ar_not_cast_back(x, positions, base=10000.0):
    d = x.shape[-1]
    _even(d)
    ang = _angles(positions, d, base).float()
    cos, sin = ang.cos(), ang.sin()
    x1, x2 = x[..., :d // 2].float(), x[..., d // 2:].float()
    return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1)


def ar_angles_in_x_dtype(x, positions, base=10000.0):
    d = x.shape[-1]
    _even(d)
    i = torch.arange(d // 2, dtype=x.dtype)
    inv = base ** (-2 * i / d)
    ang = positions.to(x.dtype)[:, None] * inv[None, :]
    cos, sin = ang.cos(), ang.sin()
    x1, x2 = x[..., :d // 2], x[..., d // 2:]
    return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1)


def ar_interleaved_angles(x, positions, base=10000.0):
    d = x.shape[-1]
    _even(d)
    ang = _angles(positions, d, base).repeat_interleave(2, dim=-1)  # (N, d)
    xd = x.double()
    rotated = torch.cat([-xd[..., d // 2:], xd[..., :d // 2]], dim=-1)
    return (xd * ang.cos() + rotated * ang.sin()).to(x.dtype)


def ar_arange_positions(x, positions, base=10000.0):
    d = x.shape[-1]
    _even(d)
    n = x.shape[-2]
    ang = _angles(torch.arange(n), d, base)
    cos, sin = ang.cos(), ang.sin()
    x1, x2 = x[..., :d // 2].double(), x[..., d // 2:].double()
    return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1).to(x.dtype)


# ------------------------------------------------------------------ apply_rope: right
def ar_complex(x, positions, base=10000.0):
    d = x.shape[-1]
    if d % 2:
        raise ValueError(f"head_dim={d} (x.shape[-1]) must be even")
    half = d // 2
    ang = _angles(positions, d, base)
    z = torch.complex(x[..., :half].double(), x[..., half:].double())
    z = z * torch.polar(torch.ones_like(ang), ang)
    return torch.cat([z.real, z.imag], dim=-1).to(x.dtype)


def ar_rotation_matrices(x, positions, base=10000.0):
    d = x.shape[-1]
    if d % 2:
        raise ValueError(f"x.shape[-1]={d} is odd: head_dim must be even")
    half = d // 2
    ang = _angles(positions, d, base)  # (N, half)
    c, s = torch.cos(ang), torch.sin(ang)
    rot = torch.stack([torch.stack([c, -s], -1), torch.stack([s, c], -1)], -2)  # (N, half, 2, 2)
    pairs = torch.stack([x[..., :half], x[..., half:]], dim=-1).double()  # (..., N, half, 2)
    y = torch.einsum("nhij,...nhj->...nhi", rot, pairs)
    return torch.cat([y[..., 0], y[..., 1]], dim=-1).to(x.dtype)


ENTRIES = [
    Entry("rope_angles", "wrong", "factor-two-dropped",
          "Uses base ** (-i / head_dim), dropping the factor 2 in the exponent.",
          ra_no_factor_two),
    Entry("rope_angles", "wrong", "even-indices-doubled",
          "Steps i over 0, 2, 4, ... and still multiplies it by 2, doubling every exponent.",
          ra_even_steps_doubled),
    Entry("rope_angles", "wrong", "assert-even",
          "Checks for an even head_dim with assert, raising AssertionError instead of "
          "ValueError.", ra_assert),
    Entry("rope_angles", "wrong", "floor-division-exponent",
          "Computes the exponent with integer floor division (-2 * i // head_dim), so it is "
          "only ever 0 or -1.", ra_floor_division),
    Entry("rope_angles", "wrong", "frequency-not-inverted",
          "Multiplies positions by base ** (2i / head_dim) instead of its inverse.",
          ra_inverse_frequency),
    Entry("rope_angles", "wrong", "odd-head_dim-accepted",
          "Never checks for an odd head_dim and silently returns head_dim // 2 columns "
          "instead of raising ValueError.", ra_no_odd_check),
    Entry("rope_angles", "wrong", "transposed-output",
          "Builds the outer product the other way round, returning (head_dim // 2, N).",
          ra_transposed),
    Entry("rope_angles", "right", "exp-log-float64", None, ra_exp_log),
    Entry("rope_angles", "right", "python-lists", None, ra_python_lists),

    Entry("apply_rope", "wrong", "adjacent-pairs",
          "Rotates adjacent features (2i, 2i + 1) together, the GPT-J layout, instead of "
          "pairing i with i + d/2.", ar_adjacent_pairs),
    Entry("apply_rope", "wrong", "rotation-sign-flipped",
          "Rotates by -angle: y_i = x_i cos + x_{i+d/2} sin and "
          "y_{i+d/2} = -x_i sin + x_{i+d/2} cos.", ar_sign_flipped),
    Entry("apply_rope", "wrong", "not-cast-back",
          "Computes in float32 and returns float32 instead of casting back to x's dtype.",
          ar_not_cast_back),
    Entry("apply_rope", "wrong", "angles-in-half-precision",
          "Computes the angles in x's dtype, so for float16/bfloat16 large positions lose "
          "whole radians.", ar_angles_in_x_dtype),
    Entry("apply_rope", "wrong", "interleaved-angle-duplication",
          "Duplicates the angles with repeat_interleave (the adjacent layout) while rotating "
          "halves, so features get the wrong frequencies.", ar_interleaved_angles),
    Entry("apply_rope", "wrong", "arange-positions",
          "Uses torch.arange(N) as the positions instead of the positions passed in.",
          ar_arange_positions),
    Entry("apply_rope", "right", "complex-multiply", None, ar_complex),
    Entry("apply_rope", "right", "rotation-matrices-einsum", None, ar_rotation_matrices),
]
