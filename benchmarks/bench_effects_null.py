"""Issue 20 benchmark: the tests of the gain and discount effects under an exact null, on
answers simulated from satcal simulate's user model.

An exact null with shared answers: every "formulation" (g, d) of a 6 x 6 grid scores the lists
with the same truth formulation (lin-const), and analyses the answers kept by a random mask of
its gain g and one of its discount d (each keeps an answer with probability KEEP, drawn afresh
in every simulated study, independently of the answers). Every formulation then has exactly
the same true b1, b2, b3, while the estimates share most of their answers, more so within a
gain and within a discount: the correlation structure that makes the real 36 estimates
dependent. Per simulated study:

- the point estimates (quadratic-logit fits of core, bias_indicators over [0, 1]) and B
  bootstrap replicates resampling the workers (each example has one answer, so this is what
  the report's bootstrap resamples), the same replicate weights for every formulation (as
  bootstrap_calibration draws them);
- the old test: statsmodels' additive OLS ANOVA F test over the 36 estimates;
- the new test: the bootstrap Wald test of satcal.analysis.effects (robust covariance), beside
  the same test with the replicates' plain covariance (np.cov, the rule before).

Prints the rejection rates at 5% with their Monte-Carlo standard errors and the median p.

    OPENBLAS_NUM_THREADS=1 python benchmarks/bench_effects_null.py [SIMS] [B] [ANSWERS]
"""
import time

import numpy as np
import pandas as pd
from scipy.sparse import csr_matrix
from scipy.special import expit
from scipy.stats import chi2

from satcal.analysis import GRID, bias_indicators, design, preference_data, satisfaction_data
from satcal.analysis.bootstrap import replicate_weights
from satcal.analysis.core import fit_logit_replicates
from satcal.analysis.effects import effect_contrasts, wald_test
from satcal.analysis.power import simulated_answers
from satcal.datasets import load_ecir2015
from satcal.measures import formulation, score_lists
from satcal.simulate import UserModel

GAINS = ["bin1", "bin2", "exp2", "exp3", "exp5", "lin"]
DISCOUNTS = ["const", "log2", "log3", "log5", "lin", "zipf"]
KEEP = 0.8


def rows_matrix(keys):
    """Distinct rows of (x, y) and the (answers, distinct rows) incidence matrix."""
    uniq, inv = np.unique(keys, axis=0, return_inverse=True)
    return uniq, inv.ravel()


def study(phi_a, phi_b, model, rng, n_answers, boot):
    pick = rng.integers(0, phi_a.size, n_answers)
    a, b = phi_a[pick], phi_b[pick]
    answers, workers = simulated_answers(a, b, model, rng, return_workers=True)
    # every answer's satisfaction rows (both_* answers: its A and B rows) and preference row
    x_sat, y_sat = satisfaction_data(a[:, None], b[:, None], answers)
    keep = np.isin(answers, ("both_good", "both_bad"))
    owner_sat = np.concatenate([np.flatnonzero(keep)] * 2)
    (x_pref, y_pref), = preference_data(a[:, None], b[:, None], answers)
    # one answer per example: the report's bootstrap resamples workers (resampling_clusters)
    clusters = (np.unique(workers, return_inverse=True)[1].ravel(),)
    W = np.vstack([np.ones((1, n_answers)),
                   replicate_weights(n_answers, boot, int(rng.integers(2 ** 32)), clusters=clusters)])
    g_mask = rng.random((len(GAINS), n_answers)) < KEEP
    d_mask = rng.random((len(DISCOUNTS), n_answers)) < KEEP
    curves = {}
    for curve, x, y, owner in (("sat", x_sat[:, 0], y_sat, owner_sat),
                               ("pref", x_pref, y_pref, np.arange(n_answers))):
        uniq, inv = rows_matrix(np.stack([x, y], axis=1))
        to_rows = csr_matrix((np.ones(owner.size), (owner, inv)), shape=(n_answers, uniq.shape[0]))
        X = design(uniq[:, 0])
        out = np.empty((len(GAINS) * len(DISCOUNTS), 1 + boot, GRID.size))
        for gi in range(len(GAINS)):
            for di in range(len(DISCOUNTS)):
                mask = (g_mask[gi] & d_mask[di]).astype(float)
                w = np.asarray((to_rows.T @ (W * mask).T).T)
                beta, ok = fit_logit_replicates(X, uniq[:, 1], w)
                p = expit(beta @ design(GRID).T)
                p[~ok] = np.nan
                out[gi * len(DISCOUNTS) + di] = p
        curves[curve] = out
    ind = bias_indicators(curves["sat"].reshape(-1, GRID.size), curves["pref"].reshape(-1, GRID.size))
    return {k: v.reshape(len(GAINS) * len(DISCOUNTS), 1 + boot) for k, v in ind.items()}, int(clusters[0].max()) + 1


def plain_cov_wald(est, reps, c, clusters):
    """The test before the robust covariance: the same Hotelling F with np.cov of the
    contrasts' replicates (what wald_test read until issue 20's robust rule)."""
    from scipy.stats import f as f_dist
    reps = reps[np.isfinite(reps).all(axis=1)]
    units = min(reps.shape[0], clusters)
    v = np.atleast_2d(np.cov(reps @ c.T, rowvar=False))
    vals, vecs = np.linalg.eigh(v)
    keep = vals > vals.max() * 1e-10
    df = int(keep.sum())
    z = vecs[:, keep].T @ (c @ est)
    w = float(np.sum(z ** 2 / vals[keep]))
    return float(f_dist.sf(w * (units - df) / ((units - 1) * df), df, units - df))


