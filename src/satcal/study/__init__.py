"""The study: one directory per study, and the one class that runs every stage on it.

:class:`Study` owns the directory: its paths, tables, lock, output sets, manifest and the raw
archive of result files. Every stage (generate, export, preview, simulate, ingest, remove,
analyze, power, the hosted study) is a function of values in its own module; a ``Study``
method reads the values from the directory and study.toml (:mod:`satcal.settings`), calls the
stage and writes what it returns as one output set. ``study.toml`` holds the design; every
command reads and validates it. Outputs are written atomically, nothing is overwritten without
``force``, and ``manifest.json`` records the package versions, the seeds, the hashes of the
inputs and the command history.

The package is the study's one owner of its directory; its modules are the Study's own parts:
:mod:`.layout` (the names of the directory's files), :mod:`.config` (study.toml),
:mod:`.staging` (the lock and output sets), :mod:`.manifest`, :mod:`.tables` (settings, inputs
and tables read back), :mod:`.served` (the hosted studies recorded in the directory),
:mod:`.design` (generate, export, preview), :mod:`.simulation`, :mod:`.archive` (ingest,
remove and the raw archive), :mod:`.analyze` (analyze, power), :mod:`.hosting` (serve) and
:mod:`._study`, which assembles :class:`Study` from them.
"""
from __future__ import annotations

from .. import settings as settings_model
from ._study import Study, Workspace, served_app
from .config import DEFAULT_INSTRUCTIONS, _platform_schemas, default_instructions, validate_config
from .layout import DESIGN_FILE, DESIGN_TABLES, SERVED_DATABASES, SERVING, analysis_directory
from .served import running_server, served_answers
from .staging import LOCK_WAIT

__all__ = ["Study", "Workspace", "STUDY_TEMPLATE"]


def __getattr__(name):
    if name == "STUDY_TEMPLATE":  # the template of a default study, from the settings model
        return settings_model.render_template({}, _platform_schemas())
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
