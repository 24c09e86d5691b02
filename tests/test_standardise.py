"""The standardised per-list estimand (satcal.analysis.standardise): the reference population,
the curves and indicators against hand computations and statsmodels, and its design
invariance on simulated users."""
import numpy as np
import pandas as pd
import pytest
from scipy.special import expit, logit

from satcal.analysis.core import GRID
from satcal.analysis.standardise import (_agreement, akaike_weights, reference_lists,
                                         reference_ties, standardised_curves,
                                         standardised_indicators, standardised_preference,
                                         standardised_targets)
from satcal.judgments import Judgments


def _judgments():
    # query q1: levels 0 x 6, 1 x 2, 2 x 1; query q2: 0 x 1, 3 x 1 (a pool smaller than k)
    rows = [("q1", f"d{i}", lv) for i, lv in enumerate([0] * 6 + [1] * 2 + [2])]
    rows += [("q2", "e0", 0), ("q2", "e1", 3)]
    return Judgments(pd.DataFrame(rows, columns=["query", "doc", "level"]))


def test_reference_lists_follow_the_rule():
    """Each query gets the same number of lists; a list never uses more documents of a level
    than the pool holds (empty ranks once it runs out); the first rank's level is uniform over
    the levels present (chi-square against 1/3, 1/3, 1/3 for q1)."""
    from scipy.stats import chisquare
    levels, qi, pools = reference_lists(_judgments(), k=4, size=6000, seed=1)
    assert np.bincount(qi).tolist() == [3000, 3000]
    q1, q2 = levels[qi == 0], levels[qi == 1]
    for lv, cap in ((1, 2), (2, 1)):
        assert (np.sum(q1 == lv, axis=1) <= cap).all()
    assert np.isnan(q2[:, 2:]).all() and sorted(q2[0, :2]) == [0, 3]
    counts = [np.sum(q1[:, 0] == lv) for lv in (0, 1, 2)]
    assert chisquare(counts).pvalue > 0.001
    again, _, _ = reference_lists(_judgments(), k=4, size=6000, seed=1)
    assert np.array_equal(np.nan_to_num(levels, nan=-9), np.nan_to_num(again, nan=-9))


def test_akaike_weights_by_hand():
    w = akaike_weights([-10.0, -11.0, np.nan])
    assert w == pytest.approx([1 / (1 + np.exp(-1)), np.exp(-1) / (1 + np.exp(-1)), 0.0])


def _theta(b0, b1, b2=0.0, pi=0.3, delta=0.8, lam=0.1):
    return np.array([b0, b1, b2, logit(pi), 0.0, logit(delta), logit(2 * lam)])


def test_the_satisfaction_models_own_formulation_gets_its_own_curve_back(rng):
    """When the mixture puts all weight on formulation g, S = s_g(phi_g) is a quadratic logit
    of phi_g, so the standardised curve of g is s_g itself and b1_std of g is
    mean |x - s_g(x)| over the grid, by hand."""
    ref = np.round(rng.random((2000, 3)), 3)   # on the 0.001 grid the fits group by
    thetas = np.stack([_theta(-2, 4, 1), _theta(-3, 6), _theta(0, 1)])
    curves, beta = standardised_curves(thetas, ref, np.array([0.0, 1.0, 0.0]))
    assert beta[1] == pytest.approx([-3, 6, 0], abs=1e-6)
    s = expit(-3 + 6 * GRID)
    ind = standardised_indicators(thetas, ref, np.array([0.0, 1.0, 0.0]))
    assert ind["b1_std"][1] == pytest.approx(np.mean(np.abs(GRID - s)), abs=1e-9)
    assert ind["b2_std"][1] == pytest.approx((s[0] + 1 - s[-1]) / 2, abs=1e-9)


def test_other_formulations_curve_equals_statsmodels_fractional_logit(rng):
    """The standardised curve of a formulation f != g is the fractional-response quadratic
    logit of S on phi_f (statsmodels GLM Binomial with fractional outcomes)."""
    import statsmodels.api as sm
    ref = np.round(rng.random((600, 2)), 2)     # repeated rows, as the reference lists have
    thetas = np.stack([_theta(-3, 6), _theta(0, 1)])
    _, beta = standardised_curves(thetas, ref, np.array([1.0, 0.0]))
    S = expit(-3 + 6 * ref[:, 0])
    X = np.stack([np.ones(600), ref[:, 1], ref[:, 1] ** 2], axis=1)
    ref_beta = sm.GLM(S, X, family=sm.families.Binomial()).fit(tol=1e-12).params
    assert beta[1] == pytest.approx(ref_beta, abs=1e-6)
    # scores off the 0.001 grid are grouped to it: the curve moves by far less than its noise
    ref = rng.random((600, 2))
    curves, _ = standardised_curves(thetas, ref, np.array([1.0, 0.0]))
    S = expit(-3 + 6 * ref[:, 0])
    X = np.stack([np.ones(600), ref[:, 1], ref[:, 1] ** 2], axis=1)
    exact = sm.GLM(S, X, family=sm.families.Binomial()).fit(tol=1e-12).predict(
        np.stack([np.ones(GRID.size), GRID, GRID ** 2], axis=1))
    assert np.abs(curves[1] - exact).max() < 1e-3


