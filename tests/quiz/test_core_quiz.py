"""The quick-check machinery: answers judged by meaning, hostile expressions refused, helpful
messages for malformed ones, per-learner numbers, the record saved with the notebook, and the
form in practice and assessed mode."""

from __future__ import annotations

import json

import numpy as np
import pytest

from mhalib.classroom.release import release_data
from mhalib.quiz import QuickCheckNotScoredHere, ask, get_question
from mhalib.quiz import session as quiz_session
from mhalib.quiz.expression import ExpressionError, evaluate
from mhalib.quiz.judge import judge
from mhalib.quiz.keys import RELEASE_FILE, BadKeys, parse_key
from mhalib.quiz.record import MIME, bundle, parse, recorded_answers, with_answers
from mhalib.quiz.variant import for_student, known_student, rng_for
from tests.checkout import COURSE, keys_of

ASSIGNMENT = "01-single-head"


def key_of(qid):
    return parse_key(get_question(qid), keys_of(ASSIGNMENT)[qid])


@pytest.mark.parametrize("answer", ["np.sqrt(d_k)", "d_k ** 0.5", "math.sqrt(q.shape[-1])",
                                    "sqrt(k.shape[1])", "q.shape[-1]**(1/2)", "np.sqrt(d_k) * 1"])
def test_equivalent_expressions_are_accepted(answer):
    assert judge(get_question("qc_scale_divisor"), key_of("qc_scale_divisor"), answer).correct


@pytest.mark.parametrize("answer", ["d_k", "np.sqrt(q.shape[0])", "2", "d_k / 2"])
def test_wrong_expressions_are_rejected(answer):
    assert not judge(get_question("qc_scale_divisor"), key_of("qc_scale_divisor"),
                     answer).correct


@pytest.mark.parametrize("answer,says", [
    ("sqrt(dk)", "'dk' is not defined here"),
    ("np.sqrt(d_k", "was never closed"),
    ("d_k ** ", "is not a Python expression"),
    ("[d for d in q]", "is not allowed in an answer"),
    ("q.__class__", "not allowed in an answer"),
    ("", "No answer was recorded"),
])
def test_malformed_expressions_get_a_message_not_a_traceback(answer, says):
    feedback = judge(get_question("qc_scale_divisor"), key_of("qc_scale_divisor"), answer)
    assert not feedback.correct and says in feedback.message
    assert "You may use: d_k" in feedback.message or not answer
    assert "Traceback" not in feedback.message


@pytest.mark.parametrize("text", ["__import__('os').system('true')", "open('/etc/passwd')",
                                  "np.save('x', q)", "q.__class__", "[x for x in q]",
                                  "lambda: 1", "(d_k := 3)", "np.lib.format"])
def test_hostile_expressions_are_refused(text):
    with pytest.raises(ExpressionError):
        evaluate(text, {"q": 1, "d_k": 4})


def test_power_towers_do_not_hang():
    assert evaluate("9 ** 9 ** 9 ** 9", {}) == float("inf")


def test_methods_that_import_lazily_still_evaluate():
    value = evaluate("x.max(axis=-1, keepdims=True)", {"x": np.arange(6.0).reshape(2, 3)})
    assert value.tolist() == [[2.0], [5.0]]


def test_multiple_choice_is_judged_by_canonical_index_or_text():
    question, key = get_question("qc_weights_shape"), key_of("qc_weights_shape")
    assert judge(question, key, key.answer).correct
    assert judge(question, key, question.options[key.answer].upper()).correct
    wrong = (key.answer + 1) % len(question.options)
    feedback = judge(question, key, wrong, reveal=True)
    assert not feedback.correct and key.why_wrong[wrong] in feedback.message
    assert question.options[key.answer] in feedback.message  # revealed in returned feedback
    assert question.options[key.answer] not in judge(question, key, wrong).message
    assert not judge(question, key, "z").correct and not judge(question, key, True).correct


def test_options_are_shuffled_per_learner_and_stable():
    question = get_question("qc_weights_shape")
    orders = {tuple(question.order(rng_for(f"student:s{i}", question.id))) for i in range(30)}
    assert len(orders) > 5
    assert question.order(rng_for("student:ann", question.id)) == \
        question.order(rng_for("student:ann", question.id))
    for order in orders:
        assert sorted(order) == list(range(len(question.options)))


