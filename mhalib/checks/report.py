"""Showing a verdict to the learner: HTML in Jupyter, plain text elsewhere."""

from __future__ import annotations

import html

from mhalib.checks.verdict import Verdict


def as_text(verdict: Verdict) -> str:
    head = ("PASSED" if verdict.passed else "NOT YET") + f" -- {verdict.diagnosis}"
    lines = [head]
    if not verdict.passed and verdict.cases_total:
        lines.append(f"{verdict.cases_passed} of {verdict.cases_total} checks passed.")
    lines += [f"  - {d}" for d in verdict.details[:6]]
    return "\n".join(lines)


def as_html(verdict: Verdict) -> str:
    colour, mark = ("#1b7f3b", "&#10004;") if verdict.passed else ("#b3261e", "&#10008;")
    items = "".join(f"<li><code>{html.escape(d)}</code></li>" for d in verdict.details[:6])
    summary = ""
    if not verdict.passed and verdict.cases_total:
        summary = f"<div>{verdict.cases_passed} of {verdict.cases_total} checks passed.</div>"
    return (f'<div class="mhalib-verdict" style="border-left:4px solid {colour};padding:4px 8px">'
            f'<b style="color:{colour}">{mark} {html.escape(verdict.diagnosis)}</b>{summary}'
            f"<ul>{items}</ul></div>")


def show(verdict: Verdict) -> None:
    """Display in Jupyter when possible (always also print, so nbclient output has the text)."""
    try:
        from IPython import get_ipython
        from IPython.display import HTML, display

        if get_ipython() is not None and "IPKernelApp" in get_ipython().config:
            display(HTML(as_html(verdict)))
            return
    except ImportError:
        pass
    print(as_text(verdict))
