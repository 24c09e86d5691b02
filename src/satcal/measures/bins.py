"""Score bins: the ten equal-width bins of phi in [0, 1] the satisfaction curves are read in."""
from __future__ import annotations

import numpy as np

__all__ = ["N_BINS", "bin_index", "bin_midpoints"]

N_BINS = 10


def bin_index(x, n_bins: int = N_BINS) -> np.ndarray:
    """Bin of each score: ``min(floor((x + 1e-5) * n_bins), n_bins - 1)``.

    The 1e-5 guards against scores such as 0.3 computed as 0.29999...; scores below 0
    fall in bin 0, scores of 1 in the last bin (Urbano and Marrero 2015 read their curves in
    ten such bins).

    Parameters
    ----------
    x : array-like of float
        Scores phi.
    n_bins : int, default 10
        Equal-width bins over [0, 1].

    Returns
    -------
    numpy.ndarray of int
        The bin of each score, 0 .. n_bins - 1.

    Examples
    --------
    >>> bin_index([0.0, 0.29999999, 0.3, 0.95, 1.0]).tolist()
    [0, 3, 3, 9, 9]
    """
    x = np.asarray(x, dtype=float)
    return np.clip(np.floor((x + 1e-5) * n_bins), 0, n_bins - 1).astype(np.intp)


def bin_midpoints(n_bins: int = N_BINS) -> np.ndarray:
    """Label of each bin: its midpoint j/n + 1/(2n).

    Parameters
    ----------
    n_bins : int, default 10

    Returns
    -------
    numpy.ndarray of float, shape (n_bins,)

    Examples
    --------
    >>> bin_midpoints(4).tolist()
    [0.125, 0.375, 0.625, 0.875]
    """
    return np.arange(n_bins) / n_bins + 0.5 / n_bins