def test_variant_comes_from_the_student_id_when_known(monkeypatch):
    monkeypatch.delenv("MHALIB_STUDENT_ID", raising=False)
    monkeypatch.setenv("JUPYTERHUB_USER", "ann")
    assert known_student() == "ann"
    monkeypatch.setenv("MHALIB_STUDENT_ID", "s1234")
    assert known_student() == "s1234"
    with pytest.raises(ValueError, match="student_id="):
        for_student("bad id; rm")
    with pytest.raises(ValueError, match="variant="):
        rng_for("someone", "qc_weights_shape")


@pytest.mark.parametrize("data", [None, [], {"question": 3}, {"question": "qc_x", "answer": [1]},
                                  {"question": "qc_x", "answer": True},
                                  {"question": "qc_x", "answer": {"$gt": ""}}])
def test_malformed_records_are_ignored(data):
    assert parse(data) is None


def test_record_keeps_answer_and_variant_but_not_a_bad_variant():
    assert parse(bundle("qc_x", "d_k", "seed:12")[MIME]).variant == "seed:12"
    assert parse({"question": "qc_x", "answer": "1", "variant": "../etc"}).variant is None
    assert len(parse({"question": "qc_x", "answer": "1" * 10_000}).answer) == 500


def test_records_count_only_in_their_own_cell():
    notebook = {"cells": [
        {"cell_type": "code", "metadata": {"nbgrader": {"grade_id": "qc_a"}}, "outputs": []},
        {"cell_type": "code", "metadata": {"nbgrader": {"grade_id": "other"}}, "outputs": [
            {"output_type": "display_data", "data": bundle("qc_a", "1", None)}]}]}
    assert recorded_answers(notebook, ["qc_a"]) == {}
    filled = with_answers(notebook, {"qc_a": "2"}, "seed:5")
    assert recorded_answers(filled, ["qc_a"])["qc_a"].answer == "2"


@pytest.fixture
def lesson_folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("NBGRADER_EXECUTION", raising=False)
    monkeypatch.delenv("JPY_SESSION_NAME", raising=False)
    monkeypatch.delenv("MHALIB_QUICK_CHECK_KEYS", raising=False)
    monkeypatch.setenv("MHALIB_STUDENT_ID", "ann")
    monkeypatch.setattr(quiz_session, "_SESSION", None)
    return tmp_path


def _release(folder, mode):
    (folder / RELEASE_FILE).write_text(json.dumps(release_data(ASSIGNMENT, mode, COURSE.keys)))
    quiz_session._SESSION = None


def _pick(form, index):
    form.answer.value = form.answer.options[form.order.index(index)]


def test_practice_form_says_right_or_wrong_and_records(lesson_folder):
    _release(lesson_folder, "practice")
    form = ask("qc_weights_shape")
    right = key_of("qc_weights_shape").answer
    _pick(form, (right + 1) % 4)
    form.check()
    assert "Not yet" in form.feedback.value
    _pick(form, right)
    form.check()
    assert "Right" in form.feedback.value and form.button.description == "Check"
    data = form.record_bundle()[MIME]
    assert data == {"question": "qc_weights_shape", "answer": right, "variant": "student:ann",
                    "version": 1}


def test_assessed_form_only_records(lesson_folder):
    _release(lesson_folder, "assessed")
    form = ask("qc_scale_divisor")
    assert form.key is None and form.button.description == "Record answer"
    form.answer.value = "d_k"  # wrong, and the form must not say so
    form.check()
    assert "Recorded" in form.feedback.value
    assert "Not" not in form.feedback.value and "Right" not in form.feedback.value
    assert form.record_bundle()[MIME]["answer"] == "d_k"


def test_no_release_file_means_record_only(lesson_folder):
    assert ask("qc_scale_divisor").key is None


def test_a_rerun_or_a_restart_keeps_the_answer(lesson_folder, monkeypatch):
    _release(lesson_folder, "practice")
    form = ask("qc_scale_divisor")
    form.answer.value = "d_k ** 0.5"
    form.check()
    assert ask("qc_scale_divisor").answer.value == "d_k ** 0.5"  # same kernel, re-run
    notebook = {"cells": [{"cell_type": "code", "metadata": {"nbgrader": {
        "grade_id": "qc_scale_divisor"}}, "outputs": [{"output_type": "display_data",
                                                        "data": form.record_bundle()}]}]}
    (lesson_folder / "lesson.ipynb").write_text(json.dumps(notebook))
    monkeypatch.setenv("JPY_SESSION_NAME", "course/lesson.ipynb")
    quiz_session._SESSION = None  # a new kernel: the saved notebook has the answer
    assert ask("qc_scale_divisor").answer.value == "d_k ** 0.5"


