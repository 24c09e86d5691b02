"""Adaptive studies: ask the next question where the answer is still open, and stop when the
ranking of formulations is settled.

Three pieces, used between waves of answers (``export --next-batch``) or page by page
(``satcal serve``):

1. **A pool** of candidate examples (:func:`candidate_pool`): pattern pairs the judgments can
   build (the generator's machinery), every feasible phi and |dphi| cell of every formulation
   represented, the rest drawn at random, made concrete with documents.
2. **A design criterion** (:func:`example_priorities`, :func:`plan_wave`). By default it targets
   the standardised b1_std (:mod:`.standardise`), whose estimand does not depend on the design:
   b1_std(f) depends on the answers through the curve parameters of the joint models g
   (:mod:`.joint`) that carry the satisfaction model's Akaike weight, so by the delta method
   Var b1_std(f) = sum_g G_fg' Sigma_g G_fg, G_fg its gradient in theta_g (:func:`std_gradients`)
   and Sigma_g the model's inverse observed information. The criterion (``criterion=
   "information"``, :func:`_design_std`) is L-optimal: it lowers

       Phi = spread / F sum_f Var b1_std(f) / Var_0 b1_std(f)
             + 1 / C sum_c o_c Var(b1_std(c) - b1_std(L)) / Var_0(c - L),

   the relative variances of every formulation's b1_std (the interval widths;
   ``"information-sum"``: their sum over its value now, A-optimal on the b1_std vector) and of
   the open contrasts between the leader L and its contenders c (what the stopping rule reads), o_c a
   contrast's openness 2 Phi(-(|d_c| + margin) / sd_c). One more answer at example x adds its
   expected Fisher information I_x = sum_y J_y J_y' / p_y (J the Jacobian of the four outcome
   probabilities) to each model's information; the covariance then falls by the exact rank-4
   Woodbury update, and an example's priority is the fall of Phi (Chaloner and Verdinelli 1995).
   A wave is a greedy sequential design: after each pick every model's covariance takes the
   pick's information and the reductions are recomputed (lazily: the best stale ones until the
   best is fresh). ``criterion="influence"`` keeps the earlier first-order version: the
   preposterior variance E_y[(psi_c(y; x) - psi_L(y; x))^2] of each contrast, psi_f(y; x) =
   sum_g G_fg' Sigma_g grad log p_g(y | x), relative to the contrast's sandwich variance and
   weighted by its openness, plus ``spread`` times the formulations' own, with the cells' decay
   (n / (n + added))^2 within a wave. ``target="b1_joint"`` runs the influence criterion on each
   formulation's own b1_joint = mean |phi - s_f(phi)|. Examples that land in a cell (phi or
   |dphi|, any formulation) holding fewer than ``min_depth`` answers rank before all others, so
   every curve stays estimable and the model can be checked. With no answers the priorities are
   space-filling: every cell is short, and :func:`plan_wave` fills the shortest.
3. **A stopping rule** (:func:`settle`): bootstrap comparisons of the leader with every other
   formulation up to an indifference margin (Bechhofer 1954), alpha spending over looks; on
   b1_std its replicates are the calibration's, each mixing the joint models with its own Akaike
   weights (:func:`std_replicates`). See its docstring for
   exactly what it controls.

:func:`simulate_adaptive_study` runs a whole study in simulation (waves, a simulated crowd with
worker effects, new workers every wave, the calibration and the rule after every wave), for the
benchmark and the tests.

References
----------
Chaloner, K. and Verdinelli, I. (1995). Bayesian experimental design: a review. Statistical
Science 10(3).
Carterette, B., Allan, J. and Sitaraman, R. (2006). Minimal test collections for retrieval
evaluation. SIGIR.
Lan, K. K. G. and DeMets, D. L. (1983). Discrete sequential boundaries for clinical trials.
Biometrika 70(3).
Gupta, S. S. (1965). On some multiple decision (selection and ranking) rules. Technometrics 7(2).
Jennison, C. and Turnbull, B. W. (2000). Group Sequential Methods with Applications to Clinical
Trials. Chapman and Hall/CRC.
Bechhofer, R. E. (1954). A single-sample multiple decision procedure for ranking means of normal
populations with known variances. Annals of Mathematical Statistics 25(1).
Minoux, M. (1978). Accelerated greedy algorithms for maximizing submodular set functions. In
Optimization Techniques, Lecture Notes in Control and Information Sciences 7. Springer.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable

import numpy as np
import pandas as pd
from scipy.special import expit
from scipy.stats import norm

from ..answers import StudyData
from ..errors import SatcalError
from ..measures import bin_index, resolve_formulations, score_lists
from .bootstrap import robust_se
from .core import GRID

__all__ = ["candidate_pool", "example_priorities", "pool_cells", "plan_wave", "expected_information", "Settlement", "settle", "alpha_spending",
           "std_replicates", "default_indicator", "MARGIN", "contrast_openness",
           "population_truth", "standardised_truth", "simulate_adaptive_study", "SPENDING"]

#: Priority offset of an example landing in a cell below ``min_depth``: it ranks first.
SHORT_FIRST = 1000.0
#: Default answers a cell must hold before the criterion may pass it by.
MIN_DEPTH = 10
#: At most this many contenders when ``contenders`` is None (those whose contrast with the
#: leader is still open, 2 Phi(-|d| / sd) > OPEN).
MAX_CONTENDERS, OPEN = 8, 1e-3
#: The criterion for b1_std follows the joint models whose Akaike weight exceeds this.
MODEL_WEIGHT = 0.01
#: What the criterion targets by default: the standardised b1 (design-free), or b1_joint.
TARGETS = ("b1_std", "b1_joint")
#: The criteria for b1_std: the exact expected information of one more answer, the models'
#: covariances updated after every pick of a wave, its precision term the mean relative variance
#: of every b1_std (default) or A-optimal on the vector of b1_std (``information-sum``: the sum of
#: their variances, the widest intervals counting most; not measurably better, docs/adaptive.md);
#: or the first-order influence with the cells' decay within a wave (the first criterion).
CRITERIA = ("information", "information-sum", "influence")
#: How a contrast's openness is weighed (:func:`_open_contrasts`): ``"stop"`` (default) the
#: stopping rule's question, ``"pick"`` also the argmin pick's.
OPENNESS = ("stop", "pick")
#: The precision term of the ``information`` criteria (:func:`_design_std`): ``"levels"``
#: (default) every formulation's b1_std variance; ``"contrasts"`` the variance of every
#: formulation's contrast with the leader (open or not: the argmin pick's question); ``"both"``
#: half of each.
PRECISION = ("levels", "contrasts", "both")
#: The joint model the criterion fits between waves (``model=``): the independent one (default,
#: 7 parameters, :func:`~.joint.fit_joint`) or the shared-effect one the analysis fits by default
#: (8 parameters, tau last, :func:`~.joint.fit_joint_shared`).
MODELS = ("independent", "shared")
#: Stale reductions recomputed at a time by plan_wave's lazy greedy.
LAZY_BLOCK = 256
#: Default share of a wave any one phi or |dphi| cell of the formulations the criterion reads
#: (the joint models carrying weight, the leader, its contenders) may take (plan_wave's
#: ``cell_cap``): the Gaussian-model greedy would put a wave on a few support points.
CELL_CAP = 0.25
#: Priority taken off an example whose cells are at the wave's cap: it comes after every other.
CAPPED = 1e5
#: Default indifference margin of the stopping rule, in b1 units (a mean absolute gap between
#: phi and the satisfaction curve): formulations whose indicators differ by less count as tied.
#: Half a percentage point of satisfaction probability averaged over [0, 1]; on the ECIR 2015
#: answers lin-const, lin-log5 and lin-log3 differ by less (docs/adaptive.md).
MARGIN = 0.005
#: Alpha-spending families (Lan and DeMets 1983).
SPENDING = ("obrien-fleming", "pocock")


# --------------------------------------------------------------------------------------------
# The pool
# --------------------------------------------------------------------------------------------
def candidate_pool(judgments, k: int, levels, formulations, n: int, seed: int, *,
                   overlap: str = "allow", n_bins: int = 10) -> pd.DataFrame:
    """A large pool of candidate examples an adaptive study chooses from.

    Built with the coverage generator's machinery (:mod:`satcal.generate`): candidate relevance
    patterns and the pattern pairs some query can build; then, for every feasible phi and |dphi|
    cell of every formulation, pairs landing in it (about ``n / 2`` examples spread evenly over
    the cells, at least one per cell), the rest drawn uniformly among the buildable pairs; last,
    documents of the right levels from a query able to host the pair (queries used evenly).

    Parameters
    ----------
    judgments : Judgments
    k : int
        Documents per list.
    levels : sequence of int
        Relevance levels lists are built from; the top one is the ``max`` normalisation's.
    formulations : list or None
        Formulations whose cells the pool covers (default the 36 study formulations).
    n : int
        Examples in the pool (at least one per feasible cell is kept even when that is more).
    seed : int
    overlap : {"allow", "disjoint"}, default "allow"
        Whether lists A and B of an example may share documents (``[generator] overlap``).
    n_bins : int, default 10
        Equal-width bins of phi (and of |dphi|) over [0, 1] that make the cells.

    Returns
    -------
    DataFrame with the columns of the generator's examples table (``example_id, query, a1..ak,
    b1..bk, ra1..rak, rb1..rbk``); ``example_id`` is ``px<number>``, unique, and the same for the
    same inputs and seed. ``attrs`` records ``top_level`` and ``n_bins``.
    """
    from ..generate import (Design, _availability, _candidate_pairs, _candidate_patterns, _examples_table,
                            _realise, _requirements)
    if n < 1:
        raise SatcalError(f"candidate_pool: n must be at least 1, got {n}")
    design = Design(k=k, levels=levels, formulations=formulations, n_bins=n_bins, min_per_cell=1,
                    overlap=overlap, seed=seed)
    rng = np.random.default_rng([seed, 24])
    queries, avail = _availability(judgments, design.levels)
    if len(queries) == 0 or avail.sum(axis=1).max() < k:
        raise SatcalError(f"candidate_pool: no query has {k} judged documents at levels {list(design.levels)}")
    patterns, exhaustive = _candidate_patterns(design, avail, rng)
    need = _requirements(patterns, design.levels)
    scores = score_lists(patterns, design.formulations, top_level=design.top_level)   # (P, F)
    pa, pb, can, _ = _candidate_pairs(need, avail, overlap, rng, exhaustive)
    if len(pa) == 0:
        raise SatcalError("candidate_pool: the judgments cannot build any pair of lists")
    chosen = np.zeros(len(pa), dtype=np.int64)
    cells = _cell_ids(scores[pa], scores[pb], n_bins).ravel()                          # (pairs * 3F,)
    order = np.argsort(cells, kind="stable")
    members = order // (3 * scores.shape[1])                                           # the pair of each entry
    starts = np.searchsorted(cells[order], np.arange(2 * scores.shape[1] * n_bins + 1))
    sizes = np.diff(starts)
    feasible = np.flatnonzero(sizes > 0)
    quota = max(1, (n // 2) // max(len(feasible), 1))
    for cell in feasible:
        lo, hi = starts[cell], starts[cell + 1]
        pick = rng.integers(lo, hi, size=min(quota, hi - lo))
        np.add.at(chosen, members[pick], 1)
    rest = n - int(chosen.sum())
    if rest > 0:
        np.add.at(chosen, rng.integers(0, len(pa), rest), 1)
    records, _, _ = _realise(pa, pb, chosen, patterns, can, queries, judgments.docs_by_level(), design, rng)
    pool = _examples_table(records, k)
    width = len(str(len(pool)))
    pool["example_id"] = [f"px{i + 1:0{width}d}" for i in range(len(pool))]
    pool.attrs.update(top_level=design.top_level, n_bins=n_bins)
    return pool


def _cell_ids(phi_a, phi_b, n_bins):
    """Global cell ids (n, 3F): phi cells of formulation j are j*n_bins + bin (A and B alike),
    |dphi| cells F*n_bins + j*n_bins + bin."""
    f = phi_a.shape[1]
    shift = np.arange(f) * n_bins
    return np.hstack([bin_index(phi_a, n_bins) + shift, bin_index(phi_b, n_bins) + shift,
                      bin_index(np.abs(phi_a - phi_b), n_bins) + shift + f * n_bins])


# --------------------------------------------------------------------------------------------
# The criterion
# --------------------------------------------------------------------------------------------
def _scale(pool: pd.DataFrame, study: StudyData | None, top_level: int | None) -> dict:
    """score_lists' scale keywords: the study's (as calibrate scores it), else the pool's."""
    if study is not None:
        return {"n_levels": study.n_levels}
    if top_level is None:
        top_level = pool.attrs.get("top_level")
    if top_level is None:
        k = _k(pool)
        top_level = int(pool[[f"r{s}{i}" for s in "ab" for i in range(1, k + 1)]].to_numpy().max())
    return {"top_level": top_level}


