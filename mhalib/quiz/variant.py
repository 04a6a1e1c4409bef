"""Whose numbers: the learner's variant of a quick check, and the generator it seeds.

A variant is a short string. ``student:<id>`` when the learner's nbgrader student id is known
(``MHALIB_STUDENT_ID``, else ``JUPYTERHUB_USER`` on a class hub, where the login is the student
id); otherwise ``seed:<n>``, a number drawn once and recorded in the notebook with every answer.
The grader draws the same numbers from the recorded variant; it checks a ``student:`` variant
against the student whose submission it grades.
"""

from __future__ import annotations

import hashlib
import os
import re
import secrets

import numpy as np

_VARIANT = re.compile(r"(student:[A-Za-z0-9_.@+-]{1,100}|seed:[0-9]{1,20})")


def is_variant(text) -> bool:
    return isinstance(text, str) and _VARIANT.fullmatch(text) is not None


def for_student(student_id: str) -> str:
    variant = f"student:{student_id}"
    if not is_variant(variant):
        raise ValueError(f"student_id={student_id!r} is not a usable student id "
                         f"(letters, digits and _ . @ + - only, at most 100)")
    return variant


def known_student() -> str | None:
    """The learner's student id where the environment says it, else None."""
    for name in ("MHALIB_STUDENT_ID", "JUPYTERHUB_USER"):
        value = os.environ.get(name, "").strip()
        if value and is_variant(f"student:{value}"):
            return value
    return None


def fresh_seed() -> str:
    return f"seed:{secrets.randbelow(10**12)}"


def rng_for(variant: str, question_id: str) -> np.random.Generator:
    """The generator of ``question_id``'s numbers (and option order) for ``variant``."""
    if not is_variant(variant):
        raise ValueError(f"variant={variant!r} must look like 'student:<id>' or 'seed:<digits>'")
    digest = hashlib.sha256(f"mhalib-quiz-variant:{variant}:{question_id}".encode()).digest()
    return np.random.default_rng(int.from_bytes(digest[:8], "little"))
