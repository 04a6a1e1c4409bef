"""``mhalib hub`` from the command line: what is missing is named (the hub itself:
tests/classroom/hub)."""

from __future__ import annotations

from mhalib.cli import main


def test_mhalib_hub_names_what_is_missing(capsys):
    assert main(["hub", "setup"]) == 2
    assert "--instructor is required" in capsys.readouterr().err
    assert main(["hub", "feedback"]) == 2
    assert "assignment id" in capsys.readouterr().err
