"""Issue 20: do the bootstrap's standard errors and intervals hold their nominal level when the
answers come from a crowd with worker effects?

A known truth, simulate.py's user model: a worker w is satisfied by a list with score phi (under
lin-const) with probability expit(-3 + u_w + 6 phi), u_w ~ N(0, 0.5^2); both lists judged
independently; both_good / both_bad / a preference for the satisfying one; an undecided answer
becomes a preference for a random side with probability 0.05 (position bias, shown order
random). The design is unlike the ECIR 2015 one: each study draws its own random pairs of
random lists (k = 5, levels 0-2) and 3 answers per example from 3 different workers of 60
(about 25 answers per worker), new workers every study.

The truth of each estimator is what it converges to in this super-population (new workers and
new examples): the paper's P(Sat|phi) is the quadratic logit fitted to the expected
both_good / both_bad data, P(Pref|dphi) to the expected agreement (population "all"), each
expectation over the worker effect (Gauss-Hermite) and over 200,000 random pairs. b1-b3 and
P(Sat|0.5) are computed from those curves.

Each replicate study is bootstrapped three ways with the same seed (B replicates): answers
resampled independently (the old bootstrap), examples (all answers to one example together)
and workers x examples (Owen's 2007 pigeonhole bootstrap). Reported per method: the ratio of
the mean bootstrap SE to the SD of the estimates across studies, and the coverage of BC,
percentile, basic and normal (estimate -+ 1.96 SE) 95% intervals of b1-b3; the percentile band
of P(Sat|0.5); and the coverage of the Wald band of P(Sat|0.5), model-based and clustered by
answer.

    OPENBLAS_NUM_THREADS=1 python benchmarks/bench_coverage.py [studies] [B] [heterogeneity] [answers per example]
"""
import time

import numpy as np
import pandas as pd
from scipy.special import expit
from scipy.stats import norm

from satcal.analysis import GRID, bias_indicators, collapse_answers, design, fit_logit, satisfaction_curves
from satcal.analysis.bootstrap import _bc_interval, bootstrap_calibration
from satcal.measures import formulation, score_lists

FORMS = [formulation(f) for f in ("lin-const", "exp2-log2", "bin1-zipf", "lin-zipf")]
K, LEVEL_P = 5, (0.5, 0.3, 0.2)
INTERCEPT, SLOPE, POSITION_BIAS = -3.0, 6.0, 0.05
HETEROGENEITY, PER_EXAMPLE = 0.5, 3   # set from the command line (__main__)
WORKERS, EXAMPLES = 60, 1500 // PER_EXAMPLE
HALF = int(np.flatnonzero(GRID == 0.5)[0])
METHODS = ("answers", "examples", "workers", "pigeonhole")


def random_pairs(rng, n):
    la = rng.choice(3, size=(n, K), p=LEVEL_P)
    lb = rng.choice(3, size=(n, K), p=LEVEL_P)
    return score_lists(la, FORMS), score_lists(lb, FORMS)


def truth(seed=99, n=200_000, nodes=24):
    """b1, b2, b3 and P(Sat|0.5) per formulation of the super-population (see docstring)."""
    rng = np.random.default_rng(seed)
    phi_a, phi_b = random_pairs(rng, n)
    t = collapse_answers(phi_a, phi_b, np.full(n, "both_good", dtype=object))  # distinct pairs
    z, wq = np.polynomial.hermite_e.hermegauss(nodes)
    u, wq = HETEROGENEITY * z, wq / wq.sum()
    f0 = 0  # the truth formulation (lin-const) drives the users
    pa = expit(INTERCEPT + u[None] + SLOPE * t.phi_a[:, f0, None])   # (T, nodes)
    pb = expit(INTERCEPT + u[None] + SLOPE * t.phi_b[:, f0, None])
    both_good = (pa * pb) @ wq * (1 - POSITION_BIAS)
    undecided = (pa * pb + (1 - pa) * (1 - pb)) @ wq
    agree = undecided * (1 - POSITION_BIAS)
    only_a, only_b = (pa * (1 - pb)) @ wq, ((1 - pa) * pb) @ wq
    a_better = only_a + undecided * POSITION_BIAS / 2
    b_better = only_b + undecided * POSITION_BIAS / 2
    out = {}
    for j, f in enumerate(FORMS):
        x = np.concatenate([t.phi_a[:, j], t.phi_b[:, j]])
        share = np.tile(both_good / agree, 2)
        ws = np.tile(agree * t.counts, 2)
        sat = fit_logit(x, share, weights=ws).predict(GRID)  # fractional outcomes, same MLE
        d = t.phi_a[:, j] - t.phi_b[:, j]
        d = np.where(np.abs(d) < 1e-9, 0.0, d)
        p_agree = np.where(d > 0, a_better, np.where(d < 0, b_better, 0.0))
        pref = fit_logit(np.abs(d), p_agree, weights=t.counts).predict(GRID)
        ind = bias_indicators(sat[None], pref[None])
        out[f.id] = np.array([ind["b1"][0], ind["b2"][0], ind["b3"][0], sat[HALF]])
    return out


