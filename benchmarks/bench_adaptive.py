"""Issue 24: does an adaptive study reach the fixed coverage design's precision and decision with
fewer answers, and are its settled decisions and intervals right?

Two judgments shapes: the embedded ECIR 2015 judgments (k = 5, levels 0-2) and a synthetic one
unlike it (k = 10, levels 0-3, 30 queries of 100 documents). Per shape: eight formulations (the
close lin-const / lin-log5 / lin-log3 / lin-log2 contrasts of the issue and four far ones), a
fixed coverage design (``satcal generate``, method optimal, ``min_per_cell`` M), and a pool of
20,000 candidate examples (``candidate_pool``).

A simulated crowd with worker effects (simulate.py's user model: satisfaction expit(-2.5 + u_w
+ 5 phi) under the truth formulation, u_w ~ N(0, 0.5^2), undecided users prefer the higher list with
probability 0.2 x 0.8, lapses 0.05, position bias 0.05, 5% spammers; each wave answered by new
workers, one answer per example). Two truths: b1_std, the standardised b1 of the crowd's own
satisfaction over the reference population every calibration of the run shares
(``standardised_truth``; the default, design-free), and b1_joint in the limit of infinitely many
answers to the pool's examples (``population_truth``); the true least-biased formulation is each
one's argmin.

Each replicate runs both arms wave by wave (10 waves of N/10 answers, N the fixed design's size),
calibrating with the joint model and a bootstrap over workers (B replicates) after each wave:

- fixed: the coverage design's examples in a random order;
- adaptive: ``plan_wave`` (first wave space-filling, then the criterion on b1_std, or on
  ``--indicator``), ``min_depth`` 10.

Printed per shape and per estimand: the answers the adaptive arm needs to reach the fixed
design's median interval width (median over formulations, then over replicates; for b1_std the
intervals of the replicates that refit the Akaike weights), and its share of right picks (exact,
and within the margin) there and at N; the decisions of ``settle`` (95%, O'Brien-Fleming spending
over 10 looks, indifference margin ``--margin``, default 0.005): how many studies settle, when,
and how often rightly; the coverage of the 95% intervals at the last look, in both arms. Then
settled decisions with four separated formulations. Last, the cost of ``example_priorities`` at
ECIR size (36 formulations, the 4,115 ECIR answers, a pool of 20,000), cold and warm.

The adaptive arm's criterion is ``--criterion`` (default ``information``, the exact
expected-information criterion; ``influence`` the first-order one). ``--seed-base S`` starts the
studies' seeds at S, so a criterion chosen on one set of seeds is reported on fresh ones;
``--shape-arms`` runs one arm only (saved with ``--save``). ``--summarise P.pkl [Q.pkl ...]``
prints, from saved studies (arms of several runs on the same seeds), the answers to the fixed
median width per study and on the median-over-studies curve (log-log interpolation between looks),
by the width of the product's interval (``floor_interval``, the one the calibration's bias table
and each look's figures use) and by bootstrap SE; picks and settled decisions; and the coverage of
95% intervals by interval method (floor_interval, BC, percentile, basic, normal) for the
formulations within the margin of the
least, the others, the generating one, and the contrasts with the leader that ``settle`` reads,
with each formulation's mean error at N, and which formulations' intervals stay wide (per
formulation, the median floor_interval width and bootstrap SD at looks 4, 7 and N). ``--independent``
calibrates the simulated studies with the independent joint model instead of the shared-effect
one (the analysis's default; its replicates went wild on these studies until weakly identified
tau got full refits per replicate, issue 20: the third round ran ``--independent``, the fourth
the default; docs/benchmarks.md).

    OPENBLAS_NUM_THREADS=1 python benchmarks/bench_adaptive.py [--quick] [--studies N] [--boot B] [--spread S]
        [--margin M] [--indicator b1_std|b1_joint] [--only ecir|synthetic|shapes|settle] [--arm A] [--save P]
        [--criterion information|information-sum|influence] [--seed-base S] [--shape-arms both|fixed|adaptive] [--independent]
    python benchmarks/bench_adaptive.py --summarise P.ecir.pkl [Q.ecir.pkl ...]
"""
import argparse
import time
import warnings

import numpy as np
import pandas as pd

from satcal.analysis.adaptive import (CELL_CAP as DEFAULT_CELL_CAP, MARGIN, candidate_pool, example_priorities, population_truth,
                                      simulate_adaptive_study, standardised_truth)
from satcal.datasets import load_ecir2015, recover_judgments
from satcal.generate import Design, generate
from satcal.judgments import Judgments
from satcal.simulate import UserModel

