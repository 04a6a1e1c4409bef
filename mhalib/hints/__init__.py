"""Hints: for every exercise a ladder of 2 to 4 hints, from a nudge to nearly the answer.

In a lesson, ``hint("attention")`` shows the next hint of ``attention`` each time it runs, and
a failed check offers a button, "Show a hint (1 of 3)", that does the same under its verdict.
In an assessed release the notebook records how many hints of each exercise were seen, and
``mhalib grade`` reports it (the rubric may price it; by default hints are free).

- :mod:`~mhalib.hints.ladder`: the ladders, ``HINTS`` of ``mhalib.hints.lessonNN``, found
  through the course manifest (:attr:`mhalib.course.Lesson.hints`)
- :mod:`~mhalib.hints.ledger`: which hints this kernel has shown, and whether they are recorded
- :mod:`~mhalib.hints.record`: the record saved with the notebook, and the grader's reading
- :mod:`~mhalib.hints.show`: ``hint`` and the button
"""

from mhalib.hints.ladder import NoHints, ladder, ladders
from mhalib.hints.show import hint

__all__ = ["NoHints", "hint", "ladder", "ladders"]