def test_agreement_by_hand():
    """One pair, two formulations, the model on formulation 0: the answer process written out."""
    th = _theta(-1, 3, 0, pi=0.4, delta=0.7, lam=0.05)
    x, y = np.array([[0.8, 0.2]]), np.array([[0.3, 0.2]])   # f0: x higher; f1: a tie
    agree = _agreement(np.stack([th, th]), x, y, np.array([1.0, 0.0]))
    sx, sy = expit(-1 + 3 * 0.8), expit(-1 + 3 * 0.3)
    pref_x = sx * (1 - sy) * 0.95 + sy * (1 - sx) * 0.05 + (sx * sy + (1 - sx) * (1 - sy)) * 0.4 * 0.7
    assert agree[0, 0] == pytest.approx(pref_x, rel=1e-12)
    assert agree[1, 0] == 0.0                                 # ties never side with a list


def _tied_population(rng):
    """Reference scores (N, 3) on the 0.01 grid whose pairs tie by construction: formulation 0
    never, 1 in every third pair, 2 (a coarse score of five values) in three pairs out of four."""
    first = np.round(rng.random((450, 3)), 2)
    step = np.round(0.01 + 0.49 * rng.random((450, 3)), 2)          # 0.01 to 0.5, never 0
    second = np.where(first + step <= 1, first + step, first - step)
    second[::3, 1] = first[::3, 1]
    first[:, 2] = np.round(4 * first[:, 2]) / 4                     # 0, 0.25, ..., 1
    other = (4 * first[:, 2] + rng.integers(1, 5, 450)) % 5 / 4     # another of the five
    second[:, 2] = np.where(np.arange(450) % 4 == 0, other, first[:, 2])
    ref = np.empty((900, 3))
    ref[0::2], ref[1::2] = first, second
    return ref


def _by_hand_agreement(thetas, weights, x, y, f):
    """P(an answer sides with the higher-phi_f list) of each pair, the answer process written
    out per model g and mixed with the weights (ties under g: the undecided user's coin)."""
    total = 0.0
    for g, w in enumerate(weights):
        b0, b1, b2, c0, c1, dl, lm = thetas[g]
        sx, sy = (expit(b0 + b1 * v + b2 * v ** 2) for v in (x[:, g], y[:, g]))
        delta, lapse = expit(dl), 0.5 * expit(lm)
        d = np.where(np.abs(x[:, g] - y[:, g]) < 1e-9, 0.0, x[:, g] - y[:, g])
        pi = expit(c0 + c1 * np.abs(d))
        t = np.where(d > 0, delta, np.where(d < 0, 1 - delta, 0.5))
        same = sx * sy + (1 - sx) * (1 - sy)
        px = sx * (1 - sy) * (1 - lapse) + sy * (1 - sx) * lapse + same * pi * t
        py = sy * (1 - sx) * (1 - lapse) + sx * (1 - sy) * lapse + same * pi * (1 - t)
        total = total + w * np.where(x[:, f] > y[:, f], px, py)
    return total


def test_preference_curve_is_statsmodels_logit_over_the_ordered_pairs(rng):
    """P*_f's coefficients are statsmodels' fractional logit (GLM Binomial) of the agreement
    probabilities, computed by hand, on |dphi_f| and its square over the pairs f does not tie
    (one row per pair); ties_std is the count of tied pairs over the pairs."""
    import statsmodels.api as sm
    ref = _tied_population(rng)
    thetas = np.stack([_theta(-2, 4, 0.5, pi=0.4), _theta(-1, 2, pi=0.3, delta=0.7),
                       _theta(-1.5, 3, lam=0.05)])
    thetas[0, 4] = 2.0                                         # pi rising in |dphi| under model 0
    w = np.array([0.6, 0.3, 0.1])
    ind = standardised_indicators(thetas, ref, w, coefficients=True)
    x, y = ref[0::2], ref[1::2]
    assert reference_ties(ref) == pytest.approx([0.0, 150 / 450, 1 - 113 / 450], abs=1e-15)
    for f in range(3):
        tied = np.abs(x[:, f] - y[:, f]) < 1e-9
        assert np.mean(tied) == reference_ties(ref)[f]
        d = np.abs(x[~tied, f] - y[~tied, f])
        agree = _by_hand_agreement(thetas, w, x[~tied], y[~tied], f)
        X = np.stack([np.ones_like(d), d, d ** 2], axis=1)
        ref_beta = sm.GLM(agree, X, family=sm.families.Binomial()).fit(tol=1e-13, maxiter=200).params
        assert np.abs(ind["beta_pref"][f] - ref_beta).max() < 1e-8, f
        # the figure's targets are those rows: counts of the ordered pairs, their mean agreement
        vals, counts, means = standardised_targets(thetas, ref, w)["pref"][f]
        assert counts.sum() == (~tied).sum()
        key = np.round(d, 3)
        assert means == pytest.approx([agree[key == v].mean() for v in vals], abs=1e-12)
    # b3_std is the mean gap of that curve to P = 1 over the grid
    p = expit(np.stack([np.ones(GRID.size), GRID, GRID ** 2], axis=1) @ ind["beta_pref"][1])
    assert ind["b3_std"][1] == pytest.approx(np.mean(1 - p), abs=1e-12)


