"""Collecting a cell's outputs in nbformat shape, under a byte budget (runs in the sandbox).

A learner who prints 50 MB costs the grader nothing: text beyond the budget is counted, not
kept, and the notebook's outputs end with a note saying how much was dropped.
"""

from __future__ import annotations

import io
import json

from IPython.core.displayhook import DisplayHook
from IPython.core.displaypub import DisplayPublisher

# MIME types kept in the graded notebook; anything else (widgets, javascript) is dropped
KEPT_MIME_TYPES = ("text/plain", "text/html", "text/markdown", "text/latex", "image/png",
                   "image/jpeg", "image/svg+xml", "application/json")


class OutputBudget:
    """Outputs of the current cell plus the byte budgets of the cell and the whole notebook."""

    def __init__(self, notebook_bytes: int, cell_bytes: int):
        self.notebook_left = int(notebook_bytes)
        self.cell_bytes = int(cell_bytes)
        self.cell_left = self.cell_bytes
        self.outputs: list[dict] = []
        self.dropped_bytes = 0  # in the current cell
        self.execution_count: int | None = None

    def start_cell(self) -> None:
        self.outputs = []
        self.dropped_bytes = 0
        self.cell_left = self.cell_bytes

    def take(self, size: int) -> bool:
        """Reserve ``size`` bytes if both budgets allow it; otherwise count them as dropped."""
        if size <= min(self.cell_left, self.notebook_left):
            self.cell_left -= size
            self.notebook_left -= size
            return True
        self.dropped_bytes += size
        return False

    def add_text(self, name: str, text: str) -> None:
        room = min(self.cell_left, self.notebook_left)
        encoded_size = len(text.encode("utf-8", "replace"))
        if encoded_size > room:
            kept = text.encode("utf-8", "replace")[:max(room, 0)].decode("utf-8", "ignore")
            self.dropped_bytes += encoded_size - len(kept.encode("utf-8"))
            text = kept
        if not text:
            return
        self.take(len(text.encode("utf-8")))
        if self.outputs and self.outputs[-1].get("output_type") == "stream" \
                and self.outputs[-1]["name"] == name:
            self.outputs[-1]["text"] += text
        else:
            self.outputs.append({"output_type": "stream", "name": name, "text": text})

    def add_rich(self, output_type: str, data: dict, metadata: dict | None) -> None:
        kept = {}
        for mime in KEPT_MIME_TYPES:
            value = data.get(mime) if isinstance(data, dict) else None
            if isinstance(value, (dict, list)) and mime == "application/json":
                value = json.dumps(value)
            if isinstance(value, str):
                kept[mime] = value
        if not kept:
            return
        size = sum(len(v.encode("utf-8", "replace")) for v in kept.values())
        if not self.take(size):
            return
        output = {"output_type": output_type, "data": kept, "metadata": {}}
        if output_type == "execute_result":
            output["execution_count"] = self.execution_count
        self.outputs.append(output)

    def add_error(self, ename: str, evalue: str, traceback: list[str]) -> None:
        lines = [str(line) for line in traceback][-60:]
        size = len(ename) + len(evalue) + sum(len(line) for line in lines)
        if not self.take(min(size, self.cell_left, self.notebook_left)):
            lines = lines[-3:]
        self.outputs.append({"output_type": "error", "ename": ename[:200],
                             "evalue": evalue[:2000], "traceback": [s[:4000] for s in lines]})


class CappedStream(io.TextIOBase):
    """``sys.stdout`` / ``sys.stderr`` replacement that writes into an :class:`OutputBudget`."""

    def __init__(self, budget: OutputBudget, name: str):
        super().__init__()
        self._budget = budget
        self.name = name

    @property
    def encoding(self) -> str:
        return "utf-8"

    def writable(self) -> bool:
        return True

    def isatty(self) -> bool:
        return False

    def write(self, text) -> int:
        if not isinstance(text, str):
            text = str(text)
        self._budget.add_text(self.name, text)
        return len(text)

    def flush(self) -> None:
        return None


class CollectingPublisher(DisplayPublisher):
    """``display(...)`` outputs become ``display_data`` entries of the current cell."""

    budget: OutputBudget | None = None

    def publish(self, data, metadata=None, source=None, *, transient=None, update=False,
                **kwargs) -> None:
        if self.budget is not None:
            self.budget.add_rich("display_data", data, metadata)

    def clear_output(self, wait=False) -> None:
        if self.budget is not None:
            self.budget.outputs = []


class CollectingDisplayHook(DisplayHook):
    """The value of a cell's last expression becomes its ``execute_result``."""

    budget: OutputBudget | None = None

    def write_output_prompt(self) -> None:
        return None

    def write_format_data(self, format_dict, md_dict=None) -> None:
        if self.budget is not None:
            self.budget.execution_count = self.prompt_count
            self.budget.add_rich("execute_result", format_dict, md_dict)

    def finish_displayhook(self) -> None:
        return None
