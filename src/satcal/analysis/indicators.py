"""Binned points, the bias indicators and the ranges the data support.

Bias, over the grid x = 0, 0.001, ..., 1:
b1 = mean |x - P(Sat|x)|;  b2 = (P(Sat|0) + 1 - P(Sat|1)) / 2;  b3 = mean (1 - P(Pref|x)),
or over the range of scores each curve's data support (:func:`supported_range`).

References
----------
Urbano, J. and Marrero, M. (2015). How do gain and discount functions affect the correlation
between DCG and user satisfaction? ECIR 2015, section 4.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from ..measures import bin_index, bin_midpoints

GRID = np.round(np.linspace(0.0, 1.0, 1001), 3)

def binned_points(x, y, n_bins: int = 10, weights=None) -> pd.DataFrame:
    """Per bin of x: n, successes, proportion and its Wilson 95% interval.

    Parameters
    ----------
    x, y : array-like
    n_bins : int, default 10
    weights : array-like, optional
        Frequency weights (counts) of the rows.

    Returns
    -------
    pandas.DataFrame
        One row per bin: ``bin, x_mid, n, successes, proportion, lo, hi``.

    References
    ----------
    Wilson, E. B. (1927). Probable inference, the law of succession, and statistical inference.
    Journal of the American Statistical Association 22(158), 209-212.
    """
    from statsmodels.stats.proportion import proportion_confint

    b = bin_index(x, n_bins)
    w = np.ones(b.size) if weights is None else np.asarray(weights, float)
    n = np.rint(np.bincount(b, weights=w, minlength=n_bins)).astype(np.int64)
    s = np.bincount(b, weights=w * np.asarray(y, float), minlength=n_bins)
    with np.errstate(invalid="ignore", divide="ignore"):
        prop = np.where(n > 0, s / np.maximum(n, 1), np.nan)
        lo, hi = proportion_confint(s, np.maximum(n, 1), alpha=0.05, method="wilson")
    lo, hi = np.where(n > 0, lo, np.nan), np.where(n > 0, hi, np.nan)
    return pd.DataFrame({"bin": np.arange(n_bins), "x_mid": np.round(bin_midpoints(n_bins), 10),
                         "n": n, "successes": np.rint(s).astype(int), "proportion": prop, "lo": lo, "hi": hi})


def bias_indicators(p_sat: np.ndarray, p_pref: np.ndarray, grid: np.ndarray = GRID,
                    sat_range=None, pref_range=None) -> dict:
    """b1, b2, b3 from curves evaluated on ``grid`` (last axis), over the supported ranges.

    Over the whole grid (``sat_range`` and ``pref_range`` None, or (0, 1)), as in the paper:
    b1 = mean |x - P(Sat|x)|, b2 = (P(Sat|0) + 1 - P(Sat|1)) / 2, b3 = mean (1 - P(Pref|x)).
    Over a supported range [lo, hi] (``sat_range``, ``pref_range``: (..., 2) arrays that
    broadcast against the curves' leading axes), the means run over the grid points inside it
    and b2 measures the gaps at its ends: ((P(Sat|lo) - lo) + (hi - P(Sat|hi))) / 2, which is
    the paper's b2 when [lo, hi] = [0, 1]. A curve is not scored where no answer holds data.

    Parameters
    ----------
    p_sat, p_pref : numpy.ndarray, shape (..., G)
        The curves on ``grid``.
    grid : numpy.ndarray, shape (G,)
    sat_range, pref_range : numpy.ndarray, shape (..., 2), optional

    Returns
    -------
    dict
        ``b1``, ``b2``, ``b3``: arrays of the curves' leading shape.

    References
    ----------
    Urbano, J. and Marrero, M. (2015). How do gain and discount functions affect the
    correlation between DCG and user satisfaction? ECIR 2015.
    """
    p_sat, p_pref = np.asarray(p_sat, float), np.asarray(p_pref, float)
    if sat_range is None and pref_range is None:
        return {"b1": np.abs(grid - p_sat).mean(axis=-1),
                "b2": (p_sat[..., 0] + 1.0 - p_sat[..., -1]) / 2.0,
                "b3": (1.0 - p_pref).mean(axis=-1)}
    s_lo, s_hi, s_mask = _range_mask(sat_range, grid)
    _, _, p_mask = _range_mask(pref_range, grid)

    def at(p, x):  # the curve at x (a grid point); nan where the range is undefined
        """The curve ``p`` at the grid point ``x``, NaN where ``x`` is undefined.

        Parameters
        ----------
        p : numpy.ndarray
            Curves on ``grid`` (last axis).
        x : numpy.ndarray
            Points, one per curve.
        """
        idx = np.searchsorted(grid, np.where(np.isfinite(x), x, 0.0) - 1e-12)
        idx = np.broadcast_to(np.asarray(idx)[..., None], p.shape[:-1] + (1,))
        return np.where(np.isfinite(x), np.take_along_axis(p, idx, -1)[..., 0], np.nan)

    with np.errstate(invalid="ignore", divide="ignore"):
        return {"b1": (np.abs(grid - p_sat) * s_mask).sum(axis=-1) / s_mask.sum(axis=-1),
                "b2": ((at(p_sat, s_lo) - s_lo) + (s_hi - at(p_sat, s_hi))) / 2.0,
                "b3": ((1.0 - p_pref) * p_mask).sum(axis=-1) / p_mask.sum(axis=-1)}


def supported_mask(bounds, grid: np.ndarray = GRID) -> np.ndarray:
    """Which points of ``grid`` lie in the range(s) ``bounds``: the ``supported`` column of
    curves.csv, and where the indicators average.

    Parameters
    ----------
    bounds : numpy.ndarray, shape (..., 2), or None
        None is the whole of [0, 1].
    grid : numpy.ndarray, shape (G,)

    Returns
    -------
    numpy.ndarray of bool, shape (..., G)
    """
    bounds = np.array([0.0, 1.0]) if bounds is None else np.asarray(bounds, float)
    return (grid >= bounds[..., 0, None] - 1e-12) & (grid <= bounds[..., 1, None] + 1e-12)


def _range_mask(bounds, grid: np.ndarray):
    """(lo, hi, mask over grid) of ranges given as (..., 2); None is the whole of [0, 1]."""
    bounds = np.array([0.0, 1.0]) if bounds is None else np.asarray(bounds, float)
    return bounds[..., 0], bounds[..., 1], supported_mask(bounds, grid).astype(float)


#: Observations a bin needs before a curve counts as supported by data there.
SUPPORT_MIN_COUNT = 5
#: Where the bias indicators are computed: ``data`` (the supported range, the default) or
#: ``full`` (the whole of [0, 1], as the paper, whose design reached it for every formulation).
INDICATOR_RANGES = ("data", "full")


def supported_range(x, weights=None, n_bins: int = 10, min_count: int = SUPPORT_MIN_COUNT) -> tuple:
    """The range of scores a curve's data support: from the lower edge of the lowest bin to the
    upper edge of the highest bin holding at least ``min_count`` observations.

    Bins are the study's unit of coverage, so a curve is supported wherever the design placed
    enough lists (or differences); between two such bins it is interpolated, beyond them it
    would be extrapolated.

    Parameters
    ----------
    x : array-like
        Scores (or differences) of the curve's rows.
    weights : array-like, optional
        Frequency weights.
    n_bins : int, default 10
    min_count : int
        Observations a bin needs.

    Returns
    -------
    (lo, hi) : tuple of float
        (nan, nan) when no bin has enough data.
    """
    b = bin_index(np.asarray(x, float), n_bins)
    w = np.ones(b.size) if weights is None else np.asarray(weights, float)
    held = np.flatnonzero(np.bincount(b, weights=w, minlength=n_bins) >= min_count)
    if held.size == 0:
        return (np.nan, np.nan)
    return (round(held[0] / n_bins, 10), round((held[-1] + 1) / n_bins, 10))
