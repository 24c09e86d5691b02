"""Modules imported on first use.

Reading TREC files and scoring them needs only numpy; pandas (a third of a second to import)
is loaded by the modules below only when a table is asked for.
"""
from __future__ import annotations

import importlib
from types import ModuleType


class LazyModule:
    """Stands for a module and imports it at the first attribute access.

    Parameters
    ----------
    name : str
        The module's absolute name, e.g. ``"pandas"``.
    """

    def __init__(self, name: str):
        self._name = name
        self._module: ModuleType | None = None

    def __getattr__(self, attr: str):
        if self._module is None:
            self._module = importlib.import_module(self._name)
        return getattr(self._module, attr)


pandas = LazyModule("pandas")
