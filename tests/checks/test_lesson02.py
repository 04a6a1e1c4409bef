"""Lesson 02 checkers: head-axis slips are named, every correct style passes, no shortcuts."""

import pytest

from mhalib.checks import exercises_of, get_exercise
from tests.checks import lesson_harness as h
from tests.checks.answers import lesson02 as answers

EXERCISES = exercises_of("02-multi-head")


def test_every_mistake_model_has_a_fixture():
    h.assert_every_mistake_has_a_fixture(answers, EXERCISES)


@pytest.mark.parametrize("mistake", ["no_transpose", "heads_last", "strided_heads"])
def test_split_slips_are_named_in_the_visible_cell(mistake):
    verdict = h.verdict_of("split_heads", answers.WRONG["split_heads"][mistake], 4, "visible")
    assert f"mistake:{mistake}" in verdict.flags


@pytest.mark.parametrize("exercise", EXERCISES)
def test_hidden_cases_include_one_head_and_width_one_heads(exercise):
    labels = [c.label for c in get_exercise(exercise).cases(0, "hidden")]
    assert "one head" in labels and "d_head = 1" in labels and "float32" in labels


def test_right_answers_pass_the_round_trip():
    x = get_exercise("split_heads").cases(0, "visible")[0].args[0]
    for split in answers.RIGHT["split_heads"]:
        for merge in answers.RIGHT["merge_heads"]:
            assert (merge(split(x, 3)) == x).all()
