"""Every hint of lesson 04 is true: its examples recomputed, its last step followed."""

from __future__ import annotations

import warnings

import numpy as np

from mhalib.reference import causal_mask as reference_causal
from mhalib.reference import padding_mask as reference_padding
from tests.hints.claims import passes, says

T, F = True, False


def test_the_causal_example_and_the_top_left_slip():
    says("causal_mask", 2, "causal_mask(2, 5)",
         "[[True, True, True, True, False], [True, True, True, True, True]]", "key 0 only")
    assert reference_causal(2, 5).tolist() == [[T, T, T, T, F], [T, T, T, T, T]]
    top_left = np.tril(np.ones((2, 5), dtype=bool))
    assert top_left[0].tolist() == [T, F, F, F, F]


def test_one_comparison_broadcasts_to_the_table():
    says("causal_mask", 3, "(n_q, 1)", "(1, n_k)", "(n_q, n_k)")
    assert (np.arange(3)[:, None] <= np.arange(5)[None, :]).shape == (3, 5)


def test_the_last_causal_hint_passes_both_ways():
    says("causal_mask", -1, "query_pos = np.arange(n_q)[:, None] + (n_k - n_q)",
         "key_pos = np.arange(n_k)[None, :]", "return key_pos <= query_pos",
         "np.tril(np.ones((n_q, n_k), dtype=bool), k=n_k - n_q)")

    def causal_mask(n_q, n_k=None):
        n_k = n_q if n_k is None else n_k
        query_pos = np.arange(n_q)[:, None] + (n_k - n_q)
        key_pos = np.arange(n_k)[None, :]
        return key_pos <= query_pos

    def causal_mask_tril(n_q, n_k=None):
        n_k = n_q if n_k is None else n_k
        return np.tril(np.ones((n_q, n_k), dtype=bool), k=n_k - n_q)

    passes("causal_mask", causal_mask)
    passes("causal_mask", causal_mask_tril)


def test_the_padding_example_and_shape():
    says("padding_mask", 2, "(B, 1, 1, n)", "padding_mask([3, 1], 4)[:, 0, 0]",
         "[[True, True, True, False], [True, False, False, False]]")
    mask = reference_padding([3, 1], 4)
    assert mask.shape == (2, 1, 1, 4)
    assert mask[:, 0, 0].tolist() == [[T, T, T, F], [T, F, F, F]]
    assert np.broadcast_shapes(mask.shape, (2, 3, 5, 4)) == (2, 3, 5, 4)


def test_the_last_padding_hint_passes():
    says("padding_mask", -1, "keep = np.arange(n)[None, :] < np.asarray(lengths)[:, None]",
         "return keep[:, None, None, :]")

    def padding_mask(lengths, n):
        keep = np.arange(n)[None, :] < np.asarray(lengths)[:, None]
        return keep[:, None, None, :]

    passes("padding_mask", padding_mask)


def test_a_broadcast_mask_needs_an_operation_that_broadcasts():
    says("masked_attention", 1, "(B, 1, 1, N_k)", "`np.where`", "`scores[~mask] = ...`")
    scores, mask = np.zeros((2, 3, 4, 5)), reference_padding([5, 2], 5)  # mask (2, 1, 1, 5)
    assert mask.shape == (2, 1, 1, 5)
    assert np.where(mask, scores, -np.inf).shape == scores.shape
    try:
        scores[~mask] = -np.inf
    except IndexError:
        pass
    else:
        raise AssertionError("boolean indexing with a broadcast mask worked after all")


def test_an_empty_row_gives_nan_unless_handled():
    says("masked_attention", 2, "-inf - (-inf) = nan", "np.isfinite")
    says("masked_attention", 3, "0 / 0 is nan", "out=", "where=")
    scores = np.full((1, 3), -np.inf)
    top = scores.max(axis=-1, keepdims=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        assert np.isnan(scores - top).all()
        assert np.isnan(np.float64(0.0) / np.float64(0.0))
    exps = np.exp(scores - np.where(np.isfinite(top), top, 0.0))
    assert (exps == 0).all()
    total = exps.sum(axis=-1, keepdims=True)
    weights = np.divide(exps, total, out=np.zeros_like(exps), where=total > 0)
    assert (weights == 0).all() and (weights @ np.ones((3, 2)) == 0).all()


def test_the_last_masked_attention_hint_passes():
    says("masked_attention", -1,
         "scores = np.where(mask, q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1]), -np.inf)",
         "e = np.exp(scores - np.where(np.isfinite(top), top, 0.0))",
         "weights = np.divide(e, total, out=np.zeros_like(e), where=total > 0)")

    def masked_attention(q, k, v, mask):
        scores = np.where(mask, q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1]), -np.inf)
        top = scores.max(axis=-1, keepdims=True)
        e = np.exp(scores - np.where(np.isfinite(top), top, 0.0))
        total = e.sum(axis=-1, keepdims=True)
        weights = np.divide(e, total, out=np.zeros_like(e), where=total > 0)
        return weights @ v, weights

    passes("masked_attention", masked_attention)
