"""Calibration analysis (SPEC section 7): curves, bias, ANOVA, bootstrap, power, evaluation.

- :mod:`.core`: satisfaction / preference data, quadratic-logit fits, points, b1-b3, ANOVA,
  model check, :func:`calibrate`;
- :mod:`.bootstrap`: bootstrap intervals over examples with batched fits, in parallel;
- :mod:`.effects`: the gain and discount effects (sums of squares, eta squared and the
  bootstrap Wald test that respects the shared answers), behind ``anova.csv``;
- :mod:`.power`: power of a design by simulation;
- :mod:`.evaluate`: expected satisfaction of systems from a calibration.
"""
from .core import *  # noqa: F401,F403
from .core import __all__ as _core_all
from .core import design, model_check, TIE_TOLERANCE  # noqa: F401

__all__ = list(_core_all) + ["design", "model_check", "TIE_TOLERANCE"]
