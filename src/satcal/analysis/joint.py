"""The per-list satisfaction model (``--sat-model joint``).

The published P(Sat|phi) is fitted on ``both_good``/``both_bad`` answers only, so it estimates
the satisfaction of a list *given that its partner got the same verdict*, and it moves with the
design (which partners lists get). The joint model uses all four answers to estimate
s(phi), the probability that a list with score phi satisfies a user, under this answer process
(per answer, lists A and B satisfy independently):

- both satisfy, probability s_A s_B: ``both_good`` with probability 1 - pi, else a preference;
- neither, (1 - s_A)(1 - s_B): ``both_bad`` with probability 1 - pi, else a preference;
  pi = expit(c0 + c1 |dphi|); such a preference goes to the higher-phi list with probability
  delta (to A or B with 1/2 each when dphi = 0);
- exactly one satisfies: the user prefers it, except with probability lambda (a lapse).

s(phi) = expit(b0 + b1 phi + b2 phi^2). Parameters are fitted by maximum likelihood (scipy,
L-BFGS-B with the analytic gradient, on the collapsed answer rows with their counts). The
likelihood has several local maxima (on the ECIR 2015 answers, 9 of the 36 formulations have
one with pi ~ 0 everywhere, 50-63 log-likelihood units below the best), so :func:`fit_joint`
runs from five deterministic starts (eight on a formulation of at most :data:`WIDE_START_ROWS`
distinct answer rows), keeps the best, and checks that it is a maximum (gradient
~ 0 in the free parameters, observed information positive semi-definite on them). A fit
records its log-likelihood, how many starts reached it (within 0.5) and plain-word ``flags``
for degenerate or boundary fits (pi ~ 0 or ~ 1, delta at 0 or 1, lambda at 0 or at its cap,
a parameter at its box bound, not a maximum).

Standard errors come from the observed information (the numerical Hessian of the
log-likelihood, statsmodels' ``approx_hess``), and the Wald band of s(phi) from the linear
predictor's standard error, as for the published curves. When the analysis is bootstrapped, the
same replicates bootstrap the joint model too (:func:`bootstrap_thetas`, a k-step bootstrap
from the best fit; for a shared-effect fit whose tau is weakly identified, :func:`weak_tau`,
every replicate is re-fitted instead, since one step from the fit is then far from a
replicate's maximum). With pi = 0 and lambda = 0 the model's both_* answers carry the published
estimator's information, but the estimand differs: s(phi) is the per-list curve.

The analysis fits the shared-effect extension (:func:`fit_joint_shared`, ``calibrate``'s
default; ``calibrate(shared_effect=False)`` keeps the model above): both lists of an answer share
an effect v ~ N(0, tau^2) on their logits (a worker's leniency, the answer's mood), so given phi
their verdicts are positively correlated, as satcal's simulated crowd and real crowds make them;
P(answer) is the model above integrated over v (Gauss-Hermite, :data:`SHARED_NODES` nodes), s(phi)
is the population-averaged E_v expit(b0 + v + b1 phi + b2 phi^2), and tau = 0 is the model above
(the fit is that one when no tau > 0 is better). On the ECIR 2015 answers tau is about 2 (1.4-2.1
over the formulations) and the log-likelihood 66-112 above the independent model's.

Indicators of the per-list model (``bias.csv``): b1_joint and b2_joint are b1 and b2 of s(phi);
b3_joint = mean over |dphi| of 1 - P(d), P the preference curve the model implies for pairs
(phi, phi + d) with phi uniform on [0, 1 - d] (:func:`implied_preference`): a fixed averaging,
so that, like s(phi), it does not depend on the study's design.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np
from scipy.special import expit, log_expit

from .._threads import one_blas_thread

__all__ = ["JointFit", "fit_joint", "fit_flags", "joint_probabilities", "bootstrap_thetas",
           "implied_preference", "PARAMETERS", "SharedFit", "fit_joint_shared", "SHARED_PARAMETERS",
           "shared_probabilities", "shared_nodes", "shared_node_thetas", "shared_moments",
           "shared_curve", "shared_curve_on", "replicate_loglik", "weak_tau"]

PARAMETERS = ("b0", "b1", "b2", "c0", "c1", "delta", "lambda")
#: Order of the answer codes in the probability matrix.
CODES = ("a_better", "b_better", "both_good", "both_bad")
_EPS = 1e-12
#: Box of the fitting scale (keeps separated data from running off to infinity).
BOUNDS = [(-30, 30)] * 3 + [(-20, 20)] * 2 + [(-15, 15)] * 2


def _unpack(theta):
    b = theta[:3]
    c0, c1 = theta[3], theta[4]
    delta = expit(theta[5])
    lapse = 0.5 * expit(theta[6])  # a lapse below one half keeps s and 1 - s apart
    return b, c0, c1, delta, lapse


def joint_probabilities(theta, phi_a, phi_b) -> np.ndarray:
    """(n, 4) probabilities of a_better, b_better, both_good, both_bad for each answer row.

    ``theta`` is on the fitting scale: b0, b1, b2, c0, c1, logit(delta), logit(2 lambda), and
    tau for the shared-effect model (8 parameters: :func:`shared_probabilities`).

    Parameters
    ----------
    theta : array-like, shape (7,) or (8,)
    phi_a, phi_b : numpy.ndarray, shape (n,)

    Returns
    -------
    numpy.ndarray, shape (n, 4)
    """
    if np.size(theta) == 8:
        return shared_probabilities(theta, phi_a, phi_b)
    b, c0, c1, delta, lapse = _unpack(np.asarray(theta, float))
    phi_a, phi_b = np.asarray(phi_a, float), np.asarray(phi_b, float)
    s_a = expit(b[0] + b[1] * phi_a + b[2] * phi_a ** 2)
    s_b = expit(b[0] + b[1] * phi_b + b[2] * phi_b ** 2)
    d = phi_a - phi_b
    pi = expit(c0 + c1 * np.abs(d))
    to_a = np.where(d > 0, delta, np.where(d < 0, 1 - delta, 0.5))
    same = s_a * s_b + (1 - s_a) * (1 - s_b)
    only_a, only_b = s_a * (1 - s_b), s_b * (1 - s_a)
    return np.stack([same * pi * to_a + only_a * (1 - lapse) + only_b * lapse,
                     same * pi * (1 - to_a) + only_b * (1 - lapse) + only_a * lapse,
                     s_a * s_b * (1 - pi),
                     (1 - s_a) * (1 - s_b) * (1 - pi)], axis=1)


def _negloglik(theta, phi_a, phi_b, code, counts):
    p = joint_probabilities(theta, phi_a, phi_b)[np.arange(code.size), code]
    return -float(np.sum(counts * np.log(np.maximum(p, _EPS))))


def _by_answer(is_a, is_b, is_good, a, b, good, bad):
    """Each element's value for its row's answer: ``a`` where ``is_a``, ``b`` where ``is_b``,
    ``good`` where ``is_good``, else ``bad``. What ``np.select`` gives, value for value, by nested
    ``np.where``: select's Python-level broadcasting cost more than the arithmetic on a small
    study's rows (7.6 of 147 s of an adaptive end-to-end run, 96,157 calls)."""
    return np.where(is_a, a, np.where(is_b, b, np.where(is_good, good, bad)))


def _answer_terms(theta, phi_a, phi_b, code):
    """Per parameter row and answer row: the observed answer's probability ``p`` and its
    partial derivatives with respect to s_A, s_B, pi, the share to the higher list and the
    lapse, with the quantities the chain rule needs. ``theta`` (R, 7) gives (R, n) arrays;
    one row (R = 1) serves any number of count vectors (they broadcast)."""
    col = lambda i: theta[:, i:i + 1]  # (R, 1): broadcasts over the answer rows
    delta, lapse = expit(col(5)), 0.5 * expit(col(6))
    s_a = expit(col(0) + col(1) * phi_a + col(2) * phi_a ** 2)
    s_b = expit(col(0) + col(1) * phi_b + col(2) * phi_b ** 2)
    d = phi_a - phi_b
    pi = expit(col(3) + col(4) * np.abs(d))
    to_a = np.where(d > 0, delta, np.where(d < 0, 1 - delta, 0.5))
    same = s_a * s_b + (1 - s_a) * (1 - s_b)
    only_a, only_b = s_a * (1 - s_b), s_b * (1 - s_a)
    is_a, is_b, is_good = code == 0, code == 1, code == 2
    by_answer = lambda a, b, good, bad: _by_answer(is_a, is_b, is_good, a, b, good, bad)
    p = by_answer(same * pi * to_a + only_a * (1 - lapse) + only_b * lapse,
                  same * pi * (1 - to_a) + only_b * (1 - lapse) + only_a * lapse,
                  s_a * s_b * (1 - pi), (1 - s_a) * (1 - s_b) * (1 - pi))
    dp_dsa = by_answer((2 * s_b - 1) * pi * to_a + (1 - s_b) * (1 - lapse) - s_b * lapse,
                       (2 * s_b - 1) * pi * (1 - to_a) - s_b * (1 - lapse) + (1 - s_b) * lapse,
                       s_b * (1 - pi), -(1 - s_b) * (1 - pi))
    dp_dsb = by_answer((2 * s_a - 1) * pi * to_a - s_a * (1 - lapse) + (1 - s_a) * lapse,
                       (2 * s_a - 1) * pi * (1 - to_a) + (1 - s_a) * (1 - lapse) - s_a * lapse,
                       s_a * (1 - pi), -(1 - s_a) * (1 - pi))
    dp_dpi = by_answer(same * to_a, same * (1 - to_a), -s_a * s_b, -(1 - s_a) * (1 - s_b))
    dp_dto = np.where(is_a, same * pi, np.where(is_b, -same * pi, 0.0))
    dp_dlapse = np.where(is_a, only_b - only_a, np.where(is_b, only_a - only_b, 0.0))
    return dict(p=p, s_a=s_a, s_b=s_b, pi=pi, d=d, delta=delta, lapse=lapse, dp_dsa=dp_dsa,
                dp_dsb=dp_dsb, dp_dpi=dp_dpi, dp_dto=dp_dto, dp_dlapse=dp_dlapse)


def _gradient(t, phi_a, phi_b, counts):
    """The negative log-likelihood's gradient, (B, 7), from :func:`_answer_terms` ``t`` and
    ``counts`` (B, n). Only the products with the counts are (B, n) work when ``t`` has one
    row, which is what makes the k-step bootstrap cheap."""
    p, s_a, s_b, pi, d = t["p"], t["s_a"], t["s_b"], t["pi"], t["d"]
    delta, lapse = t["delta"], t["lapse"]
    weight = np.where(p > _EPS, counts / np.maximum(p, _EPS), 0.0)  # clipped: no gradient
    ga = weight * t["dp_dsa"] * s_a * (1 - s_a)
    gb = weight * t["dp_dsb"] * s_b * (1 - s_b)
    gpi = weight * t["dp_dpi"] * pi * (1 - pi)
    return -np.stack([
        np.sum(ga + gb, axis=1), np.sum(ga * phi_a + gb * phi_b, axis=1),
        np.sum(ga * phi_a ** 2 + gb * phi_b ** 2, axis=1),
        np.sum(gpi, axis=1), np.sum(gpi * np.abs(d), axis=1),
        np.sum(weight * t["dp_dto"] * np.sign(d), axis=1) * (delta * (1 - delta))[:, 0],
        np.sum(weight * t["dp_dlapse"], axis=1) * (lapse * (1 - 2 * lapse))[:, 0]], axis=1)


