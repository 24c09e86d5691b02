"""Issue 5 benchmark: B = 1000 bootstrap replicates of the 72 curves plus b1-b3 on the ECIR
2015 answers (goal <= 60 s on 2 cores) against a plain statsmodels loop (goal >= 10x).

The statsmodels loop fits the same weighted replicates one GLM at a time; it is timed on the
first R replicates and the per-replicate time scaled to B (a full run would take ~15 minutes).
Both sides run on one BLAS thread (satcal's loops limit themselves; the loop is limited here).

    python benchmarks/bench_bootstrap.py [R]
"""
import time
import warnings

import numpy as np
import statsmodels.api as sm
from threadpoolctl import threadpool_limits

from satcal.analysis import bias_indicators, design, preference_data, satisfaction_data
from satcal.analysis.bootstrap import bootstrap_calibration, replicate_weights
from satcal.datasets import load_ecir2015
from satcal.measures import score_lists, study_formulations
from satcal.analysis import GRID
from _context import arguments, note  # BLAS threads and load beside each figure

B = 1000


def statsmodels_loop(phi_a, phi_b, answers, forms, reps):
    W = replicate_weights(len(answers), reps, seed=1)
    keep = np.isin(answers, ("both_good", "both_bad"))
    x_sat, y_sat = satisfaction_data(phi_a, phi_b, answers)
    pref = preference_data(phi_a, phi_b, answers)
    Xg = design(GRID)
    out = np.empty((reps, len(forms), 3))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for b in range(reps):
            w_sat = np.concatenate([W[b, keep], W[b, keep]])
            for j in range(len(forms)):
                s = sm.GLM(y_sat, design(x_sat[:, j]), family=sm.families.Binomial(), freq_weights=w_sat).fit()
                p = sm.GLM(pref[j][1], design(pref[j][0]), family=sm.families.Binomial(), freq_weights=W[b]).fit()
                ind = bias_indicators(1 / (1 + np.exp(-(Xg @ s.params))), 1 / (1 + np.exp(-(Xg @ p.params))))
                out[b, j] = ind["b1"], ind["b2"], ind["b3"]
    return out


def main(reps):
    study = load_ecir2015()
    forms = study_formulations()
    phi_a = score_lists(study.levels("a"), forms)
    phi_b = score_lists(study.levels("b"), forms)
    answers = study.answers
    timings = {}
    for jobs in (1, 2):
        t = time.perf_counter()
        boot = bootstrap_calibration(phi_a, phi_b, answers, forms, replicates=B, seed=1, n_jobs=jobs)
        timings[jobs] = time.perf_counter() - t
    t = time.perf_counter()
    # the peer on one BLAS thread too, as satcal's own loops run: small GLM fits lose as much
    # as satcal's to a second thread spinning on shared cores
    with threadpool_limits(limits=1, user_api="blas"):
        loop = statsmodels_loop(phi_a, phi_b, answers, forms, reps)
    loop_time = (time.perf_counter() - t) / reps * B
    diff = np.abs(loop - boot.indicators[:reps]).max()
    print(f"bootstrap B={B}, 72 curves + b1-b3: satcal {timings[1]:.1f} s (1 process), "
          f"{timings[2]:.1f} s (2 processes); goal <= 60 s {note()}")
    print(f"statsmodels loop: {loop_time:.0f} s for B={B} (timed on {reps} replicates) -> "
          f"{loop_time / timings[1]:.0f}x (1 process), {loop_time / timings[2]:.0f}x (2 processes); "
          f"goal >= 10x; max |b diff| on the shared replicates = {diff:.1e} {note()}")


if __name__ == "__main__":
    main(arguments(__doc__, ("R", int, 10, "bootstrap replicates")).R)
