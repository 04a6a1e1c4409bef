"""Grading a class: find submissions, back up, run the units, write, give feedback, export."""

from __future__ import annotations

import hashlib
import secrets
import sys
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from mhalib.grading.assignment import NotebookModel, load_assignment
from mhalib.grading.backends import run_dask, run_local
from mhalib.grading.export import export_course
from mhalib.grading.flags import needs_review
from mhalib.grading.gradebook import backup, ensure_assignment, integrity_check
from mhalib.grading.intake import Submission, discover
from mhalib.grading.records import GradingResult, GradingTask
from mhalib.grading.rubric import Rubric, default_rubric
from mhalib.grading.sandbox.limits import Limits
from mhalib.grading.sandbox_host import choose_mode
from mhalib.grading.similarity import similarity_report, write_similarity
from mhalib.grading.writer import CourseLayout, ResultWriter


@dataclass
class GradingRun:
    """What one ``mhalib grade`` call asks for: ``source`` (the instructor master), ``course``
    (the folder a class fills) and ``keys`` (the instructor's quick-check keys) are named by
    the caller (``mhalib grade`` finds them with :mod:`mhalib.classroom.course_folder`)."""

    assignment: str
    submitted: Path
    source: Path
    course: Path
    keys: Path
    db_url: str | None = None
    jobs: int = 1
    scheduler: str | None = None
    sandbox: str = "auto"
    seed: int | None = None
    students: list[str] | None = None
    limits: Limits = field(default_factory=Limits)
    rubric: Rubric = field(default_factory=default_rubric)
    class_cache: bool = True  # run marked instructor cells once per class (class_run)
    feedback: bool = True
    progress: bool = True


@dataclass
class RunSummary:
    graded: int = 0
    flagged: list[str] = field(default_factory=list)
    seconds: float = 0.0
    sandbox: str = ""
    backup: Path | None = None
    exports: list[Path] = field(default_factory=list)
    feedback: list[Path] = field(default_factory=list)
    integrity: str = ""
    results: list[GradingResult] = field(default_factory=list)
    similarity: list[Path] = field(default_factory=list)  # json, csv, html
    similar_pairs: int = 0


def unit_seed(base: int | None, student: str, notebook: str) -> int:
    """A fresh random seed per notebook, or one derived from ``base`` for a reproducible run."""
    if base is None:
        return secrets.randbelow(2**31)
    digest = hashlib.sha256(f"{base}:{student}:{notebook}".encode()).digest()
    return int.from_bytes(digest[:4], "big") % 2**31


def make_tasks(submission: Submission, models: list[NotebookModel], run: GradingRun,
               mode: str, caches: dict[str, dict[str, bytes]] | None = None,
               keys: dict | None = None) -> list[GradingTask]:
    """One task per notebook of the assignment for this student (``caches``: the class run's
    results per notebook; ``keys``: the instructor's quick-check keys of the assignment)."""
    return [GradingTask(
        student=submission.student, assignment=run.assignment,
        model=model.for_worker(),
        seed=unit_seed(run.seed, submission.student, model.notebook), limits=run.limits,
        rubric=run.rubric, sandbox=mode, submission=submission.notebooks.get(model.notebook),
        submission_error=submission.errors.get(model.notebook), files=dict(submission.files),
        timestamp=submission.timestamp, class_cache=(caches or {}).get(model.notebook, {}),
        quick_check_keys=keys or {}, fixed_seed=run.seed is not None)
        for model in models]


def _progress(total: int, enabled: bool):
    try:
        from tqdm import tqdm
    except ImportError:
        return None
    return tqdm(total=total, unit="notebook", desc="grading", disable=not enabled,
                file=sys.stderr, dynamic_ncols=True)


@contextmanager
def course_lock(root: Path):
    """Only one grading run writes to a course folder at a time."""
    import fcntl

    with open(root / ".mhalib-grade.lock", "w") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            raise ValueError(f"another `mhalib grade` is writing to {root}; wait for it to "
                             "finish") from None
        yield


