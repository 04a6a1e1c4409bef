"""A quick check as an ipywidgets form: answer, press Check, read right/wrong and why."""

from __future__ import annotations

import html

from mhalib.quiz.question import FillIn, MultipleChoice


def build_form(question):
    """The form for ``question`` (FillIn or MultipleChoice) as an ipywidgets VBox.

    Stable CSS classes for tests and styling: ``mhalib-quiz`` on the box, ``mhalib-quiz-input``,
    ``mhalib-quiz-check`` on the button, ``mhalib-quiz-feedback`` on the feedback.
    """
    import ipywidgets as widgets

    title = widgets.HTML(f"<b>Quick check</b> <code>{question.id}</code><br>"
                         f"{html.escape(question.prompt)}")
    if isinstance(question, FillIn):
        answer = widgets.Text(placeholder="type an expression", description="____ =",
                              layout=widgets.Layout(width="420px"))
        template = widgets.HTML(f"<pre>{html.escape(question.template)}</pre>")
        parts = [title, template, answer]
    elif isinstance(question, MultipleChoice):
        labels = [f"{'abcdefgh'[i]}) {text}" for i, text in enumerate(question.options)]
        answer = widgets.RadioButtons(options=labels, value=None,
                                      layout=widgets.Layout(width="auto"))
        parts = [title, answer]
    else:
        raise TypeError(f"question must be a FillIn or MultipleChoice, got {type(question)}")
    answer.add_class("mhalib-quiz-input")
    button = widgets.Button(description="Check", button_style="primary")
    button.add_class("mhalib-quiz-check")
    feedback = widgets.HTML("")
    feedback.add_class("mhalib-quiz-feedback")

    def on_check(_):
        value = answer.value
        if isinstance(question, MultipleChoice):
            value = None if value is None else answer.options.index(value)
        result = question.judge(value)
        colour, mark = ("#1b7f3b", "Right") if result.correct else ("#b3261e", "Not yet")
        record = ""
        if result.correct:
            shown = repr(value if isinstance(question, FillIn) else "abcdefgh"[value])
            record = (f"<br>Record it for grading in the cell below: "
                      f"<code>{question.id} = {html.escape(shown)}</code>")
        message = html.escape(result.message.split(". ", 1)[-1] if result.correct
                              else result.message)
        feedback.value = (f'<div class="mhalib-quiz-{"right" if result.correct else "wrong"}" '
                          f'style="color:{colour}"><b>{mark}.</b> {message}{record}</div>')

    button.on_click(on_check)
    box = widgets.VBox(parts + [button, feedback])
    box.add_class("mhalib-quiz")
    box.check = on_check  # lets tests press the button without a browser
    box.answer = answer
    box.feedback = feedback
    return box
