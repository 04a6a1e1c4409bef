"""Lesson 01 in JupyterLab, in a real (headless) browser, used the way a new learner uses it.

One journey, one server: ``mhalib lab`` starts JupyterLab on a copy of notebooks/ (so that
autosave cannot touch the release) and the browser opens the address it printed. The learner
writes the two exercises, runs all cells, looks at the heatmap, drags the d_k slider and sees
the plot redrawn, answers each quick-check form (practice mode) wrongly then rightly, breaks
``attention`` and reads the test cell's one verdict, fixes it and presses nbgrader's Validate;
the saved notebook is then graded and every quick check answered in its form has its point.
Screenshots of what the learner sees are kept (see conftest's ``screenshot_dir``).
"""

from __future__ import annotations

import re
import shutil
import textwrap

import pytest

from mhalib.checks import CheckFailed, check
from mhalib.quiz import FillIn, MultipleChoice, get_question
from tests.browser import lab_driver as lab
from tests.browser.grade_saved import grade_saved
from tests.browser.lab_server import REPO, start_lab

# One worker runs every JupyterLab test (under xdist --dist loadgroup), sharing one Chromium.
pytestmark = [pytest.mark.browser, pytest.mark.xdist_group("jupyterlab")]

LESSON = "01-single-head/single_head_attention.ipynb"
NOTEBOOKS = REPO / "notebooks"  # the learner release

# The learner's answers, written here from the contract (not taken from mhalib.reference).
SOFTMAX = textwrap.dedent('''\
    def softmax(x, axis=-1):
        """Softmax along axis; -inf gets weight 0."""
        x = np.asarray(x)
        top = np.max(x, axis=axis, keepdims=True)
        e = np.exp(x - np.where(np.isfinite(top), top, 0))
        return e / np.sum(e, axis=axis, keepdims=True)
    ''')
ATTENTION = textwrap.dedent('''\
    def attention(q, k, v):
        """(out, weights) of scaled dot-product attention."""
        scores = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
        weights = softmax(scores, axis=-1)
        return weights @ v, weights
    ''')
# A classic slip: the scores are not divided by sqrt(d_k).
ATTENTION_UNSCALED = ATTENTION.replace(" / np.sqrt(q.shape[-1])", "")


def expected_diagnosis() -> str:
    """What ``check`` says about the unscaled attention, asked here without a browser."""
    import numpy as np

    namespace = {"np": np}
    exec(SOFTMAX + ATTENTION_UNSCALED, namespace)  # noqa: S102 (the text typed in the browser)
    with pytest.raises(CheckFailed) as failure:
        check("attention", namespace["attention"], quiet=True)
    return str(failure.value)


def keys() -> dict:
    from tests.checkout import keys_of

    return keys_of("01-single-head")


def right_answer(question) -> str:
    """What a learner types (fill-in) or picks (option text) to be right."""
    key = keys()[question.id]
    return key["answer"] if isinstance(question, FillIn) else question.options[key["answer"]]


def wrong_answer(question) -> str:
    if isinstance(question, FillIn):
        return "1.5"  # a constant: right in no scenario of lesson 01's blanks
    right = keys()[question.id]["answer"]
    return question.options[(right + 1) % len(question.options)]


def why_wrong(question) -> str:
    """The start of what a practice form says about ``wrong_answer``."""
    key = keys()[question.id]
    if isinstance(question, FillIn):
        return "your blank is 1.5"
    return key["why_wrong"][(key["answer"] + 1) % len(question.options)][:40]


def quick_check_ids(notebook) -> list[str]:
    """The id of every quick check (``ask("qc_...")``) in ``notebook``, in order."""
    import nbformat

    code = "\n".join(c.source for c in nbformat.read(notebook, as_version=4).cells
                     if c.cell_type == "code")
    return re.findall(r'ask\("(qc_\w+)"\)', code)


@pytest.fixture
def lesson_server(tmp_path, request):
    if not (NOTEBOOKS / LESSON).is_file():
        pytest.fail(f"{NOTEBOOKS / LESSON} is missing: generate the release first")
    shutil.copytree(NOTEBOOKS, tmp_path / "notebooks")
    server = start_lab(REPO, ["--notebook-dir", str(tmp_path / "notebooks")], tmp_path / "jupyter")
    server.notebook_dir = tmp_path / "notebooks"
    yield server
    server.stop()
    if getattr(request.node, "call_failed", False):
        print(f"--- the end of the JupyterLab log ---\n{server.log()[-6000:]}")


