"""Lesson 09 (RoPE): held-out learners' answers for rope_angles and apply_rope."""

import math

import numpy as np
import torch

from entry import Entry


# ============================================================ rope_angles: wrong
def angles_no_factor_two(positions, head_dim, base=10000.0):
    if head_dim % 2:
        raise ValueError(f"head_dim={head_dim} must be even")
    i = torch.arange(head_dim // 2, dtype=torch.float64)
    freqs = base ** (-i / head_dim)
    return (positions.double()[:, None] * freqs[None, :]).float()


def angles_outer_order(positions, head_dim, base=10000.0):
    if head_dim % 2 != 0:
        raise ValueError(f"odd head_dim={head_dim}")
    inv = 1.0 / (base ** (torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim))
    return torch.outer(inv, positions.to(torch.float64)).to(torch.float32)


def angles_no_odd_guard(positions, head_dim, base=10000.0):
    half = head_dim // 2
    expo = -2.0 * torch.arange(half, dtype=torch.float64) / head_dim
    return (positions.to(torch.float64).unsqueeze(1) * torch.pow(base, expo)).float()


def angles_floor_division(positions, head_dim, base=10000.0):
    if head_dim % 2:
        raise ValueError(f"head_dim={head_dim} is odd")
    i = torch.arange(head_dim // 2)
    inv_freq = float(base) ** (-2 * i // head_dim).double()
    return (positions[:, None].double() * inv_freq).float()


def angles_fixed_base(positions, head_dim, base=10000.0):
    if head_dim % 2:
        raise ValueError(f"head_dim={head_dim} is odd")
    idx = torch.arange(head_dim // 2, dtype=torch.float64)
    theta = 10000.0 ** (-2 * idx / head_dim)
    return (positions.double()[:, None] * theta).to(torch.float32)


def angles_linspace(positions, head_dim, base=10000.0):
    if head_dim % 2:
        raise ValueError(f"head_dim={head_dim} is odd")
    frac = torch.linspace(0, 1, head_dim // 2, dtype=torch.float64)  # meant 2i/d
    return (positions.double()[:, None] * base ** (-frac)).float()


# ============================================================ rope_angles: right
def angles_numpy(positions, head_dim, base=10000.0):
    if head_dim % 2 == 1:
        raise ValueError(f"head_dim={head_dim} is odd; RoPE needs pairs")
    pos = positions.cpu().numpy().astype(np.float64)
    inv = np.power(float(base), -np.arange(0, head_dim, 2, dtype=np.float64) / head_dim)
    return torch.from_numpy(np.outer(pos, inv)).to(torch.float32).to(positions.device)


def angles_python_loops(positions, head_dim, base=10000.0):
    if head_dim & 1:
        raise ValueError(f"head_dim={head_dim} cannot be split into pairs")
    half = head_dim // 2
    rows = [[float(p) * math.exp(-math.log(base) * 2 * i / head_dim) for i in range(half)]
            for p in positions.tolist()]
    return torch.tensor(rows, dtype=torch.float64).reshape(len(rows), half).float()


# ============================================================ apply_rope: wrong
def rope_interleaved_pairs(x, positions, base=10000.0):
    d = x.shape[-1]
    if d % 2:
        raise ValueError(f"head_dim={d} is odd")
    ct = torch.promote_types(x.dtype, torch.float32)
    inv = base ** (-2 * torch.arange(d // 2, dtype=torch.float64) / d)
    ang = (positions.double()[:, None] * inv).to(ct)
    c, s = ang.cos(), ang.sin()
    xe, xo = x[..., 0::2].to(ct), x[..., 1::2].to(ct)
    ye = xe * c - xo * s
    yo = xe * s + xo * c
    return torch.stack([ye, yo], dim=-1).flatten(-2).to(x.dtype)


def rope_negative_angle(x, positions, base=10000.0):
    d = x.shape[-1]
    if d % 2:
        raise ValueError(f"head_dim={d} is odd")
    ct = torch.promote_types(x.dtype, torch.float32)
    h = d // 2
    theta = positions.double()[:, None] * base ** (-2.0 * torch.arange(h, dtype=torch.float64) / d)
    cos, sin = theta.cos().to(ct), theta.sin().to(ct)
    a, b = x[..., :h].to(ct), x[..., h:].to(ct)
    return torch.cat([a * cos + b * sin, -a * sin + b * cos], dim=-1).to(x.dtype)


def rope_angles_in_x_dtype(x, positions, base=10000.0):
    d = x.shape[-1]
    if d % 2:
        raise ValueError(f"head_dim={d} is odd")
    h = d // 2
    inv = base ** (-2 * torch.arange(h, dtype=x.dtype) / d)
    ang = positions.to(x.dtype)[:, None] * inv
    cos, sin = torch.cos(ang), torch.sin(ang)
    x1, x2 = x[..., :h], x[..., h:]
    return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1)


def rope_halves_swapped(x, positions, base=10000.0):
    d = x.shape[-1]
    if d % 2:
        raise ValueError(f"head_dim={d} is odd")
    ct = torch.promote_types(x.dtype, torch.float32)
    half = d // 2
    ang = (positions.double().unsqueeze(-1)
           * base ** (-2 * torch.arange(half, dtype=torch.float64) / d)).to(ct)
    x1, x2 = x[..., :half].to(ct), x[..., half:].to(ct)
    y1 = x1 * ang.cos() - x2 * ang.sin()
    y2 = x1 * ang.sin() + x2 * ang.cos()
    return torch.cat([y2, y1], dim=-1).to(x.dtype)


def rope_no_odd_check(x, positions, base=10000.0):
    d = x.shape[-1]
    ct = torch.promote_types(x.dtype, torch.float32)
    half = d // 2
    ang = (positions.double()[:, None]
           * base ** (-2 * torch.arange(half, dtype=torch.float64) / d)).to(ct)
    lo, hi = x[..., :half].to(ct), x[..., half:].to(ct)
    out = torch.cat([lo * ang.cos() - hi * ang.sin(), lo * ang.sin() + hi * ang.cos()], -1)
    return out.to(x.dtype)


def rope_head_dim_from_wrong_axis(x, positions, base=10000.0):
    n, d = x.shape[-2], x.shape[-1]
    if d % 2:
        raise ValueError(f"head_dim={d} is odd")
    ct = torch.promote_types(x.dtype, torch.float32)
    half = d // 2
    dim = x.shape[-2]  # head_dim
    inv = base ** (-2 * torch.arange(half, dtype=torch.float64) / dim)
    ang = (positions.double()[:, None] * inv).to(ct)
    x1, x2 = x[..., :half].to(ct), x[..., half:].to(ct)
    return torch.cat([x1 * ang.cos() - x2 * ang.sin(), x1 * ang.sin() + x2 * ang.cos()],
                     dim=-1).to(x.dtype)


# ============================================================ apply_rope: right
def rope_complex_float64(x, positions, base=10000.0):
    d = x.shape[-1]
    if d % 2:
        raise ValueError(f"odd head_dim={d}: no partner for the last feature")
    h = d // 2
    theta = positions.to(torch.float64)[:, None] * torch.pow(
        torch.tensor(float(base), dtype=torch.float64), -torch.arange(0, d, 2, dtype=torch.float64) / d)
    z = torch.complex(x[..., :h].double(), x[..., h:].double())
    z = z * torch.polar(torch.ones_like(theta), theta)
    return torch.cat([z.real, z.imag], dim=-1).to(x.dtype)


def rope_rotate_half(x, positions, base=10000.0):
    d = x.shape[-1]
    if d % 2 != 0:
        raise ValueError(f"head_dim={d} must be even")

    def rotate_half(t):
        a, b = t.chunk(2, dim=-1)
        return torch.cat((-b, a), dim=-1)

    freqs = 1.0 / (float(base) ** (np.arange(0, d, 2) / d))
    emb = np.outer(positions.cpu().numpy().astype(np.float64), freqs)
    emb = torch.from_numpy(np.concatenate([emb, emb], axis=-1))  # (N, d) float64
    xd = x.double()
    return (xd * emb.cos() + rotate_half(xd) * emb.sin()).to(x.dtype)


ENTRIES = [
    Entry("rope_angles", "wrong", "exponent_without_two",
          "the frequency exponent is -i / head_dim instead of -2 i / head_dim, so the "
          "frequencies fall off half as fast", angles_no_factor_two),
    Entry("rope_angles", "wrong", "outer_order",
          "torch.outer(inv_freq, positions) puts frequencies on the rows, returning "
          "(head_dim // 2, N) instead of (N, head_dim // 2)", angles_outer_order),
    Entry("rope_angles", "wrong", "no_odd_check",
          "no check that head_dim is even: an odd head_dim silently gives head_dim // 2 "
          "columns instead of raising ValueError", angles_no_odd_guard),
    Entry("rope_angles", "wrong", "floor_division_exponent",
          "the exponent is written -2 * i // head_dim on integers, which floors to -1 "
          "(or 0) instead of the fraction -2i/head_dim", angles_floor_division),
    Entry("rope_angles", "wrong", "base_hardcoded",
          "the base is hard-coded as 10000.0 and the base argument is ignored",
          angles_fixed_base),
    Entry("rope_angles", "wrong", "linspace_endpoint",
          "torch.linspace(0, 1, head_dim // 2) includes the endpoint 1, so the exponents are "
          "not 2i/head_dim (the last pair gets base**-1)", angles_linspace),
    Entry("rope_angles", "right", "numpy_outer", None, angles_numpy),
    Entry("rope_angles", "right", "python_loops_exp_log", None, angles_python_loops),

    Entry("apply_rope", "wrong", "adjacent_pairs",
          "pairs adjacent features (2i, 2i+1), the original RoFormer/Meta layout, instead of "
          "feature i with i + head_dim/2 (rotate half)", rope_interleaved_pairs),
    Entry("apply_rope", "wrong", "rotates_backwards",
          "the sine terms have the wrong signs (y_i = x_i cos + x_{i+d/2} sin), so each pair "
          "is rotated by minus the angle", rope_negative_angle),
    Entry("apply_rope", "wrong", "angles_in_half_precision",
          "the frequencies and angles are computed in x's dtype, so for bfloat16 inputs "
          "large positions times a frequency lose their precision before cos/sin",
          rope_angles_in_x_dtype),
    Entry("apply_rope", "wrong", "halves_concatenated_backwards",
          "concatenates the rotated halves as [y2, y1] instead of [y1, y2]",
          rope_halves_swapped),
    Entry("apply_rope", "wrong", "no_odd_check",
          "no check that head_dim is even: an odd head_dim crashes with a shape-mismatch "
          "RuntimeError instead of raising ValueError", rope_no_odd_check),
    Entry("apply_rope", "wrong", "head_dim_from_seq_axis",
          "the frequency exponent divides by x.shape[-2] (the sequence length N) instead of "
          "the head dimension x.shape[-1]", rope_head_dim_from_wrong_axis),
    Entry("apply_rope", "right", "complex_multiply_float64", None, rope_complex_float64),
    Entry("apply_rope", "right", "rotate_half_numpy_angles", None, rope_rotate_half),
]
