"""Every hint of lesson 02 is true: its examples recomputed, its last step followed."""

from __future__ import annotations

import json

import numpy as np

from mhalib.reference import merge_heads as reference_merge
from mhalib.reference import softmax
from mhalib.reference import split_heads as reference_split
from tests.checkout import REPO
from tests.hints.claims import passes, says


def split_heads(x, num_heads):  # the last hint of split_heads, followed
    batch, n, d_model = x.shape
    if d_model % num_heads:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    d_head = d_model // num_heads
    return x.reshape(batch, n, num_heads, d_head).transpose(0, 2, 1, 3)


def merge_heads(x):  # the last hint of merge_heads, followed
    batch, heads, n, d_head = x.shape
    return x.transpose(0, 2, 1, 3).reshape(batch, n, heads * d_head)


def test_the_split_example_is_right_and_the_plain_reshape_is_not():
    says("split_heads", 2, "np.arange(12).reshape(1, 2, 6)", "[[2, 3], [8, 9]]",
         "(1, 3, 2, 2)", "[[4, 5], [6, 7]]")
    x = np.arange(12).reshape(1, 2, 6)
    assert reference_split(x, 3)[0, 1].tolist() == [[2, 3], [8, 9]]
    assert x.reshape(1, 3, 2, 2)[0, 1].tolist() == [[4, 5], [6, 7]]


def test_the_last_split_hint_passes():
    says("split_heads", -1, "x.reshape(B, N, num_heads, d_head).transpose(0, 2, 1, 3)")
    passes("split_heads", split_heads)


def test_the_round_trip_catches_a_plain_reshape():
    says("merge_heads", 2, "np.arange(24).reshape(1, 4, 6)", "np.array_equal")
    x = np.arange(24).reshape(1, 4, 6)
    for heads in (2, 3):
        split = reference_split(x, heads)
        assert np.array_equal(reference_merge(split), x)
        assert not np.array_equal(split.reshape(1, 4, 6), x)  # the plain reshape mixes tokens


def test_the_last_merge_hint_passes():
    says("merge_heads", -1, "x.transpose(0, 2, 1, 3).reshape(B, N, H * d_head)")
    passes("merge_heads", merge_heads)


def test_heads_are_batch_axes_and_the_notebook_has_no_softmax():
    says("multi_head_attention", 1, "No loop over the heads", "(B, H, N, d_head)")
    says("multi_head_attention", 2, "This notebook has no `softmax` of its own",
         "sqrt(d_head)")
    rng = np.random.default_rng(2)
    q, k = rng.normal(size=(2, 3, 5, 4)), rng.normal(size=(2, 3, 5, 4))
    batched = q @ np.swapaxes(k, -1, -2)
    looped = np.stack([np.stack([q[b, h] @ k[b, h].T for h in range(3)]) for b in range(2)])
    np.testing.assert_allclose(batched, looped)
    notebook = json.loads((REPO / "solutions" / "02-multi-head" /
                           "multi_head_attention.ipynb").read_text())
    given = "".join("".join(cell["source"]) for cell in notebook["cells"]
                    if cell["cell_type"] == "code"
                    and not cell["metadata"].get("nbgrader", {}).get("solution"))
    assert "softmax" not in given  # no cell the learner is given defines or imports one


def test_the_shapes_along_the_layer_are_as_listed():
    says("multi_head_attention", 3, "(2, 5, 8)", "(2, 2, 5, 4)", "(2, 2, 5, 5)")
    rng = np.random.default_rng(0)
    x = rng.normal(size=(2, 5, 8))
    w_q, w_k, w_v, w_o = (rng.normal(size=(8, 8)) for _ in range(4))
    projected = x @ w_q
    q = reference_split(projected, 2)
    k = reference_split(x @ w_k, 2)
    weights = softmax(q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1]), axis=-1)
    mixed = weights @ reference_split(x @ w_v, 2)
    merged = reference_merge(mixed)
    shapes = [projected.shape, q.shape, weights.shape, mixed.shape, merged.shape,
              (merged @ w_o).shape]
    assert shapes == [(2, 5, 8), (2, 2, 5, 4), (2, 2, 5, 5), (2, 2, 5, 4), (2, 5, 8), (2, 5, 8)]


def test_the_last_layer_hint_passes():
    says("multi_head_attention", -1, "q = split_heads(x @ w_q, num_heads)",
         "q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])",
         "return merge_heads(weights @ v) @ w_o")

    def multi_head_attention(x, w_q, w_k, w_v, w_o, num_heads):
        q, k, v = (split_heads(x @ w, num_heads) for w in (w_q, w_k, w_v))
        scores = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
        shifted = np.exp(scores - scores.max(axis=-1, keepdims=True))
        weights = shifted / shifted.sum(axis=-1, keepdims=True)
        return merge_heads(weights @ v) @ w_o

    passes("multi_head_attention", multi_head_attention)
