"""Held-out learners' answers, lesson 09 (RoPE): rope_angles, apply_rope."""

import math

import numpy as np
import torch

from entry import Entry


# ============================================================================ rope_angles

def angles_missing_two(positions, head_dim, base=10000.0):
    if head_dim % 2 != 0:
        raise ValueError(f"head_dim={head_dim} is odd")
    i = torch.arange(head_dim // 2, dtype=torch.float64)
    inv_freq = base ** (-i / head_dim)
    return (positions.double()[:, None] * inv_freq[None, :]).float()


def angles_precedence(positions, head_dim, base=10000.0):
    if head_dim % 2:
        raise ValueError(f"head_dim={head_dim} must be even")
    i = torch.arange(head_dim // 2, dtype=torch.float64)
    freqs = base ** -2 * i / head_dim
    return torch.outer(positions.to(torch.float64), freqs).to(torch.float32)


def angles_integer_division(positions, head_dim, base=10000.0):
    if head_dim % 2 == 1:
        raise ValueError(f"head_dim={head_dim} is odd")
    i = torch.arange(head_dim // 2)  # int64
    expo = -2 * i // head_dim
    inv_freq = torch.pow(torch.tensor(float(base), dtype=torch.float64), expo.double())
    return positions.double().unsqueeze(1) * inv_freq.unsqueeze(0)


def angles_half_precision(positions, head_dim, base=10000.0):
    if head_dim % 2:
        raise ValueError(f"head_dim={head_dim} is odd")
    half = head_dim // 2
    i = torch.arange(half, dtype=torch.float16)
    inv_freq = (1.0 / (base ** (2 * i.float() / head_dim))).half()
    ang = positions.half()[:, None] * inv_freq[None, :]
    return ang.float()


def angles_no_odd_check(positions, head_dim, base=10000.0):
    i = torch.arange(head_dim // 2, dtype=torch.float64)
    theta = 1.0 / base ** (2.0 * i / head_dim)
    return (positions.to(torch.float64)[:, None] * theta).to(torch.float32)


def angles_duplicated_halves(positions, head_dim, base=10000.0):
    if head_dim % 2:
        raise ValueError(f"head_dim={head_dim} is odd")
    inv_freq = 1.0 / (base ** (torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim))
    freqs = torch.outer(positions.to(torch.float64), inv_freq)
    return torch.cat([freqs, freqs], dim=-1).float()


def angles_numpy_outer(positions, head_dim, base=10000.0):
    if head_dim % 2 != 0:
        raise ValueError(f"head_dim={head_dim} is odd: RoPE needs pairs")
    pos = np.asarray(positions.cpu().tolist(), dtype=np.float64)
    expo = -2.0 * np.arange(head_dim // 2) / head_dim
    ang = np.outer(pos, np.power(float(base), expo)).reshape(len(pos), head_dim // 2)
    return torch.from_numpy(ang).to(positions.device)


def angles_exp_log_loops(positions, head_dim, base=10000.0):
    if head_dim % 2:
        raise ValueError(f"head_dim={head_dim} is odd")
    half = head_dim // 2
    log_base = math.log(base)
    freqs = [math.exp(-2.0 * i * log_base / head_dim) for i in range(half)]
    rows = [[int(p) * f for f in freqs] for p in positions.tolist()]
    return torch.tensor(rows, dtype=torch.float64).reshape(len(rows), half)


# ============================================================================ apply_rope

def rope_adjacent_pairs(x, positions, base=10000.0):
    d = x.shape[-1]
    if d % 2:
        raise ValueError(f"head_dim={d} is odd")
    ct = torch.promote_types(x.dtype, torch.float32)
    i = torch.arange(d // 2, dtype=torch.float64)
    ang = (positions.double()[:, None] * base ** (-2 * i / d)).to(ct)
    c, s = ang.cos(), ang.sin()
    x1, x2 = x[..., 0::2].to(ct), x[..., 1::2].to(ct)
    y = torch.empty(x.shape, dtype=ct)
    y[..., 0::2] = x1 * c - x2 * s
    y[..., 1::2] = x1 * s + x2 * c
    return y.to(x.dtype)


def rope_rotates_backwards(x, positions, base=10000.0):
    d = x.shape[-1]
    if d % 2:
        raise ValueError(f"head_dim={d} is odd")
    h = d // 2
    ct = torch.promote_types(x.dtype, torch.float32)
    inv = base ** (-2.0 * torch.arange(h, dtype=torch.float64) / d)
    theta = (positions.to(torch.float64)[:, None] * inv).to(ct)
    cos, sin = torch.cos(theta), torch.sin(theta)
    a, b = x[..., :h].to(ct), x[..., h:].to(ct)
    return torch.cat([a * cos + b * sin, -a * sin + b * cos], dim=-1).to(x.dtype)


def rope_angles_in_x_dtype(x, positions, base=10000.0):
    d = x.shape[-1]
    if d % 2:
        raise ValueError(f"head_dim={d} is odd")
    half = d // 2
    ct = torch.promote_types(x.dtype, torch.float32)
    i = torch.arange(half, dtype=x.dtype)
    inv_freq = 1.0 / (base ** (2 * i / d))
    theta = positions.to(x.dtype)[:, None] * inv_freq[None, :]
    cos, sin = theta.cos().to(ct), theta.sin().to(ct)
    x1, x2 = x[..., :half].to(ct), x[..., half:].to(ct)
    out = torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1)
    return out.to(x.dtype)


def rope_dim_from_sequence(x, positions, base=10000.0):
    n, d = x.shape[-2], x.shape[-1]
    if d % 2:
        raise ValueError(f"head_dim={d} is odd")
    half = d // 2
    ct = torch.promote_types(x.dtype, torch.float32)
    i = torch.arange(half, dtype=torch.float64)
    inv_freq = base ** (-2.0 * i / n)
    ang = (positions.double()[:, None] * inv_freq[None, :]).to(ct)
    x1, x2 = x[..., :half].to(ct), x[..., half:].to(ct)
    y = torch.cat([x1 * ang.cos() - x2 * ang.sin(), x1 * ang.sin() + x2 * ang.cos()], dim=-1)
    return y.to(x.dtype)


def rope_ignores_positions(x, positions, base=10000.0):
    n, d = x.shape[-2], x.shape[-1]
    if d % 2:
        raise ValueError(f"head_dim={d} is odd")
    half = d // 2
    ct = torch.promote_types(x.dtype, torch.float32)
    pos = torch.arange(n, dtype=torch.float64)
    inv_freq = base ** (-2.0 * torch.arange(half, dtype=torch.float64) / d)
    ang = (pos[:, None] * inv_freq[None, :]).to(ct)
    c, s = torch.cos(ang), torch.sin(ang)
    lo, hi = x[..., :half].to(ct), x[..., half:].to(ct)
    return torch.cat([lo * c - hi * s, lo * s + hi * c], dim=-1).to(x.dtype)


def rope_no_odd_check(x, positions, base=10000.0):
    d = x.shape[-1]
    half = d // 2
    ct = torch.promote_types(x.dtype, torch.float32)
    inv_freq = base ** (-2.0 * torch.arange(half, dtype=torch.float64) / d)
    ang = (positions.double()[:, None] * inv_freq).to(ct)
    x1, x2 = x[..., :half].to(ct), x[..., half:].to(ct)
    y1 = x1 * ang.cos() - x2 * ang.sin()
    y2 = x1 * ang.sin() + x2 * ang.cos()
    return torch.cat([y1, y2], dim=-1).to(x.dtype)


def rope_complex_polar(x, positions, base=10000.0):
    d = x.shape[-1]
    if d % 2:
        raise ValueError(f"head_dim={d} is odd")
    h = d // 2
    ang = positions.double()[:, None] * torch.pow(
        torch.tensor(float(base), dtype=torch.float64),
        -2.0 * torch.arange(h, dtype=torch.float64) / d)
    rot = torch.polar(torch.ones_like(ang), ang)  # e^{i angle}, complex128
    z = torch.complex(x[..., :h].double(), x[..., h:].double())  # x_i + i x_{i+d/2}
    w = z * rot
    return torch.cat([w.real, w.imag], dim=-1).to(x.dtype)


def rope_rotation_matrices(x, positions, base=10000.0):
    d = x.shape[-1]
    if d % 2:
        raise ValueError(f"head_dim={d} is odd")
    n, h = x.shape[-2], d // 2
    R = torch.zeros((n, d, d), dtype=torch.float64)
    for row, p in enumerate(positions.tolist()):
        for i in range(h):
            a = p * base ** (-2.0 * i / d)
            c, s = math.cos(a), math.sin(a)
            R[row, i, i], R[row, i, i + h] = c, -s
            R[row, i + h, i], R[row, i + h, i + h] = s, c
    y = torch.einsum("nij,...nj->...ni", R, x.double())
    return y.to(x.dtype)


ENTRIES = [
    Entry("rope_angles", "wrong", "exponent_without_two",
          "uses base ** (-i / head_dim) and drops the factor 2, so the frequencies fall off half "
          "as fast as base ** (-2 i / head_dim)", angles_missing_two),
    Entry("rope_angles", "wrong", "operator_precedence",
          "writes base ** -2 * i / head_dim, which Python reads as (base ** -2) * i / head_dim, "
          "not base ** (-2 * i / head_dim)", angles_precedence),
    Entry("rope_angles", "wrong", "integer_floor_division",
          "computes the exponent as -2 * i // head_dim on integer i, so floor division turns "
          "every exponent into -1 or 0 instead of the fraction -2i/d", angles_integer_division),
    Entry("rope_angles", "wrong", "angles_in_float16",
          "computes the frequencies and the products in float16 (11 significant bits), so every "
          "angle is rounded (errors near 1e-3 already at small positions) and a position of "
          "100000 overflows to inf",
          angles_half_precision),
    Entry("rope_angles", "wrong", "odd_head_dim_accepted",
          "never checks that head_dim is even, so an odd head_dim returns angles instead of "
          "raising ValueError", angles_no_odd_check),
    Entry("rope_angles", "wrong", "hf_duplicated_halves",
          "copies Hugging Face's cat((freqs, freqs)) and returns (N, head_dim) angles instead of "
          "(N, head_dim // 2)", angles_duplicated_halves),
    Entry("rope_angles", "right", "numpy_outer_float64", None, angles_numpy_outer),
    Entry("rope_angles", "right", "exp_log_python_loops", None, angles_exp_log_loops),

    Entry("apply_rope", "wrong", "adjacent_pairs",
          "rotates adjacent features (0, 1), (2, 3), ... as in the original paper instead of "
          "the contract's rotate-half pairs (i, i + d/2)", rope_adjacent_pairs),
    Entry("apply_rope", "wrong", "rotates_by_minus_angle",
          "puts the sine with the wrong signs (y_i = x_i cos + x_{i+d/2} sin), rotating every "
          "pair by -angle instead of +angle", rope_rotates_backwards),
    Entry("apply_rope", "wrong", "angles_in_x_dtype",
          "computes positions and frequencies in x's dtype, so bfloat16/float16 inputs round "
          "large positions (257 becomes 256) before the angles are formed",
          rope_angles_in_x_dtype),
    Entry("apply_rope", "wrong", "frequencies_from_sequence_length",
          "divides the exponent by x.shape[-2] (the sequence length N) instead of head_dim, a "
          "wrong variable in base ** (-2 i / d)", rope_dim_from_sequence),
    Entry("apply_rope", "wrong", "ignores_positions_argument",
          "rotates row n by angles of position n (torch.arange(N)) and ignores the positions "
          "it was given, wrong for unsorted or offset positions", rope_ignores_positions),
    Entry("apply_rope", "wrong", "odd_head_dim_unchecked",
          "does not check head_dim is even: for an odd head_dim the halves have different "
          "lengths and torch raises a RuntimeError instead of the ValueError the contract asks",
          rope_no_odd_check),
    Entry("apply_rope", "right", "complex_polar_float64", None, rope_complex_polar),
    Entry("apply_rope", "right", "per_position_rotation_matrix_einsum", None,
          rope_rotation_matrices),
]
