"""Issue 24, item 4: do b1_std-b3_std's intervals cover as well after adaptive sampling as after a
fixed design of the same number of answers? A coverage check sized to tell 0.80 from 0.95.

A cheaper design than ``bench_adaptive.py``'s, so that 40+ studies an arm fit in an hour at a
third of a core: the ECIR 2015 judgments (k = 5, levels 0-2), five formulations (the near-tied
lin-const / lin-log5 / lin-log3 / lin-log2 at the floor and the far exp2-zipf), truth lin-const,
bench_adaptive's crowd (worker effects u_w ~ N(0, 0.5^2), 5% spammers, lapses, position bias; each
wave answered by new workers). The fixed arm asks a coverage design (``generate``, method optimal,
``min_per_cell`` M, default 100: N = 1,000 answers) in a seeded random order, in ``--waves``
waves (default 10); the adaptive arm asks as many answers, in as many waves, chosen by ``plan_wave`` (first wave space-filling, then the
default criterion on b1_std, ``min_depth`` 10) from a pool of ``--pool`` candidates (default
5,000); between waves only the criterion's own fits run. One calibration at the end (the
product's defaults: shared-effect joint model, standardised intervals, bootstrap over workers and
examples, B = ``--boot``, default 100). Both arms of study r share the crowd's seed 1000 + r.
``--arm replay --replay A.pkl`` asks each saved adaptive study's examples again, wave by wave,
answered afresh by new workers: the adaptive design's examples with answers that did not choose
them, which separates what the design's composition does from what choosing on the answers does.

Judged against the crowd's own standardised indicators (b1_std-b3_std over the reference
population, ``standardised_truth``'s construction): the mean error of each estimate, and the
coverage and width of 95% intervals (floor_interval, the product's; percentile, basic, normal)
for the formulations within the margin 0.005 of the least b1_std ("near"), the others ("away"),
and the contrasts with the leader that ``settle`` reads. The Monte-Carlo SE of a coverage share
is taken over studies (the intervals of one study move together: near the floor a study's three
are nearly all in or all out), sqrt(p (1 - p) / s) in the worst case: 0.034 at p = 0.95 and 0.063
at p = 0.80 for s = 40 studies, so 0.80 and 0.95 are 2.4 to 4.4 SE apart. b2_std and b3_std are
compared between the arms (mean estimate, bootstrap SD against the SD over studies), not with a
truth.

    OPENBLAS_NUM_THREADS=1 python benchmarks/bench_adaptive_coverage.py --arm fixed --studies 48 \
        --seed-base 700 --save C700f            # and --arm adaptive --save C700a
    python benchmarks/bench_adaptive_coverage.py --summarise C700f.pkl C700a.pkl
"""
import argparse
import os
import pickle
import sys
import time
import warnings

import numpy as np
import pandas as pd
from scipy.special import expit
from scipy.stats import norm

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _context import note  # noqa: E402
from bench_adaptive import _intervals as intervals, crowd  # noqa: E402  (the same simulated crowd and intervals)

from satcal.analysis.adaptive import (MARGIN, _answer, candidate_pool, plan_wave,  # noqa: E402
                                      true_satisfaction)
from satcal.analysis.bootstrap import floor_interval  # noqa: E402
from satcal.answers import StudyData  # noqa: E402
from satcal.datasets import recover_judgments  # noqa: E402
from satcal.generate import Design, generate  # noqa: E402

FORMS = ["lin-const", "lin-log5", "lin-log3", "lin-log2", "exp2-zipf"]
TRUTH = "lin-const"
K, LEVELS = 5, (0, 1, 2)
IND = ("b1_std", "b2_std", "b3_std")


def std_truth(judgments, model, forms):
    """b1_std (F,) of the crowd's own satisfaction over the reference population (seed 0):
    ``standardised_truth``'s construction. (b2_std and b3_std are of the preference curve over
    pairs of reference lists; the crowd's own is not computed here, so the arms' b2/b3 are
    compared with each other, not with a truth.)"""
    from satcal.analysis.core import bias_indicators, design
    from satcal.analysis.standardise import REFERENCE_SIZE, _fit_grouped, _groups, reference_scores
    from satcal.analysis.adaptive import GRID
    from satcal.measures import formulation as parse
    ref = reference_scores(judgments, list(forms) + [parse(model.formulation)], K, len(LEVELS), REFERENCE_SIZE, seed=0)
    S = true_satisfaction(ref[:, -1], model)
    phi = ref[:, :-1]
    Y = np.broadcast_to(S[None, :], (len(forms), len(S)))
    curves = expit(_fit_grouped(_groups(phi.T), Y) @ design(GRID).T)
    return np.asarray(bias_indicators(curves, curves)["b1"], float)


