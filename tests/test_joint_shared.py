"""The shared-effect joint model (satcal.analysis.joint.fit_joint_shared): its integral against
scipy's adaptive quadrature, tau = 0 against the independent model, its gradient against finite
differences, and its fit against the truth of expected answer counts and an independent
(derivative-free) maximisation of the same objective."""
import numpy as np
import pytest
from scipy.integrate import quad
from scipy.optimize import approx_fprime, minimize
from scipy.special import logit
from scipy.stats import norm

from satcal.analysis.joint import (BOUNDS, CODES, TAU_BOUNDS, _shared_negloglik_and_gradient,
                                   fit_joint, fit_joint_shared, joint_probabilities,
                                   shared_probabilities)

THETA = np.array([-2.5, 5.5, 0.3, -1.0, 1.0, 1.2, -1.5, 0.7])


def _rows(n=6, seed=0):
    rng = np.random.default_rng(seed)
    pa, pb = rng.random(n), rng.random(n)
    pb[0] = pa[0]   # a tie: the undecided preference splits 1/2 each
    return pa, pb


def test_integral_matches_adaptive_quadrature():
    pa, pb = _rows()
    got = shared_probabilities(THETA, pa, pb)
    for i in range(len(pa)):
        for j in range(4):
            def f(v):
                th = THETA[:7].copy()
                th[0] += v
                return joint_probabilities(th, pa[i:i + 1], pb[i:i + 1])[0, j] * norm.pdf(v, 0, THETA[7])
            want = quad(f, -12 * THETA[7], 12 * THETA[7], epsabs=1e-13, epsrel=1e-12)[0]
            assert got[i, j] == pytest.approx(want, abs=1e-7)   # measured 8e-9
    np.testing.assert_allclose(got.sum(axis=1), 1, atol=1e-13)


def test_tau_zero_is_the_independent_model():
    pa, pb = _rows(50, 1)
    th = THETA.copy()
    th[7] = 0.0
    np.testing.assert_allclose(shared_probabilities(th, pa, pb),
                               joint_probabilities(th[:7], pa, pb), rtol=1e-14, atol=1e-15)


def test_gradient_matches_finite_differences():
    pa, pb = _rows(200, 2)
    rng = np.random.default_rng(3)
    code, counts = rng.integers(0, 4, pa.size), rng.integers(1, 4, pa.size).astype(float)
    value, grad = _shared_negloglik_and_gradient(THETA, pa, pb, code, counts)
    fd = approx_fprime(THETA, lambda t: _shared_negloglik_and_gradient(t, pa, pb, code, counts)[0],
                       1e-7)
    np.testing.assert_allclose(grad, fd, atol=1e-3 * max(1.0, np.abs(fd).max()))
    # and the value is -sum c log P by the probabilities directly
    p = shared_probabilities(THETA, pa, pb)[np.arange(pa.size), code]
    assert value == pytest.approx(-np.sum(counts * np.log(p)), rel=1e-12)


@pytest.fixture(scope="module")
def population():
    """Expected answer counts of 600 random pairs under a known shared-effect truth (tau 0.5,
    the answer process of satcal's simulated crowd), the integral at 40 nodes."""
    rng = np.random.default_rng(4)
    pa, pb = rng.random(600), rng.random(600)
    truth = np.array([-3.0, 6.0, 0.0, logit(0.3), 0.0, logit(0.8), logit(0.2), 0.5])
    P = shared_probabilities(truth, pa, pb, nodes=40)
    answers = np.tile(np.array(CODES, dtype=object), pa.size)
    a, b = np.repeat(pa, 4), np.repeat(pb, 4)
    return truth, a, b, answers, 5 * P.ravel()


def test_fit_recovers_the_truth_of_expected_counts(population):
    truth, a, b, answers, counts = population
    fit = fit_joint_shared(a, b, answers, counts)
    # expected counts: the maximum is the truth, up to the 10-node quadrature's error
    np.testing.assert_allclose(fit.theta, truth, atol=2e-3)
    assert fit.gradient < 1e-2
    # the independent model misreads the correlation: its maximum is elsewhere and lower
    assert fit.independent.loglik < fit.loglik - 1e-3
    assert abs(fit.independent.theta[0] - truth[0]) > 0.1
    # the population-averaged curve is E_v expit(-3 + v + 6 x)
    x = np.array([0.1, 0.5, 0.9])
    want = [quad(lambda v: 1 / (1 + np.exp(3 - v - 6 * xi)) * norm.pdf(v, 0, 0.5), -8, 8)[0]
            for xi in x]
    np.testing.assert_allclose(fit.curve(x), want, atol=1e-3)


def test_fit_is_the_maximum_of_a_derivative_free_search(population):
    truth, a, b, answers, counts = population
    fit = fit_joint_shared(a, b, answers, counts)
    code = np.concatenate([np.arange(4)] * (a.size // 4))
    low, high = np.array(BOUNDS + [TAU_BOUNDS]).T
    f = lambda t: _shared_negloglik_and_gradient(np.clip(t, low, high), a, b, code, counts)[0]
    start = fit.theta + np.array([0.3, -0.5, 0.4, 0.2, -0.3, 0.2, 0.3, 0.2])
    nm = minimize(f, start, method="Nelder-Mead",
                  options={"maxiter": 40000, "xatol": 1e-8, "fatol": 1e-10, "adaptive": True})
    assert -nm.fun <= fit.loglik + 1e-6


def test_independent_part_is_fit_joint(population):
    _, a, b, answers, counts = population
    fit = fit_joint_shared(a, b, answers, counts)
    ref = fit_joint(a, b, answers, counts)
    np.testing.assert_array_equal(fit.independent.theta, ref.theta)
    assert fit.ends.max() == pytest.approx(fit.loglik, abs=1e-9)
