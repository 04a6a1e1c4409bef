"""The numpy answer key against independent oracles (PyTorch, scipy) and the contract's rules."""

import numpy as np
import pytest
import scipy.special
import scipy.stats
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from mhalib.reference import (
    attention,
    causal_mask,
    dot_product_variance,
    masked_attention,
    merge_heads,
    multi_head_attention,
    padding_mask,
    softmax,
    softmax_entropy,
    softmax_jacobian,
    split_heads,
)

rng = np.random.default_rng(0)
SIZES = st.integers(min_value=1, max_value=6)


def sdpa(q, k, v, mask=None):
    t = [torch.from_numpy(a) for a in (q, k, v)]
    m = None if mask is None else torch.from_numpy(np.ascontiguousarray(mask))
    return F.scaled_dot_product_attention(*t, attn_mask=m).numpy()


@given(n_q=SIZES, n_k=SIZES, d_k=SIZES, d_v=SIZES, batch=st.integers(1, 3))
@settings(max_examples=40, deadline=None)
def test_attention_matches_sdpa_for_any_shape(n_q, n_k, d_k, d_v, batch):
    q = rng.normal(size=(batch, n_q, d_k))
    k = rng.normal(size=(batch, n_k, d_k))
    v = rng.normal(size=(batch, n_k, d_v))
    out, weights = attention(q, k, v)
    np.testing.assert_allclose(out, sdpa(q, k, v), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(weights.sum(-1), 1.0, rtol=1e-12)


def test_softmax_matches_scipy_and_survives_huge_logits():
    x = rng.normal(size=(3, 4, 5)) * 1e4
    for axis in (0, 1, -1):
        np.testing.assert_allclose(softmax(x, axis=axis), scipy.special.softmax(x, axis=axis))
    with_inf = np.array([[0.0, -np.inf, 1.0]])
    assert softmax(with_inf)[0, 1] == 0
    assert softmax(np.float32([1, 2, 3])).dtype == np.float32


def test_float32_stays_float32():
    q = rng.normal(size=(2, 4, 8)).astype(np.float32)
    out, weights = attention(q, q, q)
    assert out.dtype == weights.dtype == np.float32


def test_multi_head_attention_matches_torch_multihead_attention():
    d_model, heads = 12, 3
    mha = torch.nn.MultiheadAttention(d_model, heads, bias=False, batch_first=True).double()
    w_q, w_k, w_v = mha.in_proj_weight.detach().numpy().reshape(3, d_model, d_model)
    w_o = mha.out_proj.weight.detach().numpy()
    x = rng.normal(size=(2, 5, d_model))
    expected, _ = mha(*(torch.from_numpy(x),) * 3, need_weights=False)
    got = multi_head_attention(x, w_q.T, w_k.T, w_v.T, w_o.T, heads)  # nn.Linear is (out, in)
    np.testing.assert_allclose(got, expected.detach().numpy(), rtol=1e-10, atol=1e-12)


@given(batch=SIZES, n=SIZES, heads=SIZES, d_head=SIZES)
@settings(max_examples=30, deadline=None)
def test_merge_heads_inverts_split_heads(batch, n, heads, d_head):
    x = rng.normal(size=(batch, n, heads * d_head))
    split = split_heads(x, heads)
    assert split.shape == (batch, heads, n, d_head)
    np.testing.assert_array_equal(split[:, 1 % heads, :, :], x[..., (1 % heads) * d_head:
                                                               (1 % heads + 1) * d_head])
    np.testing.assert_array_equal(merge_heads(split), x)


@given(n_q=st.integers(1, 9), extra=st.integers(0, 9))
def test_causal_mask_is_bottom_right_aligned(n_q, extra):
    n_k = n_q + extra
    mask = causal_mask(n_q, n_k)
    expected = np.tril(np.ones((n_k, n_k), dtype=bool))[-n_q:]  # last n_q rows of the full mask
    np.testing.assert_array_equal(mask, expected)
    if extra == 0:
        torch_mask = torch.ones(n_q, n_q, dtype=torch.bool).tril()
        np.testing.assert_array_equal(mask, torch_mask.numpy())


def test_masked_attention_matches_sdpa_and_zeroes_fully_masked_rows():
    q, k, v = rng.normal(size=(2, 4, 8)), rng.normal(size=(2, 6, 8)), rng.normal(size=(2, 6, 3))
    mask = padding_mask(np.array([6, 3]), 6)[:, 0]  # (B, 1, n)
    out, weights = masked_attention(q, k, v, mask)
    np.testing.assert_allclose(out, sdpa(q, k, v, mask), rtol=1e-10, atol=1e-12)
    none = np.zeros((4, 6), dtype=bool)
    out, weights = masked_attention(q, k, v, none)
    assert not np.isnan(out).any() and np.all(out == 0) and np.all(weights == 0)


def test_padding_mask_shape_and_content():
    mask = padding_mask(np.array([2, 0, 4]), 4)
    assert mask.shape == (3, 1, 1, 4) and mask.dtype == np.bool_
    np.testing.assert_array_equal(mask[:, 0, 0], [[1, 1, 0, 0], [0, 0, 0, 0], [1, 1, 1, 1]])


def test_scaling_helpers():
    assert abs(dot_product_variance(64) - 64) < 64 * 0.03
    p = softmax(rng.normal(size=7))
    np.testing.assert_allclose(softmax_entropy(p), scipy.stats.entropy(p))
    assert softmax_entropy(np.array([1.0, 0.0])) == 0
    logits = torch.tensor(rng.normal(size=5), requires_grad=True)
    jac = torch.autograd.functional.jacobian(lambda z: torch.softmax(z, -1), logits)
    np.testing.assert_allclose(softmax_jacobian(torch.softmax(logits, -1).detach().numpy()),
                               jac.numpy(), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("call,message", [
    (lambda: split_heads(np.zeros((1, 2, 512)), 7), "d_model=512 is not divisible by num_heads=7"),
    (lambda: split_heads(np.zeros((2, 512)), 8), "x must have shape (B, N, d_model)"),
    (lambda: attention(np.zeros((2, 3)), np.zeros((2, 4)), np.zeros((2, 1))), "share d_k"),
    (lambda: attention(np.zeros((2, 3)), np.zeros((2, 3)), np.zeros((5, 1))), "N_k"),
    (lambda: masked_attention(*(np.zeros((2, 3)),) * 3, np.ones((2, 2))), "mask must be boolean"),
    (lambda: masked_attention(*(np.zeros((2, 3)),) * 3, np.ones((3, 3), bool)), "mask.shape"),
    (lambda: causal_mask(0), "n_q must be positive, got n_q=0"),
    (lambda: causal_mask(2.5), "n_q must be an int"),
    (lambda: padding_mask(np.array([5]), 4), "lengths must lie in [0, n=4]"),
    (lambda: padding_mask(np.array([1.5]), 4), "lengths must be a 1-D array of ints"),
    (lambda: softmax_jacobian(np.ones((2, 2))), "p must be a vector"),
    (lambda: softmax(np.array(["a"])), "x must be a numeric array"),
])
def test_errors_name_the_argument_and_value(call, message):
    with pytest.raises((ValueError, TypeError)) as info:
        call()
    assert message in str(info.value)