def _negloglik_and_gradient(theta, phi_a, phi_b, code, counts):
    """The negative log-likelihood and its gradient (by the chain rule through s_A, s_B, pi,
    the share to the higher list and the lapse; checked against finite differences in the
    tests), so that each fit needs a few dozen likelihood evaluations instead of hundreds.

    Batched as well: ``theta`` (B, 7) with ``counts`` (B, n) gives values (B,) and gradients
    (B, 7), one per bootstrap replicate; ``theta`` (7,) with ``counts`` (B, n) evaluates one
    point under B count vectors.
    """
    single = np.ndim(theta) == 1 and np.ndim(counts) == 1
    theta = np.atleast_2d(np.asarray(theta, float))
    counts = np.atleast_2d(counts)
    t = _answer_terms(theta, phi_a, phi_b, code)
    grad = _gradient(t, phi_a, phi_b, counts)
    value = -np.sum(counts * np.log(np.maximum(t["p"], _EPS)), axis=1)
    return (float(value[0]), grad[0]) if single else (value, grad)


def replicate_loglik(thetas, phi_a, phi_b, code, weights, fit: "JointFit | None" = None,
                     block: int = 100) -> np.ndarray:
    """Each replicate's log-likelihood at its own parameters, l_b(theta_b) = sum_i W_bi
    log p_i(theta_b), (B,); NaN where the replicate's parameters are NaN.

    With ``fit`` (the full-sample fit the k-step replicates started from) it is taken to
    second order around the full-sample estimate: l_b(theta_hat) + (1/2) D' V^+ D, with
    D = theta_b - theta_hat and V the fit's covariance (a one-step replicate moves by
    D = V g_b, so the term is g_b' V g_b / 2, the gain of that Newton step). That costs one
    product of the weights with the rows' log-probabilities, where the exact sum evaluates the
    model at every replicate's parameters.

    Parameters
    ----------
    thetas : numpy.ndarray, shape (B, 7) or (B, 8)
        Replicate parameters (:func:`bootstrap_thetas`); 8: the shared-effect model.
    phi_a, phi_b : numpy.ndarray, shape (n,)
    code : numpy.ndarray of int, shape (n,)
        Each row's answer, as its index in ``CODES``.
    weights : numpy.ndarray, shape (B, n)
        Each replicate's weight of each row.
    fit : JointFit, optional
        The full-sample fit: the second-order form above; None, or a fit whose covariance is
        not finite (a degenerate fit), the exact sum.
    block : int, default 100
        Replicates at a time (exact sum).

    Returns
    -------
    numpy.ndarray, shape (B,)
    """
    thetas, weights = np.asarray(thetas, float), np.asarray(weights, float)
    phi_a, phi_b = np.asarray(phi_a, float), np.asarray(phi_b, float)
    cov = None if fit is None else np.asarray(fit.cov, float)
    if cov is not None and np.isfinite(cov).all():  # a degenerate fit's covariance: the exact sum
        p = joint_probabilities(fit.theta, phi_a, phi_b)[np.arange(code.size), code]
        D = thetas - fit.theta
        gain = 0.5 * np.einsum("bi,ij,bj->b", D, np.linalg.pinv(cov), D)
        return weights @ np.log(np.maximum(p, _EPS)) + gain
    if thetas.shape[1] == 8:   # the shared-effect model: the replicates' rows at once
        nodes = getattr(fit, "nodes", SHARED_NODES)
        out = np.full(len(thetas), np.nan)
        finite = np.flatnonzero(np.isfinite(thetas).all(1))
        chunk = max(1, VECTOR_SIZE // (nodes * max(phi_a.size, 1)))
        for i in range(0, finite.size, chunk):
            idx = finite[i:i + chunk]
            logp = np.log(np.maximum(_shared_rows(thetas[idx], phi_a, phi_b, code, nodes, gradient=False)[0], _EPS))
            # a product per replicate, as each replicate's own call made it (the same sums)
            out[idx] = [w @ lp for w, lp in zip(weights[idx], logp)]
        return out
    d = phi_a - phi_b
    is_a, is_b, is_good = code == 0, code == 1, code == 2
    out = np.full(len(thetas), np.nan)
    for i in range(0, len(thetas), block):
        th = thetas[i:i + block]
        col = lambda k: th[:, k:k + 1]
        delta, lapse = expit(col(5)), 0.5 * expit(col(6))
        s_a = expit(col(0) + col(1) * phi_a + col(2) * phi_a ** 2)
        s_b = expit(col(0) + col(1) * phi_b + col(2) * phi_b ** 2)
        pi = expit(col(3) + col(4) * np.abs(d))
        to_a = np.where(d > 0, delta, np.where(d < 0, 1 - delta, 0.5))
        same = s_a * s_b + (1 - s_a) * (1 - s_b)
        only_a, only_b = s_a * (1 - s_b), s_b * (1 - s_a)
        p = _by_answer(is_a, is_b, is_good, same * pi * to_a + only_a * (1 - lapse) + only_b * lapse,
                       same * pi * (1 - to_a) + only_b * (1 - lapse) + only_a * lapse,
                       s_a * s_b * (1 - pi), (1 - s_a) * (1 - s_b) * (1 - pi))
        out[i:i + block] = np.sum(weights[i:i + block] * np.log(np.maximum(p, _EPS)), axis=1)
    return out


def bootstrap_thetas(fit: "JointFit", phi_a, phi_b, code, weights, steps: int = 1,
                     block: int = 100) -> np.ndarray:
    """Bootstrap replicates of the joint model's parameters, (B, 7), by the k-step bootstrap.

    Each replicate starts at the full-sample estimate and takes ``steps`` Newton steps on its
    own (resampled) log-likelihood, with the full-sample observed information as the Hessian:
    Andrews (2002), "Higher-order improvements of a computationally attractive k-step
    bootstrap for extremum estimators", Econometrica 70(1); k-step replicates have the same
    first-order distribution as full re-fits at a fraction of the cost (all replicates move at
    once, ``block`` at a time). One step: on the ECIR 2015 answers its curves are within 0.003
    of full re-fits, and further fixed-Hessian steps do not get closer where parameters sit at
    their bounds (tests/test_joint.py). Rows of NaN when the information is unusable.

    Every replicate's first step starts from the same point, so the per-answer terms of that
    step are computed once and only their products with the weights are per replicate.

    Parameters
    ----------
    fit : JointFit or SharedFit
        The full-sample fit (a :class:`SharedFit`: the 8 parameters, one step by the rows'
        scores at the fit, :func:`_shared_bootstrap_thetas`; full re-fits where
        :func:`weak_tau`).
    phi_a, phi_b : numpy.ndarray, shape (n,)
    code : numpy.ndarray of int, shape (n,)
        Each row's answer, as its index in ``CODES``.
    weights : numpy.ndarray, shape (B, n)
        Each replicate's weight of each row.
    steps : int, default 1
    block : int, default 100

    Returns
    -------
    numpy.ndarray, shape (B, 7), or (B, 8) for a :class:`SharedFit`

    References
    ----------
    Andrews, D. W. K. (2002). Higher-order improvements of a computationally attractive k-step
    bootstrap for extremum estimators. Econometrica 70(1), 119-162.
    """
    weights = np.atleast_2d(weights)
    if not np.isfinite(fit.cov).all():
        return np.full((len(weights), fit.theta.size), np.nan)
    if fit.theta.size == 8:
        return _shared_bootstrap_thetas(fit, phi_a, phi_b, code, weights, steps)
    low, high = np.array(BOUNDS).T
    out = np.empty((len(weights), fit.theta.size))
    start_terms = _answer_terms(fit.theta[None, :], phi_a, phi_b, code)
    for start in range(0, len(weights), block):
        w = weights[start:start + block]
        theta, terms = fit.theta[None, :], start_terms
        for _ in range(steps):
            grad = _gradient(terms, phi_a, phi_b, w)
            theta = np.clip(theta - grad @ fit.cov.T, low, high)
            terms = _answer_terms(theta, phi_a, phi_b, code) if _ + 1 < steps else None
        out[start:start + block] = theta
    return out


@dataclass
class JointFit:
    """A fitted joint model: parameters on the fitting scale, their covariance, and the
    per-list curve s(phi) with its 95% band.

    Attributes
    ----------
    theta : numpy.ndarray
        The 7 parameters on the fitting scale: b0, b1, b2, c0, c1, logit(delta),
        logit(2 lambda) (:meth:`params` gives them on their natural scale).
    cov : numpy.ndarray
        7 x 7 covariance of ``theta``: the inverse observed information (its pseudo-inverse when
        singular; NaN when even that gives a negative variance).
    n : int
        Answers fitted (the sum of the rows' counts).
    converged : bool
        The optimiser succeeded and the fit passed the maximum check (gradient ~ 0 and
        curvature >= 0 in the free parameters).
    loglik : float
        The log-likelihood at ``theta``.
    starts_agreeing : int
        How many of the starts ended within 0.5 log-likelihood of the best.
    flags : tuple of str
        Plain-word flags of a degenerate or boundary fit, or of a fit that is not a maximum
        (:func:`fit_flags`); empty when none.
    starts : int
        How many starts the fit ran (for a :class:`SharedFit`, the tau = 0 candidate included);
        0 when not known.
    """

    theta: np.ndarray
    cov: np.ndarray
    n: int
    converged: bool
    loglik: float
    #: how many of the starts ended within 0.5 log-likelihood of the best
    starts_agreeing: int = 1
    #: plain-word flags of a degenerate or boundary fit (:func:`fit_flags`); empty when none
    flags: tuple = ()
    #: how many starts the fit ran (``starts_agreeing`` counts among them); 0 when not known
    starts: int = 0

    @property
    def beta(self) -> np.ndarray:
        """The coefficients of s(phi) = expit(b0 + b1 phi + b2 phi^2)."""
        return self.theta[:3]

    def params(self) -> dict:
        """Parameters on their natural scale: b0-b2, c0, c1, delta, lambda.

        Returns
        -------
        dict of str to float
        """
        b, c0, c1, delta, lapse = _unpack(self.theta)
        return dict(zip(PARAMETERS, [*map(float, b), float(c0), float(c1), float(delta), float(lapse)]))

    def predict(self, x, z: float = 1.959963984540054):
        """s(x) and its 95% band (expit of eta -/+ z se(eta)).

        Parameters
        ----------
        x : array-like of float
        z : float
            The normal quantile of the band (95%).

        Returns
        -------
        s, lo, hi : numpy.ndarray
        """
        x = np.asarray(x, float)
        X = np.stack([np.ones_like(x), x, x ** 2], axis=-1)
        eta = X @ self.beta
        cov = self.cov[:3, :3]
        se = np.sqrt(np.maximum(np.einsum("ij,jk,ik->i", X, cov, X), 0)) if np.isfinite(cov).all() else np.full_like(eta, np.nan)
        return expit(eta), expit(eta - z * se), expit(eta + z * se)


def _start(phi_a, phi_b, code, counts) -> np.ndarray:
    """Start from the published estimator's idea of s (a linear logit on both_* answers) and a
    small pi and lapse."""
    good, bad = code == 2, code == 3
    x = np.concatenate([phi_a[good | bad], phi_b[good | bad]])
    y = np.concatenate([good[good | bad], good[good | bad]]).astype(float)
    w = np.concatenate([counts[good | bad], counts[good | bad]]).astype(float)
    b1 = 4.0
    if w.sum() > 0 and 0 < np.average(y, weights=w) < 1:
        mean = np.average(y, weights=w)
        b0 = np.log(mean / (1 - mean)) - b1 * np.average(x, weights=w)
    else:
        b0 = -2.0
    return np.array([b0, b1, 0.0, -1.0, 1.0, 1.0, -2.0])


def _starts(phi_a, phi_b, code, counts) -> np.ndarray:
    """Deterministic starting points, (5, 7): the likelihood has several local maxima (on the
    ECIR 2015 answers a start with pi ~ 0 everywhere ends 50-63 log-likelihood units below one
    with pi rising in |dphi|), so the fit runs from each and keeps the best.

    Rows: the published-curve start (pi small and flat); pi rising in |dphi| (c0 = -6,
    c1 = 7); pi falling (c0 = 1, c1 = -5); a flat s (slope 1) with a lapse of 1/4; a steep s
    (slope 8) with a lapse near 0 and delta near 1. The flat and steep starts keep s's mean
    where the first start puts it (at phi = 1/2).
    """
    base = _start(phi_a, phi_b, code, counts)
    middle = base[0] + base[1] / 2   # the first start's logit s(1/2)
    return np.array([base,
                     [*base[:3], -6.0, 7.0, *base[5:]],
                     [*base[:3], 1.0, -5.0, *base[5:]],
                     [middle - 0.5, 1.0, 0.0, -3.0, 3.0, 1.0, 0.0],
                     [middle - 4.0, 8.0, 0.0, -2.0, 0.0, 3.0, -5.0]])


#: Starts whose maximised log-likelihood is within this of the best count as agreeing.
AGREE = 0.5
#: Tolerances of the maximum check: a free parameter's gradient (log-likelihood units per unit
#: of the fitting scale), a parameter's distance to its box bound, and the relative size of a
#: negative eigenvalue of the observed information that numerical noise can explain.
GRAD_TOL, BOUND_TOL, EIG_TOL = 0.01, 1e-4, 1e-6


#: Preference processes of the wide starts, by name: (c0, c1, logit delta) on the fitting scale,
#: None keeping the start's own value. "flat": pi 1/2 at every |dphi|, delta 1/2;
#: "lowest slope": c1 at its bound, so preferences between lists of one verdict only at
#: |dphi| ~ 0; "rising": pi rising in |dphi| (the second of :func:`_starts`). Small studies'
#: likelihoods have maxima in each of these regions that no start from the independent fit
#: reaches (docs/benchmarks.md, bench_small_maxima.py).
WIDE_PREFERENCES = {"flat": (0.0, 0.0, 0.0), "lowest slope": (0.0, BOUNDS[4][0], None),
                    "rising": (-6.0, 7.0, 0.0)}
#: Distinct answer rows up to which :func:`fit_joint` and :func:`fit_joint_shared` add the wide
#: starts: their cost grows with the rows, and on ECIR 2015's 30 formulations of 1,194-2,849 rows
#: the shared fit's three tau starts already reach the maximum the wide starts reach (within 4e-5).
WIDE_START_ROWS = 1000


def _with_preference(theta, name: str) -> np.ndarray:
    """``theta`` (7,) with its preference process (c0, c1, logit delta) replaced by
    :data:`WIDE_PREFERENCES`' ``name`` (a copy)."""
    out = np.array(theta[:7], dtype=float)
    for i, value in enumerate(WIDE_PREFERENCES[name]):
        if value is not None:
            out[3 + i] = value
    return out


def _collapse_rows(phi_a, phi_b, code, counts):
    """Merge rows with the same (phi_A, phi_B, answer): the likelihood is unchanged (counts
    add) and one formulation often has far fewer distinct rows than the study has."""
    key = np.stack([phi_a, phi_b, code.astype(float)], axis=1)
    _, first, inverse = np.unique(key, axis=0, return_index=True, return_inverse=True)
    summed = np.bincount(inverse.ravel(), weights=counts, minlength=first.size)
    keep = summed > 0
    return phi_a[first][keep], phi_b[first][keep], code[first][keep], summed[keep]


@one_blas_thread
def fit_joint(phi_a, phi_b, answers, counts=None) -> JointFit:
    """Maximum-likelihood fit of the joint model to answers (codes of ``CODES``), each row
    standing for ``counts`` answers (default 1).

    L-BFGS-B (analytic gradient) runs to convergence from each of the deterministic starts of
    :func:`_starts` (on a study of at most :data:`WIDE_START_ROWS` distinct answer rows also
    from the first with each of the wide starts' preference processes,
    :data:`WIDE_PREFERENCES`: on ten simulated studies of 42-3,073 answers the five starts
    ended more than 0.01 below a 60-start random search on 28 of 360 fits, by up to 0.40, the
    eight on 12, by up to 0.29); the best end is kept and checked to be a maximum: the
    gradient is near 0 in every parameter not at its box bound, and the observed information
    on those parameters is positive semi-definite. ``converged`` is False when the best run did not converge or the
    check fails; ``flags`` names degenerate or boundary fits (:func:`fit_flags`).

    Parameters
    ----------
    phi_a, phi_b : numpy.ndarray, shape (n,)
    answers : sequence of str, length n
    counts : array-like, optional

    Returns
    -------
    JointFit

    References
    ----------
    Urbano, J. and Marrero, M. (2015). How do gain and discount functions affect the
    correlation between DCG and user satisfaction? ECIR 2015 (the four answers; the joint
    model's answer process extends theirs, see the module docstring).

    Byrd, R. H., Lu, P., Nocedal, J. and Zhu, C. (1995). A limited memory algorithm for bound
    constrained optimization. SIAM Journal on Scientific Computing 16(5), 1190-1208.
    """
    from scipy.optimize import minimize
    from statsmodels.tools.numdiff import approx_hess

    phi_a, phi_b = np.asarray(phi_a, float), np.asarray(phi_b, float)
    answers = np.asarray(answers, dtype=object)
    code = np.full(answers.size, -1)
    for i, c in enumerate(CODES):
        code[answers == c] = i
    if (code < 0).any():
        raise ValueError(f"unknown answer codes: {sorted(set(answers[code < 0]))}")
    counts = np.ones(answers.size) if counts is None else np.asarray(counts, float)
    args = _collapse_rows(phi_a, phi_b, code, counts)
    starts = _starts(*args)
    if args[0].size <= WIDE_START_ROWS:
        starts = np.vstack([starts, [_with_preference(starts[0], name) for name in WIDE_PREFERENCES]])
    stops, values = _independent_runs(starts, args)
    # the best end, polished with tight tolerances (L-BFGS-B's defaults stop on a relative
    # change of f of about 2e-9, which can leave a gradient of 0.1 on 4,000 answers)
    best = minimize(_negloglik_and_gradient, stops[int(np.argmin(values))], args=args, jac=True,
                    method="L-BFGS-B", bounds=BOUNDS, options={"maxiter": 2000, "ftol": 1e-14,
                                                              "gtol": 1e-8})
    values[np.argmin(values)] = min(values.min(), best.fun)
    theta = best.x
    hess = approx_hess(theta, _negloglik, args=args)
    grad = _negloglik_and_gradient(theta, *args)[1]
    free = _free(theta)
    check = _maximum_check(grad, hess, free)
    fit = JointFit(theta, _covariance(hess), int(counts.sum()), bool(best.success) and not check,
                   -float(best.fun), int(np.sum(values <= best.fun + AGREE)), (), len(values))
    pi = expit(theta[3] + theta[4] * np.abs(args[0] - args[1]))
    fit.flags = tuple(check) + fit_flags(theta, pi)
    return fit


def _independent_runs(starts, args):
    """:func:`fit_joint`'s L-BFGS-B runs (scipy's defaults, at most 2,000 iterations) from each
    start, (S, 7), on the collapsed rows ``args``: their ends and negative log-likelihoods.
    The runs go in lockstep (:func:`_lbfgsb_lockstep`, one evaluation for every run asking:
    the same iterates as run by run, at a fraction of numpy's per-call cost on a small study),
    or by ``scipy.optimize.minimize`` one by one where scipy's routine is not there."""
    options = {**_LBFGSB, "maxiter": 2000}
    try:
        return _lbfgsb_lockstep(starts, lambda idx, points: _negloglik_and_gradient(points, *args[:3], args[3][None]),
                                BOUNDS, options)
    except _NotTheRoutine:
        return _minimize_each(_negloglik_and_gradient, starts, lambda b: args, BOUNDS, options)


def _free(theta) -> np.ndarray:
    """Parameters not at their box bound."""
    low, high = np.array(BOUNDS).T
    return (theta > low + BOUND_TOL) & (theta < high - BOUND_TOL)


def _maximum_check(grad, hess, free, names=PARAMETERS) -> list[str]:
    """Why ``theta`` is not a local maximum (empty when it is one): a gradient of the negative
    log-likelihood away from 0 in a free parameter, or a negative curvature there."""
    out = []
    g = np.abs(grad[free])
    if g.size and g.max() > GRAD_TOL:
        name = np.array(names)[free][int(np.argmax(g))]
        out.append(f"not a maximum: the log-likelihood still changes along {name} "
                   f"(gradient {g.max():.3g})")
    h = (hess + hess.T)[np.ix_(free, free)] / 2
    if h.size and np.all(np.isfinite(h)):
        eig = np.linalg.eigvalsh(h)
        if eig.min() < -EIG_TOL * max(1.0, np.abs(eig).max()):
            out.append("not a maximum: the observed information is not positive semi-definite "
                       f"(eigenvalue {eig.min():.3g})")
    return out


def fit_flags(theta, pi_observed) -> tuple[str, ...]:
    """Plain-word flags of a degenerate or boundary fit.

    ``pi_observed``: pi at the |dphi| of the answers. Flags: pi ~ 0 (below 0.001) or ~ 1
    (above 0.999) at every observed |dphi|; delta at 1 or 0 (within 0.001); lambda at 0 (below
    0.001) or at its 0.5 cap (within 0.001); any other parameter at its box bound.

    With the shared-effect model's eighth parameter: tau at 0 (the fit is the independent
    model) or at its box bound.

    Parameters
    ----------
    theta : array-like, shape (7,) or (8,)
    pi_observed : numpy.ndarray

    Returns
    -------
    tuple of str
        Empty for a regular fit.
    """
    theta = np.asarray(theta, float)
    tau = theta[7] if theta.size > 7 else None
    theta = theta[:7]
    b, c0, c1, delta, lapse = _unpack(theta)
    out = []
    pi_observed = np.asarray(pi_observed, float)
    if pi_observed.size and pi_observed.max() < 1e-3:
        out.append("pi ~ 0: undecided users never state a preference (pi < 0.001 at every "
                   "observed |dphi|)")
    if pi_observed.size and pi_observed.min() > 1 - 1e-3:
        out.append("pi ~ 1: undecided users always state a preference (pi > 0.999 at every "
                   "observed |dphi|)")
    if delta > 1 - 1e-3:
        out.append("delta at 1: every undecided preference goes to the higher-phi list")
    elif delta < 1e-3:
        out.append("delta at 0: every undecided preference goes to the lower-phi list")
    if lapse < 1e-3:
        out.append("lambda at 0: no lapses")
    elif lapse > 0.5 - 1e-3:
        out.append("lambda at its 0.5 cap: a satisfied list is preferred no more often than chance")
    at_bound = ~_free(np.asarray(theta, float))
    at_bound[5:] = False   # delta and lambda: named on their own scale above
    for i in np.flatnonzero(at_bound):
        out.append(f"{PARAMETERS[i]} at its box bound {theta[i]:g}")
    if tau is not None and tau <= TAU_BOUNDS[0] + BOUND_TOL:
        out.append("tau at 0: no shared answer effect (the fit is the independent model)")
    elif tau is not None and tau >= TAU_BOUNDS[1] - BOUND_TOL:
        out.append(f"tau at its box bound {TAU_BOUNDS[1]:g}")
    return tuple(out)


def implied_preference(fit, grid, nodes: int = 16) -> np.ndarray:
    """The preference curve the per-list model implies, on a fixed, design-free averaging.

    For |dphi| = d, the probability that a user prefers the higher-phi list of a pair
    (phi, phi + d), averaged over phi uniform on [0, 1 - d]:

        P(d) = mean_phi { s_hi (1 - s_lo)(1 - lambda) + s_lo (1 - s_hi) lambda
                          + [s_hi s_lo + (1 - s_hi)(1 - s_lo)] pi(d) delta },

    s_hi = s(phi + d), s_lo = s(phi) (the answer process of the module docstring; at d = 0 the limit d -> 0+).
    The average is a Gauss-Legendre quadrature with ``nodes`` points. ``b3_joint`` is the mean
    of 1 - P over the grid, the per-list counterpart of the paper's b3 (which averages the
    observed pairs, so it depends on the design).

    Parameters
    ----------
    fit : JointFit or array
        A fit, or parameters on the fitting scale: (7,) or (B, 7) (bootstrap replicates); 8
        parameters: the shared-effect model, both lists of a pair at the same v
        (:func:`_implied_shared`).
    grid : array
        Values of |dphi| in [0, 1].
    nodes : int, default 16
        Gauss-Legendre nodes of the average over phi (exact for polynomials of degree
        2 * nodes - 1 in phi).

    Returns
    -------
    (G,) or (B, G) probabilities.
    """
    theta = np.asarray(fit.theta if isinstance(fit, JointFit) else fit, float)
    single = theta.ndim == 1
    theta = np.atleast_2d(theta)
    if theta.shape[1] == 8:
        out = _implied_shared(theta, np.asarray(grid, float), nodes)
        return out[0] if single else out
    d = np.clip(np.asarray(grid, float), 0.0, 1.0)[None, :]
    u, w = np.polynomial.legendre.leggauss(nodes)
    points = list(zip((u + 1) / 2, w / 2))
    out = np.empty((theta.shape[0], d.size))
    # a few replicates at a time: the working arrays stay in the processor's cache
    rows = max(1, 2 ** 15 // max(d.size, 1))
    for start in range(0, theta.shape[0], rows):
        out[start:start + rows] = _implied_rows(theta[start:start + rows], d, points)
    return out[0] if single else out


def _implied_rows(theta, d, points) -> np.ndarray:
    """:func:`implied_preference` for the parameter rows ``theta`` (R, 7) on ``d`` (1, G), by
    the quadrature ``points`` ((node, weight) pairs), with the working arrays reused."""
    col = lambda i: theta[:, i:i + 1]
    delta, lapse = expit(col(5)), 0.5 * expit(col(6))
    kept = 1 - lapse
    undecided = expit(col(3) + col(4) * d) * delta      # pi(d) delta, (R, G)

    def s(x, buffer):  # s(x) = expit(b0 + b1 x + b2 x^2), written into buffer
        """s(x) for every parameter row, computed in ``buffer``.

        Parameters
        ----------
        x : numpy.ndarray
            Scores.
        buffer : numpy.ndarray
            Working array of the result's shape, overwritten.
        """
        np.multiply(col(1), x, out=buffer)
        buffer += col(0)
        buffer += col(2) * x ** 2
        return expit(buffer, out=buffer)

    shape = (theta.shape[0], d.shape[1])
    out = np.zeros(shape)
    s_lo, s_hi, n_lo, n_hi, term, other = (np.empty(shape) for _ in range(6))
    for uk, wk in points:
        lo = (1 - d) * uk
        s(lo, s_lo)
        s(lo + d, s_hi)
        np.subtract(1, s_lo, out=n_lo)
        np.subtract(1, s_hi, out=n_hi)
        # wk (s_hi (1 - s_lo)(1 - lambda) + s_lo (1 - s_hi) lambda
        #     + [s_hi s_lo + (1 - s_hi)(1 - s_lo)] pi delta), term by term
        np.multiply(s_hi, n_lo, out=term)
        term *= kept
        np.multiply(s_lo, n_hi, out=other)
        other *= lapse
        term += other
        np.multiply(s_hi, s_lo, out=other)
        n_hi *= n_lo
        other += n_hi
        other *= undecided
        term += other
        term *= wk
        out += term
    return out


def _covariance(hess: np.ndarray) -> np.ndarray:
    """The inverse of the observed information; when it is singular (a parameter the data
    cannot place, e.g. pi when nobody who liked both lists or neither stated a preference, runs
    to its bound and leaves the likelihood flat), its pseudo-inverse: the flat directions are
    then held fixed, and the standard errors of s(phi) are those given the rest. NaN if even
    that leaves a negative variance."""
    size = hess.shape[0]
    try:
        cov = np.linalg.inv(hess)
        if np.all(np.isfinite(cov)) and np.all(np.diag(cov) >= 0) and \
                np.linalg.cond(hess) < 1 / np.finfo(float).eps:
            return cov
    except np.linalg.LinAlgError:
        pass
    if not np.all(np.isfinite(hess)):
        return np.full((size, size), np.nan)
    cov = np.linalg.pinv((hess + hess.T) / 2, hermitian=True)
    return cov if np.all(np.diag(cov)[:3] > 0) else np.full((size, size), np.nan)


# --- The shared answer-level random effect: the model the analysis fits ----------------------
#
# satcal's simulated crowd, like real ones, gives each worker an intercept u_w that both lists
# of an answer share, so sat_A and sat_B are positively correlated within an answer and the
# independence above misreads them (on the ECIR reference population, b2 of the standardised
# curves is 0.008 too high at infinite sample size with u_w ~ N(0, 0.5^2):
# benchmarks/bench_joint_shared_effect.py). The shared-effect model integrates the answer
# probabilities over v ~ N(0, tau^2) shifting both logits; its s(phi) is the population-averaged
# curve E_v expit(b0 + v + b1 phi + b2 phi^2). tau = 0 is the independent model above.
#
# Every answer probability is linear in s_A, s_B and s_A s_B (module docstring), so the
# integral needs only three moments per answer row, m_A = E s_A, m_B = E s_B and
# m_AB = E s_A s_B (and, for the gradient, their derivatives): the K nodes cost a few
# element-wise passes over (K, rows) and the rest is per row.

#: The 8 parameters of the shared-effect model on the fitting scale.
SHARED_PARAMETERS = PARAMETERS + ("tau",)
#: Gauss-Hermite nodes of the shared effect's integral. On the ECIR 2015 answers tau is about 2,
#: where 10 nodes miss the log-likelihood by up to 0.05 and 20 nodes by 0.003 (against 60);
#: 24 nodes: see docs/benchmarks.md.
SHARED_NODES = 24
#: Nodes of the starts of :func:`fit_joint_shared` (the polish uses SHARED_NODES).
START_NODES = 12
#: Box of tau (the shared effect's standard deviation on the logit scale).
TAU_BOUNDS = (0.0, 5.0)
#: Starting values of tau: tau = 0 is a stationary point of the likelihood whatever the data (the
#: score of tau vanishes there by the symmetry of v), so a fit started at 0 stays at 0; the
#: independent fit is the tau = 0 candidate and the starts are positive.
TAU_STARTS = (0.3, 1.0, 2.0)
#: Where the starts put logit(delta) and logit(2 lambda) that the independent fit left beyond it
#: (see :func:`fit_joint_shared`).
SATURATED = 3.0
#: The wide starts of :func:`fit_joint_shared` (:func:`_wide_starts`): (tau, preference process
#: of :data:`WIDE_PREFERENCES`, curve scaled by the attenuation or not). These five of the grid
#: of sixteen (tau 0.5 or 2 x the independent fit's process or one of the three x scaled or
#: not) reached the highest maxima of ten simulated studies of 42-3,073 answers; the other
#: eleven added none there nor on three more studies (docs/benchmarks.md), where the sixteen
#: cost 1.7 times the five's CPU a fit (0.263 against 0.153 s).
WIDE_STARTS = ((0.5, "flat", True), (2.0, "flat", False), (2.0, "flat", True),
               (2.0, "lowest slope", True), (2.0, "rising", False))
#: The logistic-normal attenuation constant c = 16 sqrt(3) / (15 pi): E_v expit(eta + v),
#: v ~ N(0, tau^2), is close to expit(eta / sqrt(1 + c^2 tau^2)) (Zeger, Liang and Albert 1988).
ATTENUATION = 16 * np.sqrt(3) / (15 * np.pi)
#: Box of the shared-effect model's fitting scale.
SHARED_BOUNDS = BOUNDS + [TAU_BOUNDS]


def shared_nodes(nodes: int = SHARED_NODES):
    """Probabilists' Gauss-Hermite nodes z_k and weights w_k summing to 1, so that
    E f(Z) ~ sum_k w_k f(z_k) for Z ~ N(0, 1) (exact for polynomials of degree 2 nodes - 1).

    Parameters
    ----------
    nodes : int

    Returns
    -------
    z, w : numpy.ndarray, shape (nodes,)
    """
    return _hermite(int(nodes))


@lru_cache(maxsize=None)
def _hermite(nodes: int):
    """:func:`shared_nodes`, computed once per node count (read-only arrays)."""
    z, w = np.polynomial.hermite_e.hermegauss(nodes)
    w = w / w.sum()
    z.flags.writeable = w.flags.writeable = False
    return z, w


def shared_node_thetas(theta, nodes: int = SHARED_NODES) -> np.ndarray:
    """The joint model's parameters at each node, (K, 7): ``theta`` (8,) is the 7 of
    :data:`PARAMETERS` (fitting scale) and tau; node k shifts b0 by tau z_k. Mixed with the
    weights of :func:`shared_nodes`, these K models are the shared-effect model (both lists of
    one answer at the same node).

    Parameters
    ----------
    theta : array-like, shape (8,)
    nodes : int

    Returns
    -------
    numpy.ndarray, shape (K, 7)
    """
    theta = np.asarray(theta, float)
    z, _ = shared_nodes(nodes)
    out = np.repeat(theta[None, :7], z.size, axis=0)
    out[:, 0] += theta[7] * z
    return out


def shared_moments(eta_a, eta_b, tau, nodes: int = SHARED_NODES, gradient: bool = False):
    """m_A = E expit(eta_A + v), m_B = E expit(eta_B + v) and m_AB = E expit(eta_A + v)
    expit(eta_B + v) over v = tau Z, Z ~ N(0, 1) (one v for both lists), by Gauss-Hermite
    quadrature; the arrays broadcast (``tau`` against their leading axes).

    With ``gradient``, also e_A = dm_A/deta_A, e_B, f_A = dm_AB/deta_A, f_B = dm_AB/deta_B and
    the derivatives in tau, dm_A/dtau, dm_B/dtau, dm_AB/dtau.

    Parameters
    ----------
    eta_a, eta_b : numpy.ndarray
        Both lists' linear predictors at v = 0.
    tau : float or numpy.ndarray
    nodes : int
    gradient : bool

    Returns
    -------
    dict of numpy.ndarray
        ``m_a``, ``m_b``, ``m_ab`` (and the derivatives above as ``e_a``, ``e_b``, ``f_a``,
        ``f_b``, ``t_a``, ``t_b``, ``t_ab``).
    """
    eta_a, eta_b = np.asarray(eta_a, float), np.asarray(eta_b, float)
    tau = np.asarray(tau, float)
    z, w = shared_nodes(nodes)
    keys = ("m_a", "m_b", "m_ab") + (("e_a", "e_b", "f_a", "f_b", "t_a", "t_b", "t_ab") if gradient else ())
    shape = np.broadcast_shapes(eta_a.shape, eta_b.shape, tau.shape + (1,) * (eta_a.ndim - tau.ndim))
    out = {k: np.zeros(shape) for k in keys}
    tau = tau.reshape(tau.shape + (1,) * (len(shape) - tau.ndim))
    if not np.any(tau):   # every node the same model: the independent one
        z, w = np.zeros(1), np.ones(1)
    if tau.size == 1 and z.size * int(np.prod(shape)) <= VECTOR_SIZE:
        return _moments_at_once(np.broadcast_to(eta_a, shape).ravel(), np.broadcast_to(eta_b, shape).ravel(),
                                float(tau.ravel()[0]), z, w, gradient, shape)
    ua, ub = _exp_neg(eta_a), _exp_neg(eta_b)
    for zk, wk in zip(z, w):
        s_a, s_b = _logistic(ua, tau * zk), _logistic(ub, tau * zk)
        ab = s_a * s_b
        out["m_a"] += wk * s_a
        out["m_b"] += wk * s_b
        out["m_ab"] += wk * ab
        if gradient:
            d_a, d_b = s_a * (1 - s_a), s_b * (1 - s_b)
            da_b, a_db = d_a * s_b, s_a * d_b
            out["e_a"] += wk * d_a
            out["e_b"] += wk * d_b
            out["f_a"] += wk * da_b
            out["f_b"] += wk * a_db
            out["t_a"] += (wk * zk) * d_a
            out["t_b"] += (wk * zk) * d_b
            out["t_ab"] += (wk * zk) * (da_b + a_db)
    return out


#: Node x row values below which :func:`shared_moments` works on all nodes at once.
VECTOR_SIZE = 2 ** 20


def _exp_neg(eta):
    """exp(-eta), inf where it overflows (:func:`_logistic` then gives 0, as expit does)."""
    with np.errstate(over="ignore"):
        return np.exp(-eta)


def _logistic(exp_neg_eta, shift):
    """expit(eta + shift) = 1 / (1 + exp(-eta) exp(-shift)), from exp(-eta) (:func:`_exp_neg`).

    Why: the quadrature needs expit at every row and node, (K, n) values, but only n + K
    exponentials: exp(-(eta + t z_k)) factors into a row's and a node's. The exponentials were
    half of the shared-effect fits' CPU (9 ns each on this machine's numpy against 0.5 ns a
    product). Inside the box |shift| = |tau z| <= 5 x 8.5 = 42.5 (tau's upper bound, the
    largest of 24 nodes; under 170 up to 300 nodes), so exp(-shift) is finite and positive and
    the rows' inf and 0 give expit's 0 and 1; the value is expit's to 2e-14 relatively (where
    |eta + shift| nears 130, about that times the machine epsilon: mostly expit's own
    rounding of the sum). A shift beyond +-700 (tau far outside its box) is clipped there so
    that no inf x 0 makes a NaN; expit is then 0 or 1 to double precision unless |eta| is as
    large."""
    with np.errstate(over="ignore"):
        return 1.0 / (1.0 + exp_neg_eta * np.exp(-np.clip(shift, -700.0, 700.0)))


def _moments_at_once(eta_a, eta_b, tau, z, w, gradient, shape):
    """:func:`shared_moments` for one tau, every node at once ((K, n) arrays, sums by products
    with the weights); or for R taus, a column (R, 1), with (R, 1, n) predictors ((R, K, n)
    arrays, :func:`_row_moments`)."""
    shift = (tau * z)[..., None]
    s_a, s_b = _logistic(_exp_neg(eta_a), shift), _logistic(_exp_neg(eta_b), shift)
    ab = s_a * s_b
    out = {"m_a": w @ s_a, "m_b": w @ s_b, "m_ab": w @ ab}
    if gradient:
        d_a = s_a - s_a * s_a
        d_b = s_b - s_b * s_b
        da_b, a_db = d_a * s_b, s_a * d_b
        wz = w * z
        out.update(e_a=w @ d_a, e_b=w @ d_b, f_a=w @ da_b, f_b=w @ a_db, t_a=wz @ d_a, t_b=wz @ d_b,
                   t_ab=wz @ (da_b + a_db))
    return {k: v.reshape(shape) for k, v in out.items()}


def _shared_rows(theta, phi_a, phi_b, code, nodes: int = SHARED_NODES, gradient: bool = True):
    """Each row's probability of its observed answer under the shared-effect model, (n,), and
    its gradient in the 8 parameters, (n, 8); ``theta`` (R, 8) gives (R, n) and (R, n, 8), one
    parameter vector per row of it (the replicates of :func:`_refit_replicates`).

    The answer probability is A + B_A m_A + B_B m_B + G m_AB with per-row coefficients of the
    answer, pi, the share to the higher list and the lapse (from the answer process of the
    module docstring): a_better A = r, B_A = 1 - lambda - r, B_B = lambda - r, G = 2r - 1 with
    r = pi t_A (t_A = delta, 1 - delta or 1/2 as phi_A is above, below or level with phi_B);
    b_better the same with t_B and lambda, 1 - lambda swapped; both_good G = 1 - pi;
    both_bad A = G = 1 - pi, B_A = B_B = -(1 - pi).
    """
    theta = np.asarray(theta, float)
    th = theta if theta.ndim == 1 else theta.T[:, :, None]   # R parameter vectors: (R, 1) columns
    b, c0, c1, delta, lapse = _unpack(th[:7])
    tau = th[7] if theta.shape[-1] > 7 else 0.0
    eta_a = b[0] + b[1] * phi_a + b[2] * phi_a ** 2
    eta_b = b[0] + b[1] * phi_b + b[2] * phi_b ** 2
    first, run = _pair_runs(phi_a, phi_b)
    if first is None:
        m = _row_moments(eta_a, eta_b, tau, nodes, gradient)
    else:   # the moments depend on the pair, not the answer: once per pair, spread to its rows
        # np.take, not v[..., run]: 3.3x faster on (3, 800), the tau starts on ECIR 2015; within
        # half a microsecond either way on a small study's (40-200, 30)
        m = {k: np.take(v, run, axis=-1) for k, v in _row_moments(eta_a[..., first], eta_b[..., first], tau,
                                                                  nodes, gradient).items()}
    d = phi_a - phi_b
    ad = np.abs(d)
    pi = expit(c0 + c1 * ad)
    sgn = np.sign(d)
    to_a = np.where(d > 0, delta, np.where(d < 0, 1 - delta, 0.5))
    is_a, is_b, is_good, is_bad = (code == i for i in range(4))
    t = np.where(is_a, to_a, 1 - to_a)       # the share to the preferred list (a or b answers)
    r = pi * t
    keep_a = np.where(is_a, 1 - lapse, lapse)  # coefficient of only_A in a preference answer
    pref = is_a | is_b
    A = np.where(pref, r, np.where(is_bad, 1 - pi, 0.0))
    Ba = np.where(pref, keep_a - r, np.where(is_bad, -(1 - pi), 0.0))
    Bb = np.where(pref, 1 - keep_a - r, np.where(is_bad, -(1 - pi), 0.0))
    G = np.where(pref, 2 * r - 1, 1 - pi)
    p = A + Ba * m["m_a"] + Bb * m["m_b"] + G * m["m_ab"]
    if not gradient:
        return p, None
    da = Ba * m["e_a"] + G * m["f_a"]            # dp / deta_A
    db = Bb * m["e_b"] + G * m["f_b"]
    same = 1 - m["m_a"] - m["m_b"] + 2 * m["m_ab"]
    dp_dpi = np.where(pref, t * same, np.where(is_good, -m["m_ab"],
                                               -(1 - m["m_a"] - m["m_b"] + m["m_ab"])))
    dpi = dp_dpi * pi * (1 - pi)
    # d t / d logit(delta): +-delta(1 - delta) for the higher / lower list, 0 at a tie
    dt = np.where(is_a, sgn, np.where(is_b, -sgn, 0.0)) * delta * (1 - delta)
    only_a, only_b = m["m_a"] - m["m_ab"], m["m_b"] - m["m_ab"]
    dlapse = np.where(is_a, only_b - only_a, np.where(is_b, only_a - only_b, 0.0)) * lapse * (1 - 2 * lapse)
    grad = np.stack([da + db, da * phi_a + db * phi_b, da * phi_a ** 2 + db * phi_b ** 2,
                     dpi, dpi * ad, pi * same * dt, dlapse,
                     Ba * m["t_a"] + Bb * m["t_b"] + G * m["t_ab"]], axis=-1)
    return p, grad


def _row_moments(eta_a, eta_b, tau, nodes, gradient):
    """:func:`shared_moments` for :func:`_shared_rows`; with R parameter vectors (``tau`` a
    column (R, 1)), each row's moments as a call with its tau alone computes them (one node
    at tau = 0, where 24 would leave tau a score of rounding size instead of 0; all nodes at
    once, :func:`_moments_at_once`, whose products with the weights matmul repeats row by row;
    the node loop beyond :data:`VECTOR_SIZE`), so that a replicate's value and gradient in a
    batch are its own call's, bit for bit."""
    if np.ndim(tau) < 2:
        return shared_moments(eta_a, eta_b, tau, nodes, gradient)
    z, w = shared_nodes(nodes)
    if z.size * eta_a.shape[-1] > VECTOR_SIZE:   # one tau's call loops over the nodes: so here
        rows = [shared_moments(a, b, t[0], nodes, gradient) for a, b, t in zip(eta_a, eta_b, tau)]
        return {k: np.stack([r[k] for r in rows]) for k in rows[0]}
    zero = tau[:, 0] == 0
    parts = [(rows, _moments_at_once(eta_a[rows][:, None, :], eta_b[rows][:, None, :],
                                     tau[rows], *((np.zeros(1), np.ones(1)) if zeros else (z, w)),
                                     gradient, (int(rows.sum()), eta_a.shape[-1])))
             for rows, zeros in ((zero, True), (~zero, False)) if rows.any()]
    out = {k: np.empty(eta_a.shape) for k in parts[0][1]}
    for rows, m in parts:
        for k, v in m.items():
            out[k][rows] = v
    return out


def _pair_runs(phi_a, phi_b):
    """Runs of consecutive rows with the same (phi_A, phi_B): the first row of each run and
    each row's run, or (None, None) when no two neighbours share a pair. Rows of
    :func:`_collapse_rows` are sorted by (phi_A, phi_B, answer), so a pair's up to four answers
    are one run; at 2,000,000 answers a formulation has about four rows a pair, at 4,400 about
    one and a half."""
    if phi_a.ndim != 1 or phi_a.size < 2:
        return None, None
    new = np.empty(phi_a.size, dtype=bool)
    new[0] = True
    np.not_equal(phi_a[1:], phi_a[:-1], out=new[1:])
    new[1:] |= phi_b[1:] != phi_b[:-1]
    if new.all():
        return None, None
    return np.flatnonzero(new), np.cumsum(new) - 1


def shared_probabilities(theta, phi_a, phi_b, nodes: int = SHARED_NODES) -> np.ndarray:
    """(n, 4) answer probabilities of the shared-effect model,

        P(answer) = E_v P_joint(answer; b0 + v, b1, b2, c0, c1, delta, lambda),  v ~ N(0, tau^2),

    by Gauss-Hermite quadrature (:func:`shared_nodes`). tau = 0 gives
    :func:`joint_probabilities`.

    Parameters
    ----------
    theta : array-like, shape (8,)
        b0, b1, b2, c0, c1, logit(delta), logit(2 lambda), tau.
    phi_a, phi_b : numpy.ndarray, shape (n,)
    nodes : int

    Returns
    -------
    numpy.ndarray, shape (n, 4)
    """
    phi_a, phi_b = np.asarray(phi_a, float), np.asarray(phi_b, float)
    n = phi_a.size
    rows = lambda c: _shared_rows(theta, phi_a, phi_b, np.full(n, c), nodes, gradient=False)[0]
    return np.stack([rows(c) for c in range(4)], axis=1)


def _shared_negloglik_and_gradient(theta, phi_a, phi_b, code, counts, nodes=SHARED_NODES):
    """-sum_i c_i log P_i and its gradient in the 8 parameters (:func:`_shared_rows`; checked
    against finite differences and against scipy's adaptive quadrature in the tests)."""
    p, grad = _shared_rows(theta, phi_a, phi_b, code, nodes)
    weight = np.where(p > _EPS, counts / np.maximum(p, _EPS), 0.0)
    return -float(np.sum(counts * np.log(np.maximum(p, _EPS)))), -(weight @ grad)


def shared_curve(theta, x, nodes: int = SHARED_NODES, gradient: bool = False):
    """The population-averaged satisfaction curve E_v expit(b0 + v + b1 x + b2 x^2),
    v ~ N(0, tau^2); ``theta`` (8,) or (B, 8) gives (len(x),) or (B, len(x)); a 7-parameter
    ``theta`` is the independent model's expit(b0 + b1 x + b2 x^2).

    Parameters
    ----------
    theta : array-like, shape (8,) or (B, 8)
    x : array-like of float
    nodes : int
    gradient : bool
        Also the derivatives in b0, b1, b2, tau ((..., len(x), 4)), for the delta-method band.

    Returns
    -------
    numpy.ndarray (and its gradient)
    """
    theta = np.asarray(theta, float)
    single = theta.ndim == 1
    th = np.atleast_2d(theta)
    x = np.asarray(x, float)
    eta = th[:, :1] + th[:, 1:2] * x + th[:, 2:3] * x ** 2
    tau = th[:, 7] if th.shape[1] > 7 else np.zeros(len(th))
    m = shared_moments(eta, eta, tau, nodes, gradient)
    if not gradient:
        return m["m_a"][0] if single else m["m_a"]
    g = np.stack([m["e_a"], m["e_a"] * x, m["e_a"] * x ** 2, m["t_a"]], axis=-1)
    return (m["m_a"][0], g[0]) if single else (m["m_a"], g)


@dataclass
class SharedFit(JointFit):
    """A fitted shared-effect joint model (:func:`fit_joint_shared`): a :class:`JointFit` whose
    ``theta`` has an eighth parameter, tau, and whose curve is population-averaged.

    Attributes
    ----------
    independent : JointFit or None
        The tau = 0 fit (:func:`fit_joint`) it started from.
    ends : numpy.ndarray
        Log-likelihood at the end of each start (:func:`fit_joint_shared`).
    gradient : float
        Largest absolute gradient in a parameter not at its box bound, at the end.
    nodes : int
        Gauss-Hermite nodes of the integral over v.
    """

    independent: JointFit | None = None
    ends: np.ndarray = None
    gradient: float = 0.0
    nodes: int = SHARED_NODES

    @property
    def tau(self) -> float:
        """The shared effect's standard deviation (logit scale)."""
        return float(self.theta[7])

    def params(self) -> dict:
        """Parameters on their natural scale: b0-b2 (the curve of a user at v = 0), c0, c1,
        delta, lambda, tau.

        Returns
        -------
        dict of str to float
        """
        return {**JointFit(self.theta[:7], self.cov, self.n, self.converged, self.loglik).params(),
                "tau": self.tau}

    def curve(self, x, nodes: int | None = None) -> np.ndarray:
        """The population-averaged satisfaction curve E_v expit(b0 + v + b1 x + b2 x^2).

        Parameters
        ----------
        x : array-like of float
        nodes : int, optional
            Default: the fit's.

        Returns
        -------
        numpy.ndarray
        """
        return shared_curve(self.theta, x, nodes or self.nodes)

    def predict(self, x, z: float = 1.959963984540054):
        """The population-averaged s(x) and its 95% band: logit s -/+ z se, se by the delta
        method from the covariance of (b0, b1, b2, tau) (the independent model's band when
        tau = 0).

        Parameters
        ----------
        x : array-like of float
        z : float
            The normal quantile of the band (95%).

        Returns
        -------
        s, lo, hi : numpy.ndarray
        """
        x = np.asarray(x, float)
        p, g = shared_curve(self.theta, x, self.nodes, gradient=True)
        idx = [0, 1, 2, 7]
        cov = self.cov[np.ix_(idx, idx)]
        if not np.isfinite(cov).all():
            return p, np.full_like(p, np.nan), np.full_like(p, np.nan)
        var = np.maximum(np.einsum("ij,jk,ik->i", g, cov, g), 0)
        pc = np.clip(p, 1e-300, 1 - 1e-16)
        eta, se = np.log(pc / (1 - pc)), np.sqrt(var) / (pc * (1 - pc))
        return p, expit(eta - z * se), expit(eta + z * se)


def _shared_free(theta) -> np.ndarray:
    """Parameters of the shared-effect model not at their box bound."""
    low, high = np.array(SHARED_BOUNDS).T
    return (theta > low + BOUND_TOL) & (theta < high - BOUND_TOL)


def _gradient_hessian(fun, theta, args, step: float = 1e-5) -> np.ndarray:
    """The Hessian of ``fun`` (value, gradient) by central differences of its analytic
    gradient, symmetrised."""
    hess = np.empty((theta.size, theta.size))
    for i in range(theta.size):
        e = np.zeros(theta.size)
        e[i] = step
        hess[i] = (fun(theta + e, *args)[1] - fun(theta - e, *args)[1]) / (2 * step)
    return (hess + hess.T) / 2


def _wide_starts(pulled) -> np.ndarray:
    """:func:`fit_joint_shared`'s wide starts, (5, 8), one per :data:`WIDE_STARTS` entry: the
    independent fit ``pulled`` (7,) with tau, the preference process of
    :data:`WIDE_PREFERENCES` and the curve kept or scaled by sqrt(1 + c^2 tau^2)
    (:data:`ATTENUATION`), which keeps the population-averaged s(phi) near the independent
    fit's while tau is large (the curve then steep given v: the answers' verdicts strongly
    correlated, where small studies' highest maxima often lie).

    References
    ----------
    Zeger, S. L., Liang, K.-Y. and Albert, P. S. (1988). Models for longitudinal data: a
    generalized estimating equation approach. Biometrics 44(4), 1049-1060.
    """
    starts = []
    for tau, name, scaled in WIDE_STARTS:
        theta = _with_preference(pulled, name)
        theta[:3] *= np.sqrt(1 + (ATTENUATION * tau) ** 2) if scaled else 1.0
        starts.append(np.append(theta, tau))
    low, high = np.array(SHARED_BOUNDS).T
    return np.clip(starts, low, high)


@one_blas_thread
def fit_joint_shared(phi_a, phi_b, answers, counts=None, nodes: int = SHARED_NODES,
                     independent: JointFit | None = None) -> SharedFit:
    """Maximum-likelihood fit of the shared-effect joint model (the joint model the analysis
    fits, :mod:`satcal.analysis.calibration`).

    :func:`fit_joint`'s best fit is the tau = 0 candidate. L-BFGS-B (analytic gradient) then runs
    on the 8 parameters from it with tau at each of :data:`TAU_STARTS` and delta and lambda
    pulled back to :data:`SATURATED` on the logit scale (at a boundary of the independent fit
    their logits' gradient vanishes, so a start there keeps them there even when tau > 0 moves
    the maximum inside); the best end is polished with tight tolerances and kept when it is
    above the tau = 0 candidate (else the fit is the independent one, tau = 0). On a study of at
    most :data:`WIDE_START_ROWS` distinct answer rows the starts also span other preference
    processes and curves (:func:`_wide_starts`): there the likelihood has several maxima, and
    the old starts alone ended more than 0.01 below a 100-start search on 124 of 360 fits of ten
    simulated studies of 42-3,073 answers (by up to 4.0; bench_small_maxima.py). The covariance
    is the inverse observed information (central differences of the analytic gradient), and the
    fit is checked to be a maximum as :func:`fit_joint`'s is.

    Parameters
    ----------
    phi_a, phi_b : numpy.ndarray, shape (n,)
    answers : sequence of str, length n
    counts : array-like, optional
    nodes : int
        Gauss-Hermite nodes of the integral over v.
    independent : JointFit, optional
        :func:`fit_joint` of the same rows, when the caller has it.

    Returns
    -------
    SharedFit

    References
    ----------
    Liu, Q. and Pierce, D. A. (1994). A note on Gauss-Hermite quadrature. Biometrika 81(3),
    624-629.
    """
    from scipy.optimize import minimize

    phi_a, phi_b = np.asarray(phi_a, float), np.asarray(phi_b, float)
    answers = np.asarray(answers, dtype=object)
    counts = np.ones(answers.size) if counts is None else np.asarray(counts, float)
    if independent is None:
        independent = fit_joint(phi_a, phi_b, answers, counts)
    code = np.full(answers.size, -1)
    for i, c in enumerate(CODES):
        code[answers == c] = i
    rows = _collapse_rows(phi_a, phi_b, code, counts)
    args = (*rows, nodes)
    pulled = independent.theta.copy()
    pulled[5:7] = np.clip(pulled[5:7], -SATURATED, SATURATED)
    # the starts run on START_NODES nodes (where they end is all they decide), the polish on
    # ``nodes``
    starts = np.array([np.append(pulled, tau) for tau in TAU_STARTS])
    if rows[0].size <= WIDE_START_ROWS:
        starts = np.vstack([starts, _wide_starts(pulled)])
    stops = _lockstep(starts, *rows[:3], np.broadcast_to(rows[3], (len(starts), rows[3].size)),
                      min(nodes, START_NODES), {**_LBFGSB, "maxiter": 1000})[0]
    ends = np.array([-_shared_negloglik_and_gradient(x, *args)[0] for x in stops])
    best = minimize(_shared_negloglik_and_gradient, stops[int(np.argmax(ends))], args=args,
                    jac=True, method="L-BFGS-B", bounds=SHARED_BOUNDS,
                    options={"maxiter": 3000, "ftol": 1e-14, "gtol": 1e-8})
    ends[np.argmax(ends)] = max(ends.max(), -best.fun)
    if -best.fun > independent.loglik:
        theta, loglik, success = best.x, -float(best.fun), bool(best.success)
    else:   # no shared effect beats the independent model: it is the fit, tau = 0
        theta, loglik, success = np.append(independent.theta, 0.0), independent.loglik, independent.converged
    ends = np.append(independent.loglik, ends)
    grad = _shared_negloglik_and_gradient(theta, *args)[1]
    hess = _gradient_hessian(_shared_negloglik_and_gradient, theta, args)
    free = _shared_free(theta)
    check = _maximum_check(grad, hess, free, SHARED_PARAMETERS)
    pi = expit(theta[3] + theta[4] * np.abs(rows[0] - rows[1]))
    fit = SharedFit(theta, _covariance(hess), int(counts.sum()), success and not check, loglik,
                    int(np.sum(ends >= loglik - AGREE)), (), len(ends), independent=independent, ends=ends,
                    gradient=float(np.abs(grad[free]).max()) if free.any() else 0.0, nodes=nodes)
    fit.flags = tuple(check) + fit_flags(theta, pi)
    return fit


#: tau / se(tau) below which the shared model's replicates are full re-fits, not one step.
WEAK_TAU_Z = 2.0
#: L-BFGS-B iterations of such a re-fit (it starts at the full-sample fit).
REFIT_ITERATIONS = 100


def weak_tau(fit) -> bool:
    """Whether a shared-effect fit's tau is weakly identified: tau < WEAK_TAU_Z se(tau) (tau at
    0 included). There one Newton step from the fit is not a replicate's maximum: with 1,000
    simulated answers its replicates' spread of b1_std was 5-37 times the spread of the
    estimates across studies in 3 of 4 studies, full re-fits 1.0-2.4 (docs/benchmarks.md).

    Parameters
    ----------
    fit : SharedFit

    Returns
    -------
    bool
    """
    se = float(np.sqrt(fit.cov[7, 7])) if np.isfinite(fit.cov[7, 7]) and fit.cov[7, 7] > 0 else np.inf
    return not fit.theta[7] >= WEAK_TAU_Z * se


def _shared_bootstrap_thetas(fit, phi_a, phi_b, code, weights, steps: int = 1) -> np.ndarray:
    """:func:`bootstrap_thetas` of a :class:`SharedFit`. The gradient of replicate b's
    log-likelihood at the fit is W_b' U, U (n, 8) the rows' scores d log p_i / d theta there
    (:func:`_shared_rows`), so the first Newton step of every replicate is one product,
    theta_b = theta_hat + V U' W_b; further steps re-evaluate each replicate at its own point.
    Where tau is weakly identified (:func:`weak_tau`) every replicate is instead re-fitted by
    L-BFGS-B from the full-sample fit (at most :data:`REFIT_ITERATIONS` iterations, then tight
    passes to a maximum, :func:`_refit_replicates`)."""
    nodes = getattr(fit, "nodes", SHARED_NODES)
    low, high = np.array(SHARED_BOUNDS).T
    if weak_tau(fit):
        return _refit_replicates(fit.theta, phi_a, phi_b, code, weights, nodes)
    p, dp = _shared_rows(fit.theta, phi_a, phi_b, code, nodes)
    scores = np.where(p > _EPS, 1 / np.maximum(p, _EPS), 0.0)[:, None] * dp
    out = np.clip(fit.theta + (weights @ scores) @ fit.cov.T, low, high)
    for _ in range(steps - 1):
        for b, w in enumerate(weights):
            grad = _shared_negloglik_and_gradient(out[b], phi_a, phi_b, code, w, nodes)[1]
            out[b] = np.clip(out[b] - fit.cov @ grad, low, high)
    return out


def _refit_replicates(theta, phi_a, phi_b, code, weights, nodes: int = SHARED_NODES,
                      iterations: int = REFIT_ITERATIONS) -> np.ndarray:
    """Every replicate's L-BFGS-B re-fit of the shared-effect model from ``theta``, carried to
    a maximum: what ``scipy.optimize.minimize(method="L-BFGS-B", bounds=SHARED_BOUNDS,
    options={"maxiter": iterations})`` gives replicate by replicate, then, from where each
    stopped, the same at :data:`REFIT_POLISH`'s tight tolerances, again on the replicates that
    pass moved by more than :data:`REFIT_GAIN` (:func:`_two_pass`), the replicates'
    evaluations batched.

    Why the tight pass. At scipy's default tolerances (ftol 2.2e-9 relative, projected gradient
    1e-5) L-BFGS-B stops short of the maximum on many replicates of a small study, whose
    likelihood is flat along ridges that run to the box: on the 60-answer study of
    ``benchmarks/bench_small_study.py`` (B = 100) a tight search from where it stopped gained
    more than 0.01 log-likelihood on 1,003 of 3,600 replicates, up to 24.6 units
    (docs/benchmarks.md); a replicate short of its maximum biases the interval. The tight
    passes end where such a search gains under 1e-3 on all 3,600 (about 2.7 times the re-fits' CPU),
    and where an independent one does on the test's (tests/test_joint_shared.py).
    They carry a replicate to the maximum its own path leads to: on these multimodal
    likelihoods another start (the replicate's own :func:`fit_joint_shared`) can find a
    higher one, which this does not look for.

    Why batched. On a small study (60 answers: 44 distinct rows a formulation) an evaluation of
    the likelihood costs numpy's call overhead, not its rows, so re-fitting replicate by replicate
    cost about 30 evaluations x 36 formulations, 0.7 s a replicate, where a large study's
    replicates (tau well identified: one Newton step, all at once) cost a few ms. Here scipy's
    L-BFGS-B runs through its reverse-communication routine (``_lbfgsb.setulb``, the loop of
    ``scipy.optimize._lbfgsb_py._minimize_lbfgsb``), one state per replicate, and whenever
    replicates ask for the value and gradient they get them in one batched call
    (:func:`_shared_rows` over (replicates, rows)), which gives each replicate the numbers its
    own call gives, bit for bit: the same iterates, the same maxima. Where the routine is not
    there as expected (another scipy), replicate by replicate.

    Parameters
    ----------
    theta : numpy.ndarray, shape (8,)
        The start (the full-sample fit).
    phi_a, phi_b : numpy.ndarray, shape (n,)
    code : numpy.ndarray of int, shape (n,)
    weights : numpy.ndarray, shape (B, n)
    nodes : int
    iterations : int
        L-BFGS-B iterations at most (``maxiter``) of the first pass.

    Returns
    -------
    numpy.ndarray, shape (B, 8)
    """
    weights = np.atleast_2d(np.asarray(weights, float))
    low, high = np.array(SHARED_BOUNDS).T
    return np.clip(_two_pass(_lockstep, theta, phi_a, phi_b, code, weights, nodes, iterations), low, high)


class _NotTheRoutine(Exception):
    """Raised by :func:`_lbfgsb_lockstep` where scipy's reverse-communication routine is missing
    or takes other arguments: the callers then run ``scipy.optimize.minimize`` run by run. Only
    this is caught: an error of a likelihood evaluation propagates."""


def _lockstep(start, phi_a, phi_b, code, weights, nodes, options):
    """L-BFGS-B runs of the shared-effect model from each row of ``start``, (S, 8), with
    ``weights`` (S, n): :func:`_batched_lbfgsb` (each run's iterates those of its own
    ``scipy.optimize.minimize``, the evaluations batched), or run by run (:func:`_one_by_one`)
    where scipy's routine is not the one it drives. Returns the ends, (S, 8), and their
    negative log-likelihoods, (S,)."""
    try:
        return _batched_lbfgsb(start, phi_a, phi_b, code, weights, nodes, options)
    except _NotTheRoutine:
        return _one_by_one(start, phi_a, phi_b, code, weights, nodes, options)


def _two_pass(run, theta, phi_a, phi_b, code, weights, nodes, iterations):
    """:func:`_refit_replicates`' passes with ``run`` (:func:`_lockstep`, or one of the two it
    chooses between): scipy's defaults from ``theta``, then the tight pass from where each
    replicate stopped, again on those it moved by more than :data:`REFIT_GAIN` (a fresh start
    drops a curvature memory that stalled on a flat ridge), :data:`REFIT_RESTARTS` times at
    most."""
    x = np.repeat(np.asarray(theta, float)[None], len(weights), axis=0)
    x, f = run(x, phi_a, phi_b, code, weights, nodes, {**_LBFGSB, "maxiter": iterations})
    todo = np.arange(len(weights))
    for _ in range(REFIT_RESTARTS):
        x[todo], after = run(x[todo], phi_a, phi_b, code, weights[todo], nodes, {**_LBFGSB, **REFIT_POLISH})
        gained = f[todo] - after > REFIT_GAIN
        f[todo] = after
        todo = todo[gained]
        if not todo.size:
            break
    return x


def _one_by_one(start, phi_a, phi_b, code, weights, nodes, options):
    """:func:`_batched_lbfgsb`'s runs by ``scipy.optimize.minimize``, replicate by replicate."""
    return _minimize_each(_shared_negloglik_and_gradient, start,
                          lambda b: (phi_a, phi_b, code, weights[b], nodes), SHARED_BOUNDS, options)


def _minimize_each(fun, start, args_of, bounds, options):
    """What :func:`_lbfgsb_lockstep` gives, by ``scipy.optimize.minimize`` run by run (where
    scipy's reverse-communication routine is not there): L-BFGS-B on ``fun`` (value and
    gradient) from each row b of ``start`` with arguments ``args_of(b)``, ``options`` as
    :data:`_LBFGSB` plus ``maxiter``. Returns the ends and their values."""
    from scipy.optimize import minimize
    names = ("maxiter", "ftol", "gtol", "maxfun", "maxls")
    settings = {k: options[k] for k in names if k in options} | {"maxcor": options["m"]}
    runs = [minimize(fun, x, args=args_of(b), jac=True, method="L-BFGS-B", bounds=bounds, options=settings)
            for b, x in enumerate(start)]
    return np.array([r.x for r in runs]), np.array([r.fun for r in runs])


#: L-BFGS-B's defaults in scipy.optimize.minimize: corrections kept, ftol, gtol, evaluations at
#: most, line-search steps at most.
_LBFGSB = {"m": 10, "ftol": 2.2204460492503131e-09, "gtol": 1e-5, "maxfun": 15000, "maxls": 20}
#: The tight passes of :func:`_refit_replicates`: no stop on the value's relative change
#: (ftol 0; at 1e-15, on the small study's replicates creeping along ridges to the box, 67 of
#: 2,000 still stopped > 0.01 short of a search without it, up to 24.6), a largest projected
#: gradient of 1e-10, iterations at most.
REFIT_POLISH = {"ftol": 0.0, "gtol": 1e-10, "maxiter": 3000}
#: Tight passes of :func:`_refit_replicates` at most, and the gain in log-likelihood under
#: which a replicate takes no further one.
REFIT_RESTARTS, REFIT_GAIN = 10, 1e-6


def _batched_lbfgsb(start, phi_a, phi_b, code, weights, nodes, options):
    """:func:`_refit_replicates`' L-BFGS-B runs of the shared-effect model, one per row of
    ``start`` (B, 8) and ``weights``, by :func:`_lbfgsb_lockstep`; ``options`` as
    :data:`_LBFGSB` plus ``maxiter``. Returns the ends, (B, 8), and the negative
    log-likelihood there, (B,)."""
    size = len(SHARED_BOUNDS)
    # replicates a batched evaluation takes at once, so that its (replicates, nodes, rows)
    # arrays stay at VECTOR_SIZE elements, as one evaluation's (nodes, rows) do
    chunk = max(1, VECTOR_SIZE // (nodes * max(phi_a.size, 1)))

    def evaluate(idx, points):
        """Value and gradient of _shared_negloglik_and_gradient for replicates ``idx``."""
        f, g = np.empty(idx.size), np.empty((idx.size, size))
        for i in range(0, idx.size, chunk):
            part = slice(i, i + chunk)
            p, dp = _shared_rows(points[part], phi_a, phi_b, code, nodes)
            w = weights[idx[part]]
            scale = np.where(p > _EPS, w / np.maximum(p, _EPS), 0.0)
            f[part] = -np.sum(w * np.log(np.maximum(p, _EPS)), axis=1)
            g[part] = -np.matmul(scale[:, None, :], dp)[:, 0]
        return f, g

    return _lbfgsb_lockstep(start, evaluate, SHARED_BOUNDS, options)


def _lbfgsb_lockstep(start, evaluate, bounds, options):
    """L-BFGS-B runs from each row of ``start`` (S, P) within ``bounds`` in lockstep, through
    scipy's reverse-communication routine (scipy >= 1.15: integer task codes; 3 asks for the
    value and gradient at x, 1 reports a new iterate), as ``scipy.optimize.minimize`` runs each
    (``options`` as :data:`_LBFGSB` plus ``maxiter``); whenever runs ask for values and
    gradients, ``evaluate(idx, points)`` gives them for runs ``idx`` at ``points`` in one call,
    and each run's iterates are its own ``minimize``'s as long as ``evaluate`` gives each run
    the numbers its own call would. Returns the ends, (S, P), and the value each run was last
    given (``minimize``'s ``fun``: after a failed line search scipy puts x back, not f). Every
    bound must be finite. Raises :class:`_NotTheRoutine` where scipy's routine is not there or
    refuses these arguments."""
    try:
        from scipy.optimize import _lbfgsb
        setulb, refused = _lbfgsb.setulb, (TypeError, ValueError, _lbfgsb.error)
    except (ImportError, AttributeError) as missing:
        raise _NotTheRoutine(str(missing)) from missing
    low, high = (np.array(b, np.float64) for b in zip(*bounds))
    if not (np.isfinite(low).all() and np.isfinite(high).all()):
        raise ValueError("_lbfgsb_lockstep: every bound must be finite")
    start = np.clip(np.asarray(start, np.float64), low, high)
    size, m = start.shape[1], options["m"]
    factr = options["ftol"] / np.finfo(float).eps
    count = len(start)
    state = [dict(x=start[b].copy(), wa=np.zeros(2 * m * size + 5 * size + 11 * m * m + 8 * m),
                  iwa=np.zeros(3 * size, np.int32), task=np.zeros(2, np.int32),
                  ln_task=np.zeros(2, np.int32), lsave=np.zeros(4, np.int32),
                  isave=np.zeros(44, np.int32), dsave=np.zeros(29), nit=0, nfev=0)
             for b in range(count)]
    nbd = np.full(size, 2, np.int32)   # every parameter bounded on both sides
    for s in state:   # as scipy starts: the routine's first call asks for the value at the start
        s["f"], s["g"] = 0.0, np.zeros(size)
    pending = list(range(count))
    while pending:
        asking = []
        for b in pending:
            s = state[b]
            while True:
                try:
                    setulb(m, s["x"], low, high, nbd, s["f"], s["g"], factr, options["gtol"], s["wa"], s["iwa"],
                           s["task"], s["lsave"], s["isave"], s["dsave"], options["maxls"], s["ln_task"])
                except refused as error:   # another scipy's routine: the callers run minimize
                    raise _NotTheRoutine(str(error)) from error
                if s["task"][0] == 3:
                    asking.append(b)
                    break
                if s["task"][0] != 1:
                    break
                s["nit"] += 1
                if s["nit"] >= options["maxiter"] or s["nfev"] > options["maxfun"]:
                    s["task"][:] = 5, 504
        if asking:
            idx = np.array(asking)
            f, g = evaluate(idx, np.array([state[b]["x"] for b in asking]))
            for k, b in enumerate(asking):
                state[b]["f"], state[b]["g"] = float(f[k]), g[k]
                state[b]["nfev"] += 1
        pending = asking
    x = np.array([s["x"] for s in state])
    return x, np.array([s["f"] for s in state])


#: Points of |dphi| at which :func:`_implied_shared` evaluates the shared-effect model's
#: preference curve exactly; the grid between them is a cubic spline (the curve is smooth in d).
IMPLIED_POINTS = 51


def _implied_shared(theta, grid, nodes: int = 16, shared: int = SHARED_NODES) -> np.ndarray:
    """:func:`implied_preference` of shared-effect parameters ``theta`` (R, 8): both lists of a
    pair at the same v,

        P(d) = mean_phi { (1 - lambda)(m_hi - m_hl) + lambda (m_lo - m_hl)
                          + pi(d) delta (1 - m_hi - m_lo + 2 m_hl) },

    m_hi = E_v s(phi + d), m_lo = E_v s(phi), m_hl = E_v s(phi + d) s(phi)
    (:func:`shared_moments`), on :data:`IMPLIED_POINTS` values of d and a cubic spline between
    them (within 1e-7 of the exact curve at every grid point in the tests)."""
    from scipy.interpolate import CubicSpline
    grid = np.clip(grid, 0.0, 1.0)
    d = np.linspace(grid.min(), grid.max(), IMPLIED_POINTS) if grid.size > IMPLIED_POINTS else grid
    u, w = np.polynomial.legendre.leggauss(nodes)
    col = lambda i: theta[:, i:i + 1]
    delta, lapse = expit(col(5)), 0.5 * expit(col(6))
    undecided = expit(col(3) + col(4) * d[None, :]) * delta          # (R, D)
    out = np.zeros((theta.shape[0], d.size))
    eta = lambda x: col(0) + col(1) * x + col(2) * x ** 2
    for uk, wk in zip((u + 1) / 2, w / 2):
        lo = (1 - d[None, :]) * uk
        m = shared_moments(eta(lo + d[None, :]), eta(lo), theta[:, 7], shared)
        hi_only, lo_only = m["m_a"] - m["m_ab"], m["m_b"] - m["m_ab"]
        out += wk * ((1 - lapse) * hi_only + lapse * lo_only
                     + undecided * (1 - m["m_a"] - m["m_b"] + 2 * m["m_ab"]))
    if d.size == grid.size and np.array_equal(d, grid):
        return out
    good = np.isfinite(out).all(axis=1)                  # a failed replicate stays NaN
    full = np.full((out.shape[0], grid.size), np.nan)
    if good.any():
        full[good] = CubicSpline(d, out[good], axis=1)(grid)
    return full


def shared_curve_on(theta, grid, points: int = 101) -> np.ndarray:
    """:func:`shared_curve` of parameter rows ``theta`` (B, 8) on a long ``grid``: exact at
    ``points`` equally spaced values and a cubic spline between them (the curve is smooth), so
    a bootstrap's B curves cost ``points`` evaluations each; NaN rows stay NaN.

    Parameters
    ----------
    theta : numpy.ndarray, shape (B, 8)
    grid : numpy.ndarray
    points : int

    Returns
    -------
    numpy.ndarray, shape (B, len(grid))
    """
    from scipy.interpolate import CubicSpline
    theta, grid = np.atleast_2d(np.asarray(theta, float)), np.asarray(grid, float)
    out = np.full((theta.shape[0], grid.size), np.nan)
    good = np.isfinite(theta).all(axis=1)
    if not good.any():
        return out
    if grid.size <= points:
        out[good] = shared_curve(theta[good], grid)
        return out
    x = np.linspace(grid.min(), grid.max(), points)
    out[good] = CubicSpline(x, shared_curve(theta[good], x), axis=1)(grid)
    return out
