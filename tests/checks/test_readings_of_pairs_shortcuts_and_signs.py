"""Readings added after round AB (issue 22), each with a slip written here, apart from the
catalogue that found its kind: several candidate numbers returned where one belongs, a
shortcut (an early return) mended by going without it, an empty output that no model may
name, an output the shape of an input, a sign mended where a value is used that may be wrong
where it is made, the last block's end left unclipped, and an output computed from other
weights than the ones returned."""

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


def crossover_every_solution(d_model):
    # 4 N^2 d = 8 N d^2 holds for N = 0 and for N = 2 d: both kept
    return [n for n in (0, 2 * d_model)]


def test_several_numbers_holding_the_right_one_say_return_only_it():
    verdict = judged("crossover_seq_len", crossover_every_solution)
    assert not verdict.passed
    assert "form:several" in verdict.flags, (verdict.flags, verdict.diagnosis)
    assert "return their sum" not in verdict.diagnosis, verdict.diagnosis


def repeat_kv_shortcut_for_one_copy(x, n_rep):
    if x.shape[2] < 2:  # nothing to copy, or so it seemed
        return x
    b, g, n, d = x.shape
    return x[:, :, None].expand(b, g, n_rep, n, d).reshape(b, g * n_rep, n, d)


@pytest.mark.usefixtures("searching")
def test_a_shortcut_that_returns_the_input_is_said_and_not_named_as_a_model():
    repair, verdict = repaired("repeat_kv", repeat_kv_shortcut_for_one_copy)
    assert not verdict.passed
    assert not any(f.startswith("mistake:") for f in verdict.flags), verdict.flags
    assert repair is not None and repair["new"] == "False", repair
    assert "without the early return" in verdict.diagnosis, verdict.diagnosis


def test_an_output_the_shape_of_an_input_says_it_came_back_as_it_is():
    verdict = judged("merge_heads", lambda x: x.copy())
    assert not verdict.passed
    assert "the argument x itself, unchanged" in verdict.diagnosis, verdict.diagnosis


def rope_with_the_half_turned_the_other_way(x, positions, base=10000.0):
    d = x.shape[-1]
    if d % 2:
        raise ValueError(f"head_dim={d} must be even")
    inv = base ** (-torch.arange(0, d // 2, dtype=torch.float32) * 2 / d)
    angles = positions.to(torch.float32)[:, None] * inv[None, :]  # (N, d/2)
    cos, sin = torch.cat([angles.cos()] * 2, -1), torch.cat([angles.sin()] * 2, -1)
    first, second = x.float()[..., : d // 2], x.float()[..., d // 2:]
    turned = torch.cat([second, -first], dim=-1)  # cat(-x2, x1) belongs
    return (x.float() * cos + turned * sin).to(x.dtype)


@pytest.mark.usefixtures("searching")
def test_a_sign_mended_where_it_is_used_offers_where_it_is_made():
    repair, verdict = repaired("apply_rope", rope_with_the_half_turned_the_other_way)
    assert not verdict.passed
    assert repair is not None and repair["new"] == "x.float() * cos - turned * sin", repair
    assert "or negate `turned` where it is made" in verdict.diagnosis, verdict.diagnosis
    assert "mistake:rotates_backwards" in verdict.flags, verdict.flags


def prefill_without_clipping(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    b, n, d_model = x.shape
    d = d_model // num_heads
    ct = torch.promote_types(x.dtype, torch.float32)
    x = x.to(ct)

    def heads(t):
        return t.reshape(b, -1, num_heads, d).transpose(1, 2)  # (B, H, n, d)

    k, v = heads(x @ w_k.to(ct)), heads(x @ w_v.to(ct))
    outs = []
    for start in range(0, n, chunk_size):
        stop = start + chunk_size  # min(start + chunk_size, n) belongs
        q = heads(x[:, start:stop] @ w_q.to(ct))
        s = q @ k[:, :, :stop].transpose(-2, -1) / math.sqrt(d)
        keep = torch.arange(stop)[None, :] <= torch.arange(start, stop)[:, None]
        s = s.masked_fill(~keep, float("-inf"))
        outs.append(torch.softmax(s, dim=-1) @ v[:, :, :stop])
    out = torch.cat(outs, dim=2).transpose(1, 2).reshape(b, n, d_model)
    return (out @ w_o.to(ct)).to(w_o.dtype)


def test_the_last_block_given_a_full_size_says_clip_its_end():
    verdict = judged("chunked_prefill", prefill_without_clipping)
    assert not verdict.passed
    assert "is where the last block ends" in verdict.diagnosis, verdict.diagnosis


def masked_attention_output_before_the_mask(q, k, v, mask):
    scores = q @ np.swapaxes(k, -1, -2) / math.sqrt(q.shape[-1])
    plain = np.exp(scores - scores.max(axis=-1, keepdims=True))
    plain /= plain.sum(axis=-1, keepdims=True)  # every key, the masked ones included
    masked = np.where(mask, scores, -np.inf)
    top = masked.max(axis=-1, keepdims=True)
    e = np.where(mask, np.exp(masked - np.where(np.isfinite(top), top, 0.0)), 0.0)
    total = e.sum(axis=-1, keepdims=True)
    weights = np.divide(e, total, out=np.zeros_like(e), where=total > 0)
    return plain @ v, weights


def test_an_output_from_other_weights_than_those_returned_is_read():
    verdict = judged("masked_attention", masked_attention_output_before_the_mask)
    assert not verdict.passed
    assert "form:out_from_other_weights" in verdict.flags, (verdict.flags, verdict.diagnosis)


def paged_with_the_page_size_of_the_wrong_axis(q, k_pages, v_pages, block_table, seq_lens):
    b_count, heads, d = q.shape
    groups = k_pages.shape[1]
    page = k_pages.shape[1]  # the K/V heads' axis: shape[2] is the page size
    ct = torch.promote_types(q.dtype, torch.float32)
    out = torch.zeros(b_count, heads, d, dtype=ct)
    for b in range(b_count):
        n = int(seq_lens[b])
        if n == 0:
            continue
        t = torch.arange(n)
        pages = block_table[b, torch.clamp(t // page, max=block_table.shape[1] - 1)].long()
        keys = k_pages[pages, :, t % page].to(ct)  # (n, G, d)
        values = v_pages[pages, :, t % page].to(ct)
        for h in range(heads):
            g = h // (heads // groups)
            w = torch.softmax(keys[:, g] @ q[b, h].to(ct) / math.sqrt(d), dim=0)  # (n,)
            out[b, h] = w @ values[:, g]
    return out.to(q.dtype)


def test_a_value_set_that_fits_a_minority_of_the_heads_is_not_said():
    verdict = judged("paged_attention", paged_with_the_page_size_of_the_wrong_axis)
    assert not verdict.passed
    assert "one key too many" not in verdict.diagnosis, verdict.diagnosis


def softmax_in_the_log_domain_with_a_sign_slip(x, axis=-1):
    top = np.max(x, axis=axis, keepdims=True)
    total = np.sum(np.exp(x - top), axis=axis, keepdims=True)
    return np.exp(x - top + np.log(total))  # - log(total) belongs


@pytest.mark.usefixtures("searching")
def test_a_sign_inside_a_call_is_not_offered_where_its_argument_is_made():
    repair, verdict = repaired("softmax", softmax_in_the_log_domain_with_a_sign_slip)
    assert not verdict.passed
    assert repair is not None and "- np.log(total)" in repair["new"], repair
    assert "negate" not in verdict.diagnosis, verdict.diagnosis