def test_a_formulation_that_orders_no_pair_has_no_preference_curve(rng):
    """A constant score ties every pair: ties_std 1, P* and b3_std undefined (NaN), and the
    other formulations' fits are those of a call without it."""
    ref = _tied_population(rng)
    ref[:, 2] = 0.5
    thetas = np.stack([_theta(-2, 4), _theta(-1, 2), _theta(0, 0.1)])
    w = np.array([0.7, 0.3, 0.0])
    ind = standardised_indicators(thetas, ref, w, coefficients=True)
    assert reference_ties(ref)[2] == 1.0
    assert np.isnan(ind["b3_std"][2]) and np.isnan(ind["beta_pref"][2]).all()
    alone = standardised_indicators(thetas[:2], ref[:, :2], w[:2], coefficients=True)
    assert ind["beta_pref"][:2] == pytest.approx(alone["beta_pref"], abs=1e-12)
    assert ind["b3_std"][:2] == pytest.approx(alone["b3_std"], abs=1e-12)


def test_bootstrap_replicates_equal_one_at_a_time(rng):
    """(B, F, 7) replicates in blocks give what each replicate gives alone."""
    ref = np.round(rng.random((400, 2)), 3)
    base = np.stack([_theta(-3, 6), _theta(-1, 2)])
    reps = base + rng.normal(0, 0.05, (5, 2, 7))
    w = np.array([0.7, 0.3])
    both = standardised_indicators(reps, ref, w, block=2)
    for b in range(5):
        one = standardised_indicators(reps[b], ref, w)
        for k in one:
            assert both[k][b] == pytest.approx(one[k], rel=1e-9)
    pref = standardised_preference(reps, ref, w)
    assert pref.shape == (5, 2, GRID.size)


def _reference_indicators(thetas, ref, weights, sat_range, pref_range):
    """The standardised indicators as first written (before the segment-Newton rewrite): S and
    the agreement of every formulation built list by list, each formulation's grouped fit padded
    to a common length and fitted by fit_logit_batch from its intercept-only start."""
    from satcal.analysis.core import TIE_TOLERANCE, bias_indicators, design
    from satcal.analysis.standardise import _fit_grouped, _groups

    def s(th, phi):
        return expit(th[..., 0, None] + th[..., 1, None] * phi + th[..., 2, None] * phi ** 2)

    F = ref.shape[1]
    S = sum(weights[g] * s(thetas[:, g, :], ref[:, g]) for g in range(F)) / weights.sum()
    beta_s = _fit_grouped(_groups(ref.T), np.broadcast_to(S[:, None, :], (len(thetas), F, len(ref))))
    x, y = ref[0::2], ref[1::2]
    d_f = np.where(np.abs(x - y) < TIE_TOLERANCE, 0.0, x - y).T
    agree = 0.0
    for g in range(F):
        th = thetas[:, g, :]
        sx, sy = s(th, x[:, g]), s(th, y[:, g])
        col = lambda i: th[:, i, None]
        delta, lapse, d_g = expit(col(5)), 0.5 * expit(col(6)), d_f[g]
        same = sx * sy + (1 - sx) * (1 - sy)
        pi = expit(col(3) + col(4) * np.abs(d_g))
        to_x = np.where(d_g > 0, delta, np.where(d_g < 0, 1 - delta, 0.5))
        px = sx * (1 - sy) * (1 - lapse) + sy * (1 - sx) * lapse + same * pi * to_x
        py = sy * (1 - sx) * (1 - lapse) + sx * (1 - sy) * lapse + same * pi * (1 - to_x)
        agree = agree + weights[g] * np.where(d_f > 0, px[:, None, :], np.where(d_f < 0, py[:, None, :], 0.0))
    # P*_f over the pairs f orders: each formulation's untied pairs fitted on their own
    agree = agree / weights.sum()
    beta_p = np.stack([_fit_grouped(_groups(np.abs(x - y)[d_f[f] != 0, f][None]),
                                    agree[:, f, d_f[f] != 0][:, None, :])[:, 0] for f in range(F)], axis=1)
    ind = bias_indicators(expit(beta_s @ design(GRID).T), expit(beta_p @ design(GRID).T),
                          sat_range=sat_range, pref_range=pref_range)
    return {"b1_std": ind["b1"], "b2_std": ind["b2"], "b3_std": ind["b3"]}


