"""Readings added after rounds AK and AL (issue 22), each with a slip written here, apart from
the catalogue that found its kind: a softmax whose denominator counts one entry twice or leaves
one out, said as that entry and not as a sum over the wrong axis; a reshape to the output's own
shape whose tensor holds a whole multiple of its values, said as a tensor made too large
before it (a v never split into heads) and not as a size of the reshape; chunked prefill with
each chunk's heads split and merged by plain reshapes (a model of its own, fixture in
``answers/lesson11.py``)."""

from __future__ import annotations

import numpy as np

from mhalib.checks import get_exercise, judge_record
from mhalib.checks.probe import probe


def judged(exercise: str, func, seed: int = 1):
    checker = get_exercise(exercise)
    return judge_record(exercise, probe(checker, func, seed, "grading"), seed)


def softmax_total_seeded_with_last(x, axis=-1):
    z = np.exp(x - np.max(x, axis=axis, keepdims=True))
    zs = np.moveaxis(z, axis, -1)
    total = zs[..., -1:].copy()  # (..., 1): seeded with the last entry, which the loop adds again
    for j in range(zs.shape[-1]):
        total += zs[..., j:j + 1]
    return np.moveaxis(zs / total, -1, axis)


def softmax_denominator_skips_first(x, axis=-1):
    z = np.exp(x - np.max(x, axis=axis, keepdims=True))
    rest = np.delete(z, 0, axis=axis)  # every entry but the first
    return z / rest.sum(axis=axis, keepdims=True)


def softmax_over_the_whole_array(x, axis=-1):
    z = np.exp(x - np.max(x, axis=axis, keepdims=True))
    return z / z.sum()


def test_a_denominator_that_counts_one_entry_twice_is_said_as_that_entry():
    verdict = judged("softmax", softmax_total_seeded_with_last)
    assert not verdict.passed
    assert "counted twice" in verdict.diagnosis, verdict.diagnosis
    assert "sum over another axis" not in verdict.diagnosis, verdict.diagnosis


def test_a_denominator_that_leaves_one_entry_out_is_said_as_left_out():
    verdict = judged("softmax", softmax_denominator_skips_first)
    assert not verdict.passed
    assert "without that entry's exponential" in verdict.diagnosis, verdict.diagnosis
    assert "counted twice" not in verdict.diagnosis, verdict.diagnosis


def test_a_denominator_over_the_whole_array_is_no_entry_counted_off():
    verdict = judged("softmax", softmax_over_the_whole_array)
    assert not verdict.passed
    assert "counted twice" not in verdict.diagnosis, verdict.diagnosis
    assert "without that entry's" not in verdict.diagnosis, verdict.diagnosis


def mha_with_k_and_v_kept_whole(x, w_q, w_k, w_v, w_o, num_heads):
    b, n, d_model = x.shape
    d_head = d_model // num_heads
    q = (x @ w_q).reshape(b, n, num_heads, d_head).transpose(0, 2, 1, 3)  # (B, H, N, d_head)
    k = (x @ w_k).reshape(b, n, num_heads, d_head).transpose(0, 2, 1, 3)
    v = (x @ w_v)[:, None]  # (B, 1, N, d_model): never split into heads
    s = q @ k.transpose(0, 1, 3, 2) / np.sqrt(d_head)  # (B, H, N, N)
    p = np.exp(s - s.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    ctx = p @ v  # (B, H, N, d_model): H times too many values
    return ctx.transpose(0, 2, 1, 3).reshape(b, n, d_model) @ w_o


def test_a_reshape_to_the_output_s_shape_of_too_many_values_blames_the_tensor_not_the_sizes():
    verdict = judged("multi_head_attention", mha_with_k_and_v_kept_whole)
    assert not verdict.passed
    assert "the output's own shape" in verdict.diagnosis, verdict.diagnosis
    assert "never split into heads" in verdict.diagnosis, verdict.diagnosis
    assert "should be" not in verdict.diagnosis.split("(it raised")[0], verdict.diagnosis


def mha_merged_into_a_wrong_width(x, w_q, w_k, w_v, w_o, num_heads):
    b, n, d_model = x.shape
    d_head = d_model // num_heads
    heads = [(x @ w)[..., None].reshape(b, n, num_heads, d_head).transpose(0, 2, 1, 3)
             for w in (w_q, w_k, w_v)]
    q, k, v = heads  # (B, H, N, d_head)
    s = q @ k.transpose(0, 1, 3, 2) / np.sqrt(d_head)
    p = np.exp(s - s.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    return (p @ v).transpose(0, 2, 1, 3).reshape(b, n, d_head) @ w_o[:d_head]  # (B, N, d_head)


def test_a_reshape_whose_own_size_is_wrong_is_still_said_as_that_size():
    verdict = judged("multi_head_attention", mha_merged_into_a_wrong_width)
    assert not verdict.passed
    assert "the output's own shape" not in verdict.diagnosis, verdict.diagnosis
