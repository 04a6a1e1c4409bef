"""Run All on lesson 12's untouched release reaches the last cell in JupyterLab.

As for lesson 02 (test_lab_run_all.py): before anything is written, every test cell shows one
"not written yet" verdict, the demos that run an exercise say so in one line, and the rest
(the three widgets, the FLOP table, the memory table, the training runs that need no exercise,
the quick-check forms) runs without a traceback.
"""

from __future__ import annotations

import pytest

from tests.browser import lab_driver as lab
from tests.browser.lab_server import (
    REPO,
    open_fresh,
    print_log_if_failed,
    shut_down_kernels,
)

pytestmark = [pytest.mark.browser, pytest.mark.xdist_group("jupyterlab")]

LESSON = "12-backward/backward.ipynb"
NOTEBOOKS = REPO / "notebooks"
EXERCISES = ("softmax_backward", "attention_backward", "attention_backward_flops",
             "flash_attention_backward")


@pytest.fixture
def release_server(release_lab, request):
    """The shared JupyterLab on the release (tests/browser/conftest.py)."""
    if not (NOTEBOOKS / LESSON).is_file():
        pytest.fail(f"{NOTEBOOKS / LESSON} is missing: generate the release first")
    yield release_lab
    print_log_if_failed(request, release_lab)
    shut_down_kernels(release_lab)  # not left running beside the tests that follow


def test_run_all_on_the_untouched_lesson_12_reaches_the_last_cell(page, release_server,
                                                                  screenshot_dir):
    open_fresh(page, release_server, LESSON)
    lab.run_all_cells(page)

    assert lab.unrun_cells(page) == []
    last = lab.code_cells(page).last
    assert "[" in last.locator(".jp-InputPrompt").text_content()

    for exercise in EXERCISES:
        cell = lab.code_cell(page, f'check("{exercise}"')
        shown = lab.stderr_outputs(cell)
        assert len(shown) == 1, f"{exercise}: {shown}"
        assert shown[0].strip().startswith("NOT YET") and "not written yet" in shown[0]
        assert "Traceback" not in shown[0] and "CheckFailed" not in shown[0]

    # demos that need an exercise say so, in one line
    for marker, exercise in (("settings = [(7, 7, False)", "attention_backward"),
                             ("for n, block, causal in", "flash_attention_backward")):
        said = lab.output_text(lab.code_cell(page, marker)).strip()
        assert said.startswith(f"This cell runs your `{exercise}`"), said
        assert len(said.splitlines()) == 1, said

    # what needs no exercise runs: the delta identity, the memory table, the leaky run
    assert "rowsum(grad_out * out)" in lab.output_text(lab.code_cell(page, "from_out ="))
    assert "total per layer" in lab.output_text(lab.code_cell(page, "saved_rows(MODELS"))
    assert "floor" in lab.output_text(lab.code_cell(page, "loss_floor(copyable"))
    page.wait_for_function("() => !document.body.textContent.includes('Loading widget')",
                           timeout=60_000)
    assert lab.widget_problems(page) == []
    assert lab.error_outputs(page) == []
    records = page.locator(f"{lab.NOTEBOOK} .mhalib-quiz-record").all_text_contents()
    assert len(records) == 5 and all("No answer recorded yet" in t for t in records), records

    lab.bring_into_view(page, lab.code_cell(page, 'check("flash_attention_backward"'))
    page.screenshot(path=str(screenshot_dir / "run_all_release_12.png"))
    assert page.console_errors == []