def test_learner_journey_through_lesson_01(page, lesson_server, screenshot_dir):
    shot = lambda name: page.screenshot(path=str(screenshot_dir / name))  # noqa: E731

    # The command printed the lesson's own address, token included.
    assert lesson_server.url.split("?")[0].endswith(f"/lab/tree/{LESSON}"), lesson_server.url
    lab.open_notebook(page, lesson_server.url)

    # Write both exercises, then Run > Run All Cells.
    lab.set_source(page, lab.code_cell(page, "def softmax("), SOFTMAX)
    lab.set_source(page, lab.code_cell(page, "def attention("), ATTENTION)
    # The quick checks are read from the release file: JupyterLab draws a long notebook's
    # cells a few at a time, so the page may not hold the last ones yet.
    questions = [get_question(i) for i in quick_check_ids(NOTEBOOKS / LESSON)]
    assert {FillIn, MultipleChoice} <= {type(q) for q in questions}, questions
    lab.run_all_cells(page)
    assert lab.error_outputs(page) == []
    assert lab.unrun_cells(page) == []

    # The visible tests pass; no quick check has an answer yet.
    for exercise in ("softmax", "attention"):
        report = lab.output_text(lab.code_cell(page, f'check("{exercise}"'))
        assert "✔" in report and "passed" in report, f"{exercise} test cell says: {report}"
    for question in questions:
        assert "No answer recorded yet" in lab.recorded_text(page, question.id)

    # Widgets render: nothing stuck on 'Loading widget...', no widget printed as text.
    page.wait_for_function("() => !document.body.textContent.includes('Loading widget')",
                           timeout=30_000)
    assert lab.widget_problems(page) == []

    # The attention heatmap of the toy sentence is on the page.
    heatmap_cell = lab.code_cell(page, "plot_attention(")
    assert lab.image_source(heatmap_cell).startswith("data:image/png")
    lab.bring_into_view(page, heatmap_cell.locator("img"))
    shot("lesson_heatmap.png")

    # Drag the slider: the plot under it is drawn again, differently.
    slider_cell = page.locator(lab.CODE_CELL).filter(has=page.locator(".widget-slider")).first
    old_picture = lab.image_source(slider_cell)
    lab.drag_slider(page, slider_cell.locator(".widget-slider").first, 0.3)
    page.wait_for_function(
        "([cell, old]) => { const img = cell.querySelector('.jp-OutputArea-output img');"
        " return img && img.complete && img.src !== old; }",
        arg=[slider_cell.element_handle(), old_picture], timeout=30_000)
    lab.bring_into_view(page, slider_cell.locator(".jp-OutputArea-output").first)
    shot("widget_slider.png")

    # Quick checks (a practice release): answered once, in the form. A wrong answer is told
    # wrong and why, the right one right; the record under the form follows the last answer.
    for question in questions:
        form = lab.quick_check(page, question.id)
        answer = lab.answer_fill_in if isinstance(question, FillIn) else lab.answer_choice
        wrong = answer(page, form, wrong_answer(question))
        assert wrong.startswith("Not yet"), f"{question.id}, wrong answer: {wrong}"
        assert why_wrong(question) in wrong, wrong
        right = answer(page, form, right_answer(question))
        assert right.startswith("Right"), f"{question.id}, right answer: {right}"
        explanation = keys()[question.id]["explanation"].split("{")[0][:30]
        assert explanation in right, right
        assert "Recorded answer" in lab.recorded_text(page, question.id)
    lab.bring_into_view(page, form)
    shot("quick_check_answered.png")

    # Break attention, rerun it and its visible test: the test cell names the mistake.
    attention_cell = lab.code_cell(page, "def attention(")
    lab.set_source(page, attention_cell, ATTENTION_UNSCALED)
    lab.run_cell(page, attention_cell)
    test_cell = lab.code_cell(page, 'check("attention"')
    lab.run_cell(page, test_cell)
    report = lab.output_text(test_cell)
    assert expected_diagnosis() in report, report
    # One verdict: the report is the cell's only output, shown as its error (which is what
    # nbgrader scores), with no traceback into mhalib and no second copy of the diagnosis.
    shown = lab.stderr_outputs(test_cell)
    assert len(shown) == 1 and shown[0].strip().startswith("NOT YET"), shown
    assert report.count(expected_diagnosis()) == 1, report
    assert "Traceback" not in report and "CheckFailed" not in report, report
    lab.bring_into_view(page, test_cell.locator(".jp-OutputArea-output").first)
    shot("diagnosis.png")

    # Fix it again; nbgrader's Validate button runs the saved notebook afresh: all tests pass.
    lab.set_source(page, attention_cell, ATTENTION)
    lab.run_cell(page, attention_cell)
    said = lab.validate(page)
    assert "passes all the tests" in said, said

    # The instructor grades the saved notebook: every quick check answered in its form has
    # its point, with no second step.
    result = grade_saved(lesson_server.notebook_dir / LESSON, "01-single-head", "lea",
                         lesson_server.notebook_dir.parent / "grading")
    for question in questions:
        verdict = result["verdicts"][question.id]
        assert verdict["passed"] and verdict["points"] == 1, verdict
    assert all(v["passed"] for v in result["verdicts"].values()), result["verdicts"]

    # No extension failed to load or threw along the way.
    assert page.console_errors == []
