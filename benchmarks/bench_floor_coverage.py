"""Issue 20 follow-up: why does b1_std's 95% interval (``floor_interval``) cover less than 0.95
near its floor on ``bench_adaptive_coverage.py``'s design, and does a fix hold on other designs?

Simulated studies from a known truth with worker effects, calibrated with the product's
defaults (shared-effect joint model, standardised intervals, bootstrap over workers), keeping
what an interval method may read: b1_std's estimate and replicates, and the standardised
satisfaction curve s*_f's coefficients, estimate and replicates, with the range its b1 averages
over. Two designs, unlike each other and unlike the embedded ECIR 2015 pairs:

- ``ecir``: ``bench_adaptive_coverage.py``'s fixed arm (ECIR 2015 judgments, k = 5, levels 0-2,
  five formulations, truth lin-const, worker effects u_w ~ N(0, 0.5^2), 20 workers a wave, 5%
  spammers, lapses, position bias; a coverage design of N = 1,000 in 10 waves of new workers).
- ``synth``: synthetic judgments (30 queries x 100 documents, levels 0-3, k = 10), five
  formulations, truth lin-log2, intercept -2 and slope 4.5, heterogeneity 0.8, 30 workers a wave,
  10% spammers; a coverage design (min_per_cell 60) in 5 waves.

The truth is each formulation's b1_std of the crowd's own satisfaction over the reference
population (``standardised_truth``'s construction, as bench_adaptive_coverage's ``std_truth``).
``--summarise`` compares interval methods on the saved studies (coverage near the floor, i.e.
within 0.005 of the least true b1_std, and away from it, with Monte-Carlo SEs over studies, and
median widths); ``--B`` replicates per study, the first 100 of them giving the B = 100 figures.

    OPENBLAS_NUM_THREADS=1 python benchmarks/bench_floor_coverage.py --design ecir --studies 40 \
        --seed-base 900 --boot 200 --save F900e
    python benchmarks/bench_floor_coverage.py --summarise F900e.pkl [--B 100] [--against model]

``--spammers S`` overrides the crowd's share of spammers (0: none), ``--min-per-cell M`` the
design's depth (1000: N = 10,000, to see where the estimator converges). Methods compared:
the product's ``floor_interval``, percentile, basic, and a candidate not adopted, the L1 bound:
|b1(s) - b1(s_hat)| <= mean_x |s(x) - s_hat(x)| over the indicator's range (the triangle
inequality), so est -+ D95, D95 the replicates' 95% quantile of mean_x |s*(x) - s_hat(x)|, holds
b1 of the estimator's limit curve whatever the regime (alone, as floor_interval's lower bound,
or united with it).
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

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _context import note  # noqa: E402
from bench_adaptive import synthetic_judgments  # noqa: E402

from satcal.analysis.adaptive import MARGIN, _answer, true_satisfaction  # noqa: E402
from satcal.analysis.bootstrap import floor_interval  # noqa: E402
from satcal.analysis.core import GRID, design  # noqa: E402
from satcal.answers import StudyData  # noqa: E402
from satcal.datasets import recover_judgments  # noqa: E402
from satcal.generate import Design, generate  # noqa: E402
from satcal.simulate import UserModel  # noqa: E402

DESIGNS = {
    "ecir": dict(forms=["lin-const", "lin-log5", "lin-log3", "lin-log2", "exp2-zipf"], truth="lin-const",
                 k=5, levels=(0, 1, 2), min_per_cell=100, waves=10,
                 crowd=dict(intercept=-2.5, slope=5.0, heterogeneity=0.5, workers=20, spammers=0.05)),
    "synth": dict(forms=["lin-log2", "lin-log3", "lin-const", "exp2-log2", "lin-zipf"], truth="lin-log2",
                  k=10, levels=(0, 1, 2, 3), min_per_cell=60, waves=5,
                  crowd=dict(intercept=-2.0, slope=4.5, heterogeneity=0.8, workers=30, spammers=0.10)),
}


def crowd(spec, seed):
    return UserModel(formulation=spec["truth"], position_bias=0.05, undecided_preference=0.2,
                     preference_accuracy=0.8, lapse=0.05, seed=seed, **spec["crowd"])


def judgments_of(name):
    return recover_judgments() if name == "ecir" else synthetic_judgments()


def std_truth(judgments, spec):
    """b1_std (F,) of the crowd's own satisfaction over the reference population (seed 0)."""
    from satcal.analysis.core import bias_indicators
    from satcal.analysis.standardise import REFERENCE_SIZE, _fit_grouped, _groups, reference_scores
    from satcal.measures import formulation as parse
    model = crowd(spec, 0)
    forms = spec["forms"]
    ref = reference_scores(judgments, list(forms) + [parse(model.formulation)], spec["k"], len(spec["levels"]),
                           REFERENCE_SIZE, seed=0)
    S = true_satisfaction(ref[:, -1], model)
    Y = np.broadcast_to(S[None, :], (len(forms), len(S)))
    curves = expit(_fit_grouped(_groups(ref[:, :-1].T), Y) @ design(GRID).T)
    return np.asarray(bias_indicators(curves, curves)["b1"], float)


