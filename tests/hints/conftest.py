"""Fixtures of the hint tests: a lesson folder released in either mode, a fresh ledger, and an
IPython shell whose displays are captured."""

from __future__ import annotations

import json

import pytest

from mhalib.classroom.release import release_data
from mhalib.hints import ledger as hint_ledger
from mhalib.quiz import session as quiz_session
from mhalib.quiz.keys import RELEASE_FILE
from tests.checkout import COURSE

ASSIGNMENT = "01-single-head"


@pytest.fixture
def lesson_folder(tmp_path, monkeypatch, request):
    """An empty folder named like lesson 01's, as the kernel's working folder; no release file
    and no saved notebook yet, and no ledger or quiz session from an earlier test (nor an
    IPython shell another test in this worker left behind, unless the test asks for one)."""
    if "shell_outputs" not in request.fixturenames:
        from IPython.core.interactiveshell import InteractiveShell

        if InteractiveShell.initialized():
            InteractiveShell.clear_instance()
    folder = tmp_path / ASSIGNMENT
    folder.mkdir()
    monkeypatch.chdir(folder)
    monkeypatch.delenv("NBGRADER_EXECUTION", raising=False)
    monkeypatch.delenv("JPY_SESSION_NAME", raising=False)
    monkeypatch.setattr(quiz_session, "_SESSION", None)
    monkeypatch.setattr(hint_ledger, "_LEDGER", None)
    return folder


def release(folder, mode: str) -> None:
    """Make ``folder`` a release of lesson 01 in quick-check ``mode``; the next hint or check
    starts a new kernel's state."""
    (folder / RELEASE_FILE).write_text(json.dumps(release_data(ASSIGNMENT, mode, COURSE.keys)))
    quiz_session._SESSION = None
    hint_ledger._LEDGER = None


def save_notebook(folder, monkeypatch, cells: list, metadata: dict | None = None) -> None:
    """A saved copy of this kernel's notebook (what JupyterLab wrote at the last save)."""
    notebook = {"cells": cells, "metadata": metadata or {}, "nbformat": 4, "nbformat_minor": 5}
    (folder / "lesson.ipynb").write_text(json.dumps(notebook))
    monkeypatch.setenv("JPY_SESSION_NAME", "lesson.ipynb")
    quiz_session._SESSION = None
    hint_ledger._LEDGER = None


@pytest.fixture
def shell_outputs():
    """An IPython shell (not a kernel) whose display outputs are collected in the list yielded:
    each a dict with ``data``, ``transient`` (the display id) and ``update``."""
    from IPython.core.displaypub import CapturingDisplayPublisher
    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell.instance()
    publisher, shell.display_pub = shell.display_pub, CapturingDisplayPublisher()
    try:
        yield shell.display_pub.outputs
    finally:
        shell.display_pub = publisher
        InteractiveShell.clear_instance()
