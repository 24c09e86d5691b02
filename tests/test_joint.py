"""The joint (per-list) satisfaction model of SPEC 7.1: its probabilities by hand, its band's
coverage of the true per-list curve in simulation (where the published estimator's does not
cover it: it estimates another quantity), and its place in calibrate's outputs."""
import numpy as np
import pandas as pd
import pytest
from scipy.special import expit, logit

from satcal.analysis.joint import CODES, fit_joint, joint_probabilities


#: ECIR 2015's formulations of at most 1,000 distinct answer rows (joint.WIDE_START_ROWS), counted
#: by np.unique on (phi_A, phi_B, answer): 141-976 rows; the 30 others have 1,194-2,849.
SMALL_ECIR = {"bin1-const", "bin2-const", "bin1-lin", "bin2-lin", "exp2-const", "lin-const"}


def _theta(b, c0, c1, delta, lapse):
    return np.array([*b, c0, c1, logit(delta), logit(2 * lapse)])


def test_probabilities_by_hand():
    # s_A = 0.8, s_B = 0.3 (constant curves), pi = expit(0) = 0.5, delta 0.9, lambda 0.1; A higher
    theta = _theta([logit(0.8), 0, 0], 0.0, 0.0, 0.9, 0.1)
    theta_b = _theta([logit(0.3), 0, 0], 0.0, 0.0, 0.9, 0.1)
    p = joint_probabilities(theta, np.array([0.7]), np.array([0.2]))[0]
    s = 0.8
    same = s * s + (1 - s) * (1 - s)
    only = s * (1 - s)
    assert p[CODES.index("both_good")] == pytest.approx(s * s * 0.5)
    assert p[CODES.index("both_bad")] == pytest.approx((1 - s) ** 2 * 0.5)
    assert p[CODES.index("a_better")] == pytest.approx(same * 0.5 * 0.9 + only * 0.9 + only * 0.1)
    assert p.sum() == pytest.approx(1.0)
    # a tie in phi: a stated preference goes either way with 1/2
    q = joint_probabilities(theta_b, np.array([0.4]), np.array([0.4]))[0]
    assert q[0] == pytest.approx(q[1]) and q.sum() == pytest.approx(1.0)


def _simulate(rng, theta, n):
    pa = rng.integers(0, 21, n) / 20
    pb = rng.integers(0, 21, n) / 20
    probs = joint_probabilities(theta, pa, pb)
    idx = (rng.random(n)[:, None] > probs.cumsum(axis=1)).sum(axis=1)
    return pa, pb, np.array(CODES, dtype=object)[idx]


def test_joint_band_covers_the_per_list_truth_where_the_published_one_does_not():
    from satcal.analysis import fit_logit
    rng = np.random.default_rng(2024)
    theta = _theta([-2.0, 2.5, 1.5], -1.0, 1.5, 0.8, 0.1)   # pi > 0: not the paper's special case
    grid = np.linspace(0, 1, 21)
    truth = expit(theta[0] + theta[1] * grid + theta[2] * grid ** 2)
    joint_cover, published_cover = [], []
    for _ in range(25):
        pa, pb, answers = _simulate(rng, theta, 2500)
        fit = fit_joint(pa, pb, answers)
        _, lo, hi = fit.predict(grid)
        joint_cover.append(np.mean((lo <= truth) & (truth <= hi)))
        both = np.isin(answers, ["both_good", "both_bad"])
        x = np.concatenate([pa[both], pb[both]])
        y = np.concatenate([answers[both] == "both_good"] * 2).astype(float)
        pub = fit_logit(x, y)
        plo, phi = pub.band(grid)
        published_cover.append(np.mean((plo <= truth) & (truth <= phi)))
    assert 0.85 <= np.mean(joint_cover) <= 1.0
    assert np.mean(published_cover) < 0.5


