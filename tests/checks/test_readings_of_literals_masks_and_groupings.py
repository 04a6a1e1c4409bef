"""Readings added after round Z (issue 22), each with a slip written here, apart from the
catalogue that found its kind: a count made a float by an integral float literal (mended as
its int), a boolean mask that is one value everywhere, an output one piece too wide because a
result started from one piece before the loop added all of them, a regrouping that mends a
result a model also reproduces (said as either), and the tiled-groups model naming the index
as well as the call."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from mhalib.checks import get_exercise, judge_record
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
