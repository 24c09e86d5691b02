"""satcal: user-satisfaction calibration studies of graded-relevance metrics.

The public surface, re-exported here::

    satcal.score_lists(levels, formulations)       phi of many lists, all formulations at once
    satcal.study_formulations()                    the 36 gain x discount formulations
    satcal.read_judgments(path)                    TREC qrels or CSV/TSV judgments
    satcal.load_ecir2015()                         the embedded published study
    satcal.read_external_study(path, judgments)    answers collected elsewhere
    satcal.calibrate(study)                        P(Sat|phi), P(Pref|dphi), b1-b3, ANOVA
    satcal.generate.generate(judgments, Design())  examples covering every cell
    satcal.Workspace.init(dir, judgments)          a study directory (then .generate(), .export(), ...)
    satcal.ingest.ingest(workspace, files)         result files -> answers, rejects, workers
    satcal.read_runs(paths), satcal.reliability_report(runs, judgments, formulations)
"""
__version__ = "0.1.0"

from .errors import InputFileError, SatcalError
from .measures import (Discount, Formulation, Gain, formulation, get_discount, get_gain,
                       score_lists, study_formulations)
from .judgments import Judgments, read_judgments
from .ingest import StudyData, read_external_study
from .datasets import load_ecir2015
from .analysis import CalibrationResult, calibrate
from .generate import Design, GenerationResult
from .traps import build_traps, read_traps
from .runs import read_runs
from .reliability import reliability_report
from .workspace import Workspace

__all__ = [
    "__version__", "SatcalError", "InputFileError", "Gain", "Discount", "Formulation",
    "formulation", "get_gain", "get_discount", "score_lists", "study_formulations", "Judgments",
    "read_judgments", "StudyData", "read_external_study", "load_ecir2015", "CalibrationResult",
    "calibrate", "Design", "GenerationResult", "build_traps", "read_traps", "read_runs",
    "reliability_report", "Workspace",
]
