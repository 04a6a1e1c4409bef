"""Where the course teaches each item: the lesson section around its cell, with a link.

A mistake model belongs to an exercise, and the course manifest knows the exercise's lesson and
notebook (:mod:`mhalib.course`); the notebook's own headings say which section the exercise's
answer cell (grade id = exercise name) or the quick check's cell (grade id = ``qc_...``) sits
in. The section is the nearest ``##`` heading above that cell. Links point into the notebook
at that heading, with the anchor JupyterLab gives a heading (its text, spaces made ``-``), under
a base URL: by default the folder of the source notebooks as a ``file:`` URL; with
``--lesson-url http://host/lab/tree/notebooks`` they open in the class's JupyterLab. (A heading
with LaTeX is rendered by MathJax there, so its anchor may not match: the link then opens the
notebook at its top.)
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

from mhalib import course


@dataclass(frozen=True)
class Section:
    """A lesson section: its title as read, and the link to it."""

    assignment: str
    title: str
    url: str


def plain_heading(line: str) -> str:
    """A Markdown heading line as text: no ``#``, backquotes, ``$``, ``**`` or LaTeX
    backslashes (``$\\sqrt{d_k}$`` reads ``sqrt{d_k}``)."""
    text = line.lstrip("#").strip()
    text = re.sub(r"\\([A-Za-z]+)", r"\1", text)
    return re.sub(r"[`$]|\*\*", "", text).strip()


def anchor(title: str) -> str:
    """JupyterLab's anchor for a heading with this text."""
    return quote(title.replace(" ", "-"), safe="-·:()'")


def _cells(path: Path) -> list[dict]:
    try:
        notebook = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    cells = notebook.get("cells") if isinstance(notebook, dict) else None
    return cells if isinstance(cells, list) else []


def _source(cell: dict) -> str:
    text = cell.get("source", "")
    return "".join(text) if isinstance(text, list) else str(text)


def lesson_sections(assignment: str, source_root: Path, base_url: str) -> dict[str, Section]:
    """grade id -> the section its cell sits in, for one lesson's source notebook (empty
    when the notebook is not there: the report then names the lesson without a link)."""
    lesson = course.lesson(assignment)
    found: dict[str, Section] = {}
    current: Section | None = None
    for cell in _cells(Path(source_root) / assignment / lesson.notebook):
        if cell.get("cell_type") == "markdown":
            for line in _source(cell).splitlines():
                if line.startswith("## "):
                    title = plain_heading(line)
                    url = (f"{base_url.rstrip('/')}/{quote(assignment)}/"
                           f"{quote(lesson.notebook)}#{anchor(title)}")
                    current = Section(assignment, title, url)
        grade_id = (cell.get("metadata", {}).get("nbgrader") or {}).get("grade_id")
        if grade_id and current is not None and grade_id not in found:
            found[str(grade_id)] = current
    return found


def default_base_url(source_root: Path) -> str:
    """The source notebooks' folder as a ``file:`` URL."""
    return Path(source_root).resolve().as_uri()