def _k(table: pd.DataFrame) -> int:
    return sum(1 for c in table.columns if c.startswith("ra") and c[2:].isdigit())


def _levels(table: pd.DataFrame, side: str, k: int) -> np.ndarray:
    return table[[f"r{side}{i}" for i in range(1, k + 1)]].to_numpy(float)


def _b1_and_gradient(theta: np.ndarray, grid: np.ndarray = GRID):
    """b1 = mean over the grid of |x - s(x)|, s = expit(b0 + b1 x + b2 x^2), and its gradient in
    the 7 joint-model parameters (zero beyond the curve's three)."""
    X = np.stack([np.ones_like(grid), grid, grid ** 2], axis=1)
    s = expit(X @ theta[:3])
    b1 = float(np.abs(grid - s).mean())
    g = np.zeros(theta.size)
    g[:3] = (-np.sign(grid - s) * s * (1 - s)) @ X / grid.size
    return b1, g


def _influence(theta, h, phi_a, phi_b, eps: float = 1e-5):
    """(n, 4) outcome probabilities p and their derivatives D along direction h (central
    differences): psi(y) = D_y / p_y is an answer's first-order influence on g' theta when
    h = Sigma g."""
    from .joint import joint_probabilities
    scale = eps / max(float(np.abs(h).max()), 1e-12)
    p = joint_probabilities(theta, phi_a, phi_b)
    up = joint_probabilities(theta + scale * h, phi_a, phi_b)
    down = joint_probabilities(theta - scale * h, phi_a, phi_b)
    return np.maximum(p, 1e-12), (up - down) / (2 * scale)


@dataclass
class _Parts:
    """What a priority is made of, per pool example."""

    ids: np.ndarray           # (P,) example ids
    cells: np.ndarray         # (P, 3F) global cell ids
    counts: np.ndarray        # (cells,) answers in each cell so far
    info: np.ndarray          # (P,) the information term (>= 0)
    min_depth: int
    jitter: np.ndarray        # (P,) seeded tie-breaker in [0, 1e-9)
    leader: str | None = None
    contenders: tuple = ()
    design: "_Design | None" = None   # the exact criterion's state (criterion="information")


def _study_cells(study: StudyData, forms, n_bins: int, n_cells: int) -> np.ndarray:
    """Answers so far in every cell (phi cells count lists, A and B; |dphi| cells answers)."""
    from .core import collapse_study
    types = collapse_study(study, forms)
    ids = _cell_ids(types.phi_a, types.phi_b, n_bins)
    return np.bincount(ids.ravel(), weights=np.repeat(types.counts, ids.shape[1]), minlength=n_cells)


def _fit_all(study: StudyData, forms, cache: dict | None = None, model: str = "independent"):
    """The joint fit of every formulation: in full (several starts, :func:`~.joint.fit_joint`),
    or, for a formulation whose fit ``cache`` holds from an earlier call, one run from it
    (:func:`_warm_fit`); ``cache`` then gets the new fits. With ``model="shared"`` the fits are
    the analysis's own (``calibrate``'s default): :func:`~.joint.fit_joint` in full, then
    :func:`~.joint.fit_joint_shared` from it (its starts over tau, its maximum check and its
    inverse observed information on 8 parameters); no warm start, so the criterion reads the
    fits the calibration of the same answers makes."""
    from .joint import fit_joint, fit_joint_shared
    types, code = _types_code(study, forms)
    fits = []
    for j, f in enumerate(forms):
        args = (types.phi_a[:, j], types.phi_b[:, j], types.answers, types.counts)
        if model == "shared":
            fits.append(fit_joint_shared(*args, independent=fit_joint(*args)))
            continue
        old = cache.get(f.id) if cache is not None else None
        fit = _warm_fit(old, *args) if old is not None else fit_joint(*args)
        fits.append(fit)
        if cache is not None:
            cache[f.id] = fit
    return types, code, fits


def _warm_fit(previous, phi_a, phi_b, answers, counts):
    """One L-BFGS-B run of the joint model from an earlier fit's parameters, the covariance from
    central differences of the analytic gradient: a refit between waves costs a few dozen
    likelihood evaluations instead of six runs and a numerical Hessian. It can stay on a local
    maximum the multi-start fit would leave; the calibration itself always multi-starts."""
    from scipy.optimize import minimize
    from .joint import BOUNDS, CODES, JointFit, _collapse_rows, _covariance, _negloglik_and_gradient
    answers = np.asarray(answers, dtype=object)
    code = np.select([answers == c for c in CODES], range(len(CODES)), -1)
    args = _collapse_rows(np.asarray(phi_a, float), np.asarray(phi_b, float), code, np.asarray(counts, float))
    run = minimize(_negloglik_and_gradient, previous.theta, args=args, jac=True, method="L-BFGS-B",
                   bounds=BOUNDS, options={"maxiter": 500})
    theta, step = run.x, 1e-5
    hess = np.empty((theta.size, theta.size))
    for i in range(theta.size):
        e = np.zeros(theta.size)
        e[i] = step
        hess[i] = (_negloglik_and_gradient(theta + e, *args)[1] - _negloglik_and_gradient(theta - e, *args)[1]) / (2 * step)
    hess = (hess + hess.T) / 2
    return JointFit(theta, _covariance(hess), int(np.sum(counts)), bool(run.success), -float(run.fun))


def _information(pool_a, pool_b, study: StudyData, forms, contenders, spread: float, fits=None, cache=None):
    """The information term of every pool example (module docstring), the leader and the
    contenders."""
    types, code, fits_ = _fit_all(study, forms, cache) if fits is None else (*_types_code(study, forms), fits)
    n_f = len(forms)
    b1 = np.empty(n_f)
    grads, hs, usable = [], [], np.ones(n_f, bool)
    for j, fit in enumerate(fits_):
        b1[j], g = _b1_and_gradient(fit.theta)
        h = fit.cov @ g if np.isfinite(fit.cov).all() else np.zeros_like(g)
        usable[j] = np.isfinite(h).all() and np.abs(h).max() > 0
        grads.append(g)
        hs.append(h if usable[j] else np.zeros_like(g))
    rows = np.arange(code.size)
    # influence of every observed answer row, per formulation, for the sandwich variances
    psi_obs = np.zeros((n_f, code.size))
    pool_p, pool_d = [], []
    for j, fit in enumerate(fits_):
        if not usable[j]:
            pool_p.append(None)
            pool_d.append(None)
            continue
        p, d = _influence(fit.theta, hs[j], types.phi_a[:, j], types.phi_b[:, j])
        psi_obs[j] = d[rows, code] / p[rows, code]
        pp, dd = _influence(fit.theta, hs[j], pool_a[:, j], pool_b[:, j])
        pool_p.append(pp)
        pool_d.append(dd)
    w_rows = types.counts
    var = (w_rows * psi_obs ** 2).sum(axis=1)
    ok = usable & (var > 0)
    order = np.argsort(np.where(ok, b1, np.inf), kind="stable")
    info = np.zeros(pool_a.shape[0])
    if not ok.any():
        return info, None, ()
    lead = int(order[0])
    # each formulation's own b1 variance: the spread term
    if spread > 0:
        own = np.zeros_like(info)
        for j in np.flatnonzero(ok):
            own += (pool_d[j] ** 2 / pool_p[j]).sum(axis=1) / var[j]
        info += spread * own / ok.sum()
    # the open contrasts with the leader
    diffs = []
    for c in np.flatnonzero(ok):
        if c == lead:
            continue
        var_d = float((w_rows * (psi_obs[c] - psi_obs[lead]) ** 2).sum())
        if var_d <= 0:
            continue
        openness = 2 * norm.sf(abs(b1[c] - b1[lead]) / np.sqrt(var_d))
        diffs.append((openness, c, var_d))
    diffs.sort(key=lambda t: -t[0])
    limit = contenders - 1 if contenders is not None else MAX_CONTENDERS - 1
    chosen = [t for t in diffs if contenders is not None or t[0] > OPEN][:max(limit, 0)]
    for openness, c, var_d in chosen:
        p_mix = (pool_p[c] + pool_p[lead]) / 2
        psi_c, psi_l = pool_d[c] / pool_p[c], pool_d[lead] / pool_p[lead]
        # averaged over the contenders, so the two terms weigh alike whatever their number
        info += openness * (p_mix * (psi_c - psi_l) ** 2).sum(axis=1) / var_d / len(chosen)
    names = [f.id for f in forms]
    return info, names[lead], tuple(names[c] for _, c, _ in chosen)


def _jacobian(theta, phi_a, phi_b, eps: float = 1e-5):
    """(n, 4) outcome probabilities p and their Jacobian (n, 4, 7) in the joint parameters
    (central differences); with 8 parameters, the shared-effect model's (n, 4, 8) (tau last,
    :func:`~satcal.analysis.joint.shared_probabilities`)."""
    from .joint import joint_probabilities, shared_probabilities
    theta = np.asarray(theta, float)
    probs = shared_probabilities if theta.size == 8 else joint_probabilities
    p = probs(theta, phi_a, phi_b)
    jac = np.empty(p.shape + (theta.size,))
    for i in range(theta.size):
        e = np.zeros(theta.size)
        e[i] = eps
        jac[..., i] = (probs(theta + e, phi_a, phi_b) - probs(theta - e, phi_a, phi_b)) / (2 * eps)
    return np.maximum(p, 1e-12), jac


def expected_information(theta, phi_a, phi_b, counts=None) -> np.ndarray:
    """The expected Fisher information of the joint model at ``theta`` carried by answers to
    the examples (phi_a, phi_b): I = sum_x n_x sum_y J_xy J_xy' / p_xy, J_xy the gradient of
    outcome y's probability at example x in the 7 parameters (the I_x that :func:`plan_wave`'s
    criterion adds one answer at a time, :class:`_Design`). Its inverse is the asymptotic
    covariance of the joint model's maximum-likelihood estimate when the model holds and answers
    are independent (worker effects make them not; docs/adaptive.md, "What the bound says").

    Parameters
    ----------
    theta : array_like
        The joint model's 7 parameters (fitting scale).
    phi_a, phi_b : array_like
        The examples' scores (n,) under the model's formulation.
    counts : array_like, optional
        Answers per example (default one each).

    Returns
    -------
    numpy.ndarray
        (7, 7).
    """
    p, jac = _jacobian(theta, np.asarray(phi_a, float), np.asarray(phi_b, float))
    U = jac / np.sqrt(p)[..., None]
    n = np.ones(U.shape[0]) if counts is None else np.asarray(counts, float)
    return np.einsum("n,nyi,nyj->ij", n, U, U)


