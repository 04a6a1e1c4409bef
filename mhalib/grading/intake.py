"""Finding every student's submission: nbgrader's folder layout or a folder of LMS zips.

Layouts accepted under SUBMITTED_DIR:

* nbgrader: ``<student>/<assignment>/<notebook>.ipynb`` (plus ``timestamp.txt`` and any other
  files of the assignment folder, which are copied into the notebook's working folder);
* zips as downloaded from an LMS: ``<student>.zip`` or ``<student>_<number>_....zip``, each
  holding that student's notebook anywhere inside (other files next to it come along).

Zips are read in memory with caps on members and sizes; nothing is extracted to disk, so a
zip bomb or a ``../`` path cannot hurt. A missing or unreadable notebook is not an error here:
it is recorded so the student is graded 0 with the reason.
"""

from __future__ import annotations

import re
import zipfile
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path, PurePosixPath

MAX_ZIP_MEMBERS = 2000
MAX_OTHER_FILES = 200
_SKIP_PARTS = ("__MACOSX", ".ipynb_checkpoints", "__pycache__", ".git")
_LMS_SUFFIX = re.compile(r"^(?P<student>.+?)_\d+(_.*)?$")


@dataclass
class Submission:
    student: str
    notebooks: dict[str, bytes | None] = field(default_factory=dict)
    errors: dict[str, tuple[str, str]] = field(default_factory=dict)  # nb -> (flag, why)
    files: dict[str, bytes] = field(default_factory=dict)  # other files, relative paths
    timestamp: str | None = None
    origin: str = ""


def student_id(name: str, from_zip: bool = False) -> str:
    """A safe nbgrader student id from a folder name, or a zip name (LMS numbers dropped)."""
    match = _LMS_SUFFIX.match(name) if from_zip else None
    if match:
        name = match.group("student")
    cleaned = re.sub(r"[^A-Za-z0-9._-]+", "-", name).strip("-.")
    return cleaned[:100] or "unnamed"


def _safe_relative(path: str) -> str | None:
    parts = PurePosixPath(path.replace("\\", "/")).parts
    if not parts or parts[0] in ("/", "..") or any(p in ("..", "") for p in parts):
        return None
    if any(p in _SKIP_PARTS or p.startswith("._") for p in parts):
        return None
    return "/".join(parts)


def _read_folder(folder: Path, notebooks: list[str], limits) -> Submission:
    submission = Submission(student="", origin=str(folder))
    for name in notebooks:
        path = folder / name
        if not path.is_file():
            submission.notebooks[name] = None
            submission.errors[name] = ("missing_notebook", f"no {name} in the submission folder")
        elif path.stat().st_size > limits.notebook_bytes:
            submission.notebooks[name] = None
            submission.errors[name] = ("too_large", f"{name} is {path.stat().st_size:,} bytes, "
                                       f"more than the {limits.notebook_bytes:,} accepted")
        else:
            submission.notebooks[name] = path.read_bytes()
    stamp = folder / "timestamp.txt"
    if stamp.is_file() and stamp.stat().st_size < 200:
        submission.timestamp = stamp.read_text(encoding="utf-8", errors="replace").strip()
    budget = limits.files_bytes
    for path in sorted(folder.rglob("*"))[:5000]:
        relative = _safe_relative(path.relative_to(folder).as_posix())
        if (relative is None or not path.is_file() or path.is_symlink()
                or relative in notebooks or relative == "timestamp.txt"
                or len(submission.files) >= MAX_OTHER_FILES):
            continue
        size = path.stat().st_size
        if size <= budget:
            submission.files[relative] = path.read_bytes()
            budget -= size
    return submission


