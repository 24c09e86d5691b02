"""Issue 20 benchmark: the standardised indicators b1_std-b3_std of 1,000 bootstrap replicates of
the 36 formulations' joint models on the ECIR 2015 answers (what ``calibrate`` adds to an
analysis when it bootstraps them), against the straightforward computation they replaced: S and
each formulation's agreement built list by list, each formulation's grouped fit padded to a common
length and fitted by fit_logit_batch from its intercept-only start. The straightforward one is
timed on the first R replicates and its per-replicate time scaled to B; both sides give the same
indicators (the largest difference is printed). One BLAS thread on both sides.

    OPENBLAS_NUM_THREADS=1 python benchmarks/bench_standardise.py [R]
"""
import time

import numpy as np
from scipy.special import expit

from satcal.analysis import calibrate
from satcal.analysis.core import GRID, TIE_TOLERANCE, bias_indicators, design
from satcal.analysis.standardise import _fit_grouped, _groups, standardised_indicators
from satcal.datasets import load_ecir2015
from _context import arguments, note  # BLAS threads and load beside each figure

B = 1000


def straightforward(thetas, ref, weights, sat_range, pref_range):
    """The first implementation: every model of positive weight, every formulation's agreement
    array built in full, padded grouped fits from the intercept."""
    def s(th, phi):
        return expit(th[..., 0, None] + th[..., 1, None] * phi + th[..., 2, None] * phi ** 2)
    F, use = ref.shape[1], np.flatnonzero(weights > 0)
    S = sum(weights[g] * s(thetas[:, g, :], ref[:, g]) for g in use) / weights[use].sum()
    beta_s = _fit_grouped(_groups(ref.T), np.broadcast_to(S[:, None, :], (len(thetas), F, len(ref))))
    x, y = ref[0::2], ref[1::2]
    d_f = np.where(np.abs(x - y) < TIE_TOLERANCE, 0.0, x - y).T
    agree = 0.0
    for g in use:
        th = thetas[:, g, :]
        sx, sy = s(th, x[:, g]), s(th, y[:, g])
        col = lambda i: th[:, i, None]
        delta, lapse, d_g = expit(col(5)), 0.5 * expit(col(6)), d_f[g]
        same = sx * sy + (1 - sx) * (1 - sy)
        pi = expit(col(3) + col(4) * np.abs(d_g))
        to_x = np.where(d_g > 0, delta, np.where(d_g < 0, 1 - delta, 0.5))
        px = sx * (1 - sy) * (1 - lapse) + sy * (1 - sx) * lapse + same * pi * to_x
        py = sy * (1 - sx) * (1 - lapse) + sx * (1 - sy) * lapse + same * pi * (1 - to_x)
        agree = agree + weights[g] * np.where(d_f > 0, px[:, None, :], np.where(d_f < 0, py[:, None, :], 0.0))
    beta_p = _fit_grouped(_groups(np.abs(x - y).T), agree / weights[use].sum())
    ind = bias_indicators(expit(beta_s @ design(GRID).T), expit(beta_p @ design(GRID).T),
                          sat_range=sat_range, pref_range=pref_range)
    return {"b1_std": ind["b1"], "b2_std": ind["b2"], "b3_std": ind["b3"]}


def main(R=50):
    study = load_ecir2015()
    res = calibrate(study, bootstrap=B, seed=2015, standardised_intervals=False, model_check_folds=0)
    std, support = res.meta["standardisation"], res.meta["support"]
    thetas = res.bootstrap.joint["thetas"]
    args = (std["reference_phi"], std["weights"], support["sat_joint"], support["pref"])
    print(f"reference lists {args[0].shape[0]}, formulations {args[0].shape[1]}, models of weight "
          f">= 1e-12 of the largest: {(std['weights'] > 1e-12 * std['weights'].max()).sum()}")
    t = time.perf_counter()
    fast = standardised_indicators(thetas, *args, centre=std["thetas"])
    t_fast = time.perf_counter() - t
    t = time.perf_counter()
    slow = straightforward(thetas[:R], *args)
    t_slow = (time.perf_counter() - t) / R * B
    diff = max(np.abs(fast[k][:R] - slow[k]).max() for k in slow)
    print(f"satcal {t_fast:.1f} s for {B} replicates; straightforward {t_slow:.1f} s (from {R}, "
          f"scaled); ratio {t_slow / t_fast:.1f}x; largest difference {diff:.1e} {note()}")


if __name__ == "__main__":
    main(arguments(__doc__, ("R", int, 50, "replicates")).R)
