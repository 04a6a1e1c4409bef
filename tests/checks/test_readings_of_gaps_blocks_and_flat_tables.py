"""Readings added after rounds AE and AF (issue 22), each with a slip written here, apart from
the catalogue that found its kind: a size that is the right one less another of the case's sizes
(an offset passed where a library call takes a size), read on a case whose sizes say it rather
than on one where the gap comes out 0; an output of the right sizes in the wrong order whose
values are no transpose; a table of pairs made flat; a block of a weight cut along the axis
that does not meet the other operand; a term dropped rather than an operator swapped where both
fit; no sign said turned by -(2 * i); a repair not called a cancellation for a simple fraction
that a sub-expression of the key's sizes takes by chance; a count through a head count that
only multiples of 8 pass (round AF); weights read back all on each query's own position; an
index past a pool of pages; an operand one axis off in a broadcast (round AG)."""

from __future__ import annotations

import ast
import math

import numpy as np
import pytest
import torch

from mhalib.checks import get_exercise, judge_record
from mhalib.checks.explain_shapes import shape_reading
from mhalib.checks.probe import probe
from tests.checks.repair_harness import repaired, searching  # noqa: F401 (fixture)


def judged(exercise: str, func, seed: int = 1):
    checker = get_exercise(exercise)
    return judge_record(exercise, probe(checker, func, seed, "grading"), seed)


def causal_mask_with_gap_for_columns(n_q, n_k=None):
    n_k = n_q if n_k is None else n_k
    offset = n_k - n_q
    return torch.ones(n_q, offset, dtype=torch.bool).tril(offset).numpy()  # (n_q, offset)


def test_a_size_that_is_the_gap_between_two_sizes_is_said_as_that_gap():
    verdict = judged("causal_mask", causal_mask_with_gap_for_columns)
    assert not verdict.passed
    assert "= n_k - n_q: the gap between two sizes" in verdict.diagnosis, verdict.diagnosis
    # (read where n_k differs from n_q: on a square case the gap is an axis of 0 entries)
    assert "has 0 where" not in verdict.diagnosis, verdict.diagnosis


def test_a_size_that_is_no_gap_is_not_said_as_one():
    _, said = shape_reading((4, 7), (4, 3), "the output", {"n_q": 4, "n_k": 7})
    assert "3 = n_k - n_q" in said
    _, said = shape_reading((4, 7), (4, 5), "the output", {"n_q": 4, "n_k": 7})
    assert " - " not in said, said
    # (the gap must be the right size less another: 3 = 7 - 4 is not a gap of want = 9)
    _, said = shape_reading((4, 9), (4, 3), "the output", {"n_q": 4, "n_k": 7})
    assert "n_k - n_q" not in said, said


def causal_mask_sizes_crossed(n_q, n_k=None):
    n_k = n_q if n_k is None else n_k
    mask = np.zeros((n_k, n_q), dtype=bool)  # (n_k, n_q): the sizes given the other way
    for i in range(n_k):
        mask[i, : min(n_q, i + 1 + n_k - n_q)] = True
    return mask


def causal_mask_transposed(n_q, n_k=None):
    n_k = n_q if n_k is None else n_k
    return np.tril(np.ones((n_q, n_k), dtype=bool), n_k - n_q).T


def test_an_output_whose_sizes_are_crossed_but_whose_values_are_no_transpose_says_so():
    crossed = judged("causal_mask", causal_mask_sizes_crossed).diagnosis
    assert "no transpose mends it" in crossed, crossed
    transposed = judged("causal_mask", causal_mask_transposed).diagnosis
    assert "transposed" in transposed and "no transpose" not in transposed, transposed


def jacobian_from_a_flat_table(p):
    p = np.asarray(p, dtype=np.float64)
    pairs = np.outer(p, p).ravel()  # (n * n,) where (n, n) belongs
    return np.diag(p) - pairs


def test_a_table_of_pairs_made_flat_is_said_as_made_flat():
    verdict = judged("softmax_jacobian", jacobian_from_a_flat_table)
    assert "made flat" in verdict.diagnosis and "np.outer" in verdict.diagnosis, \
        verdict.diagnosis


