"""Links from an item to the lesson section that teaches it."""

from __future__ import annotations

import json
from urllib.parse import unquote

from mhalib.classroom.report.sections import (
    anchor,
    default_base_url,
    lesson_sections,
    plain_heading,
)
from tests.classroom.report.conftest import REPO


def test_lesson_01_sections_from_its_source():
    sections = lesson_sections("01-single-head", REPO / "solutions", "http://lab/tree")
    assert sections["softmax"].title == "1 · From scores to weights: softmax"
    assert sections["attention"].title == "2 · Scaled dot-product attention"
    assert sections["qc_log_softmax"].title == sections["softmax"].title
    assert sections["qc_weights_shape"].title == "3 · Looking at the weights"
    url = sections["attention"].url
    assert url.startswith("http://lab/tree/01-single-head/single_head_attention.ipynb#")
    assert unquote(url.split("#")[1]) == "2-·-Scaled-dot-product-attention"


def test_every_exercise_and_quick_check_of_the_course_has_a_section():
    from mhalib import course
    from mhalib.quiz import all_questions

    questions = set(all_questions())
    for lesson in course.LESSONS:
        sections = lesson_sections(lesson.assignment, REPO / "solutions", "x")
        notebook = json.loads((REPO / "solutions" / lesson.assignment / lesson.notebook)
                              .read_text())
        ids = {c["metadata"].get("nbgrader", {}).get("grade_id") for c in notebook["cells"]}
        for name in [*lesson.exercise_names, *(ids & questions)]:
            assert name in sections, f"{lesson.assignment}: {name} has no section"


def test_markdown_is_stripped_and_a_missing_notebook_gives_no_links(tmp_path):
    assert plain_heading("## 4 · What the $\\sqrt{d_k}$ **buys** `x`") == \
        "4 · What the sqrt{d_k} buys x"
    assert unquote(anchor("4 · What the sqrt{d_k} buys")) == "4-·-What-the-sqrt{d_k}-buys"
    assert lesson_sections("01-single-head", tmp_path, "x") == {}
    assert default_base_url(tmp_path).startswith("file:///")
