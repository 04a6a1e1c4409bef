"""nbgrader's side of the quick checks: two preprocessors the course's nbgrader config adds
(:func:`install`, called by :func:`mhalib.classroom.nbgrader_config.configure`).

nbgrader clears every output before it runs a submission, and the learner's kernel never holds
a key in assessed mode, so a quick check cannot be scored by running its cell. Instead:

- :class:`StashQuickCheckAnswers` runs first when nbgrader sanitizes a submission: it copies the
  answer recorded in each quick check's cell (:mod:`mhalib.quiz.record`) into the notebook's
  metadata before ``ClearOutput`` wipes it.
- :class:`ScoreQuickChecks` runs right after ``Execute``: it judges each stashed answer with the
  instructor's keys (read here, on the instructor's side, from the folder the configuration
  names: ``ScoreQuickChecks.keys_dir``) and makes the verdict the cell's output, an error when
  wrong, so nbgrader's own ``SaveAutoGrades`` gives the points and the feedback shows the
  explanation.

Without them (plain nbgrader), ``ask()`` raises in an autograde run: no points, never free ones.
"""

from __future__ import annotations

from pathlib import Path

import nbformat
from nbgrader.preprocessors import NbGraderPreprocessor
from traitlets import Unicode

from mhalib.quiz.record import Recorded, bundle, parse, recorded_answers

STASH = "mhalib_quick_check_answers"


def _question_cells(nb) -> dict[str, object]:
    from mhalib.quiz import all_questions

    known = all_questions()
    found = {}
    for cell in nb.cells:
        grade_id = cell.get("metadata", {}).get("nbgrader", {}).get("grade_id", "")
        if cell.cell_type == "code" and grade_id in known:
            found[grade_id] = cell
    return found


class StashQuickCheckAnswers(NbGraderPreprocessor):
    """Keep the recorded quick-check answers in the notebook's metadata (before ClearOutput)."""

    def preprocess(self, nb, resources):
        cells = _question_cells(nb)
        answers = recorded_answers(nb, cells)
        nb.metadata[STASH] = {qid: {"question": qid, "answer": r.answer, "variant": r.variant}
                              for qid, r in answers.items()}
        return nb, resources


class ScoreQuickChecks(NbGraderPreprocessor):
    """Judge the stashed answers with the instructor's keys; the verdict becomes the output."""

    keys_dir = Unicode("", help="The instructor's quick-check keys folder (set by install)."
                       ).tag(config=True)

    def preprocess(self, nb, resources):
        # imported here: nbgrader loads the configuration, and this module, for every command
        from mhalib.grading.graded_notebook import verdict_output
        from mhalib.grading.quick_checks import judge_recorded
        from mhalib.quiz.keys import instructor_keys

        cells = _question_cells(nb)
        if not cells:
            return nb, resources
        info = resources.get("nbgrader", {})
        try:
            if not self.keys_dir:
                raise ValueError("no keys folder configured (ScoreQuickChecks.keys_dir)")
            keys = instructor_keys(info.get("assignment", ""), Path(self.keys_dir))
        except (OSError, ValueError) as error:
            self.log.error("quick checks get no points: %s", error)
            keys = {}
        stash = nb.metadata.get(STASH, {})
        for qid, cell in cells.items():
            recorded = parse(stash.get(qid)) if isinstance(stash, dict) else None
            verdict = judge_recorded(qid, recorded, info.get("student"), keys)
            verdict.max_points = float(cell.metadata["nbgrader"].get("points", 1))
            verdict.points = verdict.share * verdict.max_points
            cell.outputs = [_record_output(qid, recorded),
                            nbformat.from_dict(verdict_output(verdict))]
        return nb, resources


def install(config, keys_dir: Path) -> None:
    """Add both preprocessors to an nbgrader ``config`` (``c`` of an nbgrader_config.py):
    the stash first of all, the scoring right after ``Execute`` with the keys in ``keys_dir``."""
    from nbgrader.converters import Autograde
    from nbgrader.preprocessors import Execute

    config.ScoreQuickChecks.keys_dir = str(keys_dir)
    traits = Autograde.class_traits()
    config.Autograde.sanitize_preprocessors = [
        StashQuickCheckAnswers, *traits["sanitize_preprocessors"].make_dynamic_default()]
    steps = list(traits["autograde_preprocessors"].make_dynamic_default())
    steps.insert(steps.index(Execute) + 1, ScoreQuickChecks)
    config.Autograde.autograde_preprocessors = steps


def _record_output(qid: str, recorded: Recorded | None) -> dict:
    from nbformat.v4 import new_output

    return new_output("display_data", data=bundle(qid, recorded.answer if recorded else None,
                                                  recorded.variant if recorded else None))
