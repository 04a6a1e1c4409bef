"""What a learner does on the class hub, in the browser: log in, the Assignment List, feedback.

Selectors are JupyterHub's login form (``#username_input``...) and the ids and classes of
nbgrader's Assignment List (``#released_assignments_list``...), as in nbgrader 0.9.
"""

from __future__ import annotations

import re

from tests.browser.lab_driver import (
    LOAD_TIMEOUT_MS,
    answer_choice,
    answer_fill_in,
    code_cell,
    quick_check,
    run_all_cells,
    set_source,
)

SPAWN_TIMEOUT_MS = 180_000
LIST_TIMEOUT_MS = 60_000
RELEASED = "#released_assignments_list"
FETCHED = "#fetched_assignments_list"
SUBMITTED = "#submitted_assignments_list"


def log_in(page, hub_url: str, user: str, password: str) -> None:
    """Log in on the hub's login page and wait for the user's JupyterLab."""
    page.goto(f"{hub_url}/hub/login")
    page.fill("#username_input", user)
    page.fill("#password_input", password)
    page.click("#login_submit")
    page.wait_for_url(re.compile(rf"/user/{user}/lab"), timeout=SPAWN_TIMEOUT_MS)
    page.wait_for_selector(".lm-MenuBar-itemLabel", timeout=LOAD_TIMEOUT_MS)


def menu(page, top: str, item: str) -> None:
    page.locator(".lm-MenuBar-itemLabel", has_text=re.compile(f"^{top}$")).click()
    page.locator(".lm-Menu-itemLabel", has_text=re.compile(f"^{item}$")).click()


def open_assignment_list(page) -> None:
    """Nbgrader > Assignment List; wait until its lists have loaded."""
    menu(page, "Nbgrader", "Assignment List")
    page.wait_for_selector(f"{RELEASED}_loading", state="hidden", timeout=LIST_TIMEOUT_MS)


def _row(page, section: str, assignment: str):
    return page.locator(f"{section} > .list_item", has_text=assignment)


def fetch_assignment(page, assignment: str) -> None:
    _row(page, RELEASED, assignment).get_by_role("button", name="Fetch").click()
    _row(page, FETCHED, assignment).wait_for(timeout=LIST_TIMEOUT_MS)


def open_fetched_notebook(page, assignment: str, notebook: str) -> None:
    """Unfold the fetched assignment and click its notebook; wait until its kernel is idle."""
    row = _row(page, FETCHED, assignment)
    row.locator("a.assignment-notebooks-link").click()
    row.locator(".nested_list_item a", has_text=notebook).click()
    page.wait_for_selector(".jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook .jp-Cell",
                           timeout=LOAD_TIMEOUT_MS)


def answer_cell(page, grade_id: str):
    """The answer cell ``grade_id`` of lesson 01 (it defines a function of that name)."""
    return code_cell(page, f"def {grade_id}(")


def answer(page, answers: dict[str, str], quick_checks: dict[str, tuple[str, str]]) -> None:
    """Type each answer into its cell, run all cells, answer each quick check in its form
    (``quick_checks``: id -> ("fill", expression) or ("choice", option text)), then save (and
    wait until it is saved)."""
    for grade_id, source in answers.items():
        set_source(page, answer_cell(page, grade_id), source)
    run_all_cells(page)
    for question_id, (kind, value) in quick_checks.items():
        form = quick_check(page, question_id)
        said = (answer_fill_in if kind == "fill" else answer_choice)(page, form, value)
        assert said.strip(), f"{question_id}: the form said nothing"
    save(page)


def save(page, attempts: int = 3) -> None:
    """Ctrl+S until the tab is no longer dirty: on a loaded machine the last edit can reach the
    notebook model after a save has started, which leaves the tab dirty (seen once in CI)."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    dirty = ".lm-DockPanel-tabBar .lm-TabBar-tab.lm-mod-current.jp-mod-dirty"
    for attempt in range(attempts):
        page.keyboard.press("ControlOrMeta+S")
        try:
            page.wait_for_selector(dirty, state="detached", timeout=15_000)
            return
        except PlaywrightTimeout:
            if attempt == attempts - 1:
                raise


def show_tab(page, label: str) -> None:
    page.locator(".lm-DockPanel-tabBar .lm-TabBar-tab", has_text=label).first.click()


def submit(page, assignment: str) -> None:
    """Press Submit on the fetched assignment; wait until it is listed as submitted."""
    show_tab(page, "Assignments")
    _row(page, FETCHED, assignment).get_by_role("button", name="Submit").click()
    page.locator(f"{SUBMITTED} .list_item", has_text=assignment).first.wait_for(
        timeout=LIST_TIMEOUT_MS)


def refresh_list(page) -> None:
    page.locator("#refresh_assignments_list").click()


def fetch_feedback(page, assignment: str) -> None:
    """Reload the list, press Fetch Feedback, wait for the link to the feedback."""
    show_tab(page, "Assignments")
    row = page.locator(f"{SUBMITTED} .list_item", has_text=assignment).first
    button = row.get_by_role("button", name="Fetch Feedback")
    for _ in range(3):  # the list is read when it opens: reload until the release shows
        refresh_list(page)
        page.wait_for_selector(f"{SUBMITTED}_loading", state="hidden", timeout=LIST_TIMEOUT_MS)
        if button.count():
            break
    button.click()
    row.get_by_text("view feedback").wait_for(timeout=LIST_TIMEOUT_MS)
