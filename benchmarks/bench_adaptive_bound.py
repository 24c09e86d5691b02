"""Issue 24: how many answers could any adaptive design save? An oracle bound from the expected
(Fisher) information at the true parameters, exact and cheap (no simulated studies).

For each shape of ``bench_adaptive.py`` (ECIR 2015 judgments, k = 5, truth lin-const; the
synthetic k = 10 levels 0-3 shape, truth lin-log2; its 8 formulations, its crowd, its fixed
coverage design of N answers and its pool of 20,000 candidates):

1. **The truth plugged in.** Each formulation's joint model is fitted to the crowd's expected
   answer shares over the pool (as ``population_truth`` does; spammers mixed in at their share):
   its pseudo-true parameters theta_g. The Akaike weights are those of the expected
   log-likelihoods of N answers to the fixed design, w_g ~ exp(N E[log p_g]), and stay fixed,
   so every design is judged on the same estimand b1_std(f) = c_f(theta).
2. **Asymptotic variances.** A design D (a multiset of examples) gives model g the information
   I_g(D) = sum_x I_x,g (``expected_information``, the criterion's own I_x), and by the delta
   method Var b1_std(f) = sum_g G_fg I_g(D)^-1 G_fg' (G from ``std_gradients``, the criterion's
   gradients), Var(b1_std(c) - b1_std(L)) likewise with G_cg - G_Lg.
3. **Designs of N answers.** (a) the fixed coverage design; (b) the oracle: the space-filling
   first wave (``plan_wave`` with no answers, N/10, as every adaptive study starts), then the
   product's greedy (``_Design``: exact rank-4 Woodbury updates, lazy) with the truth plugged in,
   minimising the target's own linear objective tr(M Sigma): (i) ``all``: every formulation's
   variance relative to the fixed design's (and, since a median of 8 only needs the 4th and 5th,
   the same over the 5 formulations the first oracle narrows most); (ii) ``contenders``: the
   formulations whose true b1_std is within the margin (0.005) of the least, relative variances;
   (iii) ``contrasts``: their contrasts with the true leader, relative variances (what ``settle``
   reads); (c) the product's criterion planned at the truth: ``plan_wave`` wave by wave (10
   waves of N/10, min_depth 10, the default criterion), its fits replaced by the pseudo-true
   parameters with the covariance the design so far gives, with and without ``cell_cap`` 0.25.
4. **Printed**, per shape and target: each design's target SD at N (median over the target's
   formulations or contrasts of the asymptotic SD), the variance ratio to the fixed design, and
   the fraction of N after which the design's target SD stays at or below the fixed design's at N
   (read off the design's own pick order, every 5 answers).
6. ``--sim R``: the product's criterion planned from its own fits (not the truth), as in a real
   study: R simulated studies per arm, 10 waves, each wave answered by the crowd with worker
   effects (new workers), the criterion's warm fits after every wave (``_fit_all``, as
   ``simulate_adaptive_study``), b1_std with the study's own Akaike weights; the spread over
   studies (normalised IQR, ``robust_se``: a warm fit stuck on a far maximum would decide a plain
   SD) at each look, in both arms, and where the adaptive arm's target SD curve (log-log between
   looks) crosses the fixed arm's at N. No bootstrap and no intervals: the spread over studies is
   the precision itself.
5. ``--mc R``: a check of the asymptotic SDs against R simulated studies of the fixed design and
   of the oracle's ``contenders`` design (the independent joint model fitted to each study, b1_std
   with each study's own Akaike weights), answered (a) independently from the expected shares
   (no worker effects) and (b) by the crowd with worker effects (new workers every tenth of the
   study, as ``bench_adaptive.py``): the SD over studies against the asymptotic SD, per arm.

    OPENBLAS_NUM_THREADS=1 python benchmarks/bench_adaptive_bound.py [--only ecir|synthetic] [--mc R] [--sim R]
        [--sim-seed S] [--cell-cap C]
"""
import argparse
import os
import sys
import time
import warnings

import numpy as np
import pandas as pd

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _context import note  # noqa: E402
from bench_adaptive import FORMS, WAVES, crowd, synthetic_judgments  # noqa: E402  (the same shapes and crowd)