def test_calibrate_keeps_the_published_numbers_and_adds_the_joint_ones(ecir_study, ecir_result):
    from satcal.analysis import calibrate
    forms = ["lin-const", "exp2-log2"]
    published = calibrate(ecir_study, forms, model_check_folds=0, bootstrap=0, seed=0, sat_model="published")
    both = calibrate(ecir_study, forms, model_check_folds=0, sat_model="both", bootstrap=0, seed=0)
    pub_rows = both.curves[both.curves["sat_model"] == "published"].reset_index(drop=True)
    pd.testing.assert_frame_equal(pub_rows, published.curves.reset_index(drop=True))
    pd.testing.assert_frame_equal(both.bias[["b1", "b2", "b3"]], published.bias[["b1", "b2", "b3"]])
    # b1_joint and b2_joint are the indicators of the joint curve, by their formulas
    for f in forms:
        c = both.curves[(both.curves["formulation"] == f) & (both.curves["sat_model"] == "joint")]
        row = both.bias.set_index("formulation").loc[f]
        assert row["b1_joint"] == pytest.approx(np.mean(np.abs(c["x"] - c["p"])))
        assert row["b2_joint"] == pytest.approx((c["p"].iloc[0] + 1 - c["p"].iloc[-1]) / 2)
        fit = both.fits[(both.fits["formulation"] == f) & (both.fits["sat_model"] == "joint")]
        assert len(fit) == 1 and 0 <= fit["joint_lambda"].iloc[0] < 0.5
        # b3_joint: the implied preference curve of the fitted parameters, from fits.csv's columns
        r = fit.iloc[0]
        theta = [r.beta0, r.beta1, r.beta2, r.joint_c0, r.joint_c1, logit(r.joint_delta),
                 logit(2 * r.joint_lambda), r.joint_tau]
        from satcal.analysis.core import GRID
        from satcal.analysis.joint import IMPLIED_POINTS, implied_preference
        # the shared-effect model's curve evaluated exactly at every grid point (chunks small
        # enough to need no spline), against the analysis's spline between 51 points
        exact = np.concatenate([implied_preference(np.array(theta), GRID[i:i + IMPLIED_POINTS])
                                for i in range(0, GRID.size, IMPLIED_POINTS)])
        assert row["b3_joint"] == pytest.approx(np.mean(1 - exact), abs=1e-6)
        # fits.csv's curve: beta at v = 0 averaged over v ~ N(0, tau^2) (p_sat, and curves.csv)
        np.testing.assert_allclose(both.p_sat(f, c["x"].to_numpy(), model="joint"), c["p"], atol=1e-12)
        assert r["loglik"] == pytest.approx(-r["deviance"] / 2) and r["starts_agreeing"] >= 1
        # the tau = 0 candidate and three tau starts, and the wide ones on a formulation of at
        # most 1,000 rows (six of ECIR 2015's: bin1/bin2-const, bin1/bin2-lin, exp2-const, lin-const)
        assert r["starts"] == (9 if f in SMALL_ECIR else 4) and r["starts_agreeing"] <= r["starts"]
        assert isinstance(r["flags"], str)
    assert both.meta["provenance"]["sat_model"] == ["published", "joint"]
    with pytest.raises(Exception, match="sat_model must be one of"):
        calibrate(ecir_study, forms, sat_model="mixed", bootstrap=0, seed=0)