def test_replicates_equal_the_first_implementation(rng):
    """Bootstrap replicates (started from the point fit, all formulations and replicates in one
    Newton) give the indicators of the straightforward implementation above to 1e-8, with the
    weight spread over three models, tied pairs and supported ranges."""
    ref = np.round(rng.random((1200, 3)), 2)
    ref[::7, 1] = ref[1::7, 1][: len(ref[::7])]               # some reference pairs tie
    base = np.stack([_theta(-3, 6), _theta(-1, 2, 1, pi=0.5), _theta(-2, 3, 0.5, delta=0.6)])
    reps = base + rng.normal(0, 0.1, (8, 3, 7))
    w = np.array([0.5, 0.3, 0.2])
    sat_range = np.array([[0.0, 1.0], [0.1, 0.9], [0.0, 0.8]])
    pref_range = np.array([[0.0, 0.9], [0.0, 1.0], [0.05, 0.7]])
    fast = standardised_indicators(reps, ref, w, sat_range, pref_range, centre=base, block=3)
    slow = _reference_indicators(reps, ref, w, sat_range, pref_range)
    for k in slow:
        assert np.abs(fast[k] - slow[k]).max() < 1e-8, k
    point = standardised_indicators(base, ref, w, sat_range, pref_range)
    for k, v in _reference_indicators(base[None], ref, w, sat_range, pref_range).items():
        assert np.abs(point[k] - v[0]).max() < 1e-8, k


def test_per_replicate_weights_equal_one_replicate_at_a_time(rng):
    """(B, F) weights (each replicate's own mixture) give each replicate what a single call
    with that replicate's parameters and weights gives."""
    ref = np.round(rng.random((400, 2)), 3)
    reps = np.stack([_theta(-3, 6), _theta(-1, 2)]) + rng.normal(0, 0.05, (4, 2, 7))
    w = np.array([[1.0, 0.0], [0.2, 0.8], [0.5, 0.5], [0.0, 1.0]])
    both = standardised_indicators(reps, ref, w, block=3)
    for b in range(4):
        one = standardised_indicators(reps[b], ref, w[b])
        for k in one:
            assert both[k][b] == pytest.approx(one[k], abs=1e-9)
    assert akaike_weights(np.array([[-10.0, -11.0], [np.nan, -3.0]])) == pytest.approx(
        np.array([[1 / (1 + np.exp(-1)), np.exp(-1) / (1 + np.exp(-1))], [0.0, 1.0]]))


def test_blocks_shared_among_processes_give_the_same_bits(rng):
    """With n_jobs=2 the blocks of replicates go to two worker processes: every array is
    bit for bit the one process's, with per-replicate weights (which models a block's mixture
    keeps depends on its replicates: the blocks must be the same), and both are the first
    implementation's to 1e-8."""
    ref = np.round(rng.random((600, 3)), 2)
    base = np.stack([_theta(-3, 6), _theta(-1, 2, 1, pi=0.5), _theta(-2, 3, 0.5, delta=0.6)])
    reps = base + rng.normal(0, 0.1, (7, 3, 7))
    w = rng.dirichlet([1.0, 1.0, 0.2], size=7)
    w[2] = [1.0, 0.0, 0.0]                     # a block whose mixture keeps one model
    one = standardised_indicators(reps, ref, w, centre=base, block=2, coefficients=True)
    two = standardised_indicators(reps, ref, w, centre=base, block=2, coefficients=True, n_jobs=2)
    assert set(one) == set(two) and all(np.array_equal(one[k], two[k], equal_nan=True) for k in one)
    for b in range(7):
        slow = _reference_indicators(reps[b:b + 1], ref, w[b], None, None)
        for k, v in slow.items():
            assert np.abs(two[k][b] - v[0]).max() < 1e-8, (k, b)


def test_replicate_loglik_is_the_joint_likelihood_at_each_replicate(rng):
    """replicate_loglik equals minus the joint model's negative log-likelihood with each
    replicate's weights as counts, one replicate at a time."""
    from satcal.analysis.joint import _negloglik, replicate_loglik
    n = 300
    phi_a, phi_b = np.round(rng.random(n), 2), np.round(rng.random(n), 2)
    code = rng.integers(0, 4, n)
    thetas = _theta(-1, 3)[None] + rng.normal(0, 0.2, (5, 7))
    W = rng.poisson(1.0, (5, n)).astype(float)
    got = replicate_loglik(thetas, phi_a, phi_b, code, W, block=2)
    for b in range(5):
        assert got[b] == pytest.approx(-_negloglik(thetas[b], phi_a, phi_b, code, W[b]), rel=1e-12)


