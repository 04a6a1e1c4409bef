"""The HTML of one assignment in the report: its scores, its exercises, its quick checks."""

from __future__ import annotations

from html import escape

from mhalib.classroom.report.build import AssignmentReport
from mhalib.classroom.report.charts import bar_chart, histogram
from mhalib.classroom.report.exercises import ExerciseSummary
from mhalib.classroom.report.outcomes import OUTCOMES
from mhalib.classroom.report.quick_checks import QuickCheckSummary
from mhalib.classroom.report.sections import Section
from mhalib.grading.credit import format_points

OUTCOME_WORDS = {"passed": "passed", "partial": "partial credit", "failed": "failed",
                 "blank": "left blank", "not_graded": "not graded"}


class ChartIds:
    """Unique ids for the charts of one page (their title/desc/pattern ids)."""

    def __init__(self) -> None:
        self.count = 0

    def next(self) -> str:
        self.count += 1
        return f"chart{self.count}"


def anchor_id(*parts: str) -> str:
    return "-".join(part.replace(" ", "-") for part in parts)


def number(value: float | None, digits: int = 2) -> str:
    return "\u2014" if value is None else f"{value:.{digits}f}"


def percent(value: float | None) -> str:
    return "\u2014" if value is None else f"{value:.0%}"


def section_link(section: Section | None) -> str:
    if section is None:
        return ""
    return (f'<p class="taught">Taught in <a href="{escape(section.url)}">lesson '
            f'{escape(section.assignment[:2])}, \u00a7 {escape(section.title)}</a></p>')


def figure(svg: str, caption: str) -> str:
    return f"<figure>{svg}<figcaption>{escape(caption)}</figcaption></figure>"


def scores_block(report: AssignmentReport, ids: ChartIds) -> str:
    scores = report.scores
    caption = (f"Total points of {scores.students} students (of {format_points(scores.max_points)}"
               f"): mean {scores.mean:.2f}, median {scores.median:g}, lowest "
               f"{scores.minimum:g}, highest {scores.maximum:g}.")
    return figure(histogram(ids.next(), f"Score distribution, {report.assignment}",
                            scores.bins), caption)


def exercises_table(report: AssignmentReport) -> str:
    head = "".join(f'<th scope="col">{OUTCOME_WORDS[o]}</th>' for o in OUTCOMES)
    rows = []
    for summary in report.exercises:
        cells = "".join(f"<td>{summary.counts[o]}</td>" for o in OUTCOMES)
        target = anchor_id(report.assignment, summary.exercise)
        rows.append(f'<tr><th scope="row"><a href="#{target}">'
                    f"<code>{escape(summary.exercise)}</code></a></th><td>{summary.students}</td>"
                    f"{cells}<td>{summary.flagged}</td><td>{summary.mean_points:.2f} / "
                    f"{format_points(summary.max_points)}</td></tr>")
    return (f'<table class="numbers"><caption>Exercises of {escape(report.assignment)}: one '
            f"outcome per student; flagged counts those the grader asks you to look at"
            f'</caption><thead><tr><th scope="col">exercise</th><th scope="col">students</th>'
            f'{head}<th scope="col">flagged</th><th scope="col">mean points</th></tr></thead>'
            f"<tbody>{''.join(rows)}</tbody></table>")


def _examples(examples: list[str]) -> str:
    if not examples:
        return ""
    blocks = "".join(f"<pre><code>{escape(code)}</code></pre>" for code in examples)
    return f"<details><summary>{len(examples)} example(s)</summary>{blocks}</details>"


def exercise_block(summary: ExerciseSummary, ids: ChartIds) -> str:
    unnamed = len(summary.unnamed)
    rows = [(m.mistake, m.students, False) for m in summary.mistakes]
    if unnamed:
        rows.append(("wrong, no name", unnamed, False))
    parts = [f'<section class="item" id="{anchor_id(summary.assignment, summary.exercise)}">'
             f"<h4>Exercise <code>{escape(summary.exercise)}</code></h4>",
             section_link(summary.section)]
    if rows:
        parts.append(figure(bar_chart(ids.next(), f"Mistakes in {summary.exercise}", rows,
                                      summary.students),
                            f"How many of the {summary.students} students made each mistake "
                            "(the table below has the same numbers)."))
    if summary.mistakes:
        body = "".join(
            f"<tr><td><code>{escape(m.mistake)}</code></td><td>{m.students}</td>"
            f"<td>{percent(m.share)}</td><td>{format_points(m.price_points)} of "
            f"{format_points(m.max_points)}</td><td>{escape(m.message)}{_examples(m.examples)}"
            f"</td></tr>" for m in summary.mistakes)
        parts.append(f'<table class="mistakes"><caption>Named mistakes in '
                     f"<code>{escape(summary.exercise)}</code>, most frequent first</caption>"
                     f'<thead><tr><th scope="col">mistake</th><th scope="col">students</th>'
                     f'<th scope="col">share</th><th scope="col">rubric price</th>'
                     f'<th scope="col">what the checker tells the learner</th></tr></thead>'
                     f"<tbody>{body}</tbody></table>")
    else:
        parts.append("<p>No named mistake.</p>")
    if unnamed:
        items = "".join(
            f"<li><strong>{escape(f.student)}</strong> ({OUTCOME_WORDS[f.outcome]}"
            f"{', flags: ' + escape(' '.join(f.flags)) if f.flags else ''}): "
            f"{escape(f.diagnosis)}"
            + (f"<pre><code>{escape(f.code)}</code></pre>" if f.code else "") + "</li>"
            for f in summary.unnamed)
        parts.append(f"<details><summary>{unnamed} wrong answer(s) the grader could not name: "
                     f"read them</summary><ul class=\"unnamed\">{items}</ul></details>")
    parts.append("</section>")
    return "".join(parts)