def test_simulated_study_from_the_joint_family_is_recovered(exported_workspace, tmp_path, copy_workspace):
    """The simulator draws from the joint model's family (preferences when undecided, lapses);
    the joint fit recovers the per-list curve and the lapse."""
    import re
    from satcal.analysis import calibrate
    from satcal.workspace import Workspace
    ws = copy_workspace(exported_workspace("appen", 10), tmp_path)
    text = (ws.path / "study.toml").read_text()
    for key, value in {"undecided_preference": 0.3, "preference_accuracy": 0.8, "lapse": 0.1,
                       "heterogeneity": 0.0, "spammers": 0.0, "position_bias": 0.0,
                       "answers_per_example": 6}.items():
        text = re.sub(rf"(?m)^{key} = .*$", f"{key} = {value}", text)
    (ws.path / "study.toml").write_text(text)
    ws = Workspace.open(ws.path)
    ws.export("appen", force=True)
    results, truth = ws.simulate("appen", force=True)
    ws.ingest([results], threshold=0.0)
    # only the true formulation is fitted (as in the draws below): every check reads its rows
    # and the provenance, and each formulation's fit is its own (the others cost time)
    f = truth["model"]["formulation"]
    result = ws.analyze(bootstrap=0, model_check_folds=0, sat_model="both", formulations=[f])
    joint = result.curves[(result.curves.formulation == f) & (result.curves.sat_model == "joint")]
    per_list = np.interp(joint.x, truth["p_sat_grid"], truth["p_sat_list"])
    assert np.mean((joint.lo <= per_list) & (per_list <= joint.hi)) >= 0.8
    fit = result.fits[(result.fits.formulation == f) & (result.fits.sat_model == "joint")].iloc[0]
    # these users share no effect (heterogeneity 0): the shared model's tau is within two of
    # its standard errors of 0, and the independent model (the true family here) recovers the
    # lapse and delta (the shared model's extra parameter costs them precision at 700 answers)
    assert fit["joint_tau"] - 2 * fit["joint_tau_se"] <= 0
    indep = ws.analyze(force=True, bootstrap=0, model_check_folds=0, sat_model="both", shared_effect=False,
                       formulations=[f])
    assert "joint_tau" not in indep.fits.columns
    # at 700 answers one draw's lapse and delta are imprecise (delta from 0.45 to the boundary 1
    # across draws), so recovery is judged over draws: their mean within 4 Monte-Carlo SEs of the
    # truth (a t-like check on six studies of the same design, study seeds 1-5 and this one)
    estimates = [(fit["joint_lambda"], fit["joint_delta"]) for fit in [
        indep.fits[(indep.fits.formulation == f) & (indep.fits.sat_model == "joint")].iloc[0]]]
    for seed in range(1, 6):
        other = copy_workspace(exported_workspace("appen", 10), tmp_path / f"draw{seed}")
        (other.path / "study.toml").write_text(re.sub(r"(?m)^seed = .*$", f"seed = {seed}", text, count=1))
        other = Workspace.open(other.path)
        other.export("appen", force=True)
        drawn, drawn_truth = other.simulate("appen", force=True)
        other.ingest([drawn], threshold=0.0)
        drawn_f = drawn_truth["model"]["formulation"]  # only the true formulation is fitted: the others cost time
        # the calibration Workspace.analyze runs (on its study_data), without the figures and
        # report it then writes (those are checked above): the fits are the same numbers
        again = calibrate(other.study_data(), [drawn_f], bootstrap=0, model_check_folds=0, sat_model="both",
                          shared_effect=False)
        row = again.fits[(again.fits.formulation == drawn_f) & (again.fits.sat_model == "joint")].iloc[0]
        estimates.append((row["joint_lambda"], row["joint_delta"]))
    estimates = np.asarray(estimates)
    se = estimates.std(axis=0, ddof=1) / np.sqrt(len(estimates))
    assert np.all(np.abs(estimates.mean(axis=0) - [0.1, 0.8]) <= 4 * se), (estimates, se)
    # the report's study table names each model as fitted
    from satcal.report import _parameters
    named = {prov["joint_model"]: dict(_parameters(prov))["satisfaction models"]
             for prov in (result.meta["provenance"], indep.meta["provenance"])}
    assert named == {
        "shared answer effect v ~ N(0, tau^2) on both lists' logits, 24-node Gauss-Hermite":
            "the paper's P(Sat|phi) (both_good/both_bad answers); shared-effect joint model (per-list "
            "s(phi) from all four answers; both lists of an answer share an effect v ~ N(0, tau^2))",
        "independent lists given phi (tau = 0)":
            "the paper's P(Sat|phi) (both_good/both_bad answers); joint model without a shared effect "
            "(per-list s(phi) from all four answers; lists independent given phi, tau = 0)"}


@pytest.fixture(scope="module")
def ecir_rows(ecir_study):
    from satcal.analysis.core import collapse_study
    from satcal.measures import study_formulations
    types = collapse_study(ecir_study, study_formulations())
    code = np.select([types.answers == c for c in CODES], range(len(CODES)), -1)
    return types, code


