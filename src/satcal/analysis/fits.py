"""Quadratic-logit fits of the curves: binomial GLM with logit link on (1, x, x^2)
(statsmodels, unpenalised), with a 95% Wald band from the linear predictor's standard error;
for P(Sat|phi) the covariance is cluster-robust with an answer's two rows as one cluster
(``fit_logit(clusters=...)``). The batched Newton fits (:func:`fit_logit_batch`,
:func:`fit_logit_replicates`) fit many weightings of the same rows at once (the bootstrap).

References
----------
Urbano, J. and Marrero, M. (2015). How do gain and discount functions affect the correlation
between DCG and user satisfaction? ECIR 2015, section 4.
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy.special import expit, ndtri

from ..errors import SatcalError

Z95 = float(ndtri(0.975))

def design(x, degree: int = 2) -> np.ndarray:
    """Columns 1, x, ..., x^degree.

    Parameters
    ----------
    x : array-like of float
    degree : int, default 2

    Returns
    -------
    numpy.ndarray, shape x.shape + (degree + 1,)
    """
    x = np.asarray(x, dtype=float)
    return np.stack([x ** p for p in range(degree + 1)], axis=-1)


@dataclass
class LogitFit:
    """A fitted logit curve P(y=1|x) = expit(beta . (1, x, x^2, ...)).

    Attributes
    ----------
    beta : numpy.ndarray
        The coefficients of 1, x, ..., x^degree (degree + 1 of them).
    cov : numpy.ndarray
        The (degree + 1) x (degree + 1) covariance of ``beta`` that :meth:`band` uses: the
        inverse Fisher information (``cov_type = "model"``), or the cluster-robust sandwich
        when the rows were fitted with clusters (``"cluster"``, see :func:`fit_logit`).
    n : int
        Observations fitted (the sum of the frequency weights).
    successes : int
        Observations with y = 1 (weighted).
    deviance : float
        The residual deviance, as of the fit to the uncollapsed rows.
    aic : float
        Akaike's information criterion of the fit.
    converged : bool
        The fit converged without (quasi-)separation; when False the coefficients may run off.
    cov_type : str
        ``"model"`` or ``"cluster"``: which covariance ``cov`` is.
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
    """Distinct (x, y) pairs sorted by x then y, and the pair of each input row.

    Parameters
    ----------
    x, y : numpy.ndarray, shape (n,)

    Returns
    -------
    xd, yd : numpy.ndarray
        The distinct pairs.
    inverse : numpy.ndarray of int, shape (n,)
        The distinct pair of each input row.
    """
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
        """Log-likelihood of the fits ``idx`` at coefficients ``b``.

        Parameters
        ----------
        b : numpy.ndarray
            Coefficients, one row per fit.
        idx : numpy.ndarray
            Indices of the fits.
        """
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
    X : numpy.ndarray, shape (m, n, p)
        Design matrices, one per fit (the intercept column included).
    Y : numpy.ndarray, shape (m, n)
        Outcomes in [0, 1].
    W : numpy.ndarray, shape (m, n), optional
        Case weights (default 1); 0 drops a row, so unequal sample sizes pad with W = 0.
    max_iter : int, default 50
        Newton iterations at most; a fit not converged by then is reported unconverged.
    tol : float, default 1e-10
        Relative tolerance: a fit has converged when its largest Newton step is below
        ``tol * (1 + max|beta|)`` or its log-likelihood moves by less than
        ``1e-3 * tol * (1 + |loglik|)``.

    Returns
    -------
    beta : numpy.ndarray, shape (m, p)
    converged : numpy.ndarray of bool, shape (m,)
        False also for a diverging fit (separation: a coefficient beyond 1e6 or not finite).
    """
    X = np.asarray(X, float)
    Y = np.asarray(Y, float)
    W = np.ones_like(Y) if W is None else np.asarray(W, float)

    def grad_hess(idx, r, v):
        """Gradients X^T r and Hessians X^T diag(v) X of the fits ``idx``.

        Parameters
        ----------
        idx : numpy.ndarray
            Indices of the fits.
        r : numpy.ndarray
            Weighted residuals, one row per fit.
        v : numpy.ndarray
            Weighted variances, one row per fit.
        """
        Xi = X[idx]
        return np.einsum("mnp,mn->mp", Xi, r), np.einsum("mnp,mn,mnq->mpq", Xi, v, Xi)

    return _newton(_intercept_start(Y, W, X.shape[2]), lambda b, idx: np.einsum("mnp,mp->mn", X[idx], b),
                   lambda idx: Y[idx], lambda idx: W[idx], grad_hess, max_iter, tol)


def fit_logit_replicates(X: np.ndarray, y: np.ndarray, W: np.ndarray, max_iter: int = 50,
                         tol: float = 1e-10):
    """Many weighted fits of one logit model on the same rows: the bootstrap's workhorse.

    Parameters
    ----------
    X : numpy.ndarray, shape (n, p)
        The design shared by every fit (the intercept column included).
    y : numpy.ndarray, shape (n,)
        Outcomes in [0, 1].
    W : numpy.ndarray, shape (B, n)
        Case weights of each fit (bootstrap counts; 0 leaves a row out).
    max_iter : int, default 50
        Newton iterations at most; a fit not converged by then is reported unconverged.
    tol : float, default 1e-10
        Relative tolerance: a fit has converged when its largest Newton step is below
        ``tol * (1 + max|beta|)`` or its log-likelihood moves by less than
        ``1e-3 * tol * (1 + |loglik|)``.

    Returns
    -------
    beta : numpy.ndarray, shape (B, p)
    converged : numpy.ndarray of bool, shape (B,)
        False also for a diverging fit (separation).

    As the rows are shared, the gradients are one (B, n) x (n, p) product and the Hessians one
    (B, n) x (n, p^2) product per iteration, whatever B is.
    """
    X, y, W = np.asarray(X, float), np.asarray(y, float), np.asarray(W, float)
    n, p = X.shape
    outer = (X[:, :, None] * X[:, None, :]).reshape(n, p * p)
    Y = np.broadcast_to(y, W.shape)

    def grad_hess(idx, r, v):
        """Gradients X^T r and Hessians X^T diag(v) X of the fits ``idx``.

        Parameters
        ----------
        idx : numpy.ndarray
            Indices of the fits.
        r : numpy.ndarray
            Weighted residuals, one row per fit.
        v : numpy.ndarray
            Weighted variances, one row per fit.
        """
        return r @ X, (v @ outer).reshape(-1, p, p)

    return _newton(_intercept_start(Y, W, p), lambda b, idx: b @ X.T, lambda idx: y[None, :],
                   lambda idx: W[idx], grad_hess, max_iter, tol)
