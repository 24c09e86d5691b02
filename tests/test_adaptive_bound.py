"""The expected information behind the design criterion and the oracle bound
(benchmarks/bench_adaptive_bound.py), against independent computations: the joint model's own
numerical observed information (fit_joint's Hessian) at answer counts equal to their expectation,
and the spread of maximum-likelihood estimates over simulated answers."""
import numpy as np

from satcal.analysis.adaptive import _b1_and_gradient, expected_information
from satcal.analysis.joint import CODES, fit_joint, joint_probabilities

#: b0, b1, b2 (the curve), c0, c1 (undecided-answer rate), logit(delta), logit(2 lambda).
THETA = np.array([-2.5, 5.0, 0.0, -1.5, 1.0, 1.4, -2.2])


def design():
    """24 examples over [0, 1]^2, neither list's score equal to the other's."""
    rng = np.random.default_rng(3)
    a, b = rng.random(24), rng.random(24)
    return a, b


def test_expected_information_is_the_observed_information_at_expected_counts():
    # With counts n p_y(theta) the maximum-likelihood estimate is theta itself, and the observed
    # information there is sum_x n sum_y p_y (-d2 log p_y) = sum_x n sum_y J J' / p (the
    # second-derivative terms sum to 0 over y). fit_joint gets it by statsmodels' numerical
    # Hessian of the negative log-likelihood: an independent route to the same matrix.
    a, b = design()
    n = 400.0
    p = joint_probabilities(THETA, a, b)
    codes = np.repeat(np.array(CODES, dtype=object)[None], len(a), axis=0).ravel()
    fit = fit_joint(np.repeat(a, 4), np.repeat(b, 4), codes, (n * p).ravel())
    np.testing.assert_allclose(fit.theta, THETA, atol=2e-3)
    info = expected_information(THETA, a, b, counts=np.full(len(a), n))
    cov = np.linalg.inv(info)
    scale = np.sqrt(np.outer(np.diag(cov), np.diag(cov)))
    np.testing.assert_allclose(fit.cov / scale, cov / scale, atol=0.02)
    # one answer each: sum_x sum_y J J' / p, with J by central differences of the answer
    # probabilities (not the criterion's own Jacobian), and additive in answers
    step = 1e-6
    jac = np.stack([(joint_probabilities(THETA + step * e, a, b) - joint_probabilities(THETA - step * e, a, b))
                    / (2 * step) for e in np.eye(len(THETA))], axis=-1)
    by_hand = np.einsum("xyi,xyj,xy->ij", jac, jac, 1 / p)
    np.testing.assert_allclose(expected_information(THETA, a, b), by_hand, rtol=1e-5, atol=1e-8)
    np.testing.assert_allclose(by_hand * n, info, rtol=1e-5, atol=1e-6)


def test_delta_method_variance_of_b1_matches_simulated_estimates():
    # Var b1 = g' I^-1 g (g the gradient of b1 in theta) against the spread of b1 over 150
    # maximum-likelihood fits to answers drawn from the model: the asymptotic variance the bound
    # uses, checked by Monte Carlo on a small design (400 answers to each of 24 examples; 150
    # draws gave a ratio of 0.99, 80 draws about 5 s of CPU).
    a, b = design()
    n = 400
    _, g = _b1_and_gradient(THETA)
    sd = np.sqrt(g @ np.linalg.inv(expected_information(THETA, a, b, counts=np.full(len(a), n))) @ g)
    p = joint_probabilities(THETA, a, b)
    rng = np.random.default_rng(11)
    codes = np.repeat(np.array(CODES, dtype=object)[None], len(a), axis=0).ravel()
    draws = []
    for _ in range(80):
        counts = np.stack([rng.multinomial(n, row) for row in p]).ravel()
        fit = fit_joint(np.repeat(a, 4), np.repeat(b, 4), codes, counts)
        draws.append(_b1_and_gradient(fit.theta)[0])
    draws = np.array(draws)
    # the SD of an SD over 80 normal draws is about SD / sqrt(2 * 79), 8%; allow 3 of them
    assert abs(draws.std(ddof=1) / sd - 1) < 0.24
