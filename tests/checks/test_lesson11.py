"""Lesson 11 checkers: chunked prefill that builds N x N scores in torch or in numpy is rejected
and named; the memory threshold separates chunked from full answers; paged cases hide large stale
values in every slot a sequence does not own, with block tables out of sorted order."""

import math
import time

import numpy as np
import pytest

from mhalib.checks import check, get_exercise
from mhalib.checks.lesson11 import STALE, n_by_n_limit
from mhalib.checks.torch_exercise import case_tensors
from mhalib.checks.work import largest_new_tensor
from tests.checks import lesson_harness as h
from tests.checks.answers import lesson11 as answers


def test_every_mistake_model_has_a_fixture():
    h.assert_every_mistake_has_a_fixture(answers, ["decode_attention_intensity",
                                                   "paged_attention", "chunked_prefill"])


@pytest.mark.parametrize("func", [answers.prefill_full_scores_torch,
                                  answers.prefill_full_mask_per_head],
                         ids=["batched_scores", "one_head_at_a_time"])
def test_n_by_n_scores_in_torch_are_rejected_by_memory(func):
    h.assert_named("chunked_prefill", func, "builds_n_by_n")
    verdict = h.verdict_of("chunked_prefill", func, seed=0)
    assert "right output, but it allocated a tensor" in " ".join(verdict.details)


def test_n_by_n_scores_in_numpy_are_rejected_and_named():
    h.assert_named("chunked_prefill", answers.prefill_full_scores_numpy, "leaves_torch")
    verdict = h.verdict_of("chunked_prefill", answers.prefill_full_scores_numpy, seed=0)
    assert verdict.score == 0.0  # every case left torch


def test_one_fused_sdpa_call_over_the_whole_prompt_is_not_chunked():
    h.assert_named("chunked_prefill", answers.prefill_whole_sdpa, "not_chunked")
    verdict = h.verdict_of("chunked_prefill", answers.prefill_whole_sdpa, seed=0)
    assert any("queries at once" in d for d in verdict.details)
    h.assert_accepted("chunked_prefill", answers.prefill_sdpa_with_mask)  # SDPA per chunk


def test_memory_limit_separates_chunked_from_full_scores():
    checker = get_exercise("chunked_prefill")
    checked = 0
    for case in checker.cases(0, "grading"):
        limit = n_by_n_limit(case)
        if limit is None:
            continue
        args, kwargs = case_tensors(case)
        for right in answers.RIGHT["chunked_prefill"]:
            _, numel, shape = largest_new_tensor(right, *args, **kwargs)
            assert numel < limit, (case.label, right.__name__, shape)
        _, full, _ = largest_new_tensor(answers.prefill_full_scores_torch, *args, **kwargs)
        assert full >= limit
        checked += 1
    assert checked >= 3
    assert any(n_by_n_limit(c) for c in checker.cases(0, "visible"))


def test_a_shorter_output_is_recognised_as_the_dropped_last_chunk():
    verdict = h.verdict_of("chunked_prefill", answers.prefill_skips_tail, seed=0)
    assert "mistake:drops_last_partial_chunk" in verdict.flags
    assert any("got shape" in d for d in verdict.details)


def test_paged_cases_hide_stale_values_in_unowned_slots_and_shuffle_pages():
    checker = get_exercise("paged_attention")
    unsorted = 0
    for case in checker.cases(0, "grading"):
        q, k_pages, v_pages, table, lens = case.args
        page_size = k_pages.shape[2]
        owned_slots = set()
        for b, n in enumerate(lens):
            pages = table[b, :math.ceil(n / page_size)]
            unsorted += len(pages) > 1 and not np.all(np.diff(pages) > 0)
            owned_slots |= {(int(pages[t // page_size]), t % page_size) for t in range(n)}
        stale = [np.abs(k_pages[p, :, s]).max() for p in range(k_pages.shape[0])
                 for s in range(page_size) if (p, s) not in owned_slots]
        assert stale and max(stale) > STALE / 2  # garbage is there, and large
        owned = [np.abs(k_pages[p, :, s]).max() for p, s in owned_slots]
        assert not owned or max(owned) < 6
        assert np.isfinite(k_pages).all() and np.isfinite(v_pages).all()  # no NaN garbage
    assert unsorted >= 5


@pytest.mark.parametrize("exercise", ["decode_attention_intensity", "paged_attention",
                                      "chunked_prefill"])
def test_visible_check_answers_within_a_second(exercise):
    right = answers.RIGHT[exercise][0]
    start = time.perf_counter()
    verdict = check(exercise, right, quiet=True)
    assert verdict.passed and time.perf_counter() - start < 1.0


def test_attention_call_watch_sees_each_fused_call_and_nothing_else():
    import torch
    import torch.nn.functional as F

    from mhalib.checks.work import watch_attention_calls

    q, k = torch.randn(1, 2, 5, 8), torch.randn(1, 2, 9, 8)

    def two_calls():
        F.scaled_dot_product_attention(q, k, k)
        F.scaled_dot_product_attention(q[:, :, :3], k, k, attn_mask=torch.ones(3, 9).bool())
        return q @ k.transpose(-2, -1)  # a plain product is not a fused attention call

    _, watch = watch_attention_calls(two_calls)
    assert watch.queries == [5, 3]
