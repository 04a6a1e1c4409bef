"""Quick-check keys: instructor data that never ships inside the package.

Each lesson's keys are a ``KEYS`` dict in ``lessonNN.py`` of the instructor's keys folder (a
course checkout's ``grading/quick_checks``; ``--keys`` or ``MHALIB_QUICK_CHECK_KEYS`` name
another, :mod:`mhalib.classroom.course_folder` finds it). Per question id:

- fill-in: ``{"answer": "<expression over the question's names>", "explanation": ...,
  "hint": ..., "mistakes": {"<wrong expression>": "why it is wrong"},
  "accepted": ["<other right expressions>"]}``;
- multiple choice: ``{"answer": <canonical option index>, "explanation": ...,
  "why_wrong": {<index>: "the misconception behind that option"}}``.

Explanations of a variant question may use ``{name}`` fields of the learner's numbers and
``{value}`` (the right value). A practice release copies the keys of its lesson into
``quick_checks.json`` beside the notebook (instant feedback); an assessed release writes only
the mode there, and the keys stay on the instructor's side, read by the grader alone. This
module reads both; :mod:`mhalib.classroom.release` writes the release file.
"""

from __future__ import annotations

import json
import runpy
from dataclasses import dataclass
from pathlib import Path

from mhalib import course

RELEASE_FILE = "quick_checks.json"
MODES = ("practice", "assessed")
KEYS_VARIABLE = "MHALIB_QUICK_CHECK_KEYS"  # the instructor's keys folder, when set


class BadKeys(ValueError):
    """A key file is missing a question, or an entry is malformed (the message says which)."""


@dataclass(frozen=True)
class FillInKey:
    answer: str
    explanation: str
    hint: str = ""
    mistakes: dict[str, str] | None = None
    accepted: tuple[str, ...] = ()


@dataclass(frozen=True)
class ChoiceKey:
    answer: int
    explanation: str
    why_wrong: dict[int, str] | None = None


def parse_key(question, data) -> FillInKey | ChoiceKey:
    """The key of ``question`` from its data entry, validated."""
    from mhalib.quiz.question import FillIn, MultipleChoice

    where = f"key of {question.id}"
    if not isinstance(data, dict) or "answer" not in data or "explanation" not in data:
        raise BadKeys(f"{where}: an entry needs 'answer' and 'explanation', got {data!r:.120}")
    if isinstance(question, MultipleChoice):
        answer = data["answer"]
        if isinstance(answer, bool) or not isinstance(answer, int) or not (
                0 <= answer < len(question.options)):
            raise BadKeys(f"{where}: answer={answer!r} is not an option index "
                            f"0..{len(question.options) - 1}")
        why = {int(i): str(text) for i, text in dict(data.get("why_wrong", {})).items()}
        missing = set(range(len(question.options))) - {answer} - set(why)
        if missing:
            raise BadKeys(f"{where}: why_wrong has no explanation for options "
                            f"{sorted(missing)}")
        return ChoiceKey(answer, str(data["explanation"]), why)
    if isinstance(question, FillIn):
        if not isinstance(data["answer"], str):
            raise BadKeys(f"{where}: answer={data['answer']!r} must be an expression string")
        return FillInKey(data["answer"], str(data["explanation"]), str(data.get("hint", "")),
                         {str(k): str(v) for k, v in dict(data.get("mistakes", {})).items()},
                         tuple(str(a) for a in data.get("accepted", ())))
    raise TypeError(f"question must be a FillIn or MultipleChoice, got {type(question).__name__}")


def instructor_keys(assignment: str, folder: Path) -> dict[str, dict]:
    """The raw ``KEYS`` of one lesson from the instructor's keys ``folder``."""
    lesson = course.lesson(assignment)
    path = Path(folder) / lesson.quick_check_keys
    if not path.is_file():
        raise FileNotFoundError(f"no quick-check keys for {assignment}: {path} is missing "
                                f"(name the folder that holds them with --keys or "
                                f"{KEYS_VARIABLE})")
    keys = runpy.run_path(str(path)).get("KEYS")
    if not isinstance(keys, dict):
        raise BadKeys(f"{path}: defines no KEYS dict")
    return keys


def read_release_file(folder: Path) -> dict | None:
    """The release's ``quick_checks.json`` in ``folder`` (None when absent or unreadable)."""
    path = Path(folder) / RELEASE_FILE
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and data.get("mode") in MODES else None
