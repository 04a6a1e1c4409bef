"""The package as pip sees it: ranges in pyproject.toml, the tested versions in constraints.txt,
and a wheel that works outside the checkout.

The wheel test builds mhalib's wheel, installs it (not editable) into a fresh virtual
environment, and from a copy of the course folder runs ``mhalib release --check`` and
``mhalib grade`` on the demo class; the grades must be the editable install's. The fresh
environment reuses this one's dependencies as hard links (no download, no copy, and the
sandbox, which mounts the environment, sees them); this environment's ``bin/`` stays on PATH
for the tools nbgrader calls by name (``alembic``).
"""

from __future__ import annotations

import csv
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import time
from importlib import metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from mhalib.cli import main
from tests.checkout import REPO

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    tomllib = pytest.importorskip("tomli")

CONSTRAINTS = REPO / "constraints.txt"
GRADE = ["--assignment", "01-single-head", "grading/examples/submitted", "--jobs", "2",
         "--seed", "7", "--no-progress"]
COURSE_PARTS = ("solutions", "notebooks", "grading")  # what a copy of the course holds


def _requirements() -> list[Requirement]:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    return [Requirement(line) for line in project["dependencies"]]


def _constraints() -> dict[str, Requirement]:
    lines = [line.split("#")[0].strip() for line in CONSTRAINTS.read_text().splitlines()]
    return {Requirement(line).name: Requirement(line) for line in lines if line}


def test_the_package_states_ranges_and_the_constraints_pick_the_tested_versions():
    required = {r.name: r for r in _requirements()}
    assert not [r for r in required.values() if any(s.operator == "==" for s in r.specifier)]
    pinned = _constraints()
    assert {"torch", "nbgrader"} <= set(pinned)
    for name, pin in pinned.items():
        [exact] = list(pin.specifier)
        assert exact.operator == "==", pin
        assert required[name].specifier.contains(exact.version), (required[name], pin)
        assert pin.specifier.contains(metadata.version(name)), (
            f"this environment has {name} {metadata.version(name)}, constraints.txt {pin}")


def test_every_set_up_installs_with_the_constraints():
    assert 'CONSTRAINTS = ROOT / "constraints.txt"' in (REPO / "bootstrap.py").read_text()
    assert '"-c", CONSTRAINTS' in (REPO / "bootstrap.py").read_text()
    assert "bootstrap.py test" in (REPO / ".ci" / "run").read_text()
    assert "- -c constraints.txt" in (REPO / "environment.yml").read_text()


def _build_wheel(target: Path) -> Path:
    """mhalib's wheel, built from the checkout with this environment's setuptools."""
    build = target / "build"
    shutil.copytree(REPO, build, ignore=shutil.ignore_patterns(
        ".venv", ".git", "*.egg-info", "__pycache__", "build", "dist", "notebooks", "solutions",
        "tests", "benchmarks", "docs", ".ruff_cache", ".pytest_cache"))
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-index",
                    "--no-build-isolation", "--wheel-dir", str(target), str(build)],
                   check=True, capture_output=True, text=True)
    [wheel] = target.glob("mhalib-*.whl")
    return wheel


