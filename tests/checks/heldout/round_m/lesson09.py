"""Round m catalogue, lesson 09 (rope): rope_angles, apply_rope."""

import math

import numpy as np
import torch

from entry import Entry


# =========================================================================== rope_angles: wrong
def angles_missing_factor_two(positions, head_dim, base=10000.0):
    if head_dim % 2:
        raise ValueError(f"head_dim={head_dim} is odd")
    i = torch.arange(head_dim // 2, dtype=torch.float64)
    inv_freq = base ** (-i / head_dim)
    return (positions.double()[:, None] * inv_freq[None, :]).float()


def angles_mixed_arange(positions, head_dim, base=10000.0):
    if head_dim % 2 != 0:
        raise ValueError(f"head_dim={head_dim} must be even")
    inv_freq = 1.0 / (base ** (torch.arange(0, head_dim // 2, 2).float() / head_dim))
    return torch.outer(positions.float(), inv_freq)


def angles_assert_guard(positions, head_dim, base=10000.0):
    assert head_dim % 2 == 0, f"head_dim={head_dim} must be even"
    half = head_dim // 2
    exponents = -2.0 * torch.arange(half, dtype=torch.float64) / head_dim
    return (positions.to(torch.float64).unsqueeze(1) * torch.pow(base, exponents)).to(torch.float32)


def angles_transposed_outer(positions, head_dim, base=10000.0):
    if head_dim % 2:
        raise ValueError(f"head_dim={head_dim} is odd")
    i = torch.arange(head_dim // 2, dtype=torch.float64)
    freqs = base ** (-2 * i / head_dim)
    return (freqs[:, None] * positions.double()[None, :]).float()


def angles_floor_division(positions, head_dim, base=10000.0):
    if head_dim % 2:
        raise ValueError(f"head_dim={head_dim} is odd")
    i = torch.arange(head_dim // 2)
    inv_freq = base ** (-2 * i // head_dim).double()
    return positions.double()[:, None] * inv_freq[None, :]


def angles_index_not_position(positions, head_dim, base=10000.0):
    if head_dim % 2:
        raise ValueError(f"head_dim={head_dim} is odd: RoPE needs pairs")
    n = positions.shape[0]
    pos = torch.arange(n, dtype=torch.float64)  # position of each row
    inv_freq = base ** (-2.0 * torch.arange(head_dim // 2, dtype=torch.float64) / head_dim)
    return (pos[:, None] * inv_freq).to(torch.float32)


# =========================================================================== rope_angles: right
def angles_numpy_outer(positions, head_dim, base=10000.0):
    if head_dim % 2 == 1:
        raise ValueError(f"head_dim={head_dim} is odd")
    pos = positions.detach().cpu().numpy().astype(np.float64)
    inv_freq = np.power(float(base), -np.arange(0, head_dim, 2, dtype=np.float64) / head_dim)
    return torch.from_numpy(np.outer(pos, inv_freq)).to(positions.device)


def angles_exp_log_einsum(positions, head_dim, base=10000.0):
    if head_dim & 1:
        raise ValueError(f"head_dim={head_dim} is odd; it must be even")
    k = torch.arange(head_dim // 2, dtype=torch.float64)
    inv_freq = torch.exp(-(2.0 * k / head_dim) * math.log(base))
    return torch.einsum("n,i->ni", positions.to(torch.float64), inv_freq).to(torch.float32)


# ============================================================================ apply_rope: wrong
def rope_adjacent_pairs(x, positions, base=10000.0):
    d = x.shape[-1]
    if d % 2:
        raise ValueError(f"head_dim={d} is odd")
    ct = torch.promote_types(x.dtype, torch.float32)
    i = torch.arange(d // 2, dtype=torch.float64)
    ang = (positions.double()[:, None] * base ** (-2 * i / d)).to(ct)
    cos, sin = ang.cos(), ang.sin()
    xe, xo = x[..., 0::2].to(ct), x[..., 1::2].to(ct)  # pairs (2i, 2i + 1)
    ye = xe * cos - xo * sin
    yo = xe * sin + xo * cos
    return torch.stack([ye, yo], dim=-1).flatten(-2).to(x.dtype)


def rope_rotates_backwards(x, positions, base=10000.0):
    head_dim = x.shape[-1]
    if head_dim % 2:
        raise ValueError(f"head_dim={head_dim} is odd")
    compute = torch.promote_types(x.dtype, torch.float32)
    half = head_dim // 2
    inv = base ** (-2.0 * torch.arange(half, dtype=torch.float64) / head_dim)
    angles = (positions.to(torch.float64)[:, None] * inv).to(compute)
    c, s = torch.cos(angles), torch.sin(angles)
    x1, x2 = x[..., :half].to(compute), x[..., half:].to(compute)
    y1 = x1 * c + x2 * s
    y2 = -x1 * s + x2 * c
    return torch.cat([y1, y2], dim=-1).to(x.dtype)


def rope_angles_in_x_dtype(x, positions, base=10000.0):
    d = x.shape[-1]
    if d % 2:
        raise ValueError(f"head_dim={d} is odd")
    half = d // 2
    inv = (base ** (-2.0 * torch.arange(half, dtype=torch.float64) / d)).to(x.dtype)
    angles = positions.to(x.dtype)[:, None] * inv[None, :]  # in x's dtype
    cos = angles.cos().to(torch.promote_types(x.dtype, torch.float32))
    sin = angles.sin().to(cos.dtype)
    x1, x2 = x[..., :half].to(cos.dtype), x[..., half:].to(cos.dtype)
    return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1).to(x.dtype)


def rope_repeat_interleave(x, positions, base=10000.0):
    d = x.shape[-1]
    if d % 2:
        raise ValueError(f"head_dim={d} is odd")
    ct = torch.promote_types(x.dtype, torch.float32)
    inv_freq = 1.0 / (base ** (torch.arange(0, d, 2, dtype=torch.float64) / d))
    freqs = positions.double()[:, None] * inv_freq[None, :]  # (N, d/2)
    emb = freqs.repeat_interleave(2, dim=-1).to(ct)  # (N, d)
    xc = x.to(ct)
    rotated = torch.cat([-xc[..., d // 2:], xc[..., : d // 2]], dim=-1)
    return (xc * emb.cos() + rotated * emb.sin()).to(x.dtype)


def rope_no_odd_guard(x, positions, base=10000.0):
    d = x.shape[-1]
    half = d // 2
    ct = torch.promote_types(x.dtype, torch.float32)
    freq = base ** (-2.0 * torch.arange(half, dtype=torch.float64) / d)
    theta = (positions.double().unsqueeze(-1) * freq).to(ct)
    x1, x2 = x[..., :half].to(ct), x[..., half:].to(ct)
    out1 = x1 * theta.cos() - x2 * theta.sin()
    out2 = x1 * theta.sin() + x2 * theta.cos()
    return torch.cat((out1, out2), -1).to(x.dtype)


def rope_aliasing_views(x, positions, base=10000.0):
    d = x.shape[-1]
    if d % 2:
        raise ValueError(f"head_dim={d} is odd")
    half = d // 2
    ct = torch.promote_types(x.dtype, torch.float32)
    inv = base ** (-2.0 * torch.arange(half, dtype=torch.float64) / d)
    ang = (positions.double()[:, None] * inv).to(ct)
    cos, sin = torch.cos(ang), torch.sin(ang)
    y = x.to(ct).clone()
    x1, x2 = y[..., :half], y[..., half:]  # views into y
    y[..., :half] = x1 * cos - x2 * sin
    y[..., half:] = x1 * sin + x2 * cos
    return y.to(x.dtype)


# ============================================================================ apply_rope: right
def rope_complex_polar(x, positions, base=10000.0):
    d = x.shape[-1]
    if d % 2 != 0:
        raise ValueError(f"head_dim={d} is odd")
    half = d // 2
    inv = torch.pow(torch.tensor(float(base), dtype=torch.float64),
                    -2.0 * torch.arange(half, dtype=torch.float64) / d)
    theta = positions.to(torch.float64)[:, None] * inv[None, :]  # (N, d/2)
    rot = torch.polar(torch.ones_like(theta), theta)  # e^{i theta}
    xd = x.to(torch.float64)
    z = torch.complex(xd[..., :half], xd[..., half:]) * rot  # (x1 + i x2) e^{i theta}
    return torch.cat([z.real, z.imag], dim=-1).to(x.dtype)


def rope_rotation_matrices(x, positions, base=10000.0):
    d = x.shape[-1]
    if d % 2:
        raise ValueError(f"head_dim={d} is odd")
    half = d // 2
    pos = positions.detach().cpu().numpy().astype(np.float64)
    theta = pos[:, None] * float(base) ** (-2.0 * np.arange(half) / d)  # (N, d/2)
    c, s = np.cos(theta), np.sin(theta)
    rot = np.stack([np.stack([c, -s], -1), np.stack([s, c], -1)], -2)  # (N, d/2, 2, 2)
    rot = torch.from_numpy(rot)
    xd = x.to(torch.float64)
    pairs = torch.stack([xd[..., :half], xd[..., half:]], dim=-1)  # (..., N, d/2, 2)
    turned = torch.einsum("nirc,...nic->...nir", rot, pairs)
    return torch.cat([turned[..., 0], turned[..., 1]], dim=-1).to(x.dtype)


ENTRIES = [
    # rope_angles
    Entry("rope_angles", "wrong", "missing_factor_two",
          "The exponent is -i / head_dim instead of -2 i / head_dim, so every frequency after the "
          "first decays too slowly.",
          angles_missing_factor_two),
    Entry("rope_angles", "wrong", "mixed_arange_step",
          "It mixes the two ways of writing the frequencies: arange(0, head_dim // 2, 2) / "
          "head_dim takes every other pair index, so it returns only head_dim // 4 columns, and "
          "the wrong ones.",
          angles_mixed_arange),
    Entry("rope_angles", "wrong", "assert_guard",
          "It checks the parity with assert, so an odd head_dim raises AssertionError instead of "
          "the required ValueError.",
          angles_assert_guard),
    Entry("rope_angles", "wrong", "transposed_outer",
          "It broadcasts the frequencies down the rows and the positions across the columns, "
          "returning the (head_dim // 2, N) transpose instead of (N, head_dim // 2).",
          angles_transposed_outer),
    Entry("rope_angles", "wrong", "floor_division_precedence",
          "-2 * i // head_dim is floor division, (-2 i) // head_dim, which is -1 for every i > 0, "
          "so all frequencies after the first become 1 / base.",
          angles_floor_division),
    Entry("rope_angles", "wrong", "row_index_as_position",
          "It rotates by the row index 0..N-1 instead of the given positions, which is only right "
          "when positions happen to be arange(N).",
          angles_index_not_position),
    Entry("rope_angles", "right", "numpy_outer_float64", None, angles_numpy_outer),
    Entry("rope_angles", "right", "exp_log_einsum", None, angles_exp_log_einsum),
    # apply_rope
    Entry("apply_rope", "wrong", "adjacent_pairs",
          "It rotates adjacent features (2i, 2i + 1), the GPT-J / original-paper layout, instead "
          "of pairing feature i with feature i + head_dim / 2 (rotate half).",
          rope_adjacent_pairs),
    Entry("apply_rope", "wrong", "rotates_backwards",
          "The sine terms have the wrong signs (y1 = x1 cos + x2 sin, y2 = -x1 sin + x2 cos), so "
          "each pair is rotated by -angle instead of +angle.",
          rope_rotates_backwards),
    Entry("apply_rope", "wrong", "angles_in_x_dtype",
          "It computes the positions and angles in x's dtype, so for float16/bfloat16 inputs large "
          "positions are rounded (bfloat16 cannot even hold 257) and the rotations are wrong.",
          rope_angles_in_x_dtype),
    Entry("apply_rope", "wrong", "repeat_interleave_angles",
          "It expands the (N, d/2) angles to (N, d) with repeat_interleave (f0, f0, f1, f1, ...), "
          "the layout for adjacent pairs, while rotating halves, which needs cat([freqs, freqs]); "
          "feature j gets angle j // 2 instead of j mod d/2.",
          rope_repeat_interleave),
    Entry("apply_rope", "wrong", "no_odd_guard",
          "It never checks that head_dim is even, so an odd head_dim is not rejected with a "
          "ValueError: the unequal halves make the arithmetic raise a RuntimeError instead.",
          rope_no_odd_guard),
    Entry("apply_rope", "wrong", "aliasing_views",
          "x1 and x2 are views into the output y, so after the first half of y is overwritten "
          "the second formula reads the already rotated x1 instead of the original one.",
          rope_aliasing_views),
    Entry("apply_rope", "right", "complex_polar_float64", None, rope_complex_polar),
    Entry("apply_rope", "right", "rotation_matrices_einsum", None, rope_rotation_matrices),
]