def test_gradient_equals_finite_differences(ecir_rows, rng):
    """The analytic gradient, single and batched, against scipy's finite differences."""
    from scipy.optimize import approx_fprime
    from satcal.analysis.joint import _negloglik, _negloglik_and_gradient
    types, code = ecir_rows
    for j in (0, 17, 35):
        args = (types.phi_a[:, j], types.phi_b[:, j], code, types.counts.astype(float))
        thetas = rng.normal(size=(3, 7))
        _, batched = _negloglik_and_gradient(thetas, *args[:3], np.tile(args[3], (3, 1)))
        for theta, grad in zip(thetas, batched):
            numeric = approx_fprime(theta, _negloglik, 1e-6, *args)
            np.testing.assert_allclose(_negloglik_and_gradient(theta, *args)[1], numeric, rtol=1e-4, atol=1e-3)
            np.testing.assert_allclose(grad, numeric, rtol=1e-4, atol=1e-3)


def test_k_step_bootstrap_equals_full_refits(ecir_rows):
    """Each replicate's Newton step lands where a full re-fit of that replicate does: the
    bootstrap curves agree to 0.005 and their 95% bands to 0.002 (ECIR 2015, 40 replicates)."""
    from scipy.optimize import minimize
    from satcal.analysis.bootstrap import replicate_weights
    from satcal.analysis.core import GRID, design
    from satcal.analysis.joint import BOUNDS, _negloglik_and_gradient, bootstrap_thetas
    types, code = ecir_rows
    W = replicate_weights(types.n_answers, 40, 11, types.inverse, types.counts.size)
    X = design(GRID)
    for j in (0, 17, 35):   # 17: lin-log2, whose single-start fit was a local maximum (issue 20)
        pa, pb = types.phi_a[:, j], types.phi_b[:, j]
        fit = fit_joint(pa, pb, types.answers, types.counts)
        fast = expit(bootstrap_thetas(fit, pa, pb, code, W)[:, :3] @ X.T)
        refit = np.array([minimize(_negloglik_and_gradient, fit.theta, args=(pa, pb, code, w), jac=True,
                                   method="L-BFGS-B", bounds=BOUNDS).x for w in W])
        slow = expit(refit[:, :3] @ X.T)
        assert np.max(np.abs(fast - slow)) < 0.005
        np.testing.assert_allclose(np.percentile(fast, [2.5, 97.5], axis=0),
                                   np.percentile(slow, [2.5, 97.5], axis=0), atol=0.002)


def test_calibrate_bootstraps_the_joint_curve(ecir_study):
    """With a bootstrap, the joint curves get bootstrap bands and b1_joint-b3_joint intervals
    that hold their estimates, for every formulation."""
    import satcal
    r = satcal.calibrate(ecir_study, ["lin-const", "exp3-zipf", "bin2-log2"], bootstrap=60, seed=3,
                         sat_model="both", model_check_folds=0)
    joint = r.curves[r.curves["sat_model"] == "joint"]
    assert joint[["boot_lo", "boot_hi"]].notna().all().all()
    assert ((joint["boot_lo"] <= joint["p"] + 1e-9) & (joint["p"] <= joint["boot_hi"] + 1e-9)).mean() > 0.99
    for ind in ("b1_joint", "b2_joint", "b3_joint"):
        assert (r.bias[f"{ind}_lo"] <= r.bias[ind]).all() and (r.bias[ind] <= r.bias[f"{ind}_hi"]).all()


def _per_formulation_rows(types, code, j):
    """One formulation's distinct (phi_A, phi_B, answer) rows and their counts."""
    pa, pb = types.phi_a[:, j], types.phi_b[:, j]
    _, first, inverse = np.unique(np.c_[pa, pb, code], axis=0, return_index=True, return_inverse=True)
    return pa[first], pb[first], code[first], np.bincount(inverse.ravel(), weights=types.counts)


