"""How a repair is said (mhalib.checks.repairs, mutant_edits), for the slips round L found said
wrongly or not at all; each slip is written here, apart from the catalogue: every place of a slip
made in several, no regrouping that folds numbers, a divisor behind a parenthesis hedged, ``^``
read with Python's precedence, a page count rounded up before its divisor is dropped, a call's
parenthesis closed elsewhere; and a factor read on several cases named by a name they share."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from mhalib.checks.explain import _same_factor_everywhere
from mhalib.checks.registry import get_exercise
from tests.checks.repair_harness import repaired, searching  # noqa: F401 (fixture)

pytestmark = pytest.mark.usefixtures("searching")


def _softmax(s):
    e = np.exp(s - s.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def mha_every_weight_transposed(x, w_q, w_k, w_v, w_o, num_heads):
    batch, n, d_model = x.shape
    if d_model % num_heads:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    d_head = d_model // num_heads
    q = (x @ w_q.T).reshape(batch, n, num_heads, d_head).transpose(0, 2, 1, 3)
    k = (x @ w_k.T).reshape(batch, n, num_heads, d_head).transpose(0, 2, 1, 3)
    v = (x @ w_v.T).reshape(batch, n, num_heads, d_head).transpose(0, 2, 1, 3)
    heads = _softmax(q @ k.transpose(0, 1, 3, 2) / math.sqrt(d_head)) @ v
    return heads.transpose(0, 2, 1, 3).reshape(batch, n, d_model) @ w_o.T


def flops_causal_pairs(seq_len, d_model):
    n, d = seq_len, d_model
    pairs = n * (n + 1) // 2
    return {"qkv_projections": 6 * n * d * d, "scores": 2 * pairs * d,
            "weighted_sum": 2 * n * n * d, "output_projection": 2 * n * d * d,
            "total": 6 * n * d * d + 2 * pairs * d + 2 * n * n * d + 2 * n * d * d}


def crossover_parenthesised_divisor(d_model):
    return 6 * d_model ** 2 // (4 * d_model)


def backward_flops_caret(seq_len, head_dim, recompute=True):
    flops = 8 * seq_len ^ 2 * head_dim
    if recompute:
        flops += 2 * seq_len ^ 2 * head_dim
    return flops


def jacobian_diag_closed_late(p):
    p = np.asarray(p, dtype=np.float64)
    return np.diag(p - np.outer(p, p))


def paged_pages_rounded_down(q, k_pages, v_pages, block_table, seq_lens):
    batch, heads, d = q.shape
    groups, page = k_pages.shape[1], k_pages.shape[2]
    out = torch.zeros_like(q)
    for b in range(batch):
        n = int(seq_lens[b])
        if n == 0:
            continue
        count = n // page
        pages = block_table[b, :count]
        keys = k_pages[pages].permute(1, 0, 2, 3).reshape(groups, -1, d)[:, :n]
        values = v_pages[pages].permute(1, 0, 2, 3).reshape(groups, -1, d)[:, :n]
        for h in range(heads):
            g = h // (heads // groups)
            weights = torch.softmax(keys[g] @ q[b, h] / math.sqrt(d), dim=-1)
            out[b, h] = weights @ values[g]
    return out


def test_a_slip_made_in_four_places_is_said_in_all_four():
    repair, verdict = repaired("multi_head_attention", mha_every_weight_transposed)
    assert repair is not None, verdict.diagnosis
    assert all(f"w_{name}.T" in repair["old"] for name in "qkvo"), repair
    assert len(repair["lines"]) == 4 and "(one per place, in order)" in verdict.diagnosis


def test_no_regrouping_that_folds_two_numbers_is_offered():
    """n * (n + 1) // 2 "regrouped" as n * n + 1 // 2 mends the count only because 1 // 2 is
    0; the reading of the count says the causal triangle instead."""
    repair, verdict = repaired("mha_flops", flops_causal_pairs)
    assert repair is None or "1 // 2" not in repair["new"], repair
    assert "causal triangle" in verdict.diagnosis


def test_a_divisor_behind_a_parenthesis_is_hedged():
    repair, verdict = repaired("crossover_seq_len", crossover_parenthesised_divisor)
    assert repair is not None and "// (3 * d_model)" in repair["new"], repair
    assert "times the right one on every failing case" in verdict.diagnosis
    assert "more than one place" in verdict.diagnosis  # (model-led or repair-led)


def test_a_caret_is_read_with_the_precedence_of_a_power():
    """8 * seq_len ^ 2 * head_dim is (8 * seq_len) ^ (2 * head_dim) in Python: the repair puts
    ** back where the learner meant it, in both places."""
    repair, verdict = repaired("attention_backward_flops", backward_flops_caret)
    assert repair is not None, verdict.diagnosis
    assert "8 * seq_len ** 2 * head_dim" in repair["new"]
    assert "2 * seq_len ** 2 * head_dim" in repair["new"]
    assert "XOR" in verdict.diagnosis


def test_a_call_closed_after_the_operator_is_closed_before_it():
    repair, verdict = repaired("softmax_jacobian", jacobian_diag_closed_late)
    assert repair is not None, verdict.diagnosis
    assert repair["new"] == "np.diag(p) - np.outer(p, p)", repair


def test_a_page_count_is_rounded_up_before_its_divisor_is_dropped():
    """n // page mended as n passes only because a slice clamps; rounded up, it is the fix."""
    repair, verdict = repaired("paged_attention", paged_pages_rounded_down)
    assert repair is not None, verdict.diagnosis
    said = [repair["new"], repair.get("also", {}).get("new")]
    assert "(n + page - 1) // page" in said and "n" not in said, repair
    assert "rounded up" in verdict.diagnosis


