"""The test suite's own set-up does what the rest of the suite relies on."""

from __future__ import annotations

import os

import pytest


@pytest.mark.xdist_group("setup-probe")
def test_loadgroup_keeps_grouped_tests_on_one_worker(request):
    """pytest-xdist's ``--dist loadgroup`` sends a group to one worker by appending ``@group``
    to the node id of each of its tests. A pytest that ignores the rewrite (9.2 with xdist 3.8)
    spreads every group over the workers, and session fixtures meant to run once (the batched
    nbgrader run, JupyterLab and Chromium) then run on each worker, doubling the suite's time."""
    if not getattr(request.config.option, "loadgroup", False):
        pytest.skip("not an xdist worker under --dist loadgroup")
    assert request.node.nodeid.endswith("@setup-probe"), (
        f"--dist loadgroup has no effect with pytest {pytest.__version__} "
        f"(worker {os.environ.get('PYTEST_XDIST_WORKER')}): install the versions pinned in "
        "pyproject.toml, [project.optional-dependencies] test")


def test_tests_sharing_a_costly_fixture_share_a_worker(request):
    """Every key of SHARED_FIXTURE_GROUPS names a fixture some collected test uses (when its
    folder or module was collected: a renamed fixture would silently lose its group), and every
    test using it is in an xdist group (its own, or one it named)."""
    from tests.conftest import SHARED_FIXTURE_GROUPS

    items = request.session.items
    for key in SHARED_FIXTURE_GROUPS:
        baseid, name = key.rsplit("::", 1)
        if not any(item.nodeid.startswith(baseid) for item in items):
            continue  # not collected in this run
        users = [item for item in items
                 if any(d.baseid == baseid
                        for d in item._fixtureinfo.name2fixturedefs.get(name, ()))]
        assert users, f"no collected test uses the fixture {key} (renamed or moved?)"
        ungrouped = [item.nodeid for item in users if not item.get_closest_marker("xdist_group")]
        assert not ungrouped, f"tests using {key} in no xdist group: {ungrouped[:3]}"
