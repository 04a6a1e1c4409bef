"""An assessed release in JupyterLab: the learner answers in the form, which only records; the
instructor grades the saved notebook and the feedback carries the verdicts and explanations.

The release is made by ``mhalib release --quick-checks assessed`` into a scratch folder: its
``quick_checks.json`` names the mode and holds no key, so the learner's kernel cannot judge.
"""

from __future__ import annotations

import html
import json
import shutil

import pytest

from mhalib.quiz import FillIn, MultipleChoice, get_question
from tests.browser import lab_driver as lab
from tests.browser.grade_saved import grade_saved
from tests.browser.lab_server import REPO, start_lab
from tests.checkout import keys_of

pytestmark = [pytest.mark.browser, pytest.mark.xdist_group("jupyterlab")]

ASSIGNMENT = "01-single-head"
LESSON = f"{ASSIGNMENT}/single_head_attention.ipynb"


@pytest.fixture
def assessed_server(tmp_path, request, assessed_release_01):
    release = tmp_path / "release"  # a copy of ``mhalib release --quick-checks assessed``'s
    shutil.copytree(assessed_release_01, release)
    server = start_lab(REPO, ["--notebook-dir", str(release)], tmp_path / "jupyter")
    server.notebook_dir = release
    yield server
    server.stop()
    if getattr(request.node, "call_failed", False):
        print(f"--- the end of the JupyterLab log ---\n{server.log()[-6000:]}")


def test_assessed_quick_checks_record_then_feedback_explains(page, assessed_server, tmp_path):
    data = json.loads((assessed_server.notebook_dir / ASSIGNMENT / "quick_checks.json").read_text())
    assert data == {"assignment": ASSIGNMENT, "mode": "assessed"}
    keys = keys_of(ASSIGNMENT)
    questions = [get_question(qid) for qid in keys]
    fill_in = next(q for q in questions if isinstance(q, FillIn))
    choice = next(q for q in questions if isinstance(q, MultipleChoice))
    wrong_index = (keys[choice.id]["answer"] + 1) % len(choice.options)

    lab.open_notebook(page, assessed_server.page_url(f"/lab/tree/{LESSON}"))
    lab.run_all_cells(page)
    assert lab.error_outputs(page) == []

    # The form only records: no right/wrong, whatever the answer.
    form = lab.quick_check(page, fill_in.id)
    assert form.locator(".mhalib-quiz-check").text_content().strip() == "Record answer"
    said = lab.answer_fill_in(page, form, keys[fill_in.id]["answer"])
    assert said.startswith("Recorded") and "Right" not in said, said
    form = lab.quick_check(page, choice.id)
    said = lab.answer_choice(page, form, choice.options[wrong_index])
    assert said.startswith("Recorded") and "Not" not in said, said
    assert choice.options[wrong_index] in lab.recorded_text(page, choice.id)
    lab.save(page)

    # Graded from the saved file: the point where it was right, the explanation where not.
    result = grade_saved(assessed_server.notebook_dir / LESSON, ASSIGNMENT, "ana",
                         tmp_path / "grading")
    right, wrong = result["verdicts"][fill_in.id], result["verdicts"][choice.id]
    assert right["passed"] and right["points"] == 1, right
    assert not wrong["passed"] and wrong["points"] == 0, wrong
    why = keys[choice.id]["why_wrong"][wrong_index]
    assert why in wrong["diagnosis"] and keys[choice.id]["explanation"] in wrong["diagnosis"]
    assert html.escape(why[:40]) in result["feedback"] or why[:40] in result["feedback"]
    assert page.console_errors == []
