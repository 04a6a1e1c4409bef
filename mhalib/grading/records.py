"""The records a grading run passes around, one definition each.

- :class:`GradingTask`: one student's notebook to grade (pipeline -> worker).
- :class:`ItemVerdict`: the grader's verdict on one exercise or quick check, with its points.
- :class:`RunStats`: how the sandboxed run of the notebook went (exit code, time, memory).
- :class:`GradingResult`: one graded notebook (worker -> the single writer); stored as JSON
  under ``<course>/mhalib-results/`` by :meth:`GradingResult.to_json_dict` and read back by
  :meth:`GradingResult.from_json_dict`.
- :class:`Issue`: something about the notebook as a whole (a flag and its explanation).

Notebook-level flags live on :class:`Issue` objects (``result.issues``); item-level flags on
``ItemVerdict.flags``. The two vocabularies do not share a spelling (see
:mod:`mhalib.grading.flags`).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields

from mhalib.grading.assignment import NotebookModel
from mhalib.grading.rubric import Rubric
from mhalib.grading.sandbox.limits import Limits

RESULT_FORMAT = "mhalib-grading-result/1"
MAX_RESPONSE_CHARS = 3000  # of an exercise's answer cell kept in ItemVerdict.response


@dataclass
class Issue:
    """Something about the notebook as a whole: its ``flag`` (:mod:`mhalib.grading.flags`) and
    the ``message`` the learner and the instructor read."""

    flag: str
    message: str


@dataclass(frozen=True)
class GradingTask:
    """One student's notebook, everything a worker needs to grade it (picklable for Dask).

    ``submission`` is the notebook file (None when there is none, with ``submission_error``
    = (flag, reason) saying why); ``files`` are the other files of the submission by relative
    path; ``model`` is the assignment notebook without its source (``for_worker``);
    ``sandbox`` is "bwrap", "none" or "auto" (decided by the worker); ``class_cache`` holds
    the class run's exported cells (:mod:`mhalib.grading.class_run`); ``quick_check_keys`` the
    instructor's quick-check keys of the assignment (:mod:`mhalib.quiz.keys`).
    """

    student: str
    assignment: str
    model: NotebookModel
    seed: int
    limits: Limits
    rubric: Rubric
    sandbox: str = "auto"
    submission: bytes | None = None
    submission_error: tuple[str, str] | None = None
    files: dict[str, bytes] = field(default_factory=dict)
    timestamp: str | None = None
    class_cache: dict[str, bytes] = field(default_factory=dict)  # from the class run
    quick_check_keys: dict = field(default_factory=dict)  # the instructor's keys (data)
    # True when the instructor fixed the seed (--seed): the warden then derives every
    # exercise's inputs from ``seed`` (reproducible); otherwise it draws them at call time
    fixed_seed: bool = False

    @property
    def notebook(self) -> str:
        return self.model.notebook


@dataclass
class ItemVerdict:
    """The grader's verdict on one exercise (``kind`` "exercise") or quick check
    ("quick_check"): ``share`` of its ``max_points`` earned, and why.

    ``diagnosis`` is the checker's finding; ``credit`` says how the points follow from it under
    the rubric (empty when there is nothing to add, e.g. all checks passed or nothing graded).
    ``response`` is what the learner answered, kept for class reports
    (:mod:`mhalib.classroom.report`): for an exercise ``{"answer": <answer cell source, cut at
    MAX_RESPONSE_CHARS>, "blank": <the cell is the release's stub>}``; for a quick check
    ``{"answer": <recorded answer>, "option": <canonical option index or None>, "slip": <the
    key's known slip matched, or None>}``; empty when nothing was read. ``hints`` is how many
    of the exercise's hints the notebook recorded as taken.
    """

    kind: str
    item: str
    passed: bool
    share: float
    diagnosis: str
    details: list[str] = field(default_factory=list)
    flags: list[str] = field(default_factory=list)
    credit: str = ""
    max_points: float = 0.0
    points: float = 0.0
    hints: int = 0
    response: dict = field(default_factory=dict)

    def explanation(self, limit: int = 4000) -> str:
        """The diagnosis (cut at ``limit``) and, after a dash, the credit note."""
        return self.diagnosis[:limit] + (f" — {self.credit}" if self.credit else "")

    @classmethod
    def failure(cls, kind: str, item: str, diagnosis: str, *flags: str) -> ItemVerdict:
        """No points, only a reason (nothing recorded, an unreadable record...)."""
        return cls(kind, item, False, 0.0, diagnosis, flags=list(flags))

    @classmethod
    def from_dict(cls, data: dict) -> ItemVerdict:
        """From stored JSON (results written before the rubric kept the share as "score")."""
        if "share" not in data and "score" in data:
            data = {**data, "share": data["score"]}
        return cls(**{f.name: data[f.name] for f in fields(cls) if f.name in data})


@dataclass(frozen=True)
class RunStats:
    """How the notebook's sandboxed process ended (None: it never ran)."""

    exit_code: int | None = None
    timed_out: bool | None = None
    seconds: float | None = None
    max_rss_kb: int | None = None
    cpu_seconds: float | None = None  # the notebook's processes, user + system

    @classmethod
    def from_reply(cls, reply: dict) -> RunStats:
        """From the sandbox's (untrusted) reply: keeps only values of the expected type."""
        def typed(key, kinds):
            value = reply.get(key)
            return value if isinstance(value, kinds) and not (
                isinstance(value, bool) and bool not in kinds) else None
        return cls(typed("exit_code", (int,)), typed("timed_out", (bool,)),
                   typed("seconds", (int, float)), typed("max_rss_kb", (int,)),
                   typed("cpu_seconds", (int, float)))


@dataclass
class GradingResult:
    """One graded notebook: verdicts and points per item, nbgrader scores per grade cell,
    the notebook-level issues, and the graded notebook (JSON) the formgrader shows."""

    student: str
    assignment: str
    notebook: str
    seed: int
    verdicts: dict[str, ItemVerdict]
    grade_cells: dict[str, float | None]
    issues: list[Issue] = field(default_factory=list)
    timestamp: str | None = None
    sandbox: str | None = None
    isolation: str | None = None
    run: RunStats = field(default_factory=RunStats)
    seconds: float = 0.0
    graded_notebook: dict | None = None  # not stored in the result file

    def issue_flags(self) -> list[str]:
        return [issue.flag for issue in self.issues]

    def all_flags(self) -> list[str]:
        """Notebook-level flags, then every item's flags."""
        return self.issue_flags() + [f for v in self.verdicts.values() for f in v.flags]

    def points(self) -> float:
        return sum(v.points for v in self.verdicts.values())

    def max_points(self) -> float:
        return sum(v.max_points for v in self.verdicts.values())

    def to_json_dict(self) -> dict:
        """What ``mhalib-results/<assignment>/<student>/<notebook>.json`` holds."""
        return {"format": RESULT_FORMAT, "student": self.student, "assignment": self.assignment,
                "notebook": self.notebook, "seed": self.seed, "timestamp": self.timestamp,
                "sandbox": self.sandbox, "isolation": self.isolation,
                "issues": [vars(issue) for issue in self.issues],
                "verdicts": {item: asdict(v) for item, v in self.verdicts.items()},
                "grade_cells": dict(self.grade_cells), "run": asdict(self.run),
                "seconds": self.seconds}

    @classmethod
    def from_json_dict(cls, data: dict) -> GradingResult:
        """Read back a stored result (raises ValueError for another format)."""
        if data.get("format") != RESULT_FORMAT:
            raise ValueError(f"format={data.get('format')!r} is not {RESULT_FORMAT!r}")
        return cls(
            student=data["student"], assignment=data["assignment"], notebook=data["notebook"],
            seed=int(data["seed"]),
            verdicts={k: ItemVerdict.from_dict(v) for k, v in data["verdicts"].items()},
            grade_cells=dict(data["grade_cells"]),
            issues=[Issue(i["flag"], i["message"]) for i in data.get("issues", [])],
            timestamp=data.get("timestamp"), sandbox=data.get("sandbox"),
            isolation=data.get("isolation"), run=RunStats(**data.get("run") or {}),
            seconds=float(data.get("seconds") or 0.0))
