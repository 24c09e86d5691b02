"""Issue 24: why do concentrated designs lose their promised gain in simulated studies? Designs
drawn once at the truth, answered many times under answer processes that switch one cause on at
a time, against the exact (sandwich) variance each process implies and the Gaussian fold.

Shape: ``bench_adaptive_bound.py``'s ECIR 2015 shape (k = 5, truth lin-const, 8 formulations,
its crowd: intercept -2.5, slope 5, worker SD 0.5, 5% spammers, 20 workers a wave of N/10), its
pseudo-true parameters and expected Akaike weights (held fixed, so b1_std is one functional of
the joint models' parameters for every design). Designs of N = 1,002 answers: ``fixed`` (the
coverage design), ``product`` (``plan_wave`` at the truth, cap 0.25, ``Shape.product``),
``oracle`` (the greedy aimed at the contenders' delta-method variances, ``Shape.oracle``) and
``oracle-fold`` (the greedy aimed at the contenders' Gaussian fold variances, below).

**Answer processes** (each answer's distribution given the latent (u_A, u_B, spammer) is
``_expected_answers``'s per node, i.e. ``simulate.honest_answers``, spammers answering uniformly;
workers as ``adaptive._answer`` assigns them: waves of N/10 in random order, 20 workers a wave,
each a random ceil(size / 20) rows of it):

- ``indep``: every answer its own worker (u and spammer drawn per answer): independent answers
  from the crowd's marginal shares;
- ``u-clustered``: a worker's u shared by all its answers, spammers per answer;
- ``spam-clustered``: u per answer, spammer a property of the worker;
- ``crowd``: both per worker (the product's crowd);
- ``crowd (_answer)``: the product's own ``adaptive._answer``, a check of this generator;
- ``per-list u``: u_A and u_B drawn independently per answer (the within-answer correlation
  removed, each list's marginal satisfaction kept): another truth, its own pseudo-true fit;
- ``no heterogeneity``: u = 0, spammers per answer: the satisfaction curve is a logit of phi.

**Exact figures** (no simulation), per design and process. The joint models carrying weight are
stacked (their estimates share the answers). ``promise``: the criterion's own, per model the
inverse expected information at the pool's pseudo-true theta, models independent
(``bench_adaptive_bound``). ``sandwich``: A^-1 B A^-1 with the bread A the derivative of the
expected score at the design's own limit theta_D (the joint model fitted to the design's expected
shares: the model is misspecified, so its limit depends on the design) and B = sum_x Var(s_x)
(White 1982). ``sandwich+workers``: B plus rho sum_{x != x'} Cov(s_x, s_x' | same worker),
Cov = E_z[m_x(z) m_x'(z)'] - m_x m_x', m_x(z) the expected score of x given the worker's latent
z, rho the chance two rows share a worker (Liang and Zeger 1986); ``sw blocks`` the same with the
models' cross-covariances dropped (as the criterion drops them). ``gauss fold``: the variance of
b1_std itself (not linearised) over 2,000 draws theta ~ N(theta_D, sandwich): b1 = mean
|phi - s*(phi)| folds where the curve crosses the diagonal, which the delta method cannot see.

**Simulated studies** (``--reps R`` a design and process, seeds ``--seed``..): the joint models
carrying weight refitted (one L-BFGS-B run from the pseudo-true theta), b1_std with the weights
held, and its linearisation b1*(f) + sum_g G_fg (theta_g - theta*_g), which has no fold. Printed
per target (all 8, the contenders within the margin of the least, their contrasts with the
leader; the median over them of the SD): every figure as a variance ratio to the fixed design's
under the same process (``realised lin``, ``realised b1``; ``iqr b1`` by the normalised IQR), the
SDs, and the contenders' mean errors against the pool's limit: the design's own limit (the
misspecification), the linearised estimate's and b1_std's (the fold adds the rest). A variance
ratio over R studies is good to about +-2/sqrt(R) in relative terms (+-0.12 at 300).

``product-shared``: the default criterion planned at the truth of the shared-effect joint model,
the analysis's own (its 8 parameters fitted to the crowd's expected shares over the pool, its
expected information and b1_std's gradient in b0-b2 and tau; issue 24, picks).

``oracle-fold``: the Gaussian fold variance V(Sigma) of the contenders' b1_std (relative to the
fixed design's, averaged) is linearised at a design's covariance, dV/dSigma = 1/2 Sigma^-1
E[(x x' - Sigma)(c - E c)^2] Sigma^-1 (the score-function identity for Gaussian draws, on the
curve parameters b0-b2, which alone enter b1_std), and the oracle greedy minimises tr(M Sigma)
from the first wave; three rounds from the product's design (Frank-Wolfe-like). It bounds what
any criterion aware of the fold could gain at the truth.

**Picks and contrasts** (issue 24, pick24). More designs, the product's criterion at the truth
with an option of ``plan_wave``: ``product-contrast`` (``precision="contrasts"``: the precision
term on every formulation's contrast with the leader, open or not), ``product-both``
(``precision="both"``), ``product-defensive`` (``defensive=0.25``: a quarter of every wave in
the coverage order) and ``product-defensive50`` (``defensive=0.5``). For every design and
process the run also prints the argmin pick of the refitted b1_std (weights held) against the
crowd's true b1_std (``Shape.truth``): the share of studies picking within the margin of the true
least and exactly it (Clopper-Pearson 95%), McNemar's exact test against the fixed design paired
by answer seed, how often each formulation is picked, and every formulation's contrast with the
true least: its mean, its SD over studies and its variance ratio to the fixed design (realised
b1_std, realised linearised, exact sandwich+workers). ``--forms five`` runs
``bench_adaptive_coverage.py``'s five formulations (lin-const, lin-log5, lin-log3, lin-log2,
exp2-zipf; coverage design N = 1,000) in place of the eight.

**Analysed as the product analyses** (issue 24, picks; ``--analysis estimated,shared``). The
designs stay planned at the truth; each answer set is analysed again: ``estimated`` fits every
formulation's independent joint model (one L-BFGS-B run from the pseudo-true theta) and computes
b1_std with that answer set's own Akaike weights; ``shared`` fits the shared-effect joint model
(``fit_joint_shared`` from that independent fit, as ``calibrate`` does by default) with its own
weights. For each, the run prints the weights' spread over answer sets (mean, SD, 10/50/90%,
which model carries the most; with ``shared`` the fitted tau's) and the picks and contrasts as above, paired by answer seed with
the fixed design under the same analysis.

    OPENBLAS_NUM_THREADS=1 python benchmarks/bench_adaptive_workers.py [--reps 300] [--seed 900]
        [--processes indep,crowd,...] [--designs fixed,product,oracle,oracle-fold,product-contrast,...]
        [--forms eight|five] [--analysis held,estimated,shared]
"""
import argparse
import os
import sys
import time
import warnings

