"""Showing a verdict to the learner: HTML in Jupyter, plain text elsewhere.

A passed check is shown as HTML; a failed one as text, which ``check`` makes the cell's error
output (mhalib/checks/api.py). A function that is still the release's stub gets one line.
"""

from __future__ import annotations

import html

from mhalib.checks.verdict import Verdict

UNWRITTEN = "is not written yet"  # how the judge describes a call that met the release's stub


def unwritten(verdict: Verdict) -> bool:
    """True when every case failed only because the function is still the release's stub."""
    return (not verdict.passed and verdict.cases_passed == 0 and bool(verdict.details)
            and all(UNWRITTEN in detail for detail in verdict.details))


def _unwritten_line(verdict: Verdict) -> str:
    return (f"{verdict.exercise} {UNWRITTEN}: replace `raise NotImplementedError()` in its "
            "cell with your code, run that cell, then this one.")


def as_text(verdict: Verdict) -> str:
    if unwritten(verdict):
        return f"NOT YET -- {_unwritten_line(verdict)}"
    head = ("PASSED" if verdict.passed else "NOT YET") + f" -- {verdict.diagnosis}"
    lines = [head]
    if not verdict.passed and verdict.cases_total:
        lines.append(f"{verdict.cases_passed} of {verdict.cases_total} checks passed.")
    lines += [f"  - {d}" for d in verdict.details[:6]]
    return "\n".join(lines)


def as_html(verdict: Verdict) -> str:
    colour, mark = ("#1b7f3b", "&#10004;") if verdict.passed else ("#b3261e", "&#10008;")
    if unwritten(verdict):
        return (f'<div class="mhalib-verdict" style="border-left:4px solid {colour};'
                f'padding:4px 8px"><b style="color:{colour}">{mark} '
                f"{html.escape(_unwritten_line(verdict))}</b></div>")
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
