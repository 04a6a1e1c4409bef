"""Held-out catalogue, lesson 09 (RoPE): rope_angles, apply_rope."""

import math

import torch

from entry import Entry


# ======================================================================== rope_angles: wrong
def angles_missing_two(positions, head_dim, base=10000.0):
    if head_dim % 2 != 0:
        raise ValueError(f"head_dim={head_dim} is odd")
    idx = torch.arange(head_dim // 2, dtype=torch.float64)
    inv_freq = base ** (-idx / head_dim)
    return (positions.double()[:, None] * inv_freq[None, :]).float()


def angles_no_odd_guard(positions, head_dim, base=10000.0):
    half = head_dim // 2
    i = torch.arange(half, dtype=torch.float64)
    freqs = 1.0 / base ** (2 * i / head_dim)
    return torch.outer(positions.to(torch.float64), freqs).to(torch.float32)


def angles_floor_division(positions, head_dim, base=10000.0):
    if head_dim % 2:
        raise ValueError(f"head_dim={head_dim} must be even")
    i = torch.arange(head_dim // 2)
    inv_freq = base ** (-(2 * i) // head_dim)
    return positions.double().unsqueeze(1) * inv_freq.double().unsqueeze(0)


def angles_transposed(positions, head_dim, base=10000.0):
    if head_dim % 2 == 1:
        raise ValueError(f"head_dim={head_dim} is odd")
    exps = torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim
    inv_freq = base ** (-exps)
    return (inv_freq[:, None] * positions.double()[None, :]).float()


def angles_linspace(positions, head_dim, base=10000.0):
    if head_dim % 2:
        raise ValueError(f"head_dim={head_dim} is odd, RoPE needs pairs")
    exponents = torch.linspace(0, 1, head_dim // 2, dtype=torch.float64)
    inv_freq = base ** -exponents
    return torch.outer(positions.double(), inv_freq).float()


def angles_precedence(positions, head_dim, base=10000.0):
    if head_dim % 2:
        raise ValueError(f"head_dim={head_dim} is odd")
    i = torch.arange(head_dim // 2, dtype=torch.float64)
    theta = base ** (-2 * i) / head_dim
    return (positions.to(torch.float64)[:, None] * theta).to(torch.float32)


# ======================================================================== rope_angles: right
def angles_exp_log(positions, head_dim, base=10000.0):
    if head_dim % 2 != 0:
        raise ValueError(f"head_dim={head_dim} is odd")
    half = head_dim // 2
    i = torch.arange(half, dtype=torch.float64)
    log_inv = -math.log(base) * (2.0 * i / head_dim)
    return (positions.double().reshape(-1, 1) * torch.exp(log_inv)).float()


def angles_python_lists(positions, head_dim, base=10000.0):
    if head_dim & 1:
        raise ValueError(f"head_dim={head_dim} is odd")
    half = head_dim // 2
    pos = [int(p) for p in positions]
    rows = [[p * math.pow(base, -2.0 * i / head_dim) for i in range(half)] for p in pos]
    return torch.tensor(rows, dtype=torch.float64).reshape(len(pos), half)


# ========================================================================= apply_rope: wrong
def rope_adjacent_pairs(x, positions, base=10000.0):
    d = x.shape[-1]
    if d % 2:
        raise ValueError(f"head_dim={d} is odd")
    ct = torch.promote_types(x.dtype, torch.float32)
    i = torch.arange(d // 2, dtype=torch.float64)
    ang = (positions.double()[:, None] * base ** (-2 * i / d)).to(ct)
    cos, sin = ang.cos(), ang.sin()
    even, odd = x[..., 0::2].to(ct), x[..., 1::2].to(ct)
    r_even = even * cos - odd * sin
    r_odd = even * sin + odd * cos
    return torch.stack([r_even, r_odd], dim=-1).flatten(-2).to(x.dtype)


def rope_wrong_sign(x, positions, base=10000.0):
    head_dim = x.shape[-1]
    if head_dim % 2:
        raise ValueError(f"head_dim={head_dim} is odd")
    compute = torch.promote_types(x.dtype, torch.float32)
    half = head_dim // 2
    inv = base ** (-2.0 * torch.arange(half, dtype=torch.float64) / head_dim)
    theta = (positions.to(torch.float64)[:, None] * inv).to(compute)
    c, s = torch.cos(theta), torch.sin(theta)
    a, b = x[..., :half].to(compute), x[..., half:].to(compute)
    y1 = a * c + b * s
    y2 = -a * s + b * c
    return torch.cat([y1, y2], dim=-1).to(x.dtype)


def rope_angles_in_x_dtype(x, positions, base=10000.0):
    d = x.size(-1)
    if d % 2:
        raise ValueError(f"head_dim={d} is odd")
    h = d // 2
    pos = positions.to(x.dtype)
    inv_freq = (base ** (-2 * torch.arange(h, dtype=torch.float64) / d)).to(x.dtype)
    ang = pos[:, None] * inv_freq[None, :]
    ct = torch.promote_types(x.dtype, torch.float32)
    cos, sin = ang.to(ct).cos(), ang.to(ct).sin()
    x1, x2 = x[..., :h].to(ct), x[..., h:].to(ct)
    return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1).to(x.dtype)


def rope_no_odd_guard(x, positions, base=10000.0):
    dim = x.shape[-1]
    half = dim // 2
    ct = torch.promote_types(x.dtype, torch.float32)
    freq = base ** (-2.0 * torch.arange(half, dtype=torch.float64) / dim)
    ang = (positions.double()[:, None] * freq).to(ct)
    x1 = x[..., :half].to(ct)
    x2 = x[..., half:].to(ct)
    out = torch.cat([x1 * ang.cos() - x2 * ang.sin(), x1 * ang.sin() + x2 * ang.cos()], -1)
    return out.to(x.dtype)


def rope_repeat_interleave(x, positions, base=10000.0):
    d = x.shape[-1]
    if d % 2:
        raise ValueError(f"head_dim={d} is odd")
    ct = torch.promote_types(x.dtype, torch.float32)
    inv_freq = 1.0 / (base ** (torch.arange(0, d, 2, dtype=torch.float64) / d))
    freqs = positions.double()[:, None] * inv_freq[None, :]  # (N, d/2)
    emb = freqs.repeat_interleave(2, dim=-1).to(ct)  # (N, d)
    xf = x.to(ct)
    x1, x2 = xf[..., : d // 2], xf[..., d // 2:]
    rotated = torch.cat([-x2, x1], dim=-1)
    return (xf * emb.cos() + rotated * emb.sin()).to(x.dtype)


def rope_ignores_positions(x, positions, base=10000.0):
    n, d = x.shape[-2], x.shape[-1]
    if d % 2:
        raise ValueError(f"head_dim={d} is odd")
    ct = torch.promote_types(x.dtype, torch.float32)
    pos = torch.arange(n, dtype=torch.float64)
    i = torch.arange(d // 2, dtype=torch.float64)
    theta = (pos[:, None] * base ** (-2 * i / d)).to(ct)
    lo, hi = x[..., : d // 2].to(ct), x[..., d // 2:].to(ct)
    return torch.cat([lo * theta.cos() - hi * theta.sin(),
                      lo * theta.sin() + hi * theta.cos()], dim=-1).to(x.dtype)


# ========================================================================= apply_rope: right
def rope_complex(x, positions, base=10000.0):
    d = x.shape[-1]
    if d % 2:
        raise ValueError(f"head_dim={d} is odd")
    half = d // 2
    i = torch.arange(half, dtype=torch.float64)
    ang = positions.double()[:, None] * torch.pow(torch.tensor(float(base), dtype=torch.float64),
                                                  -2 * i / d)
    rot = torch.polar(torch.ones_like(ang), ang)  # e^{i angle}, complex128
    z = torch.complex(x[..., :half].double(), x[..., half:].double()) * rot
    return torch.cat([z.real, z.imag], dim=-1).to(x.dtype)


def rope_rotate_half_hf(x, positions, base=10000.0):
    head_dim = x.shape[-1]
    if head_dim % 2 == 1:
        raise ValueError(f"head_dim={head_dim} is odd")
    work = torch.promote_types(x.dtype, torch.float32)
    inv_freq = 1.0 / (base ** (torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim))
    freqs = torch.outer(positions.double(), inv_freq)
    emb = torch.cat((freqs, freqs), dim=-1).to(work)  # (N, d): same angle for i and i + d/2

    def rotate_half(t):
        t1, t2 = t[..., : head_dim // 2], t[..., head_dim // 2:]
        return torch.cat((-t2, t1), dim=-1)

    xw = x.to(work)
    return (xw * emb.cos() + rotate_half(xw) * emb.sin()).to(x.dtype)


ENTRIES = [
    Entry("rope_angles", "wrong", "exponent_missing_two",
          "the exponent is -i / head_dim instead of -2 i / head_dim, so the frequencies fall "
          "off half as fast as RoPE's",
          angles_missing_two),
    Entry("rope_angles", "wrong", "no_odd_guard",
          "an odd head_dim is not rejected: it silently returns head_dim // 2 columns instead "
          "of raising ValueError",
          angles_no_odd_guard),
    Entry("rope_angles", "wrong", "floor_division_exponent",
          "the exponent is computed with `//` on integers, -(2 i) // head_dim, which floors to "
          "0 or -1, so every frequency after the first is 1 / base",
          angles_floor_division),
    Entry("rope_angles", "wrong", "transposed_outer",
          "the outer product is frequencies x positions, so it returns the transpose, "
          "(head_dim // 2, N) instead of (N, head_dim // 2)",
          angles_transposed),
    Entry("rope_angles", "wrong", "linspace_endpoint",
          "torch.linspace(0, 1, head_dim // 2) includes the endpoint 1, so the exponents are "
          "spaced 1/(d/2 - 1) instead of 2/d and the last frequency is 1/base",
          angles_linspace),
    Entry("rope_angles", "wrong", "precedence_power_then_divide",
          "`base ** (-2 * i) / head_dim` raises base to -2 i and then divides by head_dim: the "
          "division belongs inside the exponent",
          angles_precedence),
    Entry("rope_angles", "right", "exp_log_float64", None, angles_exp_log),
    Entry("rope_angles", "right", "python_lists", None, angles_python_lists),

    Entry("apply_rope", "wrong", "adjacent_pairs",
          "it rotates adjacent features (2i, 2i + 1), the GPT-J layout, instead of pairing "
          "feature i with feature i + head_dim / 2 (rotate-half)",
          rope_adjacent_pairs),
    Entry("apply_rope", "wrong", "rotation_sign_flipped",
          "the signs of the sine terms are swapped (y1 = x1 cos + x2 sin), so each pair turns "
          "by -angle instead of +angle",
          rope_wrong_sign),
    Entry("apply_rope", "wrong", "angles_in_half_precision",
          "positions and frequencies are cast to x's dtype before multiplying, so with "
          "bfloat16 inputs positions such as 257 or 2047 are rounded and the angles are wrong",
          rope_angles_in_x_dtype),
    Entry("apply_rope", "wrong", "no_odd_guard",
          "an odd head_dim is not checked, so the halves do not line up and it raises a "
          "RuntimeError from broadcasting instead of a ValueError",
          rope_no_odd_guard),
    Entry("apply_rope", "wrong", "repeat_interleave_angles",
          "the angles are widened with repeat_interleave (a0 a0 a1 a1 ...) while the features "
          "are paired rotate-half style, which needs cat([angles, angles]) (a0 a1 ... a0 a1 ...)",
          rope_repeat_interleave),
    Entry("apply_rope", "wrong", "arange_not_positions",
          "it rotates by torch.arange(N) instead of the given positions, so unsorted or offset "
          "positions are ignored",
          rope_ignores_positions),
    Entry("apply_rope", "right", "complex_multiply", None, rope_complex),
    Entry("apply_rope", "right", "rotate_half_hf", None, rope_rotate_half_hf),
]
