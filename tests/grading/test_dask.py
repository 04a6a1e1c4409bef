"""The same unit of work on a Dask distributed cluster (a local one here) gives the same grades."""

from __future__ import annotations

import pytest

from mhalib.grading.pipeline import GradingRun, grade_class
from mhalib.grading.sandbox.limits import Limits
from tests.checkout import COURSE
from tests.grading.conftest import ASSIGNMENT, SOURCE, read_results

STUDENTS = ["correct", "partly-wrong", "os-exit", "invalid-json"]


def test_local_cluster_matches_local_grading(catalogue_run, tmp_path):
    distributed = pytest.importorskip("distributed")
    limits = Limits(notebook_seconds=10, cell_seconds=2, call_seconds=0.3, memory_mb=1024,
                    notebook_bytes=1_000_000)
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None) as cluster:
        run = GradingRun(assignment=ASSIGNMENT, submitted=catalogue_run["submitted"],
                         source=SOURCE, course=tmp_path / "course", keys=COURSE.keys,
                         scheduler=cluster.scheduler_address, seed=1234, students=STUDENTS,
                         limits=limits, progress=False)
        summary = grade_class(run, echo=lambda text: None)
    assert summary.graded == len(STUDENTS) and summary.integrity == "ok"
    on_cluster = read_results(tmp_path / "course")
    for student in STUDENTS:
        local = catalogue_run["results"][student]
        remote = on_cluster[student]
        assert remote["seed"] == local["seed"]
        assert {k: v["points"] for k, v in remote["verdicts"].items()} == {
            k: v["points"] for k, v in local["verdicts"].items()}, student
        assert {i["flag"] for i in remote["issues"]} == {i["flag"] for i in local["issues"]}
