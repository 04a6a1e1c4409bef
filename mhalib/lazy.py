"""Lazy re-exports: a package names what it offers, and a module is imported on first use.

Used by the packages whose members pull in heavy dependencies (torch) that a numpy-only lesson
or the plain-int accounting should not pay for.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping


def lazy_module_attributes(package: str, homes: Mapping[str, str], what: str = "attribute"
                           ) -> tuple[Callable[[str], object], Callable[[], list[str]], list[str]]:
    """``(__getattr__, __dir__, __all__)`` for ``package``, whose name ``n`` lives in the
    module ``homes[n]``. Use as ``__getattr__, __dir__, __all__ = lazy_module_attributes(...)``.
    """
    homes = dict(homes)
    names = sorted(homes)

    def __getattr__(name: str):
        if name not in homes:
            raise AttributeError(f"module {package!r} has no {what} {name!r}")
        return getattr(importlib.import_module(homes[name]), name)

    def __dir__() -> list[str]:
        return list(names)

    return __getattr__, __dir__, names