def _pick_member(members: list[zipfile.ZipInfo], name: str) -> zipfile.ZipInfo | None:
    notebooks = [m for m in members if m.filename.lower().endswith(".ipynb")
                 and _safe_relative(m.filename)]
    for rule in (lambda m: PurePosixPath(m.filename).name == name,
                 lambda m: PurePosixPath(m.filename).name.lower() == name.lower(),
                 lambda m: PurePosixPath(m.filename).stem.startswith(name[:-6])):
        found = [m for m in notebooks if rule(m)]
        if found:
            return min(found, key=lambda m: len(m.filename))
    return notebooks[0] if len(notebooks) == 1 else None


def _read_zip(path: Path, notebooks: list[str], limits) -> Submission:
    submission = Submission(student="", origin=str(path))
    try:
        with zipfile.ZipFile(path) as archive:
            members = [m for m in archive.infolist() if not m.is_dir()]
            if len(members) > MAX_ZIP_MEMBERS:
                raise zipfile.BadZipFile(f"it holds {len(members)} files, more than "
                                         f"{MAX_ZIP_MEMBERS}")
            base = ""
            for name in notebooks:
                member = _pick_member(members, name)
                if member is None:
                    submission.notebooks[name] = None
                    submission.errors[name] = ("missing_notebook",
                                               f"the zip {path.name} holds no {name}")
                    continue
                data = _read_member(archive, member, limits.notebook_bytes)
                if data is None:
                    submission.notebooks[name] = None
                    submission.errors[name] = ("too_large", f"{name} in {path.name} is larger "
                                               f"than the {limits.notebook_bytes:,} bytes accepted")
                    continue
                submission.notebooks[name] = data
                base = str(PurePosixPath(member.filename).parent)
                submission.timestamp = submission.timestamp or datetime(
                    *member.date_time, tzinfo=timezone.utc).isoformat()
            _zip_files(archive, members, base, notebooks, limits, submission)
    except (zipfile.BadZipFile, OSError, EOFError, NotImplementedError) as error:
        for name in notebooks:
            submission.notebooks[name] = None
            submission.errors[name] = ("invalid_notebook",
                                       f"the zip {path.name} could not be read ({error})")
    return submission


def _read_member(archive: zipfile.ZipFile, member: zipfile.ZipInfo, cap: int) -> bytes | None:
    if member.file_size > cap:
        return None
    with archive.open(member) as handle:
        data = handle.read(cap + 1)
    return None if len(data) > cap else data


def _zip_files(archive, members, base: str, notebooks, limits, submission) -> None:
    budget = limits.files_bytes
    prefix = "" if base in ("", ".") else base + "/"
    for member in members:
        if not member.filename.startswith(prefix) or len(submission.files) >= MAX_OTHER_FILES:
            continue
        relative = _safe_relative(member.filename[len(prefix):])
        if relative is None or relative in notebooks or relative.endswith(".ipynb"):
            continue
        data = _read_member(archive, member, budget)
        if data is not None:
            submission.files[relative] = data
            budget -= len(data)


def discover(submitted: Path, assignment: str, notebooks: list[str], limits,
             warn=print) -> list[Submission]:
    """Every submission under ``submitted`` for ``assignment``, sorted by student id."""
    submitted = Path(submitted)
    if not submitted.is_dir():
        raise ValueError(f"submitted={str(submitted)!r} is not a folder")
    found: dict[str, Submission] = {}
    for entry in sorted(submitted.iterdir()):
        if entry.is_dir() and not entry.name.startswith("."):
            folder = entry / assignment
            if not folder.is_dir():
                continue
            submission = _read_folder(folder, notebooks, limits)
        elif entry.is_file() and entry.suffix.lower() == ".zip":
            submission = _read_zip(entry, notebooks, limits)
        else:
            continue
        submission.student = student_id(entry.name if entry.is_dir() else entry.stem,
                                        from_zip=not entry.is_dir())
        if submission.student in found:
            warn(f"warning: {entry} is a second submission of student "
                 f"{submission.student!r}; the first ({found[submission.student].origin}) is "
                 "graded, this one is skipped.")
            continue
        found[submission.student] = submission
    return [found[key] for key in sorted(found)]
