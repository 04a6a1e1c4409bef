"""The class report opened in headless Chromium: self-contained, readable, navigable; the
screenshots in docs/screenshots/ come from here (``MHALIB_SCREENSHOTS=docs/screenshots``)."""

from __future__ import annotations

import pytest

from mhalib.classroom.report.build import ReportOptions, build_report
from mhalib.classroom.report.output import write_report
from tests.classroom.report.conftest import REPO

pytestmark = [pytest.mark.browser, pytest.mark.slow,
              pytest.mark.filterwarnings("ignore::RuntimeWarning")]


@pytest.fixture(scope="module")
def report_page(synthetic, tmp_path_factory):
    report = build_report(ReportOptions(course=synthetic.course, source=REPO / "solutions",
                                        lesson_url="http://localhost:8888/lab/tree"))
    return write_report(report, tmp_path_factory.mktemp("report"), "class").html


def test_the_report_in_chromium(page, report_page, screenshot_dir):
    requests = []
    page.on("request", lambda request: requests.append(request.url))
    page.goto(report_page.as_uri())
    assert page.title() == "Class report: 01-single-head, 05-flops, 06-gqa"
    assert requests == [report_page.as_uri()]  # nothing else is fetched: self-contained
    assert page.console_errors == []

    # every chart is an image with a title and a description a screen reader reads
    charts = page.locator("svg[role=img]")
    assert charts.count() == 3 + 9 + 13  # score histograms, mistake bars, answer bars
    labelled = page.evaluate("""() => [...document.querySelectorAll('svg[role=img]')].every(
        svg => svg.getAttribute('aria-labelledby').split(' ').every(id => {
            const node = document.getElementById(id); return node && node.textContent.length;
        }))""")
    assert labelled
    assert page.evaluate("() => [...document.querySelectorAll('figure')].every("
                         "f => f.querySelector('figcaption'))")
    assert page.evaluate("() => [...document.querySelectorAll('table')].every("
                         "t => t.querySelector('caption'))")
    assert page.evaluate("document.documentElement.lang") == "en"

    reteach = page.locator("#reteach ol li")
    assert reteach.count() == 5
    assert "distractor of quick check" in reteach.first.inner_text()
    page.screenshot(path=str(screenshot_dir / "class_report.png"))

    # the first re-teach entry leads to its quick check, flagged as looking broken
    reteach.first.locator("a").first.click()
    target = page.url.split("#")[1]
    item = page.locator(f"[id='{target}']")
    assert item.locator(".warning").first.is_visible()
    assert "Looks broken" in item.locator(".warning").first.inner_text()
    item.scroll_into_view_if_needed()
    item.screenshot(path=str(screenshot_dir / "class_report_quick_check.png"))

    # an exercise: ranked mistakes, examples behind a disclosure
    exercise = page.locator("[id='01-single-head-attention']")
    exercise.locator("details summary").first.click()
    assert exercise.locator("pre").first.is_visible()
    exercise.screenshot(path=str(screenshot_dir / "class_report_exercise.png"))

    grid = page.locator("#grid")
    grid.scroll_into_view_if_needed()
    rows = grid.locator("tbody tr")
    assert rows.count() == 240
    assert rows.first.locator("th").inner_text().startswith("S")
    grid.screenshot(path=str(screenshot_dir / "class_report_grid.png"))
