"""Writing a report: ``<out>/<stem>.html``, ``<stem>.json`` and ``<stem>-<table>.csv``.

The stem is the assignment id when the report covers one assignment, ``class`` when it covers
every graded assignment (no ``--assignment``), and the ids joined by ``+`` for a selection.
By default the files go to ``<course>/reports/``, beside the grader's ``exports/``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from mhalib.classroom.report.build import ClassReport
from mhalib.classroom.report.page import render
from mhalib.classroom.report.tables import COLUMNS, as_json, tables, write_table


@dataclass
class ReportFiles:
    html: Path
    json: Path
    csv: dict[str, Path] = field(default_factory=dict)


def report_stem(assignments: list[str], every_graded: bool) -> str:
    if len(assignments) == 1:
        return assignments[0]
    return "class" if every_graded else "+".join(assignments)


def reports_dir(course_root: Path) -> Path:
    return Path(course_root) / "reports"


def write_report(report: ClassReport, out_dir: Path, stem: str) -> ReportFiles:
    """The page, the JSON and every CSV table of ``report`` in ``out_dir``."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    html_path = out_dir / f"{stem}.html"
    html_path.write_text(render(report), encoding="utf-8")
    json_path = out_dir / f"{stem}.json"
    json_path.write_text(json.dumps(as_json(report), indent=1, ensure_ascii=False) + "\n",
                         encoding="utf-8")
    files = ReportFiles(html_path, json_path)
    for name, rows in tables(report).items():
        files.csv[name] = write_table(out_dir / f"{stem}-{name}.csv", rows, COLUMNS[name])
    return files
