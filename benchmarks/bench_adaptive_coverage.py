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
``--openness pick`` runs the adaptive arm with ``plan_wave(openness="pick")`` (summarised as
its own arm, ``adaptive-pick``, with McNemar's test against the default adaptive arm by seed).
``--precision contrasts|both`` and ``--defensive S`` run it with ``plan_wave``'s precision term
and defensive share (arms ``adaptive-contrasts``, ``adaptive-defensive0.25``, ...; McNemar's test
against the default adaptive arm and the fixed arm by seed). ``--plan-model shared`` runs it with
``plan_wave(model="shared")``: the criterion's fits between waves are the analysis's shared-effect
fits (arm ``adaptive-shared``).
``--arm replay --replay A.pkl`` asks each saved adaptive study's examples again, wave by wave,
answered afresh by new workers: the adaptive design's examples with answers that did not choose
them, which separates what the design's composition does from what choosing on the answers does.

Every look (after each wave, both arms) runs the product's calibration (the same defaults, B =
``--boot``) and ``settle`` (95%, O'Brien-Fleming spending over the ``--waves`` looks, margin 0.005,
on b1_std), and records b1_std's estimates and replicates, each formulation's floor_interval width,
the leader, the contrasts with it and the verdict; no study stops (the design never reads the
verdict, so a study's first settled look is where a stopping study would have stopped). This
costs ten calibrations a study instead of one: about 60-80 s of CPU (fixed) and 85-100 s
(adaptive), against 9-12 s without the looks (``--no-looks``). ``--summarise`` then prints, for
three widths stated before the run (:data:`TARGETS`: (i) the median over all formulations, (ii)
the median over the formulations whose true b1_std is within the margin of the least, (iii) the
median width of the contrasts b1_std(f) - b1_std(true least)), the answers at which the adaptive
arm's width first stays at or below the fixed design's median width at N (per study and on the
median-over-studies curve, log-log interpolation between looks), the saving 1 - answers / N with
a bootstrap over studies (both arms of a seed resampled together), picks (exact and within the
margin) there and at N in both arms, and the settled decisions (how many, when, the share right
with a Clopper-Pearson interval).

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

``--summarise ... --spread`` prints instead whether the bootstrap measures the spread over studies:
per arm, indicator and formulation (and b1_std's contrasts with the true least, what ``settle``
reads) the bootstrap SD (root mean square over studies) against the SD of the estimates over
studies, with 95% bootstrap-over-studies intervals of the ratio and of the adaptive arm's ratio
over the fixed arm's; the product's robust SE as a z over studies; b1_std's floor_interval
coverage; and both split by how many answers the design gave each formulation's informative
region (:func:`informative_counts`) and by the joint model's tau. ``--reanalyse PKL --variant V``
calibrates saved answers again under another resampling (``waves``: workers drawn within each
wave), to check a fix on the same answers.

    OPENBLAS_NUM_THREADS=1 python benchmarks/bench_adaptive_coverage.py --arm fixed --studies 48 \
        --seed-base 700 --save C700f            # and --arm adaptive --save C700a
    python benchmarks/bench_adaptive_coverage.py --summarise C700f.pkl C700a.pkl
    # the looks (issue 24's saving per target): two processes an arm on interleaved seeds
    OPENBLAS_NUM_THREADS=1 python benchmarks/bench_adaptive_coverage.py --arm fixed --studies 40 \
        --seed-base 800 --seed-step 2 --save L800f     # and --seed-base 801; and --arm adaptive
    # the spread (issue 24 item 4, fresh seeds 3000+): --no-looks, both arms, then
    python benchmarks/bench_adaptive_coverage.py --summarise S3000f.pkl S3000a.pkl --spread
    python benchmarks/bench_adaptive_coverage.py --reanalyse S3000a.pkl --variant waves --save R3000a_waves
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
from scipy.stats import beta

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _context import note  # noqa: E402
from bench_adaptive import _crossing as crossing, _intervals as intervals, crowd  # noqa: E402  (the same crowd, intervals, crossing)

from satcal.analysis.adaptive import (MARGIN, _answer, candidate_pool, plan_wave, settle,  # noqa: E402
                                      std_replicates, true_satisfaction)
from satcal.analysis.bootstrap import floor_interval  # noqa: E402
from satcal.answers import StudyData  # noqa: E402
from satcal.datasets import recover_judgments  # noqa: E402
from satcal.generate import Design, generate  # noqa: E402

FORMS = ["lin-const", "lin-log5", "lin-log3", "lin-log2", "exp2-zipf"]
TRUTH = "lin-const"
K, LEVELS = 5, (0, 1, 2)
IND = ("b1_std", "b2_std", "b3_std")
#: settle's stated confidence (the product's default).
CONFIDENCE = 0.95


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


def look_figures(result, study, verdict):
    """One look's record: b1_std's estimates (F,) and replicates (B, F) (``std_replicates``, what
    ``settle`` reads), each formulation's floor_interval width, the leader, the contrasts with the
    leader (estimate and floor_interval width, no floor: b1_j - b1_leader may be negative), and
    settle's verdict (settled, its z against the leader, the critical value, alpha spent), all
    in the order of :data:`FORMS`."""
    est, reps = std_replicates(result, study)
    order = [list(result.bias["formulation"]).index(f) for f in FORMS]
    est, reps, n = est[order], reps[:, order], len(study.examples)
    lo, hi = floor_interval(reps, est, 0.0)
    L = int(np.nanargmin(est))
    dlo, dhi = floor_interval(reps - reps[:, [L]], est - est[L], -np.inf)
    return {"n": int(n), "est": np.asarray(est, float), "reps": np.asarray(reps, np.float32),
            "width": hi - lo, "leader": FORMS[L], "contrast": est - est[L], "contrast_width": dhi - dlo,
            "settled": bool(verdict.settled), "settled_leader": verdict.leaders[0],
            "z": dict(verdict.z), "critical": float(verdict.critical), "alpha_spent": float(verdict.alpha_spent)}


def one_study(judgments, fixed, pool, arm, r, waves, boot, replay=None, looks=True, openness="stop",
              precision="levels", defensive=0.0, plan_model="independent"):
    """One study of ``len(fixed)`` answers; returns the last calibration's estimates and
    replicates of b1_std-b3_std and the answered examples, and with ``looks`` every look's
    record (:func:`look_figures`): after each wave, the product's calibration (the same defaults
    as the last one, bootstrap seed ``seed + wave``) and ``settle`` (95%, O'Brien-Fleming spending
    over ``waves`` looks, margin :data:`MARGIN`, on b1_std). No study stops at a settled look: the
    design never reads the verdict, so the first settled look is where a stopping study would
    have stopped. ``arm="replay"`` asks the examples of ``replay`` (an adaptive study's answered
    examples) wave by wave again, answered afresh by new workers: the adaptive design's examples
    with answers independent of the choice."""
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
    asked, study, cache, record = [], None, {}, []

    def calibrated(w):
        return calibrate(study, FORMS, sat_model="both", bootstrap=boot, seed=seed + w, model_check_folds=0,
                         reference=reference, standardised_intervals=True)

    for w, size in enumerate(sizes, start=1):
        if arm == "replay":
            wave = replay.loc[replay["wave"] == w].drop(columns=["answer", "worker_id", "wave"])
        elif arm == "adaptive":
            wave = plan_wave(pool, study, FORMS, int(size), seed=seed + w, cache=cache, target="b1_std",
                             reference=reference, openness=openness, precision=precision,
                             defensive=defensive, model=plan_model).drop(columns="priority")
        else:
            done = sum(len(a) for a in asked)
            wave = order.iloc[done:done + size]
        asked.append(_answer(wave, model, K, {"n_levels": n_levels}, rng, w).assign(wave=w))
        examples = pd.concat(asked, ignore_index=True)
        study = StudyData(examples.drop(columns="wave"), k=K, n_levels=n_levels, judgments=judgments,
                          name="simulated")
        if looks and w < len(sizes):
            res = calibrated(w)
            verdict = settle(res, confidence=CONFIDENCE, look=w, max_looks=len(sizes), study=study)
            record.append(look_figures(res, study, verdict))
    result = calibrated(len(sizes))
    if looks:
        verdict = settle(result, confidence=CONFIDENCE, look=len(sizes), max_looks=len(sizes), study=study)
        record.append(look_figures(result, study, verdict))
    bias = result.bias.set_index("formulation").reindex(FORMS)
    est = np.stack([bias[c].to_numpy(float) for c in IND])
    reps = np.moveaxis(result.bootstrap.joint["std_indicators"], 2, 0)   # (3, B, F)
    order_f = [list(result.bias["formulation"]).index(f) for f in FORMS]
    reps = reps[:, :, order_f]
    lohi = np.stack([np.stack([bias[f"{c}_lo"].to_numpy(float), bias[f"{c}_hi"].to_numpy(float)]) for c in IND])
    return {"est": est, "reps": reps, "lohi": lohi, "examples": examples, "looks": record}


#: The widths the saving is judged by, stated before the run (name, description).
TARGETS = (("all", "(i) median over all 5 formulations of the b1_std floor_interval width"),
           ("near", "(ii) median over the formulations whose TRUE b1_std is within the margin of the least"),
           ("contrast", "(iii) median over the other 4 of the width of b1_std(f) - b1_std(true least), floor_interval"
                        " without a floor"))
#: Bootstrap replicates over studies of the saving's interval, and their seed.
SUMMARY_BOOT, SUMMARY_SEED = 2000, 24


def target_curves(studies, truth):
    """(s, looks) arrays of answers and of each target's width (:data:`TARGETS`) per look."""
    near = truth <= truth.min() + MARGIN
    T = int(np.argmin(truth))
    others = np.arange(len(truth)) != T
    ns, curves = [], {k: [] for k, _ in TARGETS}
    for x in studies:
        ns.append([lk["n"] for lk in x["looks"]])
        curves["all"].append([np.median(lk["width"]) for lk in x["looks"]])
        curves["near"].append([np.median(lk["width"][near]) for lk in x["looks"]])
        cw = []
        for lk in x["looks"]:
            reps = lk["reps"].astype(float)
            lo, hi = floor_interval(reps - reps[:, [T]], lk["est"] - lk["est"][T], -np.inf)
            cw.append(np.median((hi - lo)[others]))
        curves["contrast"].append(cw)
    return np.array(ns, float), {k: np.array(v, float) for k, v in curves.items()}


def reach(ns, widths, fixed_widths, n):
    """The answers at which the adaptive arm's width first stays at or below the fixed arm's
    median width at N: on the median-over-studies curve, and the median over studies of each
    study's own (a study never there counts as beyond N); and the fixed target."""
    target = float(np.median(fixed_widths[:, -1]))
    on_curve = crossing(ns[0], np.median(widths, axis=0), target)
    per = np.array([crossing(a, w, target) for a, w in zip(ns, widths)])
    per_med = float(np.quantile(np.where(np.isfinite(per), per, np.inf), 0.5, method="inverted_cdf"))
    return target, on_curve, per_med, per


def clopper(k, n, level=0.95):
    """Clopper-Pearson interval of a binomial share k / n."""
    a = 1 - level
    lo = beta.ppf(a / 2, k, n - k + 1) if k > 0 else 0.0
    hi = beta.isf(a / 2, k + 1, n - k) if k < n else 1.0
    return float(lo), float(hi)


def summarise_looks(arms, truth, n_total):
    """The looks' figures (``--summarise``): per target the answers at which the adaptive arm
    reaches the fixed design's median width at N, the saving 1 - answers / N with a bootstrap
    over studies (paired by seed where both arms ran it), picks there and at N, and settled
    decisions."""
    if not all("looks" in x and x["looks"] for s in arms.values() for x in s):
        print("-- (no looks recorded in these pickles)")
        return
    best = int(np.argmin(truth))
    near = truth <= truth.min() + MARGIN
    forms = np.array(FORMS)
    print(f"== looks: the saving (1 - answers / N) per target; true least {FORMS[best]}; within the margin "
          f"{MARGIN}: {', '.join(forms[near])}")
    for _, text in TARGETS:
        print(f"   target {text}")
    data = {arm: (target_curves(s, truth), s) for arm, s in arms.items()}
    if "fixed" not in data or "adaptive" not in data:
        print("-- (both a fixed and an adaptive arm are needed for the saving)")
    else:
        (nf, cf), fs = data["fixed"]
        (na, ca), ads = data["adaptive"]
        rf, ra = [x["r"] for x in fs], [x["r"] for x in ads]
        common = sorted(set(rf) & set(ra))
        rng = np.random.default_rng(SUMMARY_SEED)
        for key, text in TARGETS:
            target, at, per_med, per = reach(na, ca[key], cf[key], n_total)
            fc = np.median(cf[key], axis=0)
            ac = np.median(ca[key], axis=0)
            boots = []
            for _ in range(SUMMARY_BOOT):   # resample seeds: both arms of a seed together, the rest apart
                pick = rng.choice(len(common), len(common)) if common else np.array([], int)
                chosen = [common[i] for i in pick]
                fi = [rf.index(r) for r in chosen] + list(rng.choice(
                    [i for i, r in enumerate(rf) if r not in common] or [0], len(rf) - len(common)))
                ai = [ra.index(r) for r in chosen] + list(rng.choice(
                    [i for i, r in enumerate(ra) if r not in common] or [0], len(ra) - len(common)))
                _, at_b, med_b, _ = reach(na[ai], ca[key][ai], cf[key][fi], n_total)
                boots.append((at_b, med_b))
            boots = np.array(boots)
            print(f"-- {text}: fixed median at N {target:.4f} (median curve: "
                  + " ".join(f"{int(a)}:{w:.4f}" for a, w in zip(nf[0], fc)) + ")")
            print("   adaptive median curve: " + " ".join(f"{int(a)}:{w:.4f}" for a, w in zip(na[0], ac)))
            own = crossing(nf[0], fc, target)   # a target the fixed design meets long before N measures little
            print(f"   the fixed arm's own median curve first stays at or below its width at N at {own:.0f} answers "
                  f"({own / n_total:.0%} of N); width ratio adaptive / fixed at each look: "
                  + " ".join(f"{w:.2f}" for w in ac / fc))
            for label, point, col in (("median-over-studies curve", at, 0), ("per study (median)", per_med, 1)):
                b = boots[:, col]
                reached = np.isfinite(b)
                sav = 1 - np.where(reached, b, np.inf) / n_total
                lo, hi = np.quantile(sav, [0.025, 0.975], method="inverted_cdf")
                sd = np.std(sav[reached], ddof=1) if reached.sum() > 1 else float("nan")
                fmt = lambda v: f"{v:.0%}" if np.isfinite(v) else "none (not by N)"
                print(f"   {label}: " + (f"{point:.0f} answers, saving {1 - point / n_total:.0%}" if np.isfinite(point)
                                         else "not reached by N")
                      + f"; bootstrap over studies 95% interval of the saving {fmt(lo)} to {fmt(hi)}, SD "
                        f"{sd:.0%} (reached by N in {reached.mean():.0%} of replicates; P(saving >= 40%) "
                        f"{np.mean(sav >= 0.4):.2f})")
            print(f"   per study: {int(np.isfinite(per).sum())} of {len(per)} adaptive studies reach it by N; "
                  f"answers (sorted): " + " ".join(f"{v:.0f}" if np.isfinite(v) else "-" for v in np.sort(per)))
            look = int(np.searchsorted(na[0], at)) if np.isfinite(at) else None
            picks = []
            for arm, ((ns, _), studies) in data.items():
                cols = [("at N", -1)] + ([(f"at look {look + 1} ({int(ns[0][look])} answers)", look)]
                                         if look is not None else [])
                for where, li in cols:
                    lead = np.array([FORMS.index(x["looks"][li]["leader"]) for x in studies])
                    ex, zo = int(np.sum(lead == best)), int(np.sum(near[lead]))
                    picks.append(f"{arm} {where}: exact {ex}/{len(lead)}, within the margin {zo}/{len(lead)}")
            print("   picks: " + "; ".join(picks))
    T = int(np.argmin(truth))
    print("-- where the width sits at N (median over studies): per formulation the floor_interval width of b1_std, "
          f"and of its contrast with the true least {FORMS[T]}; the contrast's bootstrap SD, and the SD "
          "of the contrast's estimate over studies (what the bootstrap SD estimates)")
    print("   " + " " * 20 + " ".join(f"{f:>10}" for f in FORMS))
    for arm, (_, studies) in data.items():
        w = np.median([x["looks"][-1]["width"] for x in studies], axis=0)
        cw, sd = [], []
        for x in studies:
            lk = x["looks"][-1]
            reps = lk["reps"].astype(float)
            lo, hi = floor_interval(reps - reps[:, [T]], lk["est"] - lk["est"][T], -np.inf)
            cw.append(hi - lo)
            sd.append(np.nanstd(reps - reps[:, [T]], axis=0, ddof=1))
        cw, sd = np.median(cw, axis=0), np.median(sd, axis=0)
        print(f"   {arm:<9} width     " + " ".join(f"{v:10.4f}" for v in w))
        print(f"   {'':<9} contrast  " + " ".join(f"{v:10.4f}" for v in cw))
        print(f"   {'':<9} its SD    " + " ".join(f"{v:10.4f}" for v in sd))
        over = np.std([x["looks"][-1]["est"] - x["looks"][-1]["est"][T] for x in studies], axis=0, ddof=1)
        print(f"   {'':<9} over studies" + " ".join(f"{v:10.4f}" for v in over)[2:])
    print("-- settled decisions (settle: 95%, O'Brien-Fleming spending over the looks, margin "
          f"{MARGIN}; a study stops at its first settled look)")
    for arm, (_, studies) in data.items():
        first = [next((lk for lk in x["looks"] if lk["settled"]), None) for x in studies]
        done = [lk for lk in first if lk is not None]
        s = len(studies)
        right = sum(bool(near[FORMS.index(lk["settled_leader"])]) for lk in done)
        exact = sum(lk["settled_leader"] == FORMS[best] for lk in done)
        when = sorted(lk["n"] for lk in done)
        lo, hi = clopper(right, len(done)) if done else (float("nan"), float("nan"))
        wlo, whi = clopper(len(done) - right, s)
        print(f"   {arm}: {len(done)} of {s} settled; at answers {when}; median "
              f"{np.median(when) if when else float('nan'):.0f}; right within the margin {right} of {len(done)} "
              f"(share {right / max(len(done), 1):.2f}, 95% CI {lo:.2f}-{hi:.2f}), exactly {exact}; wrong settlements "
              f"over all studies {len(done) - right} of {s} (95% CI {wlo:.2f}-{whi:.2f}; the rule promises <= 0.05)")
        every = [lk for x in studies for lk in x["looks"] if lk["settled"]]
        if every:
            ev = sum(bool(near[FORMS.index(lk["settled_leader"])]) for lk in every)
            print(f"     every settled look (not only the first): {len(every)}, right within the margin {ev}")


def summarise(paths, spread_only=False):
    arms = {}
    meta = None
    for p in paths:
        with open(p, "rb") as fh:
            d = pickle.load(fh)
        arm = d["arm"] + ("-pick" if d.get("openness", "stop") == "pick" else "")   # --openness pick: its own arm
        if d.get("precision", "levels") != "levels":   # --precision / --defensive: arms of their own
            arm += f"-{d['precision']}"
        if d.get("defensive", 0.0):
            arm += f"-defensive{d['defensive']:g}"
        if d.get("plan_model", "independent") != "independent":   # --plan-model shared
            arm += f"-{d['plan_model']}"
        have = {x["r"] for x in arms.setdefault(arm, [])}
        arms[arm].extend(x for x in d["studies"] if x["r"] not in have)   # a seed counted once
        meta = meta or d
    truth = np.atleast_2d(meta["truth"])[0]   # b1_std (F,)
    near = truth <= truth.min() + MARGIN
    print(f"N = {meta['n']} answers a study; truth {TRUTH}; B = {meta['boot']}; waves {meta['waves']}; studies: "
          + ", ".join(f"{a} {len(s)} (seeds {min(x['r'] for x in s)}-{max(x['r'] for x in s)})" for a, s in arms.items()))
    print("true b1_std: " + ", ".join(f"{f} {v:.4f}" for f, v in zip(FORMS, truth)))
    if spread_only:
        spread(arms, truth, recover_judgments(), f"{paths[0]}.tau")
        return
    summarise_looks(arms, truth, meta["n"])
    print("== coverage at N")
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
    picks_at_n(arms, truth)


def picks_at_n(arms, truth):
    """Each arm's pick at N (the least estimated b1_std, what a reader of the study would
    take), exactly the true least and within the margin of it, Fisher's exact test of the arms'
    within-margin rates, and the SD over studies of each formulation's b1_std contrast with the
    true least (what decides the pick); with an ``adaptive-pick`` arm (``--openness pick``) also
    McNemar's exact test against the default adaptive arm, paired by seed (the binomial test of
    the discordant seeds). Needs no looks."""
    from scipy.stats import binomtest, fisher_exact
    best, near = int(np.argmin(truth)), truth <= truth.min() + MARGIN
    rates, within = {}, {}
    for arm, studies in arms.items():
        est = np.stack([x["est"][0] for x in studies])          # (s, F) b1_std at N
        pick = np.argmin(est, axis=1)
        rates[arm] = (int(near[pick].sum()), len(pick))
        within[arm] = dict(zip((x["r"] for x in studies), near[pick]))
        counts = np.bincount(pick, minlength=len(FORMS))
        sd = (est - est[:, [best]]).std(axis=0, ddof=1)
        print(f"-- {arm} picks at N: exact {int((pick == best).sum())}/{len(pick)}, within the margin "
              f"{rates[arm][0]}/{len(pick)}; picked " + ", ".join(f"{f} {c}" for f, c in zip(FORMS, counts))
              + f"; SD over studies of b1_std minus {FORMS[best]}'s: "
              + " ".join(f"{v:.4f}" for j, v in enumerate(sd) if j != best))
    if "fixed" in rates and len(rates) > 1:
        for arm, (k, n) in rates.items():
            if arm != "fixed":
                kf, nf = rates["fixed"]
                p = fisher_exact([[k, n - k], [kf, nf - kf]]).pvalue
                print(f"-- picks within the margin, {arm} against fixed: {k}/{n} against {kf}/{nf} (Fisher's exact p {p:.2f})")
    for other in [a for a in within if a.startswith("adaptive")]:   # adaptive arms against fixed (and options
        for base in ("adaptive", "fixed"):                            # against the default), by seed
            if base not in within or base == other:
                continue
            a, b = within[other], within[base]
            common = sorted(set(a) & set(b))
            only_a = sum(a[r] and not b[r] for r in common)
            only_b = sum(b[r] and not a[r] for r in common)
            p = binomtest(only_a, only_a + only_b).pvalue if only_a + only_b else 1.0
            lo, hi = paired_difference_interval([a[r] for r in common], [b[r] for r in common])
            print(f"-- picks within the margin, {other} against {base}, paired by seed ({len(common)} seeds): "
                  f"{sum(a[r] for r in common)} against {sum(b[r] for r in common)}; only {other} {only_a}, only "
                  f"{base} {only_b} (McNemar's exact p {p:.2f}); difference of the shares "
                  f"{(only_a - only_b) / max(len(common), 1):+.3f}, 95% bootstrap over seeds [{lo:+.3f}, {hi:+.3f}]")


#: Bootstrap replicates (and seed) of the paired difference of two arms' pick shares.
PAIRED_BOOT, PAIRED_SEED = 10000, 2026


def paired_difference_interval(right_a, right_b, level=0.95):
    """Percentile interval of mean(right_a) - mean(right_b) over seeds resampled with
    replacement, both arms of a seed together (the pairing kept).

    >>> lo, hi = paired_difference_interval([True] * 50 + [False] * 50, [False] * 50 + [True] * 50)
    >>> bool(lo < 0 < hi)
    True
    """
    diff = np.asarray(right_a, float) - np.asarray(right_b, float)
    if diff.size == 0:
        return float("nan"), float("nan")
    idx = np.random.default_rng(PAIRED_SEED).integers(0, diff.size, (PAIRED_BOOT, diff.size))
    means = diff[idx].mean(axis=1)
    return tuple(float(q) for q in np.quantile(means, [(1 - level) / 2, (1 + level) / 2]))


# --------------------------------------------------------------------------------------------
# --spread: does the bootstrap over workers measure the spread of the estimates over studies?
# --------------------------------------------------------------------------------------------
#: Bootstrap-over-studies replicates of the spread ratios' intervals, and their seed.
SPREAD_BOOT, SPREAD_SEED = 2000, 2424
#: Bins of phi (and of |dphi|) for the informative-region counts (the analysis's own n_bins).
SPREAD_BINS = 10


def informative_counts(examples, ref_phi, n_levels=len(LEVELS)):
    """How many answers the design gave each formulation's informative region, (2, F).

    Row 0 (b1_std, the satisfaction curve over the reference lists): n_eff = 1 / sum_b p_b^2 / n_b,
    p_b the share of the reference lists whose phi falls in bin b of [0, 1] (:data:`SPREAD_BINS`
    equal bins), n_b the answered lists there (both sides of every answer). It is the number of
    answers a reference-weighted mean of per-bin means would rest on: its variance is
    sigma^2 sum_b p_b^2 / n_b, so n_eff = n when the design's lists follow the reference's
    spread, and it falls as the design leaves the reference's bins thin. Row 1 (b2_std and
    b3_std, the preference curve over pairs of reference lists): the same over |dphi|, p_b of
    the reference pairs (lists 2i and 2i + 1), n_b of the answers. A bin with reference mass
    and no answers gives 0.
    """
    from satcal.measures import score_lists
    from satcal.analysis.adaptive import _levels
    pa = score_lists(_levels(examples, "a", K), FORMS, n_levels=n_levels)
    pb = score_lists(_levels(examples, "b", K), FORMS, n_levels=n_levels)
    m = len(ref_phi) // 2 * 2
    ref_d = np.abs(ref_phi[0:m:2] - ref_phi[1:m:2])

    def neff(ref, got):
        out = []
        for j in range(ref.shape[1]):
            p = np.bincount(np.clip((ref[:, j] * SPREAD_BINS).astype(int), 0, SPREAD_BINS - 1),
                            minlength=SPREAD_BINS) / len(ref)
            n = np.bincount(np.clip((got[:, j] * SPREAD_BINS).astype(int), 0, SPREAD_BINS - 1),
                            minlength=SPREAD_BINS).astype(float)
            out.append(0.0 if np.any((p > 0) & (n == 0)) else 1 / np.sum(p[p > 0] ** 2 / n[p > 0]))
        return np.array(out)

    # phi: both sides of an answer count (each is a list whose satisfaction the answer informs)
    return np.stack([neff(ref_phi, np.concatenate([pa, pb])) / 2, neff(ref_d, np.abs(pa - pb))])


def _ratio_stats(est, reps, rng, boots=SPREAD_BOOT, keep=False):
    """Per position of the trailing axes: the bootstrap SD (root mean square over studies of each
    study's replicate SD), the SD of the estimates over studies, their ratio and a 95%
    bootstrap-over-studies interval of the ratio; the robust versions (median over studies
    of each study's normalised-IQR SE, against the normalised IQR of the estimates over studies);
    and the median over studies of the replicate SD over the SD over studies (the statistic
    ``--summarise`` prints: it falls below the root mean square when the SD varies between
    studies, as it does more after an adaptive design).
    ``est`` (s, ...), ``reps`` (s, B, ...); with ``keep`` also the (boots, ...) ratio draws."""
    from satcal.analysis.bootstrap import IQR_NORMAL, robust_se
    var = np.nanvar(reps, axis=1, ddof=1)                    # (s, ...)
    rob = robust_se(reps, axis=1)                            # (s, ...)
    s = len(est)

    def point(ix):
        e = est[ix]
        boot = np.sqrt(np.nanmean(var[ix], axis=0))
        over = np.nanstd(e, axis=0, ddof=1)
        q = np.nanpercentile(e, [25, 75], axis=0)
        rover = (q[1] - q[0]) / IQR_NORMAL
        return boot, over, np.nanmedian(rob[ix], axis=0), rover, np.nanmedian(np.sqrt(var[ix]), axis=0)

    b, o, rb, ro, md = point(np.arange(s))
    draws = [point(rng.integers(0, s, s)) for _ in range(boots)]
    ratio = np.array([d[0] / d[1] for d in draws])
    rratio = np.array([d[2] / d[3] for d in draws])
    mratio = np.array([d[4] / d[1] for d in draws])
    out = {"mratio": md / o, "mci": np.nanpercentile(mratio, [2.5, 97.5], axis=0), "boot": b, "over": o, "ratio": b / o, "ci": np.nanpercentile(ratio, [2.5, 97.5], axis=0),
            "rboot": rb, "rover": ro, "rratio": rb / ro, "rci": np.nanpercentile(rratio, [2.5, 97.5], axis=0)}
    return (out, ratio) if keep else out


def _halves_row(est, reps, i, T, rng, first_half):
    """One printed row of the split ratios: per formulation (the true least ``T`` left out of the
    contrast rows, ``i`` >= 3) the ratio (95% interval) in the studies ``first_half(j)`` marks /
    the others."""
    row = []
    for j, f in enumerate(FORMS):
        if i >= 3 and j == T:
            continue
        parts = []
        for half in (first_half(j), ~first_half(j)):
            st = _ratio_stats(est[half][:, i, j], reps[half][:, :, i, j], rng, boots=1000)
            parts.append(f"{st['ratio']:.2f} ({st['ci'][0]:.2f}-{st['ci'][1]:.2f})")
        row.append(f"{f} " + " / ".join(parts))
    return "; ".join(row)


def tau_fits(arms, judgments, cache_path):
    """Per study the joint models' full-sample fits without a bootstrap (about 1.3 s of CPU a
    study): each formulation's Akaike weight, tau and its standard error, cached in
    ``cache_path`` by (arm, seed). Returns {arm: (s, 3, F) array of weight, tau, se(tau)}."""
    from satcal.analysis.calibration import calibrate
    from satcal.analysis.standardise import reference_scores
    cache = {}
    if os.path.exists(cache_path):
        with open(cache_path, "rb") as fh:
            cache = pickle.load(fh)
    ref = reference_scores(judgments, FORMS, K, len(LEVELS), seed=0)
    out = {}
    for arm, studies in arms.items():
        rows = []
        for x in studies:
            key = (arm, x["r"])
            if key not in cache:
                study = StudyData(x["examples"].drop(columns="wave"), k=K, n_levels=len(LEVELS), judgments=judgments,
                                  name="simulated")
                res = calibrate(study, FORMS, sat_model="both", bootstrap=0, model_check_folds=0, reference=ref,
                                standardised_intervals=True)
                fits = res.fits[res.fits["sat_model"] == "joint"].set_index("formulation").reindex(FORMS)
                w = dict(zip(res.bias["formulation"], res.meta["standardisation"]["weights"]))   # the fits' order
                cache[key] = np.stack([[w[f] for f in FORMS], fits["joint_tau"].to_numpy(float),
                                       fits["joint_tau_se"].to_numpy(float)])
                with open(cache_path, "wb") as fh:
                    pickle.dump(cache, fh)
            rows.append(cache[key])
        out[arm] = np.stack(rows)
    return out


def spread(arms, truth, judgments, cache_path=None):
    """``--spread``: per arm, indicator and formulation, the bootstrap SD against the SD of the
    estimates over studies, with 95% bootstrap-over-studies intervals of the ratio (plain and
    robust) and of the adaptive arm's ratio over the fixed arm's; b1_std's floor_interval
    coverage near / away from the floor and of the contrasts; and both split at the median of
    the informative-region count (:func:`informative_counts`) within an arm whose count varies,
    to test whether the bootstrap understates the spread where the design sent few answers. Rows
    ``d<ind>-<f>`` are each indicator's contrasts with the true least f (b1_std's: what ``settle``
    reads; b2_std's and b3_std's have no kink at a floor);
    ``cache_path``: where :func:`tau_fits` keeps the joint models' tau (None: not shown)."""
    from satcal.analysis.standardise import reference_scores
    ref = reference_scores(judgments, FORMS, K, len(LEVELS), seed=0)
    near = truth <= truth.min() + MARGIN
    rng = np.random.default_rng(SPREAD_SEED)
    T = int(np.argmin(truth))
    rows = IND + tuple(f"d{i[:2]}-{FORMS[T]}" for i in IND)   # d<ind>-<f>: ind(j) - ind(true least f)
    print("== spread: bootstrap SD (root mean square over studies of each study's replicate SD) / SD of the "
          "estimates over studies = ratio (95% interval, bootstrap over studies); robust: median normalised-IQR "
          "SE / normalised IQR over studies [in brackets]; median replicate SD / SD over studies {in braces}")
    data, stats, counts, draws = {}, {}, {}, {}
    for arm, studies in arms.items():
        est = np.stack([x["est"] for x in studies])                                   # (s, 3, F)
        reps = np.moveaxis(np.stack([x["reps"] for x in studies]).astype(float), 2, 1)   # (s, B, 3, F)
        # rows 4-6: each indicator's contrasts with the true least (b1_std's is what settle's z reads)
        est = np.concatenate([est, est - est[:, :, [T]]], axis=1)
        reps = np.concatenate([reps, reps - reps[:, :, :, [T]]], axis=2)
        data[arm] = (est, reps)
        stats[arm], draws[arm] = _ratio_stats(est, reps, rng, keep=True)
        counts[arm] = np.stack([informative_counts(x["examples"], ref) for x in studies])   # (s, 2, F)
    names = list(arms)
    print(f"   {'':<23}" + "".join(f"{a + f' ({len(arms[a])})':>50}" for a in names)
          + ("   adaptive / fixed ratio" if {"fixed", "adaptive"} <= set(arms) else ""))
    for i, name in enumerate(rows):
        for j, f in enumerate(FORMS):
            cells = []
            for a in names:
                st = stats[a]
                cells.append(f"{st['boot'][i, j]:.4f}/{st['over'][i, j]:.4f} = {st['ratio'][i, j]:.2f} "
                             f"({st['ci'][0, i, j]:.2f}-{st['ci'][1, i, j]:.2f}) [{st['rratio'][i, j]:.2f}] "
                             f"{{{st['mratio'][i, j]:.2f}}}")
            if i >= 3 and j == T:
                continue
            line = f"   {name:<13}{f:<10}" + "".join(c.rjust(50) for c in cells)
            if {"fixed", "adaptive"} <= set(arms):
                rr = draws["adaptive"][:, i, j] / draws["fixed"][:, i, j]
                lo, hi = np.nanpercentile(rr, [2.5, 97.5])
                line += f"   {stats['adaptive']['ratio'][i, j] / stats['fixed']['ratio'][i, j]:.2f} ({lo:.2f}-{hi:.2f})"
            print(line)
    print("-- the product's SE in each study (bootstrap.robust_se, what bias.csv's se and settle's z read): SD over "
          "studies of (estimate - mean over studies) / SE, 1 when the SEs are right (95% interval, bootstrap over studies)")
    from satcal.analysis.bootstrap import robust_se
    for i, name in enumerate(rows):
        cells = []
        for a in names:
            est, reps = data[a]
            z = (est[:, i] - est[:, i].mean(axis=0)) / robust_se(reps[:, :, i], axis=1)     # (s, F)
            zb = np.array([np.nanstd(z[ix], axis=0, ddof=1) for ix in rng.integers(0, len(z), (1000, len(z)))])
            lo, hi = np.nanpercentile(zb, [2.5, 97.5], axis=0)
            cells.append(f"{a}: " + ", ".join(f"{f} {np.nanstd(z[:, j], ddof=1):.2f} ({lo[j]:.2f}-{hi[j]:.2f})"
                                             for j, f in enumerate(FORMS) if not (i >= 3 and j == T)))
        print(f"   {name}: " + "; ".join(cells))
    for a in names:
        c = counts[a]
        print(f"   {a}: answers in each formulation's informative region (n_eff, median and range over studies): phi "
              + ", ".join(f"{f} {np.median(c[:, 0, j]):.0f} ({c[:, 0, j].min():.0f}-{c[:, 0, j].max():.0f})"
                          for j, f in enumerate(FORMS))
              + "; |dphi| " + ", ".join(f"{f} {np.median(c[:, 1, j]):.0f} ({c[:, 1, j].min():.0f}-{c[:, 1, j].max():.0f})"
                                        for j, f in enumerate(FORMS)))
    for a in names:
        c = counts[a]
        if np.ptp(c, axis=0).max() == 0:
            continue
        est, reps = data[a]
        print(f"-- {a}, split at each formulation's median n_eff (phi for b1_std, |dphi| for b2_std and b3_std): "
              "ratio (95% interval) in the lower half / the upper half")
        for i, name in enumerate(rows):
            def lower_half(j, n_eff=c[:, 1 if i % 3 else 0]):
                return n_eff[:, j] <= np.median(n_eff[:, j])
            print(f"   {name}: " + _halves_row(est, reps, i, T, rng, lower_half))
    if cache_path is not None:
        from satcal.analysis.joint import WEAK_TAU_Z
        taus = tau_fits(arms, judgments, cache_path)
        print("-- the shared answer effect's SD tau (the joint model's; the crowd's worker SD is 0.5): per study the "
              f"model with the largest Akaike weight; 'weak' when tau < {WEAK_TAU_Z:g} se(tau) (joint.weak_tau, tau at 0 "
              "included). Ratio (95% interval) in the weak-tau studies / the others")
        for a in names:
            t = taus[a]
            top = np.argmax(t[:, 0], axis=1)
            tau, se = t[np.arange(len(t)), 1, top], t[np.arange(len(t)), 2, top]
            weak = ~(tau >= WEAK_TAU_Z * se)
            est, reps = data[a]
            r = np.corrcoef(tau, est[:, 0, FORMS.index(TRUTH)])[0, 1]
            print(f"   {a}: tau median {np.median(tau):.2f} (quartiles {np.quantile(tau, 0.25):.2f}-"
                  f"{np.quantile(tau, 0.75):.2f}), at 0 (< 0.01) in {np.mean(tau < 0.01):.0%}, weak in {weak.sum()} of "
                  f"{len(weak)}; correlation of tau with {TRUTH}'s b1_std {r:+.2f}; {TRUTH}'s b1_std mean "
                  f"{est[weak, 0, FORMS.index(TRUTH)].mean():.4f} (weak) / {est[~weak, 0, FORMS.index(TRUTH)].mean():.4f} (others)")
            if weak.sum() < 4 or (~weak).sum() < 4:
                continue
            for i, name in enumerate(rows):
                print(f"   {a} {name}: " + _halves_row(est, reps, i, T, rng, lambda j, w=weak: w))
    print("-- b1_std floor_interval coverage at N (share; MC SE over studies): near the floor / away / contrasts with "
          "the leader; adaptive also by half of the phi n_eff (summed over formulations)")
    for arm, studies in arms.items():
        c = counts[arm][:, 0].sum(axis=1)
        groups = [("all", np.ones(len(studies), bool))]
        if np.ptp(c) > 0:
            groups += [("low n_eff", c <= np.median(c)), ("high n_eff", c > np.median(c))]
        for label, keep in groups:
            per = {"near": [], "away": [], "contrast": []}
            for x in (x for x, k in zip(studies, keep) if k):
                e, rp = x["est"][0], x["reps"][0].astype(float)
                lo, hi = floor_interval(rp, e, 0.0)
                hit = (lo <= truth) & (truth <= hi)
                L = int(np.nanargmin(e))
                dlo, dhi = floor_interval(rp - rp[:, [L]], e - e[L], -np.inf)
                dh = ((dlo <= truth - truth[L]) & (truth - truth[L] <= dhi))[np.arange(len(FORMS)) != L]
                for key, v in (("near", hit[near]), ("away", hit[~near]), ("contrast", dh)):
                    per[key].append(np.mean(v))
            s = int(keep.sum())
            err = np.stack([x["est"][0] for x, k in zip(studies, keep) if k]) - truth[None]
            print(f"   {arm} {label} ({s} studies): " + ", ".join(
                f"{k} {np.mean(v):.2f} ({np.std(v, ddof=1) / np.sqrt(s):.3f})" for k, v in per.items())
                + f"; mean error of b1_std near {err[:, near].mean():+.4f}, away " + " ".join(
                    f"{f} {err[:, j].mean():+.4f}" for j, f in enumerate(FORMS) if not near[j]))


# --------------------------------------------------------------------------------------------
# --reanalyse: the saved answers calibrated again under another resampling scheme
# --------------------------------------------------------------------------------------------
#: Resampling schemes ``--reanalyse`` can apply to saved answers: "workers" (the product's: every
#: worker drawn from all the study's workers; reproduces the saved replicates), "waves" (workers
#: drawn within each wave, as many as the wave had: the stratified bootstrap).
VARIANTS = ("workers", "waves")


def stratified_weights(n, replicates, seed, groups=None, n_groups=None, clusters=None, strata=None):
    """:func:`~satcal.analysis.bootstrap.replicate_weights` with the first clustering's clusters
    drawn within strata: replicate b draws, in every stratum, as many of its clusters as it has,
    with replacement (the stratified bootstrap; Davison and Hinkley 1997, sec. 3.7). ``strata``
    (n,) int, one per answer (constant within a cluster). Replicate b uses child stream b of
    SeedSequence(seed), as the product's does."""
    codes = clusters[0]
    G = int(codes.max()) + 1
    of = np.zeros(G, int)
    of[codes] = strata
    members = [np.flatnonzero(of == s) for s in np.unique(of)]
    width = n if groups is None else int(n_groups)
    out = np.empty((replicates, width))
    for b, child in enumerate(np.random.SeedSequence(seed).spawn(replicates)):
        rng = np.random.default_rng(child)
        counts = np.zeros(G)
        for m in members:
            np.add.at(counts, m[rng.integers(0, len(m), len(m))], 1)
        w = counts[codes]
        out[b] = w if groups is None else np.bincount(groups, weights=w, minlength=width)
    return out


def reanalyse(path, variant, boot, out_path):
    """Calibrate every saved study of ``path`` again (the same answers, the same seed as its
    last calibration) with the resampling ``variant`` (:data:`VARIANTS`); save the estimates
    and replicates as ``--summarise`` reads them, arm ``<arm>-<variant>``."""
    import satcal.analysis.bootstrap as bs
    from satcal.analysis.calibration import calibrate
    from satcal.analysis.standardise import reference_scores
    with open(path, "rb") as fh:
        d = pickle.load(fh)
    judgments = recover_judgments()
    reference = reference_scores(judgments, FORMS, K, len(LEVELS), seed=0)
    original = bs.replicate_weights
    out = {**d, "arm": f"{d['arm']}-{variant}", "studies": []}
    offset = {"fixed": 0, "adaptive": 1, "replay": 2}[d["arm"]]
    try:
        for x in d["studies"]:
            c = time.process_time()
            ex = x["examples"]
            study = StudyData(ex.drop(columns="wave"), k=K, n_levels=len(LEVELS), judgments=judgments, name="simulated")
            if variant == "waves":
                strata = ex["wave"].to_numpy(int)
                bs.replicate_weights = lambda *a, _s=strata, **k: stratified_weights(*a, **k, strata=_s)
            res = calibrate(study, FORMS, sat_model="both", bootstrap=boot, seed=100 * x["r"] + offset + d["waves"],
                            model_check_folds=0, reference=reference, standardised_intervals=True)
            bs.replicate_weights = original
            bias = res.bias.set_index("formulation").reindex(FORMS)
            order_f = [list(res.bias["formulation"]).index(f) for f in FORMS]
            reps = np.moveaxis(res.bootstrap.joint["std_indicators"], 2, 0)[:, :, order_f]
            out["studies"].append({"r": x["r"], "est": np.stack([bias[i].to_numpy(float) for i in IND]),
                                   "reps": reps, "examples": ex, "looks": []})
            with open(out_path, "wb") as fh:
                pickle.dump(out, fh)
            same = np.allclose(out["studies"][-1]["reps"], x["reps"], equal_nan=True) if variant == "workers" else None
            print(f"study {x['r']} {out['arm']}: {time.process_time() - c:.0f} s CPU"
                  + ("" if same is None else f"; replicates as saved: {same}"), flush=True)
    finally:
        bs.replicate_weights = original


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--arm", choices=("fixed", "adaptive", "replay"), default="fixed")
    ap.add_argument("--replay", default=None, metavar="PKL",
                    help="with --arm replay: the adaptive arm's pickle whose studies' examples to ask again")
    ap.add_argument("--studies", type=int, default=40)
    ap.add_argument("--seed-base", type=int, default=700, help="first study's seed (fix before running)")
    ap.add_argument("--seed-step", type=int, default=1,
                    help="seeds seed-base, seed-base + step, ... (two processes of an arm: bases b and b + 1, step 2)")
    ap.add_argument("--boot", type=int, default=100)
    ap.add_argument("--waves", type=int, default=10)
    ap.add_argument("--min-per-cell", type=int, default=100, help="the fixed coverage design's depth (sets N)")
    ap.add_argument("--pool", type=int, default=5000, help="candidate examples of the adaptive arm")
    ap.add_argument("--openness", choices=("stop", "pick"), default="stop",
                    help="the adaptive arm's contrast weights (plan_wave's openness; default the stopping rule's)")
    ap.add_argument("--precision", choices=("levels", "contrasts", "both"), default="levels",
                    help="the adaptive arm's precision term (plan_wave's precision; default the levels)")
    ap.add_argument("--defensive", type=float, default=0.0,
                    help="the adaptive arm's share of each wave in the coverage order (plan_wave's defensive)")
    ap.add_argument("--plan-model", choices=("independent", "shared"), default="independent",
                    help="the joint model the adaptive arm's criterion fits between waves (plan_wave's model)")
    ap.add_argument("--no-looks", action="store_true",
                    help="calibrate only at N (coverage only; no looks, settle or saving per target)")
    ap.add_argument("--save", default=None, help="pickle the studies to SAVE.pkl as they finish")
    ap.add_argument("--summarise", nargs="+", default=None, metavar="PKL")
    ap.add_argument("--reanalyse", default=None, metavar="PKL",
                    help="calibrate PKL's saved answers again with --variant's resampling; saves to --save")
    ap.add_argument("--variant", choices=VARIANTS, default="workers")
    ap.add_argument("--spread", action="store_true",
                    help="with --summarise: only the bootstrap SD against the spread over studies, with intervals")
    args = ap.parse_args()
    warnings.simplefilter("ignore", RuntimeWarning)
    if args.summarise:
        summarise(args.summarise, args.spread)
        return
    if args.reanalyse:
        reanalyse(args.reanalyse, args.variant, args.boot, f"{args.save}.pkl")
        return
    t0 = time.perf_counter()
    c0 = time.process_time()
    print(f"start {note()}", flush=True)
    judgments, fixed, pool = setup(args.min_per_cell, args.pool)
    truth = std_truth(judgments, crowd(TRUTH, 0), FORMS)
    print(f"fixed design {len(fixed)} examples, pool {len(pool)}; setup {time.perf_counter() - t0:.0f} s", flush=True)
    out = {"arm": args.arm, "truth": truth, "n": len(fixed), "boot": args.boot, "waves": args.waves,
           "min_per_cell": args.min_per_cell, "pool": args.pool, "openness": args.openness,
           "precision": args.precision, "defensive": args.defensive, "plan_model": args.plan_model, "studies": []}
    for r in range(args.seed_base, args.seed_base + args.seed_step * args.studies, args.seed_step):
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
        x = one_study(judgments, fixed, pool, args.arm, r, args.waves, args.boot, source, not args.no_looks,
                      args.openness, args.precision, args.defensive, args.plan_model)
        x["r"] = r
        out["studies"].append(x)
        if args.save:
            with open(f"{args.save}.pkl", "wb") as fh:
                pickle.dump(out, fh)
        print(f"study {r} {args.arm}: {time.perf_counter() - t:.0f} s wall, {time.process_time() - c:.0f} s CPU; "
              f"b1_std " + " ".join(f"{v:.3f}" for v in x["est"][0]) + "; first settled at "
              + str(next((lk["n"] for lk in x["looks"] if lk["settled"]), "-"))
              + f"; load {os.getloadavg()[0]:.1f}",
              flush=True)
    print(f"total {time.perf_counter() - t0:.0f} s wall, {time.process_time() - c0:.0f} s CPU; "
          f"at the end {note()}")


if __name__ == "__main__":
    main()
