"""Held-out catalogue, lesson 09 (RoPE): rope_angles, apply_rope."""

import math

import torch

from entry import Entry


# ============================================================ rope_angles: wrong
def angles_i_over_d(positions, head_dim, base=10000.0):
    if head_dim % 2:
        raise ValueError(f"head_dim={head_dim} is odd")
    i = torch.arange(head_dim // 2, dtype=torch.float64)
    inv_freq = base ** (-i / head_dim)
    return (positions.double()[:, None] * inv_freq[None, :]).float()


def angles_assert_guard(positions, head_dim, base=10000.0):
    assert head_dim % 2 == 0, "head_dim must be even"
    half = head_dim // 2
    freqs = torch.tensor([base ** (-2 * i / head_dim) for i in range(half)],
                         dtype=torch.float64)
    return positions.to(torch.float64).unsqueeze(1) * freqs.unsqueeze(0)


def angles_floor_division(positions, head_dim, base=10000.0):
    if head_dim % 2 != 0:
        raise ValueError(f"head_dim={head_dim} must be even")
    i = torch.arange(head_dim // 2)
    inv_freq = float(base) ** (-2 * i // head_dim).double()
    return positions.double()[:, None] * inv_freq


def angles_outer_transposed(positions, head_dim, base=10000.0):
    if head_dim % 2:
        raise ValueError(f"head_dim={head_dim} is odd")
    exps = torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim
    inv_freq = 1.0 / (base ** exps)
    return torch.outer(inv_freq, positions.to(torch.float64))


def angles_index_from_one(positions, head_dim, base=10000.0):
    if head_dim % 2 == 1:
        raise ValueError(f"head_dim={head_dim} is odd: RoPE needs pairs")
    i = torch.arange(1, head_dim // 2 + 1, dtype=torch.float64)
    theta = base ** (-2.0 * i / head_dim)
    return positions.double().unsqueeze(-1) * theta


def angles_positive_exponent(positions, head_dim, base=10000.0):
    if head_dim % 2:
        raise ValueError(f"head_dim={head_dim} is odd")
    half = head_dim // 2
    i = torch.arange(half, dtype=torch.float64)
    freq = torch.pow(torch.tensor(float(base), dtype=torch.float64), 2 * i / head_dim)
    return positions.to(torch.float64)[:, None] * freq


# ============================================================ rope_angles: right
def angles_math_loops(positions, head_dim, base=10000.0):
    if head_dim % 2 != 0:
        raise ValueError(f"head_dim={head_dim} is odd, RoPE rotates pairs")
    half = head_dim // 2
    rows = []
    for p in positions.tolist():
        rows.append([p * math.pow(base, -2.0 * i / head_dim) for i in range(half)])
    out = torch.tensor(rows, dtype=torch.float64)
    return out.reshape(len(rows), half)


def angles_exp_log(positions, head_dim, base=10000.0):
    if head_dim & 1:
        raise ValueError(f"head_dim={head_dim} is odd")
    i = torch.arange(head_dim // 2, dtype=torch.float64)
    inv_freq = torch.exp(-(2.0 * i / head_dim) * math.log(base))
    return positions.to(torch.float64).unsqueeze(1) * inv_freq.unsqueeze(0)


# ============================================================ apply_rope: wrong
def rope_adjacent_pairs(x, positions, base=10000.0):
    d = x.shape[-1]
    if d % 2:
        raise ValueError(f"head_dim={d} is odd")
    ct = torch.promote_types(x.dtype, torch.float32)
    i = torch.arange(d // 2, dtype=torch.float64)
    ang = (positions.double()[:, None] * base ** (-2 * i / d)).to(ct)
    cos, sin = ang.cos(), ang.sin()
    xe, xo = x[..., 0::2].to(ct), x[..., 1::2].to(ct)
    ye = xe * cos - xo * sin
    yo = xe * sin + xo * cos
    return torch.stack([ye, yo], dim=-1).flatten(-2).to(x.dtype)


def rope_sign_flipped(x, positions, base=10000.0):
    d = x.shape[-1]
    if d % 2:
        raise ValueError(f"head_dim={d} is odd")
    h = d // 2
    comp = torch.promote_types(x.dtype, torch.float32)
    freqs = base ** (-2.0 * torch.arange(h, dtype=torch.float64) / d)
    theta = (positions.to(torch.float64)[:, None] * freqs).to(comp)
    c, s = torch.cos(theta), torch.sin(theta)
    a, b = x[..., :h].to(comp), x[..., h:].to(comp)
    return torch.cat([a * c + b * s, -a * s + b * c], dim=-1).to(x.dtype)


def rope_angles_in_x_dtype(x, positions, base=10000.0):
    d = x.shape[-1]
    if d % 2:
        raise ValueError(f"head_dim={d} is odd")
    half = d // 2
    pos = positions.to(x.dtype)
    inv = base ** (-2 * torch.arange(half, dtype=x.dtype) / d)
    ang = pos[:, None] * inv[None, :]
    ct = torch.promote_types(x.dtype, torch.float32)
    cos, sin = ang.to(ct).cos(), ang.to(ct).sin()
    x1, x2 = x[..., :half].to(ct), x[..., half:].to(ct)
    return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1).to(x.dtype)


def rope_not_cast_back(x, positions, base=10000.0):
    d = x.shape[-1]
    if d % 2:
        raise ValueError(f"head_dim={d} is odd")
    half = d // 2
    work = torch.promote_types(x.dtype, torch.float32)
    i = torch.arange(half, dtype=torch.float64)
    ang = (positions.double()[:, None] * base ** (-2 * i / d)).to(work)
    x1, x2 = x[..., :half].to(work), x[..., half:].to(work)
    return torch.cat([x1 * ang.cos() - x2 * ang.sin(), x1 * ang.sin() + x2 * ang.cos()], -1)


def rope_no_odd_check(x, positions, base=10000.0):
    d = x.shape[-1]
    half = d // 2
    ct = torch.promote_types(x.dtype, torch.float32)
    i = torch.arange(half, dtype=torch.float64)
    ang = (positions.double()[:, None] * base ** (-2 * i / d)).to(ct)
    x1 = x[..., :half].to(ct)
    x2 = x[..., half:].to(ct)
    y1 = x1 * torch.cos(ang) - x2 * torch.sin(ang)
    y2 = x1 * torch.sin(ang) + x2 * torch.cos(ang)
    return torch.cat((y1, y2), dim=-1).to(x.dtype)


def rope_base_hardcoded(x, positions, base=10000.0):
    head_dim = x.shape[-1]
    if head_dim % 2:
        raise ValueError(f"head_dim={head_dim} is odd")
    half = head_dim // 2
    ct = torch.promote_types(x.dtype, torch.float32)
    inv_freq = 1.0 / (10000.0 ** (torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim))
    ang = (positions.to(torch.float64)[:, None] * inv_freq[None, :]).to(ct)
    x1, x2 = x[..., :half].to(ct), x[..., half:].to(ct)
    out = torch.cat([x1 * ang.cos() - x2 * ang.sin(), x2 * ang.cos() + x1 * ang.sin()], dim=-1)
    return out.to(x.dtype)


# ============================================================ apply_rope: right
def rope_complex_f64(x, positions, base=10000.0):
    d = x.shape[-1]
    if d % 2 != 0:
        raise ValueError(f"head_dim={d} is odd")
    half = d // 2
    expo = -2.0 * torch.arange(half, dtype=torch.float64) / d
    theta = positions.to(torch.float64)[:, None] * torch.pow(float(base), expo)[None, :]
    rot = torch.polar(torch.ones_like(theta), theta)  # e^{i theta}
    z = torch.complex(x[..., :half].double(), x[..., half:].double())
    w = z * rot
    return torch.cat([w.real, w.imag], dim=-1).to(x.dtype)


def rope_rotation_matrices(x, positions, base=10000.0):
    d = x.shape[-1]
    if d % 2:
        raise ValueError(f"head_dim={d} is odd")
    half = d // 2
    inv = [base ** (-2.0 * i / d) for i in range(half)]
    theta = positions.double()[:, None] * torch.tensor(inv, dtype=torch.float64)[None, :]
    c, s = torch.cos(theta), torch.sin(theta)
    rot = torch.stack([torch.stack([c, -s], -1), torch.stack([s, c], -1)], -2)  # (N, d/2, 2, 2)
    pairs = torch.stack([x[..., :half], x[..., half:]], dim=-1).double()  # (..., N, d/2, 2)
    turned = torch.einsum("nirc,...nic->...nir", rot, pairs)
    return torch.cat([turned[..., 0], turned[..., 1]], dim=-1).to(x.dtype)


ENTRIES = [
    Entry("rope_angles", "wrong", "i_over_d",
          "uses the exponent -i / head_dim instead of -2 i / head_dim, so the frequencies fall "
          "off half as fast as they should",
          angles_i_over_d),
    Entry("rope_angles", "wrong", "assert_not_valueerror",
          "checks the odd head_dim with assert, which raises AssertionError, not the "
          "ValueError the contract requires",
          angles_assert_guard),
    Entry("rope_angles", "wrong", "integer_floor_division",
          "writes the exponent as -2 * i // head_dim on an integer arange: floor division "
          "makes it -1 for every i > 0 (and 0 for i = 0), not -2 i / head_dim",
          angles_floor_division),
    Entry("rope_angles", "wrong", "outer_transposed",
          "torch.outer(inv_freq, positions) puts the frequencies on the rows: the result is "
          "(head_dim // 2, N), the transpose of the (N, head_dim // 2) angles",
          angles_outer_transposed),
    Entry("rope_angles", "wrong", "index_from_one",
          "numbers the pairs from 1 to head_dim // 2 instead of from 0, so every frequency is "
          "one step too low (pair 0 should turn by the position itself)",
          angles_index_from_one),
    Entry("rope_angles", "wrong", "positive_exponent",
          "raises base to +2 i / head_dim instead of -2 i / head_dim: the frequencies grow "
          "with i instead of shrinking",
          angles_positive_exponent),
    Entry("rope_angles", "right", "math_pow_loops", None, angles_math_loops),
    Entry("rope_angles", "right", "exp_log_form", None, angles_exp_log),

    Entry("apply_rope", "wrong", "adjacent_pairs",
          "rotates adjacent features (0, 1), (2, 3) ... (the GPT-J interleaved layout) instead "
          "of pairing feature i with feature i + head_dim / 2",
          rope_adjacent_pairs),
    Entry("apply_rope", "wrong", "rotation_sign_flipped",
          "the signs of the sin terms are swapped (y_i = x_i cos + x_{i+d/2} sin, "
          "y_{i+d/2} = -x_i sin + x_{i+d/2} cos): it rotates by -angle",
          rope_sign_flipped),
    Entry("apply_rope", "wrong", "angles_in_x_dtype",
          "computes the positions and frequencies in x's dtype: in bfloat16 (or float16) the "
          "positions lose precision (257 becomes 256) and the angles are wrong",
          rope_angles_in_x_dtype),
    Entry("apply_rope", "wrong", "not_cast_back",
          "returns the float32 working result without casting back, so half-precision x gets "
          "a float32 output instead of x's dtype",
          rope_not_cast_back),
    Entry("apply_rope", "wrong", "no_odd_head_dim_check",
          "never checks that head_dim is even: for an odd head_dim the two halves have "
          "different widths and torch raises a RuntimeError instead of the ValueError",
          rope_no_odd_check),
    Entry("apply_rope", "wrong", "base_hardcoded",
          "ignores the base argument and always uses 10000.0, so base=500000.0 gives the "
          "default frequencies",
          rope_base_hardcoded),
    Entry("apply_rope", "right", "complex_multiply_f64", None, rope_complex_f64),
    Entry("apply_rope", "right", "rotation_matrices_einsum", None, rope_rotation_matrices),
]