def study(rng):
    phi_a, phi_b = random_pairs(rng, EXAMPLES)
    u = rng.normal(0, HETEROGENEITY, WORKERS)
    who = np.argsort(rng.random((EXAMPLES, WORKERS)), axis=1)[:, :PER_EXAMPLE].ravel()
    ex = np.repeat(np.arange(EXAMPLES), PER_EXAMPLE)
    sa = rng.random(ex.size) < expit(INTERCEPT + u[who] + SLOPE * phi_a[ex, 0])
    sb = rng.random(ex.size) < expit(INTERCEPT + u[who] + SLOPE * phi_b[ex, 0])
    answers = np.select([sa & sb, ~sa & ~sb, sa], ["both_good", "both_bad", "a_better"], "b_better")
    flip = (sa == sb) & (rng.random(ex.size) < POSITION_BIAS)
    answers[flip] = np.where(rng.random(int(flip.sum())) < 0.5, "a_better", "b_better")
    return phi_a[ex], phi_b[ex], answers.astype(object), who, ex


def intervals(reps, est):
    """(lo, hi) of BC, percentile, basic and normal 95% intervals; reps (B, F, 3), est (F, 3)."""
    lo_p, hi_p = np.nanpercentile(reps, [2.5, 97.5], axis=0)
    se = np.nanstd(reps, axis=0, ddof=1)
    z = norm.ppf(0.975)
    return {"BC": _bc_interval(reps, est), "percentile": (lo_p, hi_p),
            "basic": (2 * est - hi_p, 2 * est - lo_p), "normal": (est - z * se, est + z * se)}


