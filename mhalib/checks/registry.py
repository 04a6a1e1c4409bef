"""Every contract exercise name -> its checker, loaded lazily from its lesson's checker module.

The lessons, their notebooks and exercises come from the course manifest (:mod:`mhalib.course`).
"""

from __future__ import annotations

import importlib

from mhalib import course

# assignment id -> (checker module, exercise names in notebook order)
LESSONS = {lesson.assignment: (lesson.checker, lesson.exercise_names)
           for lesson in course.LESSONS}
NOTEBOOKS = {lesson.assignment: lesson.notebook for lesson in course.LESSONS}


def exercises_of(assignment: str) -> list[str]:
    """Contract exercise names of an assignment id, in notebook order."""
    return list(course.lesson(assignment).exercise_names)


def get_exercise(name: str):
    """The checker object of exercise ``name``."""
    module = importlib.import_module(course.lesson_of_exercise(name).checker)
    return module.EXERCISES[name]
