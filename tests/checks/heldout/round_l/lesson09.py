"""Round l, lesson 09 (rope): rope_angles, apply_rope."""

import math

import torch

from entry import Entry

A = "rope_angles"
R = "apply_rope"


def _check_even(head_dim):
    if head_dim % 2 != 0:
        raise ValueError(f"head_dim={head_dim} must be even for RoPE")


# ============================================================ rope_angles: wrong
def angles_missing_factor_two(positions, head_dim, base=10000.0):
    _check_even(head_dim)
    i = torch.arange(head_dim // 2, dtype=torch.float64)
    inv_freq = base ** (-i / head_dim)
    return (positions.double()[:, None] * inv_freq[None, :]).float()


def angles_precedence(positions, head_dim, base=10000.0):
    _check_even(head_dim)
    i = torch.arange(head_dim // 2, dtype=torch.float64)
    inv_freq = base ** -2 * i / head_dim
    return torch.outer(positions.double(), inv_freq).float()


def angles_assert_guard(positions, head_dim, base=10000.0):
    assert head_dim % 2 == 0, f"head_dim={head_dim} must be even"
    half = head_dim // 2
    inv_freq = 1.0 / (base ** (torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim))
    assert inv_freq.shape[0] == half
    return (positions.to(torch.float64).unsqueeze(1) * inv_freq).to(torch.float32)


def angles_hf_cat(positions, head_dim, base=10000.0):
    _check_even(head_dim)
    inv_freq = 1.0 / (base ** (torch.arange(0, head_dim, 2).float() / head_dim))
    freqs = torch.outer(positions.float(), inv_freq)
    return torch.cat((freqs, freqs), dim=-1)


def angles_ignores_positions(positions, head_dim, base=10000.0):
    _check_even(head_dim)
    n = positions.shape[0]
    t = torch.arange(n, dtype=torch.float64)
    inv_freq = base ** (-2.0 * torch.arange(head_dim // 2, dtype=torch.float64) / head_dim)
    return (t[:, None] * inv_freq).float()


def angles_log10(positions, head_dim, base=10000.0):
    _check_even(head_dim)
    rows = []
    for p in positions.tolist():
        rows.append([p * math.exp(-2 * i / head_dim * math.log10(base))
                     for i in range(head_dim // 2)])
    return torch.tensor(rows, dtype=torch.float64).reshape(len(rows), head_dim // 2)


# ============================================================ rope_angles: right
def angles_python_float64(positions, head_dim, base=10000.0):
    if head_dim % 2:
        raise ValueError(f"head_dim={head_dim} is odd; RoPE needs an even head_dim")
    half = head_dim // 2
    freqs = [float(base) ** (-2.0 * i / head_dim) for i in range(half)]
    table = [[float(p) * f for f in freqs] for p in positions.tolist()]
    return torch.tensor(table, dtype=torch.float64).reshape(len(table), half)


def angles_exp_log(positions, head_dim, base=10000.0):
    if head_dim % 2 == 1:
        raise ValueError(f"odd head_dim={head_dim}: features cannot be paired")
    i = torch.arange(head_dim // 2, dtype=torch.float64)
    inv_freq = torch.exp(-(2.0 * i / head_dim) * math.log(base))
    return torch.einsum("n,f->nf", positions.to(torch.float64), inv_freq)


# ============================================================ apply_rope helpers
def _angles64(positions, head_dim, base):
    i = torch.arange(head_dim // 2, dtype=torch.float64)
    return positions.to(torch.float64)[:, None] * base ** (-2.0 * i / head_dim)


# ============================================================ apply_rope: wrong
def rope_interleaved_pairs(x, positions, base=10000.0):
    d = x.shape[-1]
    _check_even(d)
    ang = _angles64(positions, d, base)
    cos, sin = torch.cos(ang), torch.sin(ang)
    xe = x[..., 0::2].double()
    xo = x[..., 1::2].double()
    ye = xe * cos - xo * sin
    yo = xe * sin + xo * cos
    return torch.stack((ye, yo), dim=-1).flatten(-2).to(x.dtype)


def _rotate_half_wrong(t):
    h = t.shape[-1] // 2
    return torch.cat((t[..., h:], -t[..., :h]), dim=-1)


def rope_rotates_backwards(x, positions, base=10000.0):
    d = x.shape[-1]
    _check_even(d)
    ang = _angles64(positions, d, base)
    emb = torch.cat((ang, ang), dim=-1)
    xd = x.double()
    return (xd * emb.cos() + _rotate_half_wrong(xd) * emb.sin()).to(x.dtype)


def rope_sequential_update(x, positions, base=10000.0):
    d = x.shape[-1]
    _check_even(d)
    half = d // 2
    ang = _angles64(positions, d, base)
    c, s = torch.cos(ang), torch.sin(ang)
    x1 = x[..., :half].double()
    x2 = x[..., half:].double()
    x1 = x1 * c - x2 * s
    x2 = x1 * s + x2 * c
    return torch.cat([x1, x2], dim=-1).to(x.dtype)


def rope_float32_result(x, positions, base=10000.0):
    d = x.shape[-1]
    _check_even(d)
    half = d // 2
    ang = _angles64(positions, d, base).float()
    c, s = ang.cos(), ang.sin()
    x1, x2 = x[..., :half].float(), x[..., half:].float()
    return torch.cat([x1 * c - x2 * s, x1 * s + x2 * c], dim=-1)


def rope_no_guard(x, positions, base=10000.0):
    d = x.shape[-1]
    half = d // 2
    i = torch.arange(half, dtype=torch.float64)
    ang = positions.double()[:, None] * base ** (-2.0 * i / d)
    c, s = ang.cos(), ang.sin()
    x1, x2 = x[..., :half].double(), x[..., half:].double()
    return torch.cat([x1 * c - x2 * s, x1 * s + x2 * c], dim=-1).to(x.dtype)


def rope_cat_wrong_dim(x, positions, base=10000.0):
    d = x.shape[-1]
    _check_even(d)
    half = d // 2
    ang = _angles64(positions, d, base)
    c, s = ang.cos(), ang.sin()
    x1, x2 = x[..., :half].double(), x[..., half:].double()
    return torch.cat([x1 * c - x2 * s, x1 * s + x2 * c], dim=-2).to(x.dtype)


# ============================================================ apply_rope: right
def rope_complex(x, positions, base=10000.0):
    d = x.shape[-1]
    if d % 2:
        raise ValueError(f"head_dim={d} (x.shape[-1]) is odd; RoPE rotates pairs")
    half = d // 2
    ang = _angles64(positions, d, base)  # (N, d/2)
    xd = x.to(torch.float64)
    z = torch.complex(xd[..., :half], xd[..., half:])
    z = z * torch.polar(torch.ones_like(ang), ang)
    return torch.cat([z.real, z.imag], dim=-1).to(x.dtype)


def rope_rotation_matrices(x, positions, base=10000.0):
    d = x.shape[-1]
    if d % 2 != 0:
        raise ValueError(f"x.shape[-1]={d}: head_dim must be even")
    half = d // 2
    ang = _angles64(positions, d, base)
    c, s = torch.cos(ang), torch.sin(ang)
    rot = torch.stack([torch.stack([c, -s], -1), torch.stack([s, c], -1)], -2)  # (N, d/2, 2, 2)
    pairs = torch.stack([x[..., :half], x[..., half:]], dim=-1).to(torch.float64)  # (.., N, d/2, 2)
    y = torch.einsum("nfij,...nfj->...nfi", rot, pairs)
    return torch.cat([y[..., 0], y[..., 1]], dim=-1).to(x.dtype)


ENTRIES = [
    Entry(A, "wrong", "exponent_missing_factor_two",
          "Uses base ** (-i / head_dim) instead of base ** (-2 i / head_dim), so the "
          "frequencies fall off half as fast as they should.",
          angles_missing_factor_two),
    Entry(A, "wrong", "operator_precedence",
          "Writes base ** -2 * i / head_dim, which Python reads as (base ** -2) * i / "
          "head_dim rather than base ** (-2 * i / head_dim).",
          angles_precedence),
    Entry(A, "wrong", "assert_instead_of_valueerror",
          "Checks the odd head_dim with an assert, which raises AssertionError instead of "
          "the ValueError the contract requires.",
          angles_assert_guard),
    Entry(A, "wrong", "duplicated_hf_cache",
          "Returns torch.cat((freqs, freqs), -1) as Hugging Face's cos/sin cache does, an "
          "(N, head_dim) tensor instead of the (N, head_dim // 2) angles.",
          angles_hf_cat),
    Entry(A, "wrong", "ignores_given_positions",
          "Multiplies the frequencies by arange(N) instead of the given positions, which only "
          "agrees when positions happen to be 0..N-1.",
          angles_ignores_positions),
    Entry(A, "wrong", "log10_of_base",
          "Writes base ** (-2i/d) as exp(-2i/d * log10(base)), mixing a base-10 logarithm "
          "into a natural exponential.",
          angles_log10),
    Entry(A, "right", "python_float64_table", None, angles_python_float64),
    Entry(A, "right", "exp_log_einsum", None, angles_exp_log),

    Entry(R, "wrong", "adjacent_pairs",
          "Rotates adjacent features (0,1), (2,3), ... as in GPT-J instead of pairing "
          "feature i with feature i + head_dim/2.",
          rope_interleaved_pairs),
    Entry(R, "wrong", "rotates_backwards",
          "Defines rotate_half as cat(x2, -x1) instead of cat(-x2, x1), so every pair is "
          "rotated by minus the angle.",
          rope_rotates_backwards),
    Entry(R, "wrong", "overwrites_x1_before_use",
          "Reassigns x1 to its rotated value and then uses that new x1 to compute the "
          "partner feature, instead of the original x1.",
          rope_sequential_update),
    Entry(R, "wrong", "returns_float32",
          "Computes in float32 and never casts back, so the result is float32 whatever x's "
          "dtype is (float64 and half-precision inputs alike).",
          rope_float32_result),
    Entry(R, "wrong", "no_odd_head_dim_check",
          "Has no check for an odd head_dim, so the halves of unequal length fail to "
          "broadcast and a RuntimeError is raised instead of a ValueError.",
          rope_no_guard),
    Entry(R, "wrong", "concatenates_along_sequence_axis",
          "Concatenates the two rotated halves along dim=-2, the sequence axis, instead of "
          "the feature axis.",
          rope_cat_wrong_dim),
    Entry(R, "right", "complex_multiplication", None, rope_complex),
    Entry(R, "right", "rotation_matrices_einsum", None, rope_rotation_matrices),
]