import numpy as np
import pandas as pd
from scipy.optimize import minimize
from scipy.special import expit

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _context import note  # noqa: E402
from bench_adaptive import FORMS, WAVES  # noqa: E402
from bench_adaptive_bound import Shape  # noqa: E402

from satcal.analysis.adaptive import (CELL_CAP, _answer, _answer_shares as cond_shares, _jacobian, _k,  # noqa: E402
                                      _levels, std_gradients)
from satcal.analysis.joint import (BOUNDS, CODES, JointFit, _collapse_rows, _negloglik_and_gradient,  # noqa: E402
                                   fit_joint, fit_joint_shared)
from satcal.analysis.standardise import akaike_weights, standardised_curves  # noqa: E402
from satcal.analysis.core import bias_indicators  # noqa: E402
from satcal.datasets import recover_judgments  # noqa: E402
from satcal.measures import formulation as parse, score_lists  # noqa: E402

NODES = 24
#: Draws of the Gaussian approximation for the folded b1_std.
DRAWS = 2000
PROCESSES = ("indep", "u-clustered", "spam-clustered", "crowd", "crowd (_answer)", "per-list u", "no heterogeneity")


# ---- the answer process given the latent ----------------------------------------------------
class Process:
    """An answer process: honest latent nodes (ua, ub, weight), spammer share, and which parts
    of the latent a worker carries over its answers."""

    def __init__(self, name, model):
        self.name, self.model = name, model
        z, w = np.polynomial.hermite_e.hermegauss(NODES)
        w = w / w.sum()
        sd = model.heterogeneity
        if name == "per-list u":
            self.ua, self.ub = np.repeat(sd * z, NODES), np.tile(sd * z, NODES)
            self.w = np.outer(w, w).ravel()
        elif name == "no heterogeneity":
            self.ua = self.ub = np.zeros(1)
            self.w = np.ones(1)
        else:
            self.ua = self.ub = sd * z
            self.w = w
        self.spam = model.spammers
        self.u_worker = name in ("u-clustered", "crowd", "crowd (_answer)")
        self.spam_worker = name in ("spam-clustered", "crowd", "crowd (_answer)")

    def shares(self, ta, tb):
        """(n, 4) marginal shares."""
        return (1 - self.spam) * cond_shares(ta, tb, self.model, self.ua, self.ub) @ self.w + self.spam / 4

    def worker_states(self, ta, tb):
        """Worker-level latent states: (n, 4, Z) shares given z and (Z,) weights (one state with
        weight 1 when nothing is carried over)."""
        honest_u = cond_shares(ta, tb, self.model, self.ua, self.ub)                 # (n, 4, K)
        honest = honest_u @ self.w                                                   # (n, 4)
        uniform = np.full(honest.shape, 0.25)
        if self.u_worker and self.spam_worker:
            r = np.concatenate([honest_u, uniform[..., None]], axis=2)
            return r, np.append((1 - self.spam) * self.w, self.spam)
        if self.u_worker:
            return (1 - self.spam) * honest_u + self.spam * uniform[..., None], self.w
        if self.spam_worker:
            return np.stack([honest, uniform], axis=2), np.array([1 - self.spam, self.spam])
        return self.shares(ta, tb)[..., None], np.ones(1)

    def draw(self, table, ta, tb, rng, seed):
        """Answer codes (n,) for the rows of ``table``: waves of N/10 in random order, workers as
        ``_answer`` assigns them."""
        n = len(ta)
        if self.name == "crowd (_answer)":
            from bench_adaptive import crowd
            model = crowd(self.model.formulation, seed)
            parts = np.array_split(rng.permutation(n), WAVES)
            kw = {"n_levels": 3}
            answered = pd.concat([_answer(table.iloc[p], model, _k(table), kw, rng, w) for w, p in enumerate(parts)])
            ans = answered.sort_index()["answer"].to_numpy(object)
            return np.select([ans == c for c in CODES], range(4), -1)
        who = worker_ids(n, self.model.workers, rng)
        n_w = who.max() + 1
        sd = self.model.heterogeneity
        if self.name == "no heterogeneity":
            ua = ub = np.zeros(n)
        elif self.name == "per-list u":
            ua, ub = rng.normal(0, sd, n), rng.normal(0, sd, n)
        else:
            ua = rng.normal(0, sd, n_w)[who] if self.u_worker else rng.normal(0, sd, n)
            ub = ua
        spam = (rng.random(n_w) < self.spam)[who] if self.spam_worker else rng.random(n) < self.spam
        p = cond_shares(ta, tb, self.model, ua[:, None], ub[:, None])[..., 0]       # (n, 4)
        p[spam] = 0.25
        return (rng.random(n)[:, None] > p.cumsum(axis=1)).sum(axis=1).clip(0, 3)


