"""The report as one self-contained HTML file: no script, no external file, charts inline.

Order: what to re-teach (the few misconceptions that affect the most students, each linked to
the lesson section that teaches it), then each assignment (score distribution, exercises with
their ranked mistakes and examples, quick checks with their statistics and choices), the
student x exercise grid, and how the numbers are computed.
"""

from __future__ import annotations

from html import escape

from mhalib.classroom.report.build import ClassReport
from mhalib.classroom.report.grid import GridCell
from mhalib.classroom.report.page_items import (
    OUTCOME_WORDS,
    ChartIds,
    anchor_id,
    assignment_block,
    percent,
)
from mhalib.classroom.report.statistics import GROUP_FRACTION
from mhalib.grading.credit import format_points

SYMBOLS = {"passed": "\u2713", "partial": "\u25d0", "failed": "\u2717", "blank": "\u25cb",
           "not_graded": "\u2013"}
FLAG = "\u2691"

STYLE = """
body{font-family:system-ui,sans-serif;margin:0 auto;max-width:72rem;padding:1rem 1.5rem;
color:#222;line-height:1.45}
h1{margin-bottom:.2rem}h2{border-bottom:2px solid #0072B2;padding-bottom:.2rem;margin-top:2.5rem}
h4{margin:1.6rem 0 .3rem}code,pre{font-family:ui-monospace,monospace;font-size:.9em}
pre{background:#f4f4f4;padding:.5rem;overflow-x:auto;border-left:3px solid #999}
table{border-collapse:collapse;margin:.6rem 0}caption{text-align:left;font-weight:600;
padding:.2rem 0}th,td{border:1px solid #ccc;padding:.2rem .45rem;vertical-align:top}
table.numbers td{text-align:right}thead th{background:#eef3f8}
tr.key td{background:#e4f0f8}.taught{margin:.2rem 0}.prompt{font-style:italic}
.warning{background:#fbe9d9;border-left:4px solid #D55E00;padding:.4rem .6rem}
.note{background:#f4f4f4;padding:.3rem .6rem}figure{margin:.6rem 0}
figcaption{font-size:.9em;color:#444}ol.reteach li{margin-bottom:.6rem}
.meta{color:#444}nav ul{columns:2}a{color:#0050a0}
.grid-wrap{overflow:auto;max-height:80vh;border:1px solid #ccc}
table.grid{margin:0;font-size:.8em}table.grid caption{white-space:nowrap}
table.grid th,table.grid td{padding:.1rem .25rem;
text-align:center;white-space:nowrap}table.grid thead th{position:sticky;top:0;z-index:1}
table.grid thead tr:nth-child(2) th{top:1.6em}
table.grid th.ex span{writing-mode:vertical-rl;transform:rotate(180deg)}
td.passed{background:#d5efe6}td.partial{background:#fcebc6}td.failed{background:#f7d3c0}
td.blank{background:#ececec}td.not_graded{background:#fff}
"""


def header(report: ClassReport) -> str:
    names = "student ids shown (--names)" if report.names_shown else \
        "names hidden: students appear as pseudonyms (S001...)"
    notes = "".join(f"<li>{escape(n)}</li>" for n in report.notes)
    return (f"<header><h1>What did the class get wrong?</h1>"
            f'<p class="meta">{report.students} students, '
            f"{len(report.assignments)} assignment(s): "
            f"{escape(', '.join(a.assignment for a in report.assignments))}. Course "
            f"<code>{escape(report.course)}</code>; prices from {escape(report.rubric)}; "
            f"{names}; generated {escape(report.generated)}.</p>"
            + (f'<ul class="note">{notes}</ul>' if notes else "") + "</header>")


def contents(report: ClassReport) -> str:
    links = ['<li><a href="#reteach">What to re-teach</a></li>']
    links += [f'<li><a href="#{anchor_id("a", a.assignment)}">{escape(a.assignment)}: '
              f"{escape(a.title)}</a></li>" for a in report.assignments]
    links += ['<li><a href="#grid">Student \u00d7 exercise</a></li>',
              '<li><a href="#definitions">How the numbers are computed</a></li>']
    return f'<nav aria-label="Contents"><ul>{"".join(links)}</ul></nav>'


def reteach_block(report: ClassReport) -> str:
    if not report.reteach:
        return ('<section id="reteach"><h2>What to re-teach</h2><p>No named mistake, '
                "distractor or known slip in this class.</p></section>")
    kinds = {"mistake": "mistake in exercise", "distractor": "distractor of quick check",
             "slip": "slip in quick check"}
    items = []
    for entry in report.reteach:
        where = (f' Taught in <a href="{escape(entry.section.url)}">lesson '
                 f"{escape(entry.assignment[:2])}, \u00a7 {escape(entry.section.title)}</a>."
                 if entry.section else f" Lesson {escape(entry.assignment)}.")
        items.append(
            f"<li><strong>{escape(entry.name)}</strong> ({kinds[entry.kind]} "
            f'<a href="#{anchor_id(entry.assignment, entry.item)}"><code>{escape(entry.item)}'
            f"</code></a>): {entry.students} of {entry.of} students ({percent(entry.share)})."
            f" {escape(entry.message)}{where}</li>")
    return (f'<section id="reteach"><h2>What to re-teach</h2><p>The {len(items)} '
            f"misconception(s) that affect the most students.</p>"
            f'<ol class="reteach">{"".join(items)}</ol></section>')


