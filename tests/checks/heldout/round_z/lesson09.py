"""Held-out catalogue, lesson 09 (RoPE): rope_angles, apply_rope."""

import math

import torch

from entry import Entry


# ============================================================ rope_angles: wrong
def angles_no_odd_check(positions, head_dim, base=10000.0):
    inv = base ** (-torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim)
    return (positions.double()[:, None] * inv[None, :]).float()


def angles_exponent_i_over_d(positions, head_dim, base=10000.0):
    if head_dim % 2 != 0:
        raise ValueError(f"head_dim={head_dim} must be even")
    i = torch.arange(head_dim // 2, dtype=torch.float64)
    freq = base ** (-i / head_dim)
    return torch.outer(positions.to(torch.float64), freq).to(torch.float32)


def angles_linspace(positions, head_dim, base=10000.0):
    if head_dim % 2:
        raise ValueError(f"head_dim={head_dim} is odd")
    frac = torch.linspace(0.0, 1.0, head_dim // 2, dtype=torch.float64)  # 2i/d
    return positions.double().unsqueeze(1) * torch.pow(base, -frac).unsqueeze(0)


def angles_floor_division(positions, head_dim, base=10000.0):
    if head_dim % 2 == 1:
        raise ValueError(f"head_dim={head_dim} must be even")
    i = torch.arange(head_dim // 2)
    expo = -2 * i // head_dim
    freq = torch.tensor(base, dtype=torch.float64) ** expo.double()
    return positions.double()[:, None] * freq


def angles_transposed(positions, head_dim, base=10000.0):
    if head_dim % 2:
        raise ValueError(f"odd head_dim={head_dim}")
    inv_freq = 1.0 / base ** (torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim)
    return (inv_freq[:, None] * positions.double()[None, :]).float()


def angles_index_not_position(positions, head_dim, base=10000.0):
    if head_dim % 2:
        raise ValueError(f"head_dim={head_dim} must be even")
    n = positions.shape[0]
    pos = torch.arange(n, dtype=torch.float64)
    inv_freq = base ** (-2.0 * torch.arange(head_dim // 2, dtype=torch.float64) / head_dim)
    return (pos[:, None] * inv_freq).float()


# ============================================================ rope_angles: right
def angles_loops_math(positions, head_dim, base=10000.0):
    if head_dim % 2 != 0:
        raise ValueError(f"head_dim={head_dim} is odd: RoPE needs pairs")
    half = head_dim // 2
    rows = []
    for p in positions.tolist():
        rows.append([p * math.exp(-2.0 * i / head_dim * math.log(base)) for i in range(half)])
    return torch.tensor(rows, dtype=torch.float64).reshape(len(rows), half)


def angles_outer_log_space(positions, head_dim, base=10000.0):
    if head_dim & 1:
        raise ValueError(f"head_dim={head_dim} must be even")
    exps = torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim
    inv = torch.exp(-exps * math.log(base))
    return torch.einsum("n,i->ni", positions.to(torch.float64), inv)


# ============================================================ apply_rope: wrong
def rope_adjacent_pairs(x, positions, base=10000.0):
    d = x.shape[-1]
    if d % 2:
        raise ValueError(f"head_dim={d} must be even")
    ang = positions.double()[:, None] * (base ** (-2.0 * torch.arange(d // 2,
                                                                      dtype=torch.float64) / d))
    c, s = torch.cos(ang), torch.sin(ang)
    xe, xo = x[..., 0::2].double(), x[..., 1::2].double()
    ye = xe * c - xo * s
    yo = xe * s + xo * c
    return torch.stack([ye, yo], dim=-1).flatten(-2).to(x.dtype)


def rope_wrong_direction(x, positions, base=10000.0):
    d = x.shape[-1]
    if d % 2:
        raise ValueError(f"x's head_dim={d} is odd")
    h = d // 2
    theta = positions.double().unsqueeze(-1) * torch.pow(
        base, -torch.arange(0, d, 2, dtype=torch.float64) / d)
    cos, sin = theta.cos(), theta.sin()
    a, b = x[..., :h].double(), x[..., h:].double()
    return torch.cat([a * cos + b * sin, -a * sin + b * cos], dim=-1).to(x.dtype)


def rope_no_cast_back(x, positions, base=10000.0):
    d = x.shape[-1]
    if d % 2:
        raise ValueError(f"head_dim={d} must be even")
    work = torch.float64 if x.dtype == torch.float64 else torch.float32
    ang = (positions.to(torch.float64)[:, None]
           * base ** (-2.0 * torch.arange(d // 2, dtype=torch.float64) / d)).to(work)
    cos, sin = torch.cos(ang), torch.sin(ang)
    x1, x2 = x[..., : d // 2].to(work), x[..., d // 2:].to(work)
    return torch.cat((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1)


def rope_positions_in_x_dtype(x, positions, base=10000.0):
    d = x.shape[-1]
    if d % 2:
        raise ValueError(f"head_dim={d} must be even")
    pos = positions.to(x.dtype)
    inv = (base ** (-2.0 * torch.arange(d // 2, dtype=torch.float64) / d)).to(x.dtype)
    ang = (pos[:, None] * inv[None, :]).float()
    cos, sin = torch.cos(ang), torch.sin(ang)
    x1, x2 = x[..., : d // 2].float(), x[..., d // 2:].float()
    out = torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1)
    return out.to(x.dtype)


def rope_no_even_check(x, positions, base=10000.0):
    d = x.shape[-1]
    half = d // 2
    freqs = base ** (-2.0 * torch.arange(half, dtype=torch.float64) / d)
    ang = positions.double()[:, None] * freqs[None, :]
    cos, sin = ang.cos(), ang.sin()
    x1, x2 = x[..., :half].double(), x[..., half:].double()
    y1 = x1 * cos - x2 * sin
    y2 = x1 * sin + x2 * cos
    return torch.cat([y1, y2], dim=-1).to(x.dtype)


def rope_copy_paste_x1(x, positions, base=10000.0):
    d = x.shape[-1]
    if d % 2:
        raise ValueError(f"head_dim={d} must be even")
    half = d // 2
    freqs = 1.0 / (base ** (torch.arange(0, d, 2, dtype=torch.float64) / d))
    ang = torch.outer(positions.double(), freqs)
    co, si = ang.cos(), ang.sin()
    first, second = x[..., :half].double(), x[..., half:].double()
    y_first = first * co - first * si
    y_second = first * si + second * co
    return torch.cat([y_first, y_second], -1).to(x.dtype)


# ============================================================ apply_rope: right
def rope_complex(x, positions, base=10000.0):
    d = x.shape[-1]
    if d % 2:
        raise ValueError(f"head_dim={d} is odd: cannot pair features")
    half = d // 2
    theta = positions.to(torch.float64)[:, None] * base ** (
        -2.0 * torch.arange(half, dtype=torch.float64) / d)
    z = torch.complex(x[..., :half].double(), x[..., half:].double())
    z = z * torch.polar(torch.ones_like(theta), theta)
    return torch.cat([z.real, z.imag], dim=-1).to(x.dtype)


def rope_rotate_half(x, positions, base=10000.0):
    d = x.shape[-1]
    if d % 2 == 1:
        raise ValueError(f"head_dim={d} must be even")
    inv_freq = [base ** (-2.0 * i / d) for i in range(d // 2)]
    theta = positions.double()[:, None] * torch.tensor(inv_freq, dtype=torch.float64)
    emb = torch.cat([theta, theta], dim=-1)  # (N, d)
    xd = x.double()
    x1, x2 = xd.chunk(2, dim=-1)
    rotated = torch.cat([-x2, x1], dim=-1)
    return (xd * emb.cos() + rotated * emb.sin()).to(x.dtype)


ENTRIES = [
    Entry("rope_angles", "wrong", "no_odd_head_dim_check",
          "never checks that head_dim is even: an odd head_dim silently returns angles "
          "instead of raising ValueError",
          angles_no_odd_check),
    Entry("rope_angles", "wrong", "exponent_i_over_d",
          "the frequency exponent is -i/head_dim instead of -2i/head_dim, so frequencies fall "
          "off half as fast",
          angles_exponent_i_over_d),
    Entry("rope_angles", "wrong", "linspace_includes_endpoint",
          "builds 2i/d with torch.linspace(0, 1, d/2), which ends at 1 instead of (d-2)/d: "
          "linspace includes its endpoint",
          angles_linspace),
    Entry("rope_angles", "wrong", "integer_floor_division_exponent",
          "computes the exponent -2*i // head_dim on integer tensors, so it is floored to "
          "0 or -1 instead of the fraction -2i/d",
          angles_floor_division),
    Entry("rope_angles", "wrong", "outer_product_transposed",
          "puts frequencies on rows and positions on columns, returning (head_dim/2, N) "
          "instead of (N, head_dim/2)",
          angles_transposed),
    Entry("rope_angles", "wrong", "row_index_not_position",
          "multiplies by the row index n (torch.arange(N)) instead of the value positions[n], "
          "so unsorted or offset positions get the wrong angles",
          angles_index_not_position),
    Entry("rope_angles", "right", "python_loops_exp_log", None, angles_loops_math),
    Entry("rope_angles", "right", "einsum_exp_log_float64", None, angles_outer_log_space),
    Entry("apply_rope", "wrong", "adjacent_pairs",
          "pairs adjacent features (2i, 2i+1), the interleaved GPT-J layout, instead of "
          "feature i with feature i + d/2",
          rope_adjacent_pairs),
    Entry("apply_rope", "wrong", "rotates_backwards",
          "swaps the signs of the sin terms, rotating each pair by -angle instead of +angle",
          rope_wrong_direction),
    Entry("apply_rope", "wrong", "returns_compute_dtype",
          "rotates in float32 and returns float32 for float16/bfloat16 x instead of x's dtype",
          rope_no_cast_back),
    Entry("apply_rope", "wrong", "positions_cast_to_half",
          "casts positions and frequencies to x's half-precision dtype before multiplying, so "
          "large positions and their angles are rounded (2047 becomes 2048 in bfloat16)",
          rope_positions_in_x_dtype),
    Entry("apply_rope", "wrong", "no_even_check",
          "no check that head_dim is even: an odd head_dim crashes with a broadcasting "
          "RuntimeError instead of raising ValueError",
          rope_no_even_check),
    Entry("apply_rope", "wrong", "x1_for_x2_in_first_half",
          "copy-paste slip in the first half: y_i = x_i cos - x_i sin uses x_i where its "
          "partner x_{i+d/2} belongs",
          rope_copy_paste_x1),
    Entry("apply_rope", "right", "complex_multiplication", None, rope_complex),
    Entry("apply_rope", "right", "rotate_half_float64", None, rope_rotate_half),
]