def worker_ids(n, workers, rng):
    """Worker of each row: waves of n/10 rows in random order, ``workers`` a wave, each worker a
    random ceil(size / workers) rows of its wave (``adaptive._answer``)."""
    order = rng.permutation(n)
    who = np.empty(n, int)
    base = 0
    for part in np.array_split(order, WAVES):
        per = max(1, int(np.ceil(len(part) / workers)))
        n_w = max(1, int(np.ceil(len(part) / per)))
        who[part] = base + rng.permutation(np.repeat(np.arange(n_w), per)[:len(part)])
        base += n_w
    return who


def pair_rate(n, workers):
    """The chance two distinct rows share a worker under :func:`worker_ids` (exact)."""
    pairs = 0
    for part in np.array_split(np.arange(n), WAVES):
        per = max(1, int(np.ceil(len(part) / workers)))
        sizes = np.bincount(np.repeat(np.arange(int(np.ceil(len(part) / per))), per)[:len(part)])
        pairs += int((sizes * (sizes - 1)).sum())
    return pairs / (n * (n - 1))


# ---- one design under one process -----------------------------------------------------------
class Case:
    """A design (its rows, their scores) under a process: limits and exact variances."""

    def __init__(self, shape: Shape, process: Process, table, thetas_star):
        s = self.s = shape
        self.table, self.process = table, process
        k = _k(table)
        f_true = [parse(s.truth_form)]
        self.ta = score_lists(_levels(table, "a", k), f_true, n_levels=s.n_levels)[:, 0]
        self.tb = score_lists(_levels(table, "b", k), f_true, n_levels=s.n_levels)[:, 0]
        self.pa = score_lists(_levels(table, "a", k), s.forms, n_levels=s.n_levels)
        self.pb = score_lists(_levels(table, "b", k), s.forms, n_levels=s.n_levels)
        self.q = process.shares(self.ta, self.tb)                                   # (n, 4)
        self.theta_star = thetas_star                                               # (F, 7) the pool's limit
        codes = np.repeat(np.array(CODES, dtype=object)[None], len(table), axis=0).ravel()
        self.theta_d = thetas_star.copy()
        for g in s.models:   # the design's own limit: the joint model fitted to its expected shares
            self.theta_d[g] = fit_joint(np.repeat(self.pa[:, g], 4), np.repeat(self.pb[:, g], 4), codes,
                                        self.q.ravel() * 10.0).theta

    def _scores(self, g, theta):
        p, jac = _jacobian(theta, self.pa[:, g], self.pb[:, g])
        return jac / p[..., None]                                                    # (n, 4, 7)

    def exact(self):
        """Stacked sandwich covariance of the weighted models' estimates (independent answers,
        and with the worker pairs), and the promise (per model inverse expected information at
        the pool's limit, models independent)."""
        s, models = self.s, self.s.models
        m = len(models)
        A = np.zeros((7 * m, 7 * m))
        scores = []
        for i, g in enumerate(models):
            sc = self._scores(g, self.theta_d[g])
            scores.append(sc)
            # bread: minus the derivative of the expected score sum_x sum_y q s(theta)
            for j in range(7):
                e = np.zeros(7)
                e[j] = 1e-4
                up = np.einsum("ny,nyi->i", self.q, self._scores(g, self.theta_d[g] + e))
                down = np.einsum("ny,nyi->i", self.q, self._scores(g, self.theta_d[g] - e))
                A[7 * i:7 * i + 7, 7 * i + j] = -(up - down) / 2e-4
        A = (A + A.T) / 2
        S = np.concatenate(scores, axis=2)                                          # (n, 4, 7m)
        mx = np.einsum("ny,nyi->ni", self.q, S)
        B_ind = np.einsum("ny,nyi,nyj->ij", self.q, S, S) - mx.T @ mx
        r, wz = self.process.worker_states(self.ta, self.tb)                       # (n, 4, Z), (Z,)
        mz = np.einsum("nyz,nyi->nzi", r, S)                                         # (n, Z, 7m)
        Sz = mz.sum(axis=0)                                                          # (Z, 7m)
        Sbar = mx.sum(axis=0)
        within = np.einsum("z,nzi,nzj->ij", wz, mz, mz) - mx.T @ mx
        cross = np.einsum("z,zi,zj->ij", wz, Sz, Sz) - np.outer(Sbar, Sbar) - within
        rho = pair_rate(len(self.table), s.model.workers)
        Ainv = np.linalg.inv(A)
        cov_ind = Ainv @ B_ind @ Ainv
        cov_clu = Ainv @ (B_ind + rho * cross) @ Ainv
        promise = np.zeros_like(A)
        for i, g in enumerate(models):
            p, jac = _jacobian(s.thetas[g], self.pa[:, g], self.pb[:, g])
            U = jac / np.sqrt(p)[..., None]
            promise[7 * i:7 * i + 7, 7 * i:7 * i + 7] = np.linalg.inv(np.einsum("nyi,nyj->ij", U, U))
        G = np.concatenate([s.grads[g] for g in models], axis=1)                     # (F, 7m)
        out = {}
        blocks = np.kron(np.eye(m), np.ones((7, 7)))   # each model's own block: the models taken as independent
        for name, cov in (("promise", promise), ("info, cross", np.linalg.inv(A)), ("sandwich", cov_ind),
                          ("sandwich+workers", cov_clu), ("sw blocks", cov_clu * blocks)):
            var = np.einsum("fi,ij,fj->f", G, cov, G)
            D = G - G[s.leader]
            out[name] = (var, np.einsum("fi,ij,fj->f", D, cov, D), cov)
        # the fold: b1_std of draws theta ~ N(theta_D, Sigma_D) (the Gaussian approximation, no
        # refits), so b1 = mean |phi - s*(phi)| keeps its non-linearity at the floor
        rng = np.random.default_rng(24)
        for name, cov in (("gauss fold", cov_ind), ("gauss fold+workers", cov_clu)):
            L = np.linalg.cholesky(cov + 1e-12 * np.eye(len(cov)))
            draws = np.repeat(self.theta_d[None], DRAWS, axis=0)
            z = rng.standard_normal((DRAWS, 7 * m)) @ L.T
            for i, g in enumerate(models):
                draws[:, g] += z[:, 7 * i:7 * i + 7]
            e = held_b1(s, draws)
            out[name] = (e.var(axis=0), (e - e[:, [s.leader]]).var(axis=0))
        b1_d = held_b1(s, self.theta_d[None])[0]
        return out, b1_d

    def simulate(self, reps, seed, analyses=("held",)):
        """(reps, F) b1_std (weights held) and its linearisation, refitting the weighted models;
        and a dict of the other ``analyses`` (:data:`ANALYSES`) on the same answer sets, each
        (b1_std (reps, F), Akaike weights (reps, F)), and for ``shared`` tau (reps, F)."""
        s = self.s
        every = [a for a in analyses if a != "held"]
        fit_all = range(len(FORMS)) if every else s.models
        thetas = np.repeat(self.theta_star[None], reps, axis=0)
        ll = np.full((reps, len(FORMS)), np.nan)
        shared = np.zeros((reps, len(FORMS), 8)) if "shared" in every else None
        ll_shared = np.full((reps, len(FORMS)), np.nan)
        for r in range(reps):
            rng = np.random.default_rng([seed + r, 24, 11])
            code = self.process.draw(self.table, self.ta, self.tb, rng, seed + r)
            for g in fit_all:
                args = _collapse_rows(self.pa[:, g], self.pb[:, g], code, np.ones(code.size))
                run = minimize(_negloglik_and_gradient, self.theta_star[g], args=args, jac=True,
                               method="L-BFGS-B", bounds=BOUNDS, options={"maxiter": 500})
                thetas[r, g], ll[r, g] = run.x, -run.fun
                if shared is not None:   # the product's own fit (calibrate's default), from this one
                    fit = fit_joint_shared(self.pa[:, g], self.pb[:, g], np.asarray(CODES, object)[code],
                                           independent=JointFit(run.x, np.full((7, 7), np.nan), code.size,
                                                                True, -run.fun))
                    shared[r, g], ll_shared[r, g] = fit.theta, fit.loglik
        b1 = held_b1(s, thetas)
        lin = s.b1_model + sum(np.einsum("fi,ri->rf", s.grads[g], thetas[:, g] - s.thetas[g]) for g in s.models)
        other = {}
        if "estimated" in every:
            w = akaike_weights(ll)
            other["estimated"] = (own_b1(s, thetas, w), w)
        if shared is not None:
            w = akaike_weights(ll_shared)
            other["shared"] = (own_b1(s, shared, w), w, shared[..., 7])
        return b1, lin, other