def paged_pages_sliced_rounded_down(q, k_pages, v_pages, block_table, seq_lens):
    batch, heads, d = q.shape
    groups, page = k_pages.shape[1], k_pages.shape[2]
    out = torch.zeros_like(q)
    for b in range(batch):
        n = int(seq_lens[b])
        if n == 0:
            continue
        pages = block_table[b, :n // page]
        keys = k_pages[pages].transpose(0, 1).reshape(groups, -1, d)[:, :n]
        values = v_pages[pages].transpose(0, 1).reshape(groups, -1, d)[:, :n]
        scores = keys.repeat_interleave(heads // groups, 0) @ q[b, :, :, None] / math.sqrt(d)
        weights = torch.softmax(scores[..., 0], dim=-1)  # (H, n)
        out[b] = (weights[:, None, :] @ values.repeat_interleave(heads // groups, 0))[:, 0]
    return out


def test_a_repair_that_reads_the_tables_arbitrary_entries_is_not_said():
    """block_table[b, :] for [:n // page] passes every suite case (its stale entries are page
    ids), but the contract leaves those entries arbitrary: the spare cases make them name no
    page, and the next edit of the same place, the count rounded up, is said (round V)."""
    repair, verdict = repaired("paged_attention", paged_pages_sliced_rounded_down)
    assert repair is not None, verdict.diagnosis
    assert repair["new"] == "block_table[b, :(n + page - 1) // page]", repair
    assert "n // page whole pieces of size page" in verdict.diagnosis


def test_the_spare_cases_of_the_paged_table_name_no_page_past_a_sequences_own():
    checker = get_exercise("paged_attention")
    for case in checker.spare_cases(0, "grading"):
        _, k_pages, _, table, seq_lens = case.args
        for row, n in zip(table, seq_lens):
            owned = math.ceil(int(n) / k_pages.shape[2])
            assert (row[:owned] < len(k_pages)).all() and (row[owned:] >= len(k_pages)).all()


class _Case:
    def __init__(self, dtype):
        self.dtype = dtype


def _factor_form(names: str):
    return ("form:factor", f"every value of the output[1] is {names} times the right one")


def test_a_factor_on_several_cases_is_named_by_a_name_they_share():
    shared = [(_Case("float32"), _factor_form("1/4 = 1/sqrt(q.shape[3])")),
              (_Case("float32"), _factor_form("1/sqrt(q.shape[3])"))]
    assert _same_factor_everywhere(shared)
    assert not _same_factor_everywhere([(_Case("float32"), _factor_form("1/4")),
                                        (_Case("float32"), _factor_form("1/2"))])
    half = (_Case("bfloat16"), ("form:values", "close, but not a factor"))
    assert _same_factor_everywhere(shared + [half])  # its rounding may hide the factor
    assert not _same_factor_everywhere(shared + [(_Case("float32"), None)])


def merge_states_a_twice(out_a, lse_a, out_b, lse_b):
    top = torch.maximum(lse_a, lse_b)
    top = torch.where(torch.isfinite(top), top, torch.zeros_like(top))
    wa, wb = torch.exp(lse_a - top), torch.exp(lse_b - top)
    total = wa + wb
    safe = torch.where(total > 0, total, torch.ones_like(total))
    lse = torch.where(total > 0, top + torch.log(safe), torch.full_like(total, float("-inf")))
    out = (wa[..., None] * out_a.double() + wb[..., None] * out_a.double()) / safe[..., None]
    return out.to(out_a.dtype), lse


def test_text_that_stands_twice_on_the_line_is_said_with_its_occurrence():
    """Round Z: `out_a.to(ct)` stood twice on the learner's line and only the second was the
    slip; the change says which one."""
    repair, verdict = repaired("merge_attention_states", merge_states_a_twice)
    assert repair is not None, verdict.diagnosis
    assert repair.get("occurrence") == 2 and repair.get("of") == 2, repair
    assert "(the second of the 2 on that line)" in verdict.diagnosis, verdict.diagnosis
