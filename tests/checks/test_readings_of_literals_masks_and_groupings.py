"""Readings added after rounds Z and AA (issue 22), each with a slip written here, apart from the
catalogue that found its kind: a count made a float by an integral float literal (mended as
its int), a boolean mask that is one value everywhere, an output one piece too wide because a
result started from one piece before the loop added all of them, a regrouping that mends a
result a model also reproduces (said as either), the tiled-groups model naming the index
as well as the call, rows each off by a factor of their own, and diagonal() of a vector."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from mhalib.checks import get_exercise, judge_record
from mhalib.checks.explain_forms import _row_factors
from mhalib.checks.probe import probe
from tests.checks.repair_harness import repaired, searching  # noqa: F401 (fixture)


def judged(exercise: str, func, seed: int = 1):
    checker = get_exercise(exercise)
    return judge_record(exercise, probe(checker, func, seed, "grading"), seed)


def flops_with_a_float_factor(seq_len, d_model):
    n, d = seq_len, d_model
    scores = 2.0 * n * n * d  # a float factor, although every other term is an int
    return {"qkv_projections": 6 * n * d * d, "scores": scores, "weighted_sum": 2 * n * n * d,
            "output_projection": 2 * n * d * d, "total": 8 * n * d * d + 2 * n * n * d + scores}


@pytest.mark.usefixtures("searching")
def test_an_integral_float_literal_in_a_count_is_mended_as_its_int():
    repair, verdict = repaired("mha_flops", flops_with_a_float_factor)
    assert not verdict.passed
    assert repair is not None and repair["old"] == "2.0 * n * n * d", repair
    assert repair["new"] == "2 * n * n * d", repair
    assert "a float literal" in verdict.diagnosis, verdict.diagnosis


def causal_mask_from_ones(n_q, n_k=None):
    n_k = n_q if n_k is None else n_k
    allowed = np.full((n_q, n_k), True)
    for i in range(n_q):
        allowed[i, : i + n_k - n_q + 1] = True  # the kept part written, the rest never cleared
    return allowed


def test_a_mask_that_is_one_value_everywhere_says_nothing_was_set():
    verdict = judged("causal_mask", causal_mask_from_ones)
    assert not verdict.passed
    assert "form:constant_mask" in verdict.flags, verdict.flags
    assert "every entry of the output is True" in verdict.diagnosis, verdict.diagnosis
    assert "started all True" in verdict.diagnosis, verdict.diagnosis


def merge_heads_started_from_the_first(x):
    pieces = [x[:, 0]]  # head 0, and then every head again
    for head in range(x.shape[1]):
        pieces.append(x[:, head])
    return np.concatenate(pieces, axis=-1)


def test_one_piece_too_many_lists_a_result_started_from_one_piece():
    verdict = judged("merge_heads", merge_heads_started_from_the_first)
    assert not verdict.passed
    assert "started from one piece" in verdict.diagnosis, verdict.diagnosis


def crossover_written_with_a_power(d_model):
    half_square = 2 * d_model ** 2  # N^2 = 2 d^2, cancelled twice
    return int(half_square ** 0.5)


@pytest.mark.usefixtures("searching")
def test_a_regrouping_beside_a_model_is_said_as_either():
    repair, verdict = repaired("crossover_seq_len", crossover_written_with_a_power)
    assert not verdict.passed
    assert any(f.startswith("mistake:") for f in verdict.flags), verdict.flags
    assert repair is not None and repair["new"] == "(2 * d_model) ** 2", repair
    assert "Either the parentheses are the slip" in verdict.diagnosis, verdict.diagnosis
    assert verdict.diagnosis.index("N^2 = 2") < verdict.diagnosis.index("Either"), \
        verdict.diagnosis


def gqa_head_loop_modulo(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    b, n, d_model = x.shape
    d = d_model // num_heads
    ct = torch.promote_types(x.dtype, torch.float32)
    x = x.to(ct)
    q = (x @ w_q.to(ct)).reshape(b, n, num_heads, d).transpose(1, 2)  # (B, H, N, d)
    k = (x @ w_k.to(ct)).reshape(b, n, num_kv_heads, d).transpose(1, 2)  # (B, G, N, d)
    v = (x @ w_v.to(ct)).reshape(b, n, num_kv_heads, d).transpose(1, 2)
    heads = []
    for head in range(num_heads):
        kv = head % num_kv_heads  # tiled: head // (num_heads // num_kv_heads) belongs
        s = q[:, head] @ k[:, kv].mT / math.sqrt(d)  # (B, N, N)
        if causal:
            s = s.masked_fill(~torch.ones(n, n, dtype=torch.bool).tril(), float("-inf"))
        heads.append(torch.softmax(s, dim=-1) @ v[:, kv])  # (B, N, d)
    out = torch.stack(heads, dim=1).transpose(1, 2).reshape(b, n, d_model)
    return (out @ w_o.to(ct)).to(w_o.dtype)


def test_the_tiled_groups_model_names_the_index_as_well_as_the_call():
    verdict = judged("grouped_query_attention", gqa_head_loop_modulo)
    assert not verdict.passed
    assert "mistake:tiled_groups" in verdict.flags, (verdict.flags, verdict.diagnosis)
    assert "h % num_kv_heads" in verdict.diagnosis, verdict.diagnosis


def attention_rows_not_normalised(q, k, v):
    d_k = q.shape[-1]
    outs, weights = [], []
    for row in q @ np.swapaxes(k, -1, -2) / math.sqrt(d_k):  # one query's scores at a time
        unnormalised = np.exp(row - row.max(axis=-1, keepdims=True))
        outs.append(unnormalised @ v)  # before the division by the row sum
        weights.append(unnormalised / unnormalised.sum(axis=-1, keepdims=True))
    return np.stack(outs), np.stack(weights)


def test_rows_each_off_by_their_own_factor_are_read():
    verdict = judged("attention", attention_rows_not_normalised)
    assert not verdict.passed  # (read first as an output from other weights than returned)
    assert "form:out_from_other_weights" in verdict.flags, (verdict.flags, verdict.diagnosis)
    assert "before their division by the row sums" in verdict.diagnosis, verdict.diagnosis
    right = np.arange(1.0, 13.0).reshape(3, 4)  # (N, d_v)
    found = _row_factors(right, right * np.array([[1.5], [2.0], [3.25]]), "the output")
    assert found is not None and found[0] == "form:row_factors", found
    assert "from 1.5 to 3.25" in found[1], found
    assert _row_factors(right, right * 2.0, "the output") is None  # (one factor: said elsewhere)


def jacobian_with_the_diagonal_method(p):
    return p.diagonal() - np.outer(p, p)  # reads a diagonal where np.diag builds one


def test_diagonal_of_a_vector_says_diag_builds_the_matrix():
    verdict = judged("softmax_jacobian", jacobian_with_the_diagonal_method)
    assert not verdict.passed
    assert "raised:diagonal_for_diag" in verdict.flags, (verdict.flags, verdict.diagnosis)
    assert "np.diag(v)" in verdict.diagnosis, verdict.diagnosis


def flops_counted_then_read_around(seq_len, d_model):
    n, d = seq_len, d_model
    scores = (n * d) ** 2 * 2  # d squared as well, where 2 n^2 d belongs
    weighted = 2 * n * n * d
    projections = 6 * n * d * d
    output = 2 * n * d * d
    return {"qkv_projections": projections, "scores": scores, "weighted_sum": weighted,
            "output_projection": output, "total": projections + scores + weighted + output}


@pytest.mark.usefixtures("searching")
def test_a_repair_that_reads_another_variable_everywhere_says_where_the_value_is_made():
    repair, verdict = repaired("mha_flops", flops_counted_then_read_around)
    assert not verdict.passed
    assert repair is not None and repair["old"] == "scores" and repair["new"] == "weighted", \
        repair
    assert "reads around a value" in verdict.diagnosis, verdict.diagnosis
    assert "most likely where it is made" in verdict.diagnosis, verdict.diagnosis


def gqa_with_functional_linear(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    b, n, d_model = x.shape
    d = d_model // num_heads
    q = torch.nn.functional.linear(x, w_q).reshape(b, n, num_heads, d).transpose(1, 2)
    k = torch.nn.functional.linear(x, w_k).reshape(b, n, num_kv_heads, d).transpose(1, 2)
    v = torch.nn.functional.linear(x, w_v).reshape(b, n, num_kv_heads, d).transpose(1, 2)
    rep = num_heads // num_kv_heads
    k, v = k.repeat_interleave(rep, dim=1), v.repeat_interleave(rep, dim=1)
    out = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)
    return torch.nn.functional.linear(out.transpose(1, 2).reshape(b, n, d_model), w_o)


def test_functional_linear_with_the_course_layout_names_the_transpose():
    verdict = judged("grouped_query_attention", gqa_with_functional_linear)
    assert not verdict.passed
    assert "raised:linear_layout" in verdict.flags, (verdict.flags, verdict.diagnosis)


def padding_both_rows(lengths, n):
    positions = np.arange(n).reshape(1, -1)
    return (positions < np.asarray(lengths).reshape(1, -1))[:, None, None, :]  # both rows


def test_two_rows_compared_say_one_must_be_a_column():
    verdict = judged("padding_mask", padding_both_rows)
    assert not verdict.passed
    assert "on the same side" in verdict.diagnosis, verdict.diagnosis


def split_heads_squeezed(x, num_heads):
    b, n, d_model = x.shape
    if d_model % num_heads:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    heads = x.reshape(b, n, num_heads, d_model // num_heads).transpose(0, 2, 1, 3)
    return np.squeeze(heads)  # drops B, H or N when it is 1


def test_an_axis_of_one_missing_names_squeeze_among_its_causes():
    verdict = judged("split_heads", split_heads_squeezed)
    assert not verdict.passed
    assert "squeeze()" in verdict.diagnosis, verdict.diagnosis


def flash_backward_grad_v_assigned(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    ct = torch.promote_types(q.dtype, torch.float32)
    q, k, v, out, grad_out = (t.to(ct) for t in (q, k, v, out, grad_out))
    lse = lse.to(ct)
    n_q, n_k, d = q.shape[-2], k.shape[-2], q.shape[-1]
    scale = 1 / math.sqrt(d)
    delta = (grad_out * out).sum(-1, keepdim=True)  # (..., N_q, 1)
    grad_q, grad_k, grad_v = torch.zeros_like(q), torch.zeros_like(k), torch.zeros_like(v)
    safe_lse = torch.where(torch.isinf(lse), torch.zeros_like(lse), lse)[..., None]
    for i in range(0, n_q, block_size):  # queries outside, keys inside
        rows = slice(i, min(i + block_size, n_q))
        for j in range(0, n_k, block_size):
            cols = slice(j, min(j + block_size, n_k))
            s = q[..., rows, :] @ k[..., cols, :].mT * scale
            if causal:
                qi = torch.arange(rows.start, rows.stop)[:, None] + n_k - n_q
                s = s.masked_fill(torch.arange(cols.start, cols.stop)[None, :] > qi, -math.inf)
            p = torch.exp(s - safe_lse[..., rows, :])
            p = torch.where(torch.isinf(lse[..., rows, None]), torch.zeros_like(p), p)
            grad_v[..., cols, :] = p.mT @ grad_out[..., rows, :]  # = where += belongs
            grad_s = p * (grad_out[..., rows, :] @ v[..., cols, :].mT - delta[..., rows, :])
            grad_q[..., rows, :] += grad_s @ k[..., cols, :] * scale
            grad_k[..., cols, :] += grad_s.mT @ q[..., rows, :] * scale
    return tuple(g.to(t.dtype) for g, t in ((grad_q, q), (grad_k, k), (grad_v, v)))


def test_one_gradient_wrong_once_split_into_blocks_is_named():
    verdict = judged("flash_attention_backward", flash_backward_grad_v_assigned)
    assert not verdict.passed
    assert "mistake:blocks_combined_wrongly_grad_v" in verdict.flags, \
        (verdict.flags, verdict.diagnosis)
    assert "an = where += belongs" in verdict.diagnosis, verdict.diagnosis
