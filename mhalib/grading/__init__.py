"""The instructor's grading pipeline behind ``mhalib grade`` (see grading/README.md).

One concept per module; what runs inside the sandbox is the subpackage
:mod:`mhalib.grading.sandbox`, which imports nothing from the rest of this package.

- :mod:`~mhalib.grading.intake`: find submissions (nbgrader folders, LMS zips)
- :mod:`~mhalib.grading.assignment`: what the source notebook says (grade cells, release)
- :mod:`~mhalib.grading.answered_notebook`: a release with answers filled in (the class run,
  the demo class)
- :mod:`~mhalib.grading.plan`: merge a submission with the release; what runs, what is recorded
- :mod:`~mhalib.grading.sandbox_host`: bubblewrap around a warm zygote (host side)
- :mod:`~mhalib.grading.sandbox_package`: the answer-free copy of mhalib the sandbox imports
- :mod:`~mhalib.grading.sandbox`: what runs in the sandbox (zygote, executor, output capture,
  namespaces, the task folder, the class cache's replay, the limits)
- :mod:`~mhalib.grading.cached_cells`, :mod:`~mhalib.grading.class_run`: instructor cells run
  once per class and replayed for learners who left them as released (lesson 08's training)
- :mod:`~mhalib.grading.outcome`: reading back what the sandbox produced
- :mod:`~mhalib.grading.scorer`: verdicts and points, decided outside the sandbox
- :mod:`~mhalib.grading.quick_checks`: quick checks judged from the answers saved in the file
- :mod:`~mhalib.grading.credit`, :mod:`~mhalib.grading.rubric`,
  :mod:`~mhalib.grading.default_rubric`: the points a verdict earns, and the rubric behind them
- :mod:`~mhalib.grading.records`: the typed records (task, issue, item verdict, result)
- :mod:`~mhalib.grading.unit`: the unit of work (one student's notebook -> one result)
- :mod:`~mhalib.grading.backends`: in-process, local worker pool, Dask
- :mod:`~mhalib.grading.graded_notebook`, :mod:`~mhalib.grading.gradebook`,
  :mod:`~mhalib.grading.feedback`, :mod:`~mhalib.grading.export`,
  :mod:`~mhalib.grading.writer`: what a run writes, by the single writer
- :mod:`~mhalib.grading.pipeline`: a whole run; :mod:`~mhalib.grading.flags`: flag meanings

Where the course lives, the release, nbgrader's configuration and the class hub are the
instructor's other package, :mod:`mhalib.classroom`, which imports this one (never the other way).

Nothing is imported here, so ``import mhalib.grading.sandbox.zygote`` inside the sandbox stays
light.
"""
