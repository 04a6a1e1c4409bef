"""Run All on an untouched release notebook reaches the last cell in JupyterLab.

A learner who opens lesson 02 and presses Run > Run All Cells before writing anything must see
the whole lesson: every test cell shows its verdict once (as the cell's one error output, so
nbgrader still scores it 0, but without stopping the cells queued after it), a demo that needs
an unwritten exercise says so in one line, and everything else (pictures, the widget, the
quick-check forms) runs without a traceback.
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

LESSON = "02-multi-head/multi_head_attention.ipynb"
NOTEBOOKS = REPO / "notebooks"
EXERCISES = ("split_heads", "merge_heads", "multi_head_attention")


@pytest.fixture
def release_server(release_lab, request):
    """The shared JupyterLab on the release (tests/browser/conftest.py)."""
    if not (NOTEBOOKS / LESSON).is_file():
        pytest.fail(f"{NOTEBOOKS / LESSON} is missing: generate the release first")
    yield release_lab
    print_log_if_failed(request, release_lab)
    shut_down_kernels(release_lab)  # not left running beside the tests that follow


def test_run_all_on_the_untouched_release_reaches_the_last_cell(page, release_server,
                                                                  screenshot_dir):
    open_fresh(page, release_server, LESSON)
    lab.run_all_cells(page)

    # Nothing was skipped: every code cell ran, the last one included.
    assert lab.unrun_cells(page) == []
    last = lab.code_cells(page).last
    assert "[" in last.locator(".jp-InputPrompt").text_content()

    # Every visible test cell shows one verdict: its report, once, as its only output.
    for exercise in EXERCISES:
        cell = lab.code_cell(page, f'check("{exercise}"')
        shown = lab.stderr_outputs(cell)
        assert len(shown) == 1, f"{exercise}: {shown}"
        report = shown[0]
        assert report.strip().startswith("NOT YET"), report
        assert "not written yet" in report, report
        assert "Traceback" not in report and "CheckFailed" not in report, report
        assert cell.locator(".mhalib-verdict").count() == 0  # no second (HTML) copy above it
        assert lab.output_text(cell).count("not written yet") == 1  # one line, once

    # The demo that runs multi_head_attention says, in one line, that it needs it.
    demo = lab.code_cell(page, "designed_layer()")
    said = lab.output_text(demo).strip()
    assert said.startswith("This cell runs your `multi_head_attention`"), said
    assert len(said.splitlines()) == 1 and lab.stderr_outputs(demo) == [], said

    # What needs no exercise runs: the split picture, the per-head W_O check, the widget.
    assert lab.image_source(lab.code_cell(page, "split_figure(")).startswith("data:image/png")
    assert "max |difference|" in lab.output_text(lab.code_cell(page, "w_o[h * d_head"))
    page.wait_for_function("() => !document.body.textContent.includes('Loading widget')",
                           timeout=30_000)
    assert lab.widget_problems(page) == []

    # No traceback anywhere: the quick checks show their forms, with nothing recorded yet.
    assert lab.error_outputs(page) == []
    forms = page.locator(f"{lab.NOTEBOOK} .mhalib-quiz")
    assert forms.count() >= 1
    records = page.locator(f"{lab.NOTEBOOK} .mhalib-quiz-record").all_text_contents()
    assert records and all("No answer recorded yet" in text for text in records), records

    lab.bring_into_view(page, lab.code_cell(page, 'check("multi_head_attention"'))
    page.screenshot(path=str(screenshot_dir / "run_all_release_02.png"))
    assert page.console_errors == []