def mha_with_output_block_by_columns(x, w_q, w_k, w_v, w_o, num_heads):
    batch, n, d_model = x.shape
    d_head = d_model // num_heads
    out = np.zeros((batch, n, d_model))
    for h in range(num_heads):
        part = slice(h * d_head, (h + 1) * d_head)
        q, k, v = x @ w_q[:, part], x @ w_k[:, part], x @ w_v[:, part]
        s = q @ np.swapaxes(k, -1, -2) / math.sqrt(d_head)
        w = np.exp(s - s.max(-1, keepdims=True))
        w /= w.sum(-1, keepdims=True)
        out = out + (w @ v) @ w_o[:, part]  # (B, N, d_head) @ (d_model, d_head)
    return out


def test_a_block_of_a_weight_cut_along_the_axis_that_does_not_meet_the_product_is_named():
    verdict = judged("multi_head_attention", mha_with_output_block_by_columns)
    assert "`w_o[part, :]`" in verdict.diagnosis, verdict.diagnosis


def attention_backward_scores_unscaled(q, k, v, grad_out, causal=False):
    q64, k64, v64, g64 = (t.double() for t in (q, k, v, grad_out))
    n_q, n_k, d = q64.shape[-2], k64.shape[-2], q64.shape[-1]
    s = torch.einsum("...id,...jd->...ij", q64, k64)  # the 1/sqrt(d) left out here only
    if causal:
        keep = torch.ones(n_q, n_k, dtype=torch.bool).tril(n_k - n_q)
        s = s.masked_fill(~keep, float("-inf"))
    p = torch.softmax(s, dim=-1)
    p = torch.nan_to_num(p)
    grad_v = p.transpose(-2, -1) @ g64
    grad_p = g64 @ v64.transpose(-2, -1)
    grad_s = p * (grad_p - (grad_p * p).sum(-1, keepdim=True))
    grad_q = grad_s @ k64 / math.sqrt(d)
    grad_k = grad_s.transpose(-2, -1) @ q64 / math.sqrt(d)
    return grad_q.to(q.dtype), grad_k.to(k.dtype), grad_v.to(v.dtype)


def test_a_term_left_out_is_said_as_left_out_not_as_an_operator_that_changes_nothing():
    diagnosis = judged("attention_backward", attention_backward_scores_unscaled).diagnosis
    assert "+ scale" not in diagnosis, diagnosis
    assert "computed as `q_ @ k_.transpose(-2, -1)`" in diagnosis, diagnosis


def test_a_minus_before_a_product_is_no_sign_turned_by_parentheses():
    from mhalib.checks.edit_nodes import HINT
    from mhalib.checks.edit_regroupings import REGROUPED_SIGN, _regroupings

    node = ast.parse("theta ** (-(4 * j) / dim)", mode="eval").body
    said = {getattr(new, HINT, "") for new in _regroupings(node.right)} | {
        getattr(new, HINT, "") for new in _regroupings(node)}
    assert REGROUPED_SIGN not in said, said


