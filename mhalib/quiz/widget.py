"""A quick check as an ipywidgets form; the answer given in it is the one that is graded.

Below the form sits the record (:mod:`mhalib.quiz.record`), a display updated in place at every
Check (practice) or Record (assessed) press, so saving the notebook saves the answer: there is
nothing to copy anywhere else. Practice mode says at once whether the answer is right and why;
assessed mode says only that it was recorded.

Stable CSS classes for tests and styling: ``mhalib-quiz`` on the box, ``mhalib-quiz-input``,
``mhalib-quiz-check`` on the button, ``mhalib-quiz-feedback`` on the feedback,
``mhalib-quiz-record`` on the record.
"""

from __future__ import annotations

import html

from mhalib.quiz import record
from mhalib.quiz.judge import LETTERS, judge
from mhalib.quiz.keys import parse_key
from mhalib.quiz.question import FillIn, MultipleChoice
from mhalib.quiz.variant import rng_for


class QuickCheckForm:
    """The form of one quick check in this kernel (displayed when it is a cell's result)."""

    def __init__(self, question, session, assignment: str):
        import ipywidgets as widgets

        self.question = question
        self.session = session
        self.variant = session.variant
        key_data = session.key_data(question.id, assignment)
        self.key = parse_key(question, key_data) if key_data is not None else None
        self.practice = self.key is not None
        self.numbers = question.numbers(rng_for(self.variant, question.id)) \
            if isinstance(question, FillIn) else {}
        self._handle = None
        previous = session.previous_answer(question.id)
        mode = "practice: checked at once" if self.practice else \
            "assessed: recorded, scored when feedback is returned"
        title = widgets.HTML(f"<b>Quick check</b> <code>{question.id}</code> <i>({mode})</i>"
                             f"<br>{html.escape(question.shown_prompt(self.numbers))}")
        if isinstance(question, FillIn):
            # continuous_update=False: the value reaches the kernel once, when the field loses
            # focus (pressing the button), so the press never overtakes the last keystrokes
            self.answer = widgets.Text(value=str(previous or ""), placeholder="type an expression",
                                       description="____ =", continuous_update=False,
                                       layout=widgets.Layout(width="480px"))
            parts = [title, widgets.HTML(f"<pre>{html.escape(question.template)}</pre>"),
                     widgets.HTML(f"<small>{html.escape(question.names_line())}</small>"),
                     self.answer]
            self.order: list[int] = []
        elif isinstance(question, MultipleChoice):
            self.order = question.order(rng_for(self.variant, question.id))
            labels = [f"{LETTERS[shown]}) {question.options[index]}"
                      for shown, index in enumerate(self.order)]
            chosen = question.index_of(previous) if previous is not None else None
            self.answer = widgets.RadioButtons(
                options=labels, value=None if chosen is None else labels[self.order.index(chosen)],
                layout=widgets.Layout(width="auto"))
            parts = [title, self.answer]
        else:
            raise TypeError(f"question must be a FillIn or MultipleChoice, got "
                            f"{type(question).__name__}")
        self.answer.add_class("mhalib-quiz-input")
        self.button = widgets.Button(description="Check" if self.practice else "Record answer",
                                     button_style="primary")
        self.button.add_class("mhalib-quiz-check")
        self.feedback = widgets.HTML("")
        self.feedback.add_class("mhalib-quiz-feedback")
        self.button.on_click(self.check)
        # an answer committed in the field (Enter, or leaving it) or an option picked is checked
        # or recorded at once, too: the button press can reach the kernel before the new value
        self.answer.observe(self.check, names="value")
        self.box = widgets.VBox([*parts, self.button, self.feedback])
        self.box.add_class("mhalib-quiz")

    def value(self):
        """The answer in the form: the expression text, or the chosen canonical index."""
        if isinstance(self.question, MultipleChoice):
            if self.answer.value is None:
                return None
            return self.order[self.answer.options.index(self.answer.value)]
        return self.answer.value.strip() or None

    def shown(self, value) -> str:
        if value is None:
            return ""
        if isinstance(self.question, MultipleChoice):
            return f"{LETTERS[self.order.index(value)]}) {self.question.options[value]}"
        return str(value)

    def record_bundle(self) -> dict:
        value = self.session.previous_answer(self.question.id)  # this kernel's, or saved
        return record.bundle(self.question.id, value, self.variant, self.shown(value))

    def check(self, _=None) -> None:
        """Record the answer in the form; in practice mode also say whether it is right."""
        value = self.value()
        if value is None:
            self.feedback.value = _note("wrong", "Not yet", "Give an answer first.", "")
            return
        shown = self.shown(value)
        self.session.answers[self.question.id] = value
        if self._handle is not None:
            self._handle.update(self.record_bundle(), raw=True)
        if not self.practice:
            self.feedback.value = _note("recorded", "Recorded",
                                        "It is scored when your instructor returns feedback. "
                                        "Save the notebook to keep it.", shown)
            return
        result = judge(self.question, self.key, value, self.numbers)
        message = result.message.removeprefix("Right. ")
        self.feedback.value = _note("right" if result.correct else "wrong",
                                    "Right" if result.correct else "Not yet", message, shown)

    def _ipython_display_(self) -> None:
        from IPython.display import display

        display(self.box)
        self._handle = display(self.record_bundle(), raw=True, display_id=True)


def _note(kind: str, mark: str, message: str, answer: str) -> str:
    """The feedback's HTML; ``data-answer`` names the answer it is about (for tests)."""
    colour = {"right": "#1b7f3b", "wrong": "#b3261e"}.get(kind, "#1a4f8b")
    return (f'<div class="mhalib-quiz-{kind}" data-answer="{html.escape(answer)}" '
            f'style="color:{colour}"><b>{mark}.</b> {html.escape(message)}</div>')
