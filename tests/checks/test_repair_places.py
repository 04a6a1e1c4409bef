"""Where else a repair's change could be made (mhalib.checks.repair_places), and the other
slips round O found said wrongly or not at all. Each slip is written here, apart from the
catalogue: a size assigned right and used wrongly (the repair found edits the assignment), sizes
unpacked in the wrong order (the repair found edits their use), a guard's comparison (not its
``or``), a variable mixed up inside lesson 12's watched call, a shape taken from another tensor,
two halves joined in the other order, positions rounded to bfloat16, a term without one of its
factors, and a chunk that attends before it is cached."""

from __future__ import annotations

import ast
import math

import numpy as np
import pytest
import torch

from mhalib.checks.repair_places import _a_size
from tests.checks.repair_harness import repaired, searching  # noqa: F401 (fixture)

pytestmark = pytest.mark.usefixtures("searching")


def judged(exercise: str, func):
    return repaired(exercise, func, seed=0)


def _softmax(s):
    e = np.exp(s - s.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def _split(t, heads):
    b, n, d = t.shape
    return t.reshape(b, n, heads, d // heads).transpose(0, 2, 1, 3)


def mha_scaled_by_model_width(x, w_q, w_k, w_v, w_o, num_heads):
    if x.shape[-1] % num_heads:
        raise ValueError(f"d_model={x.shape[-1]} is not divisible by num_heads={num_heads}")
    q, k, v = (_split(x @ w, num_heads) for w in (w_q, w_k, w_v))
    d_model = x.shape[-1]  # right: the model's width, named for it
    scores = q @ k.transpose(0, 1, 3, 2) / np.sqrt(d_model)  # the slip: a head's width belongs
    heads = _softmax(scores) @ v
    b, h, n, d = heads.shape
    return heads.transpose(0, 2, 1, 3).reshape(b, n, h * d) @ w_o


def split_heads_sizes_unpacked_time_first(x, num_heads):
    n, b, width = x.shape  # the slip: (B, N, d_model) unpacked as (N, B, d_model)
    if width % num_heads:
        raise ValueError(f"d_model={width} is not divisible by num_heads={num_heads}")
    return x.reshape(b, n, num_heads, width // num_heads).transpose(0, 2, 1, 3)


def test_a_size_assigned_right_is_also_offered_where_it_is_used():
    repair, verdict = judged("multi_head_attention", mha_scaled_by_model_width)
    assert repair is not None and "x.shape[-1]" in repair["old"], verdict.diagnosis
    assert "change the value where `d_model` is used" in verdict.diagnosis
    assert "mend it where the slip is" in verdict.diagnosis


def flops_tokens_one_too_many(seq_len, d_model):
    tokens = seq_len + 1  # the slip is where the value is made: no other place is offered
    parts = {"qkv_projections": 6 * tokens * d_model ** 2,
             "scores": 2 * tokens ** 2 * d_model, "weighted_sum": 2 * tokens ** 2 * d_model,
             "output_projection": 2 * tokens * d_model ** 2}
    parts["total"] = sum(parts.values())
    return parts


def test_a_value_not_named_for_a_size_is_mended_where_it_is_made():
    repair, verdict = judged("mha_flops", flops_tokens_one_too_many)
    assert repair is not None and "seq_len + 1" in repair["old"], verdict.diagnosis
    assert "where `tokens` is used" not in verdict.diagnosis


def test_names_read_in_another_order_are_also_offered_where_they_are_unpacked():
    repair, verdict = judged("split_heads", split_heads_sizes_unpacked_time_first)
    assert repair is not None, verdict.diagnosis
    assert "swap the names where they are assigned" in verdict.diagnosis
    assert "`n, b, width = x.shape`" in verdict.diagnosis


def test_only_a_size_is_offered_where_it_is_used():
    """An array computed in one statement is not offered "where it is used": the edit is a
    part of it (a scale inside the scores), not the value as a whole."""
    def size(text):
        return _a_size(ast.parse(text, mode="eval").body)

    assert size("w_q.shape[0]") and size("d // h") and size("1 / math.sqrt(len(x))")
    assert not size("q @ k.T / np.sqrt(d)") and not size("x[:, 0]") and not size("np.exp(s)")


def cache_bytes_refusing_zero(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                              bytes_per_element=2):
    for name, value in (("num_layers", num_layers), ("kv_lora_rank", kv_lora_rank),
                        ("rope_head_dim", rope_head_dim), ("seq_len", seq_len)):
        if not isinstance(value, int) or value <= 0:  # the slip: 0 is a valid rope_head_dim
            raise ValueError(f"{name}={value!r} must be a positive int")
    return num_layers * (kv_lora_rank + rope_head_dim) * seq_len * batch_size * bytes_per_element


def test_a_guard_is_mended_in_its_comparison_not_by_and_for_or():
    """``or`` swapped for ``and`` also passes every case, by a guard that refuses next to
    nothing."""
    repair, verdict = judged("mla_kv_cache_bytes", cache_bytes_refusing_zero)
    assert repair is not None, verdict.diagnosis
    assert " or " in repair["new"] and "value < 0" in repair["new"], repair


def backward_values_from_score_gradient(q, k, v, grad_out, causal=False):
    scale = q.shape[-1] ** -0.5
    s = q.double() @ k.double().transpose(-1, -2) * scale
    if causal:
        n_q, n_k = s.shape[-2:]
        s = s.masked_fill(~torch.ones(n_q, n_k, dtype=torch.bool).tril(n_k - n_q), -math.inf)
    p = torch.softmax(s, dim=-1).nan_to_num(0.0)
    g = grad_out.double()
    dp = g @ v.double().transpose(-1, -2)
    ds = p * (dp - (dp * p).sum(-1, keepdim=True))
    dv = ds.transpose(-1, -2) @ g  # the slip: the probabilities p belong here
    dq = ds @ k.double() * scale
    dk = ds.transpose(-1, -2) @ q.double() * scale
    return dq.to(q.dtype), dk.to(k.dtype), dv.to(v.dtype)


def test_a_variable_mixed_up_under_lesson_12s_autograd_watch_is_repaired():
    """The watch's profile hook passes the returns on, so the search sees the learner's local
    variables (a mix-up is only tried between variables alike)."""
    repair, verdict = judged("attention_backward", backward_values_from_score_gradient)
    assert repair is not None, verdict.diagnosis
    assert repair["old"].startswith("ds") and repair["new"].startswith("p"), repair
    assert "is made from" not in verdict.diagnosis  # (ds is read elsewhere as it is: right)


def jacobian_of_softmax_again(p):
    s = np.exp(p) / np.exp(p).sum()  # the slip: p is already the softmax
    return np.diag(s) - np.outer(s, s)


def test_a_variable_bypassed_wherever_it_is_read_points_at_where_it_is_made():
    repair, verdict = judged("softmax_jacobian", jacobian_of_softmax_again)
    assert repair is not None, verdict.diagnosis
    assert "`s` is made from `p` at line" in verdict.diagnosis, verdict.diagnosis


def masked_attention_values_from_keys(q, k, v, mask=None):
    scores = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    if mask is not None:
        scores = np.where(mask, scores, -np.inf)
    top = scores.max(axis=-1, keepdims=True)
    e = np.exp(scores - np.where(np.isfinite(top), top, 0))
    total = e.sum(axis=-1, keepdims=True)
    weights = np.divide(e, total, out=np.zeros_like(e), where=total > 0)
    return weights @ k, weights  # the slip: the values belong here


def rope_halves_joined_backwards(x, positions, base=10000.0):
    d = x.shape[-1]
    freqs = base ** (-torch.arange(0, d // 2, dtype=torch.float64) * 2 / d)
    angles = positions.double()[:, None] * freqs
    cos, sin = angles.cos(), angles.sin()
    first, second = x.double()[..., :d // 2], x.double()[..., d // 2:]
    turned = torch.cat([first * sin + second * cos, first * cos - second * sin], dim=-1)
    return turned.to(x.dtype)  # the slip: the halves joined in the other order


def angles_of_bfloat16_positions(positions, head_dim, base=10000.0):
    if head_dim % 2:
        raise ValueError(f"head_dim={head_dim} is odd")
    exponents = torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim
    return positions.to(torch.bfloat16).float()[:, None] * base ** -exponents


@pytest.mark.parametrize("exercise, func, flag, words", [
    ("masked_attention", masked_attention_values_from_keys, "form:shape",
     "= k.shape[1]: another tensor's or axis's size"),  # (the clearest case's sizes)
    ("apply_rope", rope_halves_joined_backwards, "form:halves_swapped",
     "the halves were joined in the other order"),
    ("rope_angles", angles_of_bfloat16_positions, None, "positions.to(torch.bfloat16)"),
])
def test_a_slip_round_o_found_is_said(exercise, func, flag, words):
    repair, verdict = judged(exercise, func)
    assert not verdict.passed
    assert flag is None or flag in verdict.flags, verdict.flags
    assert words in verdict.diagnosis, verdict.diagnosis
    assert "step off" not in verdict.diagnosis  # (w @ k's 6 is not a loop one step off)


def cache_bytes_rope_key_per_sequence(num_layers, kv_lora_rank, rope_head_dim, seq_len,
                                      batch_size=1, bytes_per_element=2):
    per_layer = kv_lora_rank * seq_len + rope_head_dim  # the slip: the RoPE key is per token
    return num_layers * per_layer * batch_size * bytes_per_element


def test_a_term_without_one_of_its_factors_is_read_back():
    repair, verdict = judged("mla_kv_cache_bytes", cache_bytes_rope_key_per_sequence)
    assert "count:factor_out_of_a_term" in verdict.flags, verdict.diagnosis
    assert "the factor seq_len is left out of that one term" in verdict.diagnosis
    assert "rope_head_dim" in verdict.diagnosis


def angles_pairs_counted_from_one(positions, head_dim, base=10000.0):
    if head_dim % 2:
        raise ValueError(f"head_dim={head_dim} is odd")
    i = torch.arange(1, head_dim // 2 + 1, dtype=torch.float64)  # the slip: pairs from 1
    return (positions.double()[:, None] * base ** (-2 * i / head_dim)).float()


def test_edits_nested_in_one_expression_are_said_as_one_change():
    """Round P: `head_dim // 2 + 1` mended inside `torch.arange(1, head_dim // 2 + 1)` cannot
    be said as two fragments applied one after the other."""
    repair, verdict = judged("rope_angles", angles_pairs_counted_from_one)
    assert repair is not None, verdict.diagnosis
    assert repair["places"] == 1 and "; " not in repair["old"], repair
    assert repair["new"].startswith("torch.arange(0, head_dim // 2"), repair


def crossover_searched_below_it(d_model):
    for n in range(1, 2 * d_model):  # the slip: the end is exclusive, 2 d_model is never tried
        if 4 * n * n * d_model >= 8 * n * d_model * d_model:
            return n


def param_count_in_two_parts(d_model, bias=True):
    return 4 * d_model * d_model, (4 * d_model if bias else 0)


def gqa_kv_split_into_query_heads(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    b, n, d_model = x.shape
    d_head = d_model // num_heads

    def heads(t, count):
        return t.reshape(b, n, count, -1).transpose(1, 2)

    q = heads(x @ w_q, num_heads)
    k, v = heads(x @ w_k, num_heads), heads(x @ w_v, num_heads)  # the slip: num_kv_heads
    rep = num_heads // num_kv_heads
    k, v = k.repeat_interleave(rep, dim=1), v.repeat_interleave(rep, dim=1)
    scores = (q * k).sum(-1, keepdim=True) if False else q @ k.transpose(-2, -1)
    scores = scores / math.sqrt(d_head)
    if causal:
        scores = scores.masked_fill(torch.ones(n, n, dtype=torch.bool).triu(1), -math.inf)
    out = torch.softmax(scores, dim=-1) @ v
    return out.transpose(1, 2).reshape(b, n, d_model) @ w_o


@pytest.mark.parametrize("exercise, func, flag, words", [
    ("crossover_seq_len", crossover_searched_below_it, "form:none",
     "ended without returning a value"),
    ("mha_param_count", param_count_in_two_parts, "form:parts", "return their sum"),
])
def test_a_number_expected_and_something_else_returned_is_said(exercise, func, flag, words):
    _, verdict = judged(exercise, func)
    assert flag in verdict.flags and words in verdict.diagnosis, verdict.diagnosis


def test_a_size_in_an_error_is_said_as_equal_to_the_cases_sizes_not_as_them():
    """Round P: an 8 in a shape error was called "(G*d_head)" and "(N)" where it was 2 tokens x
    4 heads; the sizes it equals are said as sizes it equals."""
    _, verdict = judged("grouped_query_attention", gqa_kv_split_into_query_heads)
    assert "raised:broadcast" in verdict.flags or "raised:matmul" in verdict.flags, verdict.flags
    assert "(as many as " in verdict.diagnosis, verdict.diagnosis


def merge_heads_width_from_tokens(x):
    b, h, n, d = x.shape
    return np.swapaxes(x, 1, 2).reshape(b, n, h * n)  # the second n: d belongs


def test_names_swapped_in_one_place_of_several_are_not_offered_where_they_are_unpacked():
    """Round U: swapping n and d where they are unpacked changes the first n of the reshape
    too, so it mends nothing; only the change at the second n is said."""
    repair, verdict = judged("merge_heads", merge_heads_width_from_tokens)
    assert repair is not None and repair["new"].endswith("h * d)"), verdict.diagnosis
    assert "swap the names where they are assigned" not in verdict.diagnosis
    # the reshape's error names each size that could be wrong, the merged width among them
    assert "should be 12 (as many as x.shape[1]*x.shape[3])" in verdict.diagnosis
