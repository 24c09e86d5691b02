"""satcal: user-satisfaction calibration studies of graded-relevance metrics.

The public surface, re-exported here::

    satcal.score_lists(levels, formulations)       phi of many lists, all formulations at once
    satcal.score_table(levels, formulations)       the same, as a table labelled by formulation
    satcal.study_formulations()                    the 36 gain x discount formulations
    satcal.read_judgments(path)                    TREC qrels or CSV/TSV judgments
    satcal.load_ecir2015()                         the embedded published study
    satcal.read_external_study(path, judgments)    answers collected elsewhere
    satcal.calibrate(study)                        P(Sat|phi), P(Pref|dphi), b1-b3, ANOVA
    satcal.generate.generate(judgments, Design())  examples covering every cell
    satcal.Study.init(dir, judgments)              a study directory (then .generate(), .export(), ...)
    satcal.Study.open(dir).ingest(files)           result files -> answers, rejects, workers
    satcal.read_runs(paths), satcal.reliability_report(runs, judgments, formulations)

Names are imported on first use (PEP 562), so ``import satcal`` and ``satcal --help`` do not
pay for pandas, SciPy, statsmodels or matplotlib before they are needed.
"""
from __future__ import annotations

import importlib

from ._version import __version__

# public name -> the module that defines it
_EXPORTS = {
    "SatcalError": "errors", "InputFileError": "errors",
    "Gain": "measures", "Discount": "measures", "Formulation": "measures",
    "formulation": "measures", "get_gain": "measures", "get_discount": "measures",
    "score_lists": "measures", "score_table": "measures", "study_formulations": "measures",
    "Judgments": "judgments", "read_judgments": "judgments",
    "StudyData": "ingest", "read_external_study": "ingest",
    "load_ecir2015": "datasets",
    "CalibrationResult": "analysis", "calibrate": "analysis",
    "Design": "generate", "GenerationResult": "generate",
    "build_traps": "traps", "read_traps": "traps",
    "read_runs": "runs",
    "reliability_report": "reliability",
    "Study": "study", "Workspace": "study", "Settings": "settings",
    "write_analysis": "report", "figure_sat": "report", "figure_sat_joint": "report",
    "figure_pref": "report", "figure_bias": "report", "figure_intervals": "report",
}

__all__ = ["__version__", *_EXPORTS]

# submodules reachable as attributes (``satcal.generate.generate``) without an explicit import
_SUBMODULES = {"analysis", "datasets", "errors", "fileio", "generate", "ingest", "judgments",
               "measures", "pipeline", "platforms", "quality", "reliability", "report", "runs",
               "settings", "simulate", "study", "traps", "workspace"}


def __getattr__(name: str):
    if name in _SUBMODULES:
        return importlib.import_module(f".{name}", __name__)
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'satcal' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value  # later look-ups skip this function
    return value


def __dir__():
    return sorted(set(globals()) | set(__all__))
