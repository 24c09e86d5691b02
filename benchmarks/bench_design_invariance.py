"""Design invariance of the per-list estimand (issue 20, SPEC 7.2); figures in docs/benchmarks.md.

The same simulated users answer two studies of the same size: one on the ECIR 2015 pairs (the
published design, its relevance patterns as embedded in ``satcal.datasets``) and one on a
design ``satcal.generate`` builds on the embedded judgments (coverage-optimal, each example
answered about twice). Users follow SPEC 7.1's answer process with worker effects: per worker
w, a list with score phi (under the truth formulation, ``--truth``) satisfies with probability
expit(a + u_w + b phi) (``--intercept`` a, ``--slope`` b), u_w ~ N(0, 0.5^2); a user who likes
both lists or neither states a preference with probability 0.3 (for the higher-phi list with
probability 0.8), and one who likes exactly one prefers the other with probability 0.1 (a lapse).

The default truth (exp2-zipf, a = -2, b = 4) was chosen, before any study was simulated, from
the users' own standardised indicators alone (``oracle_std``, no answers) so that the least
biased formulation is set apart from the runner-up: exp2-log2 (mean rank 2.0 over b1_std-b3_std)
against exp2-log3 (4.0); since ties left P*_f (``ties_std``) 1.67 against 3.0. The earlier truth (lin-const, a = -3, b = 6; ``--truth lin-const
--intercept -3 --slope 6``) has a tie at the top (lin-log5 2.33, lin-log3 2.67), where no
estimator can be asked to name the same formulation twice.

Every formulation is calibrated on each study (the paper's model and the joint one); the
rankings of the 36 formulations by b1 and by the mean rank over b1, b2, b3 are compared between
the two designs (Spearman correlation, same least-biased formulation?, the users' own least
biased?), for the paper's indicators, the per-list ones (b1_joint, b2_joint, b3_joint) and the
standardised ones (b1_std, b2_std, b3_std). A third study, the ECIR design answered by other
users of the same population, says how far two studies agree from sampling noise alone
(``noise_*``); ``oracle_*`` is the ranking by b1 of each formulation's population per-list curve
on each design's lists (no noise): for formulations other than the truth it too depends on which
lists a design holds, so it bounds what any estimator of that estimand can reach. Each study has
its own 100 workers: ``own_users_rho`` is the Spearman correlation between the two designs'
*users'* own standardised rankings (their realised intercepts, no answers), ``std_vs_own_*`` each
study's estimate against its own users'.

``--answers`` sets the size of every study (default 4,115, the paper's); on the ECIR design the
pairs are then drawn with replacement, on the generated one every example is answered about
answers / 2,080 times. The headline (docs/benchmarks.md) is at 12,345 answers (three times the
paper's), fresh seeds 100-109: there two studies of the *same* design agree at Spearman >= 0.95
in 9 of 10 seeds, so a shortfall between designs can be told from sampling noise, which at
4,115 it barely can. Figures on the final model (shared-effect joint model, ties out of P*),
standardised mean rank over b1_std-b3_std:

    --answers 12345 --seeds 10 --first-seed 100: between designs mean 0.984 (0.940-1.000),
        >= 0.95 in 9 of 10; same design 0.984, 9 of 10; same least biased, the users' own, 10 of 10
    --answers 4115 --seeds 10: between designs mean 0.961 (0.891-0.992), >= 0.95 in 7 of 10;
        same design 0.978, 10 of 10; same least biased, the users' own, 9 of 10
    --answers 41150 --seeds 3 --first-seed 200 (and 203): between designs mean 0.989
        (0.972-0.998), >= 0.95 in 6 of 6; same design 0.995, 6 of 6; same least biased 5 of 6

Each study has its own 100 workers, so it estimates its users' curve, not the population's:
a floor on the agreement that more answers do not lower. From 12,345 answers every study's
estimate agrees with its own users' ranking (``std_vs_own_*``) at >= 0.98 on either design
(docs/benchmarks.md).

``--same-users`` has one panel of 100 workers answer every study of a seed (the issue's "the same
simulated users"; the second ECIR study too, so its agreement is then the noise of the answers
alone). Fresh seeds fixed before the runs:

    --same-users --answers 4115 --seeds 10 --first-seed 400: between designs mean 0.988
        (0.963-0.997), >= 0.95 in 10 of 10; same design 0.986; same least biased, the users'
        own, 10 of 10
    --same-users --answers 12345 --seeds 10 --first-seed 300: between designs mean 0.993
        (0.987-0.999), >= 0.95 in 10 of 10; same design 0.995; same least biased 10 of 10

    python benchmarks/bench_design_invariance.py [--seeds 5] [--first-seed 0] [--answers 4115] [--worker-sd 0.5]
        [--indicator-range full|data] [--truth exp2-zipf] [--intercept -2] [--slope 4] [--same-users]
        [--save DIR]
"""
import argparse
import time