def one_study(judgments, spec, fixed, r, boot):
    """One fixed-design study: b1_std's estimate and replicates, s*_f's coefficients (estimate
    and replicates) and the phi range b1_std averages over."""
    import satcal.analysis.calibration as cal
    from satcal.analysis.standardise import reference_scores
    kept = {}
    rows, bands = cal._standardised_rows, cal._standardised_bands

    def keep_rows(fcols, beta_sat, beta_pref, n_lists, ranges, ties=None):
        kept["beta"], kept["range"] = np.array(beta_sat), ranges.get("sat_joint")
        return rows(fcols, beta_sat, beta_pref, n_lists, ranges, ties)

    def keep_bands(formulations, beta_sat, beta_pref):
        kept["beta_reps"] = np.array(beta_sat)
        return bands(formulations, beta_sat, beta_pref)

    cal._standardised_rows, cal._standardised_bands = keep_rows, keep_bands
    try:
        forms, k, levels = spec["forms"], spec["k"], spec["levels"]
        model = crowd(spec, 1000 + r)
        rng = np.random.default_rng([r, 20, 3])
        reference = reference_scores(judgments, forms, k, len(levels), seed=0)
        n = len(fixed)
        order = fixed.iloc[rng.permutation(n)].reset_index(drop=True)
        cuts = np.linspace(0, n, spec["waves"] + 1).round().astype(int)
        asked = [_answer(order.iloc[a:b], model, k, {"n_levels": len(levels)}, rng, w)
                 for w, (a, b) in enumerate(zip(cuts[:-1], cuts[1:]), start=1)]
        study = StudyData(pd.concat(asked, ignore_index=True), k=k, n_levels=len(levels), judgments=judgments,
                          name="simulated")
        result = cal.calibrate(study, forms, sat_model="both", bootstrap=boot, seed=100 * r + 7,
                               model_check_folds=0, reference=reference, standardised_intervals=True)
    finally:
        cal._standardised_rows, cal._standardised_bands = rows, bands
    names = list(result.bias["formulation"])
    idx = [names.index(f) for f in forms]
    est = result.bias.set_index("formulation").reindex(forms)["b1_std"].to_numpy(float)
    reps = result.bootstrap.joint["std_indicators"][:, idx, 0]
    rng_ = kept["range"]
    return {"r": r, "est": est, "reps": reps, "beta": kept["beta"][idx], "beta_reps": kept["beta_reps"][:, idx],
            "range": None if rng_ is None else np.asarray(rng_, float)[idx],
            "lo": result.bias.set_index("formulation").reindex(forms)["b1_std_lo"].to_numpy(float),
            "hi": result.bias.set_index("formulation").reindex(forms)["b1_std_hi"].to_numpy(float)}


