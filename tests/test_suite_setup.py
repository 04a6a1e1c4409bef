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
