"""Run All on every untouched release, in JupyterLab: no traceback anywhere, not even inside a
widget.

A learner who opens any lesson and presses Run > Run All Cells before writing anything must see
the whole lesson without a traceback: test cells give their one-line verdict, demos that need
an unwritten exercise say so in one line (``needs``), and widgets that need one say it inside
their output, also when a control moves. A widget's output lives in the widget's state, not in
the cell's outputs, so nbclient (and ``nbgrader validate``) never sees a traceback shown there;
only the page does. Every test cell, failing since nothing is written, offers its exercise's
hints. The lessons come from the course manifest, so a new lesson is covered as soon as it is
in :data:`mhalib.course.LESSONS` and released into notebooks/.

A canary notebook with a traceback inside an ``Output`` widget shows that the count below sees
tracebacks in widget outputs (the count that would have caught lesson 10's cache explorer).

The default run covers three lessons (numpy, the Triton lesson, the widget-heaviest torch one;
lesson 12 has its own Run All test) to keep the suite's time; ``MHALIB_BROWSER_ALL_LESSONS=1``
runs every lesson (about 4 minutes on 2 cores; every lesson passed on 2026-11-25). Each
lesson's notebooks are also run top to bottom by nbgrader in tests/notebooks on every run.
"""

from __future__ import annotations

import os

import nbformat
import pytest

from mhalib import course
from mhalib.hints import ladder
from tests.browser import lab_driver as lab
from tests.browser.lab_server import REPO, open_fresh, shut_down_kernels

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.xdist_group("jupyterlab")]

NOTEBOOKS = REPO / "notebooks"
CANARY = "canary/widget_traceback.ipynb"
CANARY_CODE = """\
import ipywidgets as widgets
from IPython.display import display

output = widgets.Output()
display(output)
with output:
    raise NotImplementedError("a traceback inside a widget's output")
"""
# Run All may take this many times the lesson's CPU budget in wall time (the browser and the
# server share the machine's two cores with the kernel); never less than the driver's default.
WALL_PER_BUDGET = 6
DEFAULT_LESSONS = ("01-single-head", "07-flash", "10-mla")
ALL_LESSONS = os.environ.get("MHALIB_BROWSER_ALL_LESSONS") == "1"

# Texts of the tracebacks in the open notebook, and whether each sits inside a widget.
TRACEBACKS_JS = """(notebook) => Array.from(document.querySelectorAll(
        notebook + " .jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']"))
    .filter(el => el.textContent.includes("Traceback"))
    .map(el => ({text: el.textContent.slice(0, 400),
                 in_widget: !!el.closest(".jupyter-widgets, .widget-output")}))"""


def _write_canary(folder) -> None:
    notebook = nbformat.v4.new_notebook()
    notebook.cells = [nbformat.v4.new_code_cell(CANARY_CODE)]
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                       "language": "python"}
    (folder / CANARY).parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(notebook, folder / CANARY)


def _released(lesson: course.Lesson) -> str:
    path = f"{lesson.assignment}/{lesson.notebook}"
    if not (NOTEBOOKS / path).is_file():
        pytest.fail(f"{NOTEBOOKS / path} is missing: run `mhalib release {lesson.assignment}`")
    return path


@pytest.fixture(scope="module")
def releases_server(release_lab):
    """The shared JupyterLab on the release (tests/browser/conftest.py), plus the canary
    notebook."""
    _write_canary(release_lab.notebook_dir)
    yield release_lab
    shut_down_kernels(release_lab)  # not left running beside the tests that follow


def tracebacks(page) -> list[dict]:
    """Every traceback the open notebook shows, those inside widget outputs included."""
    page.wait_for_function("() => !document.body.textContent.includes('Loading widget')",
                           timeout=60_000)
    return page.evaluate(TRACEBACKS_JS, lab.NOTEBOOK)


def run_all(page, server, path: str, budget_s: float, monkeypatch) -> list[dict]:
    """Open ``path`` fresh, Run All Cells, and return its tracebacks (every cell must run)."""
    open_fresh(page, server, path)
    monkeypatch.setattr(lab, "RUN_TIMEOUT_MS",
                        max(lab.RUN_TIMEOUT_MS, int(WALL_PER_BUDGET * budget_s * 1000)))
    lab.run_all_cells(page)
    assert lab.unrun_cells(page) == [], f"{path}: cells Run All did not reach"
    return tracebacks(page)


def test_the_count_sees_a_traceback_inside_a_widget(page, releases_server, monkeypatch):
    found = run_all(page, releases_server, CANARY, 10, monkeypatch)
    assert len(found) == 1 and found[0]["in_widget"], found
    assert "a traceback inside a widget's output" in found[0]["text"]


@pytest.mark.parametrize("lesson", [lesson for lesson in course.LESSONS
                                    if ALL_LESSONS or lesson.assignment in DEFAULT_LESSONS],
                         ids=lambda lesson: lesson.assignment)
def test_run_all_on_the_untouched_release_shows_no_traceback(page, releases_server, lesson,
                                                            monkeypatch):
    path = _released(lesson)
    found = run_all(page, releases_server, path, lesson.run_budget_s, monkeypatch)
    print(f"{lesson.assignment}: {len(found)} traceback(s), "
          f"{sum(t['in_widget'] for t in found)} inside widgets")
    assert found == [], f"{path}: tracebacks after Run All: {found}"
    assert lab.widget_problems(page) == []
    # every test cell failed (nothing is written yet), and each offers its exercise's hints
    offered = page.locator(f"{lab.NOTEBOOK} .mhalib-hint-button").all_text_contents()
    assert sorted(label.strip() for label in offered) == sorted(
        f"Show a hint (1 of {len(ladder(name))})" for name in lesson.exercises), offered
    assert page.console_errors == []
