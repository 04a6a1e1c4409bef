"""Grade the catalogue with ``mhalib grade`` and evaluate every rule from what it wrote.

Layout of a run folder (``--out``, a fresh folder under /tmp by default)::

    release/<assignment>/...          the assessed release (mhalib release --quick-checks assessed)
    class/<assignment>/submitted/     one class per lesson: every entry not graded alone
    class/<assignment>/course/        its course folder: gradebook.db, mhalib-results/, exports/
    alone/<entry>/{submitted,course}  entries with resource rules (and their controls), each
                                      graded in a run of its own while its processes are watched
    report.json, report.md            every entry: expected, got, verdict

Each class is graded by ``mhalib grade --sandbox bwrap --assignment A SUBMITTED --course C
--jobs 2`` (the machine's bubblewrap; a run refuses to grade without it). Outcomes are read
from the result files (``mhalib-results/<assignment>/<student>/<notebook>.json``: points,
flags, diagnoses, times), the CSV export (``needs_review`` of each student's total row) and the
similarity report (``similarity/<assignment>.json``: pairs of students that look copied).
"""

from __future__ import annotations

import csv
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from tests.grading.attacks.build import ROOT, Builder, make_release
from tests.grading.attacks.catalogue import CATALOGUE, assignments, with_dependencies
from tests.grading.attacks.spec import Outcome, Submission


@dataclass
class Row:
    name: str
    kind: str
    assignment: str
    family: str
    issue21: bool
    mechanism: str
    expected: str
    got: str
    # attacks: "held" / "THROUGH" / "limit" (through, as a documented known limit says);
    # controls and slips: "ok" / "FAILED"
    verdict: str
    rules: list[dict] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # "[attack] ..." lines the notebook printed
    known_limit: str = ""

    @property
    def passed(self) -> bool:
        return self.verdict in ("held", "ok", "limit")


def mhalib_command() -> list[str]:
    script = Path(sys.executable).with_name("mhalib")
    return [str(script)] if script.exists() else [sys.executable, "-m", "mhalib"]


class ProcessWatch:
    """Polls the process tree of one command: CPU seconds and the largest peak RSS of the
    processes outside the sandbox (everything below a ``bwrap`` process is left out)."""

    def __init__(self, pid: int, interval: float = 0.1):
        self.pid, self.interval = pid, interval
        self.cpu: dict[int, float] = {}
        self.peak_kb = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._tick = os.sysconf("SC_CLK_TCK")

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()

    def _tree(self) -> list[int]:
        parents: dict[int, int] = {}
        names: dict[int, str] = {}
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                with open(f"/proc/{entry}/stat", encoding="ascii", errors="replace") as handle:
                    text = handle.read()
            except OSError:
                continue
            name = text[text.index("(") + 1:text.rindex(")")]
            fields = text[text.rindex(")") + 2:].split()
            parents[int(entry)], names[int(entry)] = int(fields[1]), name
        children: dict[int, list[int]] = {}
        for pid, parent in parents.items():
            children.setdefault(parent, []).append(pid)
        found, todo = [], [self.pid]
        while todo:
            pid = todo.pop()
            if names.get(pid) == "bwrap":
                continue  # the sandbox and everything in it
            found.append(pid)
            todo += children.get(pid, [])
        return found

    def _sample(self) -> None:
        for pid in self._tree():
            try:
                with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as handle:
                    fields = handle.read().rsplit(")", 1)[1].split()
                self.cpu[pid] = (int(fields[11]) + int(fields[12])) / self._tick
                with open(f"/proc/{pid}/status", encoding="ascii", errors="replace") as handle:
                    for line in handle:
                        if line.startswith("VmHWM:"):
                            self.peak_kb = max(self.peak_kb, int(line.split()[1]))
            except (OSError, ValueError, IndexError):
                continue

    def _loop(self) -> None:
        while not self._stop.is_set():
            self._sample()
            self._stop.wait(self.interval)

    @property
    def cpu_seconds(self) -> float:
        return sum(self.cpu.values())


def grade(assignment: str, submitted: Path, course: Path, source: Path, jobs: int = 2,
          watch: bool = False, log=print) -> dict:
    """One ``mhalib grade`` run; returns its wall time, exit code and (watched) costs."""
    command = [*mhalib_command(), "grade", "--sandbox", "bwrap", "--assignment", assignment,
               str(submitted), "--course", str(course), "--jobs", str(jobs), "--source",
               str(source), "--no-progress"]
    started = time.monotonic()
    with open(course.parent / f"grade-{course.name}.log", "w") as output:
        process = subprocess.Popen(command, cwd=ROOT, stdout=output, stderr=subprocess.STDOUT)
        if watch:
            with ProcessWatch(process.pid) as watcher:
                code = process.wait()
            cost = {"cpu_seconds": watcher.cpu_seconds, "peak_mb": watcher.peak_kb / 1024}
        else:
            code, cost = process.wait(), {}
    seconds = time.monotonic() - started
    log(f"  graded {assignment} ({submitted.parent.name}): exit {code}, {seconds:.0f} s")
    return {"exit_code": code, "seconds": seconds, **cost}