import numpy as np
import pandas as pd
from scipy.special import expit
from scipy.stats import spearmanr

from satcal.analysis import calibrate
from satcal.analysis.standardise import reference_scores
from satcal.datasets import load_ecir2015
from satcal.generate import generate, pairing_correlation
from satcal.measures import score_lists, study_formulations

CODES = np.array(["a_better", "b_better", "both_good", "both_bad"], dtype=object)


def simulate_users(phi_a, phi_b, truth, rng, workers=100, intercept=-3.0, slope=6.0, sd=0.5,
                   undecided=0.3, accuracy=0.8, lapse=0.1, effects=False, panel=None):
    """Answers of SPEC 7.1's process with per-worker intercepts (each answer a random worker);
    with ``effects``, also each answer's worker intercept u (the same draws). ``panel``: the
    workers' intercepts to draw answerers from (default: a new panel of ``workers`` from
    N(0, sd^2)), so two designs can be answered by the same users."""
    n = len(phi_a)
    panel = rng.normal(0, sd, workers) if panel is None else np.asarray(panel)
    u = panel[rng.integers(0, len(panel), n)]
    ta, tb = phi_a[:, truth], phi_b[:, truth]
    sat_a = rng.random(n) < expit(intercept + u + slope * ta)
    sat_b = rng.random(n) < expit(intercept + u + slope * tb)
    out = np.where(sat_a & sat_b, "both_good", np.where(~sat_a & ~sat_b, "both_bad", "")).astype(object)
    one = sat_a != sat_b
    lapsed = rng.random(n) < lapse
    out[one] = np.where(sat_a[one] != lapsed[one], "a_better", "b_better")
    d = ta - tb
    states = ~one & (rng.random(n) < undecided)
    higher_a = np.where(d > 0, True, np.where(d < 0, False, rng.random(n) < 0.5))
    pick_a = np.where(d == 0, higher_a, (rng.random(n) < accuracy) == higher_a)
    out[states] = np.where(pick_a[states], "a_better", "b_better")
    return (out, u) if effects else out


def oracle_b1(phi_a, phi_b, truth, sd=0.5, intercept=-3.0, slope=6.0):
    """b1 of each formulation's population per-list curve on this design's lists: the
    quadratic logit of the worker-averaged s(phi_true) of every list on its phi_f (infinite
    answers, no sampling noise). For a formulation other than the truth it still depends on
    which lists the design holds (E[s(phi_true) | phi_f] mixes the patterns at each phi_f)."""
    from satcal.analysis.core import GRID, design, fit_logit_batch
    phi = np.concatenate([phi_a, phi_b])                        # (2n, F)
    z, w = np.polynomial.hermite_e.hermegauss(40)
    s_true = (expit(intercept + sd * z[None, :] + slope * phi[:, truth, None]) @ w) / w.sum()
    X = np.stack([design(phi[:, j]) for j in range(phi.shape[1])])
    beta, _ = fit_logit_batch(X, np.tile(s_true, (phi.shape[1], 1)))
    p = expit(beta @ design(GRID).T)
    return np.abs(GRID - p).mean(axis=1)


