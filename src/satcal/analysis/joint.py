"""The per-list satisfaction model (SPEC 7.1, ``--sat-model joint``).

The published P(Sat|phi) is fitted on ``both_good``/``both_bad`` answers only, so it estimates
the satisfaction of a list *given that its partner got the same verdict*. The joint model uses
all four answers to estimate s(phi), the probability that a list with score phi satisfies a
user, under this answer process (per answer, lists A and B satisfy independently):

- both satisfy, probability s_A s_B: ``both_good`` with probability 1 - pi, else a preference;
- neither, (1 - s_A)(1 - s_B): ``both_bad`` with probability 1 - pi, else a preference;
  pi = expit(c0 + c1 |dphi|); such a preference goes to the higher-phi list with probability
  delta (to A or B with 1/2 each when dphi = 0);
- exactly one satisfies: the user prefers it, except with probability lambda (a lapse).

s(phi) = expit(b0 + b1 phi + b2 phi^2). Parameters are fitted by maximum likelihood (scipy,
L-BFGS-B on the collapsed answer rows with their counts); standard errors come from the
observed information (the numerical Hessian of the log-likelihood, statsmodels' ``approx_hess``),
and the 95% band of s(phi) from the linear predictor's standard error, as for the published
curves. With pi = 0 and lambda = 0 the model's both_* answers carry the published estimator's
information, but the estimand differs: s(phi) is the per-list curve.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.special import expit, log_expit

__all__ = ["JointFit", "fit_joint", "joint_probabilities", "PARAMETERS"]

PARAMETERS = ("b0", "b1", "b2", "c0", "c1", "delta", "lambda")
#: Order of the answer codes in the probability matrix.
CODES = ("a_better", "b_better", "both_good", "both_bad")
_EPS = 1e-12


def _unpack(theta):
    b = theta[:3]
    c0, c1 = theta[3], theta[4]
    delta = expit(theta[5])
    lapse = 0.5 * expit(theta[6])  # a lapse below one half keeps s and 1 - s apart
    return b, c0, c1, delta, lapse


def joint_probabilities(theta, phi_a, phi_b) -> np.ndarray:
    """(n, 4) probabilities of a_better, b_better, both_good, both_bad for each answer row.

    ``theta`` is on the fitting scale: b0, b1, b2, c0, c1, logit(delta), logit(2 lambda).
    """
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


@dataclass
class JointFit:
    """A fitted joint model: parameters on the fitting scale, their covariance, and the
    per-list curve s(phi) with its 95% band."""

    theta: np.ndarray
    cov: np.ndarray
    n: int
    converged: bool
    loglik: float

    @property
    def beta(self) -> np.ndarray:
        """The coefficients of s(phi) = expit(b0 + b1 phi + b2 phi^2)."""
        return self.theta[:3]

    def params(self) -> dict:
        """Parameters on their natural scale: b0-b2, c0, c1, delta, lambda."""
        b, c0, c1, delta, lapse = _unpack(self.theta)
        return dict(zip(PARAMETERS, [*map(float, b), float(c0), float(c1), float(delta), float(lapse)]))

    def predict(self, x, z: float = 1.959963984540054):
        """s(x) and its 95% band (expit of eta -/+ z se(eta))."""
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


def fit_joint(phi_a, phi_b, answers, counts=None) -> JointFit:
    """Maximum-likelihood fit of the joint model to answers (codes of ``CODES``), each row
    standing for ``counts`` answers (default 1)."""
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
    args = (phi_a, phi_b, code, counts)
    res = minimize(_negloglik, _start(*args), args=args, method="L-BFGS-B",
                   bounds=[(-30, 30)] * 3 + [(-20, 20)] * 2 + [(-15, 15)] * 2,
                   options={"maxiter": 2000})
    theta = res.x
    hess = approx_hess(theta, _negloglik, args=args)
    try:
        cov = np.linalg.inv(hess)
        if not np.all(np.isfinite(cov)) or np.any(np.diag(cov) < 0):
            raise np.linalg.LinAlgError
    except np.linalg.LinAlgError:
        cov = np.full((theta.size, theta.size), np.nan)
    return JointFit(theta, cov, int(counts.sum()), bool(res.success), -float(res.fun))