def attack_notes(course: Path, assignment: str, student: str) -> list[str]:
    """The ``[attack] ...`` lines a submission printed (from its graded notebook): whether its
    trick found its target. Informational only: no verdict reads them."""
    notes = []
    for path in (course / "autograded" / student / assignment).glob("*.ipynb"):
        try:
            cells = json.loads(path.read_text(encoding="utf-8")).get("cells", [])
        except (OSError, ValueError):
            continue
        for cell in cells:
            for output in cell.get("outputs", []):
                text = output.get("text", "")
                text = "".join(text) if isinstance(text, list) else str(text)
                notes += [line[:200] for line in text.splitlines() if line.startswith("[attack]")]
    return notes


def read_outcomes(course: Path, assignment: str) -> dict[str, Outcome]:
    """student -> what the grader gave, from its result files and CSV export."""
    review: dict[str, bool] = {}
    export = course / "exports" / f"{assignment}.csv"
    if export.exists():
        with open(export, newline="", encoding="utf-8") as handle:
            for row in csv.DictReader(handle):
                if row["exercise"] == "(total)":
                    review[row["student"]] = row["needs_review"] == "yes"
    similar: dict[str, list[str]] = {}
    try:
        pairs = json.loads((course / "similarity" / f"{assignment}.json").read_text(
            encoding="utf-8")).get("pairs", [])
    except (OSError, ValueError):
        pairs = []
    for pair in pairs:
        first, second = pair.get("students", ("", ""))[:2]
        similar.setdefault(first, []).append(second)
        similar.setdefault(second, []).append(first)
    outcomes = {}
    for path in sorted((course / "mhalib-results" / assignment).glob("*/*.json")):
        data = json.loads(path.read_text(encoding="utf-8"))
        outcome = Outcome(found=True)
        for item, verdict in data.get("verdicts", {}).items():
            outcome.points[item] = float(verdict.get("points", 0.0))
            outcome.max_points[item] = float(verdict.get("max_points", 0.0))
            outcome.flags[item] = list(verdict.get("flags", []))
            outcome.diagnosis[item] = str(verdict.get("diagnosis", ""))
        outcome.issues = [issue["flag"] for issue in data.get("issues", [])]
        outcome.needs_review = review.get(data["student"], False)
        outcome.unit_seconds = data.get("seconds")
        outcome.sandbox_seconds = (data.get("run") or {}).get("seconds")
        outcome.notes = attack_notes(course, assignment, data["student"])
        outcome.similar_to = sorted(set(similar.get(data["student"], [])))
        outcomes[data["student"]] = outcome
    return outcomes


def evaluate(submissions: list[Submission], outcomes: dict[str, Outcome],
             model_points: dict[str, dict[str, float]]) -> list[Row]:
    context = {"outcomes": outcomes, "submissions": submissions, "model_points": model_points}
    rows = []
    for submission in submissions:
        outcome = outcomes.get(submission.name, Outcome())
        context["current"] = submission
        results = []
        for rule in submission.rules:
            if not outcome.found:
                held, seen = False, "not graded (no result file)"
            else:
                try:
                    held, seen = rule.check(outcome, context)
                except Exception as error:  # a rule that cannot read the outcome fails
                    held, seen = False, f"rule error: {type(error).__name__}: {error}"
            results.append({"rule": rule.describe(), "held": held, "seen": seen})
        ok = all(r["held"] for r in results)
        if submission.kind != "attack":
            verdict = "ok" if ok else "FAILED"
        else:
            verdict = "held" if ok else "limit" if submission.known_limit else "THROUGH"
        rows.append(Row(submission.name, submission.kind, submission.assignment,
                        submission.family, submission.issue21, submission.mechanism,
                        submission.expected(), " | ".join(r["seen"] for r in results), verdict,
                        results, list(outcome.notes), submission.known_limit or ""))
    return rows


def select(only: list[str] | None, exact: bool = False) -> list[Submission]:
    """Entries whose name contains one of ``only`` (is one of them, with ``exact``; all when
    empty), with what their rules need."""
    if not only:
        return list(CATALOGUE)
    chosen = [s for s in CATALOGUE
              if any(part == s.name if exact else part in s.name for part in only)]
    if not chosen:
        raise ValueError(f"no catalogue entry matches {only}")
    return with_dependencies(chosen)