FORMS = ["lin-const", "lin-log5", "lin-log3", "lin-log2", "exp2-log2", "exp2-zipf", "bin1-const", "lin-zipf"]
WAVES = 10
SPREAD = 1.0
#: The indicator settle decides on and the criterion targets (``--indicator``); both are reported
#: on the same studies.
INDICATOR = "b1_std"
INDICATORS = ("b1_std", "b1_joint")
#: The stopping rule's indifference margin (``--margin``), also the zone of a "right" pick
#: (Bechhofer 1954): a formulation whose true indicator is within it of the least is as good a
#: pick for any practical purpose.
ZONE = MARGIN
#: The arms of the settled-decisions part (``--arm``).
ARMS = ("fixed", "adaptive")
#: Where to pickle each shape's studies as they finish (``--save``); None: nowhere.
SAVE = None
#: The adaptive arm's criterion (``--criterion``, :func:`~satcal.analysis.adaptive.example_priorities`).
CRITERION = "information"
#: Study r of a shape uses crowd seed 1000 + SEED_BASE + r (``--seed-base``): criteria are chosen on
#: one set of seeds and reported on fresh ones.
SEED_BASE = 0
#: The arms run by the shapes part (``--shape-arms``); a run with one arm only saves its studies
#: (``--save``) for ``--summarise``.
SHAPE_ARMS = ("fixed", "adaptive")
#: The adaptive waves' cell cap (``--cell-cap``; :func:`~satcal.analysis.adaptive.plan_wave`; 0: none).
CELL_CAP = DEFAULT_CELL_CAP
#: Calibrate with the shared-effect joint model (the analysis's default) or, with
#: ``--independent``, the independent one (the model the criterion fits; the one issue 24's second
#: round measured with).
SHARED = True


def synthetic_judgments(seed=7):
    rng = np.random.default_rng(seed)
    rows = [(f"t{q}", f"t{q}-d{d}", int(rng.choice(4, p=[0.5, 0.25, 0.15, 0.1])))
            for q in range(30) for d in range(100)]
    return Judgments(pd.DataFrame(rows, columns=["query", "doc", "level"]), source="synthetic k=10 levels 0-3")


def crowd(formulation, seed):
    return UserModel(formulation=formulation, intercept=-2.5, slope=5.0, heterogeneity=0.5, workers=20,
                     spammers=0.05, position_bias=0.05, undecided_preference=0.2, preference_accuracy=0.8,
                     lapse=0.05, seed=seed)


def truths_of(judgments, pool, truth_form, forms, k, levels):
    """The truth of each indicator: b1_joint in the pool's limit, b1_std on the reference
    population (seed 0, the one every calibration of the run gets)."""
    model = crowd(truth_form, 0)
    return {"b1_joint": population_truth(pool, model, forms, n_levels=max(levels) + 1),
            "b1_std": standardised_truth(judgments, model, forms, k=k, n_levels=max(levels) + 1)}


def model_truth(judgments, pool, truth_form, forms, k, levels):
    """b1_std with the estimator's own limit of the satisfaction model (the truth formulation's
    joint model fitted to the pool's expected answers) in place of the crowd's satisfaction."""
    return standardised_truth(judgments, crowd(truth_form, 0), forms, k=k, n_levels=max(levels) + 1,
                              satisfaction="model", pool=pool)


def view(table, ind, truth, truth_form):
    """The study's looks judged by ``ind`` (its suffixed columns under the plain names); the
    last look's coverage from the intervals the study judged by (for b1_std, those of the
    replicates that refit the Akaike weights)."""
    cols = ("leader", "width_median", "se_median", "right", "covered", "settled", "right_margin",
            "width_median_calib", "covered_calib")
    out = table.drop(columns=[c for c in cols if c in table.columns]).rename(
        columns={f"{c}_{ind}": c for c in cols})
    out["right_zone"] = [truth[f] <= truth.min() + ZONE for f in out["leader"]]
    out["right"] = [f == truth.idxmin() for f in out["leader"]]   # against the truth given here
    bias = table.attrs["bias"].set_index("formulation")
    tb = truth.reindex(bias.index).to_numpy(float)
    lo, hi = table.attrs["intervals"][ind]
    out["covered"] = np.nan
    out.loc[out.index[-1], "covered"] = float(np.mean((lo <= tb) & (tb <= hi)))
    out["covered_calib"] = np.nan
    out.loc[out.index[-1], "covered_calib"] = float(np.mean((bias[f"{ind}_lo"].to_numpy() <= tb)
                                                            & (tb <= bias[f"{ind}_hi"].to_numpy())))
    j = list(bias.index).index(truth_form)
    out.attrs["covered_truth_form"] = bool(lo[j] <= truth[truth_form] <= hi[j])
    return out


