"""Held-out catalogue, lesson 09 (RoPE): rope_angles, apply_rope."""

import math

import torch

from entry import Entry


# =============================================================================================
# rope_angles
# =============================================================================================

def angles_ignore_base(positions, head_dim, base=10000.0):
    if head_dim % 2 != 0:
        raise ValueError(f"head_dim={head_dim} must be even")
    i = torch.arange(head_dim // 2, dtype=torch.float64)
    inv_freq = 10000.0 ** (-2 * i / head_dim)
    return (positions.double()[:, None] * inv_freq[None, :]).float()


def angles_double_counted_two(positions, head_dim, base=10000.0):
    if head_dim % 2:
        raise ValueError(f"head_dim={head_dim} is odd")
    i = torch.arange(0, head_dim, 2, dtype=torch.float64)  # 0, 2, 4, ...
    freqs = base ** (-2 * i / head_dim)
    return torch.outer(positions.to(torch.float64), freqs).to(torch.float32)


def angles_no_odd_check(positions, head_dim, base=10000.0):
    half = head_dim // 2
    exps = torch.arange(half, dtype=torch.float64) * (-2.0 / head_dim)
    return positions.to(torch.float64).unsqueeze(1) * torch.pow(torch.tensor(base, dtype=torch.float64), exps)


def angles_floor_division_exponent(positions, head_dim, base=10000.0):
    if head_dim % 2 == 1:
        raise ValueError(f"head_dim={head_dim} is odd")
    i = torch.arange(head_dim // 2)
    theta = base ** (-2 * i // head_dim)
    return positions[:, None].to(torch.float32) * theta[None, :].to(torch.float32)


def angles_precedence(positions, head_dim, base=10000.0):
    if head_dim % 2:
        raise ValueError(f"head_dim={head_dim} is odd; RoPE needs pairs")
    idx = torch.arange(head_dim // 2, dtype=torch.float64)
    rate = base ** -2 * idx / head_dim
    return positions.double()[:, None] * rate


def angles_transposed(positions, head_dim, base=10000.0):
    if head_dim % 2:
        raise ValueError(f"head_dim={head_dim} is odd")
    i = torch.arange(head_dim // 2, dtype=torch.float64)
    inv = base ** (-2.0 * i / head_dim)
    return torch.outer(inv, positions.double()).float()  # (head_dim // 2, N)


def angles_log_space_python(positions, head_dim, base=10000.0):
    if head_dim % 2 != 0:
        raise ValueError(f"head_dim={head_dim} is odd")
    half = head_dim // 2
    log_base = math.log(base)
    freqs = [math.exp(-2.0 * i / head_dim * log_base) for i in range(half)]
    rows = [[int(p) * f for f in freqs] for p in positions.tolist()]
    return torch.tensor(rows, dtype=torch.float64).reshape(len(rows), half)


def angles_linspace_power(positions, head_dim, base=10000.0):
    if head_dim % 2 == 1:
        raise ValueError(f"head_dim={head_dim} is odd, cannot pair features")
    half = head_dim // 2
    # exponents 0, 2/d, 4/d, ..., (d-2)/d
    expo = torch.linspace(0.0, (head_dim - 2) / head_dim, steps=half, dtype=torch.float64)
    inv = torch.float_power(torch.tensor(float(base)), -expo)
    return torch.einsum("n,i->ni", positions.to(torch.float64), inv)


# =============================================================================================
# apply_rope
# =============================================================================================

def rope_adjacent_pairs(x, positions, base=10000.0):
    d = x.shape[-1]
    if d % 2:
        raise ValueError(f"head_dim={d} is odd")
    ct = torch.promote_types(x.dtype, torch.float32)
    i = torch.arange(d // 2, dtype=torch.float64)
    ang = (positions.double()[:, None] * base ** (-2 * i / d)).to(ct)
    c, s = ang.cos(), ang.sin()
    xe, xo = x[..., 0::2].to(ct), x[..., 1::2].to(ct)
    ye = xe * c - xo * s
    yo = xe * s + xo * c
    return torch.stack([ye, yo], dim=-1).flatten(-2).to(x.dtype)


def rope_rotate_half_sign(x, positions, base=10000.0):
    d = x.shape[-1]
    if d % 2:
        raise ValueError(f"head_dim={d} is odd")
    ct = torch.promote_types(x.dtype, torch.float32)
    half = d // 2
    i = torch.arange(half, dtype=torch.float64)
    ang = (positions.double()[:, None] * base ** (-2 * i / d)).to(ct)
    cos = torch.cat([ang.cos(), ang.cos()], dim=-1)
    sin = torch.cat([ang.sin(), ang.sin()], dim=-1)
    xc = x.to(ct)
    rot = torch.cat([xc[..., half:], -xc[..., :half]], dim=-1)
    return (xc * cos + rot * sin).to(x.dtype)


def rope_angles_in_x_dtype(x, positions, base=10000.0):
    head_dim = x.shape[-1]
    if head_dim % 2:
        raise ValueError(f"head_dim={head_dim} is odd")
    half = head_dim // 2
    pos = positions.to(x.dtype)
    inv = base ** (-2 * torch.arange(half, dtype=torch.float32) / head_dim)
    ang = pos[:, None] * inv.to(x.dtype)  # (N, d/2)
    ang = ang.to(torch.promote_types(x.dtype, torch.float32))
    cos, sin = torch.cos(ang), torch.sin(ang)
    x1 = x[..., :half].to(cos.dtype)
    x2 = x[..., half:].to(cos.dtype)
    return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1).to(x.dtype)


def rope_no_odd_guard(x, positions, base=10000.0):
    d = x.shape[-1]
    half = d // 2
    work = torch.promote_types(x.dtype, torch.float32)
    freq = base ** (-2.0 * torch.arange(half, dtype=torch.float64) / d)
    theta = (positions.to(torch.float64)[:, None] * freq).to(work)
    a, b = x[..., :half].to(work), x[..., half:].to(work)
    out1 = a * theta.cos() - b * theta.sin()
    out2 = a * theta.sin() + b * theta.cos()
    return torch.cat([out1, out2], dim=-1).to(x.dtype)


def rope_cat_default_dim(x, positions, base=10000.0):
    d = x.shape[-1]
    if d % 2 != 0:
        raise ValueError(f"head_dim={d} is odd")
    work = torch.promote_types(x.dtype, torch.float32)
    h = d // 2
    freqs = base ** (-2.0 * torch.arange(h, dtype=torch.float64) / d)
    th = (positions.double().unsqueeze(-1) * freqs).to(work)
    cos_t, sin_t = th.cos(), th.sin()
    lo, hi = x[..., :h].to(work), x[..., h:].to(work)
    return torch.cat((lo * cos_t - hi * sin_t, lo * sin_t + hi * cos_t)).to(x.dtype)


def rope_row_index_positions(x, positions, base=10000.0):
    n, d = x.shape[-2], x.shape[-1]
    if d % 2:
        raise ValueError(f"head_dim={d} is odd")
    work = torch.promote_types(x.dtype, torch.float32)
    half = d // 2
    pos = torch.arange(n, dtype=torch.float64)  # position of each row
    ang = (pos[:, None] * base ** (-2.0 * torch.arange(half, dtype=torch.float64) / d)).to(work)
    x1, x2 = x[..., :half].to(work), x[..., half:].to(work)
    return torch.cat([x1 * ang.cos() - x2 * ang.sin(), x1 * ang.sin() + x2 * ang.cos()], -1).to(x.dtype)


def rope_complex_float64(x, positions, base=10000.0):
    d = x.shape[-1]
    if d % 2:
        raise ValueError(f"head_dim={d} is odd: features must come in pairs")
    half = d // 2
    i = torch.arange(half, dtype=torch.float64)
    theta = positions.to(torch.float64)[:, None] * torch.exp(-2.0 * i / d * math.log(base))
    rotor = torch.polar(torch.ones_like(theta), theta)  # e^{i theta}, (N, d/2)
    z = torch.complex(x[..., :half].double(), x[..., half:].double()) * rotor
    return torch.cat([z.real, z.imag], dim=-1).to(x.dtype)


def rope_rotation_matrices(x, positions, base=10000.0):
    d = x.shape[-1]
    if d % 2 == 1:
        raise ValueError(f"head_dim={d} is odd")
    h = d // 2
    ang = positions.double()[:, None] * (1.0 / float(base) ** (torch.arange(0, d, 2, dtype=torch.float64) / d))
    c, s = torch.cos(ang), torch.sin(ang)
    rot = torch.stack([torch.stack([c, -s], -1), torch.stack([s, c], -1)], -2)  # (N, h, 2, 2)
    pairs = torch.stack([x[..., :h], x[..., h:]], dim=-1).double()  # (..., N, h, 2)
    turned = torch.einsum("nhij,...nhj->...nhi", rot, pairs)
    return torch.cat([turned[..., 0], turned[..., 1]], dim=-1).to(x.dtype)


ENTRIES = [
    # ---- rope_angles
    Entry("rope_angles", "wrong", "base-ignored",
          "The base argument is ignored: the frequencies always use 10000, so base=500000 or "
          "base=100 gives the default angles.",
          angles_ignore_base),
    Entry("rope_angles", "wrong", "even-indices-and-two",
          "It mixes the two ways of writing the exponent: i runs over 0, 2, 4, ... (the "
          "arange(0, d, 2) form) and is still multiplied by 2, so the exponent is -4i/d.",
          angles_double_counted_two),
    Entry("rope_angles", "wrong", "no-odd-check",
          "An odd head_dim is not rejected: it silently returns head_dim // 2 columns instead "
          "of raising ValueError.",
          angles_no_odd_check),
    Entry("rope_angles", "wrong", "floor-division-exponent",
          "The exponent is computed with integer floor division, -2 * i // head_dim, which "
          "rounds every non-zero exponent down to -1 instead of -2i/d.",
          angles_floor_division_exponent),
    Entry("rope_angles", "wrong", "power-precedence",
          "Operator precedence: base ** -2 * i / head_dim computes (base ** -2) * i / head_dim, "
          "not base ** (-2 * i / head_dim).",
          angles_precedence),
    Entry("rope_angles", "wrong", "outer-transposed",
          "torch.outer takes the frequencies first, so the result is (head_dim // 2, N) instead "
          "of (N, head_dim // 2).",
          angles_transposed),
    Entry("rope_angles", "right", "log-space-python-lists", None, angles_log_space_python),
    Entry("rope_angles", "right", "linspace-float-power", None, angles_linspace_power),
    # ---- apply_rope
    Entry("apply_rope", "wrong", "adjacent-pairs",
          "It rotates adjacent features (0, 1), (2, 3), ... (the interleaved GPT-J layout) "
          "instead of pairing feature i with i + d/2 (rotate half).",
          rope_adjacent_pairs),
    Entry("apply_rope", "wrong", "rotate-half-sign",
          "rotate_half is built as cat(x2, -x1) instead of cat(-x2, x1), so every pair turns "
          "by -angle.",
          rope_rotate_half_sign),
    Entry("apply_rope", "wrong", "angles-in-half-precision",
          "Positions and frequencies are multiplied in x's dtype, so for float16 / bfloat16 "
          "inputs large positions are rounded (257 -> 256 in bfloat16) before the angle is taken.",
          rope_angles_in_x_dtype),
    Entry("apply_rope", "wrong", "no-odd-guard",
          "There is no check for an odd head_dim: the two halves then have different widths and "
          "the code crashes with a RuntimeError instead of raising ValueError.",
          rope_no_odd_guard),
    Entry("apply_rope", "wrong", "cat-default-dim",
          "torch.cat without dim joins the two halves along axis 0, not along the feature axis, "
          "so the result has the wrong shape.",
          rope_cat_default_dim),
    Entry("apply_rope", "wrong", "row-index-positions",
          "It ignores the positions argument and rotates row n by angle(n), the row index, so "
          "unsorted or offset positions get the wrong angles.",
          rope_row_index_positions),
    Entry("apply_rope", "right", "complex-float64", None, rope_complex_float64),
    Entry("apply_rope", "right", "2x2-rotation-einsum", None, rope_rotation_matrices),
]
