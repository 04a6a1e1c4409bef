"""Plots and widgets used by the lessons.

``plot_attention`` (in :mod:`mhalib.viz.heatmap`) is shared by every lesson; each lesson's own
pictures and controls live in ``mhalib.viz.lessonNN``. Nothing here imports the answer key
(``mhalib.reference``): the lessons must also run where it is absent.
"""

from mhalib.viz.heatmap import plot_attention

__all__ = ["plot_attention"]
