"""Temporary alias of :mod:`mhalib.validate` (removed once every importer is moved)."""

from mhalib.validate import *  # noqa: F403
from mhalib.validate import tensor  # noqa: F401