def quick_checks_table(report: AssignmentReport) -> str:
    rows = []
    for q in report.quick_checks:
        warn = ("\u26a0 looks broken" if q.broken else "") + (
            f"{'; ' if q.broken else ''}unpicked: {len(q.unpicked)}" if q.unpicked else "")
        target = anchor_id(report.assignment, q.question)
        rows.append(f'<tr><th scope="row"><a href="#{target}">'
                    f"<code>{escape(q.question)}</code></a></th>"
                    f"<td>{'multiple choice' if q.kind == 'multiple_choice' else 'fill-in'}</td>"
                    f"<td>{q.answered} of {q.students}</td><td>{number(q.facility)}</td>"
                    f"<td>{number(q.point_biserial)}</td><td>{number(q.upper_lower)}</td>"
                    f"<td>{escape(warn)}</td></tr>")
    return (f'<table class="numbers"><caption>Quick checks of {escape(report.assignment)}: '
            f"facility and discrimination over the students who answered</caption><thead><tr>"
            f'<th scope="col">quick check</th><th scope="col">kind</th>'
            f'<th scope="col">answered</th><th scope="col">facility</th>'
            f'<th scope="col">point-biserial</th><th scope="col">upper-lower 27%</th>'
            f'<th scope="col">flags</th></tr></thead><tbody>{"".join(rows)}</tbody></table>')


def quick_check_block(q: QuickCheckSummary, ids: ChartIds) -> str:
    parts = [f'<section class="item" id="{anchor_id(q.assignment, q.question)}">'
             f"<h4>Quick check <code>{escape(q.question)}</code></h4>", section_link(q.section),
             f'<p class="prompt">{escape(q.prompt)}</p>']
    for problem in q.broken:
        parts.append(f'<p class="warning" role="note">\u26a0 Looks broken: {escape(problem)}.</p>')
    if q.unpicked:
        parts.append('<p class="note">Distractors nobody picked: '
                     + "; ".join(f"\u201c{escape(t)}\u201d" for t in q.unpicked) + ".</p>")
    what = "option" if q.kind == "multiple_choice" else "answer"
    if q.answered:
        rows = [(c.label, c.count, c.key) for c in q.choices]
        parts.append(figure(bar_chart(ids.next(), f"Answers to {q.question}", rows, q.answered),
                            f"How many of the {q.answered} students who answered chose each "
                            f"{what}; the key is hatched."))
    key_row, key_mark = ' class="key"', " <strong>(key)</strong>"
    body = "".join(
        f"<tr{key_row if c.key else ''}><td>{escape(c.label)}"
        f"{key_mark if c.key else ''}</td><td>{c.count}</td>"
        f"<td>{percent(c.share)}</td><td>{c.upper:g}</td><td>{escape(c.explanation)}</td></tr>"
        for c in q.choices)
    parts.append(f'<table class="choices"><caption>{escape(q.question)}: {q.answered} of '
                 f"{q.students} answered, {q.right} right</caption><thead><tr>"
                 f'<th scope="col">{what}</th><th scope="col">students</th>'
                 f'<th scope="col">share</th><th scope="col">in the upper 27%</th>'
                 f'<th scope="col">why (from the key)</th></tr></thead><tbody>{body}</tbody>'
                 "</table></section>")
    return "".join(parts)


def assignment_block(report: AssignmentReport, ids: ChartIds) -> str:
    parts = [f'<section id="{anchor_id("a", report.assignment)}">'
             f"<h2>{escape(report.assignment)}: {escape(report.title)}</h2>",
             f"<p>{report.students} students.</p>", scores_block(report, ids),
             "<h3>Exercises</h3>", exercises_table(report),
             *[exercise_block(e, ids) for e in report.exercises]]
    if report.quick_checks:
        parts += ["<h3>Quick checks</h3>", quick_checks_table(report),
                  *[quick_check_block(q, ids) for q in report.quick_checks]]
    parts.append("</section>")
    return "".join(parts)