def run_shape(name, judgments, k, levels, truth_form, min_per_cell, studies, boot):
    t0 = time.perf_counter()
    fixed = generate(judgments, Design(k=k, levels=levels, formulations=FORMS, min_per_cell=min_per_cell,
                                       seed=11)).examples
    n_fixed = len(fixed)
    pool = candidate_pool(judgments, k, levels, FORMS, 20000, seed=11)
    truths = truths_of(judgments, pool, truth_form, FORMS, k, levels)
    fixed_truth = population_truth(fixed, crowd(truth_form, 0), FORMS, n_levels=max(levels) + 1)
    print(f"\n== {name}: k = {k}, levels {levels[0]}-{levels[-1]}, truth formulation {truth_form}; fixed design "
          f"{n_fixed} examples (min_per_cell {min_per_cell}); pool {len(pool)}; setup {time.perf_counter() - t0:.0f} s; "
          f"settle on {INDICATOR}")
    print("true b1_joint (pool limit): " + ", ".join(f"{f} {v:.4f}" for f, v in truths["b1_joint"].sort_values().items()))
    print("true b1_std (reference population): "
          + ", ".join(f"{f} {v:.4f}" for f, v in truths["b1_std"].sort_values().items()))
    print("b1_joint's limit on the fixed design's examples: "
          + ", ".join(f"{f} {v:.4f}" for f, v in fixed_truth.sort_values().items()))
    wave = n_fixed // WAVES
    runs = {arm: [] for arm in SHAPE_ARMS}
    for r in range(SEED_BASE, SEED_BASE + studies):
        for arm in runs:
            t = time.perf_counter()
            table = simulate_adaptive_study(judgments, crowd(truth_form, 1000 + r), FORMS, adaptive=arm == "adaptive",
                                            budget=n_fixed, wave_size=wave, seed=100 * r + (arm == "adaptive"),
                                            criterion=CRITERION, cell_cap=CELL_CAP or None,
                                            k=k, levels=levels, pool=pool, fixed=fixed, bootstrap=boot,
                                            max_looks=WAVES, stop=False, truth_b1=truths, spread=SPREAD,
                                            indicator=INDICATOR, margin=ZONE, shared_effect=SHARED)
            runs[arm].append(table)
            if SAVE:   # every finished study, so that a run cut short can still be summarised
                import pickle
                with open(f"{SAVE}.{name.split()[0].lower()}.pkl", "wb") as fh:
                    pickle.dump({"runs": runs, "truths": truths, "n_fixed": n_fixed, "truth_form": truth_form,
                                 "criterion": CRITERION, "seed_base": SEED_BASE, "shared_effect": SHARED, "cell_cap": CELL_CAP,
                                 "limit": None}, fh)
            if r == SEED_BASE and arm == "adaptive":
                own = population_truth(table.attrs["examples"], crowd(truth_form, 0), FORMS, n_levels=max(levels) + 1)
                print("  b1_joint's limit on study 1's adaptive examples (its own estimand): "
                      + ", ".join(f"{f} {v:.4f}" for f, v in own.sort_values().items()))
            print(f"  study {r + 1} {arm:<8} {time.perf_counter() - t:5.0f} s: " + "; ".join(
                f"{ind} widths " + " ".join(f"{w:.3f}" for w in table[f"width_median_{ind}"]) + ", leaders "
                + " ".join(table[f"leader_{ind}"].str.replace("-", "")) for ind in INDICATORS), flush=True)
    if len(runs) < 2:
        return
    judges = [(ind, truths[ind], "") for ind in INDICATORS]
    limit = model_truth(judgments, pool, truth_form, FORMS, k, levels)
    print("b1_std with the model's limit of satisfaction: "
          + ", ".join(f"{f} {v:.4f}" for f, v in limit.sort_values().items()))
    judges.append(("b1_std", limit, " (truth: the model's limit of satisfaction)"))
    for ind, truth, note in judges:
        print(f"-- judged by {ind}{note}")
        report({arm: [view(t, ind, truth, truth_form) for t in tables] for arm, tables in runs.items()},
               n_fixed, truth.idxmin(), truth_form, ind)


def first(table, mask):
    idx = np.flatnonzero(mask.to_numpy())
    return table.iloc[idx[0]] if idx.size else None


def stays(table, width, column="width_median"):
    """The first look from which the median width stays at or below ``width`` (bootstrap
    intervals are noisy from look to look: a look that dips below once does not count)."""
    above = (table[column] > width).to_numpy()
    last = np.flatnonzero(above)
    start = last[-1] + 1 if last.size else 0
    return table.iloc[start] if start < len(table) else None


def report(runs, n_fixed, best, truth_form, ind="b1_joint"):
    fixed_width = float(np.median([t["width_median"].iloc[-1] for t in runs["fixed"]]))
    fixed_right = np.mean([t["right"].iloc[-1] for t in runs["fixed"]])
    fixed_zone = np.mean([t["right_zone"].iloc[-1] for t in runs["fixed"]])
    reach = [stays(t, fixed_width) for t in runs["adaptive"]]
    n_reach = [row["n_answers"] if row is not None else np.nan for row in reach]
    right_reach = [bool(row["right"]) if row is not None else False for row in reach]
    zone_reach = [bool(row["right_zone"]) if row is not None else False for row in reach]
    med = np.nanmedian(n_reach) if np.isfinite(n_reach).any() else np.nan
    every = np.median(np.where(np.isfinite(n_reach), n_reach, np.inf))   # a study not reaching it: beyond N
    print(f"true least biased: {best}")
    print(f"fixed design: {n_fixed} answers, median {ind} width {fixed_width:.4f}, right pick "
          f"{fixed_right:.2f}, within {ZONE} of the best {fixed_zone:.2f} ({len(runs['fixed'])} studies)")
    print(f"adaptive: median over all {len(reach)} studies of the answers from which its width stays at or below "
          f"that (a study never there counts as beyond N): "
          + (f"{every:.0f} ({every / n_fixed:.0%} of N)" if np.isfinite(every) else "beyond N"))
    print(f"adaptive: reaches that width (and stays there) in {sum(np.isfinite(n_reach))} of {len(reach)} studies, median "
          f"{med:.0f} answers ({med / n_fixed:.0%} of the fixed design's; saving {1 - med / n_fixed:.0%}); right pick "
          f"there {np.mean(right_reach):.2f}, within {ZONE} {np.mean(zone_reach):.2f}; at {n_fixed} answers width "
          f"{np.median([t['width_median'].iloc[-1] for t in runs['adaptive']]):.4f}, right "
          f"{np.mean([t['right'].iloc[-1] for t in runs['adaptive']]):.2f}, within {ZONE} "
          f"{np.mean([t['right_zone'].iloc[-1] for t in runs['adaptive']]):.2f}")
    fixed_se = float(np.median([t["se_median"].iloc[-1] for t in runs["fixed"]]))
    reach = [stays(t, fixed_se, "se_median") for t in runs["adaptive"]]
    n_se = np.array([row["n_answers"] if row is not None else np.nan for row in reach], float)
    med = np.nanmedian(n_se) if np.isfinite(n_se).any() else np.nan
    print(f"by bootstrap SE: fixed median SE of {ind} {fixed_se:.4f} at {n_fixed}; adaptive reaches it (and "
          f"stays) in {int(np.isfinite(n_se).sum())} of {len(reach)} studies, median {med:.0f} answers "
          f"({med / n_fixed:.0%}); adaptive SE at {n_fixed}: "
          f"{np.median([t['se_median'].iloc[-1] for t in runs['adaptive']]):.4f}")
    for arm, tables in runs.items():
        settled = [first(t, t["settled"]) for t in tables]
        done = [row for row in settled if row is not None]
        right = sum(bool(row["right"]) for row in done)
        right_zone = sum(bool(row["right_zone"]) for row in done)
        when = np.median([row["n_answers"] for row in done]) if done else np.nan
        cover = np.mean([t["covered"].iloc[-1] for t in tables])
        cover_c = np.mean([t["covered_calib"].iloc[-1] for t in tables])
        cover_t = np.mean([t.attrs["covered_truth_form"] for t in tables])
        print(f"{arm:<8} settle (95%, margin {ZONE}): {len(done)} of {len(tables)} studies settled (median at "
              f"{when:.0f} answers), {right_zone} of {len(done)} right within the margin ({right} exactly); 95% "
              f"{ind} intervals at the last look cover the truth {cover:.3f} of the time (all formulations; "
              f"the calibration's own intervals {cover_c:.3f}), {cover_t:.2f} for the generating {truth_form}")