def test_a_degenerate_fit_gets_the_exact_replicate_loglik(rng):
    """A full-sample fit whose covariance is not finite (a degenerate fit on a small wave) gives
    the exact per-replicate sums, not a failed pseudo-inverse."""
    from types import SimpleNamespace
    from satcal.analysis.joint import _negloglik, replicate_loglik
    n = 200
    phi_a, phi_b = np.round(rng.random(n), 2), np.round(rng.random(n), 2)
    code = rng.integers(0, 4, n)
    thetas = _theta(-1, 3)[None] + rng.normal(0, 0.2, (3, 7))
    W = rng.poisson(1.0, (3, n)).astype(float)
    degenerate = SimpleNamespace(theta=_theta(-1, 3), cov=np.full((7, 7), np.nan))
    got = replicate_loglik(thetas, phi_a, phi_b, code, W, fit=degenerate)
    for b in range(3):
        assert got[b] == pytest.approx(-_negloglik(thetas[b], phi_a, phi_b, code, W[b]), rel=1e-12)


def test_second_order_replicate_loglik_is_close_to_the_exact_one(rng):
    """On answers simulated from the joint model, the k-step replicates' log-likelihoods taken
    to second order around the full-sample fit are within one log-likelihood unit of the exact
    sums (what the replicates' Akaike weights are computed from; the gain of the Newton step
    itself is 1-7 units here, and the one-step replicates approximate the replicates' maxima to
    the same order), far below the spread of the sums over replicates."""
    from satcal.analysis.joint import CODES, bootstrap_thetas, fit_joint, joint_probabilities, replicate_loglik
    n = 3000
    phi_a, phi_b = np.round(rng.random(n), 2), np.round(rng.random(n), 2)
    probs = joint_probabilities(_theta(-2, 4), phi_a, phi_b)
    code = (rng.random(n)[:, None] > np.cumsum(probs, axis=1)).sum(axis=1)
    fit = fit_joint(phi_a, phi_b, np.asarray(CODES, dtype=object)[code])
    W = rng.multinomial(n, np.full(n, 1 / n), size=20).astype(float)
    thetas = bootstrap_thetas(fit, phi_a, phi_b, code, W)
    exact = replicate_loglik(thetas, phi_a, phi_b, code, W)
    approx = replicate_loglik(thetas, phi_a, phi_b, code, W, fit=fit)
    assert np.abs(approx - exact).max() < 1.0
    assert np.std(exact) > 20 * np.abs(approx - exact).max()


def test_standardised_curves_of_calibrate_are_statsmodels_fractional_logits(ecir_study):
    """curves.csv's standardised s*_f: the fractional-response quadratic logit (statsmodels)
    of S = sum_g w_g s_g(phi_g) over the reference lists, S built from fits.csv's joint rows and
    the recorded weights; b1_std is its mean distance from the diagonal over its supported
    range."""
    import statsmodels.api as sm
    from satcal.analysis import calibrate
    forms = ["lin-const", "lin-log5", "exp2-log2"]
    r = calibrate(ecir_study, forms, bootstrap=0, seed=0, model_check_folds=0)
    ref, w = r.meta["standardisation"]["reference_phi"], r.meta["standardisation"]["weights"]
    joint = r.fits[(r.fits.sat_model == "joint") & (r.fits.curve == "sat")].set_index("formulation")
    # the shared-effect model's s_g: beta at v = 0 averaged over v ~ N(0, tau^2), by scipy's
    # Gauss-Hermite nodes at 60 points (the analysis: 24 nodes on 257 scores and a spline)
    z, h = np.polynomial.hermite_e.hermegauss(60)
    S = sum(w[g] * sum(hk / h.sum() * expit(np.polynomial.polynomial.polyval(
        ref[:, g], joint.loc[f, ["beta0", "beta1", "beta2"]].to_numpy(float)) + joint.loc[f, "joint_tau"] * zk)
        for zk, hk in zip(z, h)) for g, f in enumerate(forms))
    for j, f in enumerate(forms):
        x = np.round(ref[:, j], 3)
        X = np.stack([np.ones_like(x), x, x ** 2], axis=1)
        fit = sm.GLM(S, X, family=sm.families.Binomial()).fit(tol=1e-12)
        c = r.curves[(r.curves.formulation == f) & (r.curves.curve == "sat") & (r.curves.sat_model == "standardised")]
        expected = fit.predict(np.stack([np.ones(GRID.size), GRID, GRID ** 2], axis=1))
        # 24 against 60 Gauss-Hermite nodes at the ECIR fits' tau ~ 2: measured 1.6e-7
        assert np.abs(c.p.to_numpy() - expected).max() < 1e-6, f
        inside = c[c.supported.astype(bool)]
        assert r.bias.set_index("formulation").loc[f, "b1_std"] == pytest.approx(
            np.mean(np.abs(inside.x - inside.p)), abs=1e-9)


