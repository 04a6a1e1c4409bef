"""Readings added after rounds AK and AL (issue 22), each with a slip written here, apart from
the catalogue that found its kind: a softmax whose denominator counts one entry twice or leaves
one out, said as that entry and not as a sum over the wrong axis; a reshape to the output's own
shape whose tensor holds a whole multiple of its values, said as a tensor made too large
before it (a v never split into heads) and not as a size of the reshape; chunked prefill with
each chunk's heads split and merged by plain reshapes (a model of its own, fixture in
``answers/lesson11.py``); after round AM, a reshape size that should be the last chunk's length,
said as that length although the batch has the same size; an index written at one axis of an
argument and meant for another, said with the subscript's axes swapped; after round AN, % where
// belongs among the search's operator swaps; diag and outer of one row used on a batch of
rows; a running sum that kept the keys' axis beside a value that kept the features; after round
AP, a value reduced from the data for its one read is the likelier slip when a repair reads
around it (and a size read off a shape is not); after round AQ, np.maximum(x, axis) where the
reduction np.max(x, axis=axis, keepdims=True) belongs among the search's edits; after round
AS, a constant where the argument belongs never said to cancel a slip, and masked scores set to
0 read when only some masked keys are there to weigh; after round AT, a vector at dimension 0
no feature width (two vectors meant as a table of pairs), and a wrong reshape size that is an
argument's own value not said as certainly computed."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from mhalib.checks import get_exercise, judge_record
from mhalib.checks.probe import probe
from tests.checks.repair_harness import searching  # noqa: F401 (fixture)


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


def prefill_rows_reshaped_to_a_whole_chunk(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    b, n, d_model = x.shape
    d_head = d_model // num_heads
    dtype = torch.promote_types(x.dtype, torch.float32)

    def heads(t):  # (b, c, d_model) -> (b, H, c, d_head)
        return t.reshape(b, t.shape[1], num_heads, d_head).transpose(1, 2).to(dtype)

    keys, values, rows = [], [], []
    for start in range(0, n, chunk_size):
        xc = x[:, start:start + chunk_size]
        keys.append(heads(xc @ w_k))
        values.append(heads(xc @ w_v))
        k, v = torch.cat(keys, dim=2), torch.cat(values, dim=2)
        s = heads(xc @ w_q) @ k.transpose(-1, -2) / math.sqrt(d_head)
        c, t = s.shape[-2], s.shape[-1]
        s = s.masked_fill(~torch.ones(c, t, dtype=torch.bool).tril(t - c), -math.inf)
        ctx = torch.softmax(s, dim=-1) @ v  # (b, H, c, d_head)
        rows.append(ctx.transpose(1, 2).reshape(b, chunk_size, d_model))  # c rows, not chunk_size
    return torch.cat(rows, dim=1).to(x.dtype) @ w_o


def test_a_reshape_size_that_should_be_the_last_chunk_s_length_is_said_as_that_length():
    verdict = judged("chunked_prefill", prefill_rows_reshaped_to_a_whole_chunk)
    assert not verdict.passed
    assert "should be" in verdict.diagnosis and "(as many as N % chunk_size)" in \
        verdict.diagnosis, verdict.diagnosis


def paged_with_table_indices_crossed(q, k_pages, v_pages, block_table, seq_lens):
    bsz, h, d = q.shape
    g, page = k_pages.shape[1], k_pages.shape[2]
    out = torch.zeros(bsz, h, d, dtype=torch.float64)
    for seq in range(bsz):
        n = int(seq_lens[seq])
        keys, vals = [], []
        for t in range(n):
            where = block_table[t // page, seq]  # (page, sequence): the table's axes crossed
            keys.append(k_pages[where, :, t % page].double())  # (G, d)
            vals.append(v_pages[where, :, t % page].double())
        if not keys:
            continue
        k = torch.stack(keys, 1).repeat_interleave(h // g, 0)  # (H, n, d)
        v = torch.stack(vals, 1).repeat_interleave(h // g, 0)
        w = torch.softmax(torch.einsum("hd,hnd->hn", q[seq].double(), k) / math.sqrt(d), -1)
        out[seq] = torch.einsum("hn,hnd->hd", w, v)
    return out.to(q.dtype)


def test_an_index_meant_for_another_axis_of_an_argument_is_said_with_the_axes_swapped():
    verdict = judged("paged_attention", paged_with_table_indices_crossed)
    assert not verdict.passed
    assert "index `t // page`" in verdict.diagnosis, verdict.diagnosis
    assert "block_table[seq, t // page]" in verdict.diagnosis, verdict.diagnosis


def repeat_kv_groups_by_remainder(x, n_rep):
    b, g, n, d = x.shape
    heads = [x[:, h % n_rep] for h in range(g * n_rep)]  # h // n_rep is head h's group
    return torch.stack(heads, dim=1)


@pytest.mark.usefixtures("searching")
def test_a_remainder_where_a_floor_division_belongs_is_mended_by_the_search():
    verdict = judged("repeat_kv", repeat_kv_groups_by_remainder)
    assert not verdict.passed
    assert "write `x[:, h // n_rep]` where your code has `x[:, h % n_rep]`" in verdict.diagnosis, \
        verdict.diagnosis


def softmax_backward_one_row_jacobian(weights, grad_weights):
    jac = torch.diag(weights) - torch.outer(weights, weights)  # (n, n): one row's Jacobian
    return grad_weights @ jac


def test_a_one_row_recipe_of_diag_and_outer_on_a_batch_is_said_as_not_batching():
    verdict = judged("softmax_backward", softmax_backward_one_row_jacobian)
    assert not verdict.passed
    assert "diag_embed" in verdict.diagnosis and "does not batch" in verdict.diagnosis, \
        verdict.diagnosis


def online_softmax_row_sums_over_queries(q, k, v, block_size=64, causal=False):
    n_q, n_k = q.shape[-2], k.shape[-2]
    scale = q.shape[-1] ** -0.5
    m = torch.full(q.shape[:-1] + (1,), -math.inf, dtype=torch.float64)
    total = torch.zeros(q.shape[:-2] + (1, 1), dtype=torch.float64)
    acc = torch.zeros(q.shape, dtype=torch.float64)
    for start in range(0, n_k, block_size):
        s = q.double() @ k[..., start:start + block_size, :].double().transpose(-1, -2) * scale
        if causal:
            keys = torch.arange(start, min(start + block_size, n_k))
            s = s.masked_fill(keys > torch.arange(n_q)[:, None] + n_k - n_q, -math.inf)
        m_new = torch.maximum(m, s.amax(-1, keepdim=True))
        p = torch.exp(s - m_new)
        alpha = torch.exp(m - m_new)
        total = total * alpha + p.sum(dim=-2, keepdim=True)  # over the queries: (..., 1, block)
        acc = acc * alpha + p @ v[..., start:start + block_size, :].double()
        m = m_new
    return (acc / total).to(q.dtype)


def test_a_running_sum_that_kept_the_keys_is_among_the_readings_of_a_broadcast_clash():
    verdict = judged("online_softmax_attention", online_softmax_row_sums_over_queries)
    assert not verdict.passed
    assert "If instead the operand with" in verdict.diagnosis, verdict.diagnosis
    assert "it kept that axis" in verdict.diagnosis, verdict.diagnosis


def padding_mask_as_wide_as_the_longest(lengths, n):
    lengths = np.asarray(lengths)
    longest = int(np.max(lengths))  # the longest length, read once below where n belongs
    keep = np.arange(longest)[None, :] < lengths[:, None]  # (B, longest)
    return keep[:, None, None, :]


@pytest.mark.usefixtures("searching")
def test_a_value_reduced_from_the_data_for_its_one_read_is_said_as_the_likelier_slip():
    verdict = judged("padding_mask", padding_mask_as_wide_as_the_longest)
    assert not verdict.passed
    assert "`longest` is then read nowhere: the slip is most likely where it is made" in \
        verdict.diagnosis, verdict.diagnosis


def attention_scaled_by_values_width(q, k, v):
    d_v = v.shape[-1]  # a size read off a shape, then read where d_k belongs
    s = q @ np.swapaxes(k, -1, -2) / np.sqrt(d_v)
    w = np.exp(s - s.max(-1, keepdims=True))
    w = w / w.sum(-1, keepdims=True)
    return w @ v, w


@pytest.mark.usefixtures("searching")
def test_a_size_read_off_a_shape_for_its_one_read_is_not_said_as_read_around():
    verdict = judged("attention", attention_scaled_by_values_width)
    assert not verdict.passed
    assert "where your code has `v.shape[-1]`" in verdict.diagnosis, verdict.diagnosis
    assert "read nowhere" not in verdict.diagnosis, verdict.diagnosis


def softmax_shifted_by_an_elementwise_maximum(x, axis=-1):
    top = np.maximum(np.asarray(x, dtype=float), axis)  # meant: each slice's largest entry
    ex = np.exp(x - top)
    return ex / ex.sum(axis=axis, keepdims=True)


@pytest.mark.usefixtures("searching")
def test_an_elementwise_maximum_where_the_reduction_belongs_is_mended_by_the_search():
    verdict = judged("softmax", softmax_shifted_by_an_elementwise_maximum)
    assert not verdict.passed
    assert "keepdims=True)` where your code has `np.maximum(" in verdict.diagnosis, \
        verdict.diagnosis


def prefill_future_scores_zeroed(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    b, n, d_model = x.shape
    d_head = d_model // num_heads

    def heads(t):  # (b, c, d_model) -> (b, H, c, d_head)
        return t.reshape(b, t.shape[1], num_heads, d_head).transpose(1, 2).double()

    keys, values, rows = [], [], []
    for start in range(0, n, chunk_size):
        xc = x[:, start:start + chunk_size]
        keys.append(heads(xc @ w_k))
        values.append(heads(xc @ w_v))
        k, v = torch.cat(keys, dim=2), torch.cat(values, dim=2)
        s = heads(xc @ w_q) @ k.transpose(-1, -2) / math.sqrt(d_head)
        c, t = s.shape[-2], s.shape[-1]
        seen = torch.ones(c, t, dtype=torch.bool).tril(t - c)
        s = torch.where(seen, s, torch.zeros_like(s))  # 0 where -inf belongs
        rows.append((torch.softmax(s, dim=-1) @ v).transpose(1, 2).reshape(b, c, d_model))
    return (torch.cat(rows, dim=1) @ w_o.double()).to(x.dtype)


def test_future_scores_set_to_0_inside_chunks_are_said_as_0_where_minus_inf_belongs():
    verdict = judged("chunked_prefill", prefill_future_scores_zeroed)
    assert not verdict.passed
    assert "gets exactly the weight of a score of 0" in verdict.diagnosis, verdict.diagnosis


def cache_bytes_in_half_precision_always(num_layers, num_kv_heads, head_dim, seq_len,
                                        batch_size=1, bytes_per_element=2):
    half = 2  # bytes of a bf16: bytes_per_element never read
    keys = num_layers * num_kv_heads * head_dim * seq_len * batch_size * half
    values = num_layers * num_kv_heads * head_dim * seq_len * batch_size * half
    return keys + values


@pytest.mark.usefixtures("searching")
def test_a_constant_where_the_argument_belongs_is_never_said_to_cancel_a_slip_elsewhere():
    verdict = judged("kv_cache_bytes", cache_bytes_in_half_precision_always)
    assert not verdict.passed
    assert "bytes_per_element" in verdict.diagnosis, verdict.diagnosis
    assert "not where the slip is" not in verdict.diagnosis, verdict.diagnosis


def rope_angles_without_a_table(positions, head_dim, base=10000.0):
    freqs = base ** (-torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim)
    return torch.as_tensor(positions).double() * freqs  # (N,) * (head_dim / 2,): no pairs


def test_two_vectors_of_other_lengths_are_not_said_to_have_kept_their_features():
    verdict = judged("rope_angles", rope_angles_without_a_table)
    assert not verdict.passed
    assert "the feature width" not in verdict.diagnosis, verdict.diagnosis
    assert "a[:, None] * b[None, :]" in verdict.diagnosis, verdict.diagnosis


def gqa_keys_split_into_query_heads(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads,
                                    causal=False):
    b, n, d_model = x.shape
    d_head = d_model // num_heads
    q = (x @ w_q).reshape(b, n, num_heads, d_head).transpose(1, 2)
    k = (x @ w_k).reshape(b, n, num_heads, d_head).transpose(1, 2)  # num_kv_heads belongs
    v = (x @ w_v).reshape(b, n, num_kv_heads, d_head).transpose(1, 2)
    v = v.repeat_interleave(num_heads // num_kv_heads, dim=1)
    return F.scaled_dot_product_attention(q, k, v, is_causal=causal).transpose(1, 2).reshape(
        b, n, d_model) @ w_o


def test_a_wrong_size_that_is_an_argument_s_value_is_not_said_as_certainly_computed():
    verdict = judged("grouped_query_attention", gqa_keys_split_into_query_heads)
    assert not verdict.passed
    assert "(as many as num_kv_heads)" in verdict.diagnosis, verdict.diagnosis
    assert "is d_model // num_heads:" not in verdict.diagnosis, verdict.diagnosis