def settle_shape(judgments, studies, boot):
    """Settled decisions: four formulations, the generating one least biased, waves of 100 up to
    1,500 answers, 15 looks (95%); both arms' fixed design is a coverage design at min_per_cell
    150. Each study runs to its budget and is judged at the first look each indicator settles:
    the design never reads the verdict, so that is where a study stopping by it would stop."""
    forms = ["lin-const", "lin-zipf", "exp2-log2", "bin1-const"]
    fixed = generate(judgments, Design(k=5, levels=(0, 1, 2), formulations=forms, min_per_cell=150, seed=12)).examples
    pool = candidate_pool(judgments, 5, (0, 1, 2), forms, 20000, seed=12)
    truths = truths_of(judgments, pool, "lin-const", forms, 5, (0, 1, 2))
    print(f"\n== settled decisions (ECIR 2015 judgments, {', '.join(forms)}; fixed design {len(fixed)})")
    for ind in INDICATORS:
        print(f"true {ind}: " + ", ".join(f"{f} {v:.4f}" for f, v in truths[ind].sort_values().items()))
    for arm in ARMS:
        tables = [simulate_adaptive_study(judgments, crowd("lin-const", 2000 + r), forms, adaptive=arm == "adaptive",
                                          budget=min(1500, len(fixed)), wave_size=100, seed=7 * r + 1, pool=pool,
                                          fixed=fixed, bootstrap=boot, max_looks=15, stop=False, truth_b1=truths,
                                          spread=SPREAD, indicator=INDICATOR, margin=ZONE, shared_effect=SHARED)
                  for r in range(studies)]
        for ind in INDICATORS:
            rows = []
            for t in tables:
                hit = first(t, t[f"settled_{ind}"])
                rows.append((hit is not None, hit is not None and bool(hit[f"right_{ind}"]),
                             int(hit["n_answers"]) if hit is not None else 0))
            done = [r for r in rows if r[0]]
            zone = sum(1 for t in tables if first(t, t[f"settled_{ind}"]) is not None
                       and bool(first(t, t[f"settled_{ind}"])[f"right_margin_{ind}"]))
            print(f"{arm:<8} by {ind:<8}: {len(done)} of {studies} settled, median at "
                  f"{np.median([r[2] for r in done]) if done else float('nan'):.0f} answers; "
                  f"{zone} of {len(done)} settled decisions right within the margin {ZONE} "
                  f"({sum(r[1] for r in done)} exactly; stated confidence 0.95)",
                  flush=True)


def priority_cost():
    study = load_ecir2015()
    judgments = recover_judgments()
    pool = candidate_pool(judgments, 5, (0, 1, 2), None, 20000, seed=1)
    cache: dict = {}
    t = time.perf_counter()
    example_priorities(pool, study, None, seed=1, cache=cache)
    cold = time.perf_counter() - t
    t = time.perf_counter()
    p = example_priorities(pool, study, None, seed=2, cache=cache)
    warm = time.perf_counter() - t
    print(f"\nexample_priorities at ECIR size (36 formulations, {len(study.examples)} answers, pool {len(pool)}): "
          f"cold {cold:.2f} s (multi-start fits), warm {warm:.2f} s (one run from the cached fits); ratio "
          f"{cold / warm:.1f}; leader {p.attrs['leader']}, contenders {', '.join(p.attrs['contenders'])}")


