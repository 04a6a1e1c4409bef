"""Every lesson's quick checks, their keys and the test answers (answers_lessonNN.py)."""

from __future__ import annotations

import importlib

from mhalib import course
from mhalib.quiz.keys import instructor_keys, parse_key

LESSONS = [lesson for lesson in course.LESSONS]
LEARNERS = ("student:alice", "student:bob-2", "seed:1", "seed:99", "seed:123456789")


def bank(lesson) -> dict:
    return importlib.import_module(lesson.quiz).QUESTIONS


def answers(lesson):
    return importlib.import_module(f"tests.quiz.answers_lesson{lesson.number}")


def all_items():
    """(lesson, question id, question, parsed key, raw key) of the whole course."""
    for lesson in LESSONS:
        keys = instructor_keys(lesson.assignment)
        for qid, question in bank(lesson).items():
            yield lesson, qid, question, parse_key(question, keys[qid]), keys[qid]
