"""A case's arguments as the learner's function received them, by name (issue 22's readers).

Shared by the fallback diagnoses (:mod:`mhalib.checks.explain` and the read-backs of
:mod:`mhalib.checks.readbacks`): the answer key's parameter names and defaults, the case's named
sizes, and its float arrays as float64.
"""

from __future__ import annotations

import inspect

import numpy as np


def sizes(exercise, case) -> dict[str, int]:
    """Named sizes of a case: its int arguments, the axes of its array arguments (by the
    exercise's ``axes`` names, e.g. ``{"x": "B N d_model"}``, else ``x.shape[i]``) and the
    exercise's ``derived_sizes(values)`` (e.g. ``d_head``)."""
    names = parameter_names(exercise)
    values = (case.arguments(names, answer_defaults(exercise)) if names
              else dict(enumerate(case.args)))
    found: dict[str, int] = {}
    axes = getattr(exercise, "axes", {})
    for name, value in values.items():
        if isinstance(value, (bool, np.bool_)):
            continue
        if isinstance(value, (int, np.integer)):
            found.setdefault(str(name), int(value))
        elif isinstance(value, np.ndarray):
            labels = axes.get(name, "").split()
            for i, size in enumerate(value.shape):
                label = labels[i] if i < len(labels) else f"{name}.shape[{i}]"
                found.setdefault(label, int(size))
    derived = getattr(exercise, "derived_sizes", None)
    if derived is not None:
        try:
            found.update(derived(found))
        except Exception:
            pass
    return found


def answer_defaults(exercise) -> dict:
    """The answer key's default arguments (``{"batch_size": 1, ...}``), or {}."""
    try:
        from mhalib.checks.answer_key import answer_key

        return {name: p.default for name, p in
                inspect.signature(answer_key(exercise.name)).parameters.items()
                if p.default is not inspect.Parameter.empty}
    except Exception:
        return {}


def parameter_names(exercise) -> tuple[str, ...]:
    """The answer key's parameter names, in order (() when it cannot be read)."""
    try:
        from mhalib.checks.answer_key import answer_key

        return tuple(inspect.signature(answer_key(exercise.name)).parameters)
    except Exception:
        return ()


def float64_inputs(exercise, case) -> dict | None:
    """The case's arguments by name, float arrays as float64; None unless the case is float64
    (in a coarser output a masked key's 0 weight cannot be told from a small one)."""
    if getattr(case, "dtype", "float64") != "float64":
        return None
    values = case.arguments(parameter_names(exercise), answer_defaults(exercise))
    if any(isinstance(v, np.ndarray) and v.dtype.kind == "f" and v.dtype != np.float64
           for v in values.values()):
        return None
    return {name: (np.asarray(v, dtype=np.float64)
                   if isinstance(v, np.ndarray) and v.dtype.kind == "f" else v)
            for name, v in values.items()}


def named_inputs(exercise, case) -> dict:
    """The case's arguments by name (positional ones by the answer key's parameter names)."""
    return case.arguments(parameter_names(exercise), answer_defaults(exercise))


def float64_output(output) -> np.ndarray | None:
    """The learner's output (the first of a tuple) when it is a float64 array, else None (a
    float32 output of a float64 case is another slip, named elsewhere)."""
    if isinstance(output, tuple):
        output = output[0] if output else None
    if not isinstance(output, np.ndarray) or output.dtype != np.float64:
        return None
    return output