def std_gradients(thetas, ref_phi, weights, *, min_weight: float = MODEL_WEIGHT, step: float = 1e-4):
    """b1_std of every formulation and its gradient in the curve parameters of each joint model
    that carries weight in the satisfaction model S = sum_g w_g s_g.

    b1_std(f) depends on the data through S only, so through the curve parameters (b0, b1, b2;
    and tau, whose average over the shared effect bends the curve, for the shared-effect model's
    8 parameters) of the models g with w_g > 0 (the weights' own dependence on the data is left
    out: with thousands of answers they move little at first order). Central differences of
    :func:`~satcal.analysis.standardise.standardised_curves` over the whole batch of perturbed
    parameters at once; b1 over [0, 1].

    Parameters
    ----------
    thetas : array_like
        Joint-model parameters (F, 7), or the shared-effect model's (F, 8).
    ref_phi : numpy.ndarray
        Reference lists' scores (N, F).
    weights : array_like
        Akaike weights (F,).
    min_weight : float, optional
        Models of smaller weight get no gradient (default :data:`MODEL_WEIGHT`).
    step : float, optional
        Finite-difference step (default 1e-4).

    Returns
    -------
    tuple
        b1_std (F,), and a dict {model index g: gradient (F, 7) of every formulation's b1_std in
        theta_g}.
    """
    from .core import bias_indicators
    from .standardise import standardised_curves
    thetas = np.asarray(thetas, float)
    weights = np.asarray(weights, float)
    models = [int(g) for g in np.flatnonzero(weights > min_weight)]
    # the parameters the curve s_g depends on; tau is perturbed from max(tau, step) so that a
    # fit at tau = 0 (its bound) still gets a one-sided difference inside the box
    curve = (0, 1, 2, 7) if thetas.shape[1] == 8 else (0, 1, 2)
    batch = [thetas]
    for g in models:
        for i in curve:
            for sign in (1.0, -1.0):
                t = thetas.copy()
                if i == 7:
                    t[g, 7] = max(t[g, 7], step)
                t[g, i] += sign * step
                batch.append(t)
    curves, _ = standardised_curves(np.stack(batch), ref_phi, weights)
    b1 = np.asarray(bias_indicators(curves, curves)["b1"], float)                   # (1 + 2 C M, F)
    grads = {}
    c = len(curve)
    for m, g in enumerate(models):
        grad = np.zeros((thetas.shape[0], thetas.shape[1]))
        for j, i in enumerate(curve):
            up, down = b1[1 + 2 * c * m + 2 * j], b1[2 + 2 * c * m + 2 * j]
            grad[:, i] = (up - down) / (2 * step)
        grads[g] = grad
    return b1[0], grads


def contrast_openness(d, sd, margin: float, openness: str = "stop"):
    """How open a contrast with the leader is, the weight the design criterion gives it.

    ``"stop"`` (default): o = min(1, 2 Phi(-(|d| + margin) / sd)), the stopping rule's question
    (can the contrast still come out beyond the margin the other way?); it falls fast once sd is
    small against |d| + margin, even for a contrast just beyond the margin whose sign the argmin
    pick still gets wrong. ``"pick"``: o = max(o_stop, Phi((|d| - margin) / sd) 2 Phi(-|d| / sd)),
    adding the probability that the contrast is beyond the margin (so a wrong pick between the
    two matters) times the probability that the estimate's sign is wrong (the two-sided p of
    d = 0; so the pick can be wrong). At |d| = margin = sd the pick term is 0.5 x 0.317 = 0.159
    against 2 Phi(-2) = 0.046; at sd = margin / 2, 0.023 against 6e-5.

    Parameters
    ----------
    d : float or array
        The estimated contrast b1(c) - b1(leader).
    sd : float or array
        Its standard deviation (> 0).
    margin : float
        The indifference margin (>= 0).
    openness : {"stop", "pick"}, optional
        Which openness (above).

    Returns
    -------
    float or array in [0, 1].
    """
    if openness not in OPENNESS:
        raise SatcalError(f"openness must be one of {', '.join(OPENNESS)}, got {openness!r}")
    a = np.abs(d)
    stop = np.minimum(1.0, 2 * norm.sf((a + margin) / sd))
    if openness == "stop":
        return stop
    return np.maximum(stop, norm.cdf((a - margin) / sd) * 2 * norm.sf(a / sd))


def _open_contrasts(b1, ok, lead, margin, contenders, variance_of, openness: str = "stop") -> list:
    """The contrasts with the leader a design criterion works on: for each usable formulation c
    (``ok``) but the leader, its openness (:func:`contrast_openness`; ``"stop"``:
    min(1, 2 Phi(-(|b1_c - b1_lead| + margin) / sd))) with
    sd^2 = ``variance_of(c)`` (the variance of b1_c - b1_lead; contrasts without one are
    skipped), most open first; the ``contenders`` - 1 most open, or every one above
    :data:`OPEN` up to :data:`MAX_CONTENDERS` - 1. Returns (openness, c, variance) triples."""
    diffs = []
    for c in np.flatnonzero(ok):
        if c == lead:
            continue
        var_d = variance_of(c)
        if var_d <= 0:
            continue
        diffs.append((float(contrast_openness(b1[c] - b1[lead], np.sqrt(var_d), margin, openness)), c, var_d))
    diffs.sort(key=lambda t: -t[0])
    limit = contenders - 1 if contenders is not None else MAX_CONTENDERS - 1
    return [t for t in diffs if contenders is not None or t[0] > OPEN][:max(limit, 0)]


def _information_std(pool_a, pool_b, study: StudyData, forms, contenders, spread: float, reference,
                     margin: float, fits=None, cache=None, openness: str = "stop", model: str = "independent"):
    """The information term for the standardised b1_std (docs/adaptive.md): as
    :func:`_information`, but every formulation's b1_std moves through the joint models that
    carry the satisfaction model's weight, so an answer's influence on b1_std(f) is

        psi_f(y; x) = sum_g G_fg' Sigma_g grad log p_g(y | x),

    G_fg the gradient of b1_std(f) in theta_g (:func:`std_gradients`), and y ~ the weighted
    mixture of the models' answer probabilities. Openness of a contrast counts the margin:
    2 Phi(-(d + margin) / sd). ``model``: the joint model fitted (:data:`MODELS`)."""
    from .standardise import akaike_weights
    types, code, fits_ = (_fit_all(study, forms, cache, model) if fits is None
                          else (*_types_code(study, forms), fits))
    n_f = len(forms)
    thetas = np.stack([f.theta for f in fits_])
    weights = akaike_weights([f.loglik for f in fits_])
    b1, grads = std_gradients(thetas, reference, weights)
    rows = np.arange(code.size)
    psi_obs = np.zeros((code.size, n_f))
    psi_pool = np.zeros((pool_a.shape[0], 4, n_f))
    p_mix, total = 0.0, 0.0
    for g, grad in grads.items():
        cov = fits_[g].cov
        if not np.isfinite(cov).all():
            continue
        A = cov @ grad.T                                                              # (7 or 8, F)
        p, jac = _jacobian(fits_[g].theta, types.phi_a[:, g], types.phi_b[:, g])
        psi_obs += (jac[rows, code] / p[rows, code][:, None]) @ A
        pp, pj = _jacobian(fits_[g].theta, pool_a[:, g], pool_b[:, g])
        psi_pool += (pj / pp[..., None]) @ A
        p_mix, total = p_mix + weights[g] * pp, total + weights[g]
    info = np.zeros(pool_a.shape[0])
    if total == 0:
        return info, None, ()
    p_mix = p_mix / total
    w_rows = types.counts
    var = (w_rows[:, None] * psi_obs ** 2).sum(axis=0)                               # (F,)
    ok = np.isfinite(b1) & (var > 0)
    if not ok.any():
        return info, None, ()
    lead = int(np.argsort(np.where(ok, b1, np.inf), kind="stable")[0])
    if spread > 0:
        own = (p_mix[..., None] * psi_pool[:, :, ok] ** 2).sum(axis=1) / var[ok]       # (P, F ok)
        info += spread * own.mean(axis=1)
    chosen = _open_contrasts(b1, ok, lead, margin, contenders,
                             lambda c: float((w_rows * (psi_obs[:, c] - psi_obs[:, lead]) ** 2).sum()), openness)
    for openness, c, var_d in chosen:
        info += openness * (p_mix * (psi_pool[:, :, c] - psi_pool[:, :, lead]) ** 2).sum(axis=1) / var_d / len(chosen)
    names = [f.id for f in forms]
    return info, names[lead], tuple(names[c] for _, c, _ in chosen)


@dataclass
class _Design:
    """The exact criterion's state (``criterion="information"``): per joint model g that carries
    weight, the expected-information factors U_g of every pool example (P, 4, 7), its current
    covariance Sigma_g (7, 7) and the weight matrix M_g (7, 7) of the L-optimal objective
    tr(sum_g M_g Sigma_g)."""

    U: list
    sigma: list
    M: list
    models: tuple = ()   # the formulation index of each model (its place among the formulations)

    def reductions(self, idx=None) -> np.ndarray:
        """Each pool example's (or those of ``idx``) reduction of the objective from one more
        answer.

        The expected Fisher information of one answer at x is I_x = U U' (U = J / sqrt(p), J the
        Jacobian of the 4 outcome probabilities), so by the Woodbury identity the covariance after
        it is Sigma - Sigma U (I + U' Sigma U)^{-1} U' Sigma, and the objective falls by
        tr((I + V)^{-1} U' Sigma M Sigma U), V = U' Sigma U."""
        out = 0.0
        for U, S, M in zip(self.U, self.sigma, self.M):
            U = U if idx is None else U[idx]
            A = U @ S                                                                  # (P, 4, 7)
            V = A @ np.swapaxes(U, 1, 2) + np.eye(U.shape[1])                           # (P, 4, 4)
            B = A @ M @ np.swapaxes(A, 1, 2)                                            # (P, 4, 4)
            out = out + np.trace(np.linalg.solve(V, B), axis1=1, axis2=2)
        return np.maximum(np.asarray(out, float), 0.0)

    def add(self, i: int) -> None:
        """Pool example i is asked: every model's covariance takes its expected information."""
        for m, (U, S) in enumerate(zip(self.U, self.sigma)):
            A = U[i] @ S                                                                # (4, 7)
            V = A @ U[i].T + np.eye(U.shape[1])
            self.sigma[m] = S - A.T @ np.linalg.solve(V, A)


def _design_std(pool_a, pool_b, study: StudyData, forms, contenders, spread: float, reference,
                margin: float, fits=None, cache=None, relative: bool = True, openness: str = "stop",
                precision: str = "levels", model: str = "independent"):
    """The exact expected-information criterion for b1_std (docs/adaptive.md, "The criterion").

    b1_std(f) = c(theta) depends on the answers through the curve parameters of the joint models
    g that carry Akaike weight; its delta-method variance is sum_g G_fg Sigma_g G_fg' (G_fg from
    :func:`std_gradients`, Sigma_g the model's inverse observed information). The design
    minimises, greedily one answer at a time, the L-optimal objective

        Phi(Sigma) = spread / F sum_f Var(b1_std(f)) / Var_0(f)
                     + 1 / C sum_c o_c Var(b1_std(c) - b1_std(L)) / Var_0(c - L),

    the relative variances of every formulation's b1_std (what the interval widths are made of;
    with ``relative`` false, ``criterion="information-sum"``, their sum over its value now,
    spread sum_f Var(f) / sum_f Var_0(f), A-optimal on the b1_std vector: the widest count most)
    and of the open contrasts with the leader L (what the stopping rule reads), o_c the
    contrast's openness 2 Phi(-(|d_c| + margin) / sd_c) (or ``openness="pick"``'s,
    :func:`contrast_openness`), Var_0 the variances now. With ``precision="contrasts"`` the
    first term is spread / (F - 1) sum_{f != L} Var(b1_std(f) - b1_std(L)) / Var_0(f - L)
    instead, every formulation's contrast with the leader whether open or not (what the argmin
    pick reads); ``"both"`` takes half of each. Phi is linear
    in the Sigma_g, Phi = sum_g tr(M_g Sigma_g), and one answer at x lowers each Sigma_g by the
    exact rank-4 update of its expected information (:meth:`_Design.reductions`). With
    ``model="shared"`` the models are the shared-effect fits (:func:`_fit_all`), and Sigma_g,
    G_fg and the information are on their 8 parameters (tau's information from the Jacobian of
    the shared-effect answer probabilities, :func:`_jacobian`). Returns the design state, the
    leader and the contenders."""
    from .standardise import akaike_weights
    _, _, fits_ = _fit_all(study, forms, cache, model) if fits is None else (*_types_code(study, forms), fits)
    thetas = np.stack([f.theta for f in fits_])
    weights = akaike_weights([f.loglik for f in fits_])
    b1, grads = std_gradients(thetas, reference, weights)
    models = [g for g in grads if np.isfinite(fits_[g].cov).all()]
    if not models:
        return None, None, ()
    var = sum(np.einsum("fi,ij,fj->f", grads[g], fits_[g].cov, grads[g]) for g in models)   # (F,)
    ok = np.isfinite(b1) & (var > 0)
    if not ok.any():
        return None, None, ()
    lead = int(np.argsort(np.where(ok, b1, np.inf), kind="stable")[0])
    chosen = _open_contrasts(b1, ok, lead, margin, contenders, lambda c: float(sum(
        (grads[g][c] - grads[g][lead]) @ fits_[g].cov @ (grads[g][c] - grads[g][lead]) for g in models)), openness)
    # every usable formulation's contrast with the leader and its variance now (precision "contrasts")
    var_c = sum(np.einsum("fi,ij,fj->f", grads[g] - grads[g][lead], fits_[g].cov, grads[g] - grads[g][lead])
                for g in models)
    others = np.flatnonzero(ok & (var_c > 0) & (np.arange(len(b1)) != lead))
    U, sigma, M = [], [], []
    for g in models:
        G = grads[g][ok]
        m = np.zeros((G.shape[1],) * 2)
        if spread > 0 and precision != "contrasts":
            if relative:   # sum_f Var_f / Var_0(f) / F: every formulation's log-variance alike
                level = (G.T / var[ok]) @ G / ok.sum()
            else:          # sum_f Var_f / sum_f Var_0(f): A-optimal on the b1_std vector
                level = G.T @ G / var[ok].sum()
            m = m + spread * level * (0.5 if precision == "both" else 1.0)
        if spread > 0 and precision != "levels" and others.size:
            # sum_{f != L} Var(f - L) / Var_0(f - L) / (F - 1): the pick's question, closed or not
            D = grads[g][others] - grads[g][lead]
            m = m + spread * (D.T / var_c[others]) @ D / others.size * (0.5 if precision == "both" else 1.0)
        for openness, c, var_d in chosen:
            d = grads[g][c] - grads[g][lead]
            m = m + openness * np.outer(d, d) / var_d / len(chosen)
        p, jac = _jacobian(fits_[g].theta, pool_a[:, g], pool_b[:, g])
        U.append(jac / np.sqrt(p)[..., None])
        sigma.append(np.array(fits_[g].cov, float))
        M.append(m)
    names = [f.id for f in forms]
    return _Design(U, sigma, M, tuple(models)), names[lead], tuple(names[c] for _, c, _ in chosen)