def setup(min_per_cell, pool_size):
    judgments = recover_judgments()
    fixed = generate(judgments, Design(k=K, levels=LEVELS, formulations=FORMS, min_per_cell=min_per_cell,
                                       seed=11)).examples
    pool = candidate_pool(judgments, K, LEVELS, FORMS, pool_size, seed=11)
    return judgments, fixed, pool


def one_study(judgments, fixed, pool, arm, r, waves, boot, replay=None):
    """One study of ``len(fixed)`` answers; returns the last calibration's estimates and
    replicates of b1_std-b3_std and the answered examples. ``arm="replay"`` asks the examples
    of ``replay`` (an adaptive study's answered examples) wave by wave again, answered afresh
    by new workers: the adaptive design's examples with answers independent of the choice."""
    from satcal.analysis.calibration import calibrate
    from satcal.analysis.standardise import reference_scores
    model = crowd(TRUTH, 1000 + r)
    seed = 100 * r + {"fixed": 0, "adaptive": 1, "replay": 2}[arm]
    rng = np.random.default_rng([seed, 24, 2])
    n_levels = len(LEVELS)
    reference = reference_scores(judgments, FORMS, K, n_levels, seed=0)
    n = len(fixed)
    order = fixed.iloc[rng.permutation(n)].reset_index(drop=True)
    sizes = np.diff(np.linspace(0, n, waves + 1).round().astype(int))
    asked, study, cache = [], None, {}
    for w, size in enumerate(sizes, start=1):
        if arm == "replay":
            wave = replay.loc[replay["wave"] == w].drop(columns=["answer", "worker_id", "wave"])
        elif arm == "adaptive":
            wave = plan_wave(pool, study, FORMS, int(size), seed=seed + w, cache=cache, target="b1_std",
                             reference=reference).drop(columns="priority")
        else:
            done = sum(len(a) for a in asked)
            wave = order.iloc[done:done + size]
        asked.append(_answer(wave, model, K, {"n_levels": n_levels}, rng, w).assign(wave=w))
        examples = pd.concat(asked, ignore_index=True)
        study = StudyData(examples.drop(columns="wave"), k=K, n_levels=n_levels, judgments=judgments,
                          name="simulated")
    result = calibrate(study, FORMS, sat_model="both", bootstrap=boot, seed=seed + waves, model_check_folds=0,
                       reference=reference, standardised_intervals=True)
    bias = result.bias.set_index("formulation").reindex(FORMS)
    est = np.stack([bias[c].to_numpy(float) for c in IND])
    reps = np.moveaxis(result.bootstrap.joint["std_indicators"], 2, 0)   # (3, B, F)
    order_f = [list(result.bias["formulation"]).index(f) for f in FORMS]
    reps = reps[:, :, order_f]
    lohi = np.stack([np.stack([bias[f"{c}_lo"].to_numpy(float), bias[f"{c}_hi"].to_numpy(float)]) for c in IND])
    return {"est": est, "reps": reps, "lohi": lohi, "examples": examples}


