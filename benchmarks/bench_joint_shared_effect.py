"""Issue 20: does a joint model with a shared answer-level random effect remove b2_std's bias
under a crowd with worker effects? (The prototype measured here is now the joint model the
analysis fits, ``fit_joint_shared``; ``NODES`` below is this benchmark's own node count for
the standardised mixture, the fits use ``SHARED_NODES``.)

The joint model (satcal.analysis.joint) takes an answer's two lists as satisfying
independently. satcal's simulated crowd gives each worker an intercept u_w ~ N(0, sigma^2) that
both lists of one answer share, so sat_A and sat_B are positively correlated within an answer.
The extension: P(answer) = integral over v ~ N(0, tau^2) of the joint model's answer
probabilities with both lists' logits shifted by v (Gauss-Hermite, ``NODES`` nodes); tau >= 0 is
one extra parameter and tau = 0 is today's model. Its s(phi) is then the population-averaged
(marginal) satisfaction curve E_v expit(b0 + v + b1 phi + b2 phi^2), which is what the
simulation's oracle (bench_design_invariance.oracle_std) targets; in the standardised
indicators the fitted model enters as a mixture of node models (both lists of a reference pair
at the same node), exactly as the oracle does.

Per study (designs unlike ECIR's: random pairs within a query of reference-rule lists, another
seed; one answer per example by one of 60 workers, u_w ~ N(0, 0.5^2), lin-const truth as in
bench_coverage_standardised.py): fit_joint (tau = 0) and the tau fit for four formulations;
b1_std-b3_std of each against the oracle. Also: the fit's gradient at its end and a
Nelder-Mead polish of the same objective (is it a maximum), and tau = 0 equality.

    OPENBLAS_NUM_THREADS=1 python benchmarks/bench_joint_shared_effect.py [studies] [answers] [big]
"""
import sys
import time
from pathlib import Path

import numpy as np
from scipy.optimize import minimize

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_coverage_standardised import FORMS, answers_of  # noqa: E402
from bench_design_invariance import oracle_std  # noqa: E402

from satcal.analysis.joint import (BOUNDS, CODES, TAU_BOUNDS as TAU_BOUND,  # noqa: E402
                                   _shared_negloglik_and_gradient as tau_negloglik_and_gradient,
                                   fit_joint, fit_joint_shared, joint_probabilities,
                                   shared_node_thetas as node_thetas, shared_nodes as nodes,
                                   shared_probabilities as tau_probabilities, _collapse_rows)
from satcal.analysis.standardise import akaike_weights, reference_scores, standardised_indicators  # noqa: E402
from satcal.datasets import load_ecir2015  # noqa: E402

NODES = 10   # the node models of std_of (the fits: joint.SHARED_NODES)


def fit_tau(phi_a, phi_b, answers, counts=None):
    """fit_joint_shared, with what the checks below need: (tau = 0 fit, best end as a scipy
    result-like object, the ends' log-likelihoods, the collapsed rows)."""
    from types import SimpleNamespace
    counts = np.ones(len(answers)) if counts is None else np.asarray(counts, float)
    fit = fit_joint_shared(phi_a, phi_b, answers, counts)
    code = np.full(len(answers), -1)
    for i, c in enumerate(CODES):
        code[np.asarray(answers) == c] = i
    args = _collapse_rows(np.asarray(phi_a, float), np.asarray(phi_b, float), code, counts)
    best = SimpleNamespace(x=fit.theta, fun=-fit.loglik)
    ends = [SimpleNamespace(fun=-v) for v in fit.ends]
    return fit.independent, best, ends, args


def check_equal_at_zero(phi_a, phi_b, answers):
    """tau = 0 reproduces joint_probabilities exactly (max abs difference)."""
    fit0 = fit_joint(phi_a, phi_b, answers)
    return float(np.abs(tau_probabilities(np.append(fit0.theta, 0.0), phi_a, phi_b)
                        - joint_probabilities(fit0.theta, phi_a, phi_b)).max())