def test_without_a_student_id_the_seed_is_kept_in_the_notebook(lesson_folder, monkeypatch):
    monkeypatch.delenv("MHALIB_STUDENT_ID")
    monkeypatch.delenv("JUPYTERHUB_USER", raising=False)
    form = ask("qc_scale_divisor")
    assert form.variant.startswith("seed:")
    form.answer.value = "1"
    form.check()
    notebook = with_answers({"cells": [{"cell_type": "code", "metadata": {"nbgrader": {
        "grade_id": "qc_scale_divisor"}}, "outputs": []}]}, {"qc_scale_divisor": "1"},
        form.variant)
    (lesson_folder / "lesson.ipynb").write_text(json.dumps(notebook))
    monkeypatch.setenv("JPY_SESSION_NAME", "lesson.ipynb")
    quiz_session._SESSION = None
    assert ask("qc_weights_shape").variant == form.variant


def test_nbgrader_autograde_without_the_course_preprocessors_gives_nothing(lesson_folder,
                                                                          monkeypatch):
    monkeypatch.setenv("NBGRADER_EXECUTION", "autograde")
    with pytest.raises(QuickCheckNotScoredHere, match="nbgrader_config.py"):
        ask("qc_scale_divisor")
    monkeypatch.setenv("NBGRADER_EXECUTION", "validate")
    assert ask("qc_scale_divisor") is None


def test_unknown_ids_and_bad_keys_are_refused():
    with pytest.raises(ValueError, match="must start with 'qc_'"):
        get_question("scale")
    with pytest.raises(ValueError, match="not a known quick check"):
        get_question("qc_does_not_exist")
    question = get_question("qc_weights_shape")
    with pytest.raises(BadKeys, match="why_wrong has no explanation"):
        parse_key(question, {"answer": 0, "explanation": "x", "why_wrong": {1: "y"}})
    with pytest.raises(BadKeys, match="not an option index"):
        parse_key(question, {"answer": 9, "explanation": "x"})
    with pytest.raises(ValueError, match="mode="):
        release_data(ASSIGNMENT, "exam", COURSE.keys)


@pytest.mark.parametrize("text,says", [
    ("'a' * 300000000", "is not a number"),
    ("b'a' * 300000000", "is not a number"),
    ("(1,) * 100000000", "numbers only, got tuple"),
    ("[1] * 100000000", "numbers only, got list"),
    ("q.shape * 100000000", "numbers only, got tuple"),
    ("-q.shape", "numbers only, got tuple"),
    ("q.shape", "must be a number, got tuple"),
    ("None", "is not a number"),
    ("True + d_k", "numbers only, got bool"),
    ("np.float64", "must be a number"),
])
def test_answers_are_numbers_only_and_bounded(text, says):
    """A short answer cannot make the grader build a huge string, bytes or tuple: constants are
    numbers, operators act on numbers, the result is a number."""
    q = np.zeros((2, 3))
    with pytest.raises(ExpressionError, match=says.replace("(", r"\(")):
        evaluate(text, {"d_k": 64, "q": q})


def test_an_operator_on_a_huge_array_is_refused():
    big = np.zeros(2_000_000)
    with pytest.raises(ExpressionError, match="too large"):
        evaluate("x * 2", {"x": big})
    assert evaluate("np.sum(x) + 1", {"x": big}) == 1


def test_a_tuple_may_index_and_shapes_still_count():
    q = np.arange(6.0).reshape(2, 3)
    assert evaluate("q[1, 2] + q.shape[-1]", {"q": q}) == 8
    assert evaluate("np.prod(q.shape) * 2", {"q": q}) == 12
    assert evaluate("np.max((q[0, 0], 4)) + np.min([1, 2])", {"q": q}) == 5


def test_an_evaluation_past_the_time_limit_stops(monkeypatch):
    import mhalib.quiz.expression as expression

    monkeypatch.setattr(expression, "TIME_LIMIT", 0.05)

    def slow(x):
        import time
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            pass
        return x

    with pytest.raises(ExpressionError, match="more than 0.05 s"):
        evaluate("slow(1)", {"slow": slow})
