"""The widget of every lesson: controls above a figure that is drawn again when they move."""

from __future__ import annotations

from collections.abc import Callable


def figure_explorer(draw: Callable[[], object], **controls):
    """A ``VBox`` of ``controls`` (side by side) above an ``Output`` showing ``draw()``.

    ``draw`` reads the controls' values itself and returns a matplotlib Figure (or Axes); it is
    called once now and again whenever any control's ``value`` changes, and its figure is
    closed after display so that the notebook does not show it twice. The box keeps each
    control under its keyword (``box.slider``...), ``box.output``, and ``box.redraws``: the
    number of drawings (the tests read it).

    The first drawing happens in the cell: a learner's function that is still the release's
    stub stops the cell there, where the notebook's ``with needs(...)`` says so in one line and
    no widget appears. Every later drawing runs inside the widget's output under ``needs`` for
    all the course's exercises, so an unwritten exercise met there is the same one line, never
    a traceback hidden in the widget.
    """
    import ipywidgets as widgets

    from mhalib import course
    from mhalib.checks.api import needs

    if not controls:
        raise ValueError("figure_explorer needs at least one control, got none")
    row = list(controls.values())
    first = draw()
    output = widgets.Output()
    box = widgets.VBox([row[0] if len(row) == 1 else widgets.HBox(row), output])
    for name, control in controls.items():
        setattr(box, name, control)
    box.output, box.redraws = output, 1
    with output:
        _show(first)

    def redraw(change=None):
        with output:
            output.clear_output(wait=True)
            with needs(*course.exercise_names()):
                _show(draw())
        box.redraws += 1

    for control in row:
        control.observe(redraw, names="value")
    return box


def _show(drawn) -> None:
    """Display a Figure (or an Axes' Figure) and close it, so it is not shown a second time."""
    import matplotlib.pyplot as plt
    from IPython.display import display

    fig = getattr(drawn, "figure", drawn)
    display(fig)
    plt.close(fig)
