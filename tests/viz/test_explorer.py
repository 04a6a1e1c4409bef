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