def fold_objective(s: Shape, order, targets, ref_var, draws=4000, seed=7):
    """The Gaussian fold variance of ``targets``' b1_std (relative to ``ref_var``, averaged) under
    the design ``order`` (pool indices; model-based covariance, models independent), and its
    derivative M_g = dV / dSigma_g (7, 7) by the score-function identity for Gaussian draws,
    dV / dSigma = 1/2 Sigma^-1 E[(x x' - Sigma)(c - E c)^2] Sigma^-1 (x the curve parameters'
    deviation): only b0, b1, b2 enter b1_std, so M lives on their block."""
    rng = np.random.default_rng(seed)
    idx = np.array(order)
    blocks = {}
    for g in s.models:
        cov = np.linalg.inv(np.einsum("nyi,nyj->ij", s.U["pool"][g][idx], s.U["pool"][g][idx]))
        blocks[g] = np.linalg.cholesky(cov[:3, :3])
    m = len(s.models)
    z = rng.standard_normal((draws, 3 * m))
    th = np.repeat(s.thetas[None], draws, axis=0)
    for i, g in enumerate(s.models):
        th[:, g, :3] += z[:, 3 * i:3 * i + 3] @ blocks[g].T
    c = held_b1(s, th)[:, targets]
    dev = (c - c.mean(axis=0)) ** 2 / ref_var[targets]
    obj = dev.mean(axis=1)                                                           # (K,)
    E = np.einsum("k,ki,kj->ij", obj, z, z) / draws - obj.mean() * np.eye(3 * m)
    M = {}
    for i, g in enumerate(s.models):
        Linv = np.linalg.inv(blocks[g])
        Mg = np.zeros((7, 7))
        Mg[:3, :3] = 0.5 * Linv.T @ E[3 * i:3 * i + 3, 3 * i:3 * i + 3] @ Linv
        M[g] = (Mg + Mg.T) / 2
    return float(obj.mean()), M


