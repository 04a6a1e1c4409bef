"""A synthetic class, written the way ``mhalib grade`` writes one, from a plan of known answers.

Choice made for speed (the class must be built in seconds, not graded for minutes): nothing
runs in the sandbox, but every verdict comes from the grader's own judges.

- **Exercises**: each distinct planted answer (a fixture function, the release's stub, an
  unnamed wrong answer) is probed once in this process and judged by the grader's scorer
  (:func:`mhalib.grading.scorer.judge_exercise`, the course rubric), exactly as a notebook's
  record would be; every student who gave that answer gets that verdict (the same seed for the
  whole class, so one judgement per answer), with the answer's source as the response the
  grader keeps (``ItemVerdict.response``, as :func:`mhalib.grading.unit._keep_answers` writes).
- **Quick checks**: every student's recorded answer goes through the grader's
  :func:`mhalib.grading.quick_checks.judge_recorded` with the instructor's keys (per student
  where the question draws numbers per learner, else once per distinct answer).
- **Written** as the grader writes: result files from :meth:`GradingResult.to_json_dict` at
  :meth:`CourseLayout.result`, gradebook rows decided by the grader's ``GradebookWriter``
  logic (:mod:`tests.classroom.report.synthetic_gradebook`).
"""

from __future__ import annotations

import copy
import inspect
import json
import re
import textwrap
from dataclasses import dataclass
from pathlib import Path

from mhalib.checks import get_exercise
from mhalib.checks.physical import SEAL_FORMAT
from mhalib.checks.probe import probe
from mhalib.grading.assignment import NotebookModel, load_assignment, nbgrader_meta
from mhalib.grading.gradebook import ensure_assignment
from mhalib.grading.plan import Issue
from mhalib.grading.quick_checks import judge_recorded
from mhalib.grading.records import MAX_RESPONSE_CHARS, GradingResult, ItemVerdict
from mhalib.grading.rubric import default_rubric
from mhalib.grading.scorer import grade_cell_scores, judge_exercise
from mhalib.grading.writer import CourseLayout
from mhalib.quiz import all_questions
from mhalib.quiz.keys import instructor_keys
from mhalib.quiz.record import Recorded
from tests.checkout import COURSE
from tests.classroom.report.synthetic_gradebook import write_gradebook
from tests.classroom.report.synthetic_plan import REPO, ClassPlan, ItemPlan

SEED = 2026


@dataclass
class SyntheticClass:
    plan: ClassPlan
    course: Path
    models: dict[str, NotebookModel]
    results: dict[str, list[GradingResult]]


def _unnamed(*args, **kwargs):
    return None


def _stub(*args, **kwargs):
    raise NotImplementedError()


def _release_source(model: NotebookModel, exercise: str) -> str:
    return next(str(c["source"]) for c in model.release["cells"]
                if nbgrader_meta(c).get("grade_id") == exercise)


def _answer(model: NotebookModel, exercise: str, planted) -> tuple[object, str]:
    """(function to probe, answer cell source) of a planted exercise answer."""
    if planted == "blank":
        return _stub, _release_source(model, exercise)
    if planted == "unnamed":
        return _unnamed, f"def {exercise}(*args, **kwargs):\n    return None\n"
    source = textwrap.dedent(inspect.getsource(planted))
    return planted, re.sub(rf"def {planted.__name__}\(", f"def {exercise}(", source, count=1)


def _exercise_verdicts(item: ItemPlan, model: NotebookModel, rubric) -> list[ItemVerdict]:
    """One verdict per student of ``item`` (weakest first), each distinct answer judged once."""
    judged: dict[int, ItemVerdict] = {}
    verdicts = []
    for planted, _ in item.answers():
        if id(planted) not in judged:
            func, source = _answer(model, item.item, planted)
            record = probe(get_exercise(item.item), func, SEED, "grading")
            seal = {"format": SEAL_FORMAT, "exercise": item.item, "session": "generic",
                    "seed": SEED, "record": record, "facts": {}}
            verdict, credit = judge_exercise(item.item, {"generic": json.dumps(seal)}, True, None,
                                             rubric)
            verdict.max_points = model.points_of(item.item)
            verdict.credit = credit.note(verdict.max_points)
            verdict.points = verdict.share * verdict.max_points
            verdict.response = {"answer": source[:MAX_RESPONSE_CHARS],
                                "blank": planted == "blank"}
            judged[id(planted)] = verdict
        verdicts.append(copy.deepcopy(judged[id(planted)]))
    return verdicts