def test_tie_heavy_preference_curves_of_the_ecir_answers_rise(ecir_study):
    """On the ECIR 2015 answers, the P* of formulations that tie many reference pairs
    (lin-const a fifth, bin2-const more) is fitted over the pairs they order: it rises over
    [0, 1] (fitted with the ties at |dphi| = 0 it fell to 0.09 at 1); ties_std is the
    tied pairs counted directly, recorded in calibration.json's provenance, and fits.csv's n of
    P* is the ordered pairs."""
    from satcal.analysis import calibrate
    from satcal.analysis.core import TIE_TOLERANCE
    forms = ["lin-const", "bin2-const", "lin-log5"]
    r = calibrate(ecir_study, forms, bootstrap=0, seed=0, model_check_folds=0)
    ref = r.meta["standardisation"]["reference_phi"]
    tied = np.abs(ref[0::2] - ref[1::2]) < TIE_TOLERANCE                # (pairs, F)
    bias = r.bias.set_index("formulation")
    shares = r.meta["provenance"]["reference_population"]["ties"]["shares"]
    fits = r.fits[(r.fits.sat_model == "standardised") & (r.fits.curve == "pref")].set_index("formulation")
    for j, f in enumerate(forms):
        assert bias.loc[f, "ties_std"] == tied[:, j].sum() / len(tied)
        assert shares[f] == pytest.approx(tied[:, j].mean(), abs=1e-6)
        assert fits.loc[f, "n"] == (~tied[:, j]).sum()
        assert bool(fits.loc[f, "monotone"]), f
    assert bias.loc["lin-const", "ties_std"] > 0.15 and bias.loc["bin2-const", "ties_std"] > 0.3
    # the reading guide names a leader that ties more than 10% of the pairs, with its share
    from satcal.report import reading_guide
    lead = r.ranking.formulation.iloc[0]
    text = " ".join(str(m) for m in reading_guide(r))
    said = f"{lead} ties {100 * bias.loc[lead, 'ties_std']:.0f}% of the reference pairs"
    assert (said in text) == (bias.loc[lead, "ties_std"] > 0.10)
    narrow = calibrate(ecir_study, ["lin-const", "bin2-const"], bootstrap=0, seed=0, model_check_folds=0)
    lead = narrow.ranking.formulation.iloc[0]
    share = narrow.bias.set_index("formulation").loc[lead, "ties_std"]
    assert share > 0.10
    assert f"{lead} ties {100 * share:.0f}% of the reference pairs" in " ".join(
        str(m) for m in reading_guide(narrow))
    # the paper's b3 keeps its convention: the same as the paper-only analysis gives
    paper = calibrate(ecir_study, forms, sat_model="published", bootstrap=0, seed=0, model_check_folds=0)
    assert np.array_equal(paper.bias["b3"].to_numpy(), r.bias["b3"].to_numpy())


def test_calibrate_records_the_reference_population(ecir_study):
    from satcal.analysis import calibrate
    r = calibrate(ecir_study, ["lin-const", "lin-log5"], bootstrap=0, seed=0, model_check_folds=0)
    ref = r.meta["provenance"]["reference_population"]
    assert ref["lists"] == r.meta["standardisation"]["reference_phi"].shape[0] >= 432 * 10
    assert "uniformly among the levels" in ref["rule"]
    assert r.bias[["b1_std", "b2_std", "b3_std"]].notna().all().all()
    published = calibrate(ecir_study, ["lin-const"], bootstrap=0, seed=0, model_check_folds=0,
                          sat_model="published")
    assert "b1_std" not in published.bias.columns


def _crowd_answers(phi_a, phi_b, rng, workers=100, intercept=-3.0, slope=6.0):
    """SPEC 7.1's answer process with worker intercepts u_w ~ N(0, 0.5^2): s_w(phi) =
    expit(intercept + u_w + slope phi); undecided users state a preference with probability 0.3
    (for the higher-phi list with 0.8); a lapse of 0.1 when exactly one list satisfies."""
    n = len(phi_a)
    u = rng.normal(0, 0.5, workers)[rng.integers(0, workers, n)]
    sat_a = rng.random(n) < expit(intercept + u + slope * phi_a)
    sat_b = rng.random(n) < expit(intercept + u + slope * phi_b)
    out = np.where(sat_a & sat_b, "both_good", "both_bad").astype(object)
    one = sat_a != sat_b
    out[one] = np.where(sat_a[one] != (rng.random(n)[one] < 0.1), "a_better", "b_better")
    states = ~one & (rng.random(n) < 0.3)
    higher_a = np.where(phi_a > phi_b, True, np.where(phi_a < phi_b, False, rng.random(n) < 0.5))
    pick_a = np.where(phi_a == phi_b, higher_a, (rng.random(n) < 0.8) == higher_a)
    out[states] = np.where(pick_a[states], "a_better", "b_better")
    return out


