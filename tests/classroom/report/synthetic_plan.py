"""Who answers what in the synthetic class: planted from the course's own fixture answers.

Students ``learner-000`` ... are ranked by ability (a higher number is stronger). Every item
splits them into bands, weakest first, of sizes fixed here, so every count the report must
recover is known before anything is graded:

- exercise: left blank (the release's stub) 1/24, a wrong answer no mistake model names 1/12,
  the fixture's second wrong answer (``WRONG[exercise]``, planted mistake B) 1/8, its first
  (mistake A) 1/4, and a right answer (``RIGHT[exercise]``, cycled) for the rest;
- multiple choice: no answer 1/24, the first distractor 1/8, the second 1/8, the third 1/24 (none
  on the first multiple-choice question of each lesson: a distractor nobody picks), the key
  (``ACCEPT``, cycled: index or option text) for the rest; one question of the class is planted
  broken (the last multiple-choice question of the first lesson that has two or more): its
  stronger half picks the first distractor, its weaker half the key;
- fill-in: no answer 1/24, another wrong answer 1/12, known slip B 1/8, known slip A 1/4 (slips:
  ``REJECT`` answers of tests/quiz/answers/lessonNN.py written as one of the key's
  ``mistakes``), a right answer (``ACCEPT``, cycled) for the rest. The other wrong answer is
  the first ``REJECT`` answer written as no slip that the quiz judge does not match to a slip
  by value either, for any learner's numbers (``np.sqrt(q.shape[0])`` is the key's
  ``math.sqrt(q.shape[0])``);
- notebook flag ``integrity`` (asks for a look, changes no score) on students 7, 27, 47...
"""

from __future__ import annotations

import importlib
import runpy
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path

from mhalib import course
from mhalib.quiz import all_questions
from mhalib.quiz.judge import judge
from mhalib.quiz.keys import instructor_keys, parse_key
from mhalib.quiz.question import MultipleChoice
from mhalib.quiz.variant import for_student, rng_for
from tests.checkout import COURSE

REPO = Path(__file__).resolve().parents[3]
NO_ANSWER, OTHER = "no answer", "other"
FLAGGED_EVERY, FLAGGED_AT = 20, 7


def learner_ids(students: int) -> list[str]:
    """``learner-000``, ``learner-001``...: the students, weakest first."""
    return [f"learner-{i:03d}" for i in range(students)]


def band_sizes(students: int, fractions: list[Fraction]) -> list[int]:
    """Sizes of the bands with these ``fractions`` (floored), the last band taking the rest."""
    sizes = [int(students * f) for f in fractions]
    return [*sizes, students - sum(sizes)]


@dataclass
class Band:
    """``count`` students giving ``answer``; ``expect``: what the report must call it (an
    outcome or mistake name for an exercise; an option index, a slip, "right", "other" or
    "no answer" for a quick check)."""

    count: int
    answer: object
    expect: str | int


@dataclass
class ItemPlan:
    assignment: str
    item: str
    kind: str  # "exercise", "multiple_choice" or "fill_in"
    bands: list[Band]  # weakest first
    broken: bool = False

    def answers(self) -> list[tuple[object, str | int]]:
        """(answer, expectation) of each student, weakest first."""
        return [(band.answer, band.expect) for band in self.bands for _ in range(band.count)]

    def count(self, expect) -> int:
        return sum(band.count for band in self.bands if band.expect == expect)


@dataclass
class ClassPlan:
    students: list[str]
    items: list[ItemPlan] = field(default_factory=list)

    @property
    def assignments(self) -> list[str]:
        return list(dict.fromkeys(item.assignment for item in self.items))

    def flagged(self) -> set[str]:
        return {s for i, s in enumerate(self.students) if i % FLAGGED_EVERY == FLAGGED_AT}


def _fixtures(lesson) -> tuple[object, dict]:
    checks = importlib.import_module(f"tests.checks.answers.lesson{lesson.number}")
    quiz = runpy.run_path(str(REPO / "tests" / "quiz" / "answers" / f"lesson{lesson.number}.py"))
    return checks, quiz


