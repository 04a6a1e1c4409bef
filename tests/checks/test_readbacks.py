"""Diagnoses read back from the learner's output (issue 22): which weights, shares, row terms,
rotations and count terms the code used. Each wrong answer below is written with torch's or
numpy's own building blocks (scaled_dot_product_attention, softmax, logaddexp), apart from the
answer key, and must be rejected with the read-back that names its slip; the read-backs must say
nothing of a right answer and nothing they cannot pin down."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from mhalib.checks import get_exercise, judge_record
from mhalib.checks.probe import probe
from mhalib.checks.weights_seen import Head, diagnose, read_weights


def verdict(exercise: str, func, seed: int = 0):
    checker = get_exercise(exercise)
    return judge_record(exercise, probe(checker, func, seed, "grading"), seed)


def flagged(exercise: str, func) -> tuple[set, str]:
    v = verdict(exercise, func)
    assert not v.passed, v.diagnosis
    return set(v.flags), v.diagnosis


# -- the read-back itself -----------------------------------------------------------------------

def test_weights_are_read_back_exactly_and_only_when_the_values_determine_them():
    rng = np.random.default_rng(0)
    v = rng.normal(size=(5, 8))
    w = torch.softmax(torch.tensor(rng.normal(size=(3, 5))), -1).numpy()
    read, residual = read_weights(w @ v, v)
    assert residual < 1e-12 and np.allclose(read, w)
    assert read_weights(w @ v[:, :5], v[:, :5]) is None  # N_k = d_v: any output would fit


def test_a_right_head_shows_nothing_and_a_strict_mask_is_named():
    rng = np.random.default_rng(1)
    q, k, v = (torch.tensor(rng.normal(size=(6, 8))) for _ in range(3))
    right = F.scaled_dot_product_attention(q, k, v, is_causal=True).numpy()
    allowed = np.tril(np.ones((6, 6), bool))
    head = Head("head 0", q.numpy(), k.numpy(), v.numpy(), right, allowed, 1 / math.sqrt(8))
    assert diagnose([head], {"d": 8}) is None
    strict = torch.ones(6, 6, dtype=torch.bool).tril(-1)  # row 0 sees nothing: NaN, left unread
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=strict).numpy()
    head.out = out
    found = diagnose([head], {"d": 8})
    assert found is not None and "diagonal" in found[1], found


def test_the_scale_is_read_back_and_named_by_the_case_sizes():
    rng = np.random.default_rng(2)
    q, k, v = (torch.tensor(rng.normal(size=(5, 16))) for _ in range(3))
    out = F.scaled_dot_product_attention(q, k, v, scale=1 / 16).numpy()
    head = Head("head 0", q.numpy(), k.numpy(), v.numpy(), out, np.ones((5, 5), bool), 0.25)
    flag, message = diagnose([head], {"d_head": 16})
    assert flag == "weights:scale" and "1/d_head" in message


# -- exercises, end to end ----------------------------------------------------------------------

def _heads(t, h):
    b, n, w = t.shape
    return t.reshape(b, n, h, w // h).transpose(1, 2)


def gqa_each_token_alone(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    """Each query attends over its own token only (a decoder's cache overwritten at each step
    is named by its own model, lesson 06's replaced_cache)."""
    v = _heads(x @ w_v, num_kv_heads).repeat_interleave(num_heads // num_kv_heads, 1)
    b, h, n, d = v.shape
    return (v.transpose(1, 2).reshape(b, n, h * d)) @ w_o


def prefill_scaled_by_d_model(x, w_q, w_k, w_v, w_o, num_heads, chunk_size):
    q, k, v = (_heads(x @ w, num_heads) for w in (w_q, w_k, w_v))
    n = x.shape[1]
    parts = []
    for start in range(0, n, chunk_size):
        stop = min(start + chunk_size, n)
        mask = torch.ones(stop - start, stop, dtype=torch.bool).tril(start)
        parts.append(F.scaled_dot_product_attention(q[:, :, start:stop], k[:, :, :stop],
                                                    v[:, :, :stop], attn_mask=mask,
                                                    scale=x.shape[-1] ** -0.5))
    out = torch.cat(parts, dim=2)
    b, h, n, d = out.shape
    return out.transpose(1, 2).reshape(b, n, h * d) @ w_o


def gqa_mask_inverted(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    q = _heads(x @ w_q, num_heads)
    k, v = (_heads(x @ w, num_kv_heads).repeat_interleave(num_heads // num_kv_heads, 1)
            for w in (w_k, w_v))
    n = x.shape[1]
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if causal:
        keep = torch.ones(n, n, dtype=torch.bool).tril()
        scores = scores.masked_fill(keep, -math.inf)  # True read as "hide"
    out = torch.softmax(scores, -1).nan_to_num(0.0) @ v
    b, h, _, d = out.shape
    return out.transpose(1, 2).reshape(b, n, h * d) @ w_o


def merge_by_adding(out_a, lse_a, out_b, lse_b):
    return out_a + out_b, torch.logaddexp(lse_a, lse_b)


def softmax_backward_without_leading_p(weights, grad_weights):
    return grad_weights - (grad_weights * weights).sum(-1, keepdim=True)


def rope_angles_integer_exponent(positions, head_dim, base=10000.0):
    if head_dim % 2:
        raise ValueError(f"head_dim={head_dim} is odd")
    i = torch.arange(head_dim // 2)
    return positions[:, None].float() * base ** (-(2 * i // head_dim)).float()[None, :]


def apply_rope_interleaved(x, positions, base=10000.0):
    """Neighbouring pairs, and every frequency 1 (an integer division): two slips at once, which
    no one mistake model reproduces; the pairing is still read back."""
    d = x.shape[-1]
    if d % 2:
        raise ValueError(f"head_dim={d} is odd")
    freqs = base ** (-(torch.arange(0, d, 2) // d)).double()
    angles = positions.double()[:, None] * freqs[None, :]
    x1, x2 = x[..., 0::2].double(), x[..., 1::2].double()
    y = torch.stack([x1 * angles.cos() - x2 * angles.sin(),
                     x1 * angles.sin() + x2 * angles.cos()], dim=-1)
    return y.flatten(-2).to(x.dtype)


@pytest.mark.parametrize("exercise, func, flag, words", [
    ("grouped_query_attention", gqa_each_token_alone, "weights:self_only", "earlier keys"),
    ("chunked_prefill", prefill_scaled_by_d_model, "weights:scale", "1/sqrt(d_model)"),
    ("grouped_query_attention", gqa_mask_inverted, "weights:inverted", "inverted"),
    ("merge_attention_states", merge_by_adding, "readback:added_outputs", "share"),
    ("softmax_backward", softmax_backward_without_leading_p, "readback:no_leading_weights",
     "not multiplied by the weights"),
    ("rope_angles", rope_angles_integer_exponent, "readback:rope_exponent", "integer division"),
    ("apply_rope", apply_rope_interleaved, "readback:rope_pairs", "(2i, 2i + 1)"),
])
def test_a_slip_is_named_from_what_the_output_reads_back(exercise, func, flag, words,
                                                         monkeypatch):
    # the answer key's mutants are tried first (tests/checks/test_mutants.py): off here, so
    # that what is tested is the read-back
    monkeypatch.setattr("mhalib.checks.mutants.mutant_diagnosis", lambda *a, **k: None)
    flags, diagnosis = flagged(exercise, func)
    assert flag in flags and words in diagnosis, diagnosis


# -- counts -------------------------------------------------------------------------------------

def mha_flops_weighted_sum_as_projection(seq_len, d_model):
    n, d = seq_len, d_model
    counts = {"qkv_projections": 6 * n * d * d, "scores": 2 * n * n * d,
              "weighted_sum": 2 * n * d * d, "output_projection": 2 * n * d * d}
    counts["total"] = 8 * n * d * d + 4 * n * n * d
    return counts


def backward_flops_with_softmax_work(seq_len, head_dim, recompute=True):
    return (10 if recompute else 8) * seq_len ** 2 * head_dim + 2 * seq_len ** 2


def backward_flops_causal(seq_len, head_dim, recompute=True):
    return (10 if recompute else 8) * seq_len * (seq_len + 1) // 2 * head_dim


@pytest.mark.parametrize("exercise, func, flag, words", [
    ("mha_flops", mha_flops_weighted_sum_as_projection, "count:ratio",
     "a d_model stands where a seq_len belongs"),
    ("attention_backward_flops", backward_flops_with_softmax_work, "count:term",
     "2 * seq_len^2 too many"),
    ("attention_backward_flops", backward_flops_causal, "count:ratio", "causal triangle"),
])
def test_a_count_is_read_as_the_right_one_with_one_term_changed(exercise, func, flag, words):
    flags, diagnosis = flagged(exercise, func)
    assert flag in flags and words in diagnosis, diagnosis


def crossover_square_root(d_model):
    return math.isqrt(2 * d_model)


def test_a_factor_that_holds_on_one_case_only_is_not_named():
    """isqrt(2 d) is half of 2 d at d_model = 1 only: no 'factor of 2' is claimed."""
    flags, diagnosis = flagged("crossover_seq_len", crossover_square_root)
    assert "form:factor" not in flags and "factor of 2" not in diagnosis, diagnosis


# -- the contract's library and API slips -------------------------------------------------------

def causal_mask_in_torch(n_q, n_k=None):
    n_k = n_q if n_k is None else n_k
    return torch.ones(n_q, n_k, dtype=torch.bool).tril(n_k - n_q)


def repeat_kv_through_numpy(x, n_rep):
    return np.repeat(x.numpy(), n_rep, axis=1)


def merge_heads_with_permute(x):
    b, h, n, d = x.shape
    return x.permute(0, 2, 1, 3).reshape(b, n, h * d)


def softmax_with_torch_keyword(x, axis=-1):
    e = np.exp(x - x.max(axis=axis, keepdim=True))
    return e / e.sum(axis=axis, keepdims=True)


def repeat_kv_by_expand(x, n_rep):
    b, g, n, d = x.shape
    return x.expand(b, g * n_rep, n, d)


def split_heads_asserted(x, num_heads):
    b, n, w = x.shape
    assert w % num_heads == 0
    return x.reshape(b, n, num_heads, w // num_heads).transpose(0, 2, 1, 3)


@pytest.mark.parametrize("exercise, func, flag, words", [
    ("causal_mask", causal_mask_in_torch, "contract:library", "numpy lesson"),
    ("repeat_kv", repeat_kv_through_numpy, "contract:library", "torch lesson"),
    ("merge_heads", merge_heads_with_permute, "raised:torch_on_numpy", "`.permute`"),
    ("softmax", softmax_with_torch_keyword, "raised:torch_keyword_in_numpy", "keepdims="),
    ("repeat_kv", repeat_kv_by_expand, "raised:expand", "size 1"),
    ("split_heads", split_heads_asserted, "mistake:refusal_by_assert", "assert"),
])
def test_library_and_api_slips_are_explained(exercise, func, flag, words):
    flags, diagnosis = flagged(exercise, func)
    assert flag in flags and words in diagnosis, (flags, diagnosis)


def mha_flops_in_numpy_integers(seq_len, d_model):
    n, d = np.int64(seq_len), np.int64(d_model)
    counts = {"qkv_projections": 6 * n * d * d, "scores": 2 * n * n * d,
              "weighted_sum": 2 * n * n * d, "output_projection": 2 * n * d * d}
    counts["total"] = sum(counts.values())
    return counts


def test_numpy_integer_counts_are_refused_though_their_values_are_right():
    flags, diagnosis = flagged("mha_flops", mha_flops_in_numpy_integers)
    assert "contract:plain_int" in flags and "numpy scalar (int64)" in diagnosis, diagnosis


def previous_token_block_mean(weights):
    return weights[:, 1:, :-1].mean(dim=(-2, -1))


def induction_without_last_query(weights, period):
    rows = range(period, 2 * period - 1)
    return torch.stack([weights[:, i, i - period + 1] for i in rows], dim=-1).mean(-1)


def induction_block_in_float32(weights, period):
    """Pairs meant, a block taken (two fancy indexes in a row), averaged in float32."""
    queries = torch.arange(period, 2 * period)
    block = weights[:, queries][:, :, queries - period + 1]
    return block.to(torch.float32).mean(dim=(-2, -1)).to(weights.dtype)


def previous_token_in_float32_without_first(weights):
    keys = torch.arange(1, weights.shape[-1] - 1)
    return weights.float()[:, keys + 1, keys].mean(-1).to(weights.dtype)


@pytest.mark.parametrize("exercise, func, words", [
    ("previous_token_score", previous_token_block_mean, "the whole block of queries 1..5"),
    ("induction_score", induction_without_last_query, "for queries i = 3..4"),
    ("induction_score", induction_block_in_float32, "the whole block of queries 3..5 x keys 1..3"),
    ("previous_token_score", previous_token_in_float32_without_first, "for queries i = 2..5"),
])
def test_a_head_score_says_which_weights_it_averaged(exercise, func, words):
    flags, diagnosis = flagged(exercise, func)
    assert "readback:entries" in flags and words in diagnosis, diagnosis


def test_a_coincidence_in_one_code_is_not_read_as_entries():
    from mhalib.checks.readback_positions import read_positions

    assert read_positions([0.3, 0.7], 6) is None  # no set of entries explains both heads


def _shaped_sets(n: int) -> list[frozenset]:
    """Every diagonal over one run of queries and every block of an n x n weights matrix."""
    found = set()
    for offset in range(1 - n, n):
        for first in range(n):
            for last in range(first, n):
                rows = [i for i in range(first, last + 1) if 0 <= i + offset < n]
                if rows:
                    found.add(frozenset((i, i + offset) for i in rows))
    for top in range(n):
        for bottom in range(top, n):
            for left in range(n):
                for right in range(left, n):
                    found.add(frozenset((i, j) for i in range(top, bottom + 1)
                                        for j in range(left, right + 1)))
    return sorted(found, key=sorted)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32, torch.bfloat16])
def test_a_mean_of_coded_weights_is_read_back_right_or_not_at_all(dtype):
    """Every diagonal and block of the coded case, averaged in float64 (read back exactly),
    in float32 (read back from the digits its rounding keeps) or in bfloat16 (mostly not
    read): never read back as other entries."""
    from mhalib.checks.readback_positions import coded_weights, read_positions

    n = 6
    codes = torch.tensor(coded_weights(n)).reshape(2, n * n)
    read = wrong = 0
    for entries in _shaped_sets(n):
        index = torch.tensor([i * n + j for i, j in sorted(entries)])
        scores = codes[:, index].to(dtype).mean(-1).to(torch.float64)
        got = read_positions([float(s) for s in scores], n)
        read += got == (set(entries), len(entries))
        wrong += got is not None and got != (set(entries), len(entries))
    assert wrong == 0
    total = len(_shaped_sets(n))
    assert read >= {torch.float64: total, torch.float32: total - 10, torch.bfloat16: 0}[dtype]
