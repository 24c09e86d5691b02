"""quality.binom_cdf is scipy.stats.binom.cdf, value for value, on every count a worker table
can hold (it exists so that an ingest need not import scipy.stats)."""
import numpy as np
from scipy.stats import binom

from satcal.quality import binom_cdf


def test_binom_cdf_equals_scipy_stats_exactly():
    n = np.repeat(np.arange(0, 61), 61)
    k = np.tile(np.arange(0, 61), 61)
    for p in (0.0, 1e-9, 0.05, 0.25, 0.5, 0.7, 0.9, 0.999999, 1.0):
        ours, theirs = binom_cdf(k, n, p), binom.cdf(k, n, p)
        assert np.array_equal(ours, theirs, equal_nan=True), p


def test_binom_cdf_of_pandas_columns():
    import pandas as pd
    k, n = pd.Series([0, 3, 5, 2]), pd.Series([5, 3, 10, 0])
    assert np.array_equal(binom_cdf(k, n, 0.7), binom.cdf(k, n, 0.7))
