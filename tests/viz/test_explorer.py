"""The shared widget: controls above a figure drawn again whenever one of them moves."""

import ipywidgets as widgets
import matplotlib.pyplot as plt
import pytest

from mhalib.viz.explorer import figure_explorer


def test_each_control_redraws_with_the_current_values():
    size = widgets.IntSlider(value=2, min=1, max=9)
    colour = widgets.Dropdown(options=["red", "blue"], value="red")
    drawn = []

    def draw():
        drawn.append((size.value, colour.value))
        fig, ax = plt.subplots()
        ax.plot(range(size.value), color=colour.value)
        return fig

    box = figure_explorer(draw, size=size, colour=colour)
    assert (box.size, box.colour) == (size, colour)
    assert isinstance(box.children[0], widgets.HBox) and box.children[1] is box.output
    assert box.redraws == 1 and drawn == [(2, "red")]
    size.value = 5
    colour.value = "blue"
    assert box.redraws == 3 and drawn[1:] == [(5, "red"), (5, "blue")]
    assert plt.get_fignums() == []  # shown in the output, not left open for a second display


def test_one_control_stands_alone_and_an_axes_is_enough():
    slider = widgets.IntSlider(value=1, min=1, max=3)
    box = figure_explorer(lambda: plt.subplots()[1], slider=slider)
    assert box.children[0] is slider
    slider.value = 3
    assert box.redraws == 2 and plt.get_fignums() == []


def test_no_control_is_an_error():
    with pytest.raises(ValueError, match="at least one control"):
        figure_explorer(lambda: plt.figure())


def mla_kv_cache_bytes(*args):  # an exercise of the course, as the release leaves it
    # YOUR CODE HERE
    raise NotImplementedError()


def test_an_unwritten_exercise_stops_the_first_drawing_in_the_cell(capsys):
    from mhalib.checks.api import needs

    slider = widgets.IntSlider(value=1, min=1, max=3)
    with needs(mla_kv_cache_bytes):
        figure_explorer(lambda: mla_kv_cache_bytes(slider.value), slider=slider)
        raise AssertionError("not reached: the cell stops at the first drawing")
    said = capsys.readouterr().out.strip()
    assert said.startswith("This cell runs your `mla_kv_cache_bytes`, which is not written yet")


def test_a_redraw_that_meets_an_unwritten_exercise_says_so_in_one_line(capsys):
    slider = widgets.IntSlider(value=1, min=1, max=3)
    drawn = []

    def draw():
        if slider.value == 3:
            mla_kv_cache_bytes(slider.value)
        drawn.append(slider.value)
        return plt.subplots()[0]

    box = figure_explorer(draw, slider=slider)
    capsys.readouterr()
    slider.value = 3  # outside a kernel the Output widget captures nothing: it is printed
    said = capsys.readouterr().out
    assert [line for line in said.splitlines() if "mla_kv_cache_bytes" in line] == [
        "This cell runs your `mla_kv_cache_bytes`, which is not written yet: finish it, run "
        "its cell, then run this cell again."]
    assert "Traceback" not in said and "Figure" not in said
    assert box.redraws == 2 and drawn == [1]
    slider.value = 2
    assert box.redraws == 3 and drawn == [1, 2] and plt.get_fignums() == []


def test_a_redraw_lets_any_other_error_through(monkeypatch):
    # outside IPython, as here: an Output widget inside a shell shows the traceback itself
    # (and a shell left by another test in this worker would swallow the error)
    import ipywidgets.widgets.widget_output as widget_output

    monkeypatch.setattr(widget_output, "get_ipython", lambda: None)
    slider = widgets.IntSlider(value=1, min=1, max=3)

    def draw():
        if slider.value == 2:
            raise NotImplementedError("torch has no kernel for this")
        return plt.subplots()[0]

    figure_explorer(draw, slider=slider)
    with pytest.raises(NotImplementedError, match="no kernel"):
        slider.value = 2
