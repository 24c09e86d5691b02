"""The paper's curves, P(Sat|phi) and P(Pref|dphi), and the bias indicators (Urbano and Marrero, ECIR 2015, sec. 4):
the data, the fits, points, supported ranges and the model check; :mod:`.calibration` runs them.

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
- The gain and discount effects over the formulations' estimates live in :mod:`.effects`.
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Sequence

import numpy as np
import pandas as pd
from scipy.special import expit, ndtri

from ..errors import SatcalError
from ..answers import ANSWER_CODES, StudyData
from ..measures import Formulation, bin_index, bin_midpoints, score_lists

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
    "supported_range",
    "supported_mask",
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

    Parameters
    ----------
    phi_a, phi_b : numpy.ndarray, shape (n, F)
        Scores of lists A and B under F formulations.
    answers : sequence of str, length n
        Canonical answer codes.

    Returns
    -------
    x : numpy.ndarray, shape (2m, F)
        The A rows first, then the B rows (m answers both_good or both_bad).
    y : numpy.ndarray, shape (2m,)
        1 for both_good, 0 for both_bad.

    References
    ----------
    Urbano, J. and Marrero, M. (2015). How do gain and discount functions affect the
    correlation between DCG and user satisfaction? ECIR 2015.
    """
    answers = np.asarray(answers)
    keep = np.isin(answers, ("both_good", "both_bad"))
    sat = (answers[keep] == "both_good").astype(float)
    x = np.concatenate([np.atleast_2d(phi_a)[keep], np.atleast_2d(phi_b)[keep]], axis=0)
    return x, np.concatenate([sat, sat])


