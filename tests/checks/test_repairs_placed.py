"""Where a repair is placed (mhalib.checks.repairs, mutant_edits), for the slips round M found
said wrongly or not at all; each slip is written here, apart from the catalogue: a second place
that only works around the value made upstream is not said, a power's exponent regrouped
(``d ** (1 / 2)``), a ratio of two sizes inverted (``//`` with its operands swapped), a block's
index used as its start (``h:h + d`` for ``h * d:(h + 1) * d``), and a ratio off by a constant
factor said by the mistake model that names the factor first."""

from __future__ import annotations

import ast
import math

import numpy as np
import pytest
import torch

from mhalib.checks.edit_regroupings import _regroupings
from tests.checks.repair_harness import repaired, searching  # noqa: F401 (fixture)

pytestmark = pytest.mark.usefixtures("searching")


def flops_scores_squared(seq_len, d_model):
    n, d = seq_len, d_model
    projections = 3 * 2 * n * d * d
    scores = 2 * n * d * d  # the slip: d where a seq_len belongs
    weighted = 2 * n * n * d
    output = 2 * n * d * d
    return {"qkv_projections": projections, "scores": scores, "weighted_sum": weighted,
            "output_projection": output, "total": projections + scores + weighted + output}


def entropy_renormalised(weights, axis=-1):
    p = np.asarray(weights, dtype=float)
    with np.errstate(invalid="ignore"):
        p = p / p.sum(axis=axis, keepdims=True)  # the slip: 0 / 0 on a row of zeros
    logs = np.log(p, out=np.zeros_like(p), where=p > 0)
    return -np.sum(p * logs, axis=axis)


def attention_scale_by_precedence(q, k, v):
    d = q.shape[-1]
    scale = 1 / d ** 1 / 2
    scores = q @ np.swapaxes(k, -1, -2) * scale
    e = np.exp(scores - scores.max(axis=-1, keepdims=True))
    weights = e / e.sum(axis=-1, keepdims=True)
    return weights @ v, weights


def merge_heads_by_index(x):
    batch, heads, n, d = x.shape
    out = np.zeros((batch, n, heads * d), dtype=x.dtype)
    for head in range(heads):
        out[:, :, head:head + d] = x[:, head]
    return out


def intensity_keys_only(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                        bytes_per_element=2):
    flops = 4 * batch_size * num_heads * seq_len * head_dim
    read = batch_size * num_kv_heads * seq_len * head_dim * bytes_per_element
    return flops / read


def test_a_second_place_that_works_around_the_upstream_value_is_not_said():
    """Round M: using the weighted-sum count for the scores (equal by chance) leaves the wrong
    formula in place; the scores' own line is the slip."""
    repair, verdict = repaired("mha_flops", flops_scores_squared)
    assert repair is not None and "also" not in repair, verdict.diagnosis
    assert "2 * n * d * d" in repair["old"], repair
    assert "either of two places" not in verdict.diagnosis


def test_a_renormalisation_is_mended_where_it_is_made():
    repair, verdict = repaired("softmax_entropy", entropy_renormalised)
    assert repair is not None and "also" not in repair, verdict.diagnosis
    assert "p.sum(axis=axis, keepdims=True)" in repair["old"], repair


def test_a_power_of_a_fraction_is_regrouped():
    said = [ast.unparse(n) for n in _regroupings(ast.parse("1 / d ** 1 / 2", mode="eval").body)]
    assert "1 / d ** (1 / 2)" in said
    folded = [ast.unparse(n) for n in _regroupings(
        ast.parse("n * (n + 1) // 2", mode="eval").body)]
    assert "n * n + 1 // 2" not in folded  # (1 // 2 is 0: a term folded away)
    repair, verdict = repaired("attention", attention_scale_by_precedence)
    assert repair is not None and repair["new"] == "1 / d ** (1 / 2)", verdict.diagnosis
    assert "grouped otherwise" in verdict.diagnosis


def gqa_ratio_inverted(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    batch, n, d_model = x.shape
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not a multiple of "
                         f"num_kv_heads={num_kv_heads}")
    d_head = d_model // num_heads
    n_rep = num_kv_heads // num_heads  # the slip: the ratio upside down
    q = (x @ w_q).reshape(batch, n, num_heads, d_head).transpose(1, 2)
    k = (x @ w_k).reshape(batch, n, num_kv_heads, d_head).transpose(1, 2)
    v = (x @ w_v).reshape(batch, n, num_kv_heads, d_head).transpose(1, 2)
    k, v = k.repeat_interleave(n_rep, dim=1), v.repeat_interleave(n_rep, dim=1)
    scores = q @ k.transpose(-2, -1) / math.sqrt(d_head)
    if causal:
        scores = scores.masked_fill(torch.ones(n, n, dtype=torch.bool).triu(1), float("-inf"))
    out = torch.softmax(scores, dim=-1) @ v
    return out.transpose(1, 2).reshape(batch, n, d_model) @ w_o


