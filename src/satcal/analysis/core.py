"""The paper's curves, P(Sat|phi) and P(Pref|dphi), and the bias indicators (Urbano and Marrero, ECIR 2015, sec. 4):
the data, the fits, points, supported ranges and the model check; :mod:`.calibration` runs them.

The code lives in four modules, lowest first: :mod:`.data` (rows and collapsed answer types),
:mod:`.fits` (the logit fits), :mod:`.indicators` (points, b1-b3, supported ranges) and
:mod:`.checks` (the model check); this module re-exports their names.

- Satisfaction data: each ``both_good`` (sat = 1) or ``both_bad`` (sat = 0) answer gives two
  rows, (phi_A, sat) and (phi_B, sat).
- Preference data: x = |dphi|; agree = 1 when the answer prefers the list with the higher phi.
  Population ``all`` keeps every answer (ties and both_* answers count as 0; this is how the
  published figures and bias scores were computed); ``preferences_only`` keeps a_better /
  b_better answers with dphi != 0.
- Fit: binomial GLM with logit link on (1, x, x^2) (statsmodels, unpenalised), with a 95%
  Wald band from the linear predictor's standard error; for P(Sat|phi) the covariance is
  cluster-robust with an answer's two rows as one cluster (``fit_logit(clusters=...)``).
- Bias, over the grid x = 0, 0.001, ..., 1:
  b1 = mean |x - P(Sat|x)|;  b2 = (P(Sat|0) + 1 - P(Sat|1)) / 2;  b3 = mean (1 - P(Pref|x)).
- The gain and discount effects over the formulations' estimates live in :mod:`.effects`.
"""
from __future__ import annotations

from .checks import _isotonic_fit, fold_counts, model_check, stratified_folds  # noqa: F401
from .data import (CURVES, POPULATIONS, TIE_TOLERANCE, AnswerTypes, CurveData,  # noqa: F401
                   collapse_answers, collapse_study, preference_curves, preference_data,
                   satisfaction_curves, satisfaction_data)
from .fits import (Z95, LogitFit, design, distinct_pairs, fit_logit, fit_logit_batch,  # noqa: F401
                   fit_logit_replicates, sufficient_statistics)
from .indicators import (GRID, INDICATOR_RANGES, SUPPORT_MIN_COUNT, bias_indicators,  # noqa: F401
                         binned_points, supported_mask, supported_range)

__all__ = [
    "POPULATIONS",
    "GRID",
    "CURVES",
    "LogitFit",
    "fit_logit",
    "fit_logit_batch",
    "fit_logit_replicates",
    "satisfaction_data",
    "preference_data",
    "AnswerTypes",
    "collapse_answers",
    "CurveData",
    "satisfaction_curves",
    "preference_curves",
    "sufficient_statistics",
    "binned_points",
    "bias_indicators",
    "supported_range",
    "supported_mask",
    "INDICATOR_RANGES",
]