def test_two_designs_estimate_the_same_standardised_indicators(ecir_study):
    """The same simulated users (truth lin-const, worker intercepts sd 0.5, the answer process
    of SPEC 7.1 with pi 0.3, delta 0.8, lambda 0.1) answer on the ECIR 2015 pairs and on a
    generated design: each formulation's b1_std-b3_std are within 0.02 of the users' own (the
    same process integrated over the worker intercept by Gauss-Hermite quadrature, on the same
    reference lists) on both designs."""
    from satcal.analysis import calibrate
    from satcal.analysis.standardise import reference_scores
    from satcal.generate import generate
    from satcal.measures import score_lists, study_formulations
    forms = [f for f in study_formulations() if f.id in ("lin-const", "lin-log5", "exp2-zipf", "bin2-lin")]
    truth = [f.id for f in forms].index("lin-const")
    ref = reference_scores(ecir_study.judgments, forms, 5, 3, size=4000, seed=0)
    z, w = np.polynomial.hermite_e.hermegauss(30)
    F = len(forms)
    ref_aug = np.concatenate([ref, np.repeat(ref[:, [truth]], z.size, axis=1)], axis=1)
    th = np.zeros((F + z.size, 7))
    th[F:] = [[-3 + 0.5 * zk, 6, 0, logit(0.3), 0, logit(0.8), logit(0.2)] for zk in z]
    oracle = standardised_indicators(th, ref_aug, np.concatenate([np.zeros(F), w / w.sum()]))
    rng = np.random.default_rng(5)
    ex = generate(ecir_study.judgments, seed=3, min_per_cell=60).examples
    levels = lambda side: ex[[f"r{side}{i}" for i in range(1, 6)]].to_numpy(float)
    pick = np.resize(rng.permutation(len(ex)), len(ecir_study.answers))
    designs = {"ecir": (score_lists(ecir_study.levels("a"), forms, n_levels=3),
                        score_lists(ecir_study.levels("b"), forms, n_levels=3)),
               "generated": (score_lists(levels("a")[pick], forms, n_levels=3),
                             score_lists(levels("b")[pick], forms, n_levels=3))}
    for name, (pa, pb) in designs.items():
        answers = _crowd_answers(pa[:, truth], pb[:, truth], rng)
        r = calibrate(None, forms, phi_a=pa, phi_b=pb, answers=answers, sat_model="both", bootstrap=0,
                      seed=0, model_check_folds=0, indicator_range="full", reference=ref)
        for k in ("b1_std", "b2_std", "b3_std"):
            assert np.abs(r.bias[k].to_numpy() - oracle[k][:F]).max() < 0.02, (name, k)


def test_two_designs_name_the_users_own_least_biased_formulation(ecir_study):
    """Users who follow exp2-zipf (s(phi) = expit(-2 + u_w + 4 phi), worker intercepts sd 0.5)
    whose own standardised indicators set exp2-log2 apart (computed first, by Gauss-Hermite
    quadrature over u_w on the reference lists, and checked to lead by a mean rank of one):
    on the ECIR 2015 pairs and on a generated design alike, the standardised ranking puts
    exp2-log2 first."""
    from satcal.analysis import calibrate
    from satcal.analysis.standardise import reference_scores
    from satcal.generate import generate
    from satcal.measures import resolve_formulations, score_lists
    forms = resolve_formulations(["exp2-zipf", "exp2-log2", "exp2-log3", "exp2-log5"])
    ref = reference_scores(ecir_study.judgments, forms, 5, 3, size=4000, seed=0)
    z, w = np.polynomial.hermite_e.hermegauss(30)
    F = len(forms)
    ref_aug = np.concatenate([ref, np.repeat(ref[:, [0]], z.size, axis=1)], axis=1)
    th = np.zeros((F + z.size, 7))
    th[F:] = [[-2 + 0.5 * zk, 4, 0, logit(0.3), 0, logit(0.8), logit(0.2)] for zk in z]
    oracle = standardised_indicators(th, ref_aug, np.concatenate([np.zeros(F), w / w.sum()]))
    ranks = pd.DataFrame({k: v[:F] for k, v in oracle.items()}).rank().mean(axis=1).to_numpy()
    # exp2-log2 leads by a mean rank of one at least (it is first on b1_std and b2_std)
    assert np.argmin(ranks) == 1 and np.sort(ranks)[1] - ranks[1] >= 1
    rng = np.random.default_rng(11)
    ex = generate(ecir_study.judgments, seed=2, min_per_cell=60).examples
    levels = lambda side: ex[[f"r{side}{i}" for i in range(1, 6)]].to_numpy(float)
    pick = np.resize(rng.permutation(len(ex)), len(ecir_study.answers))
    designs = {"ecir": (score_lists(ecir_study.levels("a"), forms, n_levels=3),
                        score_lists(ecir_study.levels("b"), forms, n_levels=3)),
               "generated": (score_lists(levels("a")[pick], forms, n_levels=3),
                             score_lists(levels("b")[pick], forms, n_levels=3))}
    for name, (pa, pb) in designs.items():
        answers = _crowd_answers(pa[:, 0], pb[:, 0], rng, intercept=-2.0, slope=4.0)
        r = calibrate(None, forms, phi_a=pa, phi_b=pb, answers=answers, sat_model="both", bootstrap=0,
                      seed=0, model_check_folds=0, indicator_range="full", reference=ref)
        assert r.ranking.formulation.iloc[0] == "exp2-log2", name


