"""Every demo cell depends only on the import cell, mhalib's helpers and the exercises it names.

Each solutions notebook runs top to bottom in one kernel, then every code cell runs again in
reverse order in the same kernel: a cell that relied on a name an earlier demo cell left behind
(``layer``, ``x``, ``rng``, a helper defined in a checking cell...) sees a later cell's value or
a stale one and fails, or a cell that rebinds a name breaks one above it. Costly cells keep
their results (lesson 08's training, lesson 05's timings), so the reverse pass does not redo
them.
"""

from __future__ import annotations

import os
import time

import nbformat
import pytest
from jupyter_client.manager import KernelManager
from nbclient import NotebookClient

from mhalib.checks import NOTEBOOKS
from mhalib.classroom.release import assignments, tool_env
from tests.checkout import COURSE, REPO

# In the nbgrader group's worker: run beside that group's batch of kernels, a kernel of this test
# once waited out its whole cell timeout (two suite runs, never alone).
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("nbgrader")]


def error_outputs(cell) -> list[str]:
    return [f"{out.get('ename')}: {out.get('evalue', '')[:300]}" for out in cell.get("outputs", [])
            if out.get("output_type") == "error"]


def label(cell) -> str:
    return f"{cell.get('id')} ({cell.source.splitlines()[0][:50] if cell.source else ''})"


@pytest.fixture
def kernel_env(monkeypatch):
    for name, value in tool_env().items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(REPO),
                                                                   os.environ.get("PYTHONPATH")])))
    monkeypatch.delenv("MHALIB_GRADING", raising=False)
    monkeypatch.setenv("MPLBACKEND", "Agg")
    for variable in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        monkeypatch.setenv(variable, "1")


@pytest.mark.parametrize("assignment", assignments(COURSE.solutions))
def test_cells_run_in_any_order_after_the_notebook(assignment, kernel_env, tmp_path):
    path = REPO / "solutions" / assignment / NOTEBOOKS[assignment]
    notebook = nbformat.read(path, as_version=4)
    # IPC sockets, not TCP ports: no race for a free port with kernels started beside it
    kernel = KernelManager(kernel_name="python3", transport="ipc", ip=str(tmp_path / "ipc"),
                           connection_file=str(tmp_path / "kernel.json"))
    client = NotebookClient(notebook, km=kernel, timeout=300, allow_errors=True,
                            resources={"metadata": {"path": str(tmp_path)}})
    code = [(index, cell) for index, cell in enumerate(notebook.cells) if cell.cell_type == "code"]
    started = time.perf_counter()
    try:
        with client.setup_kernel():
            for index, cell in code:
                client.execute_cell(cell, index)
            forward = [(label(cell), error_outputs(cell)) for _, cell in code
                       if error_outputs(cell)]
            assert not forward, f"{assignment}, top to bottom: {forward}"
            forward_s = time.perf_counter() - started
            for index, cell in reversed(code):
                client.execute_cell(cell, index)
                found = error_outputs(cell)
                assert not found, (f"{assignment}: {label(cell)} fails when run again after "
                                   f"the cells below it: {found}")
    finally:  # a kernel manager passed in is not the client's to shut down: 12 idle
        # kernels (up to 0.5 GB each) outlived their tests for the rest of the session
        if kernel.has_kernel:
            kernel.shutdown_kernel(now=True)
    print(f"\n{assignment}: top to bottom {forward_s:.1f} s, reverse "
          f"{time.perf_counter() - started - forward_s:.1f} s (wall)")
