"""Where units of work run: in this process, in N local worker processes, or on Dask.

A batch is all notebooks of one student (so a student is never graded twice at once); every
backend calls the same :func:`mhalib.grading.unit.grade_student` and hands each finished result
to ``on_result`` in this process, the single writer. Each worker process keeps one warm
sandbox for all the students it grades.
"""

from __future__ import annotations

import multiprocessing
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor, as_completed

from mhalib.grading.records import GradingResult, GradingTask
from mhalib.grading.unit import close_sandboxes, grade_student, grader_error_result

OnResult = Callable[[GradingResult], None]
Batch = list[GradingTask]


def _failed_batch(batch: Batch, error: BaseException) -> list[GradingResult]:
    return [grader_error_result(task, error) for task in batch]


def run_inline(batches: list[Batch], on_result: OnResult) -> None:
    """One worker: this process (no pool start-up cost)."""
    try:
        for batch in batches:
            for result in grade_student(batch):
                on_result(result)
    finally:
        close_sandboxes()


def _worker_start() -> None:
    from multiprocessing import util

    util.Finalize(None, close_sandboxes, exitpriority=100)


def run_local(batches: list[Batch], jobs: int, on_result: OnResult) -> None:
    """``jobs`` worker processes, each grading many students with its own warm sandbox."""
    if jobs < 1:
        raise ValueError(f"jobs={jobs} must be at least 1")
    if jobs == 1 or len(batches) <= 1:
        run_inline(batches, on_result)
        return
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=min(jobs, len(batches)), mp_context=context,
                             initializer=_worker_start) as pool:
        futures = {pool.submit(grade_student, batch): batch for batch in batches}
        for future in as_completed(futures):
            try:
                results = future.result()
            except Exception as error:  # a worker process died: its students are flagged
                results = _failed_batch(futures[future], error)
            for result in results:
                on_result(result)


def run_dask(batches: list[Batch], scheduler: str, on_result: OnResult) -> None:
    """Submit every batch to the Dask scheduler at ``scheduler`` (e.g. tcp://host:8786).

    Workers need mhalib (and bubblewrap) installed; each keeps its own warm sandbox.
    """
    from distributed import Client
    from distributed import as_completed as dask_completed

    with Client(scheduler, timeout="30s") as client:
        futures = client.map(grade_student, batches, pure=False)
        batch_of = {future.key: batch for future, batch in zip(futures, batches)}
        for future in dask_completed(futures):
            try:
                results = future.result()
            except Exception as error:
                results = _failed_batch(batch_of[future.key], error)
            for result in results:
                on_result(result)
