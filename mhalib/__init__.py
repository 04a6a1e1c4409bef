"""mhalib: reference implementations, checkers and tools for the multi-head attention course.

The spine is the course manifest, :mod:`mhalib.course`: every lesson once (assignment id,
notebook, exercises and their answer-key modules, run budget). Each lesson NN then has its own
modules in the sub-packages: ``checks.lessonNN`` (probe, judge, mistake models),
``quiz.lessonNN`` (quick checks), ``viz.lessonNN`` (plots and widgets), and its answer key in
``reference`` or ``accounting``. Around them: ``nn`` (PyTorch modules), ``kernels`` (tiled and
Triton flash attention), ``grading`` (the instructor pipeline), ``commands`` (the CLI).
"""

__version__ = "0.1.0"