def main(n_studies, B):
    t0 = time.perf_counter()
    true = np.stack([truth()[f.id] for f in FORMS])   # (F, 4)
    print(f"truth: {time.perf_counter() - t0:.1f} s; b1, b2, b3, P(Sat|0.5) per formulation:")
    for f, v in zip(FORMS, true):
        print(f"  {f.id:<10} " + "  ".join(f"{x:.4f}" for x in v))
    rng = np.random.default_rng(2026)
    est = np.empty((n_studies, len(FORMS), 4))
    se = {m: np.empty((n_studies, len(FORMS), 4)) for m in METHODS}
    hit = {}
    wald = {"model": [], "cluster": []}
    var = {m: [] for m in METHODS}
    for s in range(n_studies):
        phi_a, phi_b, answers, who, ex = study(rng)
        for m in METHODS:
            clusters = {"answers": None, "examples": (ex,), "workers": (who,), "pigeonhole": (who, ex)}[m]
            boot = bootstrap_calibration(phi_a, phi_b, answers, FORMS, replicates=B, seed=s,
                                         clusters=clusters)
            sat_half = np.stack([boot.curve_bands[(f.id, "sat")][0][HALF] for f in FORMS]), \
                np.stack([boot.curve_bands[(f.id, "sat")][1][HALF] for f in FORMS])
            est[s, :, :3] = boot.estimates
            se[m][s, :, :3] = np.nanstd(boot.indicators, axis=0, ddof=1)
            var[m].append(se[m][s, :, :3] ** 2)
            for name, (lo, hi) in intervals(boot.indicators, boot.estimates).items():
                hit.setdefault((m, name), []).append((lo <= true[:, :3]) & (true[:, :3] <= hi))
            hit.setdefault((m, "band"), []).append((sat_half[0] <= true[:, 3]) & (true[:, 3] <= sat_half[1]))
        types = collapse_answers(phi_a, phi_b, answers)
        for j, c in enumerate(satisfaction_curves(types)):
            for kind in wald:
                fit = fit_logit(c.x, c.y, weights=c.w, clusters=c.types if kind == "cluster" else None)
                lo, hi = fit.band([0.5])
                est[s, j, 3] = fit.predict([0.5])[0]
                wald[kind].append((lo[0] <= true[j, 3] <= hi[0]))
        if (s + 1) % 10 == 0:
            print(f"  {s + 1} studies, {time.perf_counter() - t0:.0f} s", flush=True)

    sd = est.std(axis=0, ddof=1)  # (F, 4) across studies
    print(f"\nheterogeneity {HETEROGENEITY}: {n_studies} studies of {EXAMPLES} examples x {PER_EXAMPLE} answers, {WORKERS} workers, "
          f"B = {B}, {len(FORMS)} formulations; {time.perf_counter() - t0:.0f} s")
    print("\nmean bootstrap SE / SD across studies (per indicator: min-max over formulations):")
    rows = []
    for m in METHODS:
        ratio = se[m].mean(axis=0)[:, :3] / sd[:, :3]
        rows.append({"resampling": m, **{f"b{k + 1}": f"{ratio[:, k].min():.2f}-{ratio[:, k].max():.2f}"
                                          for k in range(3)}})
    print(pd.DataFrame(rows).to_string(index=False))
    # For a linear statistic the pigeonhole variance is V_workers + V_examples + V_answers (the
    # one-way bootstraps' variances), the two-way cluster-robust one V_workers + V_examples -
    # V_answers (Cameron, Gelbach & Miller 2011): a diagnostic of V_pigeonhole - 2 V_answers.
    cgm = np.sqrt(np.maximum(np.array(var["pigeonhole"]) - 2 * np.array(var["answers"]), 0))
    ratio = cgm.mean(axis=0) / sd[:, :3]
    z = norm.ppf(0.975)
    cover = (np.abs(est[:, :, :3] - true[None, :, :3]) <= z * cgm).mean(axis=0)
    print("diagnostic, SE from V_pigeonhole - 2 V_answers: SE/SD "
          + ", ".join(f"b{k + 1} {ratio[:, k].min():.2f}-{ratio[:, k].max():.2f}" for k in range(3))
          + "; normal-interval coverage " + ", ".join(f"b{k + 1} {cover[:, k].mean():.3f}" for k in range(3)))
    print("\ncoverage of 95% intervals (mean over formulations; min-max):")
    rows = []
    for m in METHODS:
        for name in ("BC", "percentile", "basic", "normal"):
            c = np.mean(hit[(m, name)], axis=0)   # (F, 3)
            rows.append({"resampling": m, "interval": name,
                         **{f"b{k + 1}": f"{c[:, k].mean():.3f} ({c[:, k].min():.2f}-{c[:, k].max():.2f})"
                            for k in range(3)}})
        c = np.mean(hit[(m, "band")], axis=0)
        rows.append({"resampling": m, "interval": "P(Sat|0.5) percentile band",
                     "b1": f"{c.mean():.3f} ({c.min():.2f}-{c.max():.2f})", "b2": "", "b3": ""})
    print(pd.DataFrame(rows).to_string(index=False))
    for kind, v in wald.items():
        print(f"Wald band of P(Sat|0.5), {kind}-based covariance: coverage {np.mean(v):.3f}")
    print(f"SD of P(Sat|0.5) across studies: {', '.join(f'{v:.4f}' for v in sd[:, 3])}")
    bias = (est.mean(axis=0) - true) / sd
    print("(mean estimate - truth) / SD, per formulation (rows) for b1, b2, b3, P(Sat|0.5):")
    for f, v in zip(FORMS, bias):
        print(f"  {f.id:<10} " + "  ".join(f"{x:+.2f}" for x in v))


if __name__ == "__main__":
    from _context import arguments
    args = arguments(__doc__, ("studies", int, 150, "simulated studies"), ("B", int, 300, "bootstrap replicates"),
                     ("heterogeneity", float, HETEROGENEITY, "SD of the workers' offsets (logit scale)"),
                     ("per_example", int, PER_EXAMPLE, "answers per example"))
    HETEROGENEITY, PER_EXAMPLE = args.heterogeneity, args.per_example
    EXAMPLES = 1500 // PER_EXAMPLE
    main(args.studies, args.B)
