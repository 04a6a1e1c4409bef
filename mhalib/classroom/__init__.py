"""The instructor's side of the course: what nbgrader and JupyterHub load, and what only an
instructor runs (the grading pipeline itself is :mod:`mhalib.grading`).

- :mod:`~mhalib.classroom.course_folder`: where the course lives (solutions, release, keys, the
  course folder a class fills): the command line, then the environment, then the working
  directory, never the package's own path
- :mod:`~mhalib.classroom.release`: the learner release generated from the instructor master
- :mod:`~mhalib.classroom.nbgrader_config`: the one nbgrader configuration (``configure(c,
  ...)``) every nbgrader config file of the course calls
- :mod:`~mhalib.classroom.nbgrader_quick_checks`, :mod:`~mhalib.classroom.nbgrader_submit`:
  nbgrader plug-ins (quick-check preprocessors; a submit that only the instructor can read)
- :mod:`~mhalib.classroom.hub`: a class on one machine with JupyterHub
- :mod:`~mhalib.classroom.demo_class`: the demo class in grading/examples/
- :mod:`~mhalib.classroom.report`: what a class got wrong (the misconception report)

Import edges go one way: :mod:`mhalib.commands` -> here -> :mod:`mhalib.grading` and the
learner's side (:mod:`mhalib.quiz`, :mod:`mhalib.course`), never back: nothing a learner's kernel
imports depends on this package.
"""