def _quick_check_verdicts(item: ItemPlan, model: NotebookModel, students: list[str],
                          keys: dict) -> list[ItemVerdict]:
    per_learner = getattr(all_questions()[item.item], "variant", None) is not None
    judged: dict[tuple, ItemVerdict] = {}
    verdicts = []
    for student, (answer, _) in zip(students, item.answers()):
        cache = (repr(answer), student if per_learner else None)
        if cache not in judged:
            recorded = None if answer is None else Recorded(item.item, answer, None)
            verdict = judge_recorded(item.item, recorded, student, keys)
            verdict.max_points = model.points_of(item.item)
            verdict.points = verdict.share * verdict.max_points
            judged[cache] = verdict
        verdicts.append(copy.deepcopy(judged[cache]))
    return verdicts


def build_results(plan: ClassPlan, models: dict[str, NotebookModel],
                  keys_dir: Path | None = None) -> dict[str, list[GradingResult]]:
    """Every student's :class:`GradingResult` per assignment of ``plan``."""
    rubric = default_rubric()
    by_student: dict[str, dict[str, dict[str, ItemVerdict]]] = {}
    keys = {a: instructor_keys(a, keys_dir or COURSE.keys) for a in plan.assignments}
    for item in plan.items:
        model = models[item.assignment]
        verdicts = (_exercise_verdicts(item, model, rubric) if item.kind == "exercise" else
                    _quick_check_verdicts(item, model, plan.students, keys[item.assignment]))
        for student, verdict in zip(plan.students, verdicts):
            by_student.setdefault(item.assignment, {}).setdefault(student, {})[item.item] = \
                verdict
    flagged = plan.flagged()
    results: dict[str, list[GradingResult]] = {}
    for assignment, students in by_student.items():
        model = models[assignment]
        order = [*model.exercises, *model.questions]
        for student, verdicts in students.items():
            ordered = {name: verdicts[name] for name in order if name in verdicts}
            issues = [Issue("integrity", "the notebook altered its kernel (synthetic); scores "
                            "were decided outside it, so this changed nothing.")
                      ] if student in flagged else []
            results.setdefault(assignment, []).append(GradingResult(
                student=student, assignment=assignment, notebook=model.notebook, seed=SEED,
                verdicts=ordered, grade_cells=grade_cell_scores(model, ordered), issues=issues,
                sandbox="none", timestamp="2026-01-15 12:00:00"))
    return results


def load_models(assignments: list[str], source: Path = REPO / "solutions"
                ) -> dict[str, NotebookModel]:
    return {a: load_assignment(a, source)[0] for a in assignments}


def write_results(course: Path, results: dict[str, list[GradingResult]],
                  models: dict[str, NotebookModel]) -> None:
    """Result files and gradebook rows, as ``mhalib grade`` leaves them."""
    layout = CourseLayout.at(course)
    layout.root.mkdir(parents=True, exist_ok=True)
    for assignment, graded in results.items():
        model = models[assignment]
        ensure_assignment(layout.db_url, model)
        for result in graded:
            path = layout.result(result.student, assignment, model.notebook)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(result.to_json_dict(), indent=1, ensure_ascii=False)
                            + "\n", encoding="utf-8")
        write_gradebook(layout.db_url, assignment, model, graded)


def synthetic_class(course: Path, plan: ClassPlan, models: dict[str, NotebookModel] | None = None
                    ) -> SyntheticClass:
    """Build and write the class of ``plan`` into the course folder ``course``."""
    models = models or load_models(plan.assignments)
    results = build_results(plan, models)
    write_results(course, results, models)
    return SyntheticClass(plan, Path(course), models, results)