def _fresh_environment(prefix: Path, wheel: Path) -> Path:
    """A virtual environment at ``prefix`` with this one's packages (hard links), except
    mhalib, which comes from ``wheel``; returns its interpreter."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(prefix)], check=True)
    python = prefix / "bin" / "python"
    site = Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig."
                                "get_paths()['purelib'])"], check=True, capture_output=True,
                               text=True).stdout.strip())

    def link(source, target):
        try:
            os.link(source, target)
        except OSError:
            shutil.copy2(source, target)

    shutil.copytree(sysconfig.get_paths()["purelib"], site, symlinks=True, copy_function=link,
                    dirs_exist_ok=True, ignore=shutil.ignore_patterns(
                        "mhalib", "mhalib-*", "__editable__*mhalib*"))
    installed = subprocess.run([str(python), "-m", "pip", "install", "--no-index",
                                "--no-build-isolation", str(wheel)],
                               capture_output=True, text=True)
    assert installed.returncode == 0, installed.stdout[-2000:] + installed.stderr[-2000:]
    return python


def _course_copy(target: Path) -> Path:
    for part in COURSE_PARTS:
        shutil.copytree(REPO / part, target / part, ignore=shutil.ignore_patterns(
            "course", "*.db", ".ipynb_checkpoints", "__pycache__"))
    return target


def _grades(course: Path) -> dict:
    """What a grading run decided: per student, each item's points, flags and diagnosis, the
    notebook's issues, and the exported table."""
    results = {}
    for path in sorted((course / "mhalib-results" / "01-single-head").glob("*/*.json")):
        data = json.loads(path.read_text())
        results[data["student"]] = {
            "verdicts": {item: (v["points"], v["max_points"], sorted(v["flags"]),
                                v["diagnosis"], v["credit"])
                         for item, v in data["verdicts"].items()},
            "issues": sorted((i["flag"], i["message"]) for i in data["issues"])}
    with open(course / "exports" / "01-single-head.csv", newline="") as table:
        results["(export)"] = sorted(tuple(row.values()) for row in csv.DictReader(table))
    return results


@pytest.mark.slow
def test_the_wheel_installed_elsewhere_grades_and_releases_as_the_checkout_does(
        tmp_path, monkeypatch):
    started = time.monotonic()
    python = _fresh_environment(tmp_path / "venv", _build_wheel(tmp_path / "wheel"))
    course = _course_copy(tmp_path / "course")
    env = {key: value for key, value in os.environ.items()
           if not key.startswith(("MHALIB_", "PYTHON", "VIRTUAL_ENV"))}
    env["PATH"] = os.pathsep.join([str(python.parent), os.path.dirname(sys.executable),
                                   env.get("PATH", "")])
    where = subprocess.run([str(python), "-c", "import mhalib; print(mhalib.__file__)"],
                           cwd=course, env=env, check=True, capture_output=True,
                           text=True).stdout.strip()
    assert Path(where).is_relative_to(tmp_path / "venv"), where  # the wheel's, not the checkout's
    mhalib_command = [str(python.parent / "mhalib")]
    prepared = time.monotonic()

    # the first and the last lesson: enough to show the wheel finds the course it is run in
    # (every lesson's drift is tests/notebooks' test_release_is_in_sync_with_solutions)
    check = subprocess.run([*mhalib_command, "release", "--check", "01-single-head",
                            "12-backward"], cwd=course, env=env, capture_output=True, text=True)
    assert check.returncode == 0, check.stdout[-3000:] + check.stderr[-3000:]
    assert "release is in sync with solutions/" in check.stdout
    released = time.monotonic()

    graded = subprocess.run([*mhalib_command, "grade", *GRADE, "--course",
                             str(tmp_path / "wheel-grades")], cwd=course, env=env,
                            capture_output=True, text=True)
    assert graded.returncode == 0, graded.stdout[-3000:] + graded.stderr[-3000:]
    assert "sandbox: bwrap" in graded.stdout or "sandbox: none" in graded.stdout
    wheel_done = time.monotonic()

    monkeypatch.chdir(REPO)
    for variable in ("MHALIB_COURSE_ROOT", "MHALIB_QUICK_CHECK_KEYS"):
        monkeypatch.delenv(variable, raising=False)
    assert main(["grade", *GRADE, "--course", str(tmp_path / "checkout-grades")]) == 0
    assert _grades(tmp_path / "wheel-grades") == _grades(tmp_path / "checkout-grades")
    print(f"\nwheel test: build + environment {prepared - started:.0f} s, release --check "
          f"{released - prepared:.0f} s, grade {wheel_done - released:.0f} s, the checkout's "
          f"grade {time.monotonic() - wheel_done:.0f} s")
