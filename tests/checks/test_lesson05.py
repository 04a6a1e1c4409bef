"""Lesson 05 checkers: FLOP and parameter slips are named, every correct style passes."""

from mhalib.checks import get_exercise
from tests.checks import lesson_harness as h
from tests.checks.answers import lesson05 as answers


def test_per_head_n2_terms_are_recognised_for_any_head_count():
    checker = get_exercise("mha_flops")
    case = checker.cases(0, "visible")[0]  # N=1024, d_model=768
    mistake = next(m for m in checker.mistakes() if m.name == "n2_with_d_head")
    right = checker.expected(case)
    for heads in (3, 12, 384):
        wrong = {**right, "scores": right["scores"] // heads}
        assert mistake.detect(checker, case, wrong, {})
    assert not mistake.detect(checker, case, right, {})
    # 7 does not divide d_model; a half is also one term at 1 FLOP per multiply-add; 1 / d_model
    # is d_model left out (heads of width 1)
    for not_heads in (7, 2, 768):
        wrong = {**right, "scores": right["scores"] // not_heads}
        assert not mistake.detect(checker, case, wrong, {})


def test_off_by_one_flop_counts_are_not_accepted():
    verdict = h.verdict_of("mha_flops", lambda seq_len, d_model: {
        **answers.flops_by_formula(seq_len, d_model),
        "total": answers.flops_by_formula(seq_len, d_model)["total"] + 1}, seed=0)
    assert not verdict.passed


def test_hidden_cases_cover_big_models_and_keywords():
    labels = [c.label for c in get_exercise("mha_flops").cases(0, "hidden")]
    assert any("405B" in label for label in labels) and "keyword arguments" in labels


def test_a_float_count_of_the_right_value_is_refused_by_the_contract():
    """The contract wants plain ints: counts made floats (2.0 * d, '/') are rejected with why."""
    verdict = h.verdict_of("mha_flops", answers.flops_floats, seed=0)
    assert not verdict.passed and "plain Python ints" in verdict.diagnosis
