"""Learner-style answers to lesson 09 (see answers/lesson01.py for the layout).

Written independently of the checker's mistake models (mhalib/checks/lesson09.py).
"""

import math

import torch


# -- rope_angles: wrong ------------------------------------------------------------------------
def angles_no_odd_check(positions, head_dim, base=10000.0):
    freqs = 1.0 / base ** (torch.arange(0, head_dim, 2).float() / head_dim)
    return positions.float()[:, None] * freqs[None, :]


def angles_i_over_d(positions, head_dim, base=10000.0):
    if head_dim % 2:
        raise ValueError("head_dim must be even")
    i = torch.arange(head_dim // 2, dtype=torch.float32)
    return positions[:, None].float() * base ** (-i / head_dim)


def angles_doubled(positions, head_dim, base=10000.0):
    if head_dim % 2:
        raise ValueError("head_dim must be even")
    i = torch.arange(0, head_dim, 2, dtype=torch.float32)
    return torch.outer(positions.float(), base ** (-2 * i / head_dim))


def angles_positive(positions, head_dim, base=10000.0):
    if head_dim % 2:
        raise ValueError("head_dim must be even")
    return torch.outer(positions.float(), base ** (torch.arange(0, head_dim, 2) / head_dim))


def angles_from_one(positions, head_dim, base=10000.0):
    if head_dim % 2:
        raise ValueError("head_dim must be even")
    i = torch.arange(1, head_dim // 2 + 1, dtype=torch.float64)
    return (positions.double()[:, None] * base ** (-2 * i / head_dim)).float()


def angles_arange(positions, head_dim, base=10000.0):
    if head_dim % 2:
        raise ValueError("head_dim must be even")
    inv = base ** (-torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim)
    return torch.arange(len(positions)).float()[:, None] * inv


def angles_fixed_base(positions, head_dim, base=10000.0):
    if head_dim % 2:
        raise ValueError("head_dim must be even")
    inv = 10000.0 ** (-torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim)
    return positions.float()[:, None] * inv


def angles_hf_table(positions, head_dim, base=10000.0):
    if head_dim % 2:
        raise ValueError("head_dim must be even")
    inv = 1.0 / base ** (torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim)
    freqs = torch.outer(positions.float(), inv)
    return torch.cat([freqs, freqs], dim=-1)


def angles_transposed(positions, head_dim, base=10000.0):
    if head_dim % 2:
        raise ValueError("head_dim must be even")
    inv = 1.0 / base ** (torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim)
    return torch.outer(inv, positions.float())


# -- rope_angles: right ------------------------------------------------------------------------
def angles_loop(positions, head_dim, base=10000.0):
    if head_dim % 2 != 0:
        raise ValueError(f"odd head_dim {head_dim}")
    out = torch.zeros(len(positions), head_dim // 2)
    for n, p in enumerate(positions.tolist()):
        for i in range(head_dim // 2):
            out[n, i] = p * base ** (-2 * i / head_dim)
    return out


def angles_exp_log(positions, head_dim, base=10000.0):
    if head_dim % 2:
        raise ValueError("odd")
    i = torch.arange(head_dim // 2, dtype=torch.float64)
    return (positions.double()[:, None] * torch.exp(-2 * i / head_dim * math.log(base))).float()


def angles_einsum_float64(positions, head_dim, base=10000.0):
    if head_dim % 2:
        raise ValueError("odd")
    inv = 1.0 / (base ** (torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim))
    return torch.einsum("n,i->ni", positions.double(), inv)


# -- apply_rope: wrong -------------------------------------------------------------------------
def _inv_freq(head_dim, base, step=2.0):
    return base ** (-step * torch.arange(head_dim // 2, dtype=torch.float32) / head_dim)


def _angles(positions, head_dim, base=10000.0):
    return positions.float()[:, None] * _inv_freq(head_dim, base)  # (N, d/2)


def rope_promotes_dtype(x, positions, base=10000.0):
    if x.shape[-1] % 2:
        raise ValueError(f"head_dim={x.shape[-1]} is odd")
    a = _angles(positions, x.shape[-1], base)
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat([x1 * a.cos() - x2 * a.sin(), x1 * a.sin() + x2 * a.cos()], dim=-1)


def rope_adjacent(x, positions, base=10000.0):
    """Meta's reference code: pairs (2i, 2i + 1) as complex numbers."""
    a = _angles(positions, x.shape[-1], base)
    z = torch.view_as_complex(x.float().reshape(*x.shape[:-1], -1, 2).contiguous())
    rotated = torch.view_as_real(z * torch.polar(torch.ones_like(a), a))
    return rotated.flatten(-2).to(x.dtype)


def rope_backwards(x, positions, base=10000.0):
    a = _angles(positions, x.shape[-1], base)
    x1, x2 = x.float().chunk(2, dim=-1)
    return torch.cat([x1 * a.cos() + x2 * a.sin(), x2 * a.cos() - x1 * a.sin()], -1).to(x.dtype)


def rope_no_minus(x, positions, base=10000.0):
    a = _angles(positions, x.shape[-1], base)
    cos, sin = torch.cat([a, a], -1).cos(), torch.cat([a, a], -1).sin()
    x1, x2 = x.float().chunk(2, dim=-1)
    return (x.float() * cos + torch.cat([x2, x1], -1) * sin).to(x.dtype)


def rope_interleaved_tables(x, positions, base=10000.0):
    a = _angles(positions, x.shape[-1], base)
    cos = a.cos().repeat_interleave(2, dim=-1)
    sin = a.sin().repeat_interleave(2, dim=-1)
    x1, x2 = x.float().chunk(2, dim=-1)
    return (x.float() * cos + torch.cat([-x2, x1], -1) * sin).to(x.dtype)


def rope_first_half(x, positions, base=10000.0):
    a = _angles(positions, x.shape[-1], base)
    x1, x2 = x.float().chunk(2, dim=-1)
    return (x1 * a.cos() - x2 * a.sin()).to(x.dtype)


def rope_second_half_kept(x, positions, base=10000.0):
    a = _angles(positions, x.shape[-1], base)
    x1, x2 = x.float().chunk(2, dim=-1)
    return torch.cat([x1 * a.cos() - x2 * a.sin(), x2], dim=-1).to(x.dtype)


def rope_arange(x, positions, base=10000.0):
    a = _angles(torch.arange(x.shape[-2]), x.shape[-1], base)
    x1, x2 = x.float().chunk(2, dim=-1)
    return torch.cat([x1 * a.cos() - x2 * a.sin(), x1 * a.sin() + x2 * a.cos()], -1).to(x.dtype)


def rope_i_over_d(x, positions, base=10000.0):
    a = positions.float()[:, None] * _inv_freq(x.shape[-1], base, step=1.0)
    x1, x2 = x.float().chunk(2, dim=-1)
    return torch.cat([x1 * a.cos() - x2 * a.sin(), x1 * a.sin() + x2 * a.cos()], -1).to(x.dtype)


def _learner_angles(positions, head_dim, base=10000.0):
    return positions.float()[:, None] * _inv_freq(head_dim, base)


def rope_base_not_passed(x, positions, base=10000.0):
    a = _learner_angles(positions, x.shape[-1])  # base forgotten here
    x1, x2 = x.float().chunk(2, dim=-1)
    return torch.cat([x1 * a.cos() - x2 * a.sin(), x1 * a.sin() + x2 * a.cos()], -1).to(x.dtype)


# -- apply_rope: right -------------------------------------------------------------------------
def rope_loop(x, positions, base=10000.0):
    if x.shape[-1] % 2:
        raise ValueError(f"head_dim={x.shape[-1]} is odd")
    d = x.shape[-1]
    y = x.double().clone()
    for n, p in enumerate(positions.tolist()):
        for i in range(d // 2):
            t = p * base ** (-2 * i / d)
            a, b = x[..., n, i].double(), x[..., n, i + d // 2].double()
            y[..., n, i] = a * math.cos(t) - b * math.sin(t)
            y[..., n, i + d // 2] = a * math.sin(t) + b * math.cos(t)
    return y.to(x.dtype)


def rope_hf_style(x, positions, base=10000.0):
    if x.shape[-1] % 2:
        raise ValueError(f"head_dim={x.shape[-1]} is odd")
    a = _angles(positions, x.shape[-1], base)
    emb = torch.cat([a, a], dim=-1)
    x1, x2 = x.float().chunk(2, dim=-1)
    return (x.float() * emb.cos() + torch.cat([-x2, x1], dim=-1) * emb.sin()).to(x.dtype)


def rope_complex_half(x, positions, base=10000.0):
    """Rotate-half pairs as complex numbers: x_i + j x_{i+d/2}, times e^{j angle}."""
    if x.shape[-1] % 2:
        raise ValueError(f"head_dim={x.shape[-1]} is odd")
    a = _angles(positions, x.shape[-1], base)
    x1, x2 = x.float().chunk(2, dim=-1)
    z = torch.view_as_complex(torch.stack([x1, x2], dim=-1).contiguous())
    w = torch.view_as_real(z * torch.polar(torch.ones_like(a), a))
    return torch.cat([w[..., 0], w[..., 1]], dim=-1).to(x.dtype)


def rope_rotation_matrices(x, positions, base=10000.0):
    """One d x d rotation matrix per position, applied with einsum."""
    if x.shape[-1] % 2:
        raise ValueError(f"head_dim={x.shape[-1]} is odd")
    d, half = x.shape[-1], x.shape[-1] // 2
    a = _angles(positions, d, base).double()  # (N, d/2)
    rot = torch.zeros(len(positions), d, d, dtype=torch.float64)
    i = torch.arange(half)
    rot[:, i, i] = a.cos()
    rot[:, i, i + half] = -a.sin()
    rot[:, i + half, i] = a.sin()
    rot[:, i + half, i + half] = a.cos()
    return torch.einsum("nij,...nj->...ni", rot, x.double()).to(x.dtype)


def rope_with_own_angles(x, positions, base=10000.0):
    if x.shape[-1] % 2:
        raise ValueError(f"head_dim={x.shape[-1]} is odd")
    a = angles_exp_log(positions, x.shape[-1], base)
    x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2:]
    c, s = a.cos().to(x.dtype), a.sin().to(x.dtype)
    return torch.cat([x1 * c - x2 * s, x1 * s + x2 * c], dim=-1)


# -- calling the answer key --------------------------------------------------------------------
def angles_from_reference(positions, head_dim, base=10000.0):
    from mhalib.reference import rope_angles

    return rope_angles(positions, head_dim, base)


def angles_from_nn(positions, head_dim, base=10000.0):
    from mhalib.nn.rope import rotary_cos_sin

    cos, _ = rotary_cos_sin(positions, head_dim, base, torch.float64)
    return torch.acos(cos[:, : head_dim // 2]).float()


def rope_from_reference(x, positions, base=10000.0):
    from mhalib.reference import apply_rope

    return apply_rope(x, positions, base)


def rope_from_reference_angles(x, positions, base=10000.0):
    from mhalib.reference import rope_angles

    a = rope_angles(positions, x.shape[-1], base)
    x1, x2 = x.float().chunk(2, dim=-1)
    return torch.cat([x1 * a.cos() - x2 * a.sin(), x1 * a.sin() + x2 * a.cos()], -1).to(x.dtype)


def rope_from_nn(x, positions, base=10000.0):
    from mhalib.nn.rope import apply_rotary

    return apply_rotary(x, positions, base)


WRONG = {
    "rope_angles": {
        "odd_head_dim_accepted": angles_no_odd_check,
        "exponent_i_over_d": angles_i_over_d,
        "exponent_doubled": angles_doubled,
        "positive_exponent": angles_positive,
        "pairs_from_one": angles_from_one,
        "ignores_positions": angles_arange,
        "base_ignored": angles_fixed_base,
        "both_halves": angles_hf_table,
        "transposed": angles_transposed,
    },
    "apply_rope": {
        "dtype_changed": rope_promotes_dtype,
        "adjacent_pairs": rope_adjacent,
        "rotates_backwards": rope_backwards,
        "rotate_half_without_minus": rope_no_minus,
        "tables_repeat_interleave": rope_interleaved_tables,
        "first_half_only": rope_first_half,
        "second_half_unrotated": rope_second_half_kept,
        "ignores_positions": rope_arange,
        "exponent_i_over_d": rope_i_over_d,
        "base_not_passed": rope_base_not_passed,
    },
}

RIGHT = {
    "rope_angles": [angles_loop, angles_exp_log, angles_einsum_float64],
    "apply_rope": [rope_hf_style, rope_loop, rope_complex_half, rope_rotation_matrices,
                   rope_with_own_angles],
}

ANSWER_KEY = {
    "rope_angles": [angles_from_reference, angles_from_nn],
    "apply_rope": [rope_from_reference, rope_from_reference_angles, rope_from_nn],
}


def rope_all_in_x_dtype(x, positions, base=10000.0):
    """Keeps everything in x's dtype, angles included."""
    d = x.shape[-1]
    inv = 1.0 / base ** (torch.arange(0, d, 2, dtype=x.dtype) / d)
    a = positions.to(x.dtype)[:, None] * inv
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat([x1 * a.cos() - x2 * a.sin(), x1 * a.sin() + x2 * a.cos()], dim=-1)


WRONG["apply_rope"]["angles_in_low_precision"] = rope_all_in_x_dtype


def rope_loop_unchecked(x, positions, base=10000.0):
    """Right for even head_dim; an odd one leaves the last feature as it was, no error."""
    d = x.shape[-1]
    y = x.double().clone()
    for n, p in enumerate(positions.tolist()):
        for i in range(d // 2):
            t = p * base ** (-2 * i / d)
            a, b = x[..., n, i].double(), x[..., n, i + d // 2].double()
            y[..., n, i] = a * math.cos(t) - b * math.sin(t)
            y[..., n, i + d // 2] = a * math.sin(t) + b * math.cos(t)
    return y.to(x.dtype)


def rope_chunk_unchecked(x, positions, base=10000.0):
    """Right for even head_dim; an odd one fails inside torch with a size mismatch."""
    d = x.shape[-1]
    inv = 1.0 / base ** (torch.arange(0, d, 2, dtype=torch.float64) / d)
    a = positions.double()[:, None] * inv
    x1, x2 = x.double().chunk(2, dim=-1)
    return torch.cat([x1 * a.cos() - x2 * a.sin(), x1 * a.sin() + x2 * a.cos()],
                     dim=-1).to(x.dtype)


WRONG["apply_rope"]["no_argument_check"] = rope_loop_unchecked
WRONG["apply_rope"]["refusal_without_values"] = rope_chunk_unchecked


def angles_asserted(positions, head_dim, base=10000.0):
    """Checks head_dim with an assert (an AssertionError, not the contract's ValueError)."""
    assert head_dim % 2 == 0, "head_dim must be even"
    return angles_no_odd_check(positions, head_dim, base)


def rope_chunk_asserted(x, positions, base=10000.0):
    """Checks head_dim with an assert (an AssertionError, not the contract's ValueError)."""
    assert x.shape[-1] % 2 == 0
    return rope_chunk_unchecked(x, positions, base)


WRONG["rope_angles"]["odd_head_dim_by_assert"] = angles_asserted
WRONG["apply_rope"]["refusal_by_assert"] = rope_chunk_asserted
