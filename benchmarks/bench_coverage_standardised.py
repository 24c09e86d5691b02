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


def answers_of(pa, pb, u, rng):
    """SPEC 7.1's process, the worker's intercept u shared by both lists (lin-const = column 0)."""
    n = len(pa)
    sat_a = rng.random(n) < expit(-3 + u + 6 * pa)
    sat_b = rng.random(n) < expit(-3 + u + 6 * pb)
    out = np.where(sat_a & sat_b, "both_good", "both_bad").astype(object)
    one = sat_a != sat_b
    out[one] = np.where(sat_a[one] != (rng.random(n)[one] < 0.1), "a_better", "b_better")
    states = ~one & (rng.random(n) < 0.3)
    higher_a = np.where(pa > pb, True, np.where(pa < pb, False, rng.random(n) < 0.5))
    pick_a = np.where(pa == pb, higher_a, (rng.random(n) < 0.8) == higher_a)
    out[states] = np.where(pick_a[states], "a_better", "b_better")
    return out


def main(n_studies=60, B=100, n_answers=1500, shared=1):
    st = load_ecir2015()
    ref = reference_scores(st.judgments, FORMS, st.k, st.n_levels, seed=0)
    true = oracle_std(ref, 0).to_numpy()                            # (F, 3)
    pool = reference_scores(st.judgments, FORMS, st.k, st.n_levels, size=40000, seed=1)
    rng = np.random.default_rng(20)
    est, se, rse, cover, cover_p = [], [], [], [], []
    t0 = time.perf_counter()
    for s in range(n_studies):
        pick = rng.integers(0, len(pool) // 2, n_answers)
        pa, pb = pool[2 * pick], pool[2 * pick + 1]                 # pairs within a query
        workers = rng.integers(0, 60, n_answers)
        u = rng.normal(0, 0.5, 60)[workers]
        answers = answers_of(pa[:, 0], pb[:, 0], u, rng)
        r = calibrate(None, FORMS, phi_a=pa, phi_b=pb, answers=answers, worker_ids=workers,
                      example_ids=np.arange(n_answers), bootstrap=B, seed=s, sat_model="both",
                      indicator_range="full", model_check_folds=0, reference=ref,
                      standardised_intervals=True, shared_effect=bool(shared))
        b = r.bias.set_index("formulation").loc[[f.id for f in FORMS]]
        reps = r.bootstrap.joint["std_indicators"]                  # (B, F, 3)
        est.append(b[list(COLS)].to_numpy())
        se.append(np.nanstd(reps, axis=0, ddof=1))
        rse.append(robust_se(reps))                                 # the normalised IQR
        lo = b[[f"{c}_lo" for c in COLS]].to_numpy()
        hi = b[[f"{c}_hi" for c in COLS]].to_numpy()
        cover.append((lo <= true) & (true <= hi))
        plo, phi = np.nanpercentile(reps, [2.5, 97.5], axis=0)
        cover_p.append((plo <= true) & (true <= phi))
        if (s + 1) % 10 == 0:
            print(f"  {s + 1} studies, {time.perf_counter() - t0:.0f} s", flush=True)
    est, se, rse, cover, cover_p = (np.array(a) for a in (est, se, rse, cover, cover_p))
    wald = np.abs(est - true) <= 1.96 * rse                         # est +/- 1.96 robust SE
    if len(sys.argv) > 5:   # the per-study numbers, for a closer look
        np.savez(sys.argv[5], est=est, se=se, rse=rse, true=true, cover=cover, cover_p=cover_p)
    print(f"\n{'shared-effect' if shared else 'independent'} joint model; "
          f"{n_studies} studies of {n_answers} answers, 60 workers (resampled: "
          f"{r.meta['provenance']['resampling']}), B = {B}; {time.perf_counter() - t0:.0f} s")
    print(f"{'indicator':<10}{'SD ratio (min-max)':>22}{'robust SE ratio':>20}{'median ratio':>16}{'bias (mean)':>13}"
          f"{'BC coverage':>13}{'percentile':>12}{'Wald robust':>13}")
    for k, c in enumerate(COLS):
        spread = est[:, :, k].std(axis=0, ddof=1)
        ratio = se[:, :, k].mean(axis=0) / spread
        rratio = rse[:, :, k].mean(axis=0) / spread
        bias = (est[:, :, k] - true[:, k]).mean()
        mratio = np.median(rse[:, :, k], axis=0) / spread
        print(f"{c:<10}{ratio.min():>14.2f} - {ratio.max():5.2f}{rratio.min():>12.2f} - {rratio.max():5.2f}"
              f"{mratio.min():>8.2f} - {mratio.max():5.2f}{bias:>13.4f}{cover[:, :, k].mean():>13.3f}{cover_p[:, :, k].mean():>12.3f}"
              f"{wald[:, :, k].mean():>13.3f}")


if __name__ == "__main__":
    main(*[int(a) for a in sys.argv[1:5]])