def summarise(paths):
    arms = {}
    meta = None
    for p in paths:
        with open(p, "rb") as fh:
            d = pickle.load(fh)
        have = {x["r"] for x in arms.setdefault(d["arm"], [])}
        arms[d["arm"]].extend(x for x in d["studies"] if x["r"] not in have)   # a seed counted once
        meta = meta or d
    truth = np.atleast_2d(meta["truth"])[0]   # b1_std (F,)
    near = truth <= truth.min() + MARGIN
    print(f"N = {meta['n']} answers a study; truth {TRUTH}; B = {meta['boot']}; waves {meta['waves']}; studies: "
          + ", ".join(f"{a} {len(s)} (seeds {min(x['r'] for x in s)}-{max(x['r'] for x in s)})" for a, s in arms.items()))
    print("true b1_std: " + ", ".join(f"{f} {v:.4f}" for f, v in zip(FORMS, truth)))
    means = {}
    for arm, studies in arms.items():
        s = len(studies)
        est = np.stack([x["est"] for x in studies])          # (s, 3, F)
        means[arm] = (est.mean(axis=0), est.std(axis=0, ddof=1) / np.sqrt(s))
        err = est[:, 0] - truth[None]
        print(f"== {arm}: {s} studies")
        print("   mean error of b1_std (its SE over studies): " + ", ".join(
            f"{f} {err[:, j].mean():+.4f} ({err[:, j].std(ddof=1) / np.sqrt(s):.4f})" for j, f in enumerate(FORMS)))
        for i, name in enumerate(IND):
            print(f"   mean {name} (SE): " + ", ".join(f"{f} {est[:, i, j].mean():.4f} ({means[arm][1][i, j]:.4f})"
                                                     for j, f in enumerate(FORMS)))
        for kind in ("floor", "percentile", "basic", "normal"):
            hits = {"near": [], "away": [], "contrast": []}
            per_study = {"near": [], "away": [], "contrast": []}
            widths = []
            for x in studies:
                e, rp = x["est"][0], x["reps"][0]
                lo, hi = intervals(e, rp, kind)
                hit = (lo <= truth) & (truth <= hi)
                widths.append(np.median(hi - lo))
                L = int(np.nanargmin(e))
                dlo, dhi = intervals(e - e[L], rp - rp[:, [L]], kind, -np.inf)
                dh = ((dlo <= truth - truth[L]) & (truth - truth[L] <= dhi))[np.arange(len(FORMS)) != L]
                for key, v in (("near", hit[near]), ("away", hit[~near]), ("contrast", dh)):
                    hits[key].extend(v)
                    per_study[key].append(np.mean(v))
            cells = []
            for key in ("near", "away", "contrast"):
                v = np.array(per_study[key], float)   # a study's intervals are correlated: SE over studies
                cells.append(f"{key} {np.mean(hits[key]):.2f} (n {len(hits[key])}, MC SE {v.std(ddof=1) / np.sqrt(s):.3f})")
            print(f"   b1_std {kind:<10}: " + ", ".join(cells) + f"; median width {np.median(widths):.4f}")
        sd = np.median([np.nanstd(x["reps"], axis=1, ddof=1) for x in studies], axis=0)   # (3, F)
        print("   median bootstrap SD / SD of the estimates over studies: " + "; ".join(
            f"{name} " + " ".join(f"{sd[i, j]:.4f}/{est[:, i, j].std(ddof=1):.4f}" for j in range(len(FORMS)))
            for i, name in enumerate(IND)))
    if "fixed" in means:
        for arm in means:
            if arm == "fixed":
                continue
            d = means[arm][0] - means["fixed"][0]
            se = np.hypot(means[arm][1], means["fixed"][1])
            print(f"-- {arm} minus fixed, mean estimate (SE): " + "; ".join(
                f"{name} " + " ".join(f"{d[i, j]:+.4f} ({se[i, j]:.4f})" for j in range(len(FORMS)))
                for i, name in enumerate(IND)))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--arm", choices=("fixed", "adaptive", "replay"), default="fixed")
    ap.add_argument("--replay", default=None, metavar="PKL",
                    help="with --arm replay: the adaptive arm's pickle whose studies' examples to ask again")
    ap.add_argument("--studies", type=int, default=40)
    ap.add_argument("--seed-base", type=int, default=700, help="first study's seed (fix before running)")
    ap.add_argument("--boot", type=int, default=100)
    ap.add_argument("--waves", type=int, default=10)
    ap.add_argument("--min-per-cell", type=int, default=100, help="the fixed coverage design's depth (sets N)")
    ap.add_argument("--pool", type=int, default=5000, help="candidate examples of the adaptive arm")
    ap.add_argument("--save", default=None, help="pickle the studies to SAVE.pkl as they finish")
    ap.add_argument("--summarise", nargs="+", default=None, metavar="PKL")
    args = ap.parse_args()
    warnings.simplefilter("ignore", RuntimeWarning)
    if args.summarise:
        summarise(args.summarise)
        return
    t0 = time.perf_counter()
    c0 = time.process_time()
    print(f"start {note()}", flush=True)
    judgments, fixed, pool = setup(args.min_per_cell, args.pool)
    truth = std_truth(judgments, crowd(TRUTH, 0), FORMS)
    print(f"fixed design {len(fixed)} examples, pool {len(pool)}; setup {time.perf_counter() - t0:.0f} s", flush=True)
    out = {"arm": args.arm, "truth": truth, "n": len(fixed), "boot": args.boot, "waves": args.waves,
           "min_per_cell": args.min_per_cell, "pool": args.pool, "studies": []}
    for r in range(args.seed_base, args.seed_base + args.studies):
        t, c = time.perf_counter(), time.process_time()
        source = None
        if args.arm == "replay":   # wait for the adaptive run to finish study r
            while source is None:
                try:
                    with open(args.replay, "rb") as fh:
                        source = {x["r"]: x for x in pickle.load(fh)["studies"]}.get(r)
                except Exception:   # a pickle being written
                    pass
                if source is None:
                    time.sleep(20)
            source = source["examples"]
        x = one_study(judgments, fixed, pool, args.arm, r, args.waves, args.boot, source)
        x["r"] = r
        out["studies"].append(x)
        if args.save:
            with open(f"{args.save}.pkl", "wb") as fh:
                pickle.dump(out, fh)
        print(f"study {r} {args.arm}: {time.perf_counter() - t:.0f} s wall, {time.process_time() - c:.0f} s CPU; "
              f"b1_std " + " ".join(f"{v:.3f}" for v in x["est"][0]) + f"; load {os.getloadavg()[0]:.1f}",
              flush=True)
    print(f"total {time.perf_counter() - t0:.0f} s wall, {time.process_time() - c0:.0f} s CPU; "
          f"at the end {note()}")


if __name__ == "__main__":
    main()