def test_ranking_by_the_standardised_estimator_with_its_bootstrap(ecir_study):
    """result.ranking_by("standardised") ranks by b1_std-b3_std's mean rank (recomputed here)
    and carries p_best from the standardised replicates, which sum to 1 over formulations."""
    from satcal.analysis import calibrate
    r = calibrate(ecir_study, ["lin-const", "lin-log5", "exp2-log2"], bootstrap=20, seed=4, model_check_folds=0,
                  standardised_intervals=True)
    table = r.ranking_by("standardised")
    ranks = r.bias.set_index("formulation")[["b1_std", "b2_std", "b3_std"]].rank(method="min").mean(axis=1)
    assert table.set_index("formulation")["mean_rank"].to_dict() == pytest.approx(ranks.to_dict())
    assert table["p_best"].sum() == pytest.approx(1.0)
    reps = r.bootstrap.joint["std_indicators"]
    assert reps.shape == (20, 3, 3) and np.isfinite(reps).all()
    # b1_std's interval is the span of the percentile and the basic interval of its
    # replicates, cut at 0 (bootstrap.floor_interval; percentile and BC miss near the floor)
    q_lo, q_hi = np.percentile(reps[:, :, 0], [2.5, 97.5], axis=0)
    est = r.bias["b1_std"].to_numpy()
    np.testing.assert_allclose(r.bias["b1_std_lo"], np.maximum(0, np.minimum(q_lo, 2 * est - q_hi)), rtol=1e-12)
    np.testing.assert_allclose(r.bias["b1_std_hi"], np.maximum(q_hi, 2 * est - q_lo), rtol=1e-12)
    # b2_std and b3_std: the replicates' 2.5% and 97.5% quantiles (percentile intervals)
    for k, name in ((1, "b2_std"), (2, "b3_std")):
        lo, hi = np.percentile(reps[:, :, k], [2.5, 97.5], axis=0)
        np.testing.assert_allclose(r.bias[f"{name}_lo"], lo, rtol=1e-12)
        np.testing.assert_allclose(r.bias[f"{name}_hi"], hi, rtol=1e-12)


@pytest.mark.parametrize("n_params", [7, 8])
def test_mixture_s_of_a_batch_that_repeats_its_first_row_equals_row_by_row(n_params):
    """_mixture_s computes s_g once for the rows equal to the first (std_gradients' batch: one
    model perturbed at a time): against S summed by hand from _s of each row alone, for the
    independent (7) and shared-effect (8) joint models, with a failed (NaN) row."""
    from satcal.analysis.standardise import _active, _mixture_s, _s
    rng = np.random.default_rng(3)
    base = np.c_[rng.normal(0, 1, (4, 7)), np.abs(rng.normal(0.5, 0.2, (4, 1)))][:, :n_params]
    th = np.repeat(base[None], 13, axis=0)
    for m in range(2):             # models 0 and 1 perturbed, 2 and 3 as in row 0
        for i in range(3):
            th[1 + 6 * m + 2 * i, m, i] += 1e-4
            th[2 + 6 * m + 2 * i, m, i] -= 1e-4
    th[5, 3] = np.nan
    phi = rng.random((400, 4))     # above SPLINE_POINTS: the shared model's spline path
    w = np.array([0.4, 0.3, 0.2, 0.1])
    keep, ww = _active(w)
    want = sum(ww[0, k] * np.stack([_s(th[b, g], phi[:, g]) for b in range(13)]) for k, g in enumerate(keep))
    got = _mixture_s(th, phi, w)
    assert np.isnan(got[5]).all() and not np.isnan(np.delete(got, 5, axis=0)).any()
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=0)
