"""A class on one machine with JupyterHub (``mhalib hub``; see grading/README.md, "Host a class").

- :mod:`~mhalib.classroom.hub.users`: system users, one per person
- :mod:`~mhalib.classroom.hub.environment`: the Python environment every user can run
- :mod:`~mhalib.classroom.hub.class_setup`: the class folder, its settings and configuration,
  the instructor's private course
- :mod:`~mhalib.classroom.hub.launch`: the set-up in order, then JupyterHub and its proxy
- :mod:`~mhalib.classroom.hub.feedback`: returning ``mhalib grade``'s feedback through
  nbgrader's exchange
"""