def oracle_fold(s: Shape, start, first, rounds=3):
    """The oracle for the contenders' folded b1_std: the greedy with the truth plugged in,
    minimising the linearisation tr(sum_g M_g Sigma_g) of their Gaussian fold variance at the last
    design's covariance, from ``first`` (a design), ``rounds`` times (a Frank-Wolfe-like iteration)."""
    # the fixed design's fold variances as the reference (its own Gaussian approximation)
    fixed_info = s.info("fixed")
    draws = 4000
    rng = np.random.default_rng(5)
    th = np.repeat(s.thetas[None], draws, axis=0)
    for g in s.models:
        L = np.linalg.cholesky(np.linalg.inv(fixed_info[g])[:3, :3])
        th[:, g, :3] += rng.standard_normal((draws, 3)) @ L.T
    ref_var = held_b1(s, th).var(axis=0)
    order = list(first)
    for r in range(rounds):
        v, M = fold_objective(s, order, s.contenders, ref_var, seed=11 + r)
        print(f"  oracle-fold round {r}: contenders' mean relative fold variance {v:.3f}")
        order = s.oracle(start, M)
    v, _ = fold_objective(s, order, s.contenders, ref_var, seed=99)
    print(f"  oracle-fold final: {v:.3f}")
    return order


#: The product's criterion at the truth with a plan_wave option (pick24).
OPTION_DESIGNS = {"product-contrast": {"precision": "contrasts"}, "product-both": {"precision": "both"},
                  "product-defensive": {"defensive": 0.25}, "product-defensive50": {"defensive": 0.5}}
#: bench_adaptive_coverage.py's five formulations (``--forms five``).
FIVE = ["lin-const", "lin-log5", "lin-log3", "lin-log2", "exp2-zipf"]