def std_of(thetas8, ref, lls, k=NODES):
    """b1_std-b3_std with each formulation's shared-effect model expanded into its K node
    models (weights: Akaike weight x node weight)."""
    F = len(thetas8)
    _, w = nodes(k)
    th = np.concatenate([node_thetas(t, k) for t in thetas8])          # (F K, 7)
    refx = np.repeat(ref, k, axis=1)
    # each node model of formulation f reads formulation f's scores; the indicators of f are
    # then those of the mixture read on f's scores: the columns of one formulation are
    # identical, so read the first of each block
    wts = np.repeat(akaike_weights(lls), k) * np.tile(w, F)
    ind = standardised_indicators(th, refx, wts)
    return np.stack([ind[c][::k] for c in ("b1_std", "b2_std", "b3_std")], axis=1)


def main(n_studies=10, n_answers=1500, big=0):
    st = load_ecir2015()
    ref = reference_scores(st.judgments, FORMS, st.k, st.n_levels, seed=0)
    true = oracle_std(ref, 0).to_numpy()
    pool = reference_scores(st.judgments, FORMS, st.k, st.n_levels, size=40000, seed=1)
    rng = np.random.default_rng(2020)
    sizes = [n_answers] * n_studies + ([big] if big else [])
    rows = []
    for s, n in enumerate(sizes):
        pick = rng.integers(0, len(pool) // 2, n)
        pa, pb = pool[2 * pick], pool[2 * pick + 1]
        workers = rng.integers(0, 60, n)
        u = rng.normal(0, 0.5, 60)[workers]
        answers = answers_of(pa[:, 0], pb[:, 0], u, rng)
        t0 = time.perf_counter()
        fits0, fitst, grads, polish, taus = [], [], [], [], []
        for f in range(len(FORMS)):
            fit0, best, ends, args = fit_tau(pa[:, f], pb[:, f], answers)
            fits0.append(fit0)
            fitst.append(best)
            if f == 0:
                free = (best.x > np.array(BOUNDS + [TAU_BOUND])[:, 0] + 1e-4) & \
                       (best.x < np.array(BOUNDS + [TAU_BOUND])[:, 1] - 1e-4)
                grads.append(np.abs(tau_negloglik_and_gradient(best.x, *args)[1][free]).max())
                nm = minimize(lambda x: tau_negloglik_and_gradient(
                    np.clip(x, *np.array(BOUNDS + [TAU_BOUND]).T), *args)[0], best.x,
                    method="Nelder-Mead", options={"maxiter": 20000, "xatol": 1e-7,
                                                   "fatol": 1e-9, "adaptive": True})
                polish.append(best.fun - nm.fun)
                taus.append([r.fun - best.fun for r in ends])
                spread = max(r.fun for r in ends) - best.fun
        t_fit = time.perf_counter() - t0
        ll0 = np.array([f.loglik for f in fits0])
        llt = -np.array([r.fun for r in fitst])
        std0 = std_of([np.append(f.theta, 0.0) for f in fits0], ref, ll0)
        stdt = std_of([r.x for r in fitst], ref, llt)
        rows.append(dict(n=n, tau=fitst[0].x[7], lr=2 * (llt[0] - ll0[0]), grad=grads[0],
                         nm_gain=polish[0], spread=spread, taus=taus[0],
                         err0=std0 - true, errt=stdt - true, beta=fitst[0].x[:3], t=t_fit))
        r = rows[-1]
        print(f"study {s} n={n}: tau {r['tau']:.3f} (the starts end below the best by "
              f"{', '.join(f'{x:.2g}' for x in r['taus'])}), "
              f"2 dl {r['lr']:.1f}, |grad| {r['grad']:.1e}, Nelder-Mead gain {r['nm_gain']:.1e}, "
              f"b lin-const {np.round(r['beta'], 3)}, {t_fit:.1f} s", flush=True)
        print(f"   err b_std lin-const: tau=0 {np.round(r['err0'][0], 4)}  tau fit "
              f"{np.round(r['errt'][0], 4)}", flush=True)
    small = [r for r in rows if r["n"] == n_answers]
    if not small:
        return
    d = np.array([r["errt"] - r["err0"] for r in small])[..., 1].mean(axis=1)
    print(f"paired difference of b2 error (tau fit - tau = 0): {d.mean():+.4f} "
          f"(MC se {d.std(ddof=1) / np.sqrt(len(d)):.4f})")
    for name, key in (("independent (tau = 0)", "err0"), ("shared effect (tau fitted)", "errt")):
        e = np.array([r[key] for r in small])          # (S, F, 3)
        print(f"{name}: mean error over {len(small)} studies x {len(FORMS)} formulations "
              f"b1 {e[..., 0].mean():+.4f} b2 {e[..., 1].mean():+.4f} b3 {e[..., 2].mean():+.4f}; "
              f"MC se b2 {e[..., 1].mean(axis=1).std(ddof=1) / np.sqrt(len(small)):.4f}; SD across studies "
              f"b1 {e[..., 0].std(axis=0, ddof=1).mean():.4f} b2 {e[..., 1].std(axis=0, ddof=1).mean():.4f} "
              f"b3 {e[..., 2].std(axis=0, ddof=1).mean():.4f}; RMSE b2 {np.sqrt((e[..., 1] ** 2).mean()):.4f}")
    print("tau over studies: mean", np.mean([r["tau"] for r in small]).round(3), "sd",
          np.std([r["tau"] for r in small], ddof=1).round(3), "(truth 0.5)")
    print("true lin-const b_std", true[0].round(4))



def population(n_pairs=4000, scale=1500):
    """The pseudo-true values: each model fitted to the expected answer counts of ``n_pairs``
    pairs of the design (counts = scale / n_pairs x the true probability of each answer,
    marginal over u, 40 Gauss-Hermite nodes), so the fit's error is the model's asymptotic
    bias, free of Monte-Carlo noise (the log-likelihood's scale does not move the maximum)."""
    from scipy.special import logit
    st = load_ecir2015()
    ref = reference_scores(st.judgments, FORMS, st.k, st.n_levels, seed=0)
    true = oracle_std(ref, 0).to_numpy()
    pool = reference_scores(st.judgments, FORMS, st.k, st.n_levels, size=40000, seed=1)
    rng = np.random.default_rng(7)
    pick = rng.choice(len(pool) // 2, n_pairs, replace=False)
    pa, pb = pool[2 * pick], pool[2 * pick + 1]
    truth = np.array([-3.0, 6.0, 0.0, logit(0.3), 0.0, logit(0.8), logit(0.2), 0.5])
    # answers_of's process: sat by expit(-3 + u + 6 phi); lapse 0.1; undecided 0.3 to higher 0.8
    P = tau_probabilities(truth, pa[:, 0], pb[:, 0], nodes=40)               # (n, 4)
    ans = np.repeat(np.array(CODES, dtype=object)[None], n_pairs, axis=0).ravel()
    cnt = (P * scale / n_pairs).ravel()
    fits0, fitst = [], []
    for f in range(len(FORMS)):
        a, b = np.repeat(pa[:, f], 4), np.repeat(pb[:, f], 4)
        fit0, best, ends, _ = fit_tau(a, b, ans, counts=cnt)
        fits0.append(fit0)
        fitst.append(best)
        print(f"{FORMS[f].id}: tau {best.x[7]:.4f}, 2 dl {-2 * (fit0.loglik + best.fun):.2f}, "
              f"b {np.round(best.x[:3], 3)} (tau = 0 fit: b {np.round(fit0.theta[:3], 3)})",
              flush=True)
    ll0 = np.array([f.loglik for f in fits0])
    llt = -np.array([r.fun for r in fitst])
    std0 = std_of([np.append(f.theta, 0.0) for f in fits0], ref, ll0)
    stdt = std_of([r.x for r in fitst], ref, llt)
    print("truth        ", true.round(4).tolist())
    print("error tau = 0", (std0 - true).round(4).tolist())
    print("error tau fit", (stdt - true).round(4).tolist())
    print("Akaike weights tau = 0", akaike_weights(ll0).round(3), "tau fit", akaike_weights(llt).round(3))


if __name__ == "__main__":
    if sys.argv[1:2] == ["population"]:
        population(*[int(a) for a in sys.argv[2:]])
    else:
        from _context import arguments
        args = arguments(__doc__, ("studies", int, 10, "simulated studies"), ("answers", int, 1500, "answers per study"),
                         ("big", int, 0, "1: also the large study"))
        main(args.studies, args.answers, args.big)