def _types_code(study, forms):
    from .core import collapse_study
    from .joint import CODES
    types = collapse_study(study, forms)
    return types, np.select([types.answers == c for c in CODES], range(len(CODES)), -1)


def _reference_for(study: StudyData, forms, reference, reference_seed: int, cache):
    """The reference population's scores for the b1_std criterion: ``reference`` when given,
    else drawn from the study's judgments (seed ``reference_seed``, kept in ``cache``); None
    when the study has no judgments."""
    if reference is not None:
        return np.asarray(reference, float)
    if study is None or study.judgments is None:
        return None
    from .standardise import reference_scores
    key = ("reference", reference_seed, tuple(f.id for f in forms), study.k, study.n_levels)
    if cache is not None and key in cache:
        return cache[key]
    ref = reference_scores(study.judgments, forms, study.k, study.n_levels, seed=reference_seed)
    if cache is not None:
        cache[key] = ref
    return ref


def _refuse_std_options(precision: str, openness: str, model: str = "independent") -> None:
    """The criterion falls back to each formulation's b1_joint when the study has no judgments to
    draw b1_std's reference population from; an option only b1_std's criterion reads would then
    be ignored, so it is refused instead."""
    asked = [f"{name}={value!r}" for name, value, default in (("precision", precision, "levels"),
                                                              ("openness", openness, "stop"),
                                                              ("model", model, "independent"))
             if value != default]
    if asked:
        raise SatcalError(f"{', '.join(asked)} needs b1_std's reference population, drawn from the study's "
                          "judgments, and this study has none: give the judgments (StudyData(judgments=...)) "
                          "or a reference=, or leave the option at its default")


def _parts(pool, study, formulations, seed, min_depth, contenders, spread, n_bins, top_level, fits,
           cache=None, target="b1_std", margin=MARGIN, reference=None, reference_seed=0,
           criterion="information", openness="stop", precision="levels", model="independent") -> _Parts:
    forms = resolve_formulations(formulations)
    if target not in TARGETS:
        raise SatcalError(f"target must be one of {', '.join(TARGETS)}, got {target!r}")
    if criterion not in CRITERIA:
        raise SatcalError(f"criterion must be one of {', '.join(CRITERIA)}, got {criterion!r}")
    if openness not in OPENNESS:
        raise SatcalError(f"openness must be one of {', '.join(OPENNESS)}, got {openness!r}")
    if precision not in PRECISION:
        raise SatcalError(f"precision must be one of {', '.join(PRECISION)}, got {precision!r}")
    if precision != "levels" and (criterion == "influence" or target != "b1_std"):
        raise SatcalError(f"precision={precision!r} needs target 'b1_std' and criterion 'information' or "
                          f"'information-sum', got target {target!r}, criterion {criterion!r}")
    if model not in MODELS:
        raise SatcalError(f"model must be one of {', '.join(MODELS)}, got {model!r}")
    if model == "shared" and target != "b1_std":
        # b1_joint's criterion reads each formulation's independent curve (_b1_and_gradient)
        raise SatcalError(f"model='shared' needs target 'b1_std', got target {target!r}")
    if fits is not None and any(np.size(f.theta) != (8 if model == "shared" else 7) for f in fits):
        raise SatcalError(f"fits= must be {model} joint fits ({8 if model == 'shared' else 7} parameters) "
                          f"for model={model!r}")
    if min_depth < 0:
        raise SatcalError(f"min_depth must be >= 0, got {min_depth}")
    if contenders is not None and contenders < 2:
        raise SatcalError(f"contenders must be at least 2 (the leader and one other), got {contenders}")
    n_bins = pool.attrs.get("n_bins", n_bins)
    k = _k(pool)
    kw = _scale(pool, study, top_level)
    pa = score_lists(_levels(pool, "a", k), forms, **kw)
    pb = score_lists(_levels(pool, "b", k), forms, **kw)
    cells = _cell_ids(pa, pb, n_bins)
    n_cells = 2 * len(forms) * n_bins
    empty = study is None or len(study.examples) == 0
    counts = np.zeros(n_cells) if empty else _study_cells(study, forms, n_bins, n_cells)
    jitter = np.random.default_rng([seed, 24, 1]).random(len(pool)) * 1e-9
    ref = None if empty or target != "b1_std" else _reference_for(study, forms, reference, reference_seed, cache)
    if ref is None and not empty and target == "b1_std":
        _refuse_std_options(precision, openness, model)
    state = None
    if empty:
        info, leader, cont = np.zeros(len(pool)), None, ()
    elif ref is not None and criterion != "influence":
        state, leader, cont = _design_std(pa, pb, study, forms, contenders, spread, ref, margin, fits, cache,
                                          relative=criterion == "information", openness=openness,
                                          precision=precision, model=model)
        info = state.reductions() if state is not None else np.zeros(len(pool))
    elif ref is not None:
        info, leader, cont = _information_std(pa, pb, study, forms, contenders, spread, ref, margin, fits, cache,
                                              openness, model)
    else:   # b1_joint asked for, or no judgments to draw the reference population from
        info, leader, cont = _information(pa, pb, study, forms, contenders, spread, fits, cache)
    return _Parts(pool["example_id"].astype(str).to_numpy(), cells, counts, info, min_depth, jitter, leader, cont,
                  state)


def _score(parts: _Parts, added: np.ndarray | None = None, top: float | None = None) -> np.ndarray:
    """Priorities from the parts, with ``added`` answers (a wave's picks so far) per cell;
    ``top`` scales the information term (default its current maximum)."""
    counts = parts.counts if added is None else parts.counts + added
    short = np.maximum(parts.min_depth - counts, 0) / max(parts.min_depth, 1)    # per cell, in [0, 1]
    deficit = short[parts.cells].sum(axis=1)
    info = parts.info
    if parts.design is not None:
        pass   # plan_wave keeps parts.info current from the updated covariances
    elif added is not None and info.any():
        base = np.maximum(parts.counts, 1.0)[parts.cells]
        decay = (base / (base + added[parts.cells])) ** 2
        info = info * decay.mean(axis=1)
    if top is None:
        top = info.max() if info.size and info.max() > 0 else 1.0
    return np.where(deficit > 0, SHORT_FIRST + deficit, 0.0) + 0.999 * info / top + parts.jitter


