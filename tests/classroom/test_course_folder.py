"""Where the course lives: the command line, then the environment, then the working folder;
never where the package is installed."""

from __future__ import annotations

from pathlib import Path

from mhalib.classroom.course_folder import CourseFiles, locate


def test_the_working_directory_is_the_last_resort(tmp_path):
    files = locate(environ={}, cwd=tmp_path)
    assert files == CourseFiles(tmp_path, tmp_path / "solutions", tmp_path / "notebooks",
                                tmp_path / "grading" / "quick_checks",
                                tmp_path / "grading" / "course")


def test_the_option_wins_over_the_environment_over_the_working_directory(tmp_path):
    option, variable, here = tmp_path / "option", tmp_path / "variable", tmp_path / "here"
    environ = {"MHALIB_COURSE_ROOT": str(variable)}
    assert locate(option, environ=environ, cwd=here).root == option
    assert locate(environ=environ, cwd=here).root == variable
    assert locate(environ=environ, cwd=here).solutions == variable / "solutions"


def test_a_part_named_on_its_own_wins_over_the_layout(tmp_path):
    keys = tmp_path / "private" / "keys"
    environ = {"MHALIB_QUICK_CHECK_KEYS": str(keys)}
    files = locate(tmp_path, environ=environ)
    assert files.keys == keys and files.solutions == tmp_path / "solutions"
    assert locate(tmp_path, keys=tmp_path / "mine", environ=environ).keys == tmp_path / "mine"
    chosen = locate(tmp_path, solutions=tmp_path / "src", course=tmp_path / "out", environ={})
    assert (chosen.solutions, chosen.course) == (tmp_path / "src", tmp_path / "out")


def test_relative_names_are_taken_from_the_working_directory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    files = locate(Path("course"), solutions=Path("elsewhere"), environ={})
    assert files.root == tmp_path / "course" and files.solutions == tmp_path / "elsewhere"


def test_an_nbgrader_course_keeps_everything_at_its_top(tmp_path):
    files = CourseFiles.nbgrader(tmp_path, "keys")
    assert (files.solutions, files.notebooks, files.keys, files.course) == (
        tmp_path / "source", tmp_path / "release", tmp_path / "keys", tmp_path)
