"""An assessed release holds no quick-check key in any form, and neither does the package.

Every key is looked for in the assessed release of every lesson and in every file of the
installed ``mhalib`` package: its explanation, hint and per-option texts, its answer as written
(in the quick-check cells and the metadata), and digests of the answer (sha256, sha1, md5 of
several spellings, and the digest the old banks stored). The practice release is searched the
same way and must hold them, which shows the search finds what it looks for.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

import mhalib
from mhalib import course
from mhalib.classroom.release import generate_many
from tests.checkout import COURSE
from tests.quiz.banks import all_items

ITEMS = list(all_items())
PACKAGE = Path(mhalib.__file__).parent


def _texts(raw: dict) -> list[str]:
    """The prose of a key: explanation, hint, per-option and per-slip explanations."""
    texts = [raw["explanation"], raw.get("hint", "")]
    texts += list(raw.get("why_wrong", {}).values()) + list(raw.get("mistakes", {}).values())
    return [t.split("{")[0][:60] for t in texts if len(t.split("{")[0]) >= 25]


def _digests(qid: str, answer) -> list[str]:
    spellings = {str(answer), json.dumps(answer), f"{qid}:{answer}", f"mhalib-quiz:{qid}:{answer}"}
    found = []
    for text in spellings:
        for name in ("sha256", "sha1", "md5"):
            digest = hashlib.new(name, text.encode()).hexdigest()
            found += [digest, digest[:20]]
    return found


def _package_text() -> str:
    return "\n".join(p.read_text(encoding="utf-8", errors="replace")
                     for p in PACKAGE.rglob("*") if p.is_file() and p.suffix in (".py", ".json",
                                                                                  ".toml", ".txt"))


@pytest.fixture(scope="module")
def releases():
    """{mode: {assignment: {file name: text}}}: assessed releases generated with nbgrader, and
    the committed practice release (notebooks/, held to a fresh one by the drift test)."""
    practice = {lesson.assignment: {p.name: p.read_text(encoding="utf-8")
                                    for p in (COURSE.notebooks / lesson.assignment).iterdir()
                                    if p.is_file()}
                for lesson in course.LESSONS}
    # every lesson in one nbgrader process (a process per lesson took about 6 s each)
    assessed = generate_many([lesson.assignment for lesson in course.LESSONS], COURSE.solutions,
                             COURSE.keys, mode="assessed")
    assert set(assessed) == {lesson.assignment for lesson in course.LESSONS}
    return {"assessed": assessed, "practice": practice}


def _grade_id(cell: dict) -> str:
    return cell.get("metadata", {}).get("nbgrader", {}).get("grade_id", "")


def _quick_check_text(files: dict) -> str:
    """The quick-check cells, the notebook metadata and the release's other files."""
    parts = []
    for name, text in files.items():
        if not name.endswith(".ipynb"):
            parts.append(text)
            continue
        notebook = json.loads(text)
        parts.append(json.dumps(notebook.get("metadata", {})))
        parts += [json.dumps(cell) for cell in notebook["cells"]
                  if _grade_id(cell).startswith("qc_")]
    return "\n".join(parts)


def test_assessed_release_records_its_mode_and_ships_no_keys(releases):
    for assignment, files in releases["assessed"].items():
        data = json.loads(files["quick_checks.json"])
        assert data == {"assignment": assignment, "mode": "assessed"}
        for name, text in files.items():
            if name.endswith(".ipynb"):
                assert json.loads(text)["metadata"]["mhalib"] == {"quick_checks": "assessed"}


@pytest.mark.parametrize("mode", ["assessed", "practice"])
def test_keys_are_in_the_practice_release_only(releases, mode):
    leaked = []
    for lesson, qid, _, _, raw in ITEMS:
        files = releases[mode][lesson.assignment]
        everything = "\n".join(files.values())
        cells = _quick_check_text(files)
        found = [t for t in _texts(raw) if t in everything]
        found += [d for d in _digests(qid, raw["answer"]) if d in everything]
        if isinstance(raw["answer"], str) and json.dumps(raw["answer"])[1:-1] in cells:
            found.append(raw["answer"])
        if found:
            leaked.append((qid, found[:2]))
    if mode == "assessed":
        assert not leaked, f"keys in the assessed release: {leaked[:5]}"
    else:
        assert len(leaked) == len(ITEMS), "the search must find every key in a practice release"


def test_the_installed_package_holds_no_key():
    text = _package_text()
    leaked = []
    for _, qid, _, _, raw in ITEMS:
        found = [t for t in _texts(raw) if t in text]
        found += [d for d in _digests(qid, raw["answer"]) if d in text]
        if found:
            leaked.append((qid, found[:2]))
    assert not leaked, f"keys inside mhalib/: {leaked[:5]}"
    assert "KEYS = {" not in text and "option_digest" not in text
