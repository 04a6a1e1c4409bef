"""Lesson 09 answer key (torch): rope_angles and apply_rope against the definition written as
loops, rotation matrices, the relative-position property and the published Llama settings."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from mhalib.reference import apply_rope, rope_angles


def _loop_rope(x, positions, base):
    d = x.shape[-1]
    out = x.double().clone()
    for n, pos in enumerate(positions.tolist()):
        for i in range(d // 2):
            angle = pos * base ** (-2 * i / d)
            a, b = x[..., n, i].double(), x[..., n, i + d // 2].double()
            out[..., n, i] = a * math.cos(angle) - b * math.sin(angle)
            out[..., n, i + d // 2] = a * math.sin(angle) + b * math.cos(angle)
    return out


def test_angles_follow_the_formula():
    angles = rope_angles(torch.tensor([0, 1, 7, 131071]), 128, 500000.0)
    assert angles.shape == (4, 64) and angles.dtype == torch.float32
    assert torch.all(angles[0] == 0) and angles[2, 0] == 7
    i = torch.arange(64, dtype=torch.float64)
    torch.testing.assert_close(angles[3].double(), 131071 * 500000.0 ** (-2 * i / 128),
                               rtol=1e-6, atol=0)


@settings(max_examples=25, deadline=None)
@given(n=st.integers(1, 6), half=st.integers(1, 5), lead=st.sampled_from([(), (2,), (2, 3)]),
       base=st.sampled_from([10.0, 10000.0, 500000.0]), start=st.integers(0, 5000))
def test_apply_rope_matches_the_loop(n, half, lead, base, start):
    x = torch.randn(*lead, n, 2 * half, dtype=torch.float64)
    positions = torch.arange(start, start + n)
    torch.testing.assert_close(apply_rope(x, positions, base), _loop_rope(x, positions, base))


def test_rotation_keeps_lengths_and_scores_depend_on_the_distance_only():
    q, k = torch.randn(1, 64, dtype=torch.float64), torch.randn(1, 64, dtype=torch.float64)
    assert torch.allclose(apply_rope(q, torch.tensor([123])).norm(), q.norm())

    def score(m, n):
        return (apply_rope(q, torch.tensor([m])) * apply_rope(k, torch.tensor([n]))).sum()

    for m, n in [(5, 2), (105, 102), (100_003, 100_000)]:
        torch.testing.assert_close(score(m, n), score(3, 0))
    assert not torch.allclose(score(3, 0), score(4, 0))


def test_position_zero_is_the_identity_and_dtype_and_shape_are_kept():
    x = torch.randn(2, 3, 4, 8, dtype=torch.bfloat16)
    out = apply_rope(x, torch.arange(4))
    assert out.dtype == torch.bfloat16 and out.shape == x.shape
    assert torch.equal(apply_rope(x[..., :1, :], torch.tensor([0])), x[..., :1, :])


def test_matches_the_complex_number_form_of_the_half_layout():
    x = torch.randn(2, 6, 16, dtype=torch.float64)
    positions = torch.tensor([0, 3, 9, 27, 81, 243])
    inv_freq = 10000.0 ** (-torch.arange(0, 16, 2, dtype=torch.float64) / 16)
    angles = positions.double()[:, None] * inv_freq
    z = torch.complex(x[..., :8], x[..., 8:]) * torch.polar(torch.ones_like(angles), angles)
    torch.testing.assert_close(apply_rope(x, positions), torch.cat([z.real, z.imag], -1))


@pytest.mark.parametrize("head_dim", [1, 7, 129])
def test_odd_head_dim_raises(head_dim):
    with pytest.raises(ValueError, match="odd"):
        rope_angles(torch.arange(3), head_dim)
    with pytest.raises(ValueError, match="odd"):
        apply_rope(torch.randn(3, head_dim), torch.arange(3))


def test_bad_arguments_are_named():
    with pytest.raises(ValueError, match="positions.shape"):
        apply_rope(torch.randn(2, 4, 8), torch.arange(3))
    with pytest.raises(ValueError, match="base"):
        rope_angles(torch.arange(3), 8, base=1.0)
    with pytest.raises(TypeError, match="positions"):
        rope_angles([0, 1, 2], 8)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_keeps_device_and_dtype():
    x = torch.randn(2, 4, 6, 16, device="cuda", dtype=torch.float16)
    positions = torch.arange(100, 106, device="cuda")
    out = apply_rope(x, positions, 500000.0)
    assert out.device.type == "cuda" and out.dtype == torch.float16
    expected = _loop_rope(x.cpu().double(), positions.cpu(), 500000.0)
    torch.testing.assert_close(out.cpu().double(), expected, rtol=3e-3, atol=3e-3)
    assert rope_angles(positions, 16).device.type == "cuda"
