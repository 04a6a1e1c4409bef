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


# One nbgrader process generates every assignment it is given (nbgrader's import and its
# gradebook set-up cost seconds; each assignment then takes about one). The course
# configuration is nbgrader's default with the root and the gradebook in the scratch course, as
# `nbgrader generate_assignment --CourseDirectory.root=... --db=...` run there would use.
#
# The gradebook's schema version is read in process (mhalib.classroom.nbgrader_schema).
_BATCH = """
import json, sys
from traitlets.config import Config
from nbgrader.apps import NbGraderAPI
from mhalib.classroom.nbgrader_schema import stamp_schema_in_process

stamp_schema_in_process()

root, names = sys.argv[1], sys.argv[2:]
config = Config()
config.CourseDirectory.root = root
config.CourseDirectory.db_url = "sqlite:///" + root + "/gradebook.db"
config.Application.log_level = "WARN"
api = NbGraderAPI(config=config)
failed = {}
for name in names:
    result = api.generate_assignment(name, force=True, create=True)
    if not result["success"]:
        failed[name] = (result.get("error") or "") + "\\n" + (result.get("log") or "")
print(json.dumps(failed))
"""


def generate_many(assignments: list[str], solutions_dir: Path, keys_dir: Path,
                  mode: str = "practice") -> dict[str, dict[str, str]]:
    """Run nbgrader generate_assignment on each of ``assignments`` of ``solutions_dir``, all in
    one nbgrader process; returns {assignment: {file name: text}} as :func:`generate` does."""
    if mode not in MODES:
        raise ValueError(f"mode={mode!r} must be one of {MODES}")
    assignments = list(dict.fromkeys(assignments))
    for assignment in assignments:
        if not (solutions_dir / assignment).is_dir():
            raise ValueError(f"assignment={assignment!r}: no folder {solutions_dir / assignment}")
    if not assignments:
        return {}
    generated = {}
    with tempfile.TemporaryDirectory(prefix="mhalib-release-") as scratch:
        for assignment in assignments:
            shutil.copytree(solutions_dir / assignment, Path(scratch) / "source" / assignment,
                            ignore=shutil.ignore_patterns(".ipynb_checkpoints", "__pycache__"))
        command = [sys.executable, "-c", _BATCH, scratch, *assignments]
        done = subprocess.run(command, cwd=scratch, capture_output=True, text=True,
                              env=tool_env())
        lines = done.stdout.strip().splitlines()
        try:
            failed = json.loads(lines[-1]) if done.returncode == 0 and lines else None
        except json.JSONDecodeError:
            failed = None
        if failed is None:
            raise RuntimeError(f"nbgrader generate_assignment {' '.join(assignments)} failed:\n"
                               f"{done.stdout}\n{done.stderr}")
        if failed:
            name, text = next(iter(failed.items()))
            raise RuntimeError(f"nbgrader generate_assignment {name} failed:\n{text}\n"
                               f"{done.stderr}")
        for assignment in assignments:
            release = Path(scratch) / "release" / assignment
            generated[assignment] = {
                p.name: normalise(json.loads(p.read_text(encoding="utf-8")), mode)
                for p in sorted(release.glob("*.ipynb"))}
    for assignment, files in generated.items():
        data = release_data(assignment, mode, keys_dir)
        files[RELEASE_FILE] = json.dumps(data, indent=1, sort_keys=True,
                                         ensure_ascii=False) + "\n"
    return generated


def generate(assignment: str, solutions_dir: Path, keys_dir: Path,
             mode: str = "practice") -> dict[str, str]:
    """Run nbgrader generate_assignment on one assignment of ``solutions_dir``; returns {file
    name: text}: the notebooks and ``quick_checks.json`` (quick-check ``mode``, keys from
    ``keys_dir``)."""
    return generate_many([assignment], solutions_dir, keys_dir, mode)[assignment]


def _write(assignment: str, files: dict[str, str], notebooks_dir: Path) -> list[Path]:
    target = notebooks_dir / assignment
    target.mkdir(parents=True, exist_ok=True)
    written = []
    for name, text in files.items():
        (target / name).write_text(text, encoding="utf-8")
        written.append(target / name)
    return written


def write_release(assignment: str, solutions_dir: Path, notebooks_dir: Path, keys_dir: Path,
                  mode: str = "practice") -> list[Path]:
    """Regenerate ``notebooks_dir/<assignment>/`` from ``solutions_dir/<assignment>/`` in
    quick-check ``mode`` (an assessed release into a folder that held a practice one removes
    its keys)."""
    return _write(assignment, generate(assignment, solutions_dir, keys_dir, mode), notebooks_dir)


def write_releases(assignments: list[str], solutions_dir: Path, notebooks_dir: Path,
                   keys_dir: Path, mode: str = "practice") -> dict[str, list[Path]]:
    """:func:`write_release` for each of ``assignments``, generated in one nbgrader process;
    returns {assignment: paths written}."""
    generated = generate_many(assignments, solutions_dir, keys_dir, mode)
    return {a: _write(a, files, notebooks_dir) for a, files in generated.items()}


def _stale(assignment: str, fresh: dict[str, str], notebooks_dir: Path) -> list[str]:
    stale = [name for name, text in fresh.items()
             if not (notebooks_dir / assignment / name).is_file()
             or (notebooks_dir / assignment / name).read_text(encoding="utf-8") != text]
    committed = {p.name for p in (notebooks_dir / assignment).glob("*.ipynb")}
    if (notebooks_dir / assignment / RELEASE_FILE).is_file():
        committed.add(RELEASE_FILE)
    return sorted(set(stale) | (committed - set(fresh)))


def drift(assignment: str, solutions_dir: Path, notebooks_dir: Path, keys_dir: Path) -> list[str]:
    """File names whose committed (practice) release in ``notebooks_dir`` differs from a fresh
    generation (empty: in sync)."""
    return _stale(assignment, generate(assignment, solutions_dir, keys_dir), notebooks_dir)


def drifts(assignments: list[str], solutions_dir: Path, notebooks_dir: Path,
           keys_dir: Path) -> dict[str, list[str]]:
    """:func:`drift` for each of ``assignments``, generated in one nbgrader process."""
    generated = generate_many(assignments, solutions_dir, keys_dir)
    return {a: _stale(a, fresh, notebooks_dir) for a, fresh in generated.items()}


def strip_outputs(path: os.PathLike) -> None:
    """Rewrite a source notebook in canonical form (no outputs, no execution counts)."""
    path = Path(path)
    if path.suffix != ".ipynb":
        return
    path.write_text(normalise(json.loads(path.read_text(encoding="utf-8"))), encoding="utf-8")