def paged_scaled_by_tokens_per_page(q, k_pages, v_pages, block_table, seq_lens):
    heads, groups, per_page = q.shape[1], k_pages.shape[1], k_pages.shape[2]
    width = q.shape[-1]
    inv_root = per_page ** -0.5  # the page size where the head width belongs
    ct = torch.promote_types(q.dtype, torch.float32)
    rows = []
    for b in range(q.shape[0]):
        n = int(seq_lens[b])
        if n == 0:
            rows.append(torch.zeros(heads, width, dtype=ct))
            continue
        used = block_table[b, : -(-n // per_page)].long()
        keys = k_pages[used].permute(1, 0, 2, 3).reshape(groups, -1, width)[:, :n].to(ct)
        values = v_pages[used].permute(1, 0, 2, 3).reshape(groups, -1, width)[:, :n].to(ct)
        keys = keys.repeat_interleave(heads // groups, 0)
        values = values.repeat_interleave(heads // groups, 0)
        s = torch.einsum("hd,htd->ht", q[b].to(ct), keys) * inv_root
        rows.append(torch.einsum("ht,htd->hd", s.softmax(-1), values))
    return torch.stack(rows).to(q.dtype)


@pytest.mark.usefixtures("searching")
def test_a_repair_is_not_called_a_cancellation_for_a_simple_fraction_met_by_chance():
    from mhalib.checks.repair_cancels import _simple_fraction

    assert _simple_fraction(0.5) and _simple_fraction(2 / 3) and not _simple_fraction(
        1 / math.sqrt(6))
    _, verdict = repaired("paged_attention", paged_scaled_by_tokens_per_page)
    assert "not where the slip is" not in verdict.diagnosis, verdict.diagnosis


def flops_with_four_heads(seq_len, d_model):
    heads = 4
    d_head = d_model / heads  # a float, and a head count the contract does not have
    n = seq_len
    parts = {"qkv_projections": 6 * n * d_model * d_model,
             "scores": heads * 2 * n * n * d_head,
             "weighted_sum": heads * 2 * n * n * d_head,
             "output_projection": 2 * n * d_model * d_model}
    parts["total"] = sum(parts.values())
    return parts


@pytest.mark.usefixtures("searching")
def test_a_float_count_through_a_head_count_is_not_mended_by_floor_division():
    _, verdict = repaired("mha_flops", flops_with_four_heads)
    assert "one change makes every case right" not in verdict.diagnosis, verdict.diagnosis
    assert "float" in verdict.diagnosis


def mha_scores_within_each_token(x, w_q, w_k, w_v, w_o, num_heads):
    batch, n, d_model = x.shape
    d_head = d_model // num_heads
    q, k, v = ((x @ w).reshape(batch, n, num_heads, d_head) for w in (w_q, w_k, w_v))
    s = np.einsum("bnhd,bngd->bnhg", q, k) / math.sqrt(d_head)  # heads of one token paired
    w = np.exp(s - s.max(-1, keepdims=True))
    w /= w.sum(-1, keepdims=True)
    return np.einsum("bnhg,bngd->bnhd", w, v).reshape(batch, n, d_model) @ w_o


def test_weights_read_back_all_on_each_query_s_own_position_are_said_so():
    verdict = judged("multi_head_attention", mha_scores_within_each_token)
    assert "all its weight to its own position" in verdict.diagnosis, verdict.diagnosis
    assert "transpose(1, 2) missing" in verdict.diagnosis


def test_an_index_past_a_pool_of_pages_says_the_page_was_computed_not_read():
    from mhalib.checks.explain_errors import _index

    named = {"k_pages.shape[0]": 9, "block_table.shape[1]": 3}
    _, said = _index(None, None, "IndexError: index 9 is out of bounds for dimension 0 with "
                     "size 9", "", named)
    assert "block_table[b, t // page_size]" in said, said
    _, plain = _index(None, None, "IndexError: index 3 is out of bounds for dimension 0 with "
                      "size 3", "", named)
    assert "page" not in plain, plain


def rope_with_angles_given_a_head_axis(x, positions, base=10000.0):
    half = x.shape[-1] // 2
    inv = base ** (-torch.arange(half, dtype=torch.float64) * 2 / x.shape[-1])
    angle = positions.double()[:, None] * inv  # (N, d/2)
    cos, sin = angle.cos().unsqueeze(1), angle.sin().unsqueeze(1)  # (N, 1, d/2)
    first, second = x[..., :half].double(), x[..., half:].double()
    out = torch.cat((first * cos - second * sin, first * sin + second * cos), dim=-1)
    return out.to(x.dtype)


def merge_states_weights_without_their_last_axis(out_a, lse_a, out_b, lse_b):
    top = torch.maximum(lse_a, lse_b)
    top = torch.where(torch.isinf(top), torch.zeros_like(top), top)
    wa, wb = torch.exp(lse_a - top), torch.exp(lse_b - top)  # (B, H, N)
    total = wa + wb
    safe = torch.where(total > 0, total, torch.ones_like(total))
    out = (wa * out_a + wb * out_b) / safe[..., None]  # wa lacks its trailing axis
    lse = torch.where(total > 0, top + torch.log(safe), torch.full_like(total, -math.inf))
    return out, lse


def test_an_operand_whose_axis_stands_one_place_off_in_a_broadcast_is_said_so():
    rope = judged("apply_rope", rope_with_angles_given_a_head_axis).diagnosis
    assert "meant to line up with x's axis 2, it stands one place off" in rope, rope
    assert "put after it" in rope
    merged = judged("merge_attention_states", merge_states_weights_without_their_last_axis)
    assert "missing after it (x[..., None]" in merged.diagnosis, merged.diagnosis
    assert "meant to line up with out_a's axis 2" in merged.diagnosis


def attention_backward_row_term_summed_over_queries(q, k, v, grad_out, causal=False):
    q64, k64, v64, g64 = (t.double() for t in (q, k, v, grad_out))
    n_q, n_k, d = q64.shape[-2], k64.shape[-2], q64.shape[-1]
    s = q64 @ k64.transpose(-2, -1) / math.sqrt(d)
    if causal:
        s = s.masked_fill(~torch.ones(n_q, n_k, dtype=torch.bool).tril(n_k - n_q), -math.inf)
    p = torch.nan_to_num(torch.softmax(s, dim=-1))
    out = p @ v64
    row = (g64 * out).sum(dim=-2, keepdim=True)  # (..., 1, d) where (..., N_q, 1) belongs
    grad_s = p * (g64 @ v64.transpose(-2, -1) - row)
    grad_q = grad_s @ k64 / math.sqrt(d)
    grad_k = grad_s.transpose(-2, -1) @ q64 / math.sqrt(d)
    return grad_q.to(q.dtype), grad_k.to(k.dtype), (p.transpose(-2, -1) @ g64).to(v.dtype)


def test_a_per_row_term_that_kept_its_features_is_said_so():
    diagnosis = judged("attention_backward", attention_backward_row_term_summed_over_queries
                       ).diagnosis
    assert "the feature width) on the last axis is meant to hold one value per row" in \
        diagnosis, diagnosis


def paged_with_no_guard_for_an_empty_sequence(q, k_pages, v_pages, block_table, seq_lens):
    groups, page = k_pages.shape[1], k_pages.shape[2]
    rep = q.shape[1] // groups
    results = []
    for b in range(q.shape[0]):
        t = torch.arange(int(seq_lens[b]))
        pages = block_table[b].long()[t // page]
        keys = k_pages[pages, :, t % page].double().transpose(0, 1)  # (G, n, d)
        values = v_pages[pages, :, t % page].double().transpose(0, 1)
        keys, values = keys.repeat_interleave(rep, 0), values.repeat_interleave(rep, 0)
        s = torch.einsum("hd,hnd->hn", q[b].double(), keys) / math.sqrt(q.shape[-1])
        e = torch.exp(s - s.amax(-1, keepdim=True))  # no key at all: nothing to take a max of
        results.append(torch.einsum("hn,hnd->hd", e / e.sum(-1, keepdim=True), values))
    return torch.stack(results).to(q.dtype)


def test_an_empty_reduction_on_a_case_with_a_length_of_0_asks_for_a_guard():
    diagnosis = judged("paged_attention", paged_with_no_guard_for_an_empty_sequence).diagnosis
    assert "This case holds a length of 0 (seq_lens)" in diagnosis, diagnosis


def flash_backward_lse_recomputed(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    n_q, n_k, d = q.shape[-2], k.shape[-2], q.shape[-1]
    q64, o64, g64 = q.double() / math.sqrt(d), out.double(), grad_out.double()
    query_at = torch.arange(n_q)[:, None] + (n_k - n_q)
    blocks = []
    for j in range(0, n_k, block_size):
        kb, vb = k[..., j:j + block_size, :].double(), v[..., j:j + block_size, :].double()
        s = q64 @ kb.transpose(-1, -2)
        if causal:
            s = s.masked_fill(torch.arange(j, j + kb.shape[-2])[None, :] > query_at, -math.inf)
        blocks.append((j, kb, vb, s))
    own_lse = torch.logsumexp(torch.cat([s for *_, s in blocks], dim=-1), dim=-1)  # not lse
    own_lse = own_lse.masked_fill(torch.isneginf(own_lse), math.inf)[..., None]
    delta = (g64 * o64).sum(-1, keepdim=True)
    dq = torch.zeros(q.shape, dtype=torch.float64)
    dk, dv = torch.zeros(k.shape, dtype=torch.float64), torch.zeros(v.shape, dtype=torch.float64)
    for j, kb, vb, _ in blocks:
        s = q64 @ kb.transpose(-1, -2)  # (the product again, after the pass for the lse)
        if causal:
            s = s.masked_fill(torch.arange(j, j + kb.shape[-2])[None, :] > query_at, -math.inf)
        p = torch.exp(s - own_lse)
        ds = p * (g64 @ vb.transpose(-1, -2) - delta)
        dq += ds @ kb
        dk[..., j:j + block_size, :] = ds.transpose(-1, -2) @ q64
        dv[..., j:j + block_size, :] = p.transpose(-1, -2) @ g64
    return (dq / math.sqrt(d)).to(q.dtype), dk.to(k.dtype), dv.to(v.dtype)


def test_a_pass_that_recomputes_the_given_lse_is_among_the_causes_of_too_much_work():
    diagnosis = judged("flash_attention_backward", flash_backward_lse_recomputed).diagnosis
    assert "recompute the lse (it is an argument" in diagnosis, diagnosis


def crossover_as_a_tensor(d_model):
    return torch.tensor(2) * d_model  # a 0-d tensor, not an int


def test_a_count_returned_as_a_tensor_is_said_as_a_count_not_as_a_numpy_lesson():
    diagnosis = judged("crossover_seq_len", crossover_as_a_tensor).diagnosis
    assert "counts are plain Python ints" in diagnosis, diagnosis
    assert "numpy lesson" not in diagnosis


def padding_mask_blanking_from_the_end(lengths, n):
    lengths = np.asarray(lengths)
    keep = np.ones((len(lengths), n), dtype=bool)
    for b, length in enumerate(lengths):
        keep[b, -(n - int(length)):] = False  # -0: is the whole row
    return keep[:, None, None, :]


def test_a_slice_from_the_end_by_a_count_of_0_is_said_for_the_keys_blanked_too():
    diagnosis = judged("padding_mask", padding_mask_blanking_from_the_end).diagnosis
    assert "[..., -(n - lengths[b]):], become [0:], all" in diagnosis, diagnosis


@pytest.mark.usefixtures("searching")
def test_a_power_typed_as_xor_in_more_places_than_a_group_holds_is_mended_everywhere():
    def flops_with_carets(seq_len, d_model):
        t, w = seq_len, d_model
        counts = {"qkv_projections": 6 * t * w ^ 2, "scores": 2 * t ^ 2 * w,
                  "weighted_sum": 2 * t ^ 2 * w, "output_projection": 2 * t * w ^ 2}
        counts["total"] = 8 * t * w ^ 2 + 4 * t ^ 2 * w  # two ^, one inside the other
        return counts

    repair, verdict = repaired("mha_flops", flops_with_carets)
    assert repair is not None, verdict.diagnosis
    assert "`^` is XOR in Python" in verdict.diagnosis, verdict.diagnosis


def test_a_regrouping_that_spreads_a_factor_over_an_added_term_offers_a_term_per_entry():
    from mhalib.checks.edit_nodes import HINT
    from mhalib.checks.edit_regroupings import REGROUPED_PER_FACTOR, _regroupings

    node = ast.parse("width * width + extra", mode="eval").body
    said = {ast.unparse(new): getattr(new, HINT, "") for new in _regroupings(node)}
    assert said.get("width * (width + extra)") == REGROUPED_PER_FACTOR, said
    power = ast.parse("d ** 1 / 2", mode="eval").body
    assert REGROUPED_PER_FACTOR not in {getattr(new, HINT, "") for new in _regroupings(power)}
    slice_end = ast.parse("h + 1 * d_head", mode="eval").body
    assert REGROUPED_PER_FACTOR not in {getattr(new, HINT, "") for new in _regroupings(slice_end)}
    from mhalib.checks.repairs import MAX_FRAGMENT

    assert len(REGROUPED_PER_FACTOR) <= 2 * MAX_FRAGMENT  # (a record keeps no longer hint)
