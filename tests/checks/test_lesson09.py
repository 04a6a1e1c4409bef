"""Lesson 09 checker: the Symptoms (an odd head_dim accepted, a changed dtype, angles computed in
half precision) are named from what they really show, an odd head_dim must raise ValueError and
nothing else, and the visible checks answer within a second."""

import subprocess
import sys

import numpy as np
import torch

from mhalib.checks import get_exercise
from mhalib.checks.lesson09 import RAISED, angles_variant, rope_variant
from tests.checks import lesson_harness as h
from tests.checks.answers import lesson09 as answers


def test_every_mistake_model_has_a_learner_style_fixture():
    h.assert_every_mistake_has_a_fixture(answers, ["rope_angles", "apply_rope"])


def test_odd_head_dim_must_raise_value_error_not_another_error():
    def type_error(positions, head_dim, base=10000.0):
        if head_dim % 2:
            raise TypeError("odd")
        return answers.angles_loop(positions, head_dim, base)

    verdict = h.verdict_of("rope_angles", type_error, seed=0)
    assert not verdict.passed and "error" in verdict.flags
    assert "TypeError" in verdict.diagnosis
    h.assert_named("rope_angles", answers.angles_no_odd_check, "odd_head_dim_accepted")


def test_a_value_error_on_an_even_head_dim_is_an_error_not_a_pass():
    def always_raises(positions, head_dim, base=10000.0):
        raise ValueError("no")

    verdict = h.verdict_of("rope_angles", always_raises, seed=0)
    assert not verdict.passed and verdict.cases_passed == 1  # only the odd case


def test_dtype_is_judged_after_the_values():
    verdict = h.verdict_of("apply_rope", answers.rope_promotes_dtype, seed=0)
    assert verdict.flags == ["mistake:dtype_changed"]
    assert any("returned float32 for bfloat16 input" in d for d in verdict.details)
    assert all(("float16" in d) for d in verdict.details)  # float32/float64 cases pass
    assert not h.verdict_of("apply_rope", answers.rope_promotes_dtype, 0, "visible").passed


def test_low_precision_symptom_needs_both_small_and_large_positions():
    checker = get_exercise("apply_rope")
    symptom = next(m for m in checker.mistakes() if m.name == "angles_in_low_precision")
    cases = {c.label: c for c in checker.cases(0, "grading")}
    packed = cases["bfloat16, packed: positions 2000..2007 then 3..10"]
    from mhalib.checks.torch_exercise import case_tensors
    args, _ = case_tensors(packed)
    low = answers.rope_all_in_x_dtype(*args).float().numpy()
    assert symptom.detect(checker, packed, low, {})
    # ignoring the positions is wrong on the small rows too (3..10 are not 8..15): not this
    arange = answers.rope_arange(*args).float().numpy()
    assert not symptom.detect(checker, packed, arange, {})
    # a float32 case never shows it
    plain = cases["x (1, 2, 6, 8) at positions 0..5"]
    args, _ = case_tensors(plain)
    assert not symptom.detect(checker, plain, answers.rope_all_in_x_dtype(*args).numpy(), {})


def test_variants_with_default_knobs_are_the_contract():
    positions = torch.tensor([0, 5, 1000])
    x = torch.randn(2, 3, 8, dtype=torch.float64)
    angles = angles_variant(positions, 8, 100.0)
    torch.testing.assert_close(angles[:, 1], positions.double() * 100.0 ** (-2 / 8))
    torch.testing.assert_close(rope_variant(x, positions, 100.0),
                               answers.rope_loop(x, positions, 100.0))


def test_adjacent_layout_is_the_half_layout_after_a_feature_permutation():
    """The two layouts differ only by which features form a pair: permuting the features
    (evens first, then odds) turns one into the other."""
    x = torch.randn(3, 5, 12, dtype=torch.float64)
    positions = torch.arange(7, 12)
    perm = torch.cat([torch.arange(0, 12, 2), torch.arange(1, 12, 2)])
    adjacent = rope_variant(x, positions, layout="adjacent")
    torch.testing.assert_close(adjacent[..., perm], rope_variant(x[..., perm], positions))


def test_raised_marker_is_what_the_probe_records():
    checker = get_exercise("rope_angles")
    odd = next(c for c in checker.cases(0, "hidden") if c.expects_error)
    output, meta = checker.call(answers.angles_loop, odd)
    assert output == RAISED and meta["output_kind"] == "raised"
    assert checker.judge_case(odd, RAISED, meta) is None
    assert "raise ValueError" in checker.judge_case(odd, np.zeros((4, 3)), {})


def test_visible_checks_answer_within_a_second_in_a_fresh_process():
    code = (
        "import time, torch\n"
        "from tests.checks.answers import lesson09 as a\n"
        "from mhalib.checks import check\n"
        "for name, f in (('rope_angles', a.angles_exp_log), ('apply_rope', a.rope_hf_style)):\n"
        "    t = time.perf_counter(); check(name, f, quiet=True)\n"
        "    print(name, time.perf_counter() - t)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    for line in out.splitlines():
        name, seconds = line.split()
        assert float(seconds) < 1.0, (name, seconds)