def test_every_ecir_fit_reaches_an_independent_maximum(ecir_rows):
    """An independent maximisation of the same likelihood for all 36 formulations: 200 seeded
    random points in a box inside BOUNDS, L-BFGS-B from the best three with the analytic
    gradient (cheap), then from the highest of their ends with scipy's finite-difference
    gradient of the value (not the analytic one), so the search ends where the
    finite-difference search gains nothing more and does not rest on the analytic gradient
    (were that wrong, the first legs would stop short and the second carry on). satcal's fit is
    within 0.5 of it (or above) every time. (The finite-difference leg alone from the same
    starts reached the same maxima, within 1e-3, at twice the CPU.) The search is strong enough
    to have caught the single-start fit of before (issue 20): on lin-log2 that one ends 50
    below the independent maximum."""
    from scipy.optimize import minimize
    from satcal.analysis.joint import BOUNDS, _negloglik, _negloglik_and_gradient, _starts
    from satcal.measures import study_formulations
    types, code = ecir_rows
    ids = [f.id for f in study_formulations()]
    high = np.array([5.0, 10, 10, 10, 10, 5, 5])
    gaps = {}
    for j, name in enumerate(ids):
        args = _per_formulation_rows(types, code, j)
        rng = np.random.default_rng(j)
        points = rng.uniform(-high, high, (200, 7))
        screened = points[np.argsort([_negloglik(p, *args) for p in points])[:3]]
        legs = [minimize(_negloglik_and_gradient, p, args=args, jac=True, method="L-BFGS-B", bounds=BOUNDS,
                         options={"maxiter": 500}) for p in screened]
        highest = min(legs, key=lambda leg: leg.fun).x
        independent = -minimize(_negloglik, highest, args=args, method="L-BFGS-B", bounds=BOUNDS,
                                options={"maxiter": 500}).fun
        fit = fit_joint(types.phi_a[:, j], types.phi_b[:, j], types.answers, types.counts)
        gaps[name] = independent - fit.loglik
        if name == "lin-log2":
            single = minimize(_negloglik_and_gradient, _starts(*args)[0], args=args, jac=True,
                              method="L-BFGS-B", bounds=BOUNDS)
            assert independent + single.fun > 50
    assert max(gaps.values()) < 0.5, {k: round(v, 2) for k, v in gaps.items() if v >= 0.5}


def test_fit_is_a_checked_maximum_with_agreeing_starts(ecir_rows):
    """lin-log2 on ECIR 2015: the gradient at the fit (by finite differences) is ~0 in every
    parameter away from its bound, and more than one start reaches the best value."""
    from scipy.optimize import approx_fprime
    from satcal.analysis.joint import BOUNDS, _negloglik
    types, code = ecir_rows
    j = 17
    args = _per_formulation_rows(types, code, j)
    fit = fit_joint(types.phi_a[:, j], types.phi_b[:, j], types.answers, types.counts)
    assert fit.converged and fit.starts_agreeing >= 2
    assert fit.loglik == pytest.approx(-_negloglik(fit.theta, *args))
    low, high = np.array(BOUNDS).T
    free = (fit.theta > low + 1e-3) & (fit.theta < high - 1e-3)
    assert np.abs(approx_fprime(fit.theta, _negloglik, 1e-6, *args)[free]).max() < 0.05
    assert not any(f.startswith("not a maximum") for f in fit.flags)


