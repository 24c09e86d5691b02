"""Issue 20: which bootstrap interval holds its level for b1 = mean_x |x - s(x)| both near its
floor (s close to the diagonal) and away from it?

A Gaussian model of the fitted curve, where the answer is known exactly and every method can be
run thousands of times in seconds: s(x) = expit(b0 + b1 x + b2 x^2) on the indicators' grid, the
estimate's coefficients drawn N(beta, V) with V the inverse Fisher information of a logit fit to
``n`` rows spread uniformly over [0, 1], and B bootstrap replicates drawn N(beta_hat, V) (the
ideal parametric bootstrap: what a resampling bootstrap approximates when the fit is regular).
The truths: the quadratic logit nearest the diagonal (b1 = 0.0226, the floor) and the same curve
shifted up by 0.3, 0.6 and 1.2 on the logit scale (b1 0.060, 0.108, 0.205).

Methods, all from the same replicates: percentile, BC (Efron 1981), basic (2 est - quantiles),
the normal interval est +/- 1.96 robust SE, Fang and Santos' (2019, Review of Economic Studies
86(1)) derivative bootstrap with pretest thresholds kappa = 0.5, 1, 2, and ``floor_interval`` (the span of the percentile
and the basic interval, cut at 0; satcal.analysis.bootstrap), what bias.csv reports for b1,
b1_joint and b1_std. The simulation of the real estimator with worker effects is
bench_coverage_standardised.py; this one isolates the functional.

    OPENBLAS_NUM_THREADS=1 python benchmarks/bench_floor_intervals.py [studies] [B] [seed]
"""
import time

import numpy as np
from scipy.optimize import minimize
from scipy.special import expit

from satcal.analysis.core import GRID, design

X = design(GRID)                                                  # (grid, 3): 1, x, x^2


def b1(beta):
    """b1 of quadratic-logit curves, beta (..., 3)."""
    return np.abs(GRID - expit(beta @ X.T)).mean(axis=-1)


def fisher_inverse(beta, n, rng):
    """Covariance of a logit fit's coefficients from n rows uniform on [0, 1]."""
    x = rng.random(n)
    d = design(x)
    p = expit(d @ beta)
    return np.linalg.inv((d * (p * (1 - p))[:, None]).T @ d)


def fang_santos(est_beta, rep_beta, est, kappa):
    """Fang and Santos' (2019) bootstrap for a directionally differentiable functional: the
    replicate curves' deviations h* = s* - s_hat mapped through the estimated directional
    derivative of mean |d| at d_hat = s_hat - x, sign(d_hat) h* where |d_hat| > kappa sd*(x) and
    |h*| where it is within (sd* the replicates' pointwise SD); the interval
    (est - q97.5(T*), est - q2.5(T*)), cut at 0."""
    s_hat = expit(est_beta @ X.T)                                  # (S, grid)
    h = expit(rep_beta @ X.T) - s_hat[None]                        # (B, S, grid)
    d = s_hat - GRID
    near = np.abs(d)[None] <= kappa * h.std(axis=0)[None]
    t = np.where(near, np.abs(h), np.sign(d)[None] * h).mean(axis=-1)   # (B, S)
    q_lo, q_hi = np.percentile(t, [2.5, 97.5], axis=0)
    return np.maximum(0, est - q_hi), np.maximum(0, est - q_lo)


def methods(reps, est, est_beta=None, rep_beta=None):
    """The interval methods bench_coverage_standardised compares, and Fang and Santos' at three
    tuning constants when the parameters' estimates and replicates are given."""
    from bench_coverage_standardised import methods as interval_methods   # this folder is on sys.path
    out = interval_methods(reps, est)
    if est_beta is not None:
        for kappa in (0.5, 1.0, 2.0):
            out[f"Fang-Santos k={kappa:g}"] = fang_santos(est_beta, rep_beta, est, kappa)
    return out


def main(studies=400, B=400, seed=20):
    t0 = time.perf_counter()
    rng = np.random.default_rng(seed)
    floor = minimize(lambda b: b1(b), [-2.5, 5.0, 0.0], method="Nelder-Mead",
                     options={"xatol": 1e-8, "fatol": 1e-10}).x
    print(f"{studies} studies per cell, B = {B}, seed {seed}; coverage of 95% intervals (mean width)")
    for shift in (0.0, 0.3, 0.6, 1.2):
        beta = floor + np.array([shift, 0.0, 0.0])
        truth = float(b1(beta))
        for n in (1000, 4000):
            chol = np.linalg.cholesky(fisher_inverse(beta, n, rng))
            est_beta = beta + rng.standard_normal((studies, 3)) @ chol.T        # (S, 3)
            reps = est_beta[None] + rng.standard_normal((B, studies, 3)) @ chol.T  # (B, S, 3)
            est, r = b1(est_beta), b1(reps)
            line = []
            for name, (lo, hi) in methods(r, est, est_beta, reps).items():
                line.append(f"{name} {np.mean((lo <= truth) & (truth <= hi)):.3f} ({np.mean(hi - lo):.4f})")
            print(f"b1 {truth:.4f}, n {n:>4} (SD of est {est.std():.4f}, bias {est.mean() - truth:+.4f}): "
                  + ", ".join(line), flush=True)
    print(f"{time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    from _context import arguments
    args = arguments(__doc__, ("studies", int, 400, "simulated studies"), ("B", int, 400, "bootstrap replicates"),
                     ("seed", int, 20, "random seed"))
    main(args.studies, args.B, args.seed)
