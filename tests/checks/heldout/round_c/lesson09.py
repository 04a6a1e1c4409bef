"""Round c, lesson 09: rope_angles, apply_rope (torch)."""

import math

import numpy as np
import torch

from entry import Entry


def _odd(head_dim):
    if head_dim % 2:
        raise ValueError(f"head_dim={head_dim} must be even")


# ------------------------------------------------------------------ rope_angles
def ang_forgets_two(positions, head_dim, base=10000.0):
    _odd(head_dim)
    i = torch.arange(head_dim // 2, dtype=torch.float64)
    return (positions.double()[:, None] * base ** (-i / head_dim)).float()


def ang_positive_exponent(positions, head_dim, base=10000.0):
    _odd(head_dim)
    i = torch.arange(head_dim // 2, dtype=torch.float64)
    return (positions.double()[:, None] * base ** (2 * i / head_dim)).float()


def ang_even_index_doubled(positions, head_dim, base=10000.0):
    _odd(head_dim)
    i = torch.arange(0, head_dim, 2, dtype=torch.float64)  # 0, 2, 4, ... already doubled
    return (positions.double()[:, None] * base ** (-2 * i / head_dim)).float()


def ang_no_odd_check(positions, head_dim, base=10000.0):
    i = torch.arange(head_dim // 2, dtype=torch.float64)
    return (positions.double()[:, None] * base ** (-2 * i / head_dim)).float()


def ang_transposed(positions, head_dim, base=10000.0):
    _odd(head_dim)
    i = torch.arange(head_dim // 2, dtype=torch.float64)
    return (base ** (-2 * i / head_dim))[:, None] * positions.double()[None, :]


def ang_floor_division(positions, head_dim, base=10000.0):
    _odd(head_dim)
    i = torch.arange(head_dim // 2)
    return positions[:, None] * base ** (-2 * i // head_dim)


def ang_numpy(positions, head_dim, base=10000.0):
    if head_dim % 2 != 0:
        raise ValueError(f"head_dim={head_dim} is odd")
    pos = positions.cpu().numpy().astype(np.float64)
    inv = np.power(float(base), -np.arange(0, head_dim, 2, dtype=np.float64) / head_dim)
    return torch.from_numpy(np.outer(pos, inv)).to(positions.device)


def ang_loop(positions, head_dim, base=10000.0):
    if head_dim % 2:
        raise ValueError(f"head_dim={head_dim} is odd")
    n = positions.shape[0]
    out = torch.empty(n, head_dim // 2, dtype=torch.float64)
    for row, p in enumerate(positions.tolist()):
        for i in range(head_dim // 2):
            out[row, i] = p * math.exp(-2 * i / head_dim * math.log(base))
    return out.float()


# ------------------------------------------------------------------ apply_rope
def _angles64(positions, head_dim, base):
    i = torch.arange(head_dim // 2, dtype=torch.float64)
    return positions.double()[:, None] * base ** (-2 * i / head_dim)


def _rope(x, positions, base=10000.0, *, layout="half", sign=1, keep=True, check=True,
          angle_dtype=None, ignore_positions=False):
    d = x.shape[-1]
    if check:
        _odd(d)
    half = d // 2
    pos = torch.arange(x.shape[-2]) if ignore_positions else positions
    c = torch.promote_types(x.dtype, torch.float32)
    ang = _angles64(pos, d, base)
    if angle_dtype is not None:
        ang = (pos.to(angle_dtype)[:, None]
               * (base ** (-2 * torch.arange(half, dtype=torch.float64) / d)).to(angle_dtype))
    cos, sin = torch.cos(ang).to(c), torch.sin(ang).to(c)
    xc = x.to(c)
    if layout == "half":
        x1, x2 = xc[..., :half], xc[..., half:]
    else:
        x1, x2 = xc[..., 0::2], xc[..., 1::2]
    y1 = x1 * cos - sign * x2 * sin
    y2 = sign * x1 * sin + x2 * cos
    if layout == "half":
        y = torch.cat([y1, y2], dim=-1)
    else:
        y = torch.stack([y1, y2], dim=-1).flatten(-2)
    return y.to(x.dtype) if keep else y


def rope_adjacent_pairs(x, positions, base=10000.0):
    return _rope(x, positions, base, layout="adjacent")


def rope_rotates_backwards(x, positions, base=10000.0):
    return _rope(x, positions, base, sign=-1)


def rope_float32_result(x, positions, base=10000.0):
    return _rope(x, positions, base, keep=False)


def rope_no_odd_check(x, positions, base=10000.0):
    return _rope(x, positions, base, check=False)


def rope_angles_in_x_dtype(x, positions, base=10000.0):
    return _rope(x, positions, base, angle_dtype=x.dtype)


def rope_ignores_positions(x, positions, base=10000.0):
    return _rope(x, positions, base, ignore_positions=True)


def rope_rotate_half(x, positions, base=10000.0):
    d = x.shape[-1]
    if d % 2:
        raise ValueError(f"head_dim={d} is odd")
    ang = _angles64(positions, d, base)
    ang = torch.cat([ang, ang], dim=-1)  # (N, d), HF style
    xd = x.double()
    rotated = torch.cat([-xd[..., d // 2:], xd[..., :d // 2]], dim=-1)
    return (xd * torch.cos(ang) + rotated * torch.sin(ang)).to(x.dtype)


def rope_complex(x, positions, base=10000.0):
    d = x.shape[-1]
    if d % 2:
        raise ValueError(f"head_dim={d} is odd")
    half = d // 2
    z = torch.complex(x[..., :half].double(), x[..., half:].double())
    rot = torch.polar(torch.ones(positions.shape[0], half, dtype=torch.float64),
                      _angles64(positions, d, base))
    w = z * rot
    return torch.cat([w.real, w.imag], dim=-1).to(x.dtype)


ENTRIES = [
    Entry("rope_angles", "wrong", "forgets_factor_two", "Uses base ** (-i / head_dim), forgetting the factor 2 in the exponent.", ang_forgets_two),
    Entry("rope_angles", "wrong", "positive_exponent", "Uses a positive exponent base ** (2i / head_dim), so frequencies grow instead of shrinking.", ang_positive_exponent),
    Entry("rope_angles", "wrong", "even_index_doubled", "Takes i from arange(0, head_dim, 2) and still multiplies it by 2 in the exponent, doubling the exponent.", ang_even_index_doubled),
    Entry("rope_angles", "wrong", "no_odd_check", "Does not raise ValueError for an odd head_dim and just uses head_dim // 2 pairs.", ang_no_odd_check),
    Entry("rope_angles", "wrong", "transposed", "Returns the angles as (head_dim // 2, N) instead of (N, head_dim // 2).", ang_transposed),
    Entry("rope_angles", "wrong", "floor_division", "Writes -2 * i // head_dim, so integer floor division turns the exponent into 0 or -1.", ang_floor_division),
    Entry("rope_angles", "right", "numpy_outer", None, ang_numpy),
    Entry("rope_angles", "right", "scalar_loop", None, ang_loop),
    Entry("apply_rope", "wrong", "adjacent_pairs", "Pairs adjacent features (2i, 2i+1) instead of the contract's rotate-half pairs (i, i + d/2).", rope_adjacent_pairs),
    Entry("apply_rope", "wrong", "rotates_backwards", "Flips the sign of the sine terms, rotating by -angle instead of +angle.", rope_rotates_backwards),
    Entry("apply_rope", "wrong", "returns_float32", "Computes in float32 and returns that instead of casting back to x's dtype.", rope_float32_result),
    Entry("apply_rope", "wrong", "no_odd_check", "Does not check for an odd head_dim, which then fails with a shape error instead of a ValueError.", rope_no_odd_check),
    Entry("apply_rope", "wrong", "angles_in_half_precision", "Computes position * frequency in x's half-precision dtype, so the angles at large positions lose all accuracy.", rope_angles_in_x_dtype),
    Entry("apply_rope", "wrong", "ignores_positions", "Uses arange(N) as positions instead of the given positions tensor.", rope_ignores_positions),
    Entry("apply_rope", "right", "hf_rotate_half", None, rope_rotate_half),
    Entry("apply_rope", "right", "complex_multiply", None, rope_complex),
]
