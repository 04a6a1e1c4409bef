"""Returning feedback through nbgrader's exchange: each page paired with its submission."""

from __future__ import annotations

import pytest

from mhalib.classroom.hub.feedback import pair_feedback_with_submissions


def test_feedback_is_paired_with_its_submission(tmp_path):
    for student in ("ada", "bert"):
        (tmp_path / "feedback" / student / "01").mkdir(parents=True)
    (tmp_path / "submitted" / "ada" / "01").mkdir(parents=True)
    for name in ("timestamp.txt", "submission_secret.txt"):
        (tmp_path / "submitted" / "ada" / "01" / name).write_text(name)
    assert pair_feedback_with_submissions(tmp_path, "01") == ["ada"]
    assert (tmp_path / "feedback" / "ada" / "01" / "submission_secret.txt").read_text() == \
        "submission_secret.txt"
    with pytest.raises(ValueError, match="matches a collected submission"):
        pair_feedback_with_submissions(tmp_path, "02")
