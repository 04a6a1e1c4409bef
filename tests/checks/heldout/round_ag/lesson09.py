"""Held-out learners' answers, lesson 09 (RoPE): rope_angles, apply_rope."""

import math

import numpy as np
import torch

from entry import Entry


# ============================================================ rope_angles — wrong
def ra_no_odd_guard(positions, head_dim, base=10000.0):
    i = torch.arange(head_dim // 2, dtype=torch.float64)
    inv_freq = base ** (-2.0 * i / head_dim)
    return (positions.to(torch.float64)[:, None] * inv_freq[None, :]).float()


def ra_missing_factor_two(positions, head_dim, base=10000.0):
    if head_dim % 2 != 0:
        raise ValueError(f"head_dim={head_dim} is odd")
    i = torch.arange(head_dim // 2, dtype=torch.float64)
    freqs = base ** (-i / head_dim)
    return torch.outer(positions.double(), freqs).float()


def ra_index_from_one(positions, head_dim, base=10000.0):
    if head_dim % 2:
        raise ValueError(f"head_dim={head_dim} must be even")
    half = head_dim // 2
    i = torch.arange(1, half + 1, dtype=torch.float64)
    theta = torch.pow(torch.tensor(base, dtype=torch.float64), -2 * i / head_dim)
    return positions.double().unsqueeze(1) * theta.unsqueeze(0)


def ra_outer_transposed(positions, head_dim, base=10000.0):
    if head_dim % 2 == 1:
        raise ValueError(f"head_dim={head_dim} is odd")
    exps = torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim
    inv_freq = 1.0 / (base ** exps)
    return torch.outer(inv_freq, positions.to(torch.float64)).to(torch.float32)


def ra_float16_positions(positions, head_dim, base=10000.0):
    if head_dim % 2:
        raise ValueError(f"head_dim={head_dim} is odd")
    inv = base ** (-2.0 * torch.arange(head_dim // 2, dtype=torch.float32) / head_dim)
    pos = positions.to(torch.float16)  # positions are small integers, half is enough
    return pos.float()[:, None] * inv[None, :]


def ra_precedence(positions, head_dim, base=10000.0):
    if head_dim % 2:
        raise ValueError(f"head_dim={head_dim} is odd")
    idx = torch.arange(head_dim // 2, dtype=torch.float64)
    freq = base ** -2 * idx / head_dim
    return (positions.to(torch.float64)[:, None] * freq).to(torch.float32)


# ============================================================ rope_angles — right
def ra_numpy_log_space(positions, head_dim, base=10000.0):
    if head_dim % 2 != 0:
        raise ValueError(f"head_dim={head_dim} is odd: RoPE needs pairs")
    pos = np.asarray(positions.cpu().numpy(), dtype=np.float64)
    i = np.arange(head_dim // 2, dtype=np.float64)
    inv_freq = np.exp(-2.0 * i * math.log(base) / head_dim)
    return torch.from_numpy(np.multiply.outer(pos, inv_freq)).to(positions.device)


def ra_python_pow_loops(positions, head_dim, base=10000.0):
    if head_dim % 2 == 1:
        raise ValueError("head_dim=%d is odd" % head_dim)
    half = head_dim // 2
    freqs = [math.pow(base, -2.0 * i / head_dim) for i in range(half)]
    rows = [[int(p) * f for f in freqs] for p in positions]
    return torch.tensor(rows, dtype=torch.float64).reshape(len(rows), half)


# ============================================================ apply_rope — wrong
def ar_adjacent_pairs(x, positions, base=10000.0):
    d = x.shape[-1]
    if d % 2:
        raise ValueError(f"head_dim={d} is odd")
    ct = torch.promote_types(x.dtype, torch.float32)
    i = torch.arange(d // 2, dtype=torch.float64)
    ang = (positions.double()[:, None] * base ** (-2.0 * i / d)).to(ct)
    cos, sin = ang.cos(), ang.sin()
    xe, xo = x[..., 0::2].to(ct), x[..., 1::2].to(ct)
    ye = xe * cos - xo * sin
    yo = xe * sin + xo * cos
    return torch.stack([ye, yo], dim=-1).flatten(-2).to(x.dtype)


def ar_sign_flipped(x, positions, base=10000.0):
    head_dim = x.shape[-1]
    if head_dim % 2 != 0:
        raise ValueError(f"head_dim={head_dim} is odd")
    compute = torch.promote_types(x.dtype, torch.float32)
    inv_freq = base ** (-2.0 * torch.arange(head_dim // 2, dtype=torch.float64) / head_dim)
    theta = (positions.to(torch.float64)[:, None] * inv_freq).to(compute)
    c, s = torch.cos(theta), torch.sin(theta)
    h = head_dim // 2
    a, b = x[..., :h].to(compute), x[..., h:].to(compute)
    first = a * c + b * s
    second = b * c - a * s
    return torch.cat((first, second), dim=-1).to(x.dtype)


def ar_angles_in_x_dtype(x, positions, base=10000.0):
    d = x.shape[-1]
    if d % 2:
        raise ValueError(f"head_dim={d} is odd")
    half = d // 2
    inv = base ** (-2.0 * torch.arange(half, dtype=x.dtype) / d)
    ang = positions.to(x.dtype)[:, None] * inv[None, :]  # angles in x's dtype
    cos = ang.cos().to(torch.promote_types(x.dtype, torch.float32))
    sin = ang.sin().to(cos.dtype)
    x1, x2 = x[..., :half].to(cos.dtype), x[..., half:].to(cos.dtype)
    return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], -1).to(x.dtype)


def ar_angles_broadcast_head_axis(x, positions, base=10000.0):
    d = x.shape[-1]
    if d % 2:
        raise ValueError(f"head_dim={d} is odd")
    ct = torch.promote_types(x.dtype, torch.float32)
    half = d // 2
    freqs = base ** (-2.0 * torch.arange(half, dtype=torch.float64) / d)
    ang = (positions.double()[:, None] * freqs).to(ct)
    cos = ang.cos()[:, None, :]  # room for the head axis
    sin = ang.sin()[:, None, :]
    x1, x2 = x[..., :half].to(ct), x[..., half:].to(ct)
    return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1).to(x.dtype)


def ar_returns_float32(x, positions, base=10000.0):
    d = x.shape[-1]
    if d % 2 == 1:
        raise ValueError(f"head_dim={d} is odd")
    h = d // 2
    inv = base ** (-2.0 * torch.arange(h, dtype=torch.float64) / d)
    ang = (positions.double()[:, None] * inv).float()
    x32 = x.float()
    lo, hi = x32[..., :h], x32[..., h:]
    return torch.cat([lo * ang.cos() - hi * ang.sin(), lo * ang.sin() + hi * ang.cos()], dim=-1)


def ar_ignores_positions(x, positions, base=10000.0):
    n, d = x.shape[-2], x.shape[-1]
    if d % 2:
        raise ValueError(f"head_dim={d} is odd")
    ct = torch.promote_types(x.dtype, torch.float32)
    pos = torch.arange(n, dtype=torch.float64)  # token n sits at position n
    inv = base ** (-2.0 * torch.arange(d // 2, dtype=torch.float64) / d)
    ang = (pos[:, None] * inv).to(ct)
    x1, x2 = x[..., : d // 2].to(ct), x[..., d // 2:].to(ct)
    return torch.cat([x1 * ang.cos() - x2 * ang.sin(), x1 * ang.sin() + x2 * ang.cos()],
                     dim=-1).to(x.dtype)


# ============================================================ apply_rope — right
def ar_complex_polar(x, positions, base=10000.0):
    d = x.shape[-1]
    if d % 2:
        raise ValueError(f"head_dim={d} is odd")
    half = d // 2
    freqs = base ** (-2.0 * torch.arange(half, dtype=torch.float64, device=x.device) / d)
    ang = positions.to(device=x.device, dtype=torch.float64)[:, None] * freqs
    rot = torch.polar(torch.ones_like(ang), ang)  # e^{i theta}, complex128
    z = torch.complex(x[..., :half].double(), x[..., half:].double()) * rot
    return torch.cat([z.real, z.imag], dim=-1).to(x.dtype)


def ar_rotate_half_numpy_angles(x, positions, base=10000.0):
    head_dim = x.shape[-1]
    if head_dim % 2 != 0:
        raise ValueError(f"head_dim={head_dim} is odd")
    half = head_dim // 2
    p = positions.cpu().numpy().astype(np.float64)
    theta = np.outer(p, base ** (-np.arange(0, head_dim, 2, dtype=np.float64) / head_dim))
    emb = np.concatenate([theta, theta], axis=-1)  # (N, d)
    ct = torch.promote_types(x.dtype, torch.float32)
    cos = torch.from_numpy(np.cos(emb)).to(device=x.device, dtype=ct)
    sin = torch.from_numpy(np.sin(emb)).to(device=x.device, dtype=ct)
    xc = x.to(ct)
    rotated = torch.cat([-xc[..., half:], xc[..., :half]], dim=-1)
    return (xc * cos + rotated * sin).to(x.dtype)


ENTRIES = [
    Entry("rope_angles", "wrong", "no_odd_guard",
          "never checks head_dim: an odd head_dim returns head_dim // 2 angles instead of raising "
          "ValueError",
          ra_no_odd_guard),
    Entry("rope_angles", "wrong", "exponent_missing_two",
          "uses base ** (-i / head_dim), dropping the 2 of the exponent -2i / head_dim, so the "
          "frequencies fall off half as fast",
          ra_missing_factor_two),
    Entry("rope_angles", "wrong", "index_from_one",
          "numbers the pairs i = 1 .. head_dim/2 instead of 0 .. head_dim/2 - 1, so the first "
          "pair does not turn at one radian per position and every frequency is shifted",
          ra_index_from_one),
    Entry("rope_angles", "wrong", "outer_transposed",
          "builds torch.outer(inv_freq, positions): the result is (head_dim // 2, N), the "
          "transpose of the (N, head_dim // 2) angles",
          ra_outer_transposed),
    Entry("rope_angles", "wrong", "positions_in_float16",
          "casts the positions to float16 before multiplying: positions above 2048 are rounded "
          "and those above 65504 become inf",
          ra_float16_positions),
    Entry("rope_angles", "wrong", "exponent_precedence",
          "writes base ** -2 * i / head_dim, which Python reads as (base ** -2) * i / head_dim: "
          "the exponent needs parentheses, base ** (-2 * i / head_dim)",
          ra_precedence),
    Entry("rope_angles", "right", "numpy_log_space", None, ra_numpy_log_space),
    Entry("rope_angles", "right", "python_pow_loops", None, ra_python_pow_loops),

    Entry("apply_rope", "wrong", "adjacent_pairs",
          "rotates adjacent features (2i, 2i+1) (the GPT-J / interleaved layout) instead of "
          "pairing feature i with i + head_dim/2 (rotate-half)",
          ar_adjacent_pairs),
    Entry("apply_rope", "wrong", "rotation_sign_flipped",
          "puts the minus sign on the wrong term (y_i = x_i cos + x_{i+d/2} sin, "
          "y_{i+d/2} = x_{i+d/2} cos - x_i sin), rotating by -angle",
          ar_sign_flipped),
    Entry("apply_rope", "wrong", "angles_in_half_precision",
          "computes the frequencies and angles in x's dtype, so for float16 / bfloat16 inputs "
          "position times frequency is rounded at large positions and the rotation is off",
          ar_angles_in_x_dtype),
    Entry("apply_rope", "wrong", "angles_broadcast_on_head_axis",
          "unsqueezes cos/sin to (N, 1, d/2) for a head axis, so they broadcast against the "
          "wrong axes: the N positions line up with H (or a wrong shape comes out / it raises)",
          ar_angles_broadcast_head_axis),
    Entry("apply_rope", "wrong", "returns_float32",
          "does the rotation in float32 and returns it without casting back to x's dtype",
          ar_returns_float32),
    Entry("apply_rope", "wrong", "ignores_positions_argument",
          "rotates row n by angle n (torch.arange(N)) instead of by the given positions[n]",
          ar_ignores_positions),
    Entry("apply_rope", "right", "complex_polar_float64", None, ar_complex_polar),
    Entry("apply_rope", "right", "rotate_half_numpy_angles", None, ar_rotate_half_numpy_angles),
]
