"""Finding submissions: nbgrader folders, LMS zips, and what goes wrong with them."""

from __future__ import annotations

import io
import zipfile

import pytest

from mhalib.grading.intake import discover, student_id
from mhalib.grading.sandbox.limits import Limits

NB = "single_head_attention.ipynb"
LIMITS = Limits(notebook_bytes=10_000, files_bytes=1_000)


def _zip(path, members: dict[str, bytes]) -> None:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in members.items():
            archive.writestr(name, data)


@pytest.mark.parametrize("name, from_zip, expected", [
    ("alice", False, "alice"), ("student_123", False, "student_123"),
    ("alice_12345_678_single_head", True, "alice"), ("Bob Smith", True, "Bob-Smith"),
    ("../../etc", False, "etc"), ("", False, "unnamed"),
])
def test_student_ids_are_safe(name, from_zip, expected):
    assert student_id(name, from_zip=from_zip) == expected


def test_nbgrader_layout_with_timestamp_and_extra_files(tmp_path):
    folder = tmp_path / "alice" / "01-single-head"
    (folder / "data").mkdir(parents=True)
    (folder / NB).write_bytes(b"{}")
    (folder / "timestamp.txt").write_text("2025-01-15 12:00:00 UTC")
    (folder / "data" / "table.csv").write_bytes(b"1,2")
    (folder / "big.bin").write_bytes(b"x" * 5_000)  # over the files budget: left out
    (tmp_path / "bob" / "02-multi-head").mkdir(parents=True)  # another assignment only
    found = discover(tmp_path, "01-single-head", [NB], LIMITS)
    assert [s.student for s in found] == ["alice"]
    assert found[0].notebooks[NB] == b"{}"
    assert found[0].timestamp.startswith("2025-01-15")
    assert found[0].files == {"data/table.csv": b"1,2"}


def test_zips_from_an_lms(tmp_path):
    _zip(tmp_path / "carla_111_222.zip", {f"work/{NB}": b"{}", "work/notes.txt": b"hi",
                                          "__MACOSX/._x": b"junk", "../../evil.py": b"bad"})
    _zip(tmp_path / "dan.zip", {"Single_Head_Attention.ipynb": b"{}"})  # case changed
    _zip(tmp_path / "erin.zip", {"readme.txt": b"no notebook"})
    (tmp_path / "fay.zip").write_bytes(b"PK\x03\x04 broken")
    _zip(tmp_path / "gil.zip", {NB: b"x" * 20_000})
    found = {s.student: s for s in discover(tmp_path, "01-single-head", [NB], LIMITS)}
    assert found["carla"].notebooks[NB] == b"{}"
    assert found["carla"].files == {"notes.txt": b"hi"}
    assert found["dan"].notebooks[NB] == b"{}"
    assert found["erin"].errors[NB][0] == "missing_notebook"
    assert found["fay"].errors[NB][0] == "invalid_notebook"
    assert found["gil"].errors[NB][0] == "too_large"
    assert not (tmp_path.parent / "evil.py").exists()


def test_zip_bomb_member_is_not_inflated(tmp_path):
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr(NB, b"{}")
        archive.writestr("bomb.bin", b"\0" * 50_000_000)  # 50 MB of zeros, ~50 kB zipped
    (tmp_path / "hal.zip").write_bytes(buffer.getvalue())
    found = discover(tmp_path, "01-single-head", [NB], LIMITS)[0]
    assert found.notebooks[NB] == b"{}" and "bomb.bin" not in found.files


def test_second_submission_of_a_student_is_reported(tmp_path):
    (tmp_path / "ivy" / "01-single-head").mkdir(parents=True)
    (tmp_path / "ivy" / "01-single-head" / NB).write_bytes(b"{}")
    _zip(tmp_path / "ivy.zip", {NB: b"[]"})
    said = []
    found = discover(tmp_path, "01-single-head", [NB], LIMITS, warn=said.append)
    assert len(found) == 1 and found[0].notebooks[NB] == b"{}"
    assert "second submission" in said[0]


def test_submitted_must_be_a_folder(tmp_path):
    with pytest.raises(ValueError, match="is not a folder"):
        discover(tmp_path / "nope", "01-single-head", [NB], LIMITS)
