"""Generic readings of a wrong answer (issue 22), each with a slip written here, apart from the
answer key: inputs read another way (mhalib.checks.input_edits), the order of axes the right
values were read in (explain_axes), one triangle filled, a number one off, a product's sizes
swapped, a reshape's wrong size named, masked scores filled with 0, the merged lse taken as
the max, a row term weighted twice, the learner's own check refusing a valid input, and a
reduction over an empty axis. Each must be named, and none may be said of a right answer."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from mhalib.checks import get_exercise, judge_record
from mhalib.checks.explain_axes import axis_order
from mhalib.checks.probe import probe
from tests.checks.answers.lesson06 import _merge, _split


def judged(exercise: str, func, seed: int = 1):
    checker = get_exercise(exercise)
    return judge_record(exercise, probe(checker, func, seed, "grading"), seed)


def softmax_minus_inf_zeroed(x, axis=-1):
    x = np.nan_to_num(x, neginf=0.0)
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def masked_attention_mask_flipped(q, k, v, mask=None):
    s = q @ np.swapaxes(k, -1, -2) / math.sqrt(q.shape[-1])
    if mask is not None:
        s = np.where(np.swapaxes(mask, -1, -2), s, -np.inf)
    top = s.max(-1, keepdims=True)
    e = np.exp(s - np.where(np.isfinite(top), top, 0.0))
    total = e.sum(-1, keepdims=True)
    w = np.divide(e, total, out=np.zeros_like(e), where=total > 0)
    return w @ v, w


def jacobian_upper_only(p):
    n = p.shape[0]
    jac = np.zeros((n, n))
    for i in range(n):
        for j in range(i, n):
            jac[i, j] = p[i] * ((i == j) - p[j])
    return jac


def crossover_one_short(d_model):
    n = 1
    while 4 * n * n * d_model < 8 * n * d_model * d_model:
        n += 1
    return n - 1


def backward_flops_swapped_sizes(seq_len, head_dim, recompute=True):
    n, d = seq_len, head_dim
    total = 2 * n * n * d + 2 * n * d * d + 2 * n * n * d + 2 * n * n * d
    return total + (2 * n * n * d if recompute else 0)


def softmax_backward_p_twice(weights, grad_weights):
    row = (weights * grad_weights).sum(-1, keepdim=True)
    return weights * grad_weights - weights * weights * row


def merge_lse_as_max(out_a, lse_a, out_b, lse_b):
    lse = torch.maximum(lse_a, lse_b)
    wa = torch.exp(lse_a - lse).nan_to_num(0.0)[..., None]
    wb = torch.exp(lse_b - lse).nan_to_num(0.0)[..., None]
    return (wa * out_a + wb * out_b).to(out_a.dtype), lse.to(lse_a.dtype)


def split_heads_reversed_check(x, num_heads):
    b, n, d = x.shape
    if num_heads % d:
        raise ValueError(f"d_model={d} is not divisible by num_heads={num_heads}")
    return x.reshape(b, n, num_heads, d // num_heads).transpose(0, 2, 1, 3)


@pytest.mark.parametrize("exercise, func, flag, words", [
    ("softmax", softmax_minus_inf_zeroed, "input:x:neg_inf_as_zero", "-inf entries used as 0"),
    ("masked_attention", masked_attention_mask_flipped, "input:mask:swapped",
     "last two axes swapped"),
    ("softmax_jacobian", jacobian_upper_only, "form:triangle", "only one triangle"),
    ("crossover_seq_len", crossover_one_short, "count:off_by_one", "exactly one less"),
    ("attention_backward_flops", backward_flops_swapped_sizes, "count:term_swapped",
     "head_dim^2 * seq_len where"),
    ("softmax_backward", softmax_backward_p_twice, "readback:row_term_times_p_twice",
     "multiplied by the weights twice"),
    ("merge_attention_states", merge_lse_as_max, "readback:lse_is_max", "max(lse_a, lse_b)"),
    ("split_heads", split_heads_reversed_check, "raised:own_refusal", "refused a valid input"),
])
def test_a_slip_is_named_by_what_it_generally_is(exercise, func, flag, words):
    verdict = judged(exercise, func)
    assert not verdict.passed
    assert flag in verdict.flags and words in verdict.diagnosis, verdict.diagnosis


def test_heads_taken_strided_are_read_as_the_inputs_split_the_other_way():
    def absorb_strided_rows(w_uk, w_uv, w_q, w_o, num_heads):
        d_head = w_q.shape[1] // num_heads
        heads = lambda w: w.reshape(w.shape[0], num_heads, d_head).permute(1, 0, 2)  # noqa: E731
        w_o_heads = w_o.reshape(d_head, num_heads, -1).permute(1, 0, 2)  # every H-th row
        return heads(w_q) @ heads(w_uk).transpose(-1, -2), heads(w_uv) @ w_o_heads

    verdict = judged("absorb_mla_weights", absorb_strided_rows)
    assert any(f.startswith("input:w_o@0:strided") for f in verdict.flags), verdict.diagnosis
    assert "every 4-th entry" in verdict.diagnosis or "every" in verdict.diagnosis


def test_masked_scores_filled_with_zero_are_named_not_a_missing_mask():
    def online_zero_fill(q, k, v, block_size=64, causal=False):
        d = q.shape[-1]
        s = q.double() @ k.double().transpose(-1, -2) / math.sqrt(d)
        if causal:
            n_q, n_k = s.shape[-2:]
            future = torch.ones(n_q, n_k, dtype=torch.bool).triu(n_k - n_q + 1)
            s = s.masked_fill(future, 0.0)  # 0 where -inf belongs
        return (torch.softmax(s, -1) @ v.double()).to(q.dtype)

    verdict = judged("online_softmax_attention", online_zero_fill)
    assert "weights:masked_as_zero" in verdict.flags, verdict.diagnosis
    assert "was not applied" not in verdict.diagnosis


def test_a_reduction_over_an_empty_axis_is_explained():
    def decode_without_own_key(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
        b, n, d = x.shape
        dh, rep = d // num_heads, num_heads // num_kv_heads
        keys, values, outs = [], [], []
        for t in range(n):
            xt = x[:, t:t + 1]
            q = (xt @ w_q).reshape(b, 1, num_heads, dh).transpose(1, 2)
            k_seen = torch.cat(keys, 2) if keys else xt.new_zeros(b, num_kv_heads, 0, dh)
            v_seen = torch.cat(values, 2) if values else xt.new_zeros(b, num_kv_heads, 0, dh)
            s = q @ k_seen.repeat_interleave(rep, 1).transpose(-1, -2) / math.sqrt(dh)
            w = torch.exp(s - s.amax(-1, keepdim=True))
            outs.append((w / w.sum(-1, keepdim=True)) @ v_seen.repeat_interleave(rep, 1))
            keys.append((xt @ w_k).reshape(b, 1, num_kv_heads, dh).transpose(1, 2))
            values.append((xt @ w_v).reshape(b, 1, num_kv_heads, dh).transpose(1, 2))
        return torch.cat(outs, 2).transpose(1, 2).reshape(b, n, d) @ w_o

    verdict = judged("decode_with_cache", decode_without_own_key)
    assert "raised:empty_reduction" in verdict.flags, verdict.diagnosis


def test_a_reshape_names_the_size_that_is_wrong_not_the_head_count():
    def split_heads_wrong_unpack(x, num_heads):
        if x.shape[-1] % num_heads:
            raise ValueError(f"d_model={x.shape[-1]} is not divisible by num_heads={num_heads}")
        b, width, n = x.shape  # the axes are (B, N, d_model): the width is taken from N
        return x.reshape(b, width, num_heads, width // num_heads).transpose(0, 2, 1, 3)

    verdict = judged("split_heads", split_heads_wrong_unpack)
    assert "at position 3 should be" in verdict.diagnosis, verdict.diagnosis


def test_the_order_the_right_values_were_read_in_is_said_in_the_case_sizes():
    x = np.random.default_rng(0).normal(size=(2, 5, 12))
    right = x.reshape(2, 5, 3, 4).transpose(0, 2, 1, 3)
    said = axis_order(right, x.reshape(2, 3, 5, 4), {"B": 2, "N": 5, "num_heads": 3,
                                                     "d_head": 4})
    assert said is not None and "(B, N, num_heads, d_head)" in said
    assert axis_order(right, right + 1.0, {"N": 5}) is None


@pytest.mark.parametrize("exercise, func", [
    ("softmax", lambda x, axis=-1: torch.softmax(torch.as_tensor(x), axis).numpy()),
    ("crossover_seq_len", lambda d_model: 2 * d_model),
])
def test_right_answers_pass(exercise, func):
    assert judged(exercise, func).passed


def test_an_exact_reading_is_preferred_to_a_vague_symptom():
    def online_sum_overwritten(q, k, v, block_size=64, causal=False):
        scale = 1.0 / math.sqrt(q.shape[-1])
        n_q, n_k = q.shape[-2], k.shape[-2]
        top = torch.full(q.shape[:-1] + (1,), -math.inf, dtype=torch.float64)
        total = torch.zeros_like(top)
        acc = torch.zeros(q.shape, dtype=torch.float64)
        rows = torch.arange(n_q)[:, None] + (n_k - n_q)
        for start in range(0, n_k, block_size):
            s = (q.double() @ k[..., start:start + block_size, :].double().transpose(-1, -2)
                 ) * scale
            if causal:
                s = s.masked_fill(torch.arange(start, start + s.shape[-1])[None, :] > rows,
                                  -math.inf)
            new_top = torch.maximum(top, s.amax(-1, keepdim=True))
            safe = torch.where(torch.isinf(new_top), 0.0, new_top)
            e = torch.exp(s - safe)
            total = e.sum(-1, keepdim=True)  # overwritten: the earlier blocks' sum is lost
            acc = acc * torch.exp(top - safe) + e @ v[..., start:start + block_size, :].double()
            top = new_top
        return (acc / torch.where(total == 0, 1.0, total)).to(q.dtype)

    verdict = judged("online_softmax_attention", online_sum_overwritten)
    assert any(f.startswith("mutant:") for f in verdict.flags), verdict.diagnosis
    assert "blocks_combined_wrongly" not in " ".join(verdict.flags)


def test_an_overflow_is_said_as_an_overflow_not_as_an_edit():
    def merge_without_shift(out_a, lse_a, out_b, lse_b):
        wa, wb = torch.exp(lse_a.double()), torch.exp(lse_b.double())
        total = wa + wb
        out = (wa[..., None] * out_a.double() + wb[..., None] * out_b.double()) / total[..., None]
        return out.to(out_a.dtype), torch.log(total).to(lse_a.dtype)

    verdict = judged("merge_attention_states", merge_without_shift)
    assert not any(f.startswith(("mutant:", "input:")) for f in verdict.flags), verdict.diagnosis


def mla_head_width_from_d_model(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    b, n, d_model = x.shape
    d_head = d_model // num_heads  # right only when num_heads * d_head == d_model
    latent = x @ w_dkv

    def heads(t):
        return t.reshape(b, n, -1, d_head).transpose(1, 2)

    q, k, v = heads(x @ w_q), heads(latent @ w_uk), heads(latent @ w_uv)
    s = q.double() @ k.double().transpose(-1, -2) / math.sqrt(d_head)
    if causal:
        s = s.masked_fill(torch.ones(n, n, dtype=torch.bool).triu(1), -math.inf)
    ctx = (torch.softmax(s, -1) @ v.double()).to(x.dtype)
    return ctx.transpose(1, 2).reshape(b, n, -1) @ w_o


def test_a_reading_that_gets_a_passed_case_wrong_is_not_named():
    """An edit of the key that fits the failing cases only (here: the key's own argument check
    given one head) is not the learner's code when it gets wrong a case the learner passed."""
    verdict = judged("mla_attention", mla_head_width_from_d_model)
    assert not verdict.passed
    assert "_check_mla_args" not in verdict.diagnosis and "positive_int" not in \
        verdict.diagnosis, verdict.diagnosis
    assert "d_head" in verdict.diagnosis, verdict.diagnosis


