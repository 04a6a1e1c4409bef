"""Lesson 07 checker: online-softmax slips are named, correct variants pass, and an answer that
allocates the whole N_q x N_k score matrix is rejected by its memory, not only by its output."""

import torch

from mhalib.checks import get_exercise
from mhalib.checks.lesson07 import memory_limit
from mhalib.checks.torch_exercise import case_tensors
from mhalib.checks.work import largest_new_tensor
from tests.checks import lesson_harness as h
from tests.checks.answers import lesson07 as answers


def test_scores_glued_from_blocks_are_caught_by_memory():
    h.assert_named("online_softmax_attention", answers.blocks_glued_together,
                   "builds_full_scores")


def test_memory_limit_separates_online_from_naive():
    checker = get_exercise("online_softmax_attention")
    checked = 0
    for case in checker.cases(0, "grading"):
        limit = memory_limit(case)
        if limit is None:
            continue
        args, kwargs = case_tensors(case)
        _, online, _ = largest_new_tensor(answers.online_loop, *args, **kwargs)
        _, naive, shape = largest_new_tensor(answers.naive_full_scores, *args, **kwargs)
        assert online < limit <= naive, (case.label, online, limit, naive, shape)
        checked += 1
    assert checked >= 3


def test_largest_new_tensor_ignores_views_and_inputs():
    x = torch.randn(64, 64)
    _, numel, _ = largest_new_tensor(lambda t: t.T[:, :3].expand(64, 3), x)
    assert numel == 0
    _, numel, shape = largest_new_tensor(lambda t: t @ t, x)
    assert numel == 64 * 64 and shape == [64, 64]