def main(sims=200, boot=200, n_answers=2000, seed=20):
    import statsmodels.api as sm
    st = load_ecir2015()
    truth = formulation("lin-const")
    phi_a = score_lists(st.levels("a"), [truth], n_levels=3)[:, 0]
    phi_b = score_lists(st.levels("b"), [truth], n_levels=3)[:, 0]
    model = UserModel(position_bias=0.05, heterogeneity=0.5, workers=60, spammers=0.15)
    grid = pd.DataFrame([(g, d) for g in GAINS for d in DISCOUNTS], columns=["gain", "discount"])
    dummies = {t: pd.get_dummies(grid[t], drop_first=True, dtype=float).to_numpy() for t in ("gain", "discount")}
    one = np.ones((len(grid), 1))
    x_full = np.hstack([one, dummies["gain"], dummies["discount"]])
    rng = np.random.default_rng(seed)
    rows = []
    start = time.time()
    for s in range(sims):
        ind, n_workers = study(phi_a, phi_b, model, rng, n_answers, boot)
        for name, v in ind.items():
            est, reps = v[:, 0], v[:, 1:].T
            full = sm.OLS(est, x_full).fit()
            for term, other in (("gain", "discount"), ("discount", "gain")):
                f_p = full.compare_f_test(sm.OLS(est, np.hstack([one, dummies[other]])).fit())[1]
                w, _, df, _, p = wald_test(est, reps, effect_contrasts(grid[term]), clusters=n_workers)
                p_b = wald_test(est, reps, effect_contrasts(grid[term]))[4]
                p_cov = plain_cov_wald(est, reps, effect_contrasts(grid[term]), n_workers)
                rows.append({"indicator": name, "term": term, "f_p": f_p, "wald_p": p,
                             "hotelling_b_p": p_b, "chi2_p": chi2.sf(w, df), "cov_p": p_cov,
                             "workers": n_workers})
        if (s + 1) % 20 == 0:
            print(f"  {s + 1} studies, {time.time() - start:.0f} s", flush=True)
    res = pd.DataFrame(rows)
    # what the robust covariance costs at the report's size: B = 1000 replicates of 36 estimates
    big = np.random.default_rng(0).normal(size=(1000, 36))
    c = effect_contrasts(grid["gain"])
    t = time.process_time()
    for _ in range(50):
        wald_test(big[0], big, c, clusters=60)
    cost = (time.process_time() - t) / 50 * 1e3
    t = time.process_time()
    for _ in range(50):
        plain_cov_wald(big[0], big, c, 60)
    cost_plain = (time.process_time() - t) / 50 * 1e3
    print(f"\n{sims} simulated studies of {n_answers} answers (ECIR 2015 lists, lin-const truth, "
          f"KEEP = {KEEP}), B = {boot}, seed {seed}; {time.time() - start:.0f} s")
    print(f"workers resampled per study: median {int(res.workers.median())} "
          f"({int(res.workers.min())}-{int(res.workers.max())})")
    print("rejection rate at 5% (Monte-Carlo SE) and median p; Wald: the test of anova.csv "
          "(robust covariance, Hotelling F with nu = min(B, workers) - 1), Wald np.cov: the same "
          "with the replicates' plain covariance (the former rule), Wald B only: Hotelling on B "
          "alone, Wald chi2: the same W against chi2(5)")
    print(f"{'indicator':<10}{'term':<10}{'OLS F test':>16}{'median p':>10}"
          f"{'Wald':>16}{'median p':>10}{'Wald np.cov':>16}{'Wald B only':>16}{'Wald chi2':>16}")
    se = lambda p, n: np.sqrt(p * (1 - p) / n)
    for (name, term), g in list(res.groupby(["indicator", "term"], sort=False)) + [(("all", ""), res)]:
        f, w, cv, hb, c = (np.mean(g[k] < 0.05) for k in ("f_p", "wald_p", "cov_p", "hotelling_b_p", "chi2_p"))
        print(f"{name:<10}{term:<10}{f:>9.3f} ({se(f, len(g)):.3f}){np.median(g.f_p):>10.2g}"
              f"{w:>9.3f} ({se(w, len(g)):.3f}){np.median(g.wald_p):>10.2g}{cv:>9.3f} ({se(cv, len(g)):.3f})"
              f"{hb:>9.3f} ({se(hb, len(g)):.3f}){c:>9.3f} ({se(c, len(g)):.3f})")
    print(f"robust covariance, B = {boot}: {cost:.2f} ms per test (np.cov {cost_plain:.2f} ms)")
    print(f"('all' pools {len(res)} tests, six per study, not independent: its SE is a lower bound)")


if __name__ == "__main__":
    from _context import arguments
    args = arguments(__doc__, ("SIMS", int, 200, "simulated studies"), ("B", int, 200, "bootstrap replicates"),
                     ("ANSWERS", int, 2000, "answers per study"))
    main(args.SIMS, args.B, args.ANSWERS)
