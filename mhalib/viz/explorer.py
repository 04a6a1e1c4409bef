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
    """
    import ipywidgets as widgets
    import matplotlib.pyplot as plt
    from IPython.display import display

    if not controls:
        raise ValueError("figure_explorer needs at least one control, got none")
    row = list(controls.values())
    output = widgets.Output()
    box = widgets.VBox([row[0] if len(row) == 1 else widgets.HBox(row), output])
    for name, control in controls.items():
        setattr(box, name, control)
    box.output, box.redraws = output, 0

    def redraw(change=None):
        with output:
            output.clear_output(wait=True)
            drawn = draw()
            fig = getattr(drawn, "figure", drawn)  # an Axes knows its Figure
            display(fig)
            plt.close(fig)
        box.redraws += 1

    for control in row:
        control.observe(redraw, names="value")
    redraw()
    return box
