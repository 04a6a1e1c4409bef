"""Every lesson's quick checks, their keys and the test answers (tests/quiz/answers/lessonNN.py)."""

from __future__ import annotations

import importlib

from mhalib import course
from mhalib.quiz.keys import parse_key
from tests.checkout import keys_of

LESSONS = [lesson for lesson in course.LESSONS]
LEARNERS = ("student:alice", "student:bob-2", "seed:1", "seed:99", "seed:123456789")


def bank(lesson) -> dict:
    return importlib.import_module(lesson.quiz).QUESTIONS


def answers(lesson):
    return importlib.import_module(f"tests.quiz.answers.lesson{lesson.number}")


def all_items():
    """(lesson, question id, question, parsed key, raw key) of the whole course."""
    for lesson in LESSONS:
        keys = keys_of(lesson.assignment)
        for qid, question in bank(lesson).items():
            yield lesson, qid, question, parse_key(question, keys[qid]), keys[qid]
