"""The widget lesson still runs without a browser: nbclient, as the grader runs notebooks.

Widgets need a front-end to draw them, not to run: under nbclient each one leaves a
``widget-view`` output (with a plain-text fallback) and its model in the notebook's saved
widget state, so that an HTML export can still show it.
"""

from __future__ import annotations

import nbformat
import pytest
from jupyter_client.manager import KernelManager
from nbclient import NotebookClient

from tests.browser.lab_server import REPO

SOURCE = REPO / "solutions" / "01-single-head" / "single_head_attention.ipynb"
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
WIDGET_STATE = "application/vnd.jupyter.widget-state+json"


def widget_views(notebook) -> list[dict]:
    return [output["data"][WIDGET_VIEW] for cell in notebook.cells if cell.cell_type == "code"
            for output in cell.get("outputs", []) if WIDGET_VIEW in output.get("data", {})]


@pytest.mark.slow
def test_lesson_01_runs_headless_and_keeps_its_widgets(tmp_path):
    if not SOURCE.is_file():
        pytest.fail(f"{SOURCE.relative_to(REPO)} is missing")
    notebook = nbformat.read(SOURCE, as_version=4)
    # IPC sockets, not TCP ports, as in tests/notebooks/test_any_order.py: a kernel started
    # beside others can lose its replies to a race for the same free port (this 5 s notebook
    # took 305 s in a full suite run)
    kernel = KernelManager(kernel_name="python3", transport="ipc", ip=str(tmp_path / "ipc"),
                           connection_file=str(tmp_path / "kernel.json"))
    client = NotebookClient(notebook, km=kernel, timeout=300,
                            resources={"metadata": {"path": str(tmp_path)}},
                            store_widget_state=True)
    try:
        client.execute()  # raises CellExecutionError on the first failing cell
    finally:  # a kernel manager passed in is not the client's to shut down
        if kernel.has_kernel:
            kernel.shutdown_kernel(now=True)

    errors = [output for cell in notebook.cells if cell.cell_type == "code"
              for output in cell.get("outputs", []) if output.output_type == "error"]
    assert errors == []
    views = widget_views(notebook)
    assert views, "lesson 01 shows no widget"
    state = notebook.metadata["widgets"][WIDGET_STATE]["state"]
    missing = [view["model_id"] for view in views if view["model_id"] not in state]
    assert missing == [], "widget views without a saved model"