def oracle_std(reference, truth, sd=0.5, intercept=-3.0, slope=6.0, undecided=0.3, accuracy=0.8,
               lapse=0.1, effects=None):
    """The standardised indicators (b1_std-b3_std) of the simulated users themselves: the
    answer process of simulate_users is the joint model with pi = undecided, delta = accuracy,
    lambda = lapse and a worker intercept u shared by both lists of an answer, so a mixture
    over Gauss-Hermite nodes of u (one "model" per node, on the truth's scores) is exact.
    With ``effects`` (each answer's u, from ``simulate_users(effects=True)``): the users of
    one study, its workers weighted by their answers, instead of the population."""
    from scipy.special import logit
    from satcal.analysis.standardise import standardised_indicators
    if effects is None:
        z, w = np.polynomial.hermite_e.hermegauss(40)
        z = sd * z
    else:
        z, w = np.unique(np.asarray(effects, float), return_counts=True)
    F = reference.shape[1]
    ref = np.concatenate([reference, np.repeat(reference[:, [truth]], z.size, axis=1)], axis=1)
    thetas = np.zeros((F + z.size, 7))
    thetas[F:] = [[intercept + zk, slope, 0.0, logit(undecided), 0.0, logit(accuracy),
                   logit(2 * lapse)] for zk in z]
    weights = np.concatenate([np.zeros(F), w / w.sum()])
    ind = standardised_indicators(thetas, ref, weights)
    return pd.DataFrame({k: v[:F] for k, v in ind.items()})


def rankings(bias: pd.DataFrame, names) -> pd.DataFrame:
    """Rank of each formulation by each indicator (1 = least biased) and by their mean rank."""
    ranks = bias.set_index("formulation")[list(names)].rank()
    return ranks.assign(mean_rank=ranks.mean(axis=1))


