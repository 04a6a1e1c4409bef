"""nbgrader's formgrader, opened in a real browser from ``mhalib lab --instructor``.

The server runs on a copy of the course (grading/, solutions/, notebooks/) because formgrader
creates the gradebook database as soon as it is opened.
"""

from __future__ import annotations

import shutil

import pytest

from mhalib.checks import LESSONS
from tests.browser.lab_server import REPO, start_lab

pytestmark = [pytest.mark.browser, pytest.mark.xdist_group("jupyterlab")]

COURSE_PARTS = ("grading", "solutions", "notebooks")


@pytest.fixture
def instructor_server(tmp_path, request):
    course = tmp_path / "course"
    for part in COURSE_PARTS:
        shutil.copytree(REPO / part, course / part,
                        ignore=shutil.ignore_patterns("course", "*.db", ".ipynb_checkpoints"))
    server = start_lab(course, ["--instructor"], tmp_path / "jupyter")
    yield server
    server.stop()
    if getattr(request.node, "call_failed", False):
        print(f"--- the end of the JupyterLab log ---\n{server.log()[-6000:]}")


def test_formgrader_lists_every_assignment_of_the_course(page, instructor_server):
    assert instructor_server.url.split("?")[0].endswith("/formgrader"), instructor_server.url
    with page.expect_response("**/formgrader/api/assignments", timeout=60_000) as listing:
        page.goto(instructor_server.url)
    assert listing.value.status == 200, instructor_server.log()[-3000:]
    assert page.url.split("?")[0].endswith("/formgrader/manage_assignments"), page.url
    names = page.locator("#main-table td.name")
    names.first.wait_for(timeout=60_000)
    assert sorted(names.all_inner_texts()) == sorted(LESSONS), instructor_server.log()[-3000:]
    assert "500 GET" not in instructor_server.log()
