"""Score bins: the ten equal-width bins of phi in [0, 1] the satisfaction curves are read in."""
from __future__ import annotations

import numpy as np

__all__ = ["N_BINS", "bin_index", "bin_midpoints"]

N_BINS = 10


def bin_index(x, n_bins: int = N_BINS) -> np.ndarray:
    """Bin of each score: ``min(floor((x + 1e-5) * n_bins), n_bins - 1)`` .

    The 1e-5 guards against scores such as 0.3 computed as 0.29999...; scores below 0
    fall in bin 0.
    """
    x = np.asarray(x, dtype=float)
    return np.clip(np.floor((x + 1e-5) * n_bins), 0, n_bins - 1).astype(np.intp)


def bin_midpoints(n_bins: int = N_BINS) -> np.ndarray:
    """Label of each bin: its midpoint j/n + 1/(2n)."""
    return np.arange(n_bins) / n_bins + 0.5 / n_bins
