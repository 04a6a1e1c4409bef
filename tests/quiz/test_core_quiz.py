"""Quick checks: answers judged by meaning, hostile expressions refused, keys not in plain text."""

import json
from pathlib import Path

import pytest

from mhalib.quiz import QuickCheckWrong, ask, get_question, grade, option_digest
from mhalib.quiz.expression import ExpressionError, evaluate

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("answer", ["np.sqrt(d_k)", "d_k ** 0.5", "math.sqrt(q.shape[-1])",
                                    "sqrt(k.shape[1])", "q.shape[-1]**(1/2)", "np.sqrt(d_k) * 1"])
def test_equivalent_divisors_are_accepted(answer):
    assert grade("qc_scale_divisor", answer)


@pytest.mark.parametrize("answer", ["d_k", "np.sqrt(q.shape[0])", "2", "", "d_k / 2"])
def test_wrong_divisors_are_rejected(answer):
    with pytest.raises(QuickCheckWrong):
        grade("qc_scale_divisor", answer)


@pytest.mark.parametrize("text", ["__import__('os').system('true')", "open('/etc/passwd')",
                                  "np.save('x', q)", "q.__class__", "[x for x in q]",
                                  "lambda: 1", "(d_k := 3)", "np.lib.format"])
def test_hostile_expressions_are_refused(text):
    with pytest.raises(ExpressionError):
        evaluate(text, {"q": 1, "d_k": 4})


def test_power_towers_do_not_hang():
    value = evaluate("9 ** 9 ** 9 ** 9", {})
    assert value == float("inf")


def test_multiple_choice_accepts_letter_index_or_text():
    question = get_question("qc_weights_shape")
    right = next(i for i in range(len(question.options))
                 if option_digest(question.id, i) == question.key)
    for answer in ("abcdefgh"[right], right, question.options[right]):
        assert question.judge(answer).correct
    wrong = (right + 1) % len(question.options)
    assert not question.judge(wrong).correct
    assert not question.judge("z").correct


def test_widget_gives_feedback_when_checked():
    form = ask("qc_scale_divisor")
    form.answer.value = "d_k"
    form.check(None)
    assert "Not yet" in form.feedback.value
    form.answer.value = "d_k ** 0.5"
    form.check(None)
    assert "Right" in form.feedback.value and "qc_scale_divisor = " in form.feedback.value


def test_unknown_question_ids_are_refused():
    with pytest.raises(ValueError, match="must start with 'qc_'"):
        get_question("scale")
    with pytest.raises(ValueError, match="not a known quick check"):
        get_question("qc_does_not_exist")


def test_release_notebooks_do_not_contain_the_answer_keys():
    release = list((REPO / "notebooks").rglob("*.ipynb"))
    text = "\n".join(p.read_text(encoding="utf-8") for p in release)
    for path in release:
        for cell in json.loads(path.read_text(encoding="utf-8"))["cells"]:
            grade_id = cell.get("metadata", {}).get("nbgrader", {}).get("grade_id", "")
            if grade_id.startswith("qc_") and cell["metadata"]["nbgrader"].get("solution"):
                assert "BEGIN SOLUTION" not in "".join(cell["source"])
    for example in get_question("qc_scale_divisor").examples:
        assert f'qc_scale_divisor = "{example}"' not in text