def compare(bias_ecir, bias_gen, names):
    r1, r2 = rankings(bias_ecir, names), rankings(bias_gen, names)
    first = names[0]
    out = {}
    for key in (first, "mean_rank"):
        rho = spearmanr(r1[key], r2[key].loc[r1.index]).statistic
        best1, best2 = r1[key].idxmin(), r2[key].idxmin()
        out[key] = (rho, best1, best2)
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--first-seed", type=int, default=0, help="seeds run from this one on")
    parser.add_argument("--answers", type=int, default=4115)
    parser.add_argument("--worker-sd", type=float, default=0.5, help="sd of the worker intercepts")
    parser.add_argument("--indicator-range", default="full", choices=["full", "data"],
                        help="b1-b3 over [0, 1] (a fixed range, the default here) or over the range "
                             "each design's data support (calibrate's default)")
    parser.add_argument("--truth", default="exp2-zipf", help="the formulation users follow")
    parser.add_argument("--intercept", type=float, default=-2.0)
    parser.add_argument("--slope", type=float, default=4.0)
    parser.add_argument("--same-users", action="store_true",
                        help="every study of a seed answered by the same panel of 100 workers (the "
                             "issue's 'same simulated users'), ecir_again included: its agreement "
                             "with ecir is then the noise of the answers alone")
    parser.add_argument("--save", default=None, help="write each seed's three bias tables and the users' "
                        "own standardised indicators as CSV into this directory (for analyses across seeds)")
    args = parser.parse_args()
    study = load_ecir2015()
    forms = study_formulations()
    truth = [f.id for f in forms].index(args.truth)
    user = dict(intercept=args.intercept, slope=args.slope)
    ecir_a = score_lists(study.levels("a"), forms, n_levels=study.n_levels)
    ecir_b = score_lists(study.levels("b"), forms, n_levels=study.n_levels)
    # one reference population from the judgments, shared by every design (what calibrate draws
    # itself from a study's judgments)
    reference = reference_scores(study.judgments, forms, study.k, study.n_levels, seed=0)
    truth_std = oracle_std(reference, truth, args.worker_sd, **user).assign(formulation=[f.id for f in forms])
    r_true = rankings(truth_std, ["b1_std", "b2_std", "b3_std"])
    order = r_true["mean_rank"].sort_values()
    true_best = order.index[0]
    print(f"users: {args.truth}, s(phi) = expit({args.intercept} + u + {args.slope} phi), sd(u) = {args.worker_sd}")
    print("standardised indicators of the simulated users (no sampling noise), top 5 by mean rank:")
    print(truth_std.set_index("formulation").loc[order.index[:5]].assign(mean_rank=order[:5]).round(4).to_string())
    gap = truth_std.set_index("formulation").loc[order.index[1]] - truth_std.set_index("formulation").loc[true_best]
    print(f"least biased {true_best}; runner-up {order.index[1]}: mean-rank gap {order.iloc[1] - order.iloc[0]:.2f}, "
          f"indicator gaps {', '.join(f'{k} {v:+.4f}' for k, v in gap.drop('formulation', errors='ignore').items())}")
    if args.save:
        from pathlib import Path
        Path(args.save).mkdir(parents=True, exist_ok=True)
        truth_std.to_csv(Path(args.save) / "truth_std.csv", index=False)
    rows = []
    for seed in range(args.first_seed, args.first_seed + args.seeds):
        t = time.perf_counter()
        rng = np.random.default_rng(seed)
        ex = generate(study.judgments, seed=seed).examples
        la = ex[[f"ra{i}" for i in range(1, study.k + 1)]].to_numpy(float)
        lb = ex[[f"rb{i}" for i in range(1, study.k + 1)]].to_numpy(float)
        pick = np.resize(rng.permutation(len(ex)), args.answers)   # every example once or twice
        gen_a = score_lists(la[pick], forms, n_levels=study.n_levels)
        gen_b = score_lists(lb[pick], forms, n_levels=study.n_levels)
        e_pick = rng.integers(0, len(ecir_a), args.answers) if args.answers != len(ecir_a) else np.arange(len(ecir_a))
        # "ecir_again": the same design, other users; its agreement with "ecir" is what sampling
        # noise alone allows
        designs = {"ecir": (ecir_a[e_pick], ecir_b[e_pick]), "generated": (gen_a, gen_b),
                   "ecir_again": (ecir_a[e_pick], ecir_b[e_pick])}
        bias, own = {}, {}
        shared = rng.normal(0, args.worker_sd, 100) if args.same_users else None
        for name, (pa, pb) in designs.items():
            answers, u = simulate_users(pa, pb, truth, rng, sd=args.worker_sd, effects=True, panel=shared, **user)
            # the ranking of this study's own users (its 100 workers, not the population's)
            own[name] = rankings(oracle_std(reference, truth, args.worker_sd, effects=u, **user).assign(
                formulation=[f.id for f in forms]), ["b1_std", "b2_std", "b3_std"])["mean_rank"]
            r = calibrate(None, forms, phi_a=pa, phi_b=pb, answers=answers, sat_model="both",
                          model_check_folds=0, indicator_range=args.indicator_range,
                          reference=reference, bootstrap=0, seed=0)
            bias[name] = r.bias
            fits = r.fits[r.fits.sat_model == "joint"]
            bias[name].attrs["flags"] = int((fits["flags"].fillna("") != "").sum())
            kinds = fits["flags"].fillna("").str.split("; ").explode()
            bias[name].attrs["kinds"] = sorted({k.split(":")[0] for k in kinds if k})
            bias[name].attrs["pairing"] = float(np.median(pairing_correlation(pa, pb)))
            # the satisfaction model every standardised curve is read through: the joint models'
            # Akaike weights (SPEC 7.2)
            weights = r.meta["provenance"]["reference_population"]["weights"]
            top = max(weights, key=weights.get)
            bias[name].attrs["model"] = f"{top} {weights[top]:.2f}"
            bias[name].attrs["weights"] = weights
        if args.save:
            import json
            for name, table in bias.items():
                table.to_csv(Path(args.save) / f"bias_seed{seed}_{name}.csv", index=False)
            (Path(args.save) / f"weights_seed{seed}.json").write_text(
                json.dumps({n: b.attrs["weights"] for n, b in bias.items()}, indent=1))
        oracle = {name: oracle_b1(pa, pb, truth, args.worker_sd, **user) for name, (pa, pb) in designs.items()}
        o_rho = spearmanr(oracle["ecir"], oracle["generated"]).statistic
        ids = np.array([f.id for f in forms])
        o_best = f"{ids[np.argmin(oracle['ecir'])]} / {ids[np.argmin(oracle['generated'])]}"
        paper = compare(bias["ecir"], bias["generated"], ["b1", "b2", "b3"])
        joint = compare(bias["ecir"], bias["generated"], ["b1_joint", "b2_joint", "b3_joint"])
        std = compare(bias["ecir"], bias["generated"], ["b1_std", "b2_std", "b3_std"])
        noise_std = compare(bias["ecir"], bias["ecir_again"], ["b1_std", "b2_std", "b3_std"])
        noise_paper = compare(bias["ecir"], bias["ecir_again"], ["b1", "b2", "b3"])
        noise_joint = compare(bias["ecir"], bias["ecir_again"], ["b1_joint", "b2_joint", "b3_joint"])
        lc = lambda name, col: float(bias[name].set_index("formulation").loc[args.truth, col])
        rows.append({
            "seed": seed, "examples_generated": len(ex),
            "pairing_ecir": bias["ecir"].attrs["pairing"], "pairing_generated": bias["generated"].attrs["pairing"],
            "paper_b1_rho": paper["b1"][0], "paper_b1_same_best": paper["b1"][1] == paper["b1"][2],
            "paper_mean_rho": paper["mean_rank"][0],
            "paper_mean_same_best": paper["mean_rank"][1] == paper["mean_rank"][2],
            "paper_best": f"{paper['b1'][1]} / {paper['b1'][2]}",
            "joint_b1_rho": joint["b1_joint"][0], "joint_b1_same_best": joint["b1_joint"][1] == joint["b1_joint"][2],
            "joint_mean_rho": joint["mean_rank"][0],
            "joint_mean_same_best": joint["mean_rank"][1] == joint["mean_rank"][2],
            "joint_best": f"{joint['b1_joint'][1]} / {joint['b1_joint'][2]}",
            "std_b1_rho": std["b1_std"][0], "std_b1_same_best": std["b1_std"][1] == std["b1_std"][2],
            "std_mean_rho": std["mean_rank"][0],
            "std_mean_same_best": std["mean_rank"][1] == std["mean_rank"][2],
            "std_best": f"{std['mean_rank'][1]} / {std['mean_rank'][2]}",
            "std_true_best_both": std["mean_rank"][1] == std["mean_rank"][2] == true_best,
            "joint_true_best_both": joint["mean_rank"][1] == joint["mean_rank"][2] == true_best,
            "paper_true_best_both": paper["mean_rank"][1] == paper["mean_rank"][2] == true_best,
            "noise_std_mean_rho": noise_std["mean_rank"][0],
            "noise_std_same_best": noise_std["mean_rank"][1] == noise_std["mean_rank"][2],
            "std_vs_truth_rho": float(np.mean([spearmanr(rankings(bias[n], ["b1_std", "b2_std", "b3_std"])["mean_rank"],
                                                         r_true["mean_rank"].loc[rankings(bias[n], ["b1_std"]).index]).statistic
                                               for n in ("ecir", "generated")])),
            "own_users_rho": spearmanr(own["ecir"], own["generated"].loc[own["ecir"].index]).statistic,
            "own_users_best": f"{own['ecir'].idxmin()} / {own['generated'].idxmin()}",
            **{f"std_vs_own_{n}": spearmanr(rankings(bias[n], ["b1_std", "b2_std", "b3_std"])["mean_rank"],
                                            own[n].loc[rankings(bias[n], ["b1_std"]).index]).statistic
               for n in designs},
            "oracle_b1_rho": o_rho, "oracle_best": o_best,
            "noise_paper_b1_rho": noise_paper["b1"][0], "noise_paper_mean_rho": noise_paper["mean_rank"][0],
            "noise_joint_b1_rho": noise_joint["b1_joint"][0], "noise_joint_mean_rho": noise_joint["mean_rank"][0],
            "noise_joint_b1_same_best": noise_joint["b1_joint"][1] == noise_joint["b1_joint"][2],
            "truth_b2_ecir": lc("ecir", "b2"), "truth_b2_generated": lc("generated", "b2"),
            "truth_b2_joint_ecir": lc("ecir", "b2_joint"),
            "truth_b2_joint_generated": lc("generated", "b2_joint"),
            "sat_model": " / ".join(bias[n].attrs["model"] for n in designs),
            "flagged_fits": f"{bias['ecir'].attrs['flags']} / {bias['generated'].attrs['flags']}",
            "flags": ", ".join(sorted(set(bias["ecir"].attrs["kinds"]) | set(bias["generated"].attrs["kinds"]))),
            "seconds": round(time.perf_counter() - t, 1)})
        print(pd.DataFrame(rows[-1:]).T.to_string(header=False), flush=True)
    table = pd.DataFrame(rows)
    pd.set_option("display.width", 200)
    print("\nall seeds:")
    print(table.round(3).to_string(index=False))
    numeric = table.select_dtypes(include=[np.number, bool]).drop(columns=["seed"])
    print("\nmean over seeds:")
    print(numeric.mean().round(3).to_string())


if __name__ == "__main__":
    main()