def test_flags_name_degenerate_fits(rng):
    """A crowd whose answers hold no preference at all (only both_good/both_bad): pi runs to 0
    and the fit says so, and the flag agrees with pi computed from the fitted parameters.
    Answers from an interior model: no flags. Each flag of fit_flags fires on a hand-made
    parameter vector at that boundary and on no other."""
    from satcal.analysis.joint import fit_flags
    pa, pb, answers = _simulate(rng, _theta([-2.0, 4.0, 0.0], -40.0, 0.0, 0.8, 0.01), 3000)
    keep = np.isin(answers, ["both_good", "both_bad"])
    fit = fit_joint(pa[keep], pb[keep], answers[keep])
    p = fit.params()
    assert expit(p["c0"] + p["c1"] * np.abs(pa - pb)[keep]).max() < 1e-3
    assert [f for f in fit.flags if f.startswith("pi ~ 0")]
    pa, pb, answers = _simulate(rng, _theta([-2.0, 4.0, 0.0], -1.0, 1.0, 0.8, 0.1), 3000)
    fit = fit_joint(pa, pb, answers)
    assert fit.flags == () and fit.converged
    interior = np.array([-1.0, 3.0, 0.0, -1.0, 1.0, 1.0, -2.0])
    d = np.array([0.0, 0.5])
    assert fit_flags(interior, expit(-1.0 + d)) == ()
    cases = {"delta at 1": (5, 15.0), "delta at 0": (5, -15.0), "lambda at 0": (6, -15.0),
             "lambda at its 0.5 cap": (6, 15.0), "b1 at its box bound 30": (1, 30.0),
             "c1 at its box bound 20": (4, 20.0)}
    for name, (i, value) in cases.items():
        theta = interior.copy()
        theta[i] = value
        flags = fit_flags(theta, expit(theta[3] + theta[4] * d))
        assert len(flags) == 1 and flags[0].startswith(name), (name, flags)
    assert fit_flags(interior, np.array([0.9995, 0.9999]))[0].startswith("pi ~ 1")


def test_implied_preference_by_hand_and_by_simulation(rng):
    """The implied preference curve: with a constant s it is s(1 - s) + (s^2 + (1 - s)^2) pi(d)
    delta by hand; with a rising s, a Monte-Carlo run of the answer process (pairs
    (phi, phi + d), phi uniform on [0, 1 - d]) gives the same probabilities."""
    from satcal.analysis.joint import implied_preference
    d = np.array([0.0, 0.1, 0.5, 0.9, 1.0])
    s, c0, c1, delta, lapse = 0.7, -1.0, 2.0, 0.8, 0.15
    hand = s * (1 - s) + (s ** 2 + (1 - s) ** 2) * expit(c0 + c1 * d) * delta
    np.testing.assert_allclose(implied_preference(_theta([logit(s), 0, 0], c0, c1, delta, lapse), d), hand)
    b = np.array([-2.0, 3.0, 1.5])
    theta = _theta(b, c0, c1, delta, lapse)
    curve = implied_preference(theta, d)
    n = 200_000
    s_of = lambda x: expit(b[0] + b[1] * x + b[2] * x ** 2)
    for dk, pk in zip(d, curve):
        lo = rng.uniform(0, 1 - dk, n)
        sat_lo, sat_hi = rng.random(n) < s_of(lo), rng.random(n) < s_of(lo + dk)
        one = sat_lo != sat_hi
        lapsed = rng.random(n) < lapse
        stated = rng.random(n) < expit(c0 + c1 * dk)
        to_hi = rng.random(n) < delta
        prefers_hi = np.where(one, sat_hi != lapsed, stated & to_hi)
        assert abs(prefers_hi.mean() - pk) < 4 * np.sqrt(pk * (1 - pk) / n)
    # batched (bootstrap replicates) equals one at a time
    np.testing.assert_allclose(implied_preference(np.stack([theta, theta + 0.1]), d)[1],
                               implied_preference(theta + 0.1, d))


