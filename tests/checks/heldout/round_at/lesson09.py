"""Held-out learners' answers, lesson 09 (RoPE): rope_angles, apply_rope."""

import math

import numpy as np
import torch

from entry import Entry


# ============================================================ rope_angles
def angles_missing_factor_two(positions, head_dim, base=10000.0):
    if head_dim % 2 != 0:
        raise ValueError(f"head_dim={head_dim} must be even")
    i = torch.arange(head_dim // 2, dtype=torch.float64)
    freqs = base ** (-i / head_dim)
    return (positions.double()[:, None] * freqs[None, :]).float()


def angles_index_from_one(positions, head_dim, base=10000.0):
    if head_dim % 2:
        raise ValueError(f"head_dim={head_dim} is odd")
    half = head_dim // 2
    i = torch.arange(1, half + 1, dtype=torch.float64)
    inv = 1.0 / base ** (2 * i / head_dim)
    return torch.outer(positions.to(torch.float64), inv)


def angles_no_odd_check(positions, head_dim, base=10000.0):
    half = head_dim // 2
    idx = torch.arange(half, dtype=torch.float64)
    theta = torch.pow(torch.tensor(float(base), dtype=torch.float64), -2.0 * idx / head_dim)
    return positions.to(torch.float64).unsqueeze(1) * theta.unsqueeze(0)


def angles_floor_division(positions, head_dim, base=10000.0):
    if head_dim % 2 == 1:
        raise ValueError(f"odd head_dim={head_dim}")
    i = torch.arange(head_dim // 2)
    inv_freq = base ** (-2 * i // head_dim).double()
    return positions.double()[:, None] * inv_freq[None, :]


def angles_no_outer(positions, head_dim, base=10000.0):
    if head_dim % 2:
        raise ValueError(f"head_dim={head_dim} must be even")
    i = torch.arange(0, head_dim, 2, dtype=torch.float64)
    inv_freq = base ** (-i / head_dim)
    return positions.double() * inv_freq


def angles_hardcoded_base(positions, head_dim, base=10000.0):
    if head_dim % 2:
        raise ValueError(f"head_dim={head_dim} must be even")
    exps = torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim
    inv_freq = 1.0 / (10000.0 ** exps)
    return positions[:, None].double() * inv_freq[None, :]


def angles_exp_log_numpy(positions, head_dim, base=10000.0):
    if head_dim % 2 != 0:
        raise ValueError(f"rope_angles: head_dim={head_dim} is odd; it must be even")
    pos = positions.detach().cpu().numpy().astype(np.float64)
    i = np.arange(head_dim // 2, dtype=np.float64)
    inv = np.exp(-(2.0 * i / head_dim) * math.log(base))
    return torch.from_numpy(np.multiply.outer(pos, inv)).to(torch.float32)


def angles_python_loops(positions, head_dim, base=10000.0):
    if head_dim % 2:
        raise ValueError(f"head_dim={head_dim} is odd")
    half = head_dim // 2
    table = []
    for p in positions.tolist():
        table.append([p * math.pow(base, -2.0 * j / head_dim) for j in range(half)])
    return torch.tensor(table, dtype=torch.float64).reshape(len(table), half)


# ============================================================ apply_rope
def rope_adjacent_pairs(x, positions, base=10000.0):
    d = x.shape[-1]
    if d % 2:
        raise ValueError(f"head_dim={d} must be even")
    i = torch.arange(d // 2, dtype=torch.float64)
    ang = positions.double()[:, None] * base ** (-2 * i / d)
    c, s = torch.cos(ang), torch.sin(ang)
    xf = x.double()
    xe, xo = xf[..., 0::2], xf[..., 1::2]
    ye = xe * c - xo * s
    yo = xe * s + xo * c
    y = torch.stack([ye, yo], dim=-1).flatten(-2)
    return y.to(x.dtype)


def rope_rotates_backwards(x, positions, base=10000.0):
    hd = x.shape[-1]
    if hd % 2:
        raise ValueError(f"head_dim={hd} is odd")
    h = hd // 2
    freq = base ** (-2.0 * torch.arange(h, dtype=torch.float64) / hd)
    theta = positions.double().unsqueeze(-1) * freq
    cos, sin = theta.cos(), theta.sin()
    a, b = x[..., :h].double(), x[..., h:].double()
    return torch.cat([a * cos + b * sin, -a * sin + b * cos], dim=-1).to(x.dtype)


def rope_angles_in_x_dtype(x, positions, base=10000.0):
    d = x.shape[-1]
    if d % 2:
        raise ValueError(f"head_dim={d} must be even")
    half = d // 2
    inv = base ** (-2.0 * torch.arange(half, dtype=torch.float64) / d)
    angles = (positions[:, None].to(x.dtype) * inv.to(x.dtype)[None, :])
    cos, sin = torch.cos(angles).float(), torch.sin(angles).float()
    x1, x2 = x[..., :half].float(), x[..., half:].float()
    y = torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1)
    return y.to(x.dtype)


def rope_ignores_positions(x, positions, base=10000.0):
    n, d = x.shape[-2], x.shape[-1]
    if d % 2:
        raise ValueError(f"head_dim={d} must be even")
    half = d // 2
    pos = torch.arange(n, dtype=torch.float64)
    inv = base ** (-2.0 * torch.arange(half, dtype=torch.float64) / d)
    ang = pos[:, None] * inv[None, :]
    x1, x2 = x[..., :half].double(), x[..., half:].double()
    out = torch.cat([x1 * ang.cos() - x2 * ang.sin(), x1 * ang.sin() + x2 * ang.cos()], -1)
    return out.to(x.dtype)


def rope_no_odd_check(x, positions, base=10000.0):
    head_dim = x.shape[-1]
    half = head_dim // 2
    i = torch.arange(half, dtype=torch.float64)
    angles = torch.outer(positions.double(), base ** (-2 * i / head_dim))
    cos, sin = torch.cos(angles), torch.sin(angles)
    x1 = x[..., :half].double()
    x2 = x[..., half:].double()
    y1 = x1 * cos - x2 * sin
    y2 = x1 * sin + x2 * cos
    return torch.cat((y1, y2), dim=-1).to(x.dtype)


def rope_positive_exponent(x, positions, base=10000.0):
    d = x.shape[-1]
    if d % 2:
        raise ValueError(f"head_dim={d} must be even")
    half = d // 2
    freqs = base ** (2.0 * torch.arange(half, dtype=torch.float64) / d)
    ang = positions.double()[:, None] * freqs[None, :]
    c, s = torch.cos(ang), torch.sin(ang)
    lo, hi = x[..., :half].double(), x[..., half:].double()
    return torch.cat([lo * c - hi * s, lo * s + hi * c], dim=-1).to(x.dtype)


def rope_complex_multiply(x, positions, base=10000.0):
    d = x.shape[-1]
    if d % 2 != 0:
        raise ValueError(f"apply_rope: head_dim={d} is odd, it must be even")
    half = d // 2
    inv = torch.exp(-math.log(base) * torch.arange(0, d, 2, dtype=torch.float64) / d)
    ang = positions.to(torch.float64)[:, None] * inv
    rot = torch.polar(torch.ones_like(ang), ang)  # e^{i angle}, (N, d/2)
    z = torch.complex(x[..., :half].double(), x[..., half:].double()) * rot
    return torch.cat([z.real, z.imag], dim=-1).to(x.dtype)


def rope_rotate_half_full_width(x, positions, base=10000.0):
    head_dim = x.shape[-1]
    if head_dim % 2:
        raise ValueError(f"head_dim={head_dim} is odd")
    inv_freq = 1.0 / (base ** (torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim))
    freqs = torch.einsum("n,f->nf", positions.double(), inv_freq)
    emb = torch.cat((freqs, freqs), dim=-1)  # (N, d)

    def rotate_half(t):
        t1, t2 = t[..., : t.shape[-1] // 2], t[..., t.shape[-1] // 2:]
        return torch.cat((-t2, t1), dim=-1)

    xd = x.double()
    return (xd * emb.cos() + rotate_half(xd) * emb.sin()).to(x.dtype)


ENTRIES = [
    Entry("rope_angles", "wrong", "missing_factor_two",
          "exponent -i / head_dim instead of -2 i / head_dim: the frequencies decay half as "
          "fast as RoPE's",
          angles_missing_factor_two),
    Entry("rope_angles", "wrong", "index_from_one",
          "pair index runs 1 .. head_dim/2 instead of 0 .. head_dim/2 - 1, so every frequency "
          "is shifted by one pair (the first is not 1)",
          angles_index_from_one),
    Entry("rope_angles", "wrong", "no_odd_check",
          "no check of head_dim: an odd head_dim silently gives head_dim // 2 angles instead "
          "of raising ValueError",
          angles_no_odd_check),
    Entry("rope_angles", "wrong", "integer_floor_division",
          "writes -2 * i // head_dim on integer tensors: floor division happens before the "
          "power, so every exponent is 0 or -1",
          angles_floor_division),
    Entry("rope_angles", "wrong", "no_outer_product",
          "multiplies positions (N,) by the frequencies (head_dim/2,) elementwise without "
          "[:, None]: no outer product (wrong shape or a broadcasting error)",
          angles_no_outer),
    Entry("rope_angles", "wrong", "hardcoded_base",
          "uses the literal 10000.0 instead of the base argument",
          angles_hardcoded_base),
    Entry("rope_angles", "right", "exp_log_numpy", None, angles_exp_log_numpy),
    Entry("rope_angles", "right", "python_loops_math_pow", None, angles_python_loops),
    Entry("apply_rope", "wrong", "adjacent_pairs",
          "rotates adjacent pairs (x_0, x_1), (x_2, x_3)... (the original RoFormer layout) "
          "instead of pairing feature i with i + head_dim/2",
          rope_adjacent_pairs),
    Entry("apply_rope", "wrong", "rotates_backwards",
          "sign slip: y_i = x_i cos + x_{i+d/2} sin and y_{i+d/2} = -x_i sin + x_{i+d/2} cos "
          "rotate by -angle",
          rope_rotates_backwards),
    Entry("apply_rope", "wrong", "angles_in_half_precision",
          "computes the angles position * frequency in x's dtype: in float16/bfloat16 angles "
          "of hundreds of radians lose their fractional part",
          rope_angles_in_x_dtype),
    Entry("apply_rope", "wrong", "ignores_positions",
          "uses torch.arange(N) as the positions instead of the positions argument",
          rope_ignores_positions),
    Entry("apply_rope", "wrong", "no_odd_check",
          "no check of head_dim: an odd head_dim fails with a RuntimeError from mismatched "
          "halves instead of a ValueError",
          rope_no_odd_check),
    Entry("apply_rope", "wrong", "positive_exponent",
          "frequencies base ** (+2i/d) instead of base ** (-2i/d): high pairs spin fastest",
          rope_positive_exponent),
    Entry("apply_rope", "right", "complex_multiply", None, rope_complex_multiply),
    Entry("apply_rope", "right", "rotate_half_full_width", None, rope_rotate_half_full_width),
]
