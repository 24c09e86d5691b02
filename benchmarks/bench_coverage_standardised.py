"""Issue 20: do the standardised per-list indicators' bootstrap standard errors and intervals
hold their level under a crowd with worker effects?

Truth: the users of bench_design_invariance.py (lin-const, s_w(phi) = expit(-3 + u_w + 6 phi),
u_w ~ N(0, 0.5^2), pi 0.3, delta 0.8, lambda 0.1, a worker's intercept shared by both lists of
an answer) and their own standardised indicators on the reference population of the ECIR 2015
judgments (Gauss-Hermite over u_w; bench_design_invariance.oracle_std). Each study: new random
pairs of lists drawn from the judgments by the reference rule (another seed), one answer per
example by one of 60 new workers (nested: the bootstrap resamples workers), N answers;
calibrate(sat_model="both", indicator_range="full", B replicates). Reported per indicator: the
mean bootstrap SE over the SD of the estimates across studies, the mean bias against the truth
and the coverage of the 95% BC intervals (bias.csv's), of percentile intervals of the same
replicates and of the Wald interval est +/- 1.96 robust SE (mean over formulations); the SE ratio
(a study's SE over the SD of the estimates across studies: mean and median over studies) both for
the replicates' SD and for the robust SE (their normalised IQR, bootstrap.robust_se, what
bias.csv, pairwise.csv and settle read). A fifth argument names an .npz for the per-study numbers.

The joint model is calibrate's default, the shared-effect one (an effect both lists of an answer
share, as these users' worker intercepts are); a fourth argument 0 fits the independent model
(``calibrate(shared_effect=False)``), the one before issue 20's step 3.

    OPENBLAS_NUM_THREADS=1 python benchmarks/bench_coverage_standardised.py [studies] [B] [answers] [shared] [out.npz]
"""
import sys
import time
from pathlib import Path

import numpy as np
from scipy.special import expit

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_design_invariance import oracle_std  # noqa: E402

from satcal.analysis import calibrate  # noqa: E402
from satcal.analysis.bootstrap import robust_se  # noqa: E402
from satcal.analysis.standardise import reference_scores  # noqa: E402
from satcal.datasets import load_ecir2015  # noqa: E402
from satcal.measures import resolve_formulations  # noqa: E402

FORMS = resolve_formulations(["lin-const", "lin-log5", "exp2-log2", "bin1-zipf"])
COLS = ("b1_std", "b2_std", "b3_std")


def answers_of(pa, pb, u, rng, intercept=-3.0, slope=6.0):
    """SPEC 7.1's process, the worker's intercept u shared by both lists (lin-const = column 0)."""
    n = len(pa)
    sat_a = rng.random(n) < expit(intercept + u + slope * pa)
    sat_b = rng.random(n) < expit(intercept + u + slope * pb)
    out = np.where(sat_a & sat_b, "both_good", "both_bad").astype(object)
    one = sat_a != sat_b
    out[one] = np.where(sat_a[one] != (rng.random(n)[one] < 0.1), "a_better", "b_better")
    states = ~one & (rng.random(n) < 0.3)
    higher_a = np.where(pa > pb, True, np.where(pa < pb, False, rng.random(n) < 0.5))
    pick_a = np.where(pa == pb, higher_a, (rng.random(n) < 0.8) == higher_a)
    out[states] = np.where(pick_a[states], "a_better", "b_better")
    return out