def _intervals(est, reps, kind, floor=0.0):
    """95% intervals of ``est`` (F,) from replicates (B, F): floor (the calibration's and the
    looks' own, :func:`~satcal.analysis.bootstrap.floor_interval`: the union of the percentile and
    the basic interval cut at 0), bc (Efron's bias-corrected percentile), percentile, basic
    (2 est - quantiles) or normal (est +- 1.96 sd). ``floor``: floor_interval's bound (-inf for
    the contrasts, which have none: the union alone)."""
    from scipy.stats import norm
    from satcal.analysis.bootstrap import _bc_interval, floor_interval
    if kind == "floor":
        return floor_interval(reps, est, floor)
    if kind == "bc":
        return _bc_interval(reps, est)
    q = np.nanpercentile(reps, [2.5, 97.5], axis=0)
    if kind == "percentile":
        return q[0], q[1]
    if kind == "basic":
        return 2 * est - q[1], 2 * est - q[0]
    sd = np.nanstd(reps, axis=0, ddof=1)
    return est - norm.isf(0.025) * sd, est + norm.isf(0.025) * sd


def _crossing(ns, widths, target):
    """The answers at which a width curve first stays at or below ``target``, interpolated
    log-log between the looks around the last crossing (NaN: not reached by the last look)."""
    ns, widths = np.asarray(ns, float), np.asarray(widths, float)
    above = np.flatnonzero(widths > target)
    if not above.size:
        return float(ns[0])
    i = above[-1]
    if i == len(ns) - 1:
        return float("nan")
    x0, x1, y0, y1 = np.log(ns[i]), np.log(ns[i + 1]), np.log(widths[i]), np.log(widths[i + 1])
    return float(np.exp(x0 + (np.log(target) - y0) * (x1 - x0) / (y1 - y0)))


def wave_composition(examples, form, n_bins=10):
    """Per wave after the first (waves are the ``v<wave>-`` prefix of the simulated worker ids):
    the distinct phi cells (an example's A or B list) and |dphi| cells of formulation ``form``
    the wave's examples use, and the largest share of the wave in one phi cell (an example
    counted once) and in one |dphi| cell."""
    from satcal.measures import bin_index, score_lists
    k = sum(1 for c in examples.columns if c.startswith("ra") and c[2:].isdigit())
    la = examples[[f"ra{i}" for i in range(1, k + 1)]].to_numpy(float)
    lb = examples[[f"rb{i}" for i in range(1, k + 1)]].to_numpy(float)
    n_levels = int(max(la.max(), lb.max())) + 1
    pa, pb = score_lists(la, [form], n_levels=n_levels)[:, 0], score_lists(lb, [form], n_levels=n_levels)[:, 0]
    ca, cb = bin_index(pa, n_bins), bin_index(pb, n_bins)
    cd = bin_index(np.abs(pa - pb), n_bins)
    wave = examples["worker_id"].str.extract(r"^v(\d+)-", expand=False).astype(int).to_numpy()
    out = []
    for w in np.unique(wave)[1:]:
        m = wave == w
        phi = np.zeros((m.sum(), n_bins), bool)
        phi[np.arange(m.sum()), ca[m]] = True
        phi[np.arange(m.sum()), cb[m]] = True
        out.append((int(phi.any(0).sum()), len(np.unique(cd[m])), phi.mean(0).max(),
                    np.bincount(cd[m], minlength=n_bins).max() / m.sum()))
    return out


def replan(path, looks=(3, 6), study=0):
    """Wave composition before and after the cell cap on the same answers: study ``study`` of an
    adaptive run's pickle, its answers before wave w (for each w in ``looks``), and wave w planned
    again as the run planned it (same pool, reference, seed) with no cap and with the pickle's cap;
    the capped replan must be the wave the run asked."""
    import pickle
    from satcal.analysis.adaptive import plan_wave
    from satcal.analysis.standardise import reference_scores
    from satcal.answers import StudyData
    with open(path, "rb") as fh:
        d = pickle.load(fh)
    ecir = d["truth_form"] == "lin-const"
    judgments = recover_judgments() if ecir else synthetic_judgments()
    k, levels = (5, (0, 1, 2)) if ecir else (10, (0, 1, 2, 3))
    pool = candidate_pool(judgments, k, levels, FORMS, 20000, seed=11)
    reference = reference_scores(judgments, FORMS, k, max(levels) + 1, seed=0)
    table = d["runs"]["adaptive"][study]
    examples = table.attrs["examples"]
    wave = examples["worker_id"].str.extract(r"^v(\d+)-", expand=False).astype(int).to_numpy()
    r = d["seed_base"] + study
    cache: dict = {}
    print(f"\n== {path} study {r + 1}: wave {', '.join(map(str, looks))} planned again without and with the cap "
          f"{d.get('cell_cap')}; cells of {d['truth_form']}: (phi cells, |dphi| cells, largest share in one phi cell, "
          "in one |dphi| cell)")
    for w in looks:
        before = StudyData(examples[wave < w].reset_index(drop=True), k=k, n_levels=max(levels) + 1,
                           judgments=judgments, name="simulated")
        size = int((wave == w).sum())
        for cap in (None, d.get("cell_cap")):
            t = time.perf_counter()
            got = plan_wave(pool, before, FORMS, size, seed=100 * r + 1 + w, cache=cache, reference=reference,
                            margin=ZONE, criterion=d["criterion"], cell_cap=cap or None)
            comp = wave_composition(pd.concat([examples[wave < w].iloc[:1], got.assign(worker_id="v99-w0")]),
                                    d["truth_form"])[0]
            same = set(got["example_id"]) == set(examples.loc[wave == w, "example_id"])
            print(f"   wave {w} ({len(before.examples)} answers before), cap {cap}: {comp[0]} phi cells, {comp[1]} "
                  f"|dphi| cells, largest shares {comp[2]:.2f} / {comp[3]:.2f}; the run's wave: {same} "
                  f"({time.perf_counter() - t:.0f} s)")