def mask_of(rng_, F):
    """Grid points b1_std averages over, (F, G)."""
    from satcal.analysis.indicators import supported_mask
    return np.ones((F, GRID.size), bool) if rng_ is None else supported_mask(rng_)


def methods(x, B=None):
    """Interval methods from one study's saved values, (lo, hi) each (F,)."""
    est, reps = x["est"], x["reps"][:B]
    out = {"floor (product)": floor_interval(reps, est)}
    q_lo, q_hi = np.percentile(reps, [2.5, 97.5], axis=0)
    out["percentile"] = (q_lo, q_hi)
    out["basic"] = (np.maximum(0, 2 * est - q_hi), np.maximum(0, 2 * est - q_lo))
    # the L1 band: b1(s) lies within ||s_hat - s||_1 (over the indicator's range) of b1(s_hat)
    m = mask_of(x["range"], len(est))
    s_hat = expit(x["beta"] @ design(GRID).T)                      # (F, G)
    s_rep = expit(x["beta_reps"][:B] @ design(GRID).T)             # (B, F, G)
    dist = (np.abs(s_rep - s_hat[None]) * m[None]).sum(-1) / m.sum(-1)[None]   # (B, F)
    c95 = np.percentile(dist, 95, axis=0)
    out["L1 band"] = (np.maximum(0, est - c95), est + c95)
    f_lo, f_hi = out["floor (product)"]
    out["floor + L1 lower"] = (np.minimum(f_lo, np.maximum(0, est - c95)), f_hi)
    out["floor U L1 band"] = (np.minimum(f_lo, np.maximum(0, est - c95)), np.maximum(f_hi, est + c95))
    return out


def model_truth(name, spec):
    """b1_std with the estimator's own limit of the satisfaction model in place of the crowd's
    (``standardised_truth(..., satisfaction="model")``: the truth formulation's joint model fitted
    to the expected answers to the fixed design's examples)."""
    from satcal.analysis.adaptive import standardised_truth
    judgments = judgments_of(name)
    fixed = generate(judgments, Design(k=spec["k"], levels=spec["levels"], formulations=spec["forms"],
                                       min_per_cell=spec["min_per_cell"], seed=11)).examples
    return standardised_truth(judgments, crowd(spec, 0), spec["forms"], k=spec["k"], n_levels=len(spec["levels"]),
                              satisfaction="model", pool=fixed).to_numpy(float)