def _cell(cell: GridCell | None) -> str:
    if cell is None:
        return '<td title="no verdict"></td>'
    text = OUTCOME_WORDS[cell.outcome] + (f": {cell.mistake}" if cell.mistake else "") + \
        f", {format_points(cell.points)} of {format_points(cell.max_points)}" + \
        (", flagged" if cell.flagged else "")
    return (f'<td class="{cell.outcome}" title="{escape(text)}">{SYMBOLS[cell.outcome]}'
            f"{FLAG if cell.flagged else ''}</td>")


def grid_block(report: ClassReport) -> str:
    groups, exercises = [], []
    for assignment in report.assignments:
        names = [e for a, e in report.grid_columns if a == assignment.assignment]
        groups.append(f'<th scope="colgroup" colspan="{len(names) + 1}">'
                      f"{escape(assignment.assignment)}</th>")
        exercises += [f'<th scope="col" class="ex"><span>{escape(n)}</span></th>' for n in names]
        exercises.append('<th scope="col" class="ex"><span>total</span></th>')
    rows = []
    for row in report.grid:
        cells, position = [], 0
        for assignment in report.assignments:
            count = sum(1 for a, _ in report.grid_columns if a == assignment.assignment)
            cells += [_cell(c) for c in row.cells[position:position + count]]
            position += count
            points, most = row.totals.get(assignment.assignment, (None, None))
            cells.append("<td></td>" if points is None else
                         f"<td>{format_points(points)}/{format_points(most)}</td>")
        rows.append(f'<tr><th scope="row">{escape(row.label)}</th>{"".join(cells)}</tr>')
    legend = ", ".join(f"{SYMBOLS[o]} {OUTCOME_WORDS[o]}" for o in SYMBOLS) + \
        f", {FLAG} flagged for your look; hover a cell for the mistake and points"
    return (f'<section id="grid"><h2>Student \u00d7 exercise</h2><p>{legend}. Best total '
            f'first; the same grid is in the CSV.</p><div class="grid-wrap" tabindex="0">'
            f'<table class="grid"><caption>Outcome of each exercise for each student'
            f'</caption><thead><tr><th scope="col" rowspan="2">student</th>{"".join(groups)}'
            f"</tr><tr>{''.join(exercises)}</tr></thead><tbody>{''.join(rows)}</tbody>"
            f"</table></div></section>")


def definitions_block() -> str:
    percent_group = f"{GROUP_FRACTION:.0%}"
    return f"""<section id="definitions"><h2>How the numbers are computed</h2><ul>
<li>Nothing is graded again: the report reads the grader's stored results (one verdict per
exercise and quick check, with the diagnosis, the flags and what the learner answered) and the
gradebook's final scores (hand grades included).</li>
<li><strong>Outcome</strong> of an exercise, one per student, from the grader's diagnosis:
passed; partial credit (a named mistake the rubric prices); left blank (the answer cell is
still the release's); not graded (the notebook stopped before it, could not be read, or its
record was malformed); failed (any other wrong answer). <em>Flagged</em> counts the students
whose verdict or notebook asks for your look.</li>
<li><strong>Named mistake</strong>: the mistake model the checker found (flag
<code>mistake:&lt;name&gt;</code>); its price is the rubric's share of the exercise's points.
Examples are the shortest distinct answer cells, without comments, docstrings or the
student's id.</li>
<li><strong>Facility</strong> p: the share of the students who answered that got it right.</li>
<li><strong>Point-biserial</strong> r = (M1 &minus; M0) / s &middot; &radic;(p q): M1, M0 the
mean rest score (the assignment total minus this quick check) of those right and wrong, s its
standard deviation (divided by n), q = 1 &minus; p.</li>
<li><strong>Upper-lower index</strong> D = pU &minus; pL: the facility among the
{percent_group} of students with the highest rest scores minus that among the
{percent_group} with the lowest; students tied at a group's edge share its last places.</li>
<li>A quick check <strong>looks broken</strong> when either index is negative, or when a
distractor or known slip was chosen more often than the key in the upper group.</li>
<li>What to re-teach ranks named mistakes, distractors and known slips by the number of
students they affect.</li></ul></section>"""


def render(report: ClassReport) -> str:
    """The whole page."""
    ids = ChartIds()
    title = "Class report: " + ", ".join(a.assignment for a in report.assignments)
    body = "".join([header(report), contents(report), "<main>", reteach_block(report),
                    *[assignment_block(a, ids) for a in report.assignments],
                    grid_block(report), definitions_block(), "</main>"])
    return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            f'<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<title>{escape(title)}</title><style>{STYLE}</style></head>"
            f"<body>{body}</body></html>\n")