def picks_report(s: Shape, res: dict):
    """The argmin pick of each simulated study's b1_std against the crowd's true b1_std, and every
    formulation's contrast with the true least, per design (module docstring)."""
    from scipy.stats import binomtest
    from satcal.analysis.adaptive import MARGIN
    truth = s.truth.reindex(FORMS).to_numpy(float)
    least = int(np.argmin(truth))
    near = truth <= truth[least] + MARGIN
    print(f"  picks: true least {FORMS[least]} {truth[least]:.4f}; within the margin "
          + ", ".join(FORMS[j] for j in np.flatnonzero(near)) + "; the others "
          + ", ".join(f"{FORMS[j]} {truth[j]:.4f}" for j in np.flatnonzero(~near)))
    f_b1 = res["fixed"][2]
    f_ok = near[np.argmin(f_b1, axis=1)]
    f_ex, f_lin = res["fixed"][0]["sandwich+workers"], res["fixed"][3]
    for dname, (ex, _, b1, lin) in res.items():
        pick = np.argmin(b1, axis=1)
        ok, exact = near[pick], pick == least
        R = len(pick)
        ci = binomtest(int(ok.sum()), R).proportion_ci(0.95, method="exact")
        cie = binomtest(int(exact.sum()), R).proportion_ci(0.95, method="exact")
        m = len(f_ok) if len(f_ok) == R else 0
        if m and dname != "fixed":
            b, c = int((ok & ~f_ok).sum()), int((~ok & f_ok).sum())
            mc = f"; against fixed by seed: {b} right only here, {c} only fixed, McNemar p " + (
                f"{binomtest(b, b + c).pvalue:.3f}" if b + c else "1")
        else:
            mc = ""
        print(f"  {dname:<19} within the margin {ok.sum()}/{R} ({ci.low:.3f}-{ci.high:.3f}), exactly "
              f"{exact.sum()}/{R} ({cie.low:.3f}-{cie.high:.3f}){mc}; picked "
              + ", ".join(f"{FORMS[j]} {int((pick == j).sum())}" for j in range(len(FORMS)) if (pick == j).any()))
        con = b1 - b1[:, [least]]
        f_con = f_b1 - f_b1[:, [least]]
        lcon, f_lcon = lin - lin[:, [least]], f_lin - f_lin[:, [least]]
        G = np.concatenate([s.grads[g] for g in s.models], axis=1)
        D = G - G[least]
        cov = _stack_cov(ex["sandwich+workers"])
        f_cov = _stack_cov(f_ex)
        cells = []
        for j in range(len(FORMS)):
            if j == least:
                continue
            exact_r = (D[j] @ cov @ D[j]) / (D[j] @ f_cov @ D[j]) if cov is not None and f_cov is not None else np.nan
            cells.append(f"{FORMS[j]} {con[:, j].mean():+.4f} sd {con[:, j].std(ddof=1):.4f} ratio "
                         f"{con[:, j].var(ddof=1) / f_con[:, j].var(ddof=1):.2f} (lin {lcon[:, j].var(ddof=1) / f_lcon[:, j].var(ddof=1):.2f}, "
                         f"exact {exact_r:.2f})")
        print(f"  {'':<19} contrast with {FORMS[least]}: " + "; ".join(cells))
        lv = np.median(b1.var(axis=0, ddof=1) / f_b1.var(axis=0, ddof=1))
        lvn = np.median((b1.var(axis=0, ddof=1) / f_b1.var(axis=0, ddof=1))[near])
        print(f"  {'':<19} level variance ratio to fixed (b1_std, median over all {len(FORMS)} / over the "
              f"{near.sum()} within the margin): {lv:.2f} / {lvn:.2f}")


#: How each answer set is analysed (``--analysis``).
ANALYSES = {"held": "the Akaike weights held at their expected values, independent joint models",
            "estimated": "each answer set's own Akaike weights, independent joint models",
            "shared": "each answer set's own Akaike weights, shared-effect joint models (calibrate's default)"}


def weights_report(s: Shape, weights: dict):
    """The estimated Akaike weights' spread over answer sets, per design: each formulation's mean,
    SD and 10/50/90% quantiles, and how often each carries the largest weight."""
    print(f"  {'':<19} expected (held) weights: " + ", ".join(f"{f} {w:.2f}" for f, w in zip(FORMS, s.weights)))
    for dname, w in weights.items():
        q = np.quantile(w, [0.1, 0.5, 0.9], axis=0)
        top = np.bincount(np.argmax(w, axis=1), minlength=len(FORMS))
        print(f"  {dname:<19} weights mean (SD) [10/50/90%]: " + "; ".join(
            f"{f} {w[:, j].mean():.2f} ({w[:, j].std(ddof=1):.2f}) [{q[0, j]:.2f}/{q[1, j]:.2f}/{q[2, j]:.2f}]"
            for j, f in enumerate(FORMS)) + "; largest weight " + ", ".join(
            f"{f} {top[j]}" for j, f in enumerate(FORMS) if top[j]))


def _stack_cov(pair):
    """The stacked covariance kept by :meth:`Case.exact` under ``"cov"`` (None if absent)."""
    return pair[2] if len(pair) > 2 else None


def iqr(e, leader):
    """Variances by the normalised IQR (robust to a refit stuck on a far maximum)."""
    from satcal.analysis.bootstrap import robust_se
    return robust_se(e) ** 2, robust_se(e - e[:, [leader]]) ** 2


def own_b1(s: Shape, thetas, weights):
    """(R, F) b1_std of R answer sets' parameters (R, F, 7 or 8), each with its own Akaike
    weights (R, F): the product's analysis."""
    out = np.empty(weights.shape)
    for r in range(len(thetas)):
        curves, _ = standardised_curves(thetas[r], s.ref, weights[r])
        out[r] = np.asarray(bias_indicators(curves, curves)["b1"], float)
    return out


def held_b1(s: Shape, thetas):
    """(B, F) b1_std of (B, F, 7) parameters, the Akaike weights held at the shape's."""
    curves, _ = standardised_curves(thetas, s.ref, s.weights)
    return np.asarray(bias_indicators(curves, curves)["b1"], float).reshape(len(thetas), -1)