def run_catalogue(out: Path | None = None, only: list[str] | None = None,
                  release: Path | None = None, source: Path = ROOT / "solutions",
                  jobs: int = 2, log=print, exact: bool = False) -> dict:
    """Build, grade and evaluate; returns the report (also written to ``out``)."""
    started = time.monotonic()
    out = Path(out or tempfile.mkdtemp(prefix="mhalib-attacks-"))
    out.mkdir(parents=True, exist_ok=True)
    submissions = select(only, exact)
    lessons = assignments(submissions)
    release = make_release(lessons, Path(release or out / "release"))
    builder = Builder(release, source)
    outcomes: dict[str, Outcome] = {}
    runs = []
    shared = [s for s in submissions if not s.isolated]
    for assignment in lessons:
        members = [s for s in shared if s.assignment == assignment]
        if not members:
            continue
        folder = out / "class" / assignment
        shutil.rmtree(folder, ignore_errors=True)
        builder.write_class(members, folder / "submitted")
        (folder / "course").mkdir(parents=True)
        run = grade(assignment, folder / "submitted", folder / "course", source, jobs, log=log)
        runs.append({"assignment": assignment, "students": len(members), **run})
        for name, outcome in read_outcomes(folder / "course", assignment).items():
            outcome.run_seconds = run["seconds"]
            outcomes[name] = outcome
    for submission in [s for s in submissions if s.isolated]:
        folder = out / "alone" / submission.name
        shutil.rmtree(folder, ignore_errors=True)
        builder.write_class([submission], folder / "submitted")
        (folder / "course").mkdir(parents=True)
        run = grade(submission.assignment, folder / "submitted", folder / "course", source,
                    jobs, watch=True, log=log)
        runs.append({"assignment": submission.assignment, "students": 1,
                     "alone": submission.name, **run})
        for name, outcome in read_outcomes(folder / "course", submission.assignment).items():
            outcome.run_seconds = run["seconds"]
            outcome.grader_cpu_seconds = run.get("cpu_seconds")
            outcome.peak_rss_mb = run.get("peak_mb")
            outcomes[name] = outcome
    model_points = {a: {item: builder.model(a).points_of(item)
                        for item in [*builder.model(a).exercises, *builder.model(a).questions]}
                    for a in lessons}
    rows = evaluate(submissions, outcomes, model_points)
    report = {"out": str(out), "seconds": round(time.monotonic() - started, 1), "runs": runs,
              "rows": [asdict(r) for r in rows]}
    (out / "report.json").write_text(json.dumps(report, indent=1), encoding="utf-8")
    (out / "report.md").write_text(markdown_table(rows, report), encoding="utf-8")
    return report


def rejudge(out: Path) -> dict:
    """Evaluate a finished run folder again with the catalogue's current rules and known limits
    (nothing is graded: the outcomes are read from what the grader wrote there)."""
    out = Path(out)
    old = json.loads((out / "report.json").read_text(encoding="utf-8"))
    names = {row["name"] for row in old["rows"]}
    submissions = [s for s in CATALOGUE if s.name in names]
    outcomes: dict[str, Outcome] = {}
    for run in old["runs"]:
        folder = out / "alone" / run["alone"] if run.get("alone") else out / "class" / run[
            "assignment"]
        for name, outcome in read_outcomes(folder / "course", run["assignment"]).items():
            outcome.run_seconds = run["seconds"]
            outcome.grader_cpu_seconds = run.get("cpu_seconds")
            outcome.peak_rss_mb = run.get("peak_mb")
            outcomes[name] = outcome
    builder = Builder(out / "release")
    lessons = assignments(submissions)
    model_points = {a: {item: builder.model(a).points_of(item)
                        for item in [*builder.model(a).exercises, *builder.model(a).questions]}
                    for a in lessons}
    rows = evaluate(submissions, outcomes, model_points)
    report = {**old, "rows": [asdict(r) for r in rows]}
    (out / "report.json").write_text(json.dumps(report, indent=1), encoding="utf-8")
    (out / "report.md").write_text(markdown_table(rows, report), encoding="utf-8")
    return report


def rows_of(report: dict) -> list[Row]:
    return [Row(**row) for row in report["rows"]]


def markdown_table(rows: list[Row], report: dict) -> str:
    lines = [f"Catalogue run in {report['out']} ({report['seconds']:.0f} s)", "",
             "| entry | kind | mechanism | expected | got | verdict | notebook said |",
             "|---|---|---|---|---|---|---|"]
    for row in rows:
        cells = [row.name, row.kind, f"{row.family}: {row.mechanism}", row.expected, row.got,
                 row.verdict, "; ".join(n[len("[attack] "):] for n in row.notes)]
        lines.append("| " + " | ".join(c.replace("|", "/") for c in cells) + " |")
    return "\n".join(lines) + "\n"