def grade_class(run: GradingRun, echo=print) -> RunSummary:
    """Grade every submission of ``run.assignment``; see :mod:`mhalib.grading.writer`."""
    layout = CourseLayout.at(run.course, run.db_url)
    layout.root.mkdir(parents=True, exist_ok=True)
    with course_lock(layout.root):
        return _grade_class(run, layout, echo)


def _grade_class(run: GradingRun, layout: CourseLayout, echo) -> RunSummary:
    started = time.monotonic()
    models = load_assignment(run.assignment, run.source)
    keys = {}
    if any(model.questions for model in models):  # read on the instructor's side only
        from mhalib.quiz.keys import instructor_keys

        keys = instructor_keys(run.assignment, run.keys)
    by_name = {model.notebook: model for model in models}
    submissions = discover(run.submitted, run.assignment, list(by_name), run.limits, warn=echo)
    if run.students:
        wanted = set(run.students)
        submissions = [s for s in submissions if s.student in wanted]
    summary = RunSummary()
    # on a cluster each worker decides "auto" for itself; locally we decide once, loudly
    summary.sandbox = mode = run.sandbox if run.scheduler else choose_mode(run.sandbox, echo)
    summary.backup = backup(layout.db_url, layout.backups)
    for model in models:
        ensure_assignment(layout.db_url, model)
    caches = _class_caches(models, run, mode, echo) if submissions else {}
    batches = [make_tasks(s, models, run, mode, caches, keys) for s in submissions]
    writer = ResultWriter(layout, by_name)
    bar = _progress(sum(len(b) for b in batches), run.progress)

    def on_result(result: GradingResult) -> None:
        writer.write(result)
        summary.graded += 1
        summary.results.append(result)
        if needs_review(result.all_flags()) and result.student not in summary.flagged:
            summary.flagged.append(result.student)
        if bar is not None:
            bar.update(1)

    try:
        if run.scheduler:
            run_dask(batches, run.scheduler, on_result)
        else:
            run_local(batches, run.jobs, on_result)
        if run.feedback:
            summary.feedback = writer.write_feedback()
    finally:
        writer.close()
        if bar is not None:
            bar.close()
    summary.exports = export_course(layout.results, layout.exports, layout.db_url,
                                    _all_models(layout, run.source, run.assignment, by_name))
    summary.integrity = integrity_check(layout.db_url)
    if len(submissions) > 1:
        report = similarity_report(run.assignment, models,
                                   {s.student: s.notebooks for s in submissions})
        summary.similarity = write_similarity(report, layout.root / "similarity")
        summary.similar_pairs = len(report.pairs)
    summary.seconds = round(time.monotonic() - started, 3)
    return summary


def _class_caches(models: list[NotebookModel], run: GradingRun, mode: str,
                  echo) -> dict[str, dict[str, bytes]]:
    """The class run of every notebook with class-cached cells (none when switched off)."""
    if not run.class_cache or not any(model.class_cache for model in models):
        return {}
    from mhalib.grading.class_run import run_class_cache
    from mhalib.grading.unit import close_sandboxes, resolve_mode

    try:
        return {model.notebook: run_class_cache(model, resolve_mode(mode), run.limits, echo)
                for model in models}
    finally:
        if run.jobs > 1 or run.scheduler:
            close_sandboxes()  # the workers keep their own


def _all_models(layout: CourseLayout, source: Path, assignment: str,
                current: dict[str, NotebookModel]) -> dict[str, dict[str, NotebookModel]]:
    """Models of every assignment that has stored results (for the course-wide export)."""
    found = {assignment: current}
    if layout.results.is_dir():
        for folder in sorted(layout.results.iterdir()):
            if folder.is_dir() and folder.name not in found:
                try:
                    found[folder.name] = {m.notebook: m for m in
                                          load_assignment(folder.name, source)}
                except (ValueError, OSError):
                    continue
    return found