def pseudo_true(s: Shape, process: Process):
    """(F, 7) the joint models fitted to the process's expected shares over the pool."""
    k = _k(s.pool)
    f = [parse(s.truth_form)]
    ta = score_lists(_levels(s.pool, "a", k), f, n_levels=s.n_levels)[:, 0]
    tb = score_lists(_levels(s.pool, "b", k), f, n_levels=s.n_levels)[:, 0]
    q = process.shares(ta, tb)
    codes = np.repeat(np.array(CODES, dtype=object)[None], len(s.pool), axis=0).ravel()
    pa, pb = s.phi["pool"]
    out = s.thetas.copy()
    for g in s.models:
        out[g] = fit_joint(np.repeat(pa[:, g], 4), np.repeat(pb[:, g], 4), codes, q.ravel() * 10.0).theta
    return out


def shared_truth(s: Shape):
    """(F, 8) the shared-effect joint models fitted to the crowd's expected shares over the pool
    (those carrying weight; the others at tau = 0), and their pool information factors
    {g: (P, 4, 8)}: the truth the ``product-shared`` design is planned at."""
    codes = np.repeat(np.array(CODES, dtype=object)[None], len(s.pool), axis=0).ravel()
    pa, pb = s.phi["pool"]
    thetas = np.concatenate([s.thetas, np.zeros((len(s.thetas), 1))], axis=1)
    U = {}
    for g in s.models:
        thetas[g] = fit_joint_shared(np.repeat(pa[:, g], 4), np.repeat(pb[:, g], 4), codes,
                                     s.shares["pool"].ravel() * 10.0).theta
        p, jac = _jacobian(thetas[g], pa[:, g], pb[:, g])
        U[g] = jac / np.sqrt(p)[..., None]
    print("  shared-effect pseudo-true tau: " + ", ".join(f"{FORMS[g]} {thetas[g, 7]:.2f}" for g in s.models))
    return thetas, U


def target(s: Shape, var, con, which):
    if which == "all":
        return float(np.median(np.sqrt(var)))
    if which == "contenders":
        return float(np.median(np.sqrt(var[s.contenders])))
    return float(np.median(np.sqrt(con[[c for c in s.contenders if c != s.leader]])))