def test_a_ratio_of_two_sizes_is_tried_the_other_way_up():
    repair, verdict = repaired("grouped_query_attention", gqa_ratio_inverted)
    assert repair is not None, verdict.diagnosis
    assert repair["old"] == "num_kv_heads // num_heads" and \
        repair["new"] == "num_heads // num_kv_heads", repair


def test_a_blocks_index_used_as_its_start_is_scaled_by_its_width():
    repair, verdict = repaired("merge_heads", merge_heads_by_index)
    assert repair is not None, verdict.diagnosis
    assert "head * d:(head + 1) * d" in repair["new"], repair
    assert "index times width" in verdict.diagnosis


def test_a_ratio_off_by_a_factor_leads_with_the_model_that_names_the_factor():
    """Round M: the keys-only bytes halve the denominator; the change found halves the FLOPs,
    which undoes the factor elsewhere. The model's cause comes first, the change as one place."""
    repair, verdict = repaired("decode_attention_intensity", intensity_keys_only)
    assert repair is not None, verdict.diagnosis
    assert "mistake:keys_only" in verdict.flags
    assert verdict.diagnosis.index("bytes count only the cached keys") < verdict.diagnosis.index(
        "One change that undoes the factor")


def kv_bytes_fp16_counted_twice(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                                bytes_per_element=2):
    per_token = 2 * num_layers * num_kv_heads * head_dim
    return per_token * seq_len * batch_size * bytes_per_element * 2  # the 2 bytes again


def intensity_bytes_without_batch(num_heads, num_kv_heads, head_dim, seq_len, batch_size=1,
                                  bytes_per_element=2):
    flops = 4 * batch_size * num_heads * seq_len * head_dim
    read = 2 * num_kv_heads * seq_len * head_dim * bytes_per_element  # batch_size left out
    return flops / read


def test_a_count_a_constant_factor_off_says_the_change_as_one_place_after_the_reading():
    """Round N: a count's bytes counted twice was mended at its keys-and-values 2, said as
    certain; an int count a constant factor off is now said like a ratio's."""
    repair, verdict = repaired("kv_cache_bytes", kv_bytes_fp16_counted_twice)
    assert repair is not None, verdict.diagnosis
    assert "16-bit value's 2 bytes counted again" in verdict.diagnosis
    assert verdict.diagnosis.index("16-bit") < verdict.diagnosis.index("One change that undoes")


def test_a_ratio_off_by_one_of_the_cases_sizes_is_said_as_that_factor():
    repair, verdict = repaired("decode_attention_intensity", intensity_bytes_without_batch)
    assert repair is not None, verdict.diagnosis
    assert "Your result is batch_size times the right one" in verdict.diagnosis
    assert "can be undone in more than one place" in verdict.diagnosis


def test_a_change_that_makes_a_right_value_wrong_is_said_not_to_be_the_slip():
    # no edit puts batch_size back into the bytes; dropping it from the FLOPs passes every
    # case, and makes the learner's right ``flops`` wrong: it is said as cancelling the slip
    repair, verdict = repaired("decode_attention_intensity", intensity_bytes_without_batch)
    first = intensity_bytes_without_batch.__code__.co_firstlineno
    assert repair["line"] == first + 2 and repair["cancels"] == "`flops`"
    assert "makes `flops` wrong, which held the value the answer key computes" in \
        verdict.diagnosis
    assert "one change mends it" not in verdict.diagnosis


def attention_shift_without_keepdims(q, k, v):
    s = q @ np.swapaxes(k, -1, -2) / np.sqrt(k.shape[-1])
    s = s - s.max(axis=-1)  # (N_q,) against (N_q, N_k): raises unless N_q == N_k
    e = np.exp(s)
    w = e / e.sum(axis=-1, keepdims=True)
    return w @ v, w


def test_a_variable_read_from_a_call_that_raised_does_not_make_the_repair_cancelling():
    """Round U: on a case where the code raised, ``s`` still held the key's scores (the shift
    never ran); the repair that lets the shift run made it the shifted scores, and was said as
    cancelling a slip elsewhere. The case read is one the code returned on."""
    repair, verdict = repaired("attention", attention_shift_without_keepdims)
    assert repair is not None, verdict.diagnosis
    assert repair["new"].endswith("keepdims=True)") and not repair["cancels"], verdict.diagnosis
    assert "not where the slip is" not in verdict.diagnosis


def mla_bytes_keys_and_values(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                              bytes_per_element=2):
    per_token = 2 * (kv_lora_rank + rope_head_dim) * bytes_per_element  # no K and V in MLA
    return num_layers * per_token * seq_len * batch_size


def test_a_change_is_said_with_the_parentheses_its_place_needs():
    """Round V: `2 * (r + p) * b` mended as `r + p` was said without parentheses, and pasted as
    said it gave r + p * b."""
    repair, verdict = repaired("mla_kv_cache_bytes", mla_bytes_keys_and_values)
    assert repair is not None, verdict.diagnosis
    assert repair["new"] == "(kv_lora_rank + rope_head_dim)", repair
