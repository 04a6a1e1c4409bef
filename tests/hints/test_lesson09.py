"""Every hint of lesson 09 is true: its frequencies and rotations recomputed, its last step
followed."""

from __future__ import annotations

import math

import torch

from mhalib.reference import apply_rope as reference_apply
from mhalib.reference import rope_angles as reference_angles
from tests.hints.claims import passes, says


def test_frequencies_for_head_dim_8():
    says("rope_angles", 2, "1, 0.1, 0.01 and 0.001", "[1, 0.1, 0.01, 0.001]", "row of zeros")
    angles = reference_angles(torch.tensor([0, 1]), 8)
    assert torch.allclose(angles[1], torch.tensor([1.0, 0.1, 0.01, 0.001]))
    assert (angles[0] == 0).all()


def test_bfloat16_turns_257_into_256():
    says("rope_angles", 3, "bfloat16 turns position 257 into 256", "(N, head_dim // 2)")
    assert torch.tensor(257.0).bfloat16().item() == 256.0
    assert reference_angles(torch.arange(5), 6).shape == (5, 3)


def rope_angles(positions, head_dim, base=10000.0):
    """The last hint of rope_angles, followed."""
    if head_dim % 2:
        raise ValueError(f"head_dim={head_dim} is odd")
    i = torch.arange(head_dim // 2, dtype=torch.float64, device=positions.device)
    inv_freq = base ** (-2 * i / head_dim)
    return (positions.to(torch.float64)[:, None] * inv_freq[None, :]).float()


def test_the_last_angles_hint_passes():
    says("rope_angles", -1,
         "i = torch.arange(head_dim // 2, dtype=torch.float64, device=positions.device)",
         "inv_freq = base ** (-2 * i / head_dim)",
         "return (positions.to(torch.float64)[:, None] * inv_freq[None, :]).float()")
    passes("rope_angles", rope_angles)


def test_pairs_are_halves_and_the_sign_check():
    says("apply_rope", 1, "x[..., :d // 2]", "x[..., d // 2:]", "i + d/2")
    says("apply_rope", 2, "apply_rope(torch.tensor([[1.0, 0.0]]), torch.tensor([1]))",
         "[[0.540, 0.841]]", "[[0.540, -0.841]]")
    turned = reference_apply(torch.tensor([[1.0, 0.0]]), torch.tensor([1]))
    assert [round(v, 3) for v in turned[0].tolist()] == [0.540, 0.841]
    assert (round(math.cos(1), 3), round(math.sin(1), 3)) == (0.540, 0.841)
    x = torch.zeros(1, 4)
    x[0, 0] = 1.0  # feature 0 turns towards feature 2 (= 0 + d/2), not feature 1
    turned = reference_apply(x, torch.tensor([1]))
    assert turned[0, 1] == 0 and turned[0, 2] > 0.8


def test_the_last_rope_hint_passes():
    says("apply_rope", -1, "angles = rope_angles(positions.to(x.device), x.shape[-1], base)",
         "y1 = x1 * cos - x2 * sin", "y2 = x1 * sin + x2 * cos",
         "return torch.cat([y1, y2], dim=-1).to(x.dtype)")

    def apply_rope(x, positions, base=10000.0):
        compute = torch.promote_types(x.dtype, torch.float32)
        half = x.shape[-1] // 2
        angles = rope_angles(positions.to(x.device), x.shape[-1], base)
        cos, sin = torch.cos(angles), torch.sin(angles)
        x1, x2 = x[..., :half].to(compute), x[..., half:].to(compute)
        y1 = x1 * cos - x2 * sin
        y2 = x1 * sin + x2 * cos
        return torch.cat([y1, y2], dim=-1).to(x.dtype)

    passes("apply_rope", apply_rope)
