"""The class's shared environment: what every user can reach (building it: test_class_on_hub)."""

from __future__ import annotations

import stat

from mhalib.classroom.hub.environment import others_can_reach


def test_others_can_reach_follows_every_parent(tmp_path):
    assert others_can_reach("/usr/bin/env", execute=True)
    inside = tmp_path / "file"
    inside.write_text("x")
    inside.chmod(0o644)
    tmp_path.chmod(0o700)
    assert not others_can_reach(inside)
    tmp_path.chmod(0o755)
    assert others_can_reach(inside) == all(
        p.stat().st_mode & stat.S_IXOTH for p in tmp_path.parents)