def summarise(paths, B=None, against="crowd"):
    studies, meta = [], None
    for p in paths:
        with open(p, "rb") as fh:
            d = pickle.load(fh)
        have = {x["r"] for x in studies}
        studies += [x for x in d["studies"] if x["r"] not in have]
        meta = meta or d
    truth = meta["truth"] if against == "crowd" else model_truth(meta["design"], DESIGNS[meta["design"]])
    print(f"judged against the {against}'s b1_std")
    near = truth <= truth.min() + MARGIN
    s = len(studies)
    Bs = studies[0]["reps"].shape[0] if B is None else B
    print(f"design {meta['design']}: {s} studies (seeds {min(x['r'] for x in studies)}-"
          f"{max(x['r'] for x in studies)}), N {meta['n']}, B {Bs}; true b1_std "
          + ", ".join(f"{f} {v:.4f}" for f, v in zip(meta['forms'], truth)))
    est = np.stack([x["est"] for x in studies])
    reps = np.stack([x["reps"][:B] for x in studies])
    print("  mean error (SE): " + ", ".join(f"{(est - truth)[:, j].mean():+.4f} ({(est - truth)[:, j].std(ddof=1) / np.sqrt(s):.4f})"
                                        for j in range(len(truth))))
    print("  bootstrap bias mean(rep) - est: " + ", ".join(f"{v:+.4f}" for v in (reps.mean(1) - est).mean(0)))
    print("  SD of est over studies / mean bootstrap SD: " + ", ".join(
        f"{a:.4f}/{b:.4f}" for a, b in zip(est.std(0, ddof=1), reps.std(1, ddof=1).mean(0))))
    res = {}
    for x in studies:
        for name, (lo, hi) in methods(x, B).items():
            hit = (lo <= truth) & (truth <= hi)
            below = truth < lo
            r = res.setdefault(name, {"near": [], "away": [], "below": [], "wn": [], "wa": []})
            r["near"].append(hit[near].mean())
            r["away"].append(hit[~near].mean() if (~near).any() else np.nan)
            r["below"].append(below.mean())
            r["wn"].append(np.median((hi - lo)[near]))
            r["wa"].append(np.median((hi - lo)[~near]) if (~near).any() else np.nan)
    for name, r in res.items():
        cells = []
        for key in ("near", "away"):
            v = np.array(r[key], float)
            cells.append(f"{key} {np.nanmean(v):.3f} ({np.nanstd(v, ddof=1) / np.sqrt(s):.3f})")
        print(f"  {name:<18}: " + ", ".join(cells) + f"; truth below lo {np.mean(r['below']):.3f}; "
              f"median width near {np.median(r['wn']):.4f}, away {np.nanmedian(r['wa']):.4f}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--design", choices=sorted(DESIGNS), default="ecir")
    ap.add_argument("--studies", type=int, default=40)
    ap.add_argument("--seed-base", type=int, default=900, help="first study's seed (fix before running)")
    ap.add_argument("--boot", type=int, default=200)
    ap.add_argument("--min-per-cell", type=int, default=None, help="the coverage design's depth (sets N)")
    ap.add_argument("--spammers", type=float, default=None, help="override the crowd's share of spammers")
    ap.add_argument("--save", default=None)
    ap.add_argument("--summarise", nargs="+", default=None, metavar="PKL")
    ap.add_argument("--B", type=int, default=None, help="with --summarise: use the first B replicates")
    ap.add_argument("--against", choices=("crowd", "model"), default="crowd",
                    help="with --summarise: the truth, the crowd's b1_std or the satisfaction model's limit")
    args = ap.parse_args()
    warnings.simplefilter("ignore", RuntimeWarning)
    if args.summarise:
        summarise(args.summarise, args.B, args.against)
        return
    spec = dict(DESIGNS[args.design])
    if args.min_per_cell:
        spec["min_per_cell"] = args.min_per_cell
    if args.spammers is not None:
        spec["crowd"] = {**spec["crowd"], "spammers": args.spammers}
    t0, c0 = time.perf_counter(), time.process_time()
    print(f"start {note()}", flush=True)
    judgments = judgments_of(args.design)
    fixed = generate(judgments, Design(k=spec["k"], levels=spec["levels"], formulations=spec["forms"],
                                       min_per_cell=spec["min_per_cell"], seed=11)).examples
    truth = std_truth(judgments, spec)
    print(f"design {args.design}: N {len(fixed)}; truth " + " ".join(f"{v:.4f}" for v in truth), flush=True)
    out = {"design": args.design, "forms": spec["forms"], "truth": truth, "n": len(fixed), "boot": args.boot,
           "studies": []}
    for r in range(args.seed_base, args.seed_base + args.studies):
        t, c = time.perf_counter(), time.process_time()
        out["studies"].append(one_study(judgments, spec, fixed, r, args.boot))
        if args.save:
            with open(f"{args.save}.pkl", "wb") as fh:
                pickle.dump(out, fh)
        print(f"study {r}: {time.perf_counter() - t:.0f} s wall, {time.process_time() - c:.0f} s CPU; b1_std "
              + " ".join(f"{v:.3f}" for v in out["studies"][-1]["est"]) + f"; load {os.getloadavg()[0]:.1f}",
              flush=True)
    print(f"total {time.perf_counter() - t0:.0f} s wall, {time.process_time() - c0:.0f} s CPU; at the end {note()}")


if __name__ == "__main__":
    main()
