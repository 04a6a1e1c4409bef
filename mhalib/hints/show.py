"""Showing hints: ``hint("attention")`` in a cell, and the button under a failed check.

``hint(name)`` shows the next hint of exercise ``name`` each time it runs (``hint(name, 2)``
shows hint 2 again). A failed check offers a button, "Show a hint (1 of 3)", that shows the
next hint under the verdict at each press. Both climb the same ladder (:mod:`mhalib.hints.ledger`).
In an assessed release each of them also shows the record of hint use
(:mod:`mhalib.hints.record`), and every later check of the kernel shows it again, so that
re-running a cell never loses it.

Stable CSS classes for tests and styling: ``mhalib-hint`` on the button's box,
``mhalib-hint-button`` on the button, ``mhalib-hint-text`` on the hints it shows,
``mhalib-hint-record`` on the record.
"""

from __future__ import annotations

import html
import os
import sys
from pathlib import Path

from mhalib import course
from mhalib.hints.ladder import NoHints, ladder, ladders
from mhalib.hints.ledger import HintLedger, current


def hint_bundle(exercise: str, number: int, total: int, text: str, what_next: bool = True) -> dict:
    """The display data of one hint: markdown for the notebook, plain text elsewhere; with
    ``what_next``, a line on how to see the next one (the button's label says it itself)."""
    if number < total:
        after = f'`hint("{exercise}")` again shows hint {number + 1}.'
    else:
        after = "That was the last hint."
    head = f"Hint {number} of {total} for {exercise}"
    if not what_next:
        return {"text/markdown": f"**{head}.** {text}", "text/plain": f"{head}: {text}"}
    return {"text/markdown": f"**{head}.** {text}\n\n*{after}*",
            "text/plain": f"{head}: {text}\n({after.replace('`', '')})"}


def _shell():
    try:
        from IPython import get_ipython
    except ImportError:
        return None
    return get_ipython()


def _display(data: dict, display_id: str | None = None) -> None:
    """Show ``data`` (a mime bundle) under the running cell; plain text outside IPython."""
    if _shell() is None:
        print(data["text/plain"])
        return
    from IPython.display import display

    display(data, raw=True, display_id=display_id)


def _show_record(ledger: HintLedger, update: bool = True, here: bool = True) -> None:
    """In a release that records hint use: bring every record this kernel showed up to date
    (``update``: the counts changed) and show one more under the running cell (``here``)."""
    if not ledger.recording or _shell() is None:
        return
    from IPython.display import update_display

    if update:
        update_display(ledger.record(), raw=True, display_id=ledger.display_id)
    if here:
        _display(ledger.record(), display_id=ledger.display_id)


def hint(exercise: str | None = None, rung: int | None = None) -> None:
    """Show the next hint of ``exercise`` (``rung``: show that hint again, or the next one).

    Without ``exercise``, say which exercises have hints and how many of them you have seen.
    """
    ledger = current()
    if exercise is None:
        print(_overview(ledger))
        return
    number, text = ledger.take(exercise, rung)
    _display(hint_bundle(exercise, number, len(ladder(exercise)), text))
    _show_record(ledger)


def _overview(ledger: HintLedger) -> str:
    names = list(ladders())
    if Path.cwd().name in course.assignments():  # a lesson's folder: its own exercises
        names = [n for n in course.lesson(Path.cwd().name).exercises if n in names]
    listed = ", ".join(f"{n} ({ledger.seen.get(n, 0)} of {len(ladder(n))} seen)" for n in names)
    return f'hint("name") shows the next hint of an exercise. Exercises with hints: {listed}.'


class HintButton:
    """The button under a failed check of ``exercise``: each press shows the next hint in the
    box below it (with the earlier ones this box has not shown yet)."""

    def __init__(self, exercise: str, ledger: HintLedger):
        import ipywidgets as widgets

        self.exercise, self.ledger = exercise, ledger
        self.total = len(ladder(exercise))
        self.shown = 0  # hints shown in this box
        self.button = widgets.Button(description=self.label(), button_style="info",
                                     layout=widgets.Layout(width="auto"))
        self.button.add_class("mhalib-hint-button")
        self.button.on_click(self.press)
        self.text = widgets.Output()
        self.text.add_class("mhalib-hint-text")
        aside = widgets.HTML(f'<small>or run <code>hint("{html.escape(exercise)}")</code> in a '
                             "cell</small>")
        self.box = widgets.VBox([widgets.HBox([self.button, aside]), self.text])
        self.box.add_class("mhalib-hint")

    def label(self) -> str:
        seen = self.ledger.seen.get(self.exercise, 0)
        if seen < self.total:
            return f"Show a hint ({seen + 1} of {self.total})"
        if self.shown < self.total:
            return f"Show the {self.total} hints again"
        return f"All {self.total} hints shown"

    def press(self, _=None) -> None:
        """Show the next hint (and any earlier one this box has not shown), then relabel."""
        target = min(self.ledger.seen.get(self.exercise, 0) + 1, self.total)
        for wanted in range(self.shown + 1, target + 1):
            number, text = self.ledger.take(self.exercise, wanted)
            data = hint_bundle(self.exercise, number, self.total, text, what_next=False)
            self.text.outputs += ({"output_type": "display_data", "data": data,
                                   "metadata": {}},)
        self.shown = max(self.shown, target)
        _show_record(self.ledger, here=False)  # a button press has no cell to show it in
        self.button.description = self.label()
        self.button.disabled = self.shown == self.total


def after_check(exercise: str, passed: bool) -> None:
    """What a test cell shows after its verdict: the hint button when the check failed, and in
    a release that records hint use, the record (after a pass only once a hint was taken)."""
    try:
        ladder(exercise)
    except NoHints:
        return
    ledger = current()
    if not passed:
        _display_widget(HintButton(exercise, ledger).box)
    if ledger.recording and (ledger.seen or not passed):
        _show_record(ledger, update=False)


def _display_widget(box) -> None:
    from IPython.display import display

    display(box)


def _preload_widgets() -> None:
    """In a learner's Jupyter kernel, import ipywidgets with the lesson's imports (about 0.1 s
    there) instead of at the first failed check, which must answer at once. Nothing happens
    elsewhere: IPython is not even imported if it was not already."""
    ipython = sys.modules.get("IPython")
    shell = ipython.get_ipython() if ipython is not None else None
    if shell is not None and "IPKernelApp" in shell.config and \
            not os.environ.get("NBGRADER_EXECUTION"):
        import ipywidgets  # noqa: F401


_preload_widgets()