def paged_one_length_for_all(q, k_pages, v_pages, block_table, seq_lens):
    batch, heads, d = q.shape
    groups, page = k_pages.shape[1], k_pages.shape[2]
    n = int(seq_lens.max())  # the longest length for every sequence
    out = torch.zeros(q.shape, dtype=torch.float64)
    for b in range(batch):
        if int(seq_lens[b]) == 0:
            continue
        for h in range(heads):
            g = h // (heads // groups)
            keys = torch.stack([k_pages[block_table[b, t // page], g, t % page]
                                for t in range(n)]).double()
            vals = torch.stack([v_pages[block_table[b, t // page], g, t % page]
                                for t in range(n)]).double()
            w = torch.softmax(keys @ q[b, h].double() / math.sqrt(d), 0)
            out[b, h] = w @ vals
    return out.to(q.dtype)


def paged_pages_in_a_row(q, k_pages, v_pages, block_table, seq_lens):
    batch, heads, d = q.shape
    groups, page = k_pages.shape[1], k_pages.shape[2]
    out = torch.zeros(q.shape, dtype=torch.float64)
    for b in range(batch):
        n = int(seq_lens[b])
        if n == 0:
            continue
        first = int(block_table[b, 0])
        for h in range(heads):
            g = h // (heads // groups)
            where = [((first + t // page) % k_pages.shape[0], t % page) for t in range(n)]
            keys = torch.stack([k_pages[p, g, s] for p, s in where]).double()
            vals = torch.stack([v_pages[p, g, s] for p, s in where]).double()
            out[b, h] = torch.softmax(keys @ q[b, h].double() / math.sqrt(d), 0) @ vals
    return out.to(q.dtype)


@pytest.mark.parametrize("func, words", [
    (paged_one_length_for_all, "largest entry used for every item"),
    (paged_pages_in_a_row, "consecutive pages of the pool"),
])
def test_paged_reads_are_named_by_the_keys_they_read(func, words):
    verdict = judged("paged_attention", func)
    assert not verdict.passed
    assert words in verdict.diagnosis, verdict.diagnosis
    assert "every page of the block-table row" not in verdict.diagnosis
    assert "one key too many" not in verdict.diagnosis


def masked_attention_pair_swapped(q, k, v, mask):
    s = q @ np.swapaxes(k, -1, -2) / math.sqrt(q.shape[-1])
    s = np.where(mask, s, -np.inf)
    top = s.max(-1, keepdims=True)
    e = np.exp(s - np.where(np.isfinite(top), top, 0.0))
    total = e.sum(-1, keepdims=True)
    w = np.divide(e, total, out=np.zeros_like(e), where=total > 0)
    return w, w @ v  # the contract's order is (output, weights)


def mha_flops_projections_per_mac(seq_len, d_model):
    n, d = seq_len, d_model
    parts = {"qkv_projections": 3 * n * d * d, "scores": 2 * n * n * d,
             "weighted_sum": 2 * n * n * d, "output_projection": 2 * n * d * d}
    parts["total"] = sum(parts.values())
    return parts


def mha_flops_constant_squared(seq_len, d_model):
    n, d = seq_len, d_model
    parts = {"qkv_projections": 6 * n * d * d, "scores": (2 * n) ** 2 * d,
             "weighted_sum": 2 * n * n * d, "output_projection": 2 * n * d * d}
    parts["total"] = sum(parts.values())
    return parts


def merge_heads_over_batch(x):
    return np.concatenate(list(x), axis=-1)  # runs over the batch, not the heads


def absorb_output_columns(w_uk, w_uv, w_q, w_o, num_heads):
    width = w_q.shape[1] // num_heads
    w_q_latent, w_o_latent = [], []
    for h in range(num_heads):
        part = slice(h * width, (h + 1) * width)
        w_q_latent.append(w_q[:, part] @ w_uk[:, part].T)
        w_o_latent.append(w_uv[:, part] @ w_o[:, part].T)  # columns of w_o, not its rows
    return torch.stack(w_q_latent), torch.stack(w_o_latent)


def gqa_float_causal_mask(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    b, n, d_model = x.shape
    d_head = d_model // num_heads

    def heads(t, count):
        return t.reshape(b, n, count, d_head).transpose(1, 2)

    q = heads(x @ w_q, num_heads)
    k = heads(x @ w_k, num_kv_heads).repeat_interleave(num_heads // num_kv_heads, 1)
    v = heads(x @ w_v, num_kv_heads).repeat_interleave(num_heads // num_kv_heads, 1)
    mask = torch.ones(n, n, dtype=q.dtype).tril() if causal else None  # 0/1, added as numbers
    out = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    return out.transpose(1, 2).reshape(b, n, d_model) @ w_o


@pytest.mark.parametrize("exercise, func, flag, words", [
    ("masked_attention", masked_attention_pair_swapped, "form:tuple_order",
     "output[0] is the right output[1]"),
    ("mha_flops", mha_flops_projections_per_mac, "count:constant_factor", "exactly 1/2 of"),
    ("mha_flops", mha_flops_constant_squared, "count:constant_factor", "(2 * n) ** 2"),
    ("merge_heads", merge_heads_over_batch, "form:shape", "regrouped"),
    ("absorb_mla_weights", absorb_output_columns, "raised:matmul", "right operand"),
    ("grouped_query_attention", gqa_float_causal_mask, "weights:mask_added", "added to the scores"),
])
def test_a_slip_is_named_by_a_generic_reading(exercise, func, flag, words):
    verdict = judged(exercise, func)
    assert not verdict.passed
    assert flag in verdict.flags and words in verdict.diagnosis, (verdict.flags, verdict.diagnosis)


def kv_cache_in_mebibytes(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                          bytes_per_element=2):
    values = 2 * num_layers * num_kv_heads * head_dim * seq_len * batch_size
    return values * bytes_per_element // 2**20


def test_a_count_in_other_units_is_named_by_its_unit():
    verdict = judged("kv_cache_bytes", kv_cache_in_mebibytes)
    assert not verdict.passed
    assert "count:units" in verdict.flags and "MiB" in verdict.diagnosis, verdict.diagnosis


def jacobian_diagonal_set_to_p(p):
    jac = -np.outer(p, p)
    jac[np.diag_indices_from(jac)] = p  # p_i where p_i - p_i^2 belongs
    return jac


def test_only_the_diagonal_wrong_is_said_as_the_diagonal_term():
    """Read back as what the diagonal holds (round X: the polynomial in p says more than the
    form's list of causes)."""
    verdict = judged("softmax_jacobian", jacobian_diagonal_set_to_p)
    assert not verdict.passed
    assert "readback:jacobian_diagonal" in verdict.flags, verdict.diagnosis
    assert "the diagonal holds p_i where" in verdict.diagnosis, verdict.diagnosis


def _softmax_rows(s):
    top = s.max(-1, keepdims=True)
    e = np.exp(s - np.where(np.isfinite(top), top, 0.0))
    total = e.sum(-1, keepdims=True)
    return np.divide(e, total, out=np.zeros_like(e), where=total > 0)


def masked_attention_scaled_by_key_count(q, k, v, mask):
    s = q @ np.swapaxes(k, -1, -2) / math.sqrt(k.shape[-2])  # N_k where d_k belongs
    w = _softmax_rows(np.where(mask, s, -np.inf))
    return w @ v, w


def test_returned_weights_are_read_as_they_are():
    verdict = judged("masked_attention", masked_attention_scaled_by_key_count)
    assert not verdict.passed
    assert "weights:scale" in verdict.flags and "1/sqrt(N_k)" in verdict.diagnosis, \
        verdict.diagnosis


def param_count_conditional_binds_loosest(d_model, bias=True):
    return 4 * d_model * d_model + 4 * d_model if bias else 0  # (a + b) if bias else 0


def split_heads_swaps_the_wrong_pair(x, num_heads):
    b, n, d = x.shape
    if d % num_heads:
        raise ValueError(f"d_model={d} is not divisible by num_heads={num_heads}")
    return x.reshape(b, n, num_heads, d // num_heads).transpose(0, 1, 3, 2)


@pytest.mark.parametrize("exercise, func, flag, words", [
    ("mha_param_count", param_count_conditional_binds_loosest, "count:zero", "binds loosest"),
    ("split_heads", split_heads_swaps_the_wrong_pair, "form:shape", "in that order"),
])
def test_a_slip_is_named_by_its_output_alone(exercise, func, flag, words):
    verdict = judged(exercise, func)
    assert not verdict.passed
    assert flag in verdict.flags and words in verdict.diagnosis, (verdict.flags, verdict.diagnosis)


def cache_values_in_elements(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                             bytes_per_element=2):
    per_tensor = num_layers * num_kv_heads * head_dim * seq_len * batch_size
    return per_tensor * bytes_per_element + per_tensor  # the values counted in elements


def test_a_causal_triangle_is_read_only_on_a_count_of_tokens():
    verdict = judged("kv_cache_bytes", cache_values_in_elements)
    assert not verdict.passed and "triangle" not in verdict.diagnosis, verdict.diagnosis


def split_heads_transposed_with_t(x, num_heads):
    b, n, d = x.shape
    return x.reshape(b, n, num_heads, d // num_heads).T  # .T reverses every axis


def padding_mask_axes_after_keys(lengths, n):
    keep = np.arange(n)[None, :] < np.asarray(lengths)[:, None]  # (B, n)
    return keep[:, :, None, None]


def merge_lse_kept_unsqueezed(out_a, lse_a, out_b, lse_b):
    la, lb = lse_a[..., None], lse_b[..., None]  # (..., N, 1), to weigh the rows
    lse = torch.logaddexp(la, lb)
    wa = torch.exp(la - lse).nan_to_num(0.0)
    wb = torch.exp(lb - lse).nan_to_num(0.0)
    return (wa * out_a + wb * out_b).to(out_a.dtype), lse.to(lse_a.dtype)


def gqa_groups_never_repeated(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    q = _split(x @ w_q, num_heads)  # (B, H, N, d_head)
    k = _split(x @ w_k, num_kv_heads)  # (B, G, N, d_head): never repeated to H heads
    v = _split(x @ w_v, num_kv_heads)
    scores = (q @ k.transpose(-2, -1)) / math.sqrt(q.shape[-1])
    if causal:
        n = x.shape[1]
        scores = scores.masked_fill(torch.ones(n, n, dtype=torch.bool).triu(1), -math.inf)
    return _merge(scores.softmax(-1) @ v) @ w_o


@pytest.mark.parametrize("exercise, func, words", [
    ("split_heads", split_heads_transposed_with_t, "transpose without its axes"),
    ("padding_mask", padding_mask_axes_after_keys, "axes of size 1 are at the wrong places"),
    ("merge_attention_states", merge_lse_kept_unsqueezed, "extra axis of size 1 at the end"),
    ("grouped_query_attention", gqa_groups_never_repeated,
     "the K/V heads were not repeated to the query heads"),
])
def test_a_shape_is_read_for_what_made_it(exercise, func, words):
    verdict = judged(exercise, func)
    assert not verdict.passed and words in verdict.diagnosis, verdict.diagnosis


def jacobian_off_diagonal_plus(p):
    n = p.shape[0]
    jac = np.empty((n, n))
    for i in range(n):
        for j in range(n):
            jac[i, j] = p[i] * (1 - p[i]) if i == j else p[i] * p[j]  # the minus sign lost
    return jac


def masked_attention_boolean_index(q, k, v, mask=None):
    s = q @ np.swapaxes(k, -1, -2) / math.sqrt(q.shape[-1])
    if mask is not None:
        s[~np.asarray(mask)] = -np.inf  # indexing does not broadcast a (B, 1, 1, N_k) mask
    top = s.max(-1, keepdims=True)
    e = np.exp(s - np.where(np.isfinite(top), top, 0.0))
    total = e.sum(-1, keepdims=True)
    w = np.divide(e, total, out=np.zeros_like(e), where=total > 0)
    return w @ v, w


def apply_rope_pairs_from_neighbours(x, positions, base=10000.0):
    half = x.shape[-1] // 2
    freq = base ** (-torch.arange(half, dtype=torch.float64) * 2 / x.shape[-1])
    angle = torch.as_tensor(positions, dtype=torch.float64)[:, None] * freq  # (N, half)
    pairs = x.double().reshape(*x.shape[:-1], half, 2)  # neighbours (2i, 2i + 1) as a pair
    first, second = pairs[..., 0], pairs[..., 1]
    turned = torch.cat([first * angle.cos() - second * angle.sin(),
                        first * angle.sin() + second * angle.cos()], dim=-1)
    return turned.to(x.dtype)


@pytest.mark.parametrize("exercise, func, words", [
    ("apply_rope", apply_rope_pairs_from_neighbours, "taking every 2nd entry"),
    ("softmax_jacobian", jacobian_off_diagonal_plus,
     "the entries off the diagonal (i != j) have the wrong sign"),
    ("masked_attention", masked_attention_boolean_index,
     "indexing does not broadcast"),
])
def test_a_value_or_an_error_is_read_for_what_made_it(exercise, func, words):
    verdict = judged(exercise, func)
    assert not verdict.passed and words in verdict.diagnosis, verdict.diagnosis


def softmax_writing_into_its_input(x, axis=-1):
    x[np.isinf(x)] = 0.0  # writes into the caller's array (and reads -inf as 0)
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def test_code_that_writes_into_its_input_leaves_the_case_as_it_was():
    """Round R: a repair that dropped a copy made the case's own -inf entries 0, and the case
    then agreed with the edited code's output. The learner's function gets copies."""
    checker = get_exercise("softmax")
    case = next(c for c in checker.cases(1, "grading") if np.isinf(c.args[0]).any())
    before = np.array(case.args[0], copy=True)
    checker.call(softmax_writing_into_its_input, case)
    assert np.array_equal(case.args[0], before)
    verdict = judged("softmax", softmax_writing_into_its_input)
    assert not verdict.passed and "-inf entries used as 0" in verdict.diagnosis, \
        verdict.diagnosis


def decode_cache_grown_along_heads(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    b, n, d = x.shape
    dh = d // num_heads
    rep = num_heads // num_kv_heads
    k_cache = v_cache = None
    outs = []
    for t in range(n):
        xt = x[:, t:t + 1]
        k_new, v_new = _split(xt @ w_k, num_kv_heads), _split(xt @ w_v, num_kv_heads)
        k_cache = k_new if k_cache is None else torch.cat([k_cache, k_new], dim=1)  # heads
        v_cache = v_new if v_cache is None else torch.cat([v_cache, v_new], dim=1)
        q = _split(xt @ w_q, num_heads)
        scores = q @ k_cache.repeat_interleave(rep, 1).transpose(-1, -2) / math.sqrt(dh)
        outs.append(_merge(scores.softmax(-1) @ v_cache.repeat_interleave(rep, 1)) @ w_o)
    return torch.cat(outs, dim=1)


def test_a_size_an_error_equals_by_chance_is_not_named_when_another_case_says_otherwise():
    """Round U: the heads of a cache grown along the head axis (2 K/V heads x 2 steps x 2
    repeats = 8) were said to be "as many as N" on a case of 8 tokens; another case raised the
    same error with 8 heads and 6 tokens, so the 8 is not N."""
    for seed in (0, 1):
        verdict = judged("decode_with_cache", decode_cache_grown_along_heads, seed)
        assert not verdict.passed
        assert "as many as N)" not in verdict.diagnosis, verdict.diagnosis


def param_count_in_fp16_bytes(d_model, bias=True):
    count = 4 * d_model * d_model + (4 * d_model if bias else 0)
    return 2 * count  # bytes at fp16, not the number of parameters


def test_a_parameter_count_twice_too_large_names_its_size_in_bytes_among_the_causes():
    verdict = judged("mha_param_count", param_count_in_fp16_bytes)
    assert not verdict.passed
    assert "size in bytes (2 bytes each in fp16 or bf16)" in verdict.diagnosis, verdict.diagnosis


def rope_angles_in_half(positions, head_dim, base=10000.0):
    if head_dim % 2:
        raise ValueError(f"head_dim={head_dim} is odd")
    positions = positions.to(torch.float16)
    freq = (base ** (-torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim)).half()
    return torch.outer(positions, freq).float()


def attention_in_half(q, k, v):
    q16, k16, v16 = (np.asarray(a, dtype=np.float16) for a in (q, k, v))
    s = q16 @ np.swapaxes(k16, -1, -2) / np.float16(np.sqrt(q.shape[-1]))
    e = np.exp(s - s.max(axis=-1, keepdims=True))
    w = e / e.sum(axis=-1, keepdims=True)
    return (w @ v16).astype(np.float64), w.astype(np.float64)


@pytest.mark.parametrize(("exercise", "func"), [("rope_angles", rope_angles_in_half),
                                                ("attention", attention_in_half)])
def test_values_that_are_all_half_precision_numbers_are_said_so(exercise, func):
    verdict = judged(exercise, func)
    assert not verdict.passed
    assert "form:half_precision" in verdict.flags, verdict.diagnosis


def merge_heads_first_head_skipped(x):
    b, h, n, d = x.shape
    out = np.zeros((b, n, h * d))
    for i in range(1, h):
        out[:, :, i * d:(i + 1) * d] = x[:, i]
    return out


def test_zeros_where_values_belong_are_not_read_as_half_precision():
    # every 0 is a bfloat16 number, but a head left at 0 is no rounding of the right values
    for seed in (0, 1):
        verdict = judged("merge_heads", merge_heads_first_head_skipped, seed)
        assert not verdict.passed and "form:half_precision" not in verdict.flags, (
            verdict.diagnosis)


def jacobian_filled_in_place(p):
    p = np.asarray(p, dtype=float)
    jac = -np.outer(p, p)
    return np.fill_diagonal(jac, p - p * p)  # fills in place and returns None


def gqa_kv_split_into_query_heads(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads,
                                  causal=False):
    t = torch.as_tensor(x)
    q = _split(t @ torch.as_tensor(w_q), num_heads)
    k = _split(t @ torch.as_tensor(w_k), num_heads)  # num_kv_heads belongs here
    v = _split(t @ torch.as_tensor(w_v), num_heads)
    rep = num_heads // num_kv_heads
    k, v = k.repeat_interleave(rep, 1), v.repeat_interleave(rep, 1)
    w = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), dim=-1)
    return _merge(w @ v) @ torch.as_tensor(w_o)


def online_softmax_full_blocks_only(q, k, v, block_size=64, causal=False):
    n_q, n_k = q.shape[-2], k.shape[-2]
    scale = 1 / math.sqrt(q.shape[-1])
    top = torch.full(q.shape[:-1] + (1,), -math.inf, dtype=torch.float64)
    total = torch.zeros_like(top)
    acc = torch.zeros(q.shape[:-1] + (v.shape[-1],), dtype=torch.float64)
    qpos = torch.arange(n_q)[:, None] + n_k - n_q
    for start in range(0, n_k, block_size):
        kb, vb = k[..., start:start + block_size, :], v[..., start:start + block_size, :]
        s = (q.double() @ kb.double().transpose(-2, -1)) * scale
        if causal:
            kpos = torch.arange(start, start + block_size)  # the last block may be shorter
            s = s.masked_fill(kpos > qpos, -math.inf)
        new = torch.maximum(top, s.amax(-1, keepdim=True))
        safe = torch.where(torch.isinf(new), torch.zeros_like(new), new)
        p = torch.exp(s - safe)
        fade = torch.exp(top - safe)
        total = total * fade + p.sum(-1, keepdim=True)
        acc = acc * fade + p @ vb.double()
        top = new
    return (acc / torch.where(total == 0, torch.ones_like(total), total)).to(q.dtype)


def attention_backward_dot_t(q, k, v, grad_out, causal=False):
    d = q.shape[-1]
    s = q @ k.transpose(-2, -1) / math.sqrt(d)
    if causal:
        n_q, n_k = s.shape[-2:]
        s = s.masked_fill(~torch.ones(n_q, n_k, dtype=torch.bool).tril(n_k - n_q), -math.inf)
    p = torch.softmax(s, dim=-1).nan_to_num(0.0)
    grad_v = p.transpose(-2, -1) @ grad_out
    grad_p = grad_out @ v.transpose(-2, -1)
    grad_s = p * (grad_p - (grad_p * p).sum(-1, keepdim=True))
    return grad_s @ k / math.sqrt(d), grad_s.T @ q / math.sqrt(d), grad_v  # .T: every axis


@pytest.mark.parametrize(("exercise", "func", "flag", "words"), [
    ("softmax_jacobian", jacobian_filled_in_place, "form:none", "in-place operation"),
    ("grouped_query_attention", gqa_kv_split_into_query_heads, "raised:broadcast",
     "dimension 1, the head axis"),
    ("online_softmax_attention", online_softmax_full_blocks_only, "raised:broadcast",
     "the last block is shorter"),
    ("attention_backward", attention_backward_dot_t, "raised:broadcast",
     ".T reverses every axis of a batched tensor"),
])
def test_round_vs_generic_readings(exercise, func, flag, words):
    verdict = judged(exercise, func)
    assert not verdict.passed and flag in verdict.flags, verdict.diagnosis
    assert words in verdict.diagnosis, verdict.diagnosis


def gqa_head_width_from_the_kv_width(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads,
                                     causal=False):
    b, n, _ = x.shape
    d_head = w_k.shape[1] // num_heads  # the K/V width over the query heads
    q = (x @ w_q).reshape(b, n, num_heads, d_head).transpose(1, 2)
    k = (x @ w_k).reshape(b, n, num_kv_heads, d_head).transpose(1, 2)
    v = (x @ w_v).reshape(b, n, num_kv_heads, d_head).transpose(1, 2)
    rep = num_heads // num_kv_heads
    k, v = k.repeat_interleave(rep, 1), v.repeat_interleave(rep, 1)
    scores = q @ k.transpose(-1, -2) / math.sqrt(d_head)
    if causal:
        future = torch.ones(n, n, dtype=torch.bool).triu(1)
        scores = scores.masked_fill(future, float("-inf"))
    out = scores.softmax(-1) @ v
    return out.transpose(1, 2).reshape(b, n, -1) @ w_o


def test_a_reshapes_wrong_position_is_the_one_every_case_that_raised_agrees_on():
    """Round U: on a batch of 1, the 1 'should be 2' fitted the reshape as well as d_head; the
    other cases (batches of 2) are mended only at d_head, so only d_head is said, with every
    quotient its wrong size may have come from."""
    for seed in (0, 1):
        verdict = judged("grouped_query_attention", gqa_head_width_from_the_kv_width, seed)
        assert not verdict.passed
        assert "at position 3 should be" in verdict.diagnosis, verdict.diagnosis
        assert "at position 0" not in verdict.diagnosis, verdict.diagnosis
