"""What runs inside the grader's sandbox: the zygote and the notebook's own process.

The host side of :mod:`mhalib.grading` starts the sandbox (:mod:`~mhalib.grading.sandbox_host`)
and reads what comes back; these modules are what runs in it, and they import nothing of the
host side (only the standard library, IPython, :mod:`mhalib.checks` and each other):

- :mod:`~mhalib.grading.sandbox.zygote`: the warm process that forks one isolated child per
  notebook (``python -m mhalib.grading.sandbox.zygote``)
- :mod:`~mhalib.grading.sandbox.sysns`: namespaces, mounts and capabilities via ctypes
- :mod:`~mhalib.grading.sandbox.executor`, :mod:`~mhalib.grading.sandbox.capture`: running
  cells like Jupyter, outputs under a byte budget
- :mod:`~mhalib.grading.sandbox.task_folder`: the folder one notebook's inputs and records
  pass through between the zygote and the notebook's process
- :mod:`~mhalib.grading.sandbox.class_cache`: exporting and replaying the instructor cells run
  once per class
- :mod:`~mhalib.grading.sandbox.limits`: time, memory and size budgets (the host sets them)
- :mod:`~mhalib.grading.sandbox.warden`: the trusted parent of a notebook's process: it issues
  each exercise's seed when the notebook reaches its test, seals the records, and runs the
  physical checks (:mod:`~mhalib.grading.sandbox.replay`, :mod:`~mhalib.grading.sandbox.seccomp`);
  :mod:`~mhalib.grading.sandbox.warden_client` is the learner process's side

Nothing is imported here, so ``import mhalib.grading.sandbox.zygote`` stays light.
"""
