"""Round d, lesson 09 (torch): rope_angles, apply_rope."""

import math

import torch

from entry import Entry


def _check_even(head_dim):
    if head_dim % 2:
        raise ValueError(f"head_dim={head_dim} must be even")


# ----------------------------------------------------------------------------- rope_angles
def ra_missing_two(positions, head_dim, base=10000.0):
    _check_even(head_dim)
    i = torch.arange(head_dim // 2, dtype=torch.float64)
    return (positions.double()[:, None] * base ** (-i / head_dim)).float()


def ra_one_based_i(positions, head_dim, base=10000.0):
    _check_even(head_dim)
    i = torch.arange(1, head_dim // 2 + 1, dtype=torch.float64)
    return (positions.double()[:, None] * base ** (-2 * i / head_dim)).float()


def ra_positive_exponent(positions, head_dim, base=10000.0):
    _check_even(head_dim)
    i = torch.arange(head_dim // 2, dtype=torch.float64)
    return (positions.double()[:, None] * base ** (2 * i / head_dim)).float()


def ra_no_odd_check(positions, head_dim, base=10000.0):
    i = torch.arange(head_dim // 2, dtype=torch.float64)
    return (positions.double()[:, None] * base ** (-2 * i / head_dim)).float()


def ra_duplicated_halves(positions, head_dim, base=10000.0):
    _check_even(head_dim)
    inv = 1.0 / base ** (torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim)
    ang = positions.double()[:, None] * inv[None, :]
    return torch.cat([ang, ang], dim=-1).float()


def ra_transposed_outer(positions, head_dim, base=10000.0):
    _check_even(head_dim)
    inv = 1.0 / base ** (torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim)
    return (inv[:, None] * positions.double()[None, :]).float()


def ra_log_space(positions, head_dim, base=10000.0):
    if head_dim % 2 != 0:
        raise ValueError(f"head_dim={head_dim} is odd; RoPE needs pairs")
    i = torch.arange(head_dim // 2, dtype=torch.float64, device=positions.device)
    inv = torch.exp(-2.0 * i / head_dim * math.log(base))
    return torch.outer(positions.to(torch.float64), inv).to(torch.float32)


def ra_python_loops(positions, head_dim, base=10000.0):
    if head_dim % 2:
        raise ValueError(f"head_dim={head_dim} must be even")
    rows = [[float(p) * float(base) ** (-2.0 * i / head_dim) for i in range(head_dim // 2)]
            for p in positions.tolist()]
    return torch.tensor(rows, dtype=torch.float64,
                        device=positions.device).reshape(len(rows), head_dim // 2)


# ----------------------------------------------------------------------------- apply_rope
def _angles(positions, head_dim, base):
    i = torch.arange(head_dim // 2, dtype=torch.float64, device=positions.device)
    return positions.double()[:, None] * base ** (-2 * i / head_dim)


def _rotate(x, positions, base, *, adjacent=False, sign=1.0, cast_back=True,
            angle_dtype=torch.float64, ignore_positions=False, check=True):
    d = x.shape[-1]
    if check:
        _check_even(d)
    if ignore_positions:
        positions = torch.arange(x.shape[-2])
    c = torch.promote_types(x.dtype, torch.float32)
    ang = _angles(positions, d, base).to(angle_dtype).to(c)
    cos, sin = torch.cos(ang), sign * torch.sin(ang)
    xc = x.to(c)
    if adjacent:
        x1, x2 = xc[..., 0::2], xc[..., 1::2]
        y = torch.stack([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1).flatten(-2)
    else:
        x1, x2 = xc[..., : d // 2], xc[..., d // 2:]
        y = torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1)
    return y.to(x.dtype) if cast_back else y


def rope_adjacent_pairs(x, positions, base=10000.0):
    return _rotate(x, positions, base, adjacent=True)


def rope_negative_angle(x, positions, base=10000.0):
    return _rotate(x, positions, base, sign=-1.0)


def rope_no_cast_back(x, positions, base=10000.0):
    return _rotate(x, positions, base, cast_back=False)


def rope_half_precision_angles(x, positions, base=10000.0):
    d = x.shape[-1]
    _check_even(d)
    i = torch.arange(d // 2, dtype=x.dtype)
    ang = positions.to(x.dtype)[:, None] * base ** (-2 * i / d)
    cos, sin = torch.cos(ang), torch.sin(ang)
    x1, x2 = x[..., : d // 2], x[..., d // 2:]
    return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1)


def rope_no_odd_check(x, positions, base=10000.0):
    return _rotate(x, positions, base, check=False)


def rope_ignores_positions(x, positions, base=10000.0):
    return _rotate(x, positions, base, ignore_positions=True)


def rope_complex(x, positions, base=10000.0):
    d = x.shape[-1]
    if d % 2:
        raise ValueError(f"head_dim={d} must be even to pair features")
    half = d // 2
    xd = x.double()
    z = torch.complex(xd[..., :half], xd[..., half:])
    ang = _angles(positions.to(x.device), d, base)
    z = z * torch.polar(torch.ones_like(ang), ang)
    return torch.cat([z.real, z.imag], dim=-1).to(x.dtype)


def rope_rotation_matrix(x, positions, base=10000.0):
    d = x.shape[-1]
    if d % 2:
        raise ValueError(f"head_dim={d} must be even")
    half = d // 2
    c = torch.promote_types(x.dtype, torch.float32)
    ang = _angles(positions.to(x.device), d, base).to(c)  # (N, d/2) in the compute dtype
    n = ang.shape[0]
    rot = torch.zeros((n, d, d), dtype=c, device=x.device)
    idx = torch.arange(half, device=x.device)
    cos, sin = torch.cos(ang), torch.sin(ang)
    # y = R x with R acting on (i, i + half)
    rot[:, idx, idx] = cos
    rot[:, idx, idx + half] = -sin
    rot[:, idx + half, idx] = sin
    rot[:, idx + half, idx + half] = cos
    y = torch.einsum("nij,...nj->...ni", rot.to(c), x.to(c))
    return y.to(x.dtype)


ENTRIES = [
    Entry("rope_angles", "wrong", "exponent_missing_two",
          "Uses base ** (-i / head_dim) instead of base ** (-2 i / head_dim).",
          ra_missing_two),
    Entry("rope_angles", "wrong", "one_based_index",
          "Counts the pair index i from 1 instead of 0, so no pair has frequency 1.",
          ra_one_based_i),
    Entry("rope_angles", "wrong", "positive_exponent",
          "Multiplies by base ** (2 i / head_dim) instead of dividing, so frequencies grow with i.",
          ra_positive_exponent),
    Entry("rope_angles", "wrong", "no_odd_head_dim_check",
          "Does not raise ValueError for an odd head_dim; floor division silently drops the last feature.",
          ra_no_odd_check),
    Entry("rope_angles", "wrong", "duplicated_halves",
          "Concatenates the angles with themselves (Hugging Face's emb = cat(freqs, freqs)), returning (N, head_dim) instead of (N, head_dim // 2).",
          ra_duplicated_halves),
    Entry("rope_angles", "wrong", "transposed_outer_product",
          "Takes the outer product in the wrong order, returning (head_dim // 2, N).",
          ra_transposed_outer),
    Entry("rope_angles", "right", "log_space_outer", None, ra_log_space),
    Entry("rope_angles", "right", "python_loops_float64", None, ra_python_loops),

    Entry("apply_rope", "wrong", "adjacent_pairs",
          "Pairs adjacent features (2i, 2i + 1) instead of i with i + head_dim // 2 (the rotate-half layout).",
          rope_adjacent_pairs),
    Entry("apply_rope", "wrong", "rotates_by_negative_angle",
          "Gets the sign of the sine terms wrong, rotating each pair by -angle.",
          rope_negative_angle),
    Entry("apply_rope", "wrong", "no_cast_back",
          "Computes in float32 and returns float32 for half-precision x instead of x's dtype.",
          rope_no_cast_back),
    Entry("apply_rope", "wrong", "half_precision_angles",
          "Computes positions times frequencies in x's dtype, so float16/bfloat16 angles at large positions are badly rounded.",
          rope_half_precision_angles),
    Entry("apply_rope", "wrong", "no_odd_head_dim_check",
          "Does not check that head_dim is even, so an odd head_dim fails with a RuntimeError instead of a ValueError.",
          rope_no_odd_check),
    Entry("apply_rope", "wrong", "ignores_positions",
          "Uses arange(N) as positions instead of the positions argument.",
          rope_ignores_positions),
    Entry("apply_rope", "right", "complex_multiply", None, rope_complex),
    Entry("apply_rope", "right", "rotation_matrix_einsum", None, rope_rotation_matrix),
]
