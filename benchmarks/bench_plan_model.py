"""Issue 24: what one wave's planning costs with each joint model the criterion may fit between
waves (``plan_wave(model=...)``), on bench_adaptive_coverage.py's ECIR-shaped study.

The ECIR 2015 judgments (k = 5, levels 0-2), its five formulations, truth lin-const and its crowd
(worker effects, spammers, lapses); the study so far is the first ``n`` examples of its fixed
coverage design (N = 1,000) in a seeded random order, answered by the crowd of study 0
(``crowd(TRUTH, 1000)``); the pool is its 5,000 candidates. For each ``n`` one wave of ``--wave``
examples is planned (default criterion on b1_std, cap 0.25, min_depth 10) three ways, each timed
in CPU seconds (``time.process_time``, one process, OPENBLAS_NUM_THREADS=1 advised):

- ``independent, warm``: the default as a study runs it, the cache holding the fits of the
  previous wave's planning (``n - wave`` answers): one L-BFGS-B run a formulation;
- ``independent, cold``: the default with an empty cache (multi-start ``fit_joint``);
- ``shared``: ``model="shared"``, the analysis's own fits (``fit_joint`` then ``fit_joint_shared``
  a formulation; never warm started).

It prints each time, the shared model's ratio to both, the fits' share of the shared planning
(the five fits timed alone) and how many of the wave's examples the two models share.

    OPENBLAS_NUM_THREADS=1 nice -n 5 python benchmarks/bench_plan_model.py --sizes 300,600,900
"""
import argparse
import os
import sys
import time
import warnings

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from _context import note  # noqa: E402
from bench_adaptive import crowd  # noqa: E402
from bench_adaptive_coverage import FORMS, K, LEVELS, TRUTH, setup  # noqa: E402

from satcal.analysis.adaptive import _answer, _fit_all, plan_wave  # noqa: E402
from satcal.analysis.standardise import reference_scores  # noqa: E402
from satcal.answers import StudyData  # noqa: E402
from satcal.measures import resolve_formulations  # noqa: E402


def study_of(judgments, n, answered):
    """The first ``n`` answered examples as a StudyData."""
    return StudyData(answered.iloc[:n].reset_index(drop=True), k=K, n_levels=len(LEVELS), judgments=judgments,
                     name="simulated")


def timed(fn):
    c = time.process_time()
    out = fn()
    return out, time.process_time() - c


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="300,600,900", help="answers so far, comma-separated")
    ap.add_argument("--wave", type=int, default=100, help="examples a wave")
    ap.add_argument("--seed", type=int, default=0, help="seed of the order and the answers")
    args = ap.parse_args()
    warnings.simplefilter("ignore", RuntimeWarning)
    print(f"start {note()}", flush=True)
    judgments, fixed, pool = setup(100, 5000)
    n_levels = len(LEVELS)
    rng = np.random.default_rng([args.seed, 24, 2])
    order = fixed.iloc[rng.permutation(len(fixed))].reset_index(drop=True)
    answered = _answer(order, crowd(TRUTH, 1000 + args.seed), K, {"n_levels": n_levels}, rng, 1)
    reference = reference_scores(judgments, FORMS, K, n_levels, seed=0)
    forms = resolve_formulations(FORMS)
    kw = dict(seed=1, target="b1_std", reference=reference)
    print(f"fixed design {len(fixed)} examples, pool {len(pool)}, wave {args.wave}; {len(FORMS)} formulations")
    for n in map(int, args.sizes.split(",")):
        before, study = study_of(judgments, n - args.wave, answered), study_of(judgments, n, answered)
        cache: dict = {}
        plan_wave(pool, before, FORMS, args.wave, cache=cache, **kw)   # the previous wave's fits, untimed
        warm, t_warm = timed(lambda: plan_wave(pool, study, FORMS, args.wave, cache=cache, **kw))
        _, t_cold = timed(lambda: plan_wave(pool, study, FORMS, args.wave, **kw))
        shared, t_shared = timed(lambda: plan_wave(pool, study, FORMS, args.wave, model="shared", **kw))
        (_, _, fits), t_fits = timed(lambda: _fit_all(study, forms, model="shared"))
        common = len(set(warm["example_id"]) & set(shared["example_id"]))
        print(f"n = {n}: independent warm {t_warm:.2f} s, cold {t_cold:.2f} s; shared {t_shared:.2f} s "
              f"({t_shared / t_warm:.1f}x warm, {t_shared / t_cold:.1f}x cold; its fits alone {t_fits:.2f} s); "
              f"tau " + ", ".join(f"{f} {fit.theta[7]:.2f}" for f, fit in zip(FORMS, fits))
              + f"; examples in both waves {common}/{args.wave}; {note()}", flush=True)


if __name__ == "__main__":
    main()
