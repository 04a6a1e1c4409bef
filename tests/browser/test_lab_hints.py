"""The hint button in JupyterLab: under a failed check's verdict, each press shows the next hint;
in an assessed release the notebook records it, and the grader reports it from the saved file.
"""

from __future__ import annotations

import shutil

import pytest

from mhalib.hints import ladder
from tests.browser import lab_driver as lab
from tests.browser.grade_saved import grade_saved
from tests.browser.lab_server import REPO, start_lab

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


def press_hint(page, cell, number: int) -> str:
    """Press the hint button under ``cell``'s verdict; return the text of hint ``number``."""
    button = cell.locator(".mhalib-hint-button")
    button.scroll_into_view_if_needed()
    button.click()
    shown = cell.locator(".mhalib-hint-text .jp-OutputArea-output")
    page.wait_for_function("([el, n]) => el.querySelectorAll('.jp-OutputArea-output').length >= n",
                           arg=[cell.locator(".mhalib-hint-text").element_handle(), number],
                           timeout=30_000)
    return shown.nth(number - 1).text_content()


def test_the_hint_button_shows_the_ladder_and_the_notebook_records_it(page, assessed_server,
                                                                      tmp_path, screenshot_dir):
    rungs = ladder("softmax")
    lab.open_notebook(page, assessed_server.page_url(f"/lab/tree/{LESSON}"))
    lab.run_all_cells(page)
    assert lab.error_outputs(page) == []

    cell = lab.code_cell(page, 'check("softmax"')
    lab.bring_into_view(page, cell)
    assert lab.stderr_outputs(cell)[0].strip().startswith("NOT YET")
    button = cell.locator(".mhalib-hint-button")
    assert button.text_content().strip() == f"Show a hint (1 of {len(rungs)})"
    assert "recorded with this notebook" in cell.locator(".mhalib-hint-record").text_content()

    first = press_hint(page, cell, 1)
    assert first.startswith(f"Hint 1 of {len(rungs)} for softmax.")
    assert rungs[0].split("`")[0].strip() in first
    page.wait_for_function("(el) => el.textContent.includes('softmax 1 of')",
                           arg=cell.locator(".mhalib-hint-record").element_handle(),
                           timeout=30_000)
    assert button.text_content().strip() == f"Show a hint (2 of {len(rungs)})"
    second = press_hint(page, cell, 2)
    assert second.startswith(f"Hint 2 of {len(rungs)} for softmax.")
    page.wait_for_function("(el) => el.textContent.includes('softmax 2 of')",
                           arg=cell.locator(".mhalib-hint-record").element_handle(),
                           timeout=30_000)
    lab.bring_into_view(page, cell)
    page.screenshot(path=str(screenshot_dir / "hint_button.png"))
    lab.save(page)

    result = grade_saved(assessed_server.notebook_dir / LESSON, ASSIGNMENT, "ana",
                         tmp_path / "grading")
    assert result["verdicts"]["softmax"]["hints"] == 2
    assert result["verdicts"]["attention"]["hints"] == 0
    assert "Hints taken: 2." in result["feedback"]
    assert page.console_errors == []
