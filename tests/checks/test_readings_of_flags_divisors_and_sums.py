"""Readings added after round Y (issue 22), each with a slip written here, apart from the
catalogue that found its kind: a count that is 0 exactly where a flag is off (a conditional
expression that took the whole sum), a head score divided by fewer than its entries, weights
normalised over the heads (no key said unseen on the strength of a tiny weight), groups tiled
by an index, and pieces joined along the next axis after an index dropped one (read on the
case whose sizes coincide least)."""

from __future__ import annotations

import math

import numpy as np
import torch

from mhalib.checks import get_exercise, judge_record
from mhalib.checks.explain import _coincidences
from mhalib.checks.probe import probe


def judged(exercise: str, func, seed: int = 1):
    checker = get_exercise(exercise)
    return judge_record(exercise, probe(checker, func, seed, "grading"), seed)


def param_count_bias_in_the_branch(d_model, bias=True):
    return 4 * d_model * d_model + 2 * d_model if bias else 0  # the whole count in the branch


def test_a_count_that_is_zero_where_a_flag_is_off_names_the_conditional():
    verdict = judged("mha_param_count", param_count_bias_in_the_branch)
    assert not verdict.passed
    assert "bias=False" in verdict.diagnosis and "binds loosest" in verdict.diagnosis, \
        verdict.diagnosis


def previous_token_over_the_heads(weights):
    heads = weights.shape[0]
    total = torch.diagonal(weights, offset=-1, dim1=1, dim2=2).double().sum(-1)  # (H,)
    return (total / (heads - 1)).to(weights.dtype)  # N - 1 queries belong


def test_a_score_divided_by_fewer_than_its_entries_is_read_back():
    verdict = judged("previous_token_score", previous_token_over_the_heads)
    assert not verdict.passed
    assert "sums the right weights" in verdict.diagnosis and "instead of 5" in verdict.diagnosis, \
        verdict.diagnosis


def mha_softmax_over_the_heads(x, w_q, w_k, w_v, w_o, num_heads):
    b, n, d = x.shape
    dh = d // num_heads

    def heads(t):
        return t.reshape(b, n, num_heads, dh).transpose(0, 2, 1, 3)

    q, k, v = heads(x @ w_q), heads(x @ w_k), heads(x @ w_v)
    s = q @ k.transpose(0, 1, 3, 2) / math.sqrt(dh)
    e = np.exp(s - s.max(axis=-1, keepdims=True))
    w = e / e.sum(axis=1, keepdims=True)  # over the heads
    return (w @ v).transpose(0, 2, 1, 3).reshape(b, n, d) @ w_o


def test_weights_normalised_over_the_heads_are_not_said_to_miss_a_key():
    verdict = judged("multi_head_attention", mha_softmax_over_the_heads)
    assert not verdict.passed
    assert "gives no weight" not in verdict.diagnosis, verdict.diagnosis


def repeat_kv_by_a_modulo_index(x, n_rep):
    groups = x.shape[1]
    return x[:, torch.arange(groups * n_rep) % groups]


def test_groups_tiled_by_an_index_are_said_so():
    verdict = judged("repeat_kv", repeat_kv_by_a_modulo_index)
    assert not verdict.passed
    assert "h % G" in verdict.diagnosis, verdict.diagnosis


def repeat_kv_joined_after_an_index(x, n_rep):
    pieces = [x[:, g] for g in range(x.shape[1]) for _ in range(n_rep)]  # (B, N, d) each
    return torch.cat(pieces, dim=1)


def test_pieces_joined_after_an_index_dropped_an_axis_are_among_the_causes():
    verdict = judged("repeat_kv", repeat_kv_joined_after_an_index)
    assert not verdict.passed
    assert "pieces joined along the wrong axis" in verdict.diagnosis, verdict.diagnosis


def test_coincidences_count_equal_sizes_products_and_ones():
    assert _coincidences({"B": 2, "G": 3, "N": 5, "d": 7}) == 0
    assert _coincidences({"B": 2, "n_rep": 2, "G": 4, "d": 8}) >= 2  # 2 = 2, 4 * 2 = 8
    assert _coincidences({"B": 1, "G": 3, "N": 5}) == 1
