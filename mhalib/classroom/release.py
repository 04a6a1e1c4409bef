"""Generating the learner release notebooks/ from the instructor master solutions/ with nbgrader.

nbgrader's generate_assignment does the work (clears solutions and hidden tests, locks cells,
writes checksums); we run it in a scratch course so the instructor's gradebook is never touched,
then normalise the JSON so that a regenerated release compares byte for byte with the committed.

A release is in one quick-check mode (:data:`mhalib.quiz.keys.MODES`), recorded in each
notebook's metadata (``mhalib.quick_checks``) and in ``quick_checks.json`` beside it
(:func:`release_data`): practice copies the lesson's keys there for instant feedback, assessed
writes the mode alone. The committed notebooks/ is the practice release. Where the master, the
release and the keys are is the caller's to say (:mod:`mhalib.classroom.course_folder`).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from mhalib import course
from mhalib.quiz.keys import MODES, RELEASE_FILE, instructor_keys


def tool_env() -> dict:
    """Environment for nbgrader subprocesses: it calls ``alembic`` from PATH, so put this
    interpreter's scripts folder (the venv's bin/) first even when the venv is not activated."""
    env = dict(os.environ)
    env["PATH"] = os.pathsep.join([os.path.dirname(sys.executable), env.get("PATH", "")])
    return env


def assignments(solutions_dir: Path) -> list[str]:
    """Assignment ids of the course manifest that have a source folder in ``solutions_dir``
    (a fixture course may hold only some of them)."""
    return [a for a in course.assignments() if (solutions_dir / a).is_dir()]


def run_budget_seconds(assignment: str) -> float:
    """Seconds a lesson's solutions notebook may take top to bottom on a 2-core CPU, as the
    course manifest sets it. The suite holds the kernel's CPU time to it;
    benchmarks/lesson_times.py holds the wall time on a quiet machine to it."""
    return course.lesson(assignment).run_budget_s


def normalise(notebook_json: dict, mode: str | None = None) -> str:
    """Canonical text of a notebook: no outputs or execution counts, stable key order (and its
    quick-check ``mode`` in the metadata, when given)."""
    if mode is not None:
        notebook_json.setdefault("metadata", {})["mhalib"] = {"quick_checks": mode}
    for cell in notebook_json.get("cells", []):
        if cell.get("cell_type") == "code":
            cell["outputs"] = []
            cell["execution_count"] = None
    return json.dumps(notebook_json, indent=1, sort_keys=True, ensure_ascii=False) + "\n"


def release_data(assignment: str, mode: str, keys_dir: Path) -> dict:
    """What ``quick_checks.json`` of a release holds: the mode, and in practice the keys (from
    the instructor's ``keys_dir``)."""
    if mode not in MODES:
        raise ValueError(f"mode={mode!r} must be one of {MODES}")
    data = {"assignment": assignment, "mode": mode}
    if mode == "practice":
        data["keys"] = instructor_keys(assignment, keys_dir)
    return data


def generate(assignment: str, solutions_dir: Path, keys_dir: Path,
             mode: str = "practice") -> dict[str, str]:
    """Run nbgrader generate_assignment on one assignment of ``solutions_dir``; returns {file
    name: text}: the notebooks and ``quick_checks.json`` (quick-check ``mode``, keys from
    ``keys_dir``)."""
    if mode not in MODES:
        raise ValueError(f"mode={mode!r} must be one of {MODES}")
    source = solutions_dir / assignment
    if not source.is_dir():
        raise ValueError(f"assignment={assignment!r}: no folder {source}")
    with tempfile.TemporaryDirectory(prefix="mhalib-release-") as scratch:
        shutil.copytree(source, Path(scratch) / "source" / assignment,
                        ignore=shutil.ignore_patterns(".ipynb_checkpoints", "__pycache__"))
        command = [
            sys.executable, "-m", "nbgrader", "generate_assignment", assignment, "--force",
            f"--CourseDirectory.root={scratch}", f"--db=sqlite:///{scratch}/gradebook.db",
            "--log-level=WARN",
        ]
        done = subprocess.run(command, cwd=scratch, capture_output=True, text=True,
                              env=tool_env())
        if done.returncode:
            raise RuntimeError(f"nbgrader generate_assignment {assignment} failed:\n"
                               f"{done.stdout}\n{done.stderr}")
        release = Path(scratch) / "release" / assignment
        files = {p.name: normalise(json.loads(p.read_text(encoding="utf-8")), mode)
                 for p in sorted(release.glob("*.ipynb"))}
    data = release_data(assignment, mode, keys_dir)
    files[RELEASE_FILE] = json.dumps(data, indent=1, sort_keys=True, ensure_ascii=False) + "\n"
    return files


def write_release(assignment: str, solutions_dir: Path, notebooks_dir: Path, keys_dir: Path,
                  mode: str = "practice") -> list[Path]:
    """Regenerate ``notebooks_dir/<assignment>/`` from ``solutions_dir/<assignment>/`` in
    quick-check ``mode`` (an assessed release into a folder that held a practice one removes
    its keys)."""
    target = notebooks_dir / assignment
    target.mkdir(parents=True, exist_ok=True)
    written = []
    for name, text in generate(assignment, solutions_dir, keys_dir, mode).items():
        (target / name).write_text(text, encoding="utf-8")
        written.append(target / name)
    return written


def drift(assignment: str, solutions_dir: Path, notebooks_dir: Path, keys_dir: Path) -> list[str]:
    """File names whose committed (practice) release in ``notebooks_dir`` differs from a fresh
    generation (empty: in sync)."""
    fresh = generate(assignment, solutions_dir, keys_dir)
    stale = [name for name, text in fresh.items()
             if not (notebooks_dir / assignment / name).is_file()
             or (notebooks_dir / assignment / name).read_text(encoding="utf-8") != text]
    committed = {p.name for p in (notebooks_dir / assignment).glob("*.ipynb")}
    if (notebooks_dir / assignment / RELEASE_FILE).is_file():
        committed.add(RELEASE_FILE)
    return sorted(set(stale) | (committed - set(fresh)))


def strip_outputs(path: os.PathLike) -> None:
    """Rewrite a source notebook in canonical form (no outputs, no execution counts)."""
    path = Path(path)
    if path.suffix != ".ipynb":
        return
    path.write_text(normalise(json.loads(path.read_text(encoding="utf-8"))), encoding="utf-8")
