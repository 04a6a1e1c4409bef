"""Which keys a kernel may see: the release's in practice, none when assessed, and the
instructor's own when it runs the master, found from the kernel's folder or the environment,
never from where the package is installed."""

from __future__ import annotations

import json
import shutil

import pytest

from mhalib import course
from mhalib.quiz.keys import KEYS_VARIABLE, RELEASE_FILE
from mhalib.quiz.session import QuizSession
from tests.checkout import COURSE, keys_of

ASSIGNMENT = "01-single-head"
QUESTION = "qc_scale_divisor"


@pytest.fixture
def no_keys_variable(monkeypatch):
    monkeypatch.delenv(KEYS_VARIABLE, raising=False)


def _course_with_keys(top):
    """A course folder ``top`` with the lesson's source folder and the instructor's keys."""
    (top / course.SOURCE_DIR / ASSIGNMENT).mkdir(parents=True)
    (top / course.KEYS_DIR).mkdir(parents=True)
    name = course.lesson(ASSIGNMENT).quick_check_keys
    shutil.copy(COURSE.keys / name, top / course.KEYS_DIR / name)
    return top / course.SOURCE_DIR / ASSIGNMENT


def test_the_master_in_a_course_folder_gets_the_courses_keys(tmp_path, no_keys_variable):
    master = _course_with_keys(tmp_path / "anywhere" / "my-course")
    session = QuizSession(master)
    assert session.key_data(QUESTION, ASSIGNMENT) == keys_of(ASSIGNMENT)[QUESTION]
    assert session.key_data(QUESTION, "02-multi-head") is None  # another lesson's question


def test_the_keys_variable_serves_the_instructors_own_course_layout(tmp_path, monkeypatch):
    """On a class hub the instructor's master is ~/mha-course/source/<assignment>."""
    master = tmp_path / "mha-course" / "source" / ASSIGNMENT
    master.mkdir(parents=True)
    monkeypatch.setenv(KEYS_VARIABLE, str(COURSE.keys))
    assert QuizSession(master).key_data(QUESTION, ASSIGNMENT) == keys_of(ASSIGNMENT)[QUESTION]


def test_elsewhere_without_a_release_file_the_form_only_records(tmp_path, no_keys_variable):
    folder = tmp_path / "downloads" / ASSIGNMENT
    folder.mkdir(parents=True)
    assert QuizSession(folder).key_data(QUESTION, ASSIGNMENT) is None


def test_the_release_file_decides_even_in_the_masters_folder(tmp_path, no_keys_variable):
    master = _course_with_keys(tmp_path)
    (master / RELEASE_FILE).write_text(json.dumps({"assignment": ASSIGNMENT,
                                                   "mode": "assessed"}))
    assert QuizSession(master).key_data(QUESTION, ASSIGNMENT) is None
