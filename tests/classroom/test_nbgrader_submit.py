"""nbgrader's submit, closed to all but the instructor's group."""

from __future__ import annotations

import os
import stat

import pytest

from mhalib.classroom.nbgrader_submit import restrict_to_group


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0,
                    reason="changing a file's group to another group needs root")
def test_a_submission_is_closed_to_all_but_the_instructors_group(tmp_path):
    inbound = tmp_path / "inbound"
    inbound.mkdir()
    os.chown(inbound, 0, 100)
    inbound.chmod(0o2733)
    submission = inbound / "ada+01+stamp+random"
    submission.mkdir()
    (submission / "nb.ipynb").write_text("{}")
    os.chown(submission / "nb.ipynb", 0, 0)  # as if written after the set-gid bit was lost
    restrict_to_group(str(submission), str(inbound))
    notebook = (submission / "nb.ipynb").stat()
    assert (notebook.st_gid, stat.S_IMODE(notebook.st_mode)) == (100, 0o640)
    assert stat.S_IMODE(submission.stat().st_mode) == 0o770
    assert (submission / "nb.ipynb").read_text() == "{}"
    assert not list(inbound.glob(".mhalib-submit-*"))