def preference_data(phi_a: np.ndarray, phi_b: np.ndarray, answers: Sequence[str],
                    population: str = "all", _masks: bool = False):
    """Per formulation, (x = |dphi|, agree) of the preference curve.

    Parameters
    ----------
    phi_a, phi_b : numpy.ndarray, shape (n, F)
    answers : sequence of str, length n
    population : {"all", "preferences_only"}
        ``all`` (the paper's) keeps every answer, ties and both_* answers counting as 0;
        ``preferences_only`` keeps a_better / b_better answers with dphi != 0.

    Returns
    -------
    list of (x, y)
        One pair per formulation column (with ``_masks``, a triple whose third item is the
        boolean mask of kept rows, or None when every row is kept).

    References
    ----------
    Urbano, J. and Marrero, M. (2015). How do gain and discount functions affect the
    correlation between DCG and user satisfaction? ECIR 2015.
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
        """The number of answers collapsed."""
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
    """Group answers by (phi_A row, phi_B row, answer code); see :class:`AnswerTypes`.

    Parameters
    ----------
    phi_a, phi_b : numpy.ndarray, shape (n, F)
    answers : sequence of str, length n

    Returns
    -------
    AnswerTypes
    """
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
        """The number of observations (rows before collapsing)."""
        return int(self.obs.size)


def _positions(mask: np.ndarray) -> np.ndarray:
    """For each row, its index among the rows where ``mask`` holds (-1 elsewhere)."""
    pos = np.full(mask.size, -1, dtype=np.intp)
    pos[mask] = np.arange(int(mask.sum()))
    return pos


def satisfaction_curves(types: AnswerTypes) -> list[CurveData]:
    """Per formulation, the P(Sat|phi) data: both_good / both_bad rows, A side then B side.

    Parameters
    ----------
    types : AnswerTypes

    Returns
    -------
    list of CurveData
    """
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
    """Per formulation, the P(Pref||dphi|) data of the chosen population.

    Parameters
    ----------
    types : AnswerTypes
    population : {"all", "preferences_only"}

    Returns
    -------
    list of CurveData
    """
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
        """The fitted probability at ``x``: expit(b0 + b1 x + ... + b_d x^d).

        Parameters
        ----------
        x : array-like of float

        Returns
        -------
        numpy.ndarray of float
        """
        return expit(design(x, len(self.beta) - 1) @ self.beta)

    def band(self, x, level: float = 0.95):
        """Pointwise Wald interval, expit(eta -+ z se(eta)), with se(eta) from ``cov``.

        Parameters
        ----------
        x : array-like of float
        level : float, default 0.95

        Returns
        -------
        lo, hi : numpy.ndarray
        """
        X = design(x, len(self.beta) - 1)
        eta = X @ self.beta
        se = np.sqrt(np.maximum(np.einsum("ij,jk,ik->i", X, self.cov, X), 0.0))
        z = ndtri(0.5 + level / 2)
        return expit(eta - z * se), expit(eta + z * se)


def distinct_pairs(x: np.ndarray, y: np.ndarray):
    """Distinct (x, y) pairs sorted by x then y, and the pair of each input row."""
    order = np.lexsort((y, x))
    xs, ys = x[order], y[order]
    new = np.ones(x.size, dtype=bool)
    new[1:] = (xs[1:] != xs[:-1]) | (ys[1:] != ys[:-1])
    inverse = np.empty(x.size, dtype=np.intp)
    inverse[order] = np.cumsum(new) - 1
    return xs[new], ys[new], inverse


def sufficient_statistics(x, y, w=None):
    """Distinct (x, y) rows and their summed weights, sorted by x then y.

    A binomial likelihood over these rows with the counts as frequency weights is the
    likelihood of the original rows, term for term.

    Parameters
    ----------
    x, y : array-like, length n
    w : array-like, optional
        Frequency weights (default 1).

    Returns
    -------
    x, y, count : numpy.ndarray
    """
    x, y = np.asarray(x, float).ravel(), np.asarray(y, float).ravel()
    w = np.ones_like(x) if w is None else np.asarray(w, float).ravel()
    xd, yd, inv = distinct_pairs(x, y)
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

    Parameters
    ----------
    x, y : array-like, length n
        Scores and 0/1 outcomes.
    degree : int, default 2
    weights : array-like, optional
        Frequency weights of the rows.
    clusters : array-like, optional
        One cluster label per row, for the cluster-robust covariance.

    Returns
    -------
    LogitFit

    References
    ----------
    Liang, K.-Y. and Zeger, S. L. (1986). Longitudinal data analysis using generalized
    linear models. Biometrika 73(1), 13-22.
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

    Parameters
    ----------
    x, y : array-like
    n_bins : int, default 10
    weights : array-like, optional
        Frequency weights (counts) of the rows.

    Returns
    -------
    pandas.DataFrame
        One row per bin: ``bin, x_mid, n, successes, proportion, lo, hi``.

    References
    ----------
    Wilson, E. B. (1927). Probable inference, the law of succession, and statistical inference.
    Journal of the American Statistical Association 22(158), 209-212.
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

    Parameters
    ----------
    p_sat, p_pref : numpy.ndarray, shape (..., G)
        The curves on ``grid``.
    grid : numpy.ndarray, shape (G,)
    sat_range, pref_range : numpy.ndarray, shape (..., 2), optional

    Returns
    -------
    dict
        ``b1``, ``b2``, ``b3``: arrays of the curves' leading shape.

    References
    ----------
    Urbano, J. and Marrero, M. (2015). How do gain and discount functions affect the
    correlation between DCG and user satisfaction? ECIR 2015.
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


def supported_mask(bounds, grid: np.ndarray = GRID) -> np.ndarray:
    """Which points of ``grid`` lie in the range(s) ``bounds``: the ``supported`` column of
    curves.csv, and where the indicators average.

    Parameters
    ----------
    bounds : numpy.ndarray, shape (..., 2), or None
        None is the whole of [0, 1].
    grid : numpy.ndarray, shape (G,)

    Returns
    -------
    numpy.ndarray of bool, shape (..., G)
    """
    bounds = np.array([0.0, 1.0]) if bounds is None else np.asarray(bounds, float)
    return (grid >= bounds[..., 0, None] - 1e-12) & (grid <= bounds[..., 1, None] + 1e-12)


def _range_mask(bounds, grid: np.ndarray):
    """(lo, hi, mask over grid) of ranges given as (..., 2); None is the whole of [0, 1]."""
    bounds = np.array([0.0, 1.0]) if bounds is None else np.asarray(bounds, float)
    return bounds[..., 0], bounds[..., 1], supported_mask(bounds, grid).astype(float)


#: Observations a bin needs before a curve counts as supported by data there.
SUPPORT_MIN_COUNT = 5
#: Where the bias indicators are computed: ``data`` (the supported range, the default) or
#: ``full`` (the whole of [0, 1], as the paper, whose design reached it for every formulation).
INDICATOR_RANGES = ("data", "full")


def supported_range(x, weights=None, n_bins: int = 10, min_count: int = SUPPORT_MIN_COUNT) -> tuple:
    """The range of scores a curve's data support: from the lower edge of the lowest bin to the
    upper edge of the highest bin holding at least ``min_count`` observations.

    Bins are the study's unit of coverage, so a curve is supported wherever the design placed
    enough lists (or differences); between two such bins it is interpolated, beyond them it
    would be extrapolated.

    Parameters
    ----------
    x : array-like
        Scores (or differences) of the curve's rows.
    weights : array-like, optional
        Frequency weights.
    n_bins : int, default 10
    min_count : int
        Observations a bin needs.

    Returns
    -------
    (lo, hi) : tuple of float
        (nan, nan) when no bin has enough data.
    """
    b = bin_index(np.asarray(x, float), n_bins)
    w = np.ones(b.size) if weights is None else np.asarray(weights, float)
    held = np.flatnonzero(np.bincount(b, weights=w, minlength=n_bins) >= min_count)
    if held.size == 0:
        return (np.nan, np.nan)
    return (round(held[0] / n_bins, 10), round((held[-1] + 1) / n_bins, 10))


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
    xd, yd, inv = distinct_pairs(x, y)
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