def test_pairing_correlation_of_the_ecir_pairs_and_of_a_generated_design(ecir_study, tmp_path):
    """corr(phi_A, phi_B) per formulation equals numpy's Pearson correlation; the ECIR 2015
    constant is the median over the published scores of the embedded answers; calibrate
    records it; ``satcal generate`` prints its design's median beside it."""
    import json
    from click.testing import CliRunner
    from satcal.analysis import calibrate
    from satcal.cli import main
    from satcal.datasets import load_ecir2015_crowd, published_scores
    from satcal.generate import ECIR2015_PAIRING_CORRELATION, pairing_correlation
    from satcal.measures import study_formulations
    crowd = load_ecir2015_crowd()
    a, b = published_scores(crowd, "A"), published_scores(crowd, "B")
    numpy_r = np.array([np.corrcoef(a[:, j], b[:, j])[0, 1] for j in range(a.shape[1])])
    np.testing.assert_allclose(pairing_correlation(a, b), numpy_r, atol=1e-12)
    assert ECIR2015_PAIRING_CORRELATION == round(float(np.median(numpy_r)), 2)
    # weights count rows: weight 2 is the row twice
    w = np.arange(len(a)) % 3
    np.testing.assert_allclose(pairing_correlation(a, b, w), pairing_correlation(np.repeat(a, w, 0), np.repeat(b, w, 0)))
    prov = calibrate(ecir_study, ["lin-const", "exp2-log2"], model_check_folds=0, bootstrap=0, seed=0, sat_model="published").meta["provenance"]
    lin = np.corrcoef(a[:, 35], b[:, 35])[0, 1]   # lin-const is the 36th study formulation
    assert prov["pairing_correlation"]["by_formulation"]["lin-const"] == pytest.approx(lin, abs=1e-3)
    json.dumps(prov["pairing_correlation"])
    # the generate command's line, against scores.csv recomputed with numpy
    q = tmp_path / "qrels.tsv"
    ecir_study.judgments.table.to_csv(q, sep="\t", index=False)
    d = tmp_path / "study"
    assert CliRunner().invoke(main, ["init", str(d), "--judgments", str(q), "--min-per-cell", "15"]).exit_code == 0
    res = CliRunner().invoke(main, ["generate", str(d), "-q"])
    assert res.exit_code == 0, res.output
    scores = pd.read_csv(d / "scores.csv")
    ids = [f.id for f in study_formulations()]
    med = np.median([np.corrcoef(g.phi_a, g.phi_b)[0, 1] for f, g in scores.groupby("formulation") if f in ids])
    assert f"Pairing correlation corr(phi_A, phi_B): {med:.2f} (median over the 36 formulations; " \
           f"the ECIR 2015 pairs: {ECIR2015_PAIRING_CORRELATION:.2f})" in res.output


def _crowd_answers(phi_a, phi_b, rng, workers=100):
    """SPEC 7.1's answer process with worker effects: s_w(phi) = expit(-3 + u_w + 6 phi),
    u_w ~ N(0, 0.5^2); undecided users state a preference with probability 0.3 (for the
    higher-phi list with 0.8); a lapse of 0.1 when exactly one list satisfies."""
    n = len(phi_a)
    u = rng.normal(0, 0.5, workers)[rng.integers(0, workers, n)]
    sat_a = rng.random(n) < expit(-3 + u + 6 * phi_a)
    sat_b = rng.random(n) < expit(-3 + u + 6 * phi_b)
    out = np.where(sat_a & sat_b, "both_good", "both_bad").astype(object)
    one = sat_a != sat_b
    out[one] = np.where(sat_a[one] != (rng.random(n)[one] < 0.1), "a_better", "b_better")
    states = ~one & (rng.random(n) < 0.3)
    higher_a = np.where(phi_a > phi_b, True, np.where(phi_a < phi_b, False, rng.random(n) < 0.5))
    pick_a = np.where(phi_a == phi_b, higher_a, (rng.random(n) < 0.8) == higher_a)
    out[states] = np.where(pick_a[states], "a_better", "b_better")
    return out


