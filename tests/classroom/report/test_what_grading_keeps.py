"""What the grader keeps for class reports (``ItemVerdict.response``): the answer cell of each
exercise and whether it is the stub; the chosen option and the known slip of each quick check.
"""

from __future__ import annotations

import pytest

from mhalib.grading.assignment import load_assignment, nbgrader_meta
from mhalib.grading.plan import Plan
from mhalib.grading.quick_checks import judge_recorded
from mhalib.grading.records import MAX_RESPONSE_CHARS, GradingResult, ItemVerdict
from mhalib.grading.unit import _keep_answers
from mhalib.quiz import get_question
from mhalib.quiz.judge import judge
from mhalib.quiz.keys import instructor_keys, parse_key
from mhalib.quiz.record import Recorded
from tests.checkout import COURSE
from tests.classroom.report.conftest import REPO

KEYS = instructor_keys("01-single-head", COURSE.keys)


@pytest.mark.parametrize("answer, slip, correct", [
    ("d_k", "d_k", False),  # a known slip, as written in the key
    ("math.sqrt(q.shape[0])", "math.sqrt(q.shape[0])", False),
    ("np.sqrt(q.shape[0])", "math.sqrt(q.shape[0])", False),  # the same slip by value
    ("2", None, False),  # wrong, no known slip
    ("np.sqrt(d_k)", None, True),
])
def test_the_judge_names_the_slip(answer, slip, correct):
    question = get_question("qc_scale_divisor")
    feedback = judge(question, parse_key(question, KEYS["qc_scale_divisor"]), answer)
    assert (feedback.correct, feedback.slip) == (correct, slip)


def test_a_quick_check_keeps_the_answer_option_and_slip():
    chosen = judge_recorded("qc_weights_shape", Recorded(
        "qc_weights_shape", "Over the whole (N_k, N_q) array at once", None), "ann", KEYS)
    assert chosen.response == {"answer": "Over the whole (N_k, N_q) array at once",
                               "option": 2, "slip": None}
    slipped = judge_recorded("qc_weights_memory", Recorded(
        "qc_weights_memory", "tokens ** 2 / 2 ** 20", None), "ann", KEYS)
    assert slipped.response == {"answer": "tokens ** 2 / 2 ** 20", "option": None,
                                "slip": "tokens ** 2 / 2 ** 20"}
    assert judge_recorded("qc_weights_memory", None, "ann", KEYS).response == {}


def test_an_exercise_keeps_its_answer_cell_and_whether_it_is_the_stub():
    model = load_assignment("01-single-head", REPO / "tests" / "grading" / "fixtures"
                            / "solutions")[0]
    stub = next(c["source"] for c in model.release["cells"]
                if nbgrader_meta(c).get("grade_id") == "attention")
    long_answer = "def softmax(x, axis=-1):\n" + "    x = x + 0\n" * 1000
    cells = [
        {"cell_type": "code", "source": long_answer, "origin": "learner",
         "metadata": {"nbgrader": {"grade_id": "softmax"}}},
        {"cell_type": "code", "source": stub + "\n", "origin": "learner",
         "metadata": {"nbgrader": {"grade_id": "attention"}}},
    ]
    verdicts = {name: ItemVerdict.failure("exercise", name, f"{name}: wrong")
                for name in ("softmax", "attention")}
    _keep_answers(verdicts, Plan(cells=cells), model)
    assert verdicts["softmax"].response == {"answer": long_answer[:MAX_RESPONSE_CHARS],
                                            "blank": False}
    assert verdicts["attention"].response == {"answer": stub + "\n", "blank": True}

    unread = {"softmax": ItemVerdict.failure("exercise", "softmax", "softmax: no")}
    release_copy = [{**cells[0], "origin": "release"}]  # an unreadable notebook's plan
    _keep_answers(unread, Plan(cells=release_copy), model)
    assert unread["softmax"].response == {}


def test_the_response_survives_the_result_file():
    verdict = ItemVerdict("quick_check", "qc_x", False, 0.0, "no",
                          response={"answer": 1, "option": 1, "slip": None})
    result = GradingResult("ann", "01-single-head", "n.ipynb", 1, {"qc_x": verdict}, {})
    back = GradingResult.from_json_dict(result.to_json_dict())
    assert back.verdicts["qc_x"].response == verdict.response
    old = result.to_json_dict()
    del old["verdicts"]["qc_x"]["response"]  # a result written before responses were kept
    assert GradingResult.from_json_dict(old).verdicts["qc_x"].response == {}
