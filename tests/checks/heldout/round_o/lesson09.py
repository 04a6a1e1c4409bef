"""Held-out catalogue, lesson 09 (rope): rope_angles, apply_rope."""

import math

import torch

from entry import Entry

EX_A = "rope_angles"
EX_R = "apply_rope"


# ============================================================ rope_angles: wrong
def angles_no_factor_two(positions, head_dim, base=10000.0):
    if head_dim % 2:
        raise ValueError(f"head_dim={head_dim} is odd")
    i = torch.arange(head_dim // 2, dtype=torch.float64)
    inv_freq = base ** (-i / head_dim)
    return (positions.to(torch.float64)[:, None] * inv_freq[None, :]).float()


def angles_index_from_one(positions, head_dim, base=10000.0):
    if head_dim % 2 != 0:
        raise ValueError(f"head_dim={head_dim} must be even")
    i = torch.arange(1, head_dim // 2 + 1, dtype=torch.float64)
    freqs = base ** (-2 * i / head_dim)
    return torch.outer(positions.double(), freqs).to(torch.float32)


def angles_bfloat16(positions, head_dim, base=10000.0):
    if head_dim % 2:
        raise ValueError(f"head_dim={head_dim} is odd")
    half = head_dim // 2
    inv = base ** (-2.0 * torch.arange(half, dtype=torch.float32) / head_dim)
    pos = positions.to(torch.bfloat16)  # the dtype the model runs in
    return (pos[:, None] * inv.to(torch.bfloat16)[None, :]).float()


def angles_no_odd_check(positions, head_dim, base=10000.0):
    half = head_dim // 2
    i = torch.arange(half, dtype=torch.float64)
    inv_freq = base ** (-2 * i / head_dim)
    return (positions.double()[:, None] * inv_freq).float()


def angles_transposed(positions, head_dim, base=10000.0):
    if head_dim % 2:
        raise ValueError(f"head_dim={head_dim} is odd")
    inv_freq = base ** (-torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim)
    return (positions.double()[None, :] * inv_freq[:, None]).float()


def angles_precedence(positions, head_dim, base=10000.0):
    if head_dim % 2:
        raise ValueError(f"head_dim={head_dim} is odd")
    i = torch.arange(head_dim // 2, dtype=torch.float64)
    inv_freq = base ** (-2 * i) / head_dim
    return (positions.double()[:, None] * inv_freq[None, :]).float()


# ============================================================ rope_angles: right
def angles_outer_exp_log(positions, head_dim, base=10000.0):
    if head_dim % 2 == 1:
        raise ValueError(f"head_dim={head_dim} is odd: RoPE needs pairs")
    even = torch.arange(0, head_dim, 2, dtype=torch.float64)
    inv_freq = torch.exp(-math.log(base) * even / head_dim)
    return torch.outer(positions.to(torch.float64), inv_freq).to(torch.float32)


def angles_python_pow(positions, head_dim, base=10000.0):
    if head_dim % 2:
        raise ValueError(f"head_dim={head_dim} must be even")
    half = head_dim // 2
    rows = [[int(p) * math.pow(base, -2.0 * i / head_dim) for i in range(half)]
            for p in positions]
    return torch.tensor(rows, dtype=torch.float64).reshape(len(rows), half).float()


# ============================================================ apply_rope: wrong (helpers)
def _angles64(positions, head_dim, base):
    if head_dim % 2:
        raise ValueError(f"head_dim={head_dim} is odd")
    i = torch.arange(head_dim // 2, dtype=torch.float64)
    return positions.to(torch.float64)[:, None] * base ** (-2.0 * i / head_dim)


def rope_adjacent_pairs(x, positions, base=10000.0):
    d = x.shape[-1]
    ct = torch.promote_types(x.dtype, torch.float32)
    ang = _angles64(positions, d, base).to(ct)
    cos, sin = ang.cos(), ang.sin()
    xe, xo = x[..., 0::2].to(ct), x[..., 1::2].to(ct)
    ye = xe * cos - xo * sin
    yo = xe * sin + xo * cos
    return torch.stack([ye, yo], dim=-1).flatten(-2).to(x.dtype)


def rope_sin_sign(x, positions, base=10000.0):
    d = x.shape[-1]
    half = d // 2
    ct = torch.promote_types(x.dtype, torch.float32)
    ang = _angles64(positions, d, base).to(ct)
    c, s = torch.cos(ang), torch.sin(ang)
    a, b = x[..., :half].to(ct), x[..., half:].to(ct)
    return torch.cat([a * c + b * s, b * c - a * s], dim=-1).to(x.dtype)


def rope_angles_in_x_dtype(x, positions, base=10000.0):
    d = x.shape[-1]
    if d % 2:
        raise ValueError(f"head_dim={d} is odd")
    half = d // 2
    inv = base ** (-2.0 * torch.arange(half, dtype=torch.float64) / d)
    ang = positions.to(x.dtype)[:, None] * inv.to(x.dtype)  # angles in x's dtype
    cos, sin = ang.cos().float(), ang.sin().float()
    ct = torch.promote_types(x.dtype, torch.float32)
    x1, x2 = x[..., :half].to(ct), x[..., half:].to(ct)
    return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], -1).to(x.dtype)


def rope_no_odd_check(x, positions, base=10000.0):
    d = x.shape[-1]
    half = d // 2
    ct = torch.promote_types(x.dtype, torch.float32)
    i = torch.arange(half, dtype=torch.float64)
    ang = (positions.double()[:, None] * base ** (-2.0 * i / d)).to(ct)
    x1, x2 = x[..., :half].to(ct), x[..., half:].to(ct)
    y = torch.cat([x1 * ang.cos() - x2 * ang.sin(), x1 * ang.sin() + x2 * ang.cos()], dim=-1)
    return y.to(x.dtype)


def rope_ignores_positions(x, positions, base=10000.0):
    n, d = x.shape[-2], x.shape[-1]
    pos = torch.arange(n)  # token n sits at position n
    ct = torch.promote_types(x.dtype, torch.float32)
    ang = _angles64(pos, d, base).to(ct)
    half = d // 2
    x1, x2 = x[..., :half].to(ct), x[..., half:].to(ct)
    return torch.cat([x1 * ang.cos() - x2 * ang.sin(), x1 * ang.sin() + x2 * ang.cos()],
                     dim=-1).to(x.dtype)


def rope_halves_swapped(x, positions, base=10000.0):
    d = x.shape[-1]
    half = d // 2
    ct = torch.promote_types(x.dtype, torch.float32)
    ang = _angles64(positions, d, base).to(ct)
    cos, sin = torch.cos(ang), torch.sin(ang)
    x1, x2 = x[..., :half].to(ct), x[..., half:].to(ct)
    y1 = x1 * cos - x2 * sin
    y2 = x1 * sin + x2 * cos
    return torch.cat([y2, y1], dim=-1).to(x.dtype)


# ============================================================ apply_rope: right
def rope_complex(x, positions, base=10000.0):
    d = x.shape[-1]
    if d % 2:
        raise ValueError(f"head_dim={d} is odd")
    half = d // 2
    i = torch.arange(half, dtype=torch.float64)
    theta = positions.to(torch.float64)[:, None] * torch.pow(torch.tensor(float(base),
                                                                         dtype=torch.float64),
                                                            -2.0 * i / d)
    rot = torch.polar(torch.ones_like(theta), theta)  # e^{i theta}
    z = torch.complex(x[..., :half].to(torch.float64), x[..., half:].to(torch.float64)) * rot
    return torch.cat([z.real, z.imag], dim=-1).to(x.dtype)


def _rotate_half(t):
    h = t.shape[-1] // 2
    return torch.cat([-t[..., h:], t[..., :h]], dim=-1)


def rope_hf_rotate_half(x, positions, base=10000.0):
    head_dim = x.shape[-1]
    if head_dim % 2 != 0:
        raise ValueError(f"head_dim={head_dim} is odd")
    inv_freq = 1.0 / (base ** (torch.arange(0, head_dim, 2, dtype=torch.int64).double()
                               / head_dim))
    freqs = torch.einsum("n,f->nf", positions.double(), inv_freq)
    emb = torch.cat([freqs, freqs], dim=-1)  # (N, d)
    ct = torch.promote_types(x.dtype, torch.float32)
    xc = x.to(ct)
    y = xc * emb.cos().to(ct) + _rotate_half(xc) * emb.sin().to(ct)
    return y.to(x.dtype)


ENTRIES = [
    Entry(EX_A, "wrong", "exponent_without_two", "The exponent is -i / head_dim, the factor 2 "
          "of -2i / head_dim is missing, so the frequencies fall off half as fast.",
          angles_no_factor_two),
    Entry(EX_A, "wrong", "index_from_one", "The pair index runs 1..head_dim/2 "
          "(torch.arange(1, head_dim//2 + 1)) instead of 0..head_dim/2-1: every frequency is "
          "shifted by one and the first column is not the positions themselves.",
          angles_index_from_one),
    Entry(EX_A, "wrong", "positions_in_bfloat16", "Positions and frequencies are cast to "
          "bfloat16 before the product: with 8 significant bits the frequencies are rounded "
          "and large positions cannot be held (257 becomes 256), so the angles are off.", angles_bfloat16),
    Entry(EX_A, "wrong", "no_odd_check", "There is no check that head_dim is even: an odd "
          "head_dim silently gives head_dim // 2 angles instead of raising ValueError.",
          angles_no_odd_check),
    Entry(EX_A, "wrong", "transposed_broadcast", "The broadcast puts the frequencies on the "
          "rows and positions on the columns, returning (head_dim // 2, N) instead of "
          "(N, head_dim // 2).", angles_transposed),
    Entry(EX_A, "wrong", "precedence_pow_div", "Operator precedence: base ** (-2 * i) / "
          "head_dim divides the power by head_dim instead of putting -2i/head_dim in the "
          "exponent.", angles_precedence),
    Entry(EX_A, "right", "outer_exp_log", None, angles_outer_exp_log),
    Entry(EX_A, "right", "python_math_pow", None, angles_python_pow),
    Entry(EX_R, "wrong", "adjacent_pairs", "It rotates adjacent pairs (2i, 2i+1), the GPT-J "
          "interleaved layout, instead of pairing feature i with i + head_dim/2.",
          rope_adjacent_pairs),
    Entry(EX_R, "wrong", "sin_sign_flipped", "The sin terms have the wrong sign "
          "(y_i = x_i cos + x_{i+d/2} sin), so each pair is rotated by -angle.",
          rope_sin_sign),
    Entry(EX_R, "wrong", "angles_in_x_dtype", "The angles are computed in x's dtype: in "
          "float16/bfloat16 large positions are rounded before the multiplication, so the "
          "rotation angles are wrong for long sequences.", rope_angles_in_x_dtype),
    Entry(EX_R, "wrong", "no_odd_check", "No check for an odd head_dim: the halves have "
          "different widths and it fails with a shape error (RuntimeError) instead of raising "
          "ValueError.", rope_no_odd_check),
    Entry(EX_R, "wrong", "ignores_positions", "The positions argument is ignored: it rotates "
          "token n by angles of position n (torch.arange(N)), wrong for offset or unsorted "
          "positions.", rope_ignores_positions),
    Entry(EX_R, "wrong", "halves_swapped", "The rotated halves are concatenated in the wrong "
          "order (y_{i+d/2} first, then y_i), so the two halves of the result are swapped.",
          rope_halves_swapped),
    Entry(EX_R, "right", "complex_polar_float64", None, rope_complex),
    Entry(EX_R, "right", "hf_rotate_half", None, rope_hf_rotate_half),
]