def test_per_list_b2_does_not_depend_on_the_design_where_the_papers_does(ecir_study):
    """The same simulated users (truth lin-const, worker effects) answer 4,115 times on the ECIR
    2015 pairs (pairing correlation -0.06) and on a generated design (about -0.77): the paper's
    b2 of lin-const moves by more than 0.1 (0.096 vs 0.325 in the audit of issue 20), the
    per-list b2_joint stays within 0.03, and both designs' b2_joint are within 0.03 of the true
    per-list b2 (s averaged over the workers, by quadrature)."""
    from satcal.analysis import calibrate
    from satcal.generate import generate, pairing_correlation
    from satcal.measures import score_lists, study_formulations
    forms = [f for f in study_formulations() if f.id in ("lin-const", "exp2-log2")]
    truth = [f.id for f in forms].index("lin-const")
    rng = np.random.default_rng(20)
    ex = generate(ecir_study.judgments, seed=3, min_per_cell=60).examples
    levels = lambda side: ex[[f"r{side}{i}" for i in range(1, 6)]].to_numpy(float)
    pick = np.resize(rng.permutation(len(ex)), len(ecir_study.answers))   # the same number of answers
    designs = {"ecir": (score_lists(ecir_study.levels("a"), forms, n_levels=3),
                        score_lists(ecir_study.levels("b"), forms, n_levels=3)),
               "generated": (score_lists(levels("a")[pick], forms, n_levels=3),
                             score_lists(levels("b")[pick], forms, n_levels=3))}
    b2, b2_joint = {}, {}
    for name, (pa, pb) in designs.items():
        answers = _crowd_answers(pa[:, truth], pb[:, truth], rng)
        r = calibrate(None, forms, phi_a=pa, phi_b=pb, answers=answers, sat_model="both", model_check_folds=0,
                      indicator_range="full", bootstrap=0, seed=0)   # b2 at phi = 0 and 1, as the truth below
        row = r.bias.set_index("formulation").loc["lin-const"]
        b2[name], b2_joint[name] = row["b2"], row["b2_joint"]
        if name == "generated":
            assert pairing_correlation(pa[:, truth], pb[:, truth]) < -0.5
    z, w = np.polynomial.hermite_e.hermegauss(40)
    s = lambda phi: np.sum(w * expit(-3 + 0.5 * z + 6 * phi)) / np.sum(w)
    true_b2 = (s(0.0) + 1 - s(1.0)) / 2
    assert abs(b2["generated"] - b2["ecir"]) > 0.1
    assert abs(b2_joint["generated"] - b2_joint["ecir"]) < 0.03
    assert abs(b2_joint["ecir"] - true_b2) < 0.03 and abs(b2_joint["generated"] - true_b2) < 0.03


def _default_crowd(seed, n, workers=20):
    """satcal's default simulated crowd (``UserModel()``: worker offsets, position bias) on
    random pairs of 2-decimal scores, a sixth of the answers replaced by random ones (spammers)."""
    from satcal.simulate import UserModel, honest_answers
    rng = np.random.default_rng(seed)
    pa, pb = np.round(rng.random(n), 2), np.round(rng.random(n), 2)
    model = UserModel(seed=seed)
    u = rng.normal(0, model.heterogeneity, workers)[rng.integers(0, workers, n)]
    shown = honest_answers(pa, pb, u, np.zeros(n, bool), model, rng)[0]
    spam = rng.random(n) < 1 / 6
    shown[spam] = rng.choice(CODES, spam.sum())
    return pa, pb, shown


@pytest.mark.parametrize("n, seed, missed", [(60, 9, 0.282), (120, 10, 1.278)])
def test_small_study_fit_is_the_highest_of_a_random_start_search(n, seed, missed, monkeypatch):
    """On a small study the fit is the highest maximum that 40 runs of scipy's own L-BFGS-B from
    seeded random points in the box reach (to 1e-3); the five deterministic starts alone, before
    the wide starts' other preference processes, ended ``missed`` below it on these draws
    (measured)."""
    from conftest import random_start_search
    from satcal.analysis.joint import BOUNDS, _negloglik_and_gradient
    pa, pb, answers = _default_crowd(seed, n)
    fit = fit_joint(pa, pb, answers)
    code, counts = np.array([CODES.index(a) for a in answers]), np.ones(n)
    search = random_start_search(_negloglik_and_gradient, (pa, pb, code, counts), BOUNDS, 100 + seed)
    assert fit.loglik >= search - 1e-3
    # the draw is still a hard case: without the wide starts the fit ends where it was measured
    import satcal.analysis.joint as joint
    monkeypatch.setattr(joint, "WIDE_START_ROWS", 0)
    narrow = fit_joint(pa, pb, answers)
    assert search - narrow.loglik == pytest.approx(missed, abs=2e-3)
    assert (fit.starts, narrow.starts) == (5 + len(joint.WIDE_PREFERENCES), 5)