def _exercise_plan(assignment: str, exercise: str, checks, students: int) -> ItemPlan:
    wrong = list(checks.WRONG[exercise].items())
    right = checks.RIGHT[exercise][:2]
    sizes = band_sizes(students, [Fraction(1, 24), Fraction(1, 12), Fraction(1, 8),
                                  Fraction(1, 4)])
    bands = [Band(sizes[0], "blank", "blank"), Band(sizes[1], "unnamed", "unnamed"),
             Band(sizes[2], wrong[1][1], wrong[1][0]), Band(sizes[3], wrong[0][1], wrong[0][0])]
    per_right = [sizes[4] // len(right)] * len(right)
    per_right[-1] += sizes[4] - sum(per_right)
    bands += [Band(n, fn, "passed") for n, fn in zip(per_right, right)]
    return ItemPlan(assignment, exercise, "exercise", bands)


def _cycled(count: int, answers: list, expect) -> list[Band]:
    return [Band(1, answers[i % len(answers)], expect) for i in range(count)]


def _choice_plan(assignment: str, qid: str, key, accept: list, students: int,
                 unpicked: bool, broken: bool) -> ItemPlan:
    distractors = [i for i in range(len(all_questions()[qid].options)) if i != key.answer]
    keys = [a for a in accept if isinstance(a, (int, str))] or [key.answer]
    if broken:
        weak = students // 2
        return ItemPlan(assignment, qid, "multiple_choice",
                        [*_cycled(weak, keys, key.answer),
                         Band(students - weak, distractors[0], distractors[0])], broken=True)
    third = Fraction(0) if unpicked else Fraction(1, 24)
    sizes = band_sizes(students, [Fraction(1, 24), Fraction(1, 8), Fraction(1, 8), third])
    bands = [Band(sizes[0], None, NO_ANSWER), Band(sizes[1], distractors[0], distractors[0]),
             Band(sizes[2], distractors[1], distractors[1]),
             Band(sizes[3], distractors[2], distractors[2]),
             *_cycled(sizes[4], keys, key.answer)]
    return ItemPlan(assignment, qid, "multiple_choice", bands)


def _same(a: str, b: str) -> bool:
    return a.replace(" ", "") == b.replace(" ", "")


def _no_slip(qid: str, key, answer: str, students: int) -> bool:
    """True when the judge finds ``answer`` wrong and no known slip for every learner of the
    class (a question with numbers drawn per learner is judged on each one's numbers)."""
    question = all_questions()[qid]
    learners = learner_ids(students) if question.variant else ["-"]
    for student in learners:
        numbers = question.numbers(rng_for(for_student(student), qid)) if question.variant \
            else {}
        feedback = judge(question, key, answer, numbers)
        if feedback.correct or feedback.slip is not None:
            return False
    return True


def _fill_in_plan(assignment: str, qid: str, key, accept: list, reject: list,
                  students: int) -> ItemPlan:
    slips = [(answer, slip) for answer in reject for slip in key.mistakes
             if isinstance(answer, str) and _same(answer, slip)]
    slips = list(dict((slip, (answer, slip)) for answer, slip in slips).values())[:2]
    others = [a for a in reject if isinstance(a, str) and not any(
        _same(a, slip) for slip in key.mistakes) and _no_slip(qid, key, a, students)]
    sizes = band_sizes(students, [Fraction(1, 24), Fraction(1, 12), Fraction(1, 8),
                                  Fraction(1, 4)])
    bands = [Band(sizes[0], None, NO_ANSWER)]
    if others:
        bands.append(Band(sizes[1], others[0], OTHER))
    else:
        sizes[4] += sizes[1]
    ordered = ([None, None] + slips[::-1])[-2:]
    for size, planted in zip((sizes[2], sizes[3]), ordered):  # slip B (1/8), then A (1/4)
        if planted is None:
            sizes[4] += size
        else:
            bands.append(Band(size, planted[0], planted[1]))
    bands += _cycled(sizes[4], accept, "right")
    return ItemPlan(assignment, qid, "fill_in", bands)


def make_plan(students: int, assignments: list[str], broken_question: bool = True,
              keys_dir: Path | None = None) -> ClassPlan:
    """The plan for ``students`` learners over ``assignments`` (module docstring)."""
    plan = ClassPlan(learner_ids(students))
    questions = all_questions()
    broken = None
    for assignment in assignments:
        lesson = course.lesson(assignment)
        checks, quiz = _fixtures(lesson)
        for exercise in lesson.exercise_names:
            plan.items.append(_exercise_plan(assignment, exercise, checks, students))
        keys = instructor_keys(assignment, keys_dir or COURSE.keys)
        choices = [q for q in keys if isinstance(questions[q], MultipleChoice)]
        if broken_question and broken is None and len(choices) > 1:
            broken = choices[-1]
        for qid, raw in keys.items():
            key = parse_key(questions[qid], raw)
            accept = quiz["ACCEPT"].get(qid, [])
            if isinstance(questions[qid], MultipleChoice):
                plan.items.append(_choice_plan(
                    assignment, qid, key, accept, students, unpicked=qid == choices[0],
                    broken=qid == broken))
            else:
                plan.items.append(_fill_in_plan(assignment, qid, key, accept,
                                                quiz["REJECT"].get(qid, []), students))
    return plan
