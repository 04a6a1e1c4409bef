"""The class run: before a class is graded, the release notebook with the instructor's answers
runs once in the sandbox and exports the cells marked for the class cache
(:mod:`mhalib.grading.cached_cells`, :mod:`mhalib.grading.sandbox.class_cache`), so each
learner's unchanged copy of them can be replayed instead of re-run (lesson 08's training: about
30 s of CPU per notebook otherwise)."""

from __future__ import annotations

import time
from dataclasses import replace

from mhalib.grading.answered_notebook import answer_sources, submission
from mhalib.grading.assignment import NotebookModel
from mhalib.grading.cached_cells import cell_source, is_cacheable, memo_paths
from mhalib.grading.plan import build_plan, sandbox_plan
from mhalib.grading.sandbox.class_cache import cache_key
from mhalib.grading.sandbox.limits import Limits

# the instructor's cells get room even when a class is graded with tight limits
CLASS_RUN_SECONDS = 900.0


def class_run_plan(model: NotebookModel, limits: Limits) -> dict | None:
    """The sandbox plan of the class run (None when the notebook has no class-cached cell):
    cell steps up to the last cached cell, which export their results."""
    if not model.class_cache:
        return None
    plan = build_plan(submission(model, answer_sources(model)), model)
    cached = [i for i, step in enumerate(plan.steps) if step.get("class_cache")]
    if not cached:
        return None
    memos = {cache_key(cell_source(c)): memo_paths(c) for c in model.release["cells"]
             if is_cacheable(c)}
    plan.steps = [{**step, "export_class_cache": bool(step.get("class_cache")),
                   "memo": memos.get(step.get("class_cache"), [])}
                  for step in plan.steps[:cached[-1] + 1] if step["kind"] == "cell"]
    roomy = replace(limits, notebook_seconds=max(limits.notebook_seconds, CLASS_RUN_SECONDS),
                    cell_seconds=max(limits.cell_seconds, CLASS_RUN_SECONDS))
    return sandbox_plan(plan, 0, roomy.to_dict())


def run_class_cache(model: NotebookModel, mode: str, limits: Limits,
                    echo=print) -> dict[str, bytes]:
    """{cache file name: entry JSON} for ``model``'s class-cached cells ({} when it has none,
    or when the class run failed: then every learner runs those cells, with a warning)."""
    plan = class_run_plan(model, limits)
    if plan is None:
        return {}
    from mhalib.grading.sandbox_host import SandboxError
    from mhalib.grading.unit import worker_sandbox

    started = time.monotonic()
    try:
        reply = worker_sandbox(mode, model.assignment).run(plan)
    except (SandboxError, OSError, ValueError) as error:
        reply = {"error": str(error)[:300]}
    exported = {f"{key}.json": text.encode("utf-8")
                for key, text in (reply.get("cache") or {}).items() if text}
    wanted = sum(1 for step in plan["steps"] if step.get("export_class_cache"))
    if len(exported) < wanted:
        echo(f"WARNING: the class run of {model.notebook} exported {len(exported)} of {wanted} "
             f"cached cell(s) ({reply.get('error') or 'a cell failed'}); learners' notebooks "
             "run those cells themselves.")
    else:
        echo(f"class run: {wanted} instructor cell(s) of {model.notebook} ran once for the "
             f"class in {time.monotonic() - started:.1f} s ({reply.get('cpu_seconds', 0):.1f} "
             "s CPU)")
    return exported