from satcal.analysis.adaptive import (CELL_CAP, MARGIN, MIN_DEPTH, _answer, _Design, _fit_all,  # noqa: E402
                                      _expected_answers, _jacobian, _k, _levels, candidate_pool,
                                      expected_information, plan_wave, standardised_truth, std_gradients)
from satcal.analysis.bootstrap import robust_se  # noqa: E402
from satcal.analysis.joint import CODES, JointFit, fit_joint  # noqa: E402
from satcal.analysis.standardise import akaike_weights, reference_scores  # noqa: E402
from satcal.answers import StudyData  # noqa: E402
from satcal.datasets import recover_judgments  # noqa: E402
from satcal.generate import Design, generate  # noqa: E402
from satcal.measures import formulation as parse, resolve_formulations, score_lists  # noqa: E402

#: Answers between the points of a design's trajectory.
STEP = 5
LAZY = 256


class Shape:
    """Everything the bound needs for one shape, the truth plugged in."""

    def __init__(self, name, judgments, k, levels, truth_form, min_per_cell=100):
        t0 = time.process_time()
        self.name, self.judgments, self.k, self.levels = name, judgments, k, levels
        self.n_levels = max(levels) + 1
        self.forms = resolve_formulations(FORMS)
        self.model = crowd(truth_form, 0)
        self.truth_form = truth_form
        self.fixed = generate(judgments, Design(k=k, levels=levels, formulations=FORMS, min_per_cell=min_per_cell,
                                                seed=11)).examples
        self.pool = candidate_pool(judgments, k, levels, FORMS, 20000, seed=11)
        self.N = len(self.fixed)
        self.truth = standardised_truth(judgments, self.model, FORMS, k=k, n_levels=self.n_levels)
        self.ref = reference_scores(judgments, self.forms, k, self.n_levels, seed=0)
        self.phi = {"pool": self._phi(self.pool), "fixed": self._phi(self.fixed)}
        self.shares = {"pool": self._shares(self.pool), "fixed": self._shares(self.fixed)}
        codes = np.repeat(np.array(CODES, dtype=object)[None], len(self.pool), axis=0).ravel()
        pa, pb = self.phi["pool"]
        self.thetas = np.stack([fit_joint(np.repeat(pa[:, j], 4), np.repeat(pb[:, j], 4), codes,
                                          self.shares["pool"].ravel() * 10.0).theta for j in range(len(FORMS))])
        # Akaike weights of N answers to the fixed design, in expectation
        fa, fb = self.phi["fixed"]
        ell = np.array([np.sum(self.shares["fixed"] * np.log(_jacobian(self.thetas[j], fa[:, j], fb[:, j], )[0]))
                        for j in range(len(FORMS))])
        self.weights = akaike_weights(ell)
        self.b1_model, self.grads = std_gradients(self.thetas, self.ref, self.weights)
        self.models = sorted(self.grads)
        # the expected-information factors U (n, 4, 7) of every example, per model carrying weight
        self.U = {src: {g: self._U(src, g) for g in self.models} for src in ("pool", "fixed")}
        best = self.truth.min()
        self.leader = FORMS.index(self.truth.idxmin())
        self.contenders = [j for j, f in enumerate(FORMS) if self.truth[f] <= best + MARGIN]
        self.setup_cpu = time.process_time() - t0

    def _phi(self, table):
        k = _k(table)
        return (score_lists(_levels(table, "a", k), self.forms, n_levels=self.n_levels),
                score_lists(_levels(table, "b", k), self.forms, n_levels=self.n_levels))

    def _shares(self, table):
        """The crowd's expected answer shares: honest workers' (over the worker effect), with
        spammers answering uniformly at their share."""
        f = [parse(self.truth_form)]
        k = _k(table)
        ta = score_lists(_levels(table, "a", k), f, n_levels=self.n_levels)[:, 0]
        tb = score_lists(_levels(table, "b", k), f, n_levels=self.n_levels)[:, 0]
        s = self.model.spammers
        return (1 - s) * _expected_answers(ta, tb, self.model) + s / 4

    def _U(self, src, g):
        pa, pb = self.phi[src]
        p, jac = _jacobian(self.thetas[g], pa[:, g], pb[:, g])
        return jac / np.sqrt(p)[..., None]

    # ---- variances -------------------------------------------------------------------------
    def info(self, src, idx=None):
        """{g: I_g} of the examples ``idx`` of ``src`` (all by default), one answer each."""
        out = {}
        for g in self.models:
            U = self.U[src][g] if idx is None else self.U[src][g][idx]
            out[g] = np.einsum("nyi,nyj->ij", U, U)
        return out

    def variances(self, infos):
        """(F,) Var b1_std(f) and (F,) Var(b1_std(f) - b1_std(L)) from {g: I_g}."""
        var, con = 0.0, 0.0
        for g in self.models:
            S = np.linalg.inv(infos[g])
            G = self.grads[g]
            D = G - G[self.leader]
            var = var + np.einsum("fi,ij,fj->f", G, S, G)
            con = con + np.einsum("fi,ij,fj->f", D, S, D)
        return var, con

    def target(self, var, con, which):
        """The target's SD: the median over its formulations (or contrasts) of the asymptotic SD."""
        if which == "all":
            return float(np.median(np.sqrt(var)))
        if which == "contenders":
            return float(np.median(np.sqrt(var[self.contenders])))
        others = [c for c in self.contenders if c != self.leader]
        return float(np.median(np.sqrt(con[others])))

    def trajectory(self, order):
        """Every target's SD after the first n picks of ``order`` (pool indices), n = STEP,
        2 STEP, ..., as {target: (ns, sds)}."""
        ns = np.arange(STEP, len(order) + 1, STEP)
        cum = {g: np.cumsum(np.einsum("nyi,nyj->nij", self.U["pool"][g][order], self.U["pool"][g][order]), axis=0)
               for g in self.models}
        out = {t: [] for t in TARGETS}
        keep = []
        for n in ns:
            infos = {g: cum[g][n - 1] for g in self.models}
            if min(np.linalg.eigvalsh(I)[0] for I in infos.values()) <= 1e-9:
                continue
            keep.append(n)
            var, con = self.variances(infos)
            for t in TARGETS:
                out[t].append(self.target(var, con, t))
        return {t: (np.array(keep), np.array(v)) for t, v in out.items()}

    # ---- designs ---------------------------------------------------------------------------
    def first_wave(self):
        wave = plan_wave(self.pool, None, FORMS, self.N // WAVES, seed=1)
        return list(self._index(wave["example_id"]))

    def _index(self, ids):
        where = pd.Series(np.arange(len(self.pool)), index=self.pool["example_id"].astype(str))
        return where[list(map(str, ids))].to_numpy()

    def objective(self, which, ref_var, ref_con, subset=None):
        """{g: M_g} of the target's linear objective tr(sum_g M_g Sigma_g): relative variances
        against the fixed design's."""
        M = {}
        for g in self.models:
            G = self.grads[g]
            if which == "all":
                fs = range(len(FORMS)) if subset is None else subset
                M[g] = sum(np.outer(G[f], G[f]) / ref_var[f] for f in fs) / len(fs)
            elif which == "contenders":
                M[g] = sum(np.outer(G[f], G[f]) / ref_var[f] for f in self.contenders) / len(self.contenders)
            else:
                others = [c for c in self.contenders if c != self.leader]
                M[g] = sum(np.outer(G[c] - G[self.leader], G[c] - G[self.leader]) / ref_con[c]
                           for c in others) / len(others)
        return M

    def oracle(self, start, M):
        """The greedy from ``start`` (pool indices) to N answers with the truth plugged in, minimising
        tr(sum_g M_g Sigma_g) (the product's _Design: exact rank-4 updates, lazy greedy); each pool
        example at most once, as an adaptive study asks it."""
        infos = self.info("pool", np.array(start))
        design = _Design([self.U["pool"][g] for g in self.models], [np.linalg.inv(infos[g]) for g in self.models],
                         [M[g] for g in self.models], tuple(self.models))
        free = np.ones(len(self.pool), bool)
        free[start] = False
        gain = np.where(free, design.reductions(), -np.inf)
        fresh = np.zeros(len(self.pool), int)
        order = list(start)
        for t in range(self.N - len(start)):
            while True:
                i = int(np.argmax(gain))
                if fresh[i] == t:
                    break
                cand = np.where(free & (fresh < t), gain, -np.inf)
                m = min(LAZY, int(np.isfinite(cand).sum()))
                block = np.argpartition(-cand, m - 1)[:m]
                gain[block] = design.reductions(block)
                fresh[block] = t
            order.append(i)
            free[i] = False
            gain[i] = -np.inf
            design.add(i)
        return order

    def product(self, start, cell_cap, thetas=None, U=None, **options):
        """The product's criterion (``plan_wave``, defaults, or ``options`` such as ``precision``
        and ``defensive``) planned at the truth, wave by wave: its fits are the pseudo-true
        parameters with the covariance of the design so far (``thetas`` (F, 7 or 8) and the pool's
        information factors ``U`` {model: (P, 4, 7 or 8)} in place of the shape's, e.g. the
        shared-effect model's)."""
        thetas = self.thetas if thetas is None else thetas
        U = self.U["pool"] if U is None else U
        dim = thetas.shape[1]
        order = list(start)
        wave = self.N // WAVES
        n_forms = len(FORMS)
        for look in range(2, WAVES + 1):
            size = min(wave, self.N - len(order)) if look < WAVES else self.N - len(order)
            idx = np.array(order)
            fits = []
            for j in range(n_forms):
                if j in self.models:
                    I = np.einsum("nyi,nyj->ij", U[j][idx], U[j][idx])
                    cov = np.linalg.inv(I)
                else:
                    cov = np.full((dim, dim), np.nan)
                w = self.weights[j]
                fits.append(JointFit(thetas[j], cov, len(idx), True, float(np.log(w)) if w > 0 else -np.inf))
            rows = self.pool.iloc[idx].assign(answer="a_better", worker_id="w")
            study = StudyData(rows.reset_index(drop=True), k=self.k, n_levels=self.n_levels, judgments=self.judgments)
            picked = plan_wave(self.pool, study, FORMS, size, seed=look, fits=fits, reference=self.ref,
                               min_depth=MIN_DEPTH, cell_cap=cell_cap, **options)
            order += list(self._index(picked["example_id"]))
        return order


TARGETS = ("all", "contenders", "contrasts")


def reach(traj, level):
    """The first n from which the trajectory stays at or below ``level`` (None: not by its end)."""
    ns, sds = traj
    above = np.flatnonzero(sds > level * (1 + 1e-9))
    if above.size == 0:
        return int(ns[0])
    if above[-1] == len(ns) - 1:
        return None
    return int(ns[above[-1] + 1])


def run(shape: Shape, mc: int, sim: int = 0, sim_seed: int = 900, cell_cap=CELL_CAP):
    s = shape
    print(f"\n== {s.name}: truth {s.truth_form}; fixed design N = {s.N}; pool {len(s.pool)}; setup CPU "
          f"{s.setup_cpu:.0f} s {note()}")
    print("true b1_std (crowd, reference population): " + ", ".join(
        f"{f} {v:.4f}" for f, v in s.truth.sort_values().items()))
    print("b1_std at the pseudo-true parameters (the model's limit): " + ", ".join(
        f"{FORMS[j]} {s.b1_model[j]:.4f}" for j in np.argsort(s.b1_model)))
    print("Akaike weights (expected, N answers to the fixed design): " + ", ".join(
        f"{FORMS[j]} {s.weights[j]:.3f}" for j in np.argsort(-s.weights) if s.weights[j] > 1e-4))
    print(f"leader {FORMS[s.leader]}; contenders (within {MARGIN} of the least): "
          + ", ".join(FORMS[j] for j in s.contenders))
    fixed_var, fixed_con = s.variances(s.info("fixed"))
    goal = {t: s.target(fixed_var, fixed_con, t) for t in TARGETS}
    start = s.first_wave()
    t0 = time.process_time()
    designs = {}
    for t in TARGETS:
        designs[f"oracle:{t}"] = s.oracle(start, s.objective(t, fixed_var, fixed_con))
    # a median of 8 needs only its 4th and 5th: aim at the 5 formulations the first oracle narrows most
    var1, _ = s.variances(s.info("pool", np.array(designs["oracle:all"])))
    easiest = list(np.argsort(var1 / fixed_var)[:5])
    designs["oracle:all5"] = s.oracle(start, s.objective("all", fixed_var, fixed_con, subset=easiest))
    oracle_cpu = time.process_time() - t0
    t0 = time.process_time()
    designs["product cap 0.25"] = s.product(start, CELL_CAP)
    designs["product no cap"] = s.product(start, None)
    product_cpu = time.process_time() - t0
    trajs = {name: s.trajectory(np.array(order)) for name, order in designs.items()}
    print(f"oracle greedy CPU {oracle_cpu:.0f} s (4 designs), product at the truth {product_cpu:.0f} s (2 designs)")
    print("asymptotic SD of b1_std per formulation at N (fixed | oracle:contenders | product cap 0.25):")
    per = {name: s.variances(s.info("pool", np.array(order))) for name, order in designs.items()}
    for j in np.argsort(s.truth.reindex(FORMS).to_numpy()):
        print(f"  {FORMS[j]:<11} true {s.truth[FORMS[j]]:.4f}  {np.sqrt(fixed_var[j]):.4f} | "
              f"{np.sqrt(per['oracle:contenders'][0][j]):.4f} | {np.sqrt(per['product cap 0.25'][0][j]):.4f}")
    print(f"{'target':<11} {'fixed SD':>9}   " + "   ".join(f"{n:>24}" for n in designs))
    print(f"{'':<11} {'':>9}   " + "   ".join(f"{'SD, var ratio, n/N':>24}" for _ in designs))
    rows = []
    for t in TARGETS:
        cells = []
        for name in designs:
            ns, sds = trajs[name][t]
            at_n = sds[-1]
            n = reach(trajs[name][t], goal[t])
            frac = n / s.N if n is not None else np.nan
            cells.append(f"{at_n:.4f}, {at_n ** 2 / goal[t] ** 2:.2f}, " + (f"{frac:.2f}" if n else "> 1"))
            rows.append({"shape": s.name, "target": t, "design": name, "sd_fixed": goal[t], "sd": at_n,
                         "var_ratio": at_n ** 2 / goal[t] ** 2, "fraction": frac})
        print(f"{t:<11} {goal[t]:9.4f}   " + "   ".join(f"{c:>24}" for c in cells))
    best = {t: min((r for r in rows if r["target"] == t and r["design"].startswith("oracle")),
                   key=lambda r: r["fraction"] if np.isfinite(r["fraction"]) else 9) for t in TARGETS}
    print("best oracle per target (fraction of N to the fixed design's SD; saving): " + "; ".join(
        f"{t} {b['fraction']:.2f} ({b['design']}; saving {1 - b['fraction']:.0%})" for t, b in best.items()))
    if mc:
        per["fixed"] = (fixed_var, fixed_con)
        monte_carlo(s, mc, {"fixed": None, **{name: np.array(designs[name]) for name in
                                              ("oracle:all", "oracle:contenders", "oracle:contrasts", "product cap 0.25")}},
                    per)
    if sim:
        simulate(s, sim, sim_seed, cell_cap, fixed_var, fixed_con, per["product cap 0.25"])
    return rows


def monte_carlo(s: Shape, reps: int, arms: dict, per: dict):
    """SD over ``reps`` simulated studies of each arm's b1_std (independent joint model, each
    study's own Akaike weights; and with the weights held at their expected values, as the delta
    method holds them), answered without and with worker effects, against the asymptotic SD; and
    each target's realised variance ratio to the fixed design's under the same answer process."""
    print(f"-- Monte-Carlo check, {reps} studies an arm and answer process (independent joint model)")
    codes = np.array(CODES, dtype=object)
    kw = {"n_levels": s.n_levels}
    realised = {}
    for process in ("independent", "crowd"):
        for arm, idx in arms.items():
            table = s.fixed if idx is None else s.pool.iloc[idx].reset_index(drop=True)
            src = "fixed" if idx is None else "pool"
            pa, pb = s.phi[src]
            if idx is not None:
                pa, pb = pa[idx], pb[idx]
            shares = s.shares[src] if idx is None else s.shares[src][idx]
            var_a, con_a = per[arm]
            t0 = time.process_time()
            est, held = [], []
            for r in range(reps):
                rng = np.random.default_rng([900 + r, 24, 7])
                if process == "independent":
                    y = (rng.random(len(table))[:, None] > shares.cumsum(axis=1)).sum(axis=1).clip(0, 3)
                    answers = codes[y]
                else:
                    model = crowd(s.truth_form, 900 + r)
                    parts = np.array_split(rng.permutation(len(table)), WAVES)
                    answered = pd.concat([_answer(table.iloc[p], model, s.k, kw, rng, w) for w, p in enumerate(parts)])
                    answers = answered.sort_index()["answer"].to_numpy(object)
                fits = [fit_joint(pa[:, j], pb[:, j], answers) for j in range(len(FORMS))]
                thetas = np.stack([f.theta for f in fits])
                est.append(std_gradients(thetas, s.ref, akaike_weights([f.loglik for f in fits]), min_weight=1.1)[0])
                held.append(std_gradients(thetas, s.ref, s.weights, min_weight=1.1)[0])
            est, held = np.array(est), np.array(held)
            sd, sd_held = est.std(axis=0, ddof=1), held.std(axis=0, ddof=1)
            con = (est - est[:, [s.leader]]).std(axis=0, ddof=1)
            con_held = (held - held[:, [s.leader]]).std(axis=0, ddof=1)
            got = {t: s.target(sd ** 2, con ** 2, t) for t in TARGETS}
            got_held = {t: s.target(sd_held ** 2, con_held ** 2, t) for t in TARGETS}
            realised[process, arm] = got
            asym = {t: s.target(var_a, con_a, t) for t in TARGETS}
            err = est.mean(axis=0) - s.b1_model
            print(f"  {arm:<18} {process:<11} CPU {time.process_time() - t0:.0f} s; target SD over studies "
                  f"(own weights | weights held) / asymptotic: " + "; ".join(
                      f"{t} {got[t]:.4f} | {got_held[t]:.4f} / {asym[t]:.4f}" for t in TARGETS)
                  + "; mean minus the model's limit, contenders: "
                  + ", ".join(f"{FORMS[j]} {err[j]:+.4f}" for j in s.contenders)
                  + f" (MC SE about {np.median(sd[s.contenders]) / np.sqrt(reps):.4f})")
        base = realised[process, "fixed"]
        print(f"  {process}: realised variance ratio to the fixed design (the fraction of N it would need): "
              + "; ".join(f"{arm} " + ", ".join(f"{t} {realised[process, arm][t] ** 2 / base[t] ** 2:.2f}"
                                               for t in TARGETS) for arm in arms if arm != "fixed"))


def _std_estimate(s: Shape, fits):
    b1, _ = std_gradients(np.stack([f.theta for f in fits]), s.ref, akaike_weights([f.loglik for f in fits]),
                          min_weight=1.1)
    return b1


def simulate(s: Shape, reps: int, seed: int, cell_cap, fixed_var, fixed_con, at_truth):
    """Both arms in simulation, the product planning from its own fits (module docstring, 6)."""
    print(f"-- simulated studies, {reps} an arm (seeds {seed}-{seed + reps - 1}), the crowd with worker effects, "
          f"the product's criterion from its own fits (cell cap {cell_cap}); b1_std with each look's warm fits")
    kw = {"n_levels": s.n_levels}
    wave = s.N // WAVES
    est = {"fixed": [], "adaptive": []}
    ns = {}
    t0 = {"fixed": 0.0, "adaptive": 0.0}
    for r in range(reps):
        for arm in est:
            t = time.process_time()
            rng = np.random.default_rng([seed + r, 24, 9])
            model = crowd(s.truth_form, seed + r)
            order = rng.permutation(s.N)
            asked, looks, cache, study, fits = [], [], {}, None, None
            for look in range(1, WAVES + 1):
                n_now = sum(len(a) for a in asked)
                size = wave if look < WAVES else s.N - n_now
                if arm == "fixed":
                    rows = s.fixed.iloc[order[n_now:n_now + size]]
                elif look == 1:
                    rows = s.pool.iloc[s.first_wave()]
                else:
                    rows = plan_wave(s.pool, study, FORMS, size, seed=1000 * r + look, fits=fits, cache=cache,
                                     reference=s.ref, min_depth=MIN_DEPTH, cell_cap=cell_cap).drop(columns="priority")
                asked.append(_answer(rows, model, s.k, kw, rng, look))
                study = StudyData(pd.concat(asked, ignore_index=True), k=s.k, n_levels=s.n_levels,
                                  judgments=s.judgments, name="simulated")
                _, _, fits = _fit_all(study, s.forms, cache)
                looks.append(_std_estimate(s, fits))
                ns[look] = len(study.examples)
            est[arm].append(looks)
            t0[arm] += time.process_time() - t
    n = np.array([ns[look] for look in sorted(ns)])
    out = {}
    for arm in est:
        e = np.array(est[arm])                                     # (reps, looks, F)
        # the spread over studies by the normalised IQR (robust_se), as settle reads replicates:
        # a warm single-run fit can stay on a far local maximum, and one such study would decide
        # a plain SD (the first --sim run's fixed synthetic arm: SD twice the asymptotic)
        sd = robust_se(e)                                          # (looks, F)
        con = robust_se(e - e[:, :, [s.leader]])
        out[arm] = {t: np.array([s.target(sd[i] ** 2, con[i] ** 2, t) for i in range(len(n))]) for t in TARGETS}
        print(f"  {arm:<8} CPU {t0[arm] / reps:.0f} s a study; robust SD over studies at N per formulation: "
              + ", ".join(f"{FORMS[j]} {sd[-1, j]:.4f}" for j in np.argsort(s.truth.reindex(FORMS).to_numpy()))
              + "; mean minus the model's limit, contenders: "
              + ", ".join(f"{FORMS[j]} {e[:, -1, j].mean() - s.b1_model[j]:+.4f}" for j in s.contenders))
    for t in TARGETS:
        goal = out["fixed"][t][-1]
        curve = out["adaptive"][t]
        cross = _crossing(n, curve, goal)
        asym = s.target(fixed_var, fixed_con, t)
        print(f"  {t:<11} fixed SD at N {goal:.4f} (asymptotic {asym:.4f}, ratio {goal / asym:.2f}); adaptive SD at N "
              f"{curve[-1]:.4f} (asymptotic at the truth {s.target(*at_truth, t):.4f}); "
              f"var ratio {curve[-1] ** 2 / goal ** 2:.2f}; adaptive reaches the fixed SD at "
              + (f"{cross / s.N:.2f} of N" if cross else "> N") + "; per look " + " ".join(f"{v:.4f}" for v in curve))


def _crossing(n, curve, goal):
    """Where the curve (log-log between looks) stays at or below ``goal`` from; None if not by its end."""
    above = np.flatnonzero(curve > goal)
    if above.size == 0:
        return float(n[0])
    i = above[-1]
    if i == len(n) - 1:
        return None
    x0, x1, y0, y1 = np.log(n[i]), np.log(n[i + 1]), np.log(curve[i]), np.log(curve[i + 1])
    return float(np.exp(x0 + (np.log(goal) - y0) * (x1 - x0) / (y1 - y0)))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", choices=("ecir", "synthetic"), default=None)
    ap.add_argument("--mc", type=int, default=0, help="simulated studies an arm for the Monte-Carlo check")
    ap.add_argument("--sim", type=int, default=0, help="simulated studies an arm, the product planning from its fits")
    ap.add_argument("--sim-seed", type=int, default=900, help="first seed of --sim")
    ap.add_argument("--cell-cap", type=float, default=CELL_CAP, help="--sim's cell cap (0: none)")
    args = ap.parse_args()
    warnings.simplefilter("ignore", RuntimeWarning)
    print(f"load average at start {os.getloadavg()[0]:.1f}; margin {MARGIN}; cell cap {CELL_CAP}")
    rows = []
    if args.only in (None, "ecir"):
        rows += run(Shape("ECIR 2015 judgments", recover_judgments(), 5, (0, 1, 2), "lin-const"), args.mc, args.sim,
                    args.sim_seed, args.cell_cap or None)
    if args.only in (None, "synthetic"):
        rows += run(Shape("synthetic judgments", synthetic_judgments(), 10, (0, 1, 2, 3), "lin-log2"), args.mc,
                    args.sim, args.sim_seed, args.cell_cap or None)
    print(f"\nload average at end {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