def summarise(paths):
    """Figures of saved studies (``--save``; arms from several runs, e.g. a fixed run and an
    adaptive one on the same seeds): answers to reach the fixed design's median b1_std width
    (per study, and on the median-over-studies curve), picks, settled decisions, and coverage by
    interval method, for single formulations (near the least-biased and away from it) and for the
    contrasts with the leader that the stopping rule reads."""
    import pickle
    arms, meta = {}, None
    for path in paths:
        with open(path, "rb") as fh:
            d = pickle.load(fh)
        for arm, tables in d["runs"].items():
            label = arm if arm == "fixed" else f"adaptive ({d.get('criterion', 'influence')}" + (
                f", cap {d['cell_cap']})" if d.get("cell_cap") else ")")
            arms.setdefault(label, []).extend(tables)
        meta = meta or d
    truth = meta["truths"]["b1_std"]
    n_fixed, truth_form = meta["n_fixed"], meta["truth_form"]
    best = truth.idxmin()
    print(f"\n== summary of {', '.join(paths)}: truth {truth_form}, N = {n_fixed}; studies: "
          + ", ".join(f"{a} {len(t)}" for a, t in arms.items()))
    print("true b1_std: " + ", ".join(f"{f} {v:.4f}" for f, v in truth.sort_values().items()))

    def curves(tables, what):
        out = []
        for t in tables:
            looks = t.attrs["std_looks"]
            forms = list(t.attrs["bias"]["formulation"])
            ns, ws = [], []
            for n, est, reps in looks:
                if what == "floor":
                    lo, hi = _intervals(est, reps, "floor")
                    ws.append(float(np.nanmedian(hi - lo)))
                else:
                    ws.append(float(np.nanmedian(np.nanstd(reps, axis=0, ddof=1))))
                ns.append(n)
            out.append((np.array(ns), np.array(ws), forms))
        return out

    for what, name in (("floor", "median floor_interval 95% width"), ("se", "median bootstrap SE")):
        c = {a: curves(t, what) for a, t in arms.items()}
        if "fixed" not in c:
            for arm, cs in c.items():
                print(f"-- {name}, {arm}, median curve: " + " ".join(
                    f"{n}:{w:.4f}" for n, w in zip(cs[0][0], np.median(np.stack([w for _, w, _ in cs]), axis=0))))
            continue
        target = float(np.median([w[-1] for _, w, _ in c["fixed"]]))
        print(f"-- {name}: fixed design at N {target:.4f} (median of {len(c['fixed'])} studies)")
        for arm, cs in c.items():
            if arm == "fixed":
                continue
            per = np.array([_crossing(n, w, target) for n, w, _ in cs])
            ns = cs[0][0]
            med_curve = np.median(np.stack([w for _, w, _ in cs]), axis=0)
            at = _crossing(ns, med_curve, target)
            every = np.median(np.where(np.isfinite(per), per, np.inf))   # a study not reaching it: beyond N
            print(f"   {arm}: per study, median over all {len(per)} (one not reaching it counts as beyond N): "
                  + (f"{every:.0f} answers ({every / n_fixed:.0%} of N)" if np.isfinite(every) else "beyond N"))
            print(f"   {arm}: per study reaches it and stays in {int(np.isfinite(per).sum())} of {len(per)}, "
                  f"median {np.nanmedian(per) if np.isfinite(per).any() else float('nan'):.0f} answers "
                  f"({np.nanmedian(per) / n_fixed if np.isfinite(per).any() else float('nan'):.0%} of N; studies not "
                  f"reaching it counted as N: {np.median(np.where(np.isfinite(per), per, n_fixed)) / n_fixed:.0%}); "
                  f"median-over-studies curve reaches it at {at:.0f} ({at / n_fixed:.0%}); at N "
                  f"{med_curve[-1]:.4f} (fixed {target:.4f}, ratio {med_curve[-1] / target:.2f}, so the fixed "
                  f"width at about {(med_curve[-1] / target) ** 2:.0%} of N by n^-1/2)")
            print("     median curve: " + " ".join(f"{n}:{w:.4f}" for n, w in zip(ns, med_curve)))
        fc = np.median(np.stack([w for _, w, _ in c["fixed"]]), axis=0)
        print("     fixed median curve: " + " ".join(f"{n}:{w:.4f}" for n, w in zip(c["fixed"][0][0], fc)))
    print("-- which intervals stay wide: per formulation, the median over studies of the floor_interval width and of the "
          "bootstrap SD at looks 4, 7 and N (the median width is the 4th/5th of 8)")
    order = list(truth.sort_values().index)
    print("   " + " " * 24 + " ".join(f"{f:>10}" for f in order))
    for arm, tables in arms.items():
        forms = list(tables[0].attrs["bias"]["formulation"])
        cols = [forms.index(f) for f in order]
        for li in (3, 6, len(tables[0].attrs["std_looks"]) - 1):
            w = np.median([np.subtract(*_intervals(t.attrs["std_looks"][li][1], t.attrs["std_looks"][li][2], "floor")[::-1])
                           for t in tables], axis=0)
            sd = np.median([np.nanstd(t.attrs["std_looks"][li][2], axis=0, ddof=1) for t in tables], axis=0)
            n = tables[0].attrs["std_looks"][li][0]
            print(f"   {arm[:14]:<14} n {n:>5} FI " + " ".join(f"{w[c]:10.4f}" for c in cols))
            print(f"   {'':<14} {'':>7} SD " + " ".join(f"{sd[c]:10.4f}" for c in cols))
    print(f"-- wave composition (waves 2-10), cells of {truth_form} (10 bins): median over waves and studies of the "
          "distinct phi cells (A or B) and |dphi| cells a wave uses, and of the largest share of a wave in one of them")
    for arm, tables in arms.items():
        comp = np.array([c for t in tables for c in wave_composition(t.attrs["examples"], truth_form)])
        if comp.size:
            print(f"   {arm}: phi cells {np.median(comp[:, 0]):.0f} (min {comp[:, 0].min():.0f}), |dphi| cells "
                  f"{np.median(comp[:, 1]):.0f} (min {comp[:, 1].min():.0f}); largest share in one phi cell "
                  f"{np.median(comp[:, 2]):.2f} (max {comp[:, 2].max():.2f}), in one |dphi| cell {np.median(comp[:, 3]):.2f} "
                  f"(max {comp[:, 3].max():.2f})")
    print("-- picks at N (leader of b1_std; exact / within the margin) and settled decisions")
    for arm, tables in arms.items():
        lead = [t["leader_b1_std"].iloc[-1] for t in tables]
        exact = np.mean([f == best for f in lead])
        zone = np.mean([truth[f] <= truth.min() + ZONE for f in lead])
        done = [t[t["settled_b1_std"]].iloc[0] for t in tables if t["settled_b1_std"].any()]
        right = sum(truth[r["leader_b1_std"]] <= truth.min() + ZONE for r in done)
        when = np.median([r["n_answers"] for r in done]) if done else float("nan")
        print(f"   {arm}: right at N {exact:.2f} exactly, {zone:.2f} within {ZONE}; settled {len(done)} of "
              f"{len(tables)} (median {when:.0f} answers), {right} of {len(done)} right within the margin")
    print("-- coverage of 95% intervals at the last look (and over looks 5-10), by interval method")
    near = truth <= truth.min() + ZONE
    for arm, tables in arms.items():
        rows = {}
        for kind in ("floor", "bc", "percentile", "basic", "normal"):
            cov = {"near": [], "away": [], "gen": [], "contrast": [], "contrast_open": [], "near_all": [],
                   "away_all": [], "contrast_all": []}
            bias = []
            for t in tables:
                forms = list(t.attrs["bias"]["formulation"])
                tb = truth.reindex(forms).to_numpy(float)
                nm = near.reindex(forms).to_numpy(bool)
                for li, (n, est, reps) in enumerate(t.attrs["std_looks"]):
                    last = li == len(t.attrs["std_looks"]) - 1
                    if li < 4 and not last:
                        continue
                    lo, hi = _intervals(est, reps, kind)
                    hit = (lo <= tb) & (tb <= hi)
                    L = int(np.nanargmin(est))
                    dreps = reps - reps[:, [L]]
                    dest = est - est[L]
                    dlo, dhi = _intervals(dest, dreps, kind, -np.inf)
                    dt = tb - tb[L]
                    others = np.arange(len(forms)) != L
                    dhit = ((dlo <= dt) & (dt <= dhi))[others]
                    openc = (np.abs(dt) < 0.02)[others]
                    if last:
                        cov["near"].extend(hit[nm]); cov["away"].extend(hit[~nm])
                        cov["gen"].append(hit[forms.index(truth_form)])
                        cov["contrast"].extend(dhit); cov["contrast_open"].extend(dhit[openc])
                        if kind == "bc":
                            bias.append(np.stack([est - tb, 2 * est - np.nanmean(reps, axis=0) - tb,
                                                  np.nanstd(reps, axis=0, ddof=1)]))
                    cov["near_all"].extend(hit[nm]); cov["away_all"].extend(hit[~nm])
                    cov["contrast_all"].extend(dhit)
            rows[kind] = {k: (float(np.mean(v)) if v else float("nan"), len(v)) for k, v in cov.items()}
            if kind == "bc":
                mb = np.mean(bias, axis=0)
                rows["_bias"] = {f: tuple(mb[:, j]) for j, f in enumerate(forms)}
        print(f"   {arm}:")
        for kind in ("floor", "bc", "percentile", "basic", "normal"):
            r = rows[kind]
            print(f"     {kind:<10} formulations within {ZONE} of the least {r['near'][0]:.2f} (n {r['near'][1]}), "
                  f"away {r['away'][0]:.2f} ({r['away'][1]}), generating {r['gen'][0]:.2f}; contrasts with the "
                  f"leader {r['contrast'][0]:.2f} ({r['contrast'][1]}), those within 0.02 "
                  f"{r['contrast_open'][0]:.2f} ({r['contrast_open'][1]}); looks 5-10: near "
                  f"{r['near_all'][0]:.2f}, away {r['away_all'][0]:.2f}, contrasts {r['contrast_all'][0]:.2f}")
        print("     mean error at N of the estimate / of the bootstrap bias-corrected 2 est - mean(reps), "
              "and the mean bootstrap SE: " + ", ".join(
                  f"{f} {v[0]:+.4f} / {v[1]:+.4f} (SE {v[2]:.4f})"
                  for f, v in sorted(rows["_bias"].items(), key=lambda kv: truth[kv[0]])))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="2 studies per shape, B = 50, smaller designs")
    ap.add_argument("--studies", type=int, default=None)
    ap.add_argument("--boot", type=int, default=None)
    ap.add_argument("--spread", type=float, default=1.0, help="weight of the per-formulation precision term")
    ap.add_argument("--skip-cost", action="store_true", help="leave out the example_priorities timing")
    ap.add_argument("--indicator", choices=INDICATORS, default="b1_std",
                    help="the indicator settle decides on and the criterion targets (both are reported)")
    ap.add_argument("--margin", type=float, default=MARGIN, help="the stopping rule's indifference margin")
    ap.add_argument("--arm", choices=("fixed", "adaptive"), default=None, help="one arm of the settled-decisions part")
    ap.add_argument("--save", default=None, help="pickle each shape's studies to SAVE.<shape>.pkl as they finish")
    ap.add_argument("--criterion", choices=("information", "information-sum", "influence"), default="information",
                    help="the adaptive arm's criterion")
    ap.add_argument("--seed-base", type=int, default=0, help="first study's seed offset (fresh seeds: another base)")
    ap.add_argument("--shape-arms", choices=("both", "fixed", "adaptive"), default="both",
                    help="the arms of the shapes part (one arm: save with --save, combine with --summarise)")
    ap.add_argument("--summarise", nargs="+", default=None, metavar="PKL",
                    help="print the figures of saved studies (several runs' pickles, e.g. a fixed and an adaptive arm)")
    ap.add_argument("--cell-cap", type=float, default=DEFAULT_CELL_CAP,
                    help="largest share of an adaptive wave one cell of a formulation the criterion reads may take "
                         "(0: no cap)")
    ap.add_argument("--replan", default=None, metavar="PKL",
                    help="plan waves of an adaptive pickle's first study again, without and with its cell cap")
    ap.add_argument("--replan-waves", type=int, nargs="+", default=[3, 6], help="the waves --replan plans again")
    ap.add_argument("--independent", action="store_true",
                    help="calibrate with the independent joint model instead of the shared-effect one")
    ap.add_argument("--only", choices=("shapes", "settle", "ecir", "synthetic"), default=None, help="run one part")
    args = ap.parse_args()
    global ZONE
    if args.replan:
        ZONE = args.margin
        warnings.simplefilter("ignore", RuntimeWarning)
        replan(args.replan, tuple(args.replan_waves))
        return
    if args.summarise:
        ZONE = args.margin
        warnings.simplefilter("ignore", RuntimeWarning)
        summarise(args.summarise)
        return
    studies = args.studies or (2 if args.quick else 3)
    boot = args.boot or (50 if args.quick else 100)
    m = 50 if args.quick else 100
    t0 = time.perf_counter()
    # near-separated bootstrap replicates of small studies warn from numpy and statsmodels; the
    # counts of failed replicates are in each calibration, not needed here
    warnings.simplefilter("ignore", RuntimeWarning)
    import os
    print(f"load average at start: {os.getloadavg()[0]:.1f} ({os.cpu_count()} cores)")
    global SPREAD, INDICATOR, SAVE, ARMS, CRITERION, SEED_BASE, SHAPE_ARMS, SHARED, CELL_CAP
    CELL_CAP = args.cell_cap
    SHARED = not args.independent
    SPREAD, INDICATOR, SAVE = args.spread, args.indicator, args.save
    ZONE = args.margin
    CRITERION, SEED_BASE = args.criterion, args.seed_base
    SHAPE_ARMS = ("fixed", "adaptive") if args.shape_arms == "both" else (args.shape_arms,)
    ARMS = (args.arm,) if args.arm else ARMS
    print(f"settle and the criterion on {INDICATOR} ({CRITERION}), margin {ZONE}, {studies} studies per shape "
          f"(seeds from {SEED_BASE}), cell cap {CELL_CAP}, B = {boot}, arms {', '.join(SHAPE_ARMS)}; joint model "
          f"{'shared-effect' if SHARED else 'independent'}")
    if not args.skip_cost:
        priority_cost()
    if args.only in (None, "shapes", "ecir"):
        run_shape("ECIR 2015 judgments", recover_judgments(), 5, (0, 1, 2), "lin-const", m, studies, boot)
    if args.only in (None, "shapes", "synthetic"):
        run_shape("synthetic judgments", synthetic_judgments(), 10, (0, 1, 2, 3), "lin-log2", m, studies, boot)
    if args.only in (None, "settle"):
        settle_shape(recover_judgments(), studies + (1 if args.quick else 2), boot)
    print(f"\ntotal {time.perf_counter() - t0:.0f} s; load average at end: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