def example_priorities(pool: pd.DataFrame, study: StudyData | None, formulations, *, seed: int,
                       min_depth: int = MIN_DEPTH, contenders: int | None = None, spread: float = 1.0,
                       n_bins: int = 10, top_level: int | None = None, fits=None,
                       cache: dict | None = None, target: str = "b1_std", margin: float = MARGIN,
                       reference=None, reference_seed: int = 0, criterion: str = "information",
                       openness: str = "stop", precision: str = "levels",
                       model: str = "independent") -> pd.Series:
    """How soon to ask each pool example (higher = sooner), from the answers so far.

    The criterion of the module docstring: examples landing in a cell with fewer than
    ``min_depth`` answers first (by how short their cells are, summed over formulations); the
    others by their information term: with ``criterion="information"`` (default, b1_std) the
    exact fall, from the expected Fisher information of one more answer, of the L-optimal
    objective (the relative variances of every formulation's b1_std, times ``spread``, and of the
    open contrasts with the leader, weighted by their openness); with ``"influence"`` (or
    ``target="b1_joint"``) the first-order expected reduction of the variance of the
    differences b1(c) - b1(leader) between the leader (least b1) and its open contenders,
    relative to that variance now, weighted by 2 Phi(-|d| / sd) (how open the contrast is) and
    averaged over the contenders, plus ``spread`` times the mean relative reduction of each
    formulation's own b1 variance.
    The information term is scaled into [0, 1), below the short-cell offset of 1000.

    Parameters
    ----------
    pool : DataFrame
        Candidate examples (:func:`candidate_pool`, or any table with ``example_id`` and levels
        ``ra1..``, ``rb1..``).
    study : StudyData or None
        The answers so far; None (or no answers): space-filling priorities (every cell short).
    formulations : list or None
        The formulations being calibrated (default the 36).
    seed : int
        Seeds the tie-breaker between equal priorities.
    min_depth : int
        Answers every phi and |dphi| cell (of every formulation) must hold before the
        criterion may pass it by.
    contenders : int, optional
        The leader and this many minus one others, the most open first; default: every
        formulation whose contrast with the leader is open (2 Phi(-|d| / sd) > 0.001), at most 8.
    spread : float
        Weight of the term that keeps every curve improving.
    n_bins : int
        Bins of the phi and |dphi| cells (the pool's ``attrs["n_bins"]`` when it has one).
    top_level : int, optional
        The scale's top level for scoring the pool when there are no answers (default the pool's
        ``attrs["top_level"]``, else the highest level in it); with answers, the study's scale.
    fits : list of JointFit, optional
        The joint fits of ``formulations`` on ``study`` (e.g. from a calibration), to avoid
        refitting.
    cache : dict, optional
        Kept by the caller between calls (e.g. a server refitting every few seconds): the fits
        of this call go in, and the next call refits each formulation with one run from them
        instead of the multi-start fit (on the ECIR 2015 answers, 36 formulations, about ten
        times faster; docs/benchmarks.md).

    target : {"b1_std", "b1_joint"}, optional
        The indicator whose ranking the criterion works to settle (default ``b1_std``, the
        standardised b1 over a reference population of lists: :func:`_information_std`, which
        falls back to ``b1_joint`` when the study has no judgments and no ``reference`` is
        given).
    margin : float, optional
        The stopping rule's indifference margin: a contrast counts as open by
        2 Phi(-(d + margin) / sd) (b1_std only; default :data:`MARGIN`).
    reference : array (N, F), optional
        The reference population's scores (as ``calibrate(reference=...)``); None draws it from
        the study's judgments with seed ``reference_seed`` (kept in ``cache``).
    reference_seed : int, optional
        Seed of that draw (default 0; a study passes the seed its calibrations use).
    criterion : {"information", "information-sum", "influence"}, optional
        For b1_std: ``information`` (default) scores an example by the exact reduction of the
        L-optimal objective (relative variances of every b1_std and of the open contrasts with
        the leader) from the expected Fisher information of one more answer there
        (:func:`_design_std`); ``information-sum`` the same with the sum of every b1_std's
        variance over its value now in place of their mean relative variance; ``influence``
        by the first-order preposterior variance of those
        contrasts plus ``spread`` times the formulations' own (:func:`_information_std`).
    openness : {"stop", "pick"}, optional
        How the b1_std criteria weigh a contrast with the leader (:func:`contrast_openness`):
        ``"stop"`` (default) by the stopping rule's 2 Phi(-(|d| + margin) / sd); ``"pick"`` also
        by the chance that the argmin pick is wrong beyond the margin (an opt-in experiment,
        docs/adaptive.md).
    precision : {"levels", "contrasts", "both"}, optional
        The precision term of the ``information`` criteria (:func:`_design_std`): ``"levels"``
        (default) the relative variances of every formulation's b1_std; ``"contrasts"`` those of
        every formulation's contrast with the leader, open or not (the argmin pick's question);
        ``"both"`` half of each (docs/adaptive.md). Other criteria and ``target="b1_joint"``
        take only ``"levels"``.
    model : {"independent", "shared"}, optional
        The joint model the criterion fits to the answers so far (:data:`MODELS`):
        ``"independent"`` (default) the 7-parameter model (:func:`~.joint.fit_joint`, warm
        started from ``cache``); ``"shared"`` the shared-effect model the analysis fits by
        default (:func:`~.joint.fit_joint_shared` after a full :func:`~.joint.fit_joint`, as
        ``calibrate`` does; never warm started), its Akaike weights, covariances, b1_std
        gradients and expected information on 8 parameters (docs/adaptive.md). b1_std only;
        ``fits``, when given, must then be shared-effect fits.

    Returns
    -------
    Series of floats indexed by ``example_id``; ``attrs`` holds ``leader``, ``contenders`` and
    ``capped``: the ids of the formulations whose cells a wave's cap reads (as
    :func:`plan_wave`'s ``cell_cap``; empty before any answer), for a caller that orders
    examples in waves of its own (:func:`pool_cells`).
    """
    parts = _parts(pool, study, formulations, seed, min_depth, contenders, spread, n_bins, top_level, fits, cache,
                   target, margin, reference, reference_seed, criterion, openness, precision, model)
    out = pd.Series(_score(parts), index=pd.Index(parts.ids, name="example_id"), name="priority")
    capped = _capped_cells(parts, formulations, 1.0, 1)
    ids = [f.id for f in resolve_formulations(formulations)]
    out.attrs.update(leader=parts.leader, contenders=list(parts.contenders),
                     capped=[] if capped is None else [ids[j] for j in capped[0][:len(capped[0]) // 3]])
    return out


def pool_cells(pool: pd.DataFrame, study: StudyData | None, formulations, *, n_bins: int = 10,
               top_level: int | None = None) -> np.ndarray:
    """The phi cells of lists A and B and the |dphi| cell of every pool example under each of
    ``formulations`` (the cells a wave's cap counts: :func:`plan_wave`), scored as the
    criterion scores them.

    Parameters
    ----------
    pool : pandas.DataFrame
        Candidate examples (see :func:`example_priorities`).
    study : satcal.answers.StudyData or None
        The answers so far (their scale scores the pool when given).
    formulations : list
        The formulations (e.g. ``attrs["capped"]`` of :func:`example_priorities`).
    n_bins : int, optional
        Bins of the cells (the pool's ``attrs["n_bins"]`` when it has one; default 10).
    top_level : int or None, optional
        As in :func:`example_priorities`.

    Returns
    -------
    numpy.ndarray of int, shape (examples, 3 x formulations)
        Cell ids: phi of A and of B share the ids of a formulation's phi cells (an example whose
        lists fall in the same cell is in it once), |dphi| cells have their own.
    """
    forms = resolve_formulations(formulations)
    n_bins = pool.attrs.get("n_bins", n_bins)
    k, kw = _k(pool), _scale(pool, study, top_level)
    return _cell_ids(score_lists(_levels(pool, "a", k), forms, **kw), score_lists(_levels(pool, "b", k), forms, **kw),
                     n_bins)


def plan_wave(pool: pd.DataFrame, study: StudyData | None, formulations, n: int, *, seed: int,
              min_depth: int = MIN_DEPTH, exclude: Iterable[str] = (), contenders: int | None = None,
              spread: float = 1.0, n_bins: int = 10, top_level: int | None = None, fits=None,
              cache: dict | None = None, target: str = "b1_std", margin: float = MARGIN,
              reference=None, reference_seed: int = 0, criterion: str = "information",
              cell_cap: float | None = CELL_CAP, openness: str = "stop", precision: str = "levels",
              defensive: float = 0.0, model: str = "independent") -> pd.DataFrame:
    """The ``n`` pool examples to ask next, chosen greedily by :func:`example_priorities`.

    After each pick the cells it lands in count it (so short cells fill up and the wave spreads,
    which with no answers makes it space-filling). With ``criterion="information"`` every
    model's covariance then takes the pick's expected information (the exact rank-4 update,
    :class:`_Design`) and every example's reduction is recomputed: a greedy sequential
    L-optimal batch. With ``"influence"`` the information term of the examples that share the
    pick's cells shrinks as (n_cell / (n_cell + added))^2 instead. Once there are answers, no phi
    or |dphi| cell of the formulations the criterion reads (the joint models carrying weight, the
    leader and its contenders) takes more than ``cell_cap`` of the wave while other examples are
    free: an example whose cell is full ranks after every other (unless it lands in a cell short
    of ``min_depth``, which still comes first). The information update alone
    does not spread a wave: under the fitted model a few support points are optimal (a 7-parameter
    curve needs at most 28; Kiefer and Wolfowitz 1960), and one wave once put all its 100 examples
    on one phi cell and one |dphi| cell of lin-const. The cap keeps a wave robust to a curve the
    model misfits and to a fit that is still wrong. Examples in ``exclude`` and those the study
    already holds are never chosen. Same inputs and seed, same rows.

    Parameters
    ----------
    pool : pandas.DataFrame
        Candidate examples (see :func:`example_priorities`).
    study : satcal.answers.StudyData or None
        The answers so far.
    formulations : list or None
        The formulations being calibrated (default the 36).
    n : int
        Examples to choose (at most the free ones).
    seed : int
        Seeds the tie-breaker.
    min_depth, contenders, spread, n_bins, top_level, fits, cache, target, margin, reference, reference_seed, criterion, openness, precision, model
        As in :func:`example_priorities`.
    exclude : iterable of str, optional
        Example ids never to choose (those already asked).
    cell_cap : float or None, optional
        The largest share of the wave (rounded up, at least 1 example) one phi or |dphi| cell
        of a formulation the criterion reads may take before its other examples rank last
        (default :data:`CELL_CAP`); None: no cap (the greedy alone).
    defensive : float, optional
        Share of the wave, in [0, 1), taken in the coverage order instead of by the criterion
        (a defensive mixture; default 0). Once there are answers, every pick t with
        floor((t + 1) defensive) > floor(t defensive) is the free example whose phi and |dphi|
        cells (every formulation's) hold the fewest answers, by sum_c 1 / (1 + n_c) over its
        cells, n_c counting the study's answers and the wave's picks so far; it then counts in
        the cells, the cap and the criterion's covariances like any pick.

    Returns
    -------
    The chosen pool rows in the order picked, with a ``priority`` column (at the time of the
    pick).

    Raises
    ------
    SatcalError
        ``n`` is negative, or ``cell_cap`` or ``defensive`` is out of range, or ``model`` is
        unknown or asked of ``target="b1_joint"`` (or of a study with neither judgments nor
        ``reference``).
    """
    if n < 0:
        raise SatcalError(f"plan_wave: n must be >= 0, got {n}")
    if not 0 <= defensive < 1:
        raise SatcalError(f"plan_wave: defensive must be in [0, 1), got {defensive}")
    if cell_cap is not None and not 0 < cell_cap <= 1:
        raise SatcalError(f"plan_wave: cell_cap must be in (0, 1] or None, got {cell_cap}")
    parts = _parts(pool, study, formulations, seed, min_depth, contenders, spread, n_bins, top_level, fits, cache,
                   target, margin, reference, reference_seed, criterion, openness, precision, model)
    capped = _capped_cells(parts, formulations, cell_cap, n)
    asked = set(map(str, exclude))
    if study is not None and "example_id" in study.examples.columns:
        asked |= set(study.examples["example_id"].astype(str))
    free = ~np.isin(parts.ids, list(asked))
    added = np.zeros(parts.counts.size)
    picks, prios = [], []
    design = parts.design
    top = float(parts.info.max()) if design is not None and parts.info.max() > 0 else None
    fresh = np.zeros(len(free), int)   # the pick count at which each reduction was computed
    if capped is not None:
        cols, cap = capped
        in_wave = np.zeros(parts.counts.size)   # this wave's picks per cell (an example once)
        full = np.zeros(len(free), bool)
    for t in range(min(n, int(free.sum()))):
        score = np.where(free, _score(parts, added, top), -np.inf)
        if capped is not None:   # short cells keep their precedence: min_depth is the floor
            score = score - CAPPED * (full & (score < SHORT_FIRST))
        if parts.leader is not None and int((t + 1) * defensive) > int(t * defensive):
            # a defensive pick: the coverage order (the emptiest cells), whatever the criterion says
            cover = (1.0 / (1.0 + parts.counts + added))[parts.cells].sum(axis=1) + parts.jitter
            i = int(np.argmax(np.where(free, cover, -np.inf)))
        else:
            i = _lazy_pick(score, free, fresh, t, design, parts, top)
        picks.append(i)
        prios.append(float(score[i]))
        free[i] = False
        np.add.at(added, parts.cells[i], 1.0)
        if design is not None:
            design.add(i)
        if capped is not None:
            hit = np.unique(parts.cells[i, cols])
            in_wave[hit] += 1
            if (in_wave[hit] >= cap).any():
                full = (in_wave[parts.cells[:, cols]] >= cap).any(axis=1)
    out = pool.iloc[picks].copy()
    out["priority"] = prios
    out.attrs.update(pool.attrs, leader=parts.leader, contenders=list(parts.contenders))
    return out.reset_index(drop=True)


def _lazy_pick(score, free, fresh, t, design, parts, top):
    """plan_wave's criterion pick t: the best of ``score`` (updated in place), the stale
    reductions recomputed lazily (Minoux 1978): a reduction mostly shrinks as the covariances take
    more information (always for a single parameter; not guaranteed for several), so the best
    stale ones are recomputed until the best is fresh, instead of the whole pool every pick."""
    while True:
        i = int(np.argmax(score))
        if design is None or fresh[i] == t:
            return i
        cand = np.where(free & (fresh < t), score, -np.inf)
        m = min(LAZY_BLOCK, int(np.isfinite(cand).sum()))
        block = np.argpartition(-cand, m - 1)[:m]
        old = parts.info[block].copy()
        parts.info[block] = design.reductions(block)
        fresh[block] = t
        score[block] += 0.999 * (parts.info[block] - old) / (top or 1.0)


def _capped_cells(parts: _Parts, formulations, cell_cap: float | None, n: int):
    """The columns of ``parts.cells`` a wave's cap applies to (phi of A and B and |dphi| of the
    formulations the criterion reads: the design's models, the leader, its contenders) and the cap
    in examples, ceil(cell_cap n); None without a cap or before any answer (no fit to read)."""
    if cell_cap is None or parts.leader is None:
        return None
    ids = [f.id for f in resolve_formulations(formulations)]
    read = {ids.index(parts.leader), *(ids.index(c) for c in parts.contenders)}
    if parts.design is not None:
        read |= set(parts.design.models)
    f = np.array(sorted(read))
    cols = np.concatenate([f, f + len(ids), f + 2 * len(ids)])
    return cols, max(1, int(np.ceil(cell_cap * n)))


# --------------------------------------------------------------------------------------------
# The stopping rule
# --------------------------------------------------------------------------------------------
def alpha_spending(t, alpha: float, kind: str = "obrien-fleming") -> np.ndarray:
    """The share of ``alpha`` spent by information fraction ``t`` (Lan and DeMets 1983).

    O'Brien-Fleming type: alpha(t) = 2 - 2 Phi(z_{1 - alpha/2} / sqrt(t)); Pocock type:
    alpha(t) = alpha ln(1 + (e - 1) t). Both are 0 at t = 0 and alpha at t = 1.

    Parameters
    ----------
    t : float or array_like
        Information fraction, clipped into [0, 1].
    alpha : float
        The overall level.
    kind : str, optional
        ``"obrien-fleming"`` (default) or ``"pocock"``.

    Returns
    -------
    numpy.ndarray
        alpha(t).

    Raises
    ------
    SatcalError
        An unknown ``kind``.
    """
    t = np.clip(np.asarray(t, float), 0.0, 1.0)
    if kind == "obrien-fleming":
        with np.errstate(divide="ignore"):
            return np.where(t > 0, 2 * norm.sf(norm.isf(alpha / 2) / np.sqrt(np.maximum(t, 1e-300))), 0.0)
    if kind == "pocock":
        return alpha * np.log1p((np.e - 1) * t)
    raise SatcalError(f"spending must be one of {', '.join(SPENDING)}, got {kind!r}")


@dataclass(frozen=True)
class Settlement:
    """Whether a study's ranking is settled (:func:`settle`).

    Attributes
    ----------
    settled : bool
    leaders : tuple of str
        The least-biased formulation (or the top-m set), by the estimate, best first.
    confidence : float
        The stated confidence (1 - the error rate controlled over all looks).
    looks : int
        This look's number (1 for the first analysis).
    alpha_spent : float
        The error rate spent up to and including this look.
    n_answers : int
    reason : str
        A sentence: what is settled, or what is not and why.
    indicator : str
    z : dict
        Each comparison's statistic (contender -> z) at this look; ``critical`` the bound it
        must pass.
    critical : float
    margin : float
        The indifference margin: formulations within it of the leader count as tied.
    """

    settled: bool
    leaders: tuple
    confidence: float
    looks: int
    alpha_spent: float
    n_answers: int
    reason: str
    indicator: str = "b1_std"
    z: dict = field(default_factory=dict)
    critical: float = float("nan")
    margin: float = 0.0

    def summary(self) -> str:
        head = "settled" if self.settled else "not settled"
        return (f"{head} at look {self.looks} ({self.n_answers} answers, confidence {self.confidence:g}, "
                f"alpha spent {self.alpha_spent:.4g}): {self.reason}")

    def to_dict(self) -> dict:
        """JSON-safe (``calibration.json``'s ``"adaptive"`` block)."""
        num = lambda v: None if v is None or not np.isfinite(v) else round(float(v), 6)
        return {"settled": bool(self.settled), "leaders": list(self.leaders), "confidence": float(self.confidence),
                "looks": int(self.looks), "alpha_spent": num(self.alpha_spent), "n_answers": int(self.n_answers),
                "reason": self.reason, "indicator": self.indicator,
                "z": {k: num(v) for k, v in self.z.items()}, "critical": num(self.critical),
                "margin": float(self.margin)}


def std_replicates(result, study: StudyData | None = None):
    """b1_std's point estimates (F,) and bootstrap replicates (B, F): the calibration's own, in
    which every replicate mixes the joint models with its own Akaike weights.

    ``calibrate`` (``standardised_intervals=True``) computes them: replicate b's weights are
    w_bg = exp(l_bg - max_g l_bg) / sum_g exp(l_bg - max_g l_bg), l_bg the replicate's
    log-likelihood of model g at its k-step parameters theta_bg
    (:func:`~satcal.analysis.joint.replicate_loglik`: second order around the full-sample fit
    for one-step replicates, exact for the re-fitted replicates of a weak tau),
    S_b = sum_g w_bg s_g(phi_g; theta_bg) over the reference lists, then the standardised curves
    and b1 (:func:`~satcal.analysis.standardise.standardised_indicators`). A calibration run
    without them (but with its joint replicates and their log-likelihoods) gets them here from
    the same call on the same inputs, so settle, the figures of a look and the calibration's
    intervals read one computation.

    Parameters
    ----------
    result : CalibrationResult
        A calibration with the joint model, the standardised indicators and a bootstrap.
    study : satcal.answers.StudyData, optional
        The answers it was fitted to: checked against the calibration's count.

    Returns
    -------
    tuple of numpy.ndarray
        ``b1_std`` of the bias table (F,) and the replicates (B, F); (est, None) when the
        calibration has no joint bootstrap or no standardisation.

    Raises
    ------
    SatcalError
        ``study`` holds another number of answers than the calibration fitted.
    """
    est = result.bias["b1_std"].to_numpy(float) if "b1_std" in result.bias.columns else None
    std = result.meta.get("standardisation")
    boot = result.bootstrap
    joint = boot.joint if boot is not None else None
    if est is None or std is None or joint is None:
        return est, None
    n_fit = result.meta.get("n_examples")
    if study is not None and n_fit is not None and len(study.examples) != int(n_fit):
        raise SatcalError(f"std_replicates: the calibration fitted {n_fit} answers, the study given has "
                          f"{len(study.examples)}")
    if joint.get("std_indicators") is not None:
        return est, joint["std_indicators"][:, :, 0]
    if "thetas" not in joint or "loglik" not in joint:
        return est, None
    if "_std_b1" not in joint:   # settle and the figures of one look ask for the same replicates
        from .standardise import akaike_weights, standardised_indicators
        # calibrate's own call (calibration.py, standardised_intervals): b1 only, so no P*_f range
        joint["_std_b1"] = standardised_indicators(joint["thetas"], std["reference_phi"],
                                                   akaike_weights(joint["loglik"]), _std_range(result),
                                                   centre=std["thetas"])["b1_std"]
    return est, joint["_std_b1"]


def _std_range(result):
    """The range of phi b1_std averages over in this calibration (None: [0, 1])."""
    prov = result.meta.get("provenance", {})
    if prov.get("indicator_range", "data") != "data":
        return None
    support = result.meta.get("support", {})
    return support.get("sat_joint")


def default_indicator(result, study: StudyData | None = None) -> str:
    """What :func:`settle` decides on when not told: ``b1_std`` (design-free) when the
    calibration has it with bootstrap replicates (its own, or the joint replicates
    :func:`std_replicates` turns into them given ``study``), else ``b1_joint``, else ``b1``.

    Parameters
    ----------
    result : CalibrationResult
    study : satcal.answers.StudyData, optional
        The answers it was fitted to.

    Returns
    -------
    str
    """
    cols = result.bias.columns
    boot = result.bootstrap
    joint = getattr(boot, "joint", None) if boot is not None else None
    if "b1_std" in cols and joint is not None and (
            joint.get("std_indicators") is not None
            or ("thetas" in joint and "loglik" in joint and result.meta.get("standardisation") is not None)):
        return "b1_std"
    return "b1_joint" if "b1_joint" in cols else "b1"


def _replicates(result, indicator: str):
    """Point estimates (F,) and bootstrap replicates (B, F) of ``indicator``."""
    boot = result.bootstrap
    est = result.bias[indicator].to_numpy(float)
    if boot is None:
        return est, None
    paper = {"b1": 0, "b2": 1, "b3": 2}
    joint = {"b1_joint": 0, "b2_joint": 1, "b3_joint": 2}
    std = {"b1_std": 0, "b2_std": 1, "b3_std": 2}
    if indicator in paper:
        return est, boot.indicators[:, :, paper[indicator]]
    if indicator in joint and boot.joint is not None:
        return est, boot.joint["indicators"][:, :, joint[indicator]]
    if indicator in std and boot.joint is not None and boot.joint.get("std_indicators") is not None:
        return est, boot.joint["std_indicators"][:, :, std[indicator]]
    return est, None


def settle(result, *, confidence: float = 0.95, top_m: int = 1, look: int = 1, max_looks: int = 10,
           indicator: str | None = None, spending: str = "obrien-fleming",
           information: float | None = None, margin: float = MARGIN,
           study: StudyData | None = None) -> Settlement:
    """Is the least-biased formulation (or the top-m set) determined at ``confidence``, up to an
    indifference margin?

    The leader set S is the ``top_m`` formulations with the least ``indicator`` (default
    ``b1_std``, the standardised b1 whose estimand does not depend on the design, when it has
    bootstrap replicates (:func:`default_indicator`); else ``b1_joint``, or ``b1`` when the joint
    model did not run). Every member i of S is compared with every formulation j outside it by

        z_ij = (est_j - est_i + margin) / sd*(j - i),

    sd* the bootstrap standard deviation of the difference (the calibration's replicates, which
    resample workers and examples; for b1_std, in which each replicate mixes the joint models
    with its own Akaike weights, :func:`std_replicates`). The study is settled
    at this look when every z_ij exceeds z_{1 - a}, with

        a = (alpha(t_look) - alpha(t_{look-1})) / (m (F - m) + [margin == 0]),
        alpha = 1 - confidence,

    alpha(t) the O'Brien-Fleming-type (or Pocock-type) spending function of Lan and DeMets
    (1983), t = look / max_looks (or ``information``, e.g. answers / budget).

    What is controlled: the probability that a study that looks up to ``max_looks`` times ever
    declares a wrong settlement is at most 1 - ``confidence``, to the accuracy of the normal
    approximation of the bootstrapped differences. With ``margin`` delta > 0 a settlement is
    wrong when some true top-m member j is left out while a member i taken in is worse than j by
    more than delta (for m = 1: the settled leader's true indicator exceeds the true least by
    more than delta). Bechhofer's (1954) indifference zone: formulations within delta of each
    other count as tied, and either is a right pick. The argument: fix the true top-m set S*.
    A wrong settlement needs, for some j in S* and some i outside S* with true b1_i - b1_j >
    delta, z_ij > z_{1 - a} (if the wrong member i is itself in S*, the member taken in from
    outside S* to make room is worse still); under b1_j - b1_i < -delta, z_ij is at most a
    standard normal, so each of the m (F - m) events has probability at most a (Bonferroni; the
    selection of S from the data is covered, as in Gupta's 1965 subset selection). With
    ``margin`` = 0 a wrong settlement is any set other than S*, and a true tie at S*'s boundary
    adds one event (one fixed tied pair declared apart). A look errs with probability at most
    its increment of alpha(t), and the looks together at most alpha(1) = alpha (a union bound
    over looks, which needs no assumption on how the looks' statistics are correlated, and so
    holds whatever the adaptive design did between them). Holm's step-down is not used within a
    look: the leader is chosen because it looks best, so its last Holm step would be a one-sided
    test of a selected direction, which errs at up to twice its level when two formulations tie.
    The rule is conservative: the union bounds ignore the positive correlation between looks and
    between comparisons that exact group-sequential boundaries (Jennison and Turnbull 2000)
    would use, but those need the canonical joint distribution of the looks, which an adaptive
    design does not keep.

    Parameters
    ----------
    result : CalibrationResult
        With a bootstrap (``calibrate(..., bootstrap=B)``); without one nothing is settled.
    confidence : float
    top_m : int
    look, max_looks : int
        This look's number and the most looks the study plans (the budget / the wave size).
    indicator : str, optional
        A column of ``result.bias`` with bootstrap replicates (b1_std..b3_std, b1_joint..b3_joint,
        b1..b3).
    spending : {"obrien-fleming", "pocock"}
    information : float, optional
        The information fraction of this look in (0, 1] instead of look / max_looks (the previous
        look's is then taken as (look - 1) / look of it).
    margin : float, optional
        The indifference margin delta >= 0 in the indicator's units (default :data:`MARGIN`,
        ``design.margin`` in study.toml).
    study : satcal.answers.StudyData, optional
        The answers ``result`` was fitted to (checked against the calibration's count).

    Returns
    -------
    Settlement

    Raises
    ------
    SatcalError
        A confidence outside (0, 1), a negative margin, a look below 1, an unknown indicator or
        a top_m that leaves no formulation outside.

    References
    ----------
    Lan, K. K. G. and DeMets, D. L. (1983). Discrete sequential boundaries for clinical trials.
    Biometrika 70(3). Gupta, S. S. (1965). On some multiple decision (selection and ranking)
    rules. Technometrics 7(2). Bechhofer, R. E. (1954). A single-sample multiple decision
    procedure for ranking means of normal populations with known variances. Annals of
    Mathematical Statistics 25(1).
    """
    if not 0 < confidence < 1:
        raise SatcalError(f"confidence must be in (0, 1), got {confidence}")
    if look < 1 or max_looks < 1:
        raise SatcalError(f"look and max_looks must be >= 1, got {look} and {max_looks}")
    if not margin >= 0:
        raise SatcalError(f"margin must be >= 0, got {margin}")
    bias = result.bias
    indicator = indicator or default_indicator(result, study)
    if indicator not in bias.columns:
        raise SatcalError(f"settle: no {indicator!r} in this calibration's bias table")
    names = bias["formulation"].astype(str).to_numpy()
    n_f = len(names)
    if not 1 <= top_m < n_f:
        raise SatcalError(f"top_m must be between 1 and {n_f - 1} (formulations: {n_f}), got {top_m}")
    alpha = 1 - confidence
    t_now = min(1.0, information if information is not None else look / max_looks)
    t_before = t_now * (look - 1) / look if information is not None else min(1.0, (look - 1) / max_looks)
    spent, before = float(alpha_spending(t_now, alpha, spending)), float(alpha_spending(t_before, alpha, spending))
    n_answers = int(result.meta.get("n_examples", 0))
    est, reps = _replicates(result, indicator)
    if indicator == "b1_std":
        est, reps = std_replicates(result, study)
    order = np.argsort(np.where(np.isfinite(est), est, np.inf), kind="stable")
    inside, outside = order[:top_m], order[top_m:]
    leaders = tuple(names[inside])
    common = dict(leaders=leaders, confidence=confidence, looks=look, alpha_spent=spent, n_answers=n_answers,
                  indicator=indicator, margin=float(margin))
    if reps is None:
        return Settlement(False, reason=f"no bootstrap replicates of {indicator}: run the calibration with a "
                                        "bootstrap to decide whether the ranking is settled", **common)
    level = (spent - before) / (top_m * (n_f - top_m) + (margin == 0))
    critical = float(norm.isf(level)) if level > 0 else float("inf")
    z = {}
    worst = (np.inf, "", "")
    for i in inside:
        for j in outside:
            d = reps[:, j] - reps[:, i]
            d = d[np.isfinite(d)]   # replicates whose fit failed are left out, as in the intervals
            sd = float(robust_se(d)) if d.size > 1 else 0.0   # the replicates' normalised IQR
            zij = (est[j] - est[i] + margin) / sd if sd > 0 else -np.inf   # no spread: nothing is shown
            key = names[j] if top_m == 1 else f"{names[i]}<{names[j]}"
            z[key] = float(zij)
            if zij < worst[0]:
                worst = (zij, names[i], names[j])
    settled = bool(np.isfinite(critical) and worst[0] > critical)
    what = f"the least-biased formulation by {indicator}" if top_m == 1 else f"the top {top_m} by {indicator}"
    if margin > 0:
        what += f" (within {margin:g})"
    who = leaders[0] if top_m == 1 else "{" + ", ".join(leaders) + "}"
    if settled:
        reason = (f"{what} is {who}: every comparison passes z > {critical:.2f} (closest: {worst[2]}, "
                  f"z = {worst[0]:.2f}); wrong settlements over up to {max_looks} looks at most {alpha:g}")
    elif spent - before <= 0:
        reason = f"no error rate left to spend at look {look} of {max_looks}: {what} stays open"
    else:
        reason = (f"{what} is open: {who} leads, but against {worst[2]} z = {worst[0]:.2f} does not pass "
                  f"{critical:.2f} at look {look} of {max_looks}")
    return Settlement(settled, reason=reason, z=z, critical=critical, **common)


# --------------------------------------------------------------------------------------------
# Simulation
# --------------------------------------------------------------------------------------------
def _answer_shares(phi_a, phi_b, model, ua, ub) -> np.ndarray:
    """(n, 4, K) shares of a_better, b_better, both_good, both_bad of honest answers in the
    canonical orientation given list offsets ``ua`` and ``ub`` ((K,) nodes shared by every row,
    or (n, K) a row's own): simulate.py's answer process (the shown order is random, so position
    bias sends half of the undecided answers it moves to each side)."""
    ua, ub = np.asarray(ua, float), np.asarray(ub, float)
    pa = expit(model.intercept + (ua[None] if ua.ndim == 1 else ua) + model.slope * phi_a[:, None])
    pb = expit(model.intercept + (ub[None] if ub.ndim == 1 else ub) + model.slope * phi_b[:, None])
    good, bad = pa * pb, (1 - pa) * (1 - pb)
    only_a, only_b = pa * (1 - pb), pb * (1 - pa)
    d = (phi_a - phi_b)[:, None]
    to_a = np.where(d > 0, model.preference_accuracy, np.where(d < 0, 1 - model.preference_accuracy, 0.5))
    q, lapse, pos = model.undecided_preference, model.lapse, model.position_bias
    a = only_a * (1 - lapse) + only_b * lapse + (good + bad) * q * to_a
    b = only_b * (1 - lapse) + only_a * lapse + (good + bad) * q * (1 - to_a)
    good, bad = good * (1 - q), bad * (1 - q)
    a, b = a + (good + bad) * pos / 2, b + (good + bad) * pos / 2
    good, bad = good * (1 - pos), bad * (1 - pos)
    return np.stack([a, b, good, bad], axis=1)


def _expected_answers(phi_a, phi_b, model, nodes: int = 24) -> np.ndarray:
    """(n, 4) expected shares of a_better, b_better, both_good, both_bad in the canonical
    orientation under the simulated crowd's honest workers (:func:`_answer_shares`, one worker
    effect u on both lists, averaged over u ~ N(0, heterogeneity^2) by Gauss-Hermite
    quadrature)."""
    z, wq = np.polynomial.hermite_e.hermegauss(nodes)
    u, wq = model.heterogeneity * z, wq / wq.sum()
    return _answer_shares(phi_a, phi_b, model, u, u) @ wq


def population_truth(pool: pd.DataFrame, truth, formulations=None, *, n_levels: int | None = None) -> pd.Series:
    """b1_joint of every formulation in the limit of infinitely many answers to ``pool``'s
    examples from the simulated crowd ``truth`` (a :class:`~satcal.simulate.UserModel` without
    spammers): the joint model fitted to the expected answer shares (their probability limit),
    b1 over [0, 1]. For the generating formulation the per-list curve does not depend on the
    design; for the others it averages over the lists sharing a score, so it is this pool's.

    Parameters
    ----------
    pool : pandas.DataFrame
        The examples (levels ``ra1..``, ``rb1..``).
    truth : satcal.simulate.UserModel
        The simulated crowd.
    formulations : list or None, optional
        Formulations to evaluate (default the 36).
    n_levels : int or None, optional
        Levels of the scale; None takes the pool's.

    Returns
    -------
    pandas.Series
        b1_joint by formulation id.
    """
    from ..measures import formulation as parse
    from .joint import CODES, fit_joint
    forms = resolve_formulations(formulations)
    k = _k(pool)
    kw = {"n_levels": n_levels} if n_levels is not None else _scale(pool, None, None)
    la, lb = _levels(pool, "a", k), _levels(pool, "b", k)
    f_true = parse(truth.formulation)
    t_a, t_b = score_lists(la, [f_true], **kw)[:, 0], score_lists(lb, [f_true], **kw)[:, 0]
    shares = _expected_answers(t_a, t_b, truth)                                   # (n, 4)
    pa, pb = score_lists(la, forms, **kw), score_lists(lb, forms, **kw)
    codes = np.repeat(np.array(CODES, dtype=object)[None], len(pool), axis=0).ravel()
    out = {}
    for j, f in enumerate(forms):
        # expected shares as counts: the maximiser does not depend on their scale; x10 keeps the
        # log-likelihood's size in the range the fit's tolerances were set for
        fit = fit_joint(np.repeat(pa[:, j], 4), np.repeat(pb[:, j], 4), codes, shares.ravel() * 10.0)
        out[f.id] = _b1_and_gradient(fit.theta)[0]
    return pd.Series(out, name="b1_joint")


def true_satisfaction(phi, truth, nodes: int = 24) -> np.ndarray:
    """The simulated crowd's probability that a list of score ``phi`` (under its own
    formulation) satisfies an honest user, averaged over the worker effect u ~ N(0, sigma^2):
    E_u expit(intercept + u + slope phi), by Gauss-Hermite quadrature.

    Parameters
    ----------
    phi : array_like
        Scores under the truth's formulation.
    truth : satcal.simulate.UserModel
        The simulated crowd (``intercept``, ``slope``, ``heterogeneity``).
    nodes : int, optional
        Quadrature nodes (default 24).

    Returns
    -------
    numpy.ndarray
    """
    z, wq = np.polynomial.hermite_e.hermegauss(nodes)
    u, wq = truth.heterogeneity * z, wq / wq.sum()
    return expit(truth.intercept + u[None] + truth.slope * np.asarray(phi, float)[:, None]) @ wq


def standardised_truth(judgments, truth, formulations=None, *, k: int, n_levels: int, reference_seed: int = 0,
                       size: int | None = None, satisfaction: str = "crowd",
                       pool: pd.DataFrame | None = None) -> pd.Series:
    """b1_std of every formulation for the simulated crowd ``truth``: the standardised estimand
    (:mod:`satcal.analysis.standardise`) with the crowd's true satisfaction of each list in place
    of the fitted model of it.

    The reference population is :func:`~satcal.analysis.standardise.reference_lists` of
    ``judgments`` (``k``, ``size``, seed ``reference_seed``), the one a calibration given
    ``reference=reference_scores(judgments, formulations, k, n_levels, size, reference_seed)``
    uses. For each reference list, S = :func:`true_satisfaction` of its score under the truth's
    formulation; s*_f is the quadratic logit of S on the lists' phi_f (the same grouped
    fractional fit), and b1_std = mean |phi - s*_f(phi)| over [0, 1]. It depends on the users and
    the reference population only, never on a design.

    ``satisfaction="model"`` puts the estimator's own probability limit in place of the crowd's
    satisfaction: the per-list curve of the truth formulation's joint model fitted to the expected
    answers to ``pool``'s examples (as :func:`population_truth` fits it). The quadratic logit
    without worker effects does not reproduce E_u expit(...) exactly, and near ties the two
    truths rank formulations differently (docs/adaptive.md).

    Parameters
    ----------
    judgments : satcal.judgments.Judgments
        The judgments the reference lists are drawn from.
    truth : satcal.simulate.UserModel
        The simulated crowd.
    formulations : list or None, optional
        Formulations to evaluate (default the 36).
    k : int
        List length.
    n_levels : int
        Levels of the scale.
    reference_seed : int, optional
        Seed of the reference lists (default 0).
    size : int or None, optional
        Reference lists; None takes ``REFERENCE_SIZE``.
    satisfaction : str, optional
        ``"crowd"`` (default) or ``"model"``.
    pool : pandas.DataFrame or None, optional
        The examples, required with ``satisfaction="model"``.

    Returns
    -------
    pandas.Series
        ``b1_std`` by formulation id.

    Raises
    ------
    SatcalError
        ``satisfaction`` is neither ``"crowd"`` nor ``"model"`` with a pool.
    """
    from ..measures import formulation as parse
    from .core import bias_indicators, design
    from .standardise import REFERENCE_SIZE, _fit_grouped, _groups, reference_scores
    forms = resolve_formulations(formulations)
    ref = reference_scores(judgments, list(forms) + [parse(truth.formulation)], k, n_levels,
                           size or REFERENCE_SIZE, seed=reference_seed)
    if satisfaction == "crowd":
        S = true_satisfaction(ref[:, -1], truth)
    elif satisfaction == "model" and pool is not None:
        from .joint import CODES, fit_joint
        from .standardise import _s
        kp = _k(pool)
        t_a = score_lists(_levels(pool, "a", kp), [parse(truth.formulation)], n_levels=n_levels)[:, 0]
        t_b = score_lists(_levels(pool, "b", kp), [parse(truth.formulation)], n_levels=n_levels)[:, 0]
        codes = np.repeat(np.array(CODES, dtype=object)[None], len(pool), axis=0).ravel()
        fit = fit_joint(np.repeat(t_a, 4), np.repeat(t_b, 4), codes, _expected_answers(t_a, t_b, truth).ravel() * 10.0)
        S = _s(fit.theta, ref[:, -1])
    else:
        raise SatcalError("standardised_truth: satisfaction is 'crowd', or 'model' with a pool")
    phi = ref[:, :-1]
    Y = np.broadcast_to(S[None, :], (len(forms), len(S)))
    curves = expit(_fit_grouped(_groups(phi.T), Y) @ design(GRID).T)
    b1 = bias_indicators(curves, curves)["b1"]
    return pd.Series(np.asarray(b1, float), index=[f.id for f in forms], name="b1_std")


def _answer(rows: pd.DataFrame, truth, k: int, kw: dict, rng, wave: int) -> pd.DataFrame:
    """Simulated answers (one per example) from a new crowd for this wave."""
    from ..measures import formulation as parse
    from ..platforms import swap_answer
    from ..simulate import honest_answers
    f = parse(truth.formulation)
    phi_a = score_lists(_levels(rows, "a", k), [f], **kw)[:, 0]
    phi_b = score_lists(_levels(rows, "b", k), [f], **kw)[:, 0]
    n = len(rows)
    per_worker = max(1, int(np.ceil(n / truth.workers)))
    n_workers = max(1, int(np.ceil(n / per_worker)))
    u = rng.normal(0, truth.heterogeneity, n_workers)
    who = rng.permutation(np.repeat(np.arange(n_workers), per_worker)[:n])
    swapped = rng.random(n) < 0.5
    # honest_answers takes the canonical lists and answers in the shown orientation
    shown, _, _ = honest_answers(phi_a, phi_b, u[who], swapped, truth, rng, joint_rng=rng)
    spam = rng.random(n_workers) < truth.spammers
    shown[spam[who]] = rng.choice(["a_better", "b_better", "both_good", "both_bad"], size=int(spam[who].sum()))
    canonical = np.array([swap_answer(a) if s else a for a, s in zip(shown, swapped)], dtype=object)
    return rows.assign(answer=canonical, worker_id=[f"v{wave}-w{w}" for w in who])


def _look_figures(result, indicator: str, truth: pd.Series | None, study=None, margin: float = MARGIN) -> dict:
    """One look judged by ``indicator``: its leader, the median 95% interval width and bootstrap
    SE over formulations, and with ``truth`` whether the leader is right (the true least, and
    within ``margin`` of it) and the share of intervals covering the truth. For b1_std the
    replicates are :func:`std_replicates`' and the intervals the bias table's rule for b1
    (:func:`~satcal.analysis.bootstrap.floor_interval`); the bias table's intervals give ``width_median_calib`` and
    ``covered_calib`` (the same when the calibration computed its standardised intervals)."""
    from .bootstrap import floor_interval
    bias = result.bias
    lo, hi = bias[f"{indicator}_lo"].to_numpy(float), bias[f"{indicator}_hi"].to_numpy(float)
    est, reps = _replicates(result, indicator)
    extra = {}
    if indicator == "b1_std":
        est, refit = std_replicates(result, study)
        if refit is not None:
            extra = {"width_median_calib": float(np.nanmedian(hi - lo)), "lo_calib": lo, "hi_calib": hi}
            reps = refit
            lo, hi = floor_interval(reps, est)
    leader = str(bias["formulation"].iloc[int(np.nanargmin(est))])
    se = float("nan") if reps is None else float(np.nanmedian(robust_se(reps)))
    out = {"leader": leader, "width_median": float(np.nanmedian(hi - lo)), "se_median": se}
    if "width_median_calib" in extra:
        out["width_median_calib"] = extra["width_median_calib"]
    if truth is not None:
        tb = truth.reindex(bias["formulation"]).to_numpy(float)
        out["right"] = leader == str(truth.idxmin())
        out["right_margin"] = bool(truth[leader] <= truth.min() + margin)
        out["covered"] = float(np.mean((lo <= tb) & (tb <= hi)))
        if "lo_calib" in extra:
            out["covered_calib"] = float(np.mean((extra["lo_calib"] <= tb) & (tb <= extra["hi_calib"])))
    out["_intervals"] = (lo, hi)
    return out


def simulate_adaptive_study(judgments, truth, formulations=None, *, adaptive: bool = True, budget: int,
                            wave_size: int, seed: int, k: int = 5, levels=(0, 1, 2), pool: pd.DataFrame | None = None,
                            fixed: pd.DataFrame | None = None, pool_size: int = 20000, min_depth: int = MIN_DEPTH,
                            bootstrap: int = 100, confidence: float = 0.95, top_m: int = 1,
                            max_looks: int | None = None, stop: bool = True, contenders: int | None = None,
                            spread: float = 1.0, first_wave: int | None = None,
                            truth_b1=None, indicator: str = "b1_std", reference_seed: int = 0,
                            margin: float = MARGIN, target: str | None = None,
                            criterion: str = "information", shared_effect: bool = True,
                            cell_cap: float | None = CELL_CAP) -> pd.DataFrame:
    """A whole study in simulation, one wave at a time.

    Each wave: choose ``wave_size`` examples (adaptive: :func:`plan_wave` on ``pool`` from the
    answers so far; fixed: the next ``wave_size`` of ``fixed``, e.g. a coverage design, in a
    seeded random order), answer each once from a new crowd (``truth``, a
    :class:`~satcal.simulate.UserModel`: its answer process, worker offsets u_w ~
    N(0, heterogeneity^2), about ``budget/looks``-sized waves answered by ``truth.workers``
    workers each, a share ``spammers`` answering at random), calibrate with the joint model and
    a bootstrap that resamples workers, and :func:`settle`. Stops when settled (if ``stop``) or
    when ``budget`` answers are in.

    Parameters
    ----------
    judgments : satcal.judgments.Judgments
        The judgments the examples and reference lists come from.
    truth : satcal.simulate.UserModel
        The simulated crowd.
    formulations : list or None, optional
        The formulations calibrated (default the 36).
    adaptive : bool, optional
        Choose waves by :func:`plan_wave` (default True); False asks ``fixed`` in order.
    budget : int
        Answers at most (with ``fixed``, at most its length).
    wave_size : int
        Examples a wave.
    seed : int
        Seed of the pool, the waves, the answers and the bootstrap.
    k : int, optional
        List length (default 5).
    levels : sequence of int, optional
        Levels of the scale (default (0, 1, 2)).
    pool : pandas.DataFrame or None, optional
        The candidate pool; None builds one of ``pool_size`` (:func:`candidate_pool`).
    fixed : pandas.DataFrame or None, optional
        The fixed design's examples, required when ``adaptive`` is false.
    pool_size : int, optional
        Candidates built when ``pool`` is None (default 20000).
    min_depth, contenders, spread, criterion
        As in :func:`example_priorities`.
    bootstrap : int, optional
        Bootstrap replicates a look (default 100).
    confidence : float, optional
        The stopping rule's confidence (default 0.95).
    top_m : int, optional
        Size of the leading set to settle (default 1).
    max_looks : int or None, optional
        Planned looks; None is ceil(budget / wave_size).
    stop : bool, optional
        Stop at the first settled look (default True).
    first_wave : int or None, optional
        Size of the first wave; None is ``wave_size``.
    truth_b1 : pandas.Series, dict or None, optional
        The truth, for the ``right`` and ``covered`` columns.
    indicator : str, optional
        The indicator settled on (default ``"b1_std"``; its replicates mix the joint models with
        each replicate's own Akaike weights, :func:`std_replicates`).
    reference_seed : int, optional
        Seed of the reference population (default 0).
    margin : float, optional
        The stopping rule's indifference margin (default :data:`MARGIN`); ``right_margin`` judges
        a leader right when its truth is within it of the least.
    target : str or None, optional
        The criterion's target (:func:`example_priorities`); None: ``indicator`` when it is one of
        :data:`TARGETS`, else ``b1_joint``.
    shared_effect : bool, optional
        Calibrate with the shared-effect joint model (default True, as ``calibrate``) or the
        independent one (False; the model the criterion itself fits).
    cell_cap : float or None, optional
        The adaptive waves' cell cap (:func:`plan_wave`; default :data:`CELL_CAP`).

    Returns
    -------
    DataFrame, one row per look: ``look, n_answers, settled, leader`` (least ``indicator``),
    ``leaders, alpha_spent, width_median`` (median over formulations of the 95% interval's
    width), ``se_median`` (the same of the bootstrap standard error), ``reason``, and with
    ``truth_b1``: ``right`` (the leader is the true least-biased), ``right_margin`` (its truth
    is within ``margin`` of the least) and ``covered`` (share of formulations whose interval
    holds the truth); for b1_std also ``width_median_calib`` and ``covered_calib``, the
    calibration's own intervals (full-sample Akaike weights). ``attrs["bias"]`` holds the last
    look's bias table, ``attrs["intervals"]`` {indicator: (lo, hi)} its intervals as judged,
    ``attrs["std_looks"]`` every look's (answers, b1_std estimates (F,), replicates (B, F) that
    mix the models with their own Akaike weights), for figures computed afterwards (e.g. coverage of contrasts).

    ``indicator`` is the one :func:`settle` decides on and the unsuffixed columns describe
    (``b1_joint`` or ``b1_std``). Every calibration gets the same reference population
    (``reference_seed``), so b1_std refers to one estimand across looks and arms, the one
    :func:`standardised_truth` computes. ``truth_b1`` is a Series (the truth of ``indicator``) or
    a dict {indicator: Series}; every indicator in the dict also gets suffixed columns
    ``leader_<ind>, width_median_<ind>, se_median_<ind>, right_<ind>, covered_<ind>,
    settled_<ind>`` (the same answers judged by each estimand; with ``stop=False`` the first look
    settled by an indicator is where a study stopping by it would have stopped, since the design
    never reads the verdict).

    Raises
    ------
    SatcalError
        ``adaptive`` is false and ``fixed`` is not given.
    """
    from .calibration import calibrate
    from .standardise import reference_scores
    forms = resolve_formulations(formulations)
    target = target or (indicator if indicator in TARGETS else "b1_joint")
    rng = np.random.default_rng([seed, 24, 2])
    max_looks = max_looks or int(np.ceil(budget / wave_size))
    n_levels = int(max(levels)) + 1   # the scale's top level is n_levels - 1, as calibrate scores it
    kw = {"n_levels": n_levels}
    truths = truth_b1 if isinstance(truth_b1, dict) else ({} if truth_b1 is None else {indicator: truth_b1})
    reference = reference_scores(judgments, forms, k, n_levels, seed=reference_seed)
    if adaptive:
        pool = pool if pool is not None else candidate_pool(judgments, k, levels, forms, pool_size, seed)
    elif fixed is None:
        raise SatcalError("simulate_adaptive_study: a fixed design needs its examples (fixed=...)")
    else:
        fixed = fixed.iloc[rng.permutation(len(fixed))].reset_index(drop=True)
        budget = min(budget, len(fixed))
    asked = []
    rows = []
    std_looks = []
    study = None
    cache: dict = {}   # warm starts for the criterion's refits between waves
    bias = None
    for look in range(1, max_looks + 1):
        n_now = sum(len(a) for a in asked)
        size = min(wave_size if look > 1 or first_wave is None else first_wave, budget - n_now)
        if size <= 0:
            break
        if adaptive:
            wave = plan_wave(pool, study, forms, size, seed=seed + look, min_depth=min_depth,
                             contenders=contenders, spread=spread, cache=cache, target=target, margin=margin,
                             reference=reference, criterion=criterion, cell_cap=cell_cap).drop(columns="priority")
        else:
            wave = fixed.iloc[n_now:n_now + size]
        asked.append(_answer(wave, truth, k, kw, rng, look))
        examples = pd.concat(asked, ignore_index=True)
        study = StudyData(examples, k=k, n_levels=n_levels, judgments=judgments, name="simulated")
        result = calibrate(study, forms, sat_model="both", bootstrap=bootstrap, seed=seed + look,
                           model_check_folds=0, reference=reference,
                           standardised_intervals=reference is not None, shared_effect=shared_effect)
        s = settle(result, confidence=confidence, top_m=top_m, look=look, max_looks=max_looks, indicator=indicator,
                   margin=margin, study=study)
        bias = result.bias
        if "b1_std" in bias.columns:
            std_looks.append((len(examples),) + tuple(std_replicates(result, study)))
        row = {"look": look, "n_answers": len(examples), "settled": s.settled,
               "leaders": ",".join(s.leaders), "alpha_spent": s.alpha_spent, "reason": s.reason}
        figures = _look_figures(result, indicator, truths.get(indicator), study, margin)
        intervals = {indicator: figures.pop("_intervals")}
        row.update(figures)
        for ind, tb in truths.items():
            verdict = s if ind == indicator else settle(result, confidence=confidence, top_m=top_m, look=look,
                                                        max_looks=max_looks, indicator=ind, margin=margin,
                                                        study=study)
            figures = _look_figures(result, ind, tb, study, margin)
            intervals[ind] = figures.pop("_intervals")
            row.update({f"{key}_{ind}": v for key, v in figures.items()})
            row[f"settled_{ind}"] = verdict.settled
        rows.append(row)
        if stop and s.settled:
            break
    out = pd.DataFrame(rows)
    out.attrs["bias"] = bias
    out.attrs["intervals"] = intervals if rows else {}
    out.attrs["examples"] = study.examples if study is not None else None
    out.attrs["std_looks"] = std_looks
    return out
