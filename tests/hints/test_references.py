"""What a hint points to exists: "section 2" is a section of its lesson, "lesson 04" an earlier
lesson of the course. The lessons' prose changes; a hint that points to a section that moved
fails here instead of sending the learner to the wrong place."""

from __future__ import annotations

import json
import re

import pytest

from mhalib import course
from mhalib.hints import ladder
from tests.checkout import REPO


def section_numbers(lesson: course.Lesson) -> set[str]:
    """The numbers of the lesson's numbered sections (markdown headings "## 2 · ...")."""
    notebook = json.loads((REPO / "solutions" / lesson.assignment / lesson.notebook).read_text())
    text = "\n".join("".join(c["source"]) for c in notebook["cells"]
                     if c["cell_type"] == "markdown")
    return set(re.findall(r"^#+ (\d+) ·", text, flags=re.MULTILINE))


@pytest.mark.parametrize("lesson", course.LESSONS, ids=lambda lesson: lesson.assignment)
def test_sections_and_lessons_a_hint_names_exist(lesson):
    sections = section_numbers(lesson)
    numbers = [other.number for other in course.LESSONS]
    for exercise in lesson.exercises:
        for number, text in enumerate(ladder(exercise), start=1):
            where = f"hint {number} of {exercise}"
            for section in re.findall(r"\bsection (\d+)", text):
                assert section in sections, f"{where} names section {section}; the lesson has " \
                                            f"{sorted(sections)}"
            for named in re.findall(r"\blesson (\d\d)", text):
                assert named in numbers and named <= lesson.number, (
                    f"{where} names lesson {named}, not an earlier lesson of the course")


def test_the_references_looked_for_are_there_to_check():
    texts = [text for name in course.exercise_names() for text in ladder(name)]
    assert sum(len(re.findall(r"\bsection (\d+)", text)) for text in texts) >= 3
    assert sum(len(re.findall(r"\blesson (\d\d)", text)) for text in texts) >= 5
    assert section_numbers(course.lesson("05-flops")) >= {"1", "2", "3", "4"}