TARGETS = ("all", "contenders", "contrasts")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=300)
    ap.add_argument("--seed", type=int, default=900)
    ap.add_argument("--processes", default=",".join(PROCESSES))
    ap.add_argument("--designs", default="fixed,product,oracle,oracle-fold")
    ap.add_argument("--forms", choices=("eight", "five"), default="eight",
                    help="bench_adaptive's 8 formulations, or bench_adaptive_coverage's 5 (N = 1,000)")
    ap.add_argument("--analysis", default="held",
                    help="comma-separated: held (the Akaike weights held at their expected values), "
                         "estimated (each answer set's own weights, independent joint models), shared "
                         "(its own weights, the shared-effect joint models: calibrate's default)")
    args = ap.parse_args()
    analyses = ["held"] + [a for a in args.analysis.split(",") if a != "held"]
    if any(a not in ANALYSES for a in analyses):
        ap.error(f"--analysis takes {', '.join(ANALYSES)}")
    if args.forms == "five":   # one list object shared with bench_adaptive and bench_adaptive_bound
        FORMS[:] = FIVE
    warnings.simplefilter("ignore", RuntimeWarning)
    print(f"load average at start {os.getloadavg()[0]:.1f} {note()}")
    t0 = time.process_time()
    s = Shape("ECIR 2015 judgments", recover_judgments(), 5, (0, 1, 2), "lin-const")
    start = s.first_wave()
    fixed_var, fixed_con = s.variances(s.info("fixed"))
    designs = {}
    names = args.designs.split(",")
    if "fixed" in names:
        designs["fixed"] = s.fixed
    if "product" in names:
        designs["product"] = s.pool.iloc[s.product(start, CELL_CAP)].reset_index(drop=True)
    if "oracle-fold" in names:
        designs["oracle-fold"] = s.pool.iloc[oracle_fold(s, start, s.product(start, CELL_CAP))].reset_index(drop=True)
    for name, options in OPTION_DESIGNS.items():
        if name in names:
            designs[name] = s.pool.iloc[s.product(start, CELL_CAP, **options)].reset_index(drop=True)
    if "product-shared" in names:
        thetas, U = shared_truth(s)
        designs["product-shared"] = s.pool.iloc[s.product(start, CELL_CAP, thetas=thetas, U=U)].reset_index(drop=True)
    if "oracle" in names:
        designs["oracle"] = s.pool.iloc[s.oracle(start, s.objective("contenders", fixed_var, fixed_con))].reset_index(drop=True)
    print(f"setup and designs CPU {time.process_time() - t0:.0f} s; N = {s.N}; models carrying weight "
          + ", ".join(f"{FORMS[g]} {s.weights[g]:.2f}" for g in s.models)
          + f"; contenders {', '.join(FORMS[j] for j in s.contenders)}; leader {FORMS[s.leader]}")
    rows = []
    for pname in args.processes.split(","):
        proc = Process(pname, s.model)
        star = s.thetas if pname not in ("per-list u", "no heterogeneity") else pseudo_true(s, proc)
        b1_star = held_b1(s, star[None])[0]
        print(f"\n== process {pname}: pool limit b1_std of the contenders "
              + ", ".join(f"{FORMS[j]} {b1_star[j]:.4f}" for j in s.contenders))
        res, other = {}, {}
        for dname, table in designs.items():
            t = time.process_time()
            case = Case(s, proc, table, star)
            if pname in ("per-list u", "no heterogeneity"):
                case.s = _rebased(s, star)
            ex, b1_d = case.exact()
            b1, lin, other[dname] = case.simulate(args.reps, args.seed, analyses)
            res[dname] = (ex, b1_d, b1, lin)
            print(f"  {dname:<8} CPU {time.process_time() - t:.0f} s")
        for dname, (ex, b1_d, b1, lin) in res.items():
            fx, _, fb1, flin = res["fixed"]
            for t in TARGETS:
                def ratio(v, c, fv, fc):
                    return target(s, v, c, t) ** 2 / target(s, fv, fc, t) ** 2
                sd = lambda e: (e.var(axis=0, ddof=1), (e - e[:, [s.leader]]).var(axis=0, ddof=1))  # noqa: E731
                row = {"process": pname, "design": dname, "target": t,
                       "promise": ratio(*ex["promise"][:2], *fx["promise"][:2]),
                       "sandwich": ratio(*ex["sandwich"][:2], *fx["sandwich"][:2]),
                       "sandwich+workers": ratio(*ex["sandwich+workers"][:2], *fx["sandwich+workers"][:2]),
                       "sw blocks": ratio(*ex["sw blocks"][:2], *fx["sw blocks"][:2]),
                       "gauss fold": ratio(*ex["gauss fold"], *fx["gauss fold"]),
                       "gauss fold+workers": ratio(*ex["gauss fold+workers"], *fx["gauss fold+workers"]),
                       "realised lin": ratio(*sd(lin), *sd(flin)),
                       "realised b1": ratio(*sd(b1), *sd(fb1)),
                       "sd promise": target(s, *ex["promise"][:2], t),
                       "sd info": target(s, *ex["info, cross"][:2], t),
                       "sd sandwich": target(s, *ex["sandwich"][:2], t),
                       "sd exact": target(s, *ex["sandwich+workers"][:2], t),
                       "sd fold": target(s, *ex["gauss fold+workers"], t),
                       "sd lin": target(s, *sd(lin), t), "sd b1": target(s, *sd(b1), t),
                       "iqr b1": target(s, *iqr(b1, s.leader), t) ** 2 / target(s, *iqr(fb1, s.leader), t) ** 2}
                rows.append(row)
            star_b1 = held_b1(s, (star if pname in ("per-list u", "no heterogeneity") else s.thetas)[None])[0]
            c = s.contenders
            print(f"  {dname:<8} contenders: limit of the design minus the pool's "
                  + ", ".join(f"{(b1_d - star_b1)[j]:+.4f}" for j in c)
                  + "; mean error lin " + ", ".join(f"{(lin.mean(0) - star_b1)[j]:+.4f}" for j in c)
                  + "; mean error b1 " + ", ".join(f"{(b1.mean(0) - star_b1)[j]:+.4f}" for j in c)
                  + f" (MC SE {np.median(b1[:, c].std(0)) / np.sqrt(len(b1)):.4f})")
        table = pd.DataFrame([r for r in rows if r["process"] == pname]).drop(columns="process")
        print(table.to_string(index=False, float_format=lambda v: f"{v:.4f}" if v < 0.1 else f"{v:.2f}"))
        shape = s if pname not in ("per-list u", "no heterogeneity") else _rebased(s, star)
        picks_report(shape, res)
        for a in analyses[1:]:
            print(f"  -- the same answer sets analysed as the product does: {ANALYSES[a]}")
            weights_report(s, {d: other[d][a][1] for d in res})
            if a == "shared":   # the shared effect's SD, which the criterion's independent model lacks
                for d in res:
                    tau = other[d][a][2]
                    print(f"  {d:<19} tau mean (SD) [10/50/90%]: " + "; ".join(
                        f"{FORMS[g]} {tau[:, g].mean():.2f} ({tau[:, g].std(ddof=1):.2f}) ["
                        + "/".join(f"{v:.2f}" for v in np.quantile(tau[:, g], [0.1, 0.5, 0.9])) + "]"
                        for g in range(len(FORMS))))
            picks_report(shape, {d: (ex, b1_d, other[d][a][0], lin) for d, (ex, b1_d, _, lin) in res.items()})
    print(f"\nload average at end {os.getloadavg()[0]:.1f}; CPU {time.process_time() - t0:.0f} s")


def _rebased(s: Shape, star):
    """The shape with another truth's pseudo-true parameters and their gradients (weights held)."""
    import copy
    out = copy.copy(s)
    out.thetas = star
    out.b1_model, out.grads = std_gradients(star, s.ref, s.weights)
    out.grads = {g: out.grads[g] for g in s.models}
    return out


if __name__ == "__main__":
    main()
