"""Checkers behind every test cell: a probe that runs the learner's code, a judge that scores.

See ``check`` (test cells), ``record_exercises`` (the grader, inside the sandbox) and
``judge_seals`` / ``judge_record`` (the grader, in a clean process). Each lesson's checkers are in
``mhalib.checks.lessonNN`` (``EXERCISES``), found through the course manifest
(:mod:`mhalib.course`); an :class:`~mhalib.checks.exercise.Exercise` names likely slips with
mistake models (:class:`~mhalib.checks.exercise.WrongAnswer`,
:class:`~mhalib.checks.exercise.Symptom`), and :mod:`mhalib.checks.work` measures the work
a learner's function does. ``hint`` (from :mod:`mhalib.hints`) is exported here too, so that a
lesson imports it with ``check``.
"""

from mhalib.checks.api import CheckFailed, check, needs
from mhalib.checks.judge import judge_record, judge_seals
from mhalib.checks.record import record_exercises
from mhalib.checks.registry import LESSONS, NOTEBOOKS, exercises_of, get_exercise
from mhalib.checks.verdict import Verdict
from mhalib.hints import hint

__all__ = ["CheckFailed", "LESSONS", "NOTEBOOKS", "Verdict", "check", "exercises_of",
           "get_exercise", "hint", "judge_record", "judge_seals", "needs", "record_exercises"]
