"""The answer key: every exercise function of the course contract, same name and signature.

Lessons 01-05 are numpy (float64-exact ground truth that keeps the input dtype); lessons 06 on
are PyTorch. Import as ``from mhalib.reference import attention``. Which module defines each
function is written once, in the course manifest (:mod:`mhalib.course`); modules are imported
lazily so that ``import mhalib.reference`` stays cheap and numpy-only lessons never pay for
importing torch.
"""

from __future__ import annotations

from mhalib import course
from mhalib.lazy import lazy_module_attributes

__getattr__, __dir__, __all__ = lazy_module_attributes(
    "mhalib.reference", course.answer_key_modules(), what="exercise function")