def run(n_studies=60, B=100, n_answers=1500, shared=1, out=None, intercept=-3.0, slope=6.0):
    """Simulate and calibrate the studies; returns (and with ``out`` saves) the per-study numbers:
    estimates (S, F, 3), bias.csv's intervals, the standardised replicates (S, B, F, 3), the
    replicates' s*_f coefficients (S, B, F, 3) and the point estimates' (S, F, 3)."""
    from satcal.analysis import calibration as cal
    st = load_ecir2015()
    ref = reference_scores(st.judgments, FORMS, st.k, st.n_levels, seed=0)
    true = oracle_std(ref, 0, intercept=intercept, slope=slope).to_numpy()   # (F, 3)
    pool = reference_scores(st.judgments, FORMS, st.k, st.n_levels, size=40000, seed=1)
    rng = np.random.default_rng(20)
    keep = {k: [] for k in ("est", "lo", "hi", "reps", "beta_reps", "beta")}
    seen = {}
    bands = cal._standardised_bands

    def capture(formulations, beta_sat, beta_pref):   # the replicates' curves, for a closer look
        seen["beta"] = beta_sat
        return bands(formulations, beta_sat, beta_pref)
    cal._standardised_bands = capture
    t0 = time.perf_counter()
    c0 = time.process_time()
    for s in range(n_studies):
        pick = rng.integers(0, len(pool) // 2, n_answers)
        pa, pb = pool[2 * pick], pool[2 * pick + 1]                 # pairs within a query
        workers = rng.integers(0, 60, n_answers)
        u = rng.normal(0, 0.5, 60)[workers]
        answers = answers_of(pa[:, 0], pb[:, 0], u, rng, intercept, slope)
        r = calibrate(None, FORMS, phi_a=pa, phi_b=pb, answers=answers, worker_ids=workers,
                      example_ids=np.arange(n_answers), bootstrap=B, seed=s, sat_model="both",
                      indicator_range="full", model_check_folds=0, reference=ref,
                      standardised_intervals=True, shared_effect=bool(shared))
        b = r.bias.set_index("formulation").loc[[f.id for f in FORMS]]
        keep["est"].append(b[list(COLS)].to_numpy())
        keep["lo"].append(b[[f"{c}_lo" for c in COLS]].to_numpy())
        keep["hi"].append(b[[f"{c}_hi" for c in COLS]].to_numpy())
        keep["reps"].append(r.bootstrap.joint["std_indicators"])    # (B, F, 3)
        keep["beta_reps"].append(seen["beta"])
        f = r.fits[(r.fits["sat_model"] == "standardised") & (r.fits["curve"] == "sat")].set_index("formulation")
        keep["beta"].append(f.loc[[x.id for x in FORMS], ["beta0", "beta1", "beta2"]].to_numpy(float))
        if (s + 1) % 10 == 0:
            print(f"  {s + 1} studies, {time.perf_counter() - t0:.0f} s", flush=True)
    cal._standardised_bands = bands
    res = {k: np.array(v) for k, v in keep.items()}
    res.update(true=true, wall=time.perf_counter() - t0, cpu=time.process_time() - c0,
               resampling=r.meta["provenance"]["resampling"], n_answers=n_answers, shared=shared,
               intercept=intercept, slope=slope)
    if out:
        np.savez(out, **res)
    return res


def methods(reps, est):
    """95% intervals of every method from one study's replicates (B, F) and estimates (F,)."""
    from satcal.analysis.bootstrap import _bc_interval, _quantiles, floor_interval
    q_lo, q_hi = _quantiles(reps)
    se = robust_se(reps)
    out = {"percentile": (q_lo, q_hi), "BC": _bc_interval(reps, est),
           "basic": (2 * est - q_hi, 2 * est - q_lo),
           "normal (robust SE)": (est - 1.96 * se, est + 1.96 * se),
           "floor_interval": floor_interval(reps, est)}
    return out


def summarise(res, near_margin=0.005):
    """Print the SE ratios, the bias and the coverage of every interval method, per indicator and
    for b1_std per group: near the floor (true b1_std within ``near_margin`` of the least)
    against away from it."""
    est, reps, true = res["est"], res["reps"], res["true"]
    S = est.shape[0]
    se = np.nanstd(reps, axis=1, ddof=1)                              # (S, F, 3)
    rse = robust_se(reps, axis=1)
    print(f"\n{'shared-effect' if res['shared'] else 'independent'} joint model; users "
          f"expit({float(res['intercept']):g} + u + {float(res['slope']):g} phi); {S} studies of "
          f"{int(res['n_answers'])} answers, 60 workers (resampled: {res['resampling']}), "
          f"B = {reps.shape[1]}; {float(res['wall']):.0f} s wall, {float(res['cpu']):.0f} s CPU")
    print("truth:", {c: np.round(true[:, k], 4).tolist() for k, c in enumerate(COLS)})
    print(f"{'indicator':<10}{'SD ratio':>14}{'robust SE ratio':>18}{'median ratio':>15}{'bias':>9}  coverage")
    for k, c in enumerate(COLS):
        spread = est[:, :, k].std(axis=0, ddof=1)
        ratio = se[:, :, k].mean(axis=0) / spread
        rratio = rse[:, :, k].mean(axis=0) / spread
        mratio = np.median(rse[:, :, k], axis=0) / spread
        bias = (est[:, :, k] - true[:, k]).mean()
        cov = {"reported": ((res["lo"][:, :, k] <= true[:, k]) & (true[:, k] <= res["hi"][:, :, k])).mean()}
        per = [methods(reps[s, :, :, k], est[s, :, k]) for s in range(S)]
        for m in per[0]:
            lo = np.array([p[m][0] for p in per]); hi = np.array([p[m][1] for p in per])
            cov[m] = ((lo <= true[:, k]) & (true[:, k] <= hi)).mean()
        print(f"{c:<10}{ratio.min():>6.2f} - {ratio.max():5.2f}{rratio.min():>9.2f} - {rratio.max():5.2f}"
              f"{mratio.min():>7.2f} - {mratio.max():5.2f}{bias:>9.4f}  "
              + ", ".join(f"{m} {v:.3f}" for m, v in cov.items()))
    t = true[:, 0]
    near = t <= t.min() + near_margin
    print(f"b1_std by group (near the floor: {[f.id for f, n in zip(FORMS, near) if n]}, true "
          f"{np.round(t[near], 4).tolist()}; away: {np.round(t[~near], 4).tolist()})")
    per = [methods(reps[s, :, :, 0], est[s, :, 0]) for s in range(S)]
    rows = {"reported (bias.csv when run)": (res["lo"][:, :, 0], res["hi"][:, :, 0])}
    rows.update({m: (np.array([p[m][0] for p in per]), np.array([p[m][1] for p in per])) for m in per[0]})
    for m, (lo, hi) in rows.items():
        hit = (lo <= t) & (t <= hi)
        below = t < lo                                               # the interval above the truth
        print(f"  {m:<28} near {hit[:, near].mean():.3f} (truth below {below[:, near].mean():.3f}), "
              f"away {hit[:, ~near].mean():.3f}; per formulation "
              + " ".join(f"{v:.2f}" for v in hit.mean(axis=0))
              + f"; width mean {np.mean(hi - lo):.4f}, median {np.median(hi - lo):.4f}")
    for j, f in enumerate(FORMS):
        e = est[:, j, 0]
        print(f"  {f.id:<10} true {t[j]:.4f}  mean est {e.mean():.4f}  bias/SD {(e.mean() - t[j]) / e.std(ddof=1):+.2f}"
              f"  median robust SE {np.median(rse[:, j, 0]):.4f}  SD across studies {e.std(ddof=1):.4f}")


def main():
    import argparse
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("studies", type=int, nargs="?", default=60)
    ap.add_argument("B", type=int, nargs="?", default=100)
    ap.add_argument("answers", type=int, nargs="?", default=1500)
    ap.add_argument("shared", type=int, nargs="?", default=1)
    ap.add_argument("out", nargs="?", default=None, help="an .npz for the per-study numbers")
    ap.add_argument("--intercept", type=float, default=-3.0, help="the users' intercept (default -3)")
    ap.add_argument("--slope", type=float, default=6.0, help="the users' slope in phi (default 6)")
    ap.add_argument("--summarise", metavar="NPZ", help="print the summary of a saved run, simulate nothing")
    a = ap.parse_args()
    if a.summarise:
        res = dict(np.load(a.summarise, allow_pickle=True))
    else:
        res = run(a.studies, a.B, a.answers, a.shared, a.out, a.intercept, a.slope)
    summarise(res)


if __name__ == "__main__":
    main()
