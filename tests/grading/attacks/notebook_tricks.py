"""New: tricks in the notebook file itself (not listed in issue 21).

- **A cell that claims to be graded.** A learner adds a cell whose nbgrader metadata says it is
  a locked test cell worth 100 points, with an id the assignment does not have. The grader
  must keep the assignment's items and their points (the cell runs as an ordinary cell).
- **A flood of cells.** 20,000 one-line code cells (about 2.5 MB, far below the 20 MB a
  notebook may have): the sandbox runs them under the notebook's time limit, but the grader's
  own processing outside the sandbox (the plan, the step log, the graded notebook, the HTML
  feedback) must stay within a bounded cost: at most 10 s more CPU and 256 MB more peak
  memory than an honest notebook of the same lesson graded the same way.
"""

from __future__ import annotations

from tests.grading.attacks.spec import Full, Resources, SameMaxPoints, Submission


def _claims_points(grade_id: str):
    def mutate(notebook: dict) -> None:
        cell = {"cell_type": "code", "id": "bonus", "execution_count": None, "outputs": [],
                "source": "print('all tests passed')",
                "metadata": {"nbgrader": {"grade": True, "solution": False, "locked": True,
                                          "points": 100, "grade_id": grade_id,
                                          "schema_version": 3}}}
        notebook["cells"].insert(len(notebook["cells"]) // 2, cell)
    return mutate


FLOOD_CELLS = 20_000


def _flood(notebook: dict) -> None:
    notebook["cells"] += [{"cell_type": "code", "id": f"f{i}", "execution_count": None,
                           "metadata": {}, "outputs": [], "source": f"_ = {i}"}
                          for i in range(FLOOD_CELLS)]


SUBMISSIONS = [
    Submission("new-cell-claims-points", "10-mla", "new: notebook JSON",
               "an added cell whose nbgrader metadata claims a 100-point locked test "
               "(test_mla_attention_bonus)", [SameMaxPoints(), Full()], issue21=False,
               quick="right", mutate=_claims_points("test_mla_attention_bonus")),
    Submission("new-cell-claims-points-07", "07-flash", "new: notebook JSON",
               "the same in lesson 07 (test_online_softmax_attention_bonus; the CI subset's "
               "lessons)", [SameMaxPoints(), Full()], issue21=False, quick="right",
               mutate=_claims_points("test_online_softmax_attention_bonus")),
    Submission("new-cell-flood", "07-flash", "new: notebook JSON",
               f"{FLOOD_CELLS:,} one-line code cells appended (about 2.5 MB)",
               [Resources("control-isolated-07")], issue21=False,
               quick={"qc_kv_reads": "@right"}, mutate=_flood, isolated=True),
]
