"""The rubric: the course default covers every exercise, an instructor's file changes it where
it says, and a file that names something unknown is refused with the name."""

from __future__ import annotations

import warnings

import pytest

from mhalib import course
from mhalib.checks.registry import get_exercise
from mhalib.grading.credit import format_points
from mhalib.grading.default_rubric import DEFAULT_RUBRIC
from mhalib.grading.rubric import RubricError, load_rubric, parse_share, rubric_from_table

EXERCISES = [name for lesson in course.LESSONS for name in lesson.exercise_names]


@pytest.mark.parametrize("exercise", EXERCISES)
def test_the_default_rubric_rates_every_exercise_with_known_mistakes(exercise):
    """An unrated mistake earns 0 (the documented default) and is reported; a rated name the
    checker does not know is an error (a renamed or removed mistake model)."""
    rated = set(DEFAULT_RUBRIC[exercise]["mistakes"])
    known = {mistake.name for mistake in get_exercise(exercise).mistakes()}
    assert rated, f"{exercise} has no entry in the default rubric"
    assert rated <= known, f"{exercise}: the checker has no mistake(s) {rated - known}"
    if known - rated:
        warnings.warn(f"{exercise}: mistakes earning the default 0, not yet rated in "
                      f"mhalib/grading/default_rubric.py: {sorted(known - rated)}",
                      stacklevel=1)


def test_the_default_rubric_passes_its_own_validation():
    rubric = rubric_from_table(DEFAULT_RUBRIC, "the course rubric", "default")  # checks names
    assert rubric.mistake_share("attention", "no_scale") == pytest.approx(1 / 3)
    assert rubric.mistake_share("split_heads", "no_transpose") == 0  # a transposed head split
    assert rubric.mistake_share("softmax", "no_max_shift") == 0.5  # overflow-only
    assert rubric.cap_for_unnamed("attention") == 0


def test_an_instructor_file_changes_only_what_it_names(tmp_path):
    path = tmp_path / "rubric.toml"
    path.write_text('unnamed_cap = 0.25\n[attention]\nunnamed_cap = "1/2"\n'
                    '[attention.mistakes]\nno_scale = "1/2"\nswapped_outputs = 1\n')
    rubric = load_rubric(path)
    assert rubric.mistake_share("attention", "no_scale") == 0.5
    assert rubric.mistake_share("attention", "swapped_outputs") == 1.0
    assert rubric.mistake_share("attention", "no_max_shift") == 0.5  # the default's
    assert rubric.cap_for_unnamed("attention") == 0.5
    assert rubric.cap_for_unnamed("softmax") == 0.25


def test_the_example_rubric_of_the_readme_loads():
    from pathlib import Path

    rubric = load_rubric(Path(__file__).resolve().parents[2] / "grading" / "examples"
                         / "rubric.toml")
    assert rubric.mistake_share("attention", "no_scale") == 0.5


@pytest.mark.parametrize("text, message", [
    ("[atention.mistakes]\nno_scale = 0.5\n", "'atention' is not an exercise"),
    ("[attention.mistakes]\nno_scael = 0.5\n", "exercise 'attention' has no mistake 'no_scael'"),
    ("[attention.mistakes]\nno_scale = 1.5\n", "attention.mistakes.no_scale = 1.5"),
    ('[attention.mistakes]\nno_scale = "half"\n', "attention.mistakes.no_scale = 'half'"),
    ("[attention]\npoints = 2\n", "[attention] has unknown key(s) ['points']"),
    ("unnamed_cap = true\n", "unnamed_cap = True"),
    ("[attention\n", "not valid TOML"),
])
def test_a_bad_file_is_refused_with_what_is_wrong(tmp_path, text, message):
    path = tmp_path / "rubric.toml"
    path.write_text(text)
    with pytest.raises(RubricError) as error:
        load_rubric(path)
    assert message in str(error.value) and str(path) in str(error.value)


def test_a_missing_file_is_named(tmp_path):
    with pytest.raises(RubricError, match="rubric=.*nothing.toml"):
        load_rubric(tmp_path / "nothing.toml")


def test_shares_and_points_for_people():
    assert parse_share("1/3", "x") == pytest.approx(1 / 3) and parse_share(0, "x") == 0.0
    assert [format_points(v) for v in (2.1818, 1.0, 0.5, 1 / 3 * 3, 0.0, None)] == [
        "2.18", "1", "0.5", "1", "0", "pending"]


# the slips in how the work is done, which the measured checks look for
METHOD_SLIPS = {"recomputes_prefix", "projects_all_tokens_at_once", "builds_full_scores",
                "builds_n_by_n", "not_chunked", "too_many_products"}


@pytest.mark.parametrize("exercise", [name for name in EXERCISES
                                      if "leaves_torch" in DEFAULT_RUBRIC[name]["mistakes"]])
def test_leaving_torch_never_pays_more_than_a_method_slip(exercise):
    """Moving a method slip into numpy, where the work checks cannot look, must not earn more
    than the slip itself."""
    rubric = rubric_from_table(DEFAULT_RUBRIC, "the course rubric", "default")
    method = METHOD_SLIPS & set(DEFAULT_RUBRIC[exercise]["mistakes"])
    assert method, f"{exercise} prices leaves_torch but no method slip"
    cheapest = min(rubric.mistake_share(exercise, name) for name in method)
    assert rubric.mistake_share(exercise, "leaves_torch") <= cheapest
