"""Calibration analysis: P(Sat|phi), P(Pref|dphi), bias indicators and ANOVA (paper 003, sec. 4).

- Satisfaction data: each ``both_good`` (sat = 1) or ``both_bad`` (sat = 0) answer gives two
  rows, (phi_A, sat) and (phi_B, sat).
- Preference data: x = |dphi|; agree = 1 when the answer prefers the list with the higher phi.
  Population ``all`` keeps every answer (ties and both_* answers count as 0; this is how the
  published figures and bias scores were computed); ``preferences_only`` keeps a_better /
  b_better answers with dphi != 0.
- Fit: binomial GLM with logit link on (1, x, x^2) (statsmodels, unpenalised), with a 95%
  Wald band from the linear predictor's standard error; for P(Sat|phi) the covariance is
  cluster-robust with an answer's two rows as one cluster (``fit_logit(clusters=...)``).
- Bias, over the grid x = 0, 0.001, ..., 1:
  b1 = mean |x - P(Sat|x)|;  b2 = (P(Sat|0) + 1 - P(Sat|1)) / 2;  b3 = mean (1 - P(Pref|x)).
- ANOVA: value ~ gain + discount over the formulations' point estimates (additive, sequential
  sums of squares), with eta squared = SS_term / SS_total; the test of each effect is the
  bootstrap Wald test of :mod:`.effects` (the estimates share their answers).
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np
import pandas as pd
from scipy.special import expit, ndtri

from ..errors import SatcalError
from ..answers import ANSWER_CODES, StudyData
from ..measures import Formulation, bin_index, bin_midpoints, score_lists, _resolve
from .ranking import estimator_columns, lead_estimator, rank_formulations, rank_uncertainty, ranking_verdict

__all__ = [
    "POPULATIONS",
    "GRID",
    "CURVES",
    "LogitFit",
    "fit_logit",
    "fit_logit_batch",
    "fit_logit_replicates",
    "satisfaction_data",
    "preference_data",
    "AnswerTypes",
    "collapse_answers",
    "CurveData",
    "satisfaction_curves",
    "preference_curves",
    "sufficient_statistics",
    "binned_points",
    "bias_indicators",
    "anova_table",
    "CalibrationResult",
    "calibrate",
    "rank_formulations",
    "supported_range",
    "INDICATOR_RANGES",
]

POPULATIONS = ("all", "preferences_only")
GRID = np.round(np.linspace(0.0, 1.0, 1001), 3)
CURVES = ("sat", "pref")
Z95 = float(ndtri(0.975))
TIE_TOLERANCE = 1e-9


# --------------------------------------------------------------------------------------------
# Data
# --------------------------------------------------------------------------------------------
def satisfaction_data(phi_a: np.ndarray, phi_b: np.ndarray, answers: Sequence[str]):
    """Rows (phi, sat) from both_good / both_bad answers, two per answer.

    Returns ``x`` of shape (2m, F) and ``y`` of shape (2m,): the A rows first, then the B rows.
    """
    answers = np.asarray(answers)
    keep = np.isin(answers, ("both_good", "both_bad"))
    sat = (answers[keep] == "both_good").astype(float)
    x = np.concatenate([np.atleast_2d(phi_a)[keep], np.atleast_2d(phi_b)[keep]], axis=0)
    return x, np.concatenate([sat, sat])


def preference_data(phi_a: np.ndarray, phi_b: np.ndarray, answers: Sequence[str],
                    population: str = "all", _masks: bool = False):
    """Per formulation, (x = |dphi|, agree) of the preference curve.

    Returns a list with one ``(x, y)`` pair per formulation column (with ``_masks``, a triple
    whose third item is the boolean mask of kept rows, or None when every row is kept).
    """
    if population not in POPULATIONS:
        raise SatcalError(f"population must be one of {POPULATIONS}, got {population!r}")
    answers = np.asarray(answers)
    dphi = np.atleast_2d(phi_a) - np.atleast_2d(phi_b)
    # Lists with equal scores in exact arithmetic can differ by rounding (sums in another
    # order): such differences are ties, not preferences.
    dphi = np.where(np.abs(dphi) < TIE_TOLERANCE, 0.0, dphi)
    a_pref = (answers == "a_better")[:, None]
    b_pref = (answers == "b_better")[:, None]
    agree = ((a_pref & (dphi > 0)) | (b_pref & (dphi < 0))).astype(float)
    x = np.abs(dphi)
    if population == "all":
        return [(x[:, j], agree[:, j]) + ((None,) if _masks else ()) for j in range(x.shape[1])]
    out = []
    for j in range(x.shape[1]):
        keep = (a_pref[:, 0] | b_pref[:, 0]) & (dphi[:, j] != 0)
        out.append((x[keep, j], agree[keep, j]) + ((keep,) if _masks else ()))
    return out


@dataclass(frozen=True)
class AnswerTypes:
    """Distinct answered examples: the sufficient statistics of a calibration.

    Two answers with the same scores under every formulation and the same answer code carry
    the same information, so an analysis needs only each distinct (phi_A, phi_B, answer) row
    and how often it occurs. A study with k = 5 and 3 levels has at most a few thousand such
    rows however many answers it collects, and every fit, point and bootstrap replicate costs
    what the distinct rows cost (the binomial likelihood with counts is exactly the likelihood
    of the rows it replaces).

    Attributes
    ----------
    phi_a, phi_b : (T, F) scores of each distinct row
    answers : (T,) answer codes
    counts : (T,) how many answers each row stands for
    inverse : (n,) the row of each input answer, in input order (for folds and resampling)
    """

    phi_a: np.ndarray
    phi_b: np.ndarray
    answers: np.ndarray
    counts: np.ndarray
    inverse: np.ndarray

    @property
    def n_answers(self) -> int:
        return int(self.inverse.size)


def _answer_codes(answers: np.ndarray) -> np.ndarray:
    """Index of each answer in ANSWER_CODES; an unknown code is an error."""
    code = np.full(len(answers), -1.0)
    for i, c in enumerate(ANSWER_CODES):
        code[answers == c] = i
    if (code < 0).any():
        bad = sorted(set(answers[code < 0].tolist()), key=str)
        raise SatcalError(f"unknown answer code(s) {bad}; expected {', '.join(ANSWER_CODES)}")
    return code


def _unique_rows(key: np.ndarray):
    """Distinct rows of a float matrix: (first index, inverse, counts), one sort of n keys."""
    key = np.ascontiguousarray(key, dtype=float)
    key[key == 0] = 0.0  # -0.0 and 0.0 are one value
    rows = key.view(np.dtype((np.void, key.dtype.itemsize * key.shape[1])))[:, 0]
    _, first, inverse, counts = np.unique(rows, return_index=True, return_inverse=True,
                                          return_counts=True)
    return first, inverse.ravel().astype(np.intp), counts.astype(float)


def collapse_answers(phi_a, phi_b, answers) -> AnswerTypes:
    """Group answers by (phi_A row, phi_B row, answer code); see :class:`AnswerTypes`."""
    phi_a, phi_b = np.atleast_2d(np.asarray(phi_a, float)), np.atleast_2d(np.asarray(phi_b, float))
    answers = np.asarray(answers, dtype=object)
    code = _answer_codes(answers)
    first, inverse, counts = _unique_rows(np.concatenate([phi_a, phi_b, code[:, None]], axis=1))
    return AnswerTypes(phi_a[first], phi_b[first], answers[first], counts, inverse)


def collapse_study(study: StudyData, forms: list[Formulation]) -> AnswerTypes:
    """:func:`collapse_answers` of a study, grouped by relevance patterns before scoring.

    Lists with the same levels have the same phi under every ``max``-normalised formulation,
    so the key is the two patterns and the answer (2k + 1 numbers instead of 2F + 1), and only
    the distinct rows are scored. When a formulation normalises by the query's pool (``ideal``,
    ``minmax``, ``ul1``, ``ul2``, AP), the query is part of the key and each list is scored
    against its query's judged pool.
    """
    la, lb = study.levels("a"), study.levels("b")
    answers = np.asarray(study.answers, dtype=object)
    code = _answer_codes(answers)
    pooled = [f.id for f in forms if f.uses_pool]
    columns = [la, lb, code[:, None]]
    if pooled:
        if study.judgments is None:
            raise SatcalError(f"{', '.join(pooled)}: these need each query's judged pool, and this "
                              "study has no judgments attached")
        qcode, qnames = pd.factorize(study.examples["query"].astype(str))
        columns.append(qcode[:, None].astype(float))
    first, inverse, counts = _unique_rows(np.concatenate(columns, axis=1))
    kwargs: dict = {"n_levels": study.n_levels}
    if pooled:
        pools = study.judgments.pools()
        empty = np.zeros(0)
        kwargs.update(pools=[pools.get(q, empty) for q in qnames], query_index=qcode[first])
    phi_a = score_lists(la[first], forms, **kwargs)
    phi_b = score_lists(lb[first], forms, **kwargs)
    return AnswerTypes(phi_a, phi_b, answers[first], counts, inverse)


@dataclass(frozen=True)
class CurveData:
    """The rows of one curve of one formulation, with counts.

    ``x``, ``y`` and ``w`` are the rows (score, outcome, count); ``obs`` gives, for every
    observation in the order the per-answer data would list it, its row: the cross-validation
    folds are drawn over observations, as if nothing had been collapsed. ``types`` is the
    :class:`AnswerTypes` row behind each row (None: the rows are the types, in order), so a
    bootstrap replicate's counts per type give its counts per row.
    """

    x: np.ndarray
    y: np.ndarray
    w: np.ndarray
    obs: np.ndarray
    types: np.ndarray | None = None

    @property
    def n(self) -> int:
        return int(self.obs.size)


def _positions(mask: np.ndarray) -> np.ndarray:
    """For each row, its index among the rows where ``mask`` holds (-1 elsewhere)."""
    pos = np.full(mask.size, -1, dtype=np.intp)
    pos[mask] = np.arange(int(mask.sum()))
    return pos


def satisfaction_curves(types: AnswerTypes) -> list[CurveData]:
    """Per formulation, the P(Sat|phi) data: both_good / both_bad rows, A side then B side."""
    keep = np.isin(types.answers, ("both_good", "both_bad"))
    sat = (types.answers[keep] == "both_good").astype(float)
    w = np.concatenate([types.counts[keep], types.counts[keep]])
    obs = _positions(keep)[types.inverse]
    obs = obs[obs >= 0]
    obs = np.concatenate([obs, obs + int(keep.sum())])
    y = np.concatenate([sat, sat])
    x = np.concatenate([types.phi_a[keep], types.phi_b[keep]], axis=0)
    rows = np.tile(np.flatnonzero(keep), 2)
    return [CurveData(x[:, j], y, w, obs, rows) for j in range(x.shape[1])]


def preference_curves(types: AnswerTypes, population: str = "all") -> list[CurveData]:
    """Per formulation, the P(Pref||dphi|) data of the chosen population."""
    pairs = preference_data(types.phi_a, types.phi_b, types.answers, population, _masks=True)
    out = []
    for x, y, keep in pairs:
        if keep is None:
            out.append(CurveData(x, y, types.counts, types.inverse))
            continue
        obs = _positions(keep)[types.inverse]
        out.append(CurveData(x, y, types.counts[keep], obs[obs >= 0], np.flatnonzero(keep)))
    return out


# --------------------------------------------------------------------------------------------
# Fits
# --------------------------------------------------------------------------------------------
def design(x, degree: int = 2) -> np.ndarray:
    """Columns 1, x, ..., x^degree."""
    x = np.asarray(x, dtype=float)
    return np.stack([x ** p for p in range(degree + 1)], axis=-1)


@dataclass
class LogitFit:
    """A fitted logit curve P(y=1|x) = expit(beta . (1, x, x^2, ...)).

    ``cov`` is the covariance of ``beta`` that :meth:`band` uses: the inverse Fisher
    information (``cov_type = "model"``), or the cluster-robust sandwich when the rows were
    fitted with clusters (``"cluster"``, see :func:`fit_logit`).
    """

    beta: np.ndarray
    cov: np.ndarray
    n: int
    successes: int
    deviance: float
    aic: float
    converged: bool
    cov_type: str = "model"

    def predict(self, x) -> np.ndarray:
        return expit(design(x, len(self.beta) - 1) @ self.beta)

    def band(self, x, level: float = 0.95):
        """Pointwise Wald interval, expit(eta -+ z se(eta)), with se(eta) from ``cov``."""
        X = design(x, len(self.beta) - 1)
        eta = X @ self.beta
        se = np.sqrt(np.maximum(np.einsum("ij,jk,ik->i", X, self.cov, X), 0.0))
        z = ndtri(0.5 + level / 2)
        return expit(eta - z * se), expit(eta + z * se)


def _distinct_pairs(x: np.ndarray, y: np.ndarray):
    """Distinct (x, y) pairs sorted by x then y, and the pair of each input row."""
    order = np.lexsort((y, x))
    xs, ys = x[order], y[order]
    new = np.ones(x.size, dtype=bool)
    new[1:] = (xs[1:] != xs[:-1]) | (ys[1:] != ys[:-1])
    inverse = np.empty(x.size, dtype=np.intp)
    inverse[order] = np.cumsum(new) - 1
    return xs[new], ys[new], inverse


def sufficient_statistics(x, y, w=None):
    """Distinct (x, y) rows and their summed weights: (x, y, count), sorted by x then y.

    A binomial likelihood over these rows with the counts as frequency weights is the
    likelihood of the original rows, term for term.
    """
    x, y = np.asarray(x, float).ravel(), np.asarray(y, float).ravel()
    w = np.ones_like(x) if w is None else np.asarray(w, float).ravel()
    xd, yd, inv = _distinct_pairs(x, y)
    counts = np.bincount(inv, weights=w, minlength=xd.size)
    nz = counts > 0
    return xd[nz], yd[nz], counts[nz]


def fit_logit(x, y, degree: int = 2, weights=None, clusters=None) -> LogitFit:
    """Unpenalised binomial GLM with logit link on (1, x, ..., x^degree) (statsmodels).

    The rows are first collapsed to their sufficient statistics (distinct (x, y) with counts,
    fitted with frequency weights), so the cost depends on the number of distinct scores, not
    on the number of answers; coefficients, covariance, deviance and AIC are those of the
    per-row fit. ``weights`` are frequency weights of the given rows.

    ``clusters`` (one label per given row) makes ``cov`` cluster-robust: the rows with one
    label form one cluster, which stands for ``weight`` identical clusters (so the rows of a
    label must share their weight; a collapsed answer type with count c is c clusters). The
    sandwich (Liang & Zeger 1986, Biometrika 73(1); CR1 as in Stata and statsmodels'
    ``cov_type="cluster"``, whose default small-sample factor it applies):

        V = c H^-1 (sum_g w_g s_g s_g^T) H^-1,  s_g = sum_{i in g} (y_i - p_i) x_i,
        c = G / (G - 1) * (N - 1) / (N - K),

    with H the Fisher information, G = sum_g w_g clusters, N observations and K coefficients.
    :func:`calibrate` clusters the P(Sat|phi) rows by answer (an answer's A and B rows share
    its verdict, so they are not independent; the model-based band is about 20 % too narrow).

    scikit-learn's ``LogisticRegression`` is penalised by default and flips the quadratic
    coefficient's sign on this kind of data, so statsmodels is used.
    """
    import statsmodels.api as sm
    from statsmodels.tools.sm_exceptions import PerfectSeparationWarning, ConvergenceWarning

    xs, ys, ws = sufficient_statistics(x, y, weights)
    n = float(ws.sum())
    if n < degree + 1:
        raise SatcalError(f"a logit of degree {degree} needs at least {degree + 1} observations, "
                          f"got {n:g}")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        res = sm.GLM(ys, design(xs, degree), family=sm.families.Binomial(), freq_weights=ws).fit()
    separated = any(issubclass(w.category, (PerfectSeparationWarning, ConvergenceWarning))
                    for w in caught)
    converged = bool(res.converged) and not separated
    beta, cov = np.asarray(res.params), np.asarray(res.cov_params())
    if clusters is not None:
        cov = _cluster_cov(x, y, weights, clusters, beta, degree)
    return LogitFit(beta, cov, int(round(n)), int(round(float((ws * ys).sum()))), float(res.deviance),
                    float(res.aic), converged, "model" if clusters is None else "cluster")


def _cluster_cov(x, y, weights, clusters, beta, degree):
    """The CR1 cluster-robust covariance of :func:`fit_logit` (see there)."""
    x, y = np.asarray(x, float).ravel(), np.asarray(y, float).ravel()
    w = np.ones_like(x) if weights is None else np.asarray(weights, float).ravel()
    codes, _ = pd.factorize(np.asarray(clusters).ravel())
    if codes.size != x.size or (codes < 0).any():
        raise SatcalError(f"clusters need one label per row ({x.size}), none missing")
    X = design(x, degree)
    p = expit(X @ beta)
    scores = (y - p)[:, None] * X                                   # one observation's score
    g = codes.max() + 1
    s = np.stack([np.bincount(codes, weights=scores[:, k], minlength=g) for k in range(X.shape[1])], 1)
    w_g = np.bincount(codes, weights=w, minlength=g) / np.bincount(codes, minlength=g)
    if not np.allclose(w, w_g[codes]):
        raise SatcalError("clusters: the rows of one cluster need the same weight")
    meat = (s * w_g[:, None]).T @ s
    # the Fisher information at beta itself (statsmodels' IRLS covariance is from its last
    # iteration's weights, a few 1e-7 off)
    bread = np.linalg.pinv((X * (w * p * (1 - p))[:, None]).T @ X)
    n_clusters, n_obs, k = w_g.sum(), w.sum(), X.shape[1]
    if n_clusters < 2 or n_obs <= k:
        return np.full((k, k), np.nan)
    factor = n_clusters / (n_clusters - 1) * (n_obs - 1) / (n_obs - k)
    return factor * bread @ meat @ bread


def _newton(beta: np.ndarray, eta_of, y_of, w_of, design_of, max_iter: int, tol: float):
    """Newton-Raphson with step-halving for m logit fits at once.

    ``eta_of(b, idx)`` gives the linear predictors of fits ``idx`` at coefficients ``b``;
    ``y_of(idx)`` and ``w_of(idx)`` their outcomes and case weights; ``design_of(idx, r, v)``
    returns the gradients X^T r and the Hessians X^T diag(v) X. The log-likelihood is concave,
    so halving any step that does not increase it converges to the maximum statsmodels finds.
    """
    m, p = beta.shape

    def loglik(b, idx):
        eta = eta_of(b, idx)
        return (w_of(idx) * (y_of(idx) * eta - np.logaddexp(0.0, eta))).sum(1)

    all_idx = np.arange(m)
    ll = loglik(beta, all_idx)
    converged = np.zeros(m, dtype=bool)
    eye = np.eye(p)
    for _ in range(max_iter):
        idx = np.flatnonzero(~converged)
        if idx.size == 0:
            break
        mu = expit(eta_of(beta[idx], idx))
        w = w_of(idx)
        grad, hess = design_of(idx, w * (y_of(idx) - mu), w * mu * (1 - mu))
        try:
            step = np.linalg.solve(hess + 1e-12 * eye, grad[..., None])[..., 0]
        except np.linalg.LinAlgError:
            step = np.stack([np.linalg.lstsq(h, g, rcond=None)[0] for h, g in zip(hess, grad)])
        new = beta[idx] + step
        new_ll = loglik(new, idx)
        for _half in range(30):
            worse = new_ll < ll[idx] - 1e-12
            if not worse.any():
                break
            step[worse] /= 2
            new[worse] = beta[idx][worse] + step[worse]
            new_ll[worse] = loglik(new[worse], idx[worse])
        done = np.abs(step).max(1) < tol * (1 + np.abs(new).max(1))
        done |= np.abs(new_ll - ll[idx]) < tol * 1e-3 * (1 + np.abs(new_ll))
        beta[idx], ll[idx] = new, new_ll
        converged[idx[done]] = True
    finite = np.isfinite(beta).all(1) & (np.abs(beta).max(1) < 1e6)
    return beta, converged & finite


def _intercept_start(Y: np.ndarray, W: np.ndarray, p: int) -> np.ndarray:
    """Start every fit at its intercept-only estimate: always finite, usually close."""
    ybar = np.clip((W * Y).sum(1) / np.maximum(W.sum(1), 1e-12), 1e-6, 1 - 1e-6)
    beta = np.zeros((Y.shape[0], p))
    beta[:, 0] = np.log(ybar / (1 - ybar))
    return beta


def fit_logit_batch(X: np.ndarray, Y: np.ndarray, W: np.ndarray | None = None,
                    max_iter: int = 50, tol: float = 1e-10):
    """Batched Newton-Raphson (IRLS) for many logit fits, each with its own design.

    Parameters
    ----------
    X : (m, n, p) design matrices, Y : (m, n) outcomes in [0, 1], W : (m, n) case weights
        (0 drops a row, so unequal sample sizes pad with W = 0).

    Returns
    -------
    beta : (m, p), converged : (m,) bool (False also for a diverging fit: separation)
    """
    X = np.asarray(X, float)
    Y = np.asarray(Y, float)
    W = np.ones_like(Y) if W is None else np.asarray(W, float)

    def grad_hess(idx, r, v):
        Xi = X[idx]
        return np.einsum("mnp,mn->mp", Xi, r), np.einsum("mnp,mn,mnq->mpq", Xi, v, Xi)

    return _newton(_intercept_start(Y, W, X.shape[2]), lambda b, idx: np.einsum("mnp,mp->mn", X[idx], b),
                   lambda idx: Y[idx], lambda idx: W[idx], grad_hess, max_iter, tol)


def fit_logit_replicates(X: np.ndarray, y: np.ndarray, W: np.ndarray, max_iter: int = 50,
                         tol: float = 1e-10):
    """Many weighted fits of one logit model on the same rows: the bootstrap's workhorse.

    Parameters
    ----------
    X : (n, p) design, y : (n,) outcomes in [0, 1], W : (B, n) case weights (bootstrap counts).

    Returns
    -------
    beta : (B, p), converged : (B,) bool

    As the rows are shared, the gradients are one (B, n) x (n, p) product and the Hessians one
    (B, n) x (n, p^2) product per iteration, whatever B is.
    """
    X, y, W = np.asarray(X, float), np.asarray(y, float), np.asarray(W, float)
    n, p = X.shape
    outer = (X[:, :, None] * X[:, None, :]).reshape(n, p * p)
    Y = np.broadcast_to(y, W.shape)

    def grad_hess(idx, r, v):
        return r @ X, (v @ outer).reshape(-1, p, p)

    return _newton(_intercept_start(Y, W, p), lambda b, idx: b @ X.T, lambda idx: y[None, :],
                   lambda idx: W[idx], grad_hess, max_iter, tol)


# --------------------------------------------------------------------------------------------
# Points and indicators
# --------------------------------------------------------------------------------------------
def binned_points(x, y, n_bins: int = 10, weights=None) -> pd.DataFrame:
    """Per bin of x: n, successes, proportion and its Wilson 95% interval.

    ``weights`` are frequency weights (counts) of the rows.
    """
    from statsmodels.stats.proportion import proportion_confint

    b = bin_index(x, n_bins)
    w = np.ones(b.size) if weights is None else np.asarray(weights, float)
    n = np.rint(np.bincount(b, weights=w, minlength=n_bins)).astype(np.int64)
    s = np.bincount(b, weights=w * np.asarray(y, float), minlength=n_bins)
    with np.errstate(invalid="ignore", divide="ignore"):
        prop = np.where(n > 0, s / np.maximum(n, 1), np.nan)
        lo, hi = proportion_confint(s, np.maximum(n, 1), alpha=0.05, method="wilson")
    lo, hi = np.where(n > 0, lo, np.nan), np.where(n > 0, hi, np.nan)
    return pd.DataFrame({"bin": np.arange(n_bins), "x_mid": np.round(bin_midpoints(n_bins), 10),
                         "n": n, "successes": np.rint(s).astype(int), "proportion": prop, "lo": lo, "hi": hi})


def bias_indicators(p_sat: np.ndarray, p_pref: np.ndarray, grid: np.ndarray = GRID,
                    sat_range=None, pref_range=None) -> dict:
    """b1, b2, b3 from curves evaluated on ``grid`` (last axis), over the supported ranges.

    Over the whole grid (``sat_range`` and ``pref_range`` None, or (0, 1)), as in the paper:
    b1 = mean |x - P(Sat|x)|, b2 = (P(Sat|0) + 1 - P(Sat|1)) / 2, b3 = mean (1 - P(Pref|x)).
    Over a supported range [lo, hi] (``sat_range``, ``pref_range``: (..., 2) arrays that
    broadcast against the curves' leading axes), the means run over the grid points inside it
    and b2 measures the gaps at its ends: ((P(Sat|lo) - lo) + (hi - P(Sat|hi))) / 2, which is
    the paper's b2 when [lo, hi] = [0, 1]. A curve is not scored where no answer holds data.
    """
    p_sat, p_pref = np.asarray(p_sat, float), np.asarray(p_pref, float)
    if sat_range is None and pref_range is None:
        return {"b1": np.abs(grid - p_sat).mean(axis=-1),
                "b2": (p_sat[..., 0] + 1.0 - p_sat[..., -1]) / 2.0,
                "b3": (1.0 - p_pref).mean(axis=-1)}
    s_lo, s_hi, s_mask = _range_mask(sat_range, grid)
    _, _, p_mask = _range_mask(pref_range, grid)

    def at(p, x):  # the curve at x (a grid point); nan where the range is undefined
        idx = np.searchsorted(grid, np.where(np.isfinite(x), x, 0.0) - 1e-12)
        idx = np.broadcast_to(np.asarray(idx)[..., None], p.shape[:-1] + (1,))
        return np.where(np.isfinite(x), np.take_along_axis(p, idx, -1)[..., 0], np.nan)

    with np.errstate(invalid="ignore", divide="ignore"):
        return {"b1": (np.abs(grid - p_sat) * s_mask).sum(axis=-1) / s_mask.sum(axis=-1),
                "b2": ((at(p_sat, s_lo) - s_lo) + (s_hi - at(p_sat, s_hi))) / 2.0,
                "b3": ((1.0 - p_pref) * p_mask).sum(axis=-1) / p_mask.sum(axis=-1)}


def _range_mask(bounds, grid: np.ndarray):
    """(lo, hi, mask over grid) of ranges given as (..., 2); None is the whole of [0, 1]."""
    bounds = np.array([0.0, 1.0]) if bounds is None else np.asarray(bounds, float)
    lo, hi = bounds[..., 0], bounds[..., 1]
    mask = (grid >= lo[..., None] - 1e-12) & (grid <= hi[..., None] + 1e-12)
    return lo, hi, mask.astype(float)


#: Observations a bin needs before a curve counts as supported by data there.
SUPPORT_MIN_COUNT = 5
#: Where the bias indicators are computed: ``data`` (the supported range, the default) or
#: ``full`` (the whole of [0, 1], as the paper, whose design reached it for every formulation).
INDICATOR_RANGES = ("data", "full")


def supported_range(x, weights=None, n_bins: int = 10, min_count: int = SUPPORT_MIN_COUNT) -> tuple:
    """The range of scores a curve's data support: from the lower edge of the lowest bin to the
    upper edge of the highest bin holding at least ``min_count`` observations (SPEC 4 bins).

    Bins are the study's unit of coverage, so a curve is supported wherever the design placed
    enough lists (or differences); between two such bins it is interpolated, beyond them it
    would be extrapolated. (nan, nan) when no bin has enough data.
    """
    b = bin_index(np.asarray(x, float), n_bins)
    w = np.ones(b.size) if weights is None else np.asarray(weights, float)
    held = np.flatnonzero(np.bincount(b, weights=w, minlength=n_bins) >= min_count)
    if held.size == 0:
        return (np.nan, np.nan)
    return (round(held[0] / n_bins, 10), round((held[-1] + 1) / n_bins, 10))


def anova_table(bias: pd.DataFrame, indicators: Sequence[str] | None = None,
                bootstrap=None) -> pd.DataFrame:
    """Effects of gain and discount per indicator: sums of squares, eta^2 and a valid test.

    Over the DCG family only: measures beyond DCG (ERR, RR, AP, P) have no gain x discount
    structure and are left out. The estimates share their answers, so ``p`` comes from the
    bootstrap Wald test of :mod:`satcal.analysis.effects` and is empty without ``bootstrap``
    (a :class:`~satcal.analysis.bootstrap.BootstrapResult`); ``indicators`` defaults to b1-b3
    and the joint model's indicators present in ``bias``.
    """
    from .effects import effects_table
    return effects_table(bias, indicators, bootstrap=bootstrap)


def crossed_design(bias: pd.DataFrame) -> pd.DataFrame:
    """The rows of the largest complete gain x discount grid of the DCG family.

    An extra formulation outside the grid (``lin-geo0.8`` beside the 36) or a measure beyond
    DCG would unbalance the two-way design, so the ANOVA leaves them out.
    """
    if "family" in bias.columns:
        bias = bias[bias["family"] == "dcg"]
    per_discount = bias.groupby("discount")["gain"].nunique()
    discounts = per_discount.index[per_discount == per_discount.max()] if len(bias) else []
    bias = bias[bias["discount"].isin(discounts)]
    per_gain = bias.groupby("gain")["discount"].nunique()
    gains = per_gain.index[per_gain == len(discounts)] if len(bias) else []
    return bias[bias["gain"].isin(gains)]


# --------------------------------------------------------------------------------------------
# Model check
# --------------------------------------------------------------------------------------------
def model_check(x, y, folds: int = 5, seed: int = 0, obs=None) -> list[dict]:
    """Cross-validated log loss and Brier score of quadratic vs linear logit vs isotonic.

    ``x`` and ``y`` are rows; ``obs`` (optional) lists the row of every observation, so that
    rows with counts (:class:`CurveData`) are checked as if each observation were its own row.
    The folds are stratified and drawn over observations; each fold's fits and losses run on
    the distinct (x, y) rows weighted by how many of the fold's observations they hold.
    """
    x, y = np.asarray(x, float), np.asarray(y, float)
    obs = np.arange(x.size) if obs is None else np.asarray(obs, np.intp)
    xd, yd, inv = _distinct_pairs(x, y)
    row_of = inv[obs]  # the distinct (x, y) row of every observation
    fold_of = stratified_folds(yd[row_of], folds, seed)
    if fold_of is None:
        return []
    # (folds, rows): how many of each fold's test observations each distinct row holds
    w_test_all = np.bincount(fold_of * xd.size + row_of, minlength=folds * xd.size)
    w_test_all = w_test_all.reshape(folds, xd.size).astype(float)
    total = w_test_all.sum(0)
    losses = {m: [0.0, 0.0] for m in ("quadratic_logit", "linear_logit", "isotonic")}
    for w_test in w_test_all:
        w_train = total - w_test
        preds = {}
        for model, degree in (("quadratic_logit", 2), ("linear_logit", 1)):
            beta, _ = fit_logit_batch(design(xd, degree)[None], yd[None], w_train[None])
            preds[model] = expit(design(xd, degree) @ beta[0])
        preds["isotonic"] = _isotonic_fit(xd, yd, w_train).predict(xd)
        for model, p in preds.items():
            pc = np.clip(p, 1e-4, 1 - 1e-4)  # the same floor for all, so isotonic 0/1 stays finite
            losses[model][0] += float(w_test @ -(yd * np.log(pc) + (1 - yd) * np.log(1 - pc)))
            losses[model][1] += float(w_test @ (p - yd) ** 2)
    n_obs = row_of.size
    return [{"model": model, "log_loss": ll / n_obs, "brier": br / n_obs, "folds": folds}
            for model, (ll, br) in losses.items()]


def stratified_folds(y, folds: int, seed: int) -> np.ndarray | None:
    """The test fold of each observation, as scikit-learn's ``StratifiedKFold(folds,
    shuffle=True, random_state=seed)`` assigns them, computed from class counts in O(n).

    Classes are numbered by first appearance; fold i takes the round-robin share of each class
    over the sorted labels; each class's fold labels are shuffled by one ``RandomState(seed)``
    in class order (sklearn's algorithm; a test checks the two agree). None when a class has
    fewer observations than folds (no stratified split exists).
    """
    encoded, classes = pd.factorize(np.asarray(y), sort=False)  # hashing, no sort of n values
    counts = np.bincount(encoded, minlength=classes.size)
    if classes.size < 2 or counts.min() < folds:
        return None
    # round robin over the sorted labels: fold i holds positions i, i + folds, ...
    ends = np.cumsum(counts)
    starts = ends - counts
    i = np.arange(folds)[:, None]
    allocation = (np.maximum(ends[None] - i, 0) + folds - 1) // folds \
        - (np.maximum(starts[None] - i, 0) + folds - 1) // folds   # (folds, classes)
    rng = np.random.RandomState(seed)
    fold_of = np.empty(encoded.size, dtype=np.intp)
    for c in range(classes.size):
        labels = np.arange(folds).repeat(allocation[:, c])
        rng.shuffle(labels)
        fold_of[encoded == c] = labels
    return fold_of


def _isotonic_fit(x, y, w):
    """Isotonic regression on weighted rows (rows of weight 0 left out)."""
    from sklearn.isotonic import IsotonicRegression
    keep = w > 0
    return IsotonicRegression(out_of_bounds="clip", y_min=0, y_max=1).fit(
        x[keep], y[keep], sample_weight=w[keep])


# --------------------------------------------------------------------------------------------
# The whole analysis
# --------------------------------------------------------------------------------------------
@dataclass(repr=False)
class CalibrationResult:
    """Tidy tables of a calibration analysis (SPEC section 7).

    Attributes
    ----------
    fits, curves, points, bias, anova, model_check : pandas.DataFrame
    meta : dict
        Counts, options and the data notice (licence and citation) of the analysed study.
    """

    fits: pd.DataFrame
    curves: pd.DataFrame
    points: pd.DataFrame
    bias: pd.DataFrame
    anova: pd.DataFrame
    model_check: pd.DataFrame
    meta: dict = field(default_factory=dict)
    bootstrap: object | None = None
    workers: pd.DataFrame | None = None     # a workspace's worker table, shown in the report

    @property
    def estimator(self) -> str:
        """The estimator the ranking leads with: ``per_list`` when the joint model ran, else
        ``paper`` (see :mod:`satcal.analysis.ranking`)."""
        return lead_estimator(self.bias)

    @property
    def ranking(self) -> pd.DataFrame:
        """Formulations by mean rank over the lead estimator's b1-b3, with each one's
        probability of ranking first and its 95% rank interval when bootstrapped."""
        table = rank_formulations(self.bias, self.estimator)
        unc = self.rank_uncertainty
        if unc is not None:
            table = table.merge(unc, on="formulation", how="left")
        return table

    @property
    def rank_uncertainty(self) -> pd.DataFrame | None:
        """:func:`~satcal.analysis.ranking.rank_uncertainty` of the lead estimator (None without
        a bootstrap)."""
        boot = self.bootstrap
        if boot is None:
            return None
        cols = estimator_columns(self.bias, self.estimator)
        paper = {"b1": 0, "b2": 1, "b3": 2}
        joint = {"b1_joint": 0, "b2_joint": 1, "b3_joint": 2}
        parts = []
        for c in cols:
            if c in paper:
                parts.append(boot.indicators[:, :, paper[c]])
            elif boot.joint is not None and joint[c] < boot.joint["indicators"].shape[2]:
                parts.append(boot.joint["indicators"][:, :, joint[c]])
            else:
                return None
        return rank_uncertainty(np.stack(parts, axis=2), list(boot.formulations))

    @property
    def verdict(self):
        """:class:`~satcal.analysis.ranking.RankingVerdict`: whether the answers single out one
        least-biased formulation."""
        return ranking_verdict(rank_formulations(self.bias, self.estimator), self.rank_uncertainty,
                               thin=bool(self.meta.get("warnings")))

    def __repr__(self) -> str:
        best = self.ranking.iloc[0] if len(self.bias) else None
        lead = f"; least biased {best.formulation} (b1 = {best.b1:.3f})" if best is not None else ""
        return (f"<CalibrationResult {self.meta.get('name') or 'study'}: {len(self.bias)} formulations, "
                f"{self.meta.get('n_examples', 0)} answers, bootstrap "
                f"{self.bootstrap.replicates if self.bootstrap is not None else 0}{lead}>")

    def summary(self, top: int = 10) -> str:
        """The study's parameters and the formulations ranked by bias, as text."""
        prov = self.meta.get("provenance", {})
        lines = [repr(self), ""]
        for key in ("k", "levels", "population", "answers", "examples", "workers", "seed", "bootstrap",
                    "simulated"):
            if prov.get(key) is not None:
                lines.append(f"  {key:<12} {prov[key]}")
        rank = self.ranking.head(top)
        cols = ["formulation", "b1", "b2", "b3", "mean_rank"]
        if "b1_lo" in self.bias.columns:
            rank = rank.merge(self.bias[["formulation", "b1_lo", "b1_hi"]], on="formulation")
            cols[2:2] = ["b1_lo", "b1_hi"]
        lines += ["", f"Ranked by bias (mean rank over b1, b2, b3; top {len(rank)}):",
                  rank[cols].to_string(index=False, float_format=lambda v: f"{v:.4f}")]
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        import html
        rank = self.ranking.head(10)[["formulation", "b1", "b2", "b3", "mean_rank"]]
        return (f"<p><b>{html.escape(repr(self))}</b></p>"
                + rank.to_html(index=False, float_format=lambda v: f"{v:.4f}", border=0))

    def tables(self) -> dict[str, pd.DataFrame]:
        out = {"fits": self.fits, "curves": self.curves, "points": self.points, "bias": self.bias,
               "anova": self.anova, "model_check": self.model_check, "ranking": self.ranking}
        if self.bootstrap is not None:
            out.update(self.bootstrap.tables())
        return out



def _formulation_columns(forms: list[Formulation]) -> pd.DataFrame:
    labels = [f.labels for f in forms]
    return pd.DataFrame({"formulation": [f.id for f in forms],
                         "gain": [x["gain"] for x in labels],
                         "discount": [x["discount"] for x in labels],
                         "family": [x["family"] for x in labels]})


def calibrate(study: StudyData | None = None, formulations=None, *, phi_a: np.ndarray | None = None,
              phi_b: np.ndarray | None = None, answers: Sequence[str] | None = None,
              population: str = "all", n_bins: int = 10, model_check_folds: int = 5,
              bootstrap: int = 0, seed: int = 0, n_jobs: int = 1, backend: str = "loky",
              progress: bool = False, sat_model: str = "published",
              indicator_range: str = "data", worker_ids=None, example_ids=None) -> CalibrationResult:
    """Fit P(Sat|phi) and P(Pref|dphi) for every formulation; bias indicators and ANOVA.

    Parameters
    ----------
    study : StudyData, optional
        Examples with both lists' levels and an answer each. Alternatively give ``phi_a``,
        ``phi_b`` (n, F) and ``answers`` (n,) directly (e.g. published scores).
    formulations : list, optional
        Defaults to the 36 study formulations.
    population : {"all", "preferences_only"}
        Preference population (see module docstring); ``all`` reproduces the paper.
    bootstrap : int
        Bootstrap replicates (0 for none; 1000 is the usual choice). With worker ids they
        resample workers and examples crossed (Owen's pigeonhole bootstrap; workers alone when
        each example has one worker), with example ids only examples, and with neither answers
        (:func:`~satcal.analysis.bootstrap.resampling_clusters`); which one is recorded in
        ``meta["provenance"]["resampling"]``.
    seed : int
        Seed of the model check folds and of the bootstrap.
    sat_model : {"published", "both", "joint"}
        ``published``: the paper's P(Sat|phi), fitted on both_good/both_bad answers (the
        satisfaction of a list given that its partner got the same verdict). ``both`` (or
        ``joint``, the same) adds the per-list curve s(phi) of the joint model over all four
        answers (:mod:`satcal.analysis.joint`): rows with ``sat_model = "joint"`` in curves and
        fits (its band from the observed information) and ``b1_joint``, ``b2_joint`` in bias.
        b1-b3 stay the published model's.
    indicator_range : {"data", "full"}
        Where b1-b3 are computed: over the range of scores each curve's data support
        (:func:`supported_range`, the default), or over the whole of [0, 1] as in the paper (the
        same thing when the design reaches every bin, as ECIR 2015's does). Curves outside their
        support are extrapolations: ``curves.csv`` marks them (``supported``) and the figures
        draw them dotted.
    worker_ids, example_ids : sequence, optional
        With ``phi_a``/``phi_b``/``answers`` and no study: the worker and the example of each
        answer, for the bootstrap's resampling (a study gives its own ``worker_id`` and
        ``example_id`` columns).
    """
    forms = _resolve(formulations)
    if sat_model not in SAT_MODELS:
        raise SatcalError(f"sat_model must be one of {', '.join(SAT_MODELS)}, got {sat_model!r}")
    if population not in POPULATIONS:
        raise SatcalError(f"population must be one of {', '.join(POPULATIONS)}, got {population!r}")
    if indicator_range not in INDICATOR_RANGES:
        raise SatcalError(f"indicator_range must be one of {', '.join(INDICATOR_RANGES)}, "
                          f"got {indicator_range!r}")
    meta: dict = {"population": population, "seed": seed, "n_formulations": len(forms)}
    if study is not None:
        types = collapse_study(study, forms)
        answers = np.asarray(study.answers, dtype=object)
        meta.update(name=study.name, notice=study.notice, k=study.k, n_levels=study.n_levels)
    else:
        if phi_a is None or phi_b is None or answers is None:
            raise SatcalError("calibrate needs a study, or phi_a, phi_b and answers")
        answers = np.asarray(answers, dtype=object)
        phi_a, phi_b = np.atleast_2d(phi_a), np.atleast_2d(phi_b)
        if phi_a.shape != (len(answers), len(forms)) or phi_b.shape != phi_a.shape:
            raise SatcalError(f"phi_a and phi_b need shape ({len(answers)}, {len(forms)})")
        types = collapse_answers(phi_a, phi_b, answers)
    sat_curves = satisfaction_curves(types)
    pref_curves = preference_curves(types, population)
    counts = pd.Series(answers).value_counts()
    n_sat = sat_curves[0].n if sat_curves else 0
    meta.update(n_examples=int(len(answers)), n_sat_lists=n_sat, n_sat_examples=n_sat // 2,
                n_distinct_rows=int(types.counts.size),
                answer_counts={c: int(counts.get(c, 0)) for c in ANSWER_CODES})
    if n_sat < 3:
        raise SatcalError("fewer than 2 both_good/both_bad answers: P(Sat|phi) cannot be fitted")

    meta["provenance"] = _provenance(study, forms, population, seed, bootstrap, len(answers))
    meta["provenance"]["sat_model"] = ["published"] + (["joint"] if sat_model != "published" else [])
    meta["provenance"]["pairing_correlation"] = _pairing(types, forms)
    fcols = _formulation_columns(forms)
    support = {"sat": np.array([supported_range(c.x, c.w, n_bins) for c in sat_curves]),
               "pref": np.array([supported_range(c.x, c.w, n_bins) for c in pref_curves])}
    meta["support"] = support
    meta["provenance"]["indicator_range"] = indicator_range
    meta["provenance"]["support"] = _support_record(fcols["formulation"], support, n_bins)
    fit_rows, curve_frames, point_frames, check_rows = [], [], [], []
    p_sat, p_pref = np.empty((len(forms), GRID.size)), np.empty((len(forms), GRID.size))
    iterator = range(len(forms))
    if progress:
        from tqdm.auto import tqdm
        iterator = tqdm(iterator, desc="fitting curves", unit="formulation")
    for j in iterator:
        ident = fcols.iloc[j].to_dict()
        for curve, data, store in (("sat", sat_curves[j], p_sat), ("pref", pref_curves[j], p_pref)):
            x, y, w = data.x, data.y, data.w
            # an answer's A and B rows form one cluster (its row of AnswerTypes, data.types)
            fit = fit_logit(x, y, weights=w, clusters=data.types if curve == "sat" else None)
            store[j] = fit.predict(GRID)
            lo, hi = fit.band(GRID)
            fit_rows.append({**ident, "curve": curve, "n": fit.n, "successes": fit.successes,
                             "beta0": fit.beta[0], "beta1": fit.beta[1], "beta2": fit.beta[2],
                             "se0": np.sqrt(fit.cov[0, 0]), "se1": np.sqrt(fit.cov[1, 1]),
                             "se2": np.sqrt(fit.cov[2, 2]), "deviance": fit.deviance,
                             "aic": fit.aic, "converged": fit.converged,
                             # a quadratic logit can turn down inside [0, 1]; evaluate then uses
                             # the isotonic fit, which cannot
                             "monotone": bool(np.all(np.diff(store[j]) >= -1e-12))})
            iso = _isotonic_curve(x, y, w)
            rng = support[curve][j]
            curve_frames.append(pd.DataFrame({**{c: [v] * GRID.size for c, v in ident.items()},
                                              "curve": curve, "x": GRID, "p": store[j], "lo": lo,
                                              "hi": hi, "p_isotonic": iso,
                                              "supported": (GRID >= rng[0] - 1e-12) & (GRID <= rng[1] + 1e-12)}))
            pts = binned_points(x, y, n_bins, weights=w)
            point_frames.append(pts.assign(**ident, curve=curve))
            checks = model_check(x, y, model_check_folds, seed, obs=data.obs) if model_check_folds else []
            for row in checks:
                check_rows.append({**ident, "curve": curve, **row})
    ranges = support if indicator_range == "data" else {"sat": None, "pref": None}
    ind = bias_indicators(p_sat, p_pref, sat_range=ranges["sat"], pref_range=ranges["pref"])
    bias = fcols.assign(**ind)[["formulation", "gain", "discount", "b1", "b2", "b3", "family"]]
    joint_models = None
    if sat_model != "published":
        joint_fits, joint_curves, b_joint, joint_models = _joint_model(types, fcols, progress)
        fit_rows += joint_fits
        curve_frames += joint_curves
        bias = bias.assign(**b_joint)
    for frame in curve_frames:
        frame.insert(frame.columns.get_loc("curve") + 1, "sat_model", frame.pop("sat_model")
                     if "sat_model" in frame.columns else "published")
    fit_rows = [{**row, "sat_model": row.get("sat_model", "published")} for row in fit_rows]
    order = ["formulation", "gain", "discount", "curve"]
    points = pd.concat(point_frames, ignore_index=True)
    points = points[order + [c for c in points.columns if c not in order]]
    result = CalibrationResult(
        fits=pd.DataFrame(fit_rows), curves=pd.concat(curve_frames, ignore_index=True),
        points=points, bias=bias, anova=anova_table(bias),
        model_check=pd.DataFrame(check_rows, columns=order + ["model", "log_loss", "brier", "folds"]),
        meta=meta)
    if bootstrap:
        from .bootstrap import bootstrap_calibration, resampling_clusters
        if study is not None:
            worker_ids, example_ids = (study.examples[c] if c in study.examples.columns else None
                                       for c in ("worker_id", "example_id"))
        resampling, clusters = resampling_clusters(len(answers), worker_ids, example_ids)
        meta["provenance"]["resampling"] = resampling
        result.bootstrap = bootstrap_calibration(None, None, answers, forms, population=population,
                                                 replicates=bootstrap, seed=seed, n_jobs=n_jobs,
                                                 backend=backend, progress=progress, types=types,
                                                 joint_fits=joint_models, clusters=clusters,
                                                 resampling=resampling,
                                                 support=ranges if indicator_range == "data" else None)
        result.bootstrap.attach(result)
        result.anova = anova_table(result.bias, bootstrap=result.bootstrap)  # the valid test
    result.meta["warnings"] = thin_data_warnings(result)
    result.meta["provenance"]["warnings"] = result.meta["warnings"]
    return result


#: Below these, a study's answers are called thin and its ranking is not crowned: the paper
#: collected 4,115 answers; a cluster bootstrap over fewer than 20 workers rests on too few
#: clusters; a bin of fewer than 20 observations gives a proportion within +/- 0.2 at best.
THIN = {"answers": 1000, "workers": 20, "per_bin": 20}


def thin_data_warnings(result: "CalibrationResult") -> list[str]:
    """Sentences saying where the answers are too thin, or the scores too narrow, to support
    the analysis's claims (shown first in the report, printed by the CLI, kept in
    calibration.json). Empty when nothing is thin."""
    out = []
    prov = result.meta.get("provenance", {})
    n = int(result.meta.get("n_examples", 0))
    if n < THIN["answers"]:
        out.append(f"Only {n} answers (the paper collected 4,115): curves and indicators are uncertain; "
                   "read the intervals, not the point estimates.")
    workers = prov.get("workers")
    if workers is not None and workers < THIN["workers"]:
        out.append(f"Only {workers} workers: what one worker thinks weighs on every estimate, and an "
                   "interval that resamples workers rests on few of them.")
    pts = result.points[result.points["n"] > 0]
    sparse = pts[pts["n"] < THIN["per_bin"]]
    if len(pts) and len(sparse) / len(pts) > 0.25:
        out.append(f"{len(sparse)} of {len(pts)} bins with data hold fewer than {THIN['per_bin']} "
                   "observations: their proportions are within +/- 0.2 at best.")
    support = result.meta.get("support")
    if support is not None:
        sat = support["sat"]
        short = np.flatnonzero(~((sat[:, 0] <= 1e-9) & (sat[:, 1] >= 1 - 1e-9)))
        if short.size:
            names = result.bias["formulation"].to_numpy()[short]
            shown = ", ".join(f"{f} [{sat[j, 0]:.1f}, {sat[j, 1]:.1f}]" for f, j in zip(names[:6], short[:6]))
            more = f" and {short.size - 6} more" if short.size > 6 else ""
            where = ("over that range only, so they are not comparable with indicators over [0, 1]"
                     if prov.get("indicator_range", "data") == "data" else
                     "over [0, 1] all the same (indicator_range = full): partly extrapolated")
            out.append(f"The answers do not reach all of [0, 1] for {short.size} formulations "
                       f"({shown}{more}): their curves beyond it are extrapolations (dotted in the "
                       f"figures) and their indicators are computed {where}.")
    return out


#: Satisfaction models of ``calibrate(sat_model=...)``; ``joint`` is the same as ``both``.
SAT_MODELS = ("published", "both", "joint")


def _joint_model(types: AnswerTypes, fcols: pd.DataFrame, progress: bool):
    """The joint model of every formulation: fits rows (with the maximised log-likelihood, how
    many starts agreed and the fit's flags), curve frames, and b1_joint, b2_joint, b3_joint
    (b3 from the implied preference curve, :func:`~satcal.analysis.joint.implied_preference`)."""
    from .joint import fit_joint, implied_preference
    fits, curves, b1, b2, b3, models = [], [], [], [], [], []
    iterator = range(len(fcols))
    if progress:
        from tqdm.auto import tqdm
        iterator = tqdm(iterator, desc="fitting joint models", unit="formulation")
    for j in iterator:
        ident = fcols.iloc[j].to_dict()
        fit = fit_joint(types.phi_a[:, j], types.phi_b[:, j], types.answers, types.counts)
        models.append(fit)
        p, lo, hi = fit.predict(GRID)
        se = np.sqrt(np.diag(fit.cov)[:3])
        fits.append({**ident, "curve": "sat", "sat_model": "joint", "n": fit.n, "successes": np.nan,
                     "beta0": fit.beta[0], "beta1": fit.beta[1], "beta2": fit.beta[2],
                     "se0": se[0], "se1": se[1], "se2": se[2], "deviance": -2 * fit.loglik,
                     "aic": -2 * fit.loglik + 2 * fit.theta.size, "converged": fit.converged,
                     "monotone": bool(np.all(np.diff(p) >= -1e-12)),
                     **{f"joint_{k}": v for k, v in fit.params().items() if not k.startswith("b")},
                     "loglik": fit.loglik, "starts_agreeing": fit.starts_agreeing,
                     "flags": "; ".join(fit.flags)})
        curves.append(pd.DataFrame({**{c: [v] * GRID.size for c, v in ident.items()}, "curve": "sat",
                                    "sat_model": "joint", "x": GRID, "p": p, "lo": lo, "hi": hi,
                                    "p_isotonic": np.nan}))
        b1.append(float(np.mean(np.abs(GRID - p))))
        b2.append(float((p[0] + 1 - p[-1]) / 2))
        b3.append(float(np.mean(1 - implied_preference(fit, GRID))))
    return fits, curves, {"b1_joint": b1, "b2_joint": b2, "b3_joint": b3}, models


def _support_record(formulations, support: dict, n_bins: int) -> dict:
    """calibration.json's record of where each curve has data (SPEC 7.2)."""
    return {"rule": f"hull of the {n_bins} bins holding at least {SUPPORT_MIN_COUNT} observations",
            "min_count": SUPPORT_MIN_COUNT,
            "ranges": {f: {curve: [None if not np.isfinite(v) else float(v) for v in support[curve][j]]
                           for curve in support} for j, f in enumerate(formulations)}}


def _provenance(study, forms, population: str, seed: int, bootstrap: int, n_answers: int) -> dict:
    """How the calibration was made (SPEC 7, ``calibration.json``); callers that know the input
    files add their hashes and whether the answers are simulated."""
    from ..fileio import package_versions
    ex = study.examples if study is not None else None
    count = lambda col: int(ex[col].nunique()) if ex is not None and col in ex.columns else None
    return {
        "k": study.k if study is not None else None,
        "levels": study.n_levels if study is not None else None,
        "normalization": {f.id: f.normalization for f in forms},
        "negatives": {f.id: f.negatives for f in forms},
        "formulations": [f.id for f in forms],
        "population": population,
        "sat_model": ["published"],
        "answers": int(n_answers),
        "examples": count("example_id"),
        "workers": count("worker_id"),
        "seed": int(seed),
        "bootstrap": int(bootstrap),
        "packages": package_versions(),
        "simulated": False,
    }


def _pairing(types: AnswerTypes, forms) -> dict:
    """corr(phi_A, phi_B) of the answered examples (each answer once): the median over the
    formulations and each one's (SPEC 7.2; the paper's curve depends on it)."""
    from ..generate import pairing_correlation
    r = pairing_correlation(types.phi_a, types.phi_b, types.counts)
    return {"median": round(float(np.nanmedian(r)), 4) if np.isfinite(r).any() else None,
            "by_formulation": {f.id: (round(float(v), 4) if np.isfinite(v) else None) for f, v in zip(forms, r)}}


def _isotonic_curve(x, y, w=None) -> np.ndarray:
    w = np.ones(np.size(x)) if w is None else np.asarray(w, float)
    if len(np.unique(np.asarray(x)[w > 0])) < 2:
        return np.full(GRID.size, np.nan)
    return _isotonic_fit(np.asarray(x, float), np.asarray(y, float), w).predict(GRID)
