"""Calibration analysis: curves, bias, effects, bootstrap, ranking, power,
evaluation. Modules, lowest first (each imports only those before it):

- :mod:`.data`: satisfaction / preference data, answers collapsed to their distinct rows;
- :mod:`.fits`: quadratic-logit fits, single and batched;
- :mod:`.indicators`: binned points, b1-b3, supported ranges;
- :mod:`.checks`: the cross-validated model check;
- :mod:`.core`: re-exports the four above (the names other modules import);
- :mod:`.joint`: the per-list satisfaction model;
- :mod:`.ranking`: the ranking of formulations and its bootstrap uncertainty;
- :mod:`.bootstrap`: the bootstrap, resampling what the answers carry, with batched fits;
- :mod:`.effects`: the gain and discount effects (sums of squares, eta squared and the
  bootstrap Wald test that respects the shared answers), behind ``anova.csv``;
- :mod:`.calibration`: :func:`calibrate`, the whole analysis, and :class:`CalibrationResult`;
- :mod:`.power`: power of a design by simulation;
- :mod:`.evaluate`: expected satisfaction of systems from a calibration.
"""
from .core import *  # noqa: F401,F403
from .core import __all__ as _core_all
from .core import design, model_check, TIE_TOLERANCE  # noqa: F401
from .calibration import CalibrationResult, calibrate  # noqa: F401
from .effects import anova_table  # noqa: F401
from .ranking import rank_formulations  # noqa: F401

__all__ = list(_core_all) + ["design", "model_check", "TIE_TOLERANCE", "CalibrationResult", "calibrate",
                             "anova_table", "rank_formulations"]
