"""One nbgrader configuration: the course checkout's config file and the class hub's instructor
config are both :func:`configure`, each on its own course folder."""

from __future__ import annotations

import os

from nbgrader.preprocessors import ClearOutput, Execute
from traitlets.config import Config, PyFileConfigLoader

from mhalib import course
from mhalib.classroom.course_folder import CourseFiles
from mhalib.classroom.hub.class_setup import KEYS_FOLDER, _instructor_nbgrader
from mhalib.classroom.nbgrader_quick_checks import ScoreQuickChecks, StashQuickCheckAnswers
from tests.checkout import REPO


def _exec_config(text: str) -> Config:
    config = Config()
    exec(compile(text, "nbgrader_config.py", "exec"), {"get_config": lambda: config})
    return config


def _scores_quick_checks(config: Config) -> None:
    sanitize = config.Autograde.sanitize_preprocessors
    steps = config.Autograde.autograde_preprocessors
    assert sanitize.index(StashQuickCheckAnswers) < sanitize.index(ClearOutput)
    assert steps.index(ScoreQuickChecks) == steps.index(Execute) + 1


def test_the_course_config_points_nbgrader_at_the_checkout(monkeypatch):
    monkeypatch.delenv("MHALIB_QUICK_CHECK_KEYS", raising=False)
    config = PyFileConfigLoader("nbgrader_config.py", path=str(REPO / "grading")).load_config()
    folders = config.CourseDirectory
    assert (folders.root, folders.course_id) == (str(REPO), "mha-course")
    assert (folders.source_directory, folders.release_directory) == ("solutions", "notebooks")
    assert [folders.submitted_directory, folders.autograded_directory,
            folders.feedback_directory] == [os.path.join("grading", "course", part)
                                            for part in ("submitted", "autograded", "feedback")]
    assert folders.db_url == f"sqlite:///{REPO / 'grading' / 'course' / 'gradebook.db'}"
    assert folders.db_assignments == [{"name": a} for a in course.assignments()]
    assert config.ClearSolutions.code_stub == {
        "python": "# YOUR CODE HERE\nraise NotImplementedError()"}
    assert config.ClearSolutions.enforce_metadata is True
    assert (config.Execute.timeout, config.Execute.allow_errors) == (120, True)
    assert config.ScoreQuickChecks.keys_dir == str(REPO / "grading" / "quick_checks")
    _scores_quick_checks(config)


def test_the_instructors_config_on_the_hub_is_the_same_on_their_course(tmp_path, monkeypatch):
    """The formgrader's autograde on the hub stashes and scores quick checks with the keys that
    mhalib hub copied into the instructor's private course folder; loading the config changes
    nothing in the environment."""
    monkeypatch.setenv("MHALIB_QUICK_CHECK_KEYS", "unchanged-by-the-test")
    on_hub = _exec_config(_instructor_nbgrader(CourseFiles.nbgrader(tmp_path, KEYS_FOLDER)))
    checkout = PyFileConfigLoader("nbgrader_config.py", path=str(REPO / "grading")).load_config()
    assert set(on_hub) == set(checkout)  # the same settings, sections...
    assert set(on_hub.CourseDirectory) == set(checkout.CourseDirectory)  # ...and traits
    folders = on_hub.CourseDirectory
    assert folders.root == str(tmp_path)
    assert (folders.source_directory, folders.release_directory) == ("source", "release")
    assert folders.submitted_directory == "submitted"
    assert folders.db_url == f"sqlite:///{tmp_path / 'gradebook.db'}"
    assert on_hub.ClearSolutions.code_stub == checkout.ClearSolutions.code_stub
    assert on_hub.ScoreQuickChecks.keys_dir == str(tmp_path / KEYS_FOLDER)
    _scores_quick_checks(on_hub)
    assert os.environ["MHALIB_QUICK_CHECK_KEYS"] == "unchanged-by-the-test"
