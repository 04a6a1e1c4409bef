"""Lesson 07 checkers: merge and online-softmax slips are named, correct variants pass, an answer
that allocates the whole N_q x N_k score matrix (in torch or in numpy) is rejected by what the
probe sees, and an output that changes with block_size is caught by a second call."""

import pytest
import torch

from mhalib.checks import get_exercise
from mhalib.checks.lesson07 import alternative_block_size, memory_limit
from mhalib.checks.torch_exercise import case_tensors
from mhalib.checks.work import largest_new_tensor
from tests.checks import lesson_harness as h
from tests.checks.answers import lesson07 as answers


def test_right_values_in_another_dtype_are_rejected_and_said_as_that():
    """The lesson asks for q's dtype back (and out_a's, lse_a's for the merge): round M's
    float32 results for float16 inputs were accepted. The values are right, so no reading of
    them is said."""
    verdict = h.verdict_of("online_softmax_attention", answers.returns_compute_dtype, seed=0)
    assert not verdict.passed and verdict.flags == ["dtype"], verdict.diagnosis
    assert "right values, but returned float32 for float" in verdict.diagnosis

    def merge_in_float32(out_a, lse_a, out_b, lse_b):
        out, lse = answers.merge_logaddexp(out_a.float(), lse_a.float(), out_b.float(),
                                           lse_b.float())
        return out.float(), lse.float()

    verdict = h.verdict_of("merge_attention_states", merge_in_float32, seed=0)
    assert not verdict.passed and verdict.flags == ["dtype"], verdict.diagnosis
    assert "right values, but returned float32/float32 for float" in verdict.diagnosis


def test_a_dtype_slip_beside_a_value_slip_is_said_after_it():
    def top_left_in_float32(q, k, v, block_size=64, causal=False):
        return answers.top_left_mask(q, k, v, block_size, causal).float()

    verdict = h.verdict_of("online_softmax_attention", top_left_in_float32, seed=0)
    assert "mistake:causal_top_left" in verdict.flags and "dtype" in verdict.flags, verdict
    assert verdict.diagnosis.index("top-left") < verdict.diagnosis.index("Also, right values")


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


def test_scores_built_in_numpy_are_refused_by_name():
    verdict = h.verdict_of("online_softmax_attention", answers.numpy_full_scores, seed=4,
                           suite="visible")
    assert not verdict.passed and "mistake:leaves_torch" in verdict.flags
    assert "numpy" in verdict.diagnosis and "could not be seen" in verdict.diagnosis


def test_second_call_puts_all_keys_in_one_block_where_the_case_has_several():
    checker = get_exercise("online_softmax_attention")
    for case in checker.cases(0, "grading"):
        n_k, block = case.args[1].shape[2], case.kwargs.get("block_size", 64)
        assert alternative_block_size(case) == (n_k if block < n_k else None), case.label


def test_an_answer_right_only_for_the_cases_block_sizes_is_named():
    def right_unless_one_block(q, k, v, block_size=64, causal=False):
        if block_size >= k.shape[-2]:  # "one block needs no loop": and no scale either
            return answers.unscaled(q, k, v, block_size, causal)
        return answers.online_loop(q, k, v, block_size, causal)

    verdict = h.verdict_of("online_softmax_attention", right_unless_one_block, seed=0,
                           suite="visible")
    assert not verdict.passed and "mistake:depends_on_block_size" in verdict.flags
    assert "block_size=" in " ".join(verdict.details)


def test_missing_rescale_is_named_by_its_model_on_every_failing_case():
    """Where a mistake model and the block-size symptom both explain a case, the model is
    named; the one-block case (degenerate) is passed without any rescale and not called again
    with other blocks, so the model explains every failing case."""
    verdict = h.verdict_of("online_softmax_attention", answers.no_rescale, seed=0)
    assert "mistake:no_rescale" in verdict.flags
    assert verdict.unexplained_cases == 0 and verdict.other_mistakes == []
    assert not any(d.startswith("block_size larger than N") for d in verdict.details)


def test_merge_rows_with_both_sets_empty_are_named_only_when_the_rest_is_right():
    verdict = h.verdict_of("merge_attention_states", answers.merge_plain_exp, seed=0)
    assert "mistake:no_max_shift" in verdict.flags  # NaN there too, but not only there
    verdict = h.verdict_of("merge_attention_states", answers.merge_unguarded, seed=0,
                           suite="visible")
    assert "mistake:nan_for_empty_rows" in verdict.flags


def test_merge_refuses_a_single_tensor_with_a_clear_message():
    verdict = h.verdict_of("merge_attention_states",
                           lambda *args: answers.merge_logaddexp(*args)[0], seed=0)
    assert not verdict.passed
    assert "return the pair (out, lse)" in verdict.diagnosis


FIRST_CHECK = """
import json, sys, time
import matplotlib, numpy, torch  # what the lesson's import cell loads
from mhalib.checks import check
from tests.checks.answers import lesson06, lesson07
func = {"decode_with_cache": lesson06.decode_preallocated,
        "merge_attention_states": lesson07.merge_logaddexp,
        "online_softmax_attention": lesson07.online_loop}[sys.argv[1]]
cpu = time.process_time()
check(sys.argv[1], func, quiet=True)
print(json.dumps({"cpu": time.process_time() - cpu, "dynamo": "torch._dynamo" in sys.modules}))
"""


def first_check_in_fresh_process(exercise: str) -> dict:
    """CPU seconds of the first visible check in a fresh interpreter, and whether it imported
    torch._dynamo (1.5 s on 2 cores, the old cost of a dispatch mode's first use)."""
    import json
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    done = subprocess.run([sys.executable, "-c", FIRST_CHECK, exercise], cwd=root,
                          capture_output=True, text=True, timeout=120, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("exercise", ["merge_attention_states", "online_softmax_attention"])
def test_first_visible_check_is_instant(exercise):
    """CPU time, not wall time: other work on the machine does not change it much."""
    measured = first_check_in_fresh_process(exercise)
    assert not measured["dynamo"]
    assert measured["cpu"] < 0.8, measured


def test_dlpack_is_an_exit_too():
    import numpy as np

    from mhalib.checks.work import LeftTorch, torch_only

    with torch_only("online_softmax_attention"), pytest.raises(LeftTorch):
        np.from_dlpack(torch.ones(3))
