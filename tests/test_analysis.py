"""Calibration analysis against independent computations and the paper's findings."""
import numpy as np
import pandas as pd
import pytest
from scipy.optimize import minimize
from scipy.special import expit

from satcal.analysis import (GRID, anova_table, bias_indicators, binned_points, calibrate, design,
                             fit_logit, fit_logit_batch, preference_data, satisfaction_data)
from satcal.ingest import ANSWER_CODES
from satcal.report import write_analysis


def _simulated(rng, n=800, beta=(-1.2, 2.5, 0.8)):
    x = rng.uniform(0, 1, n)
    y = (rng.uniform(size=n) < expit(design(x) @ np.array(beta))).astype(float)
    return x, y


def test_fit_logit_equals_direct_likelihood_maximisation(rng):
    x, y = _simulated(rng)
    fit = fit_logit(x, y)
    X = design(x)
    nll = lambda b: -(y * (X @ b) - np.logaddexp(0, X @ b)).sum()
    direct = minimize(nll, np.zeros(3), method="BFGS", options={"gtol": 1e-9}).x
    np.testing.assert_allclose(fit.beta, direct, atol=1e-4)
    assert fit.converged and fit.n == 800 and fit.successes == int(y.sum())


def test_band_from_linear_predictor(rng):
    x, y = _simulated(rng)
    fit = fit_logit(x, y)
    lo, hi = fit.band([0.5])
    Xg = design(np.array([0.5]))
    se = np.sqrt(Xg @ fit.cov @ Xg.T)[0, 0]
    eta = (Xg @ fit.beta)[0]
    assert lo[0] == pytest.approx(expit(eta - 1.959963985 * se))
    assert hi[0] == pytest.approx(expit(eta + 1.959963985 * se))


def test_batched_newton_equals_statsmodels(rng):
    xs, ys = zip(*[_simulated(rng, 600, (rng.normal(), rng.normal(2), rng.normal())) for _ in range(6)])
    beta, ok = fit_logit_batch(np.stack([design(x) for x in xs]), np.stack(ys))
    assert ok.all()
    for b, x, y in zip(beta, xs, ys):
        np.testing.assert_allclose(b, fit_logit(x, y).beta, atol=1e-6)


def test_batched_weights_equal_replicated_rows(rng):
    x, y = _simulated(rng, 300)
    w = rng.integers(0, 3, size=300).astype(float)
    beta, _ = fit_logit_batch(design(x)[None], y[None], w[None])
    rep = np.repeat(np.arange(300), w.astype(int))
    np.testing.assert_allclose(beta[0], fit_logit(x[rep], y[rep]).beta, atol=1e-6)


def test_wilson_points_by_hand():
    x = np.array([0.05, 0.05, 0.05, 0.05, 0.31, 0.99])
    y = np.array([1, 0, 0, 1, 1, 0])
    pts = binned_points(x, y).set_index("bin")
    assert pts.loc[0, "n"] == 4 and pts.loc[0, "successes"] == 2 and pts.loc[0, "proportion"] == 0.5
    n, p, z = 4, 0.5, 1.959963985
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z / (1 + z * z / n) * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    assert pts.loc[0, "lo"] == pytest.approx(centre - half) and pts.loc[0, "hi"] == pytest.approx(centre + half)
    assert pts.loc[3, "n"] == 1 and pts.loc[9, "proportion"] == 0.0 and np.isnan(pts.loc[5, "proportion"])
    assert pts.loc[0, "x_mid"] == pytest.approx(0.05) and pts.loc[9, "x_mid"] == pytest.approx(0.95)


def test_bias_indicators_by_hand():
    ideal = bias_indicators(GRID.copy(), np.ones_like(GRID))
    assert ideal["b1"] == 0 and ideal["b2"] == 0 and ideal["b3"] == 0
    flat = bias_indicators(np.full_like(GRID, 0.5), np.full_like(GRID, 0.25))
    assert flat["b1"] == pytest.approx(np.mean([abs(i / 1000 - 0.5) for i in range(1001)]))
    assert flat["b2"] == pytest.approx(0.5) and flat["b3"] == pytest.approx(0.75)
    assert GRID.size == 1001 and GRID[1] == 0.001


def test_satisfaction_and_preference_rows():
    phi_a = np.array([[0.9], [0.2], [0.5], [0.4], [0.3]])
    phi_b = np.array([[0.1], [0.6], [0.5], [0.7], [0.3]])
    answers = ["a_better", "a_better", "b_better", "both_good", "both_bad"]
    x, y = satisfaction_data(phi_a, phi_b, answers)
    np.testing.assert_allclose(x[:, 0], [0.4, 0.3, 0.7, 0.3])
    np.testing.assert_array_equal(y, [1, 0, 1, 0])
    (xa, ya), = preference_data(phi_a, phi_b, answers, "all")
    np.testing.assert_allclose(xa, [0.8, 0.4, 0.0, 0.3, 0.0])
    np.testing.assert_array_equal(ya, [1, 0, 0, 0, 0])
    (xp, yp), = preference_data(phi_a, phi_b, answers, "preferences_only")
    np.testing.assert_allclose(xp, [0.8, 0.4])
    np.testing.assert_array_equal(yp, [1, 0])


def test_anova_equals_hand_sums_of_squares(rng):
    gains, discounts = ["g1", "g2", "g3"], ["d1", "d2", "d3", "d4"]
    bias = pd.DataFrame([(g, d) for d in discounts for g in gains], columns=["gain", "discount"])
    for b in ("b1", "b2", "b3"):
        bias[b] = rng.normal(size=len(bias)) + (bias.gain == "g2") * 2
    table = anova_table(bias)
    v = bias["b1"].to_numpy().reshape(4, 3)  # discounts x gains, balanced
    grand = v.mean()
    ss_gain = 4 * ((v.mean(axis=0) - grand) ** 2).sum()
    ss_disc = 3 * ((v.mean(axis=1) - grand) ** 2).sum()
    ss_tot = ((v - grand) ** 2).sum()
    t = table[table.indicator == "b1"].set_index("term")
    assert t.loc["gain", "sum_sq"] == pytest.approx(ss_gain) and t.loc["discount", "sum_sq"] == pytest.approx(ss_disc)
    assert t.loc["Residual", "df"] == 6 and t.loc["gain", "df"] == 2 and t.loc["discount", "df"] == 3
    assert t.loc["gain", "eta_sq"] == pytest.approx(ss_gain / ss_tot)
    # no replicates, no test: the OLS F (ss_gain / 2) / (ss_res / 6) would treat the estimates
    # as independent, which they are not (tests/test_effects.py)
    assert t[["F", "p", "wald"]].isna().all().all()


def test_ecir2015_reproduces_the_papers_findings(ecir_result):
    r = ecir_result
    assert r.meta["n_sat_lists"] == 4050 and r.meta["n_sat_examples"] == 2025  # paper, section 4
    assert r.fits.converged.all() and len(r.fits) == 72
    bias = r.bias.set_index("formulation")
    # "The Linear gain and Constant discount are the least biased overall."
    assert r.ranking.formulation.iloc[0] == "lin-const"
    assert bias.groupby("gain")[["b1", "b2", "b3"]].mean().idxmin().eq("lin").all()
    assert bias.groupby("discount")[["b1", "b2", "b3"]].mean().idxmin().eq("const").all()
    # "bias is proportional to the emphasis that gain functions give to highly relevant documents"
    by_gain = bias.groupby("gain")["b1"].mean()
    assert by_gain["lin"] < by_gain["exp2"] < by_gain["exp3"] < by_gain["exp5"]
    # "an ANOVA analysis shows significant differences among gain and discount functions": the
    # paper's F test is not valid here (shared answers); without replicates no p is given
    # (with them, see tests/test_effects.py and docs/benchmarks.md)
    a = r.anova[r.anova.term != "Residual"]
    assert a.p.isna().all() and len(a) == 6 and (a.note == "").all()  # the report says why, once
    assert set(r.anova.df) == {5, 25}
    # Bin(2) above the diagonal at mid phi, Bin(1) below (Fig. 1 discussion)
    c = r.curves[(r.curves.curve == "sat") & (r.curves.x == 0.5)].set_index("formulation")
    assert c.loc["bin2-log2", "p"] > 0.5 > c.loc["bin1-log2", "p"]
    # "unless dphi >~ 0.5 users just can not decide"
    p = r.curves[(r.curves.curve == "pref") & (r.curves.x == 0.3)]["p"]
    assert (p < 0.5).all()


def test_published_scores_give_the_same_bias(ecir_study, ecir_result):
    from satcal.datasets import load_ecir2015_crowd, published_scores
    crowd = load_ecir2015_crowd()
    r = calibrate(phi_a=published_scores(crowd, "A"), phi_b=published_scores(crowd, "B"),
                  answers=ecir_study.answers, model_check_folds=0, bootstrap=0, seed=0, sat_model="published")
    diff = (r.bias[["b1", "b2", "b3"]] - ecir_result.bias[["b1", "b2", "b3"]]).abs().to_numpy()
    assert diff.max() < 2e-3


def test_preferences_only_population_counts(ecir_result, ecir_study):
    r = calibrate(ecir_study, ["lin-const"], population="preferences_only", model_check_folds=0, bootstrap=0, seed=0, sat_model="published")
    n = r.fits.set_index("curve").loc["pref", "n"]
    phi = ecir_study.levels("a").sum(1) - ecir_study.levels("b").sum(1)
    expected = (np.isin(ecir_study.answers, ["a_better", "b_better"]) & (phi != 0)).sum()
    assert n == expected and n <= 2090


def test_model_check_compares_three_models(ecir_result):
    mc = ecir_result.model_check
    assert set(mc.model) == {"quadratic_logit", "linear_logit", "isotonic"}
    assert len(mc) == 72 * 3 and (mc.brier > 0).all() and (mc.brier < 0.25 + 1e-9).all()


def test_outputs_on_disk(ecir_result, tmp_path):
    write_analysis(ecir_result, tmp_path)
    for name in ("bias", "anova", "fits", "curves", "points"):
        assert (tmp_path / f"{name}.csv").exists()
    for fig in ("fig1_sat", "fig2_pref", "fig3_bias"):
        assert (tmp_path / "figures" / f"{fig}.png").read_bytes()[:4] == b"\x89PNG"
        assert (tmp_path / "figures" / f"{fig}.pdf").read_bytes()[:4] == b"%PDF"
    bias = pd.read_csv(tmp_path / "bias.csv")
    assert list(bias.columns[:6]) == ["formulation", "gain", "discount", "b1", "b2", "b3"]
    anova = pd.read_csv(tmp_path / "anova.csv")
    assert list(anova.columns) == ["indicator", "term", "df", "sum_sq", "mean_sq", "F", "p", "eta_sq",
                                   "eta_sq_lo", "eta_sq_hi", "wald", "test", "note"]
    html = (tmp_path / "report.html").read_text()
    assert "CC BY-SA 4.0" in html and "lin-const" in html and "Reading guide" in html
    # Same inputs, same bytes.
    again = tmp_path / "again"
    write_analysis(ecir_result, again)
    for rel in ("bias.csv", "figures/fig1_sat.png", "figures/fig1_sat.pdf", "report.html"):
        assert (tmp_path / rel).read_bytes() == (again / rel).read_bytes(), rel


def test_evaluate_never_maps_through_a_decreasing_curve(ecir_study, tmp_path):
    """AP@5 with large pools bunches the lists near 0 and its quadratic fit turns down: fits.csv
    flags it and the loaded calibration maps scores through the isotonic fit instead."""
    from satcal.analysis.evaluate import load_calibrations
    result = calibrate(ecir_study, ["lin-const", "ap"], model_check_folds=0, bootstrap=0, seed=0, sat_model="published")
    fits = result.fits.set_index(["formulation", "curve"])
    p = result.curves.query("formulation == 'ap' and curve == 'sat'")["p"].to_numpy()
    assert fits.loc[("ap", "sat"), "monotone"] == bool(np.all(np.diff(p) >= -1e-12)) == False  # noqa: E712
    write_analysis(result, tmp_path, figures=False, report=False)
    ap, = load_calibrations(tmp_path, ["ap"])
    grid = np.linspace(0, 1, 501)
    assert np.all(np.diff(ap.p_sat(grid)) >= 0)
    iso = result.curves.query("formulation == 'ap' and curve == 'sat'")["p_isotonic"].to_numpy()
    np.testing.assert_allclose(ap.p_sat(GRID), np.maximum.accumulate(iso))
    lin, = load_calibrations(tmp_path, ["lin-const"])
    if fits.loc[("lin-const", "sat"), "monotone"]:
        np.testing.assert_allclose(lin.p_sat(GRID), result.curves.query(
            "formulation == 'lin-const' and curve == 'sat'")["p"].to_numpy(), atol=1e-9)


def test_holm_adjusted_pairwise_p_values(ecir_study):
    """p_normal by hand from the replicates (full-sample difference over the bootstrap standard
    error, the replicates' normalised interquartile range); p_holm by hand: sorted p_normal, (m - i + 1) p_(i), running maximum, cap at 1."""
    from scipy.stats import norm
    result = calibrate(ecir_study, ["lin-const", "exp2-log2", "bin2-zipf", "lin-zipf"],
                       model_check_folds=0, bootstrap=40, seed=3, sat_model="published")
    boot = result.bootstrap
    pairs = boot.pairwise
    ids = boot.formulations
    bias = result.bias.set_index("formulation")
    for row in pairs.itertuples():
        i, j, k = ids.index(row.formulation_1), ids.index(row.formulation_2), int(row.indicator[1]) - 1
        d = boot.indicators[:, i, k] - boot.indicators[:, j, k]
        diff = bias.loc[row.formulation_1, row.indicator] - bias.loc[row.formulation_2, row.indicator]
        assert row.diff == pytest.approx(diff, abs=1e-9)  # row 0 of the batched fits vs statsmodels
        q25, q75 = np.percentile(d, [25, 75])       # the bootstrap SE is the normalised IQR
        assert row.p_normal == pytest.approx(2 * (1 - norm.cdf(abs(row.diff) / ((q75 - q25) / (2 * norm.ppf(0.75))))),
                                             abs=1e-12)
        assert row.p == pytest.approx(min(1, 2 * min(np.mean(d <= 0), np.mean(d >= 0))))
    for _, g in pairs.groupby("indicator"):
        p = g["p_normal"].to_numpy()
        order = np.argsort(p, kind="stable")
        m = p.size
        adjusted = np.empty(m)
        adjusted[order] = np.minimum(1, np.maximum.accumulate((m - np.arange(m)) * p[order]))
        np.testing.assert_allclose(g["p_holm"].to_numpy(), adjusted)


def test_figures_leave_the_users_backend_alone(ecir_result, tmp_path):
    """Figures are built as matplotlib Figure objects: no backend switch, nothing left in pyplot."""
    code = ("import matplotlib; matplotlib.use('svg'); import matplotlib.pyplot as plt; "
            "import satcal; from satcal.report import figure_sat, figure_bias; "
            "r = satcal.calibrate(satcal.load_ecir2015(), ['lin-const', 'exp2-log2', 'lin-zipf', 'exp2-zipf'], "
            "model_check_folds=0, bootstrap=0, seed=0, sat_model='published'); f = figure_sat(r); figure_bias(r); "
            "print(matplotlib.get_backend(), len(plt.get_fignums()), type(f).__name__)")
    import subprocess
    import sys
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["svg", "0", "Figure"]


def test_notebook_representations(ecir_result, ecir_study):
    assert "\n" not in repr(ecir_study) and "4115 answers" in repr(ecir_study)
    text = repr(ecir_result)
    assert "\n" not in text and "36 formulations" in text and len(text) < 200
    best = ecir_result.bias.sort_values("b1").iloc[0]["formulation"]
    summary = ecir_result.summary(top=3).splitlines()
    assert summary[0] == text and len([l for l in summary if l.strip().startswith(best)]) <= 1
    first = next(i for i, line in enumerate(summary) if line.startswith("Ranked by bias")) + 2
    assert ecir_result.ranking.iloc[0]["formulation"] in summary[first]
    assert summary[-1] == ecir_result.verdict.sentence()
    assert ecir_result._repr_html_().count("<td>lin-const</td>") == 1 and ecir_result._repr_html_().count("</tr>") == 11


def test_notebook_view_says_when_answers_are_simulated(ecir_result):
    """A result on answers from satcal's simulated crowd says so in its repr, the first line
    of its summary and its notebook view (as the report's banner does); real answers say
    nothing; a mix gives the simulated share."""
    import copy
    assert "SIMULATED" not in repr(ecir_result) and "SIMULATED" not in ecir_result._repr_html_()
    sim = copy.copy(ecir_result)
    sim.meta = {**ecir_result.meta, "provenance": {**ecir_result.meta["provenance"], "simulated": True,
                                                   "simulated_share": 1.0}}
    assert "4115 SIMULATED answers" in repr(sim) and "4115 SIMULATED answers" in sim._repr_html_()
    assert sim.summary().splitlines()[0] == repr(sim)
    sim.meta["provenance"]["simulated_share"] = 0.25
    assert "4115 (25% SIMULATED) answers" in repr(sim)
    sim.meta["provenance"]["simulated_share"] = 0.999  # 4111 of 4115 simulated is not all of them
    assert "4115 (99.9% SIMULATED) answers" in repr(sim)


def test_figures_draw_into_a_callers_axes(ecir_result):
    """ax= takes a notebook's own axes (one per panel); discounts= picks the panels; too few
    axes is a clear error."""
    from matplotlib.figure import Figure
    from satcal.report import figure_bias, figure_pref, figure_sat
    fig = Figure()
    ax = fig.subplots()
    assert figure_sat(ecir_result, ax=ax, discounts=["log2"]) is fig
    gains = ecir_result.bias.loc[ecir_result.bias["discount"] == "log2", "gain"]
    assert ax.get_title() == "discount: log2" and ax.get_xlabel() == "phi"
    assert sorted(t.get_text() for t in ax.get_legend().get_texts()) == sorted(["P = x (ideal)", *gains])
    axes = Figure().subplots(2, 3)
    figure_bias(ecir_result, ax=axes)
    assert [a.get_title() for a in axes.ravel()] == [f"{i} by {f}" for f in ("gain", "discount")
                                                     for i in ("b1", "b2", "b3")]
    with pytest.raises(ValueError, match="6 panels"):
        figure_pref(ecir_result, ax=Figure().subplots(1, 2))


def test_api_defaults_are_the_clis():
    """calibrate()'s bootstrap, seed and sat_model defaults are satcal analyze's (README: the API
    does what the CLI does), and DEFAULTS names them."""
    import inspect
    from satcal.analysis.calibration import DEFAULTS
    from satcal.cli import main
    api = inspect.signature(calibrate).parameters
    cli = {p.name: p.default for p in main.commands["analyze"].params}
    assert DEFAULTS == {"bootstrap": 1000, "seed": 2015, "sat_model": "both"}
    for name, value in DEFAULTS.items():
        assert api[name].default == value == cli[name], name


def test_answer_counts_from_the_types_equal_counting_every_answer(ecir_result, ecir_study):
    """meta's answer counts and number of answers, taken from the collapsed types' counts,
    against counting the study's answers one by one."""
    from collections import Counter
    counted = Counter(ecir_study.answers.tolist())
    assert ecir_result.meta["answer_counts"] == {c: counted.get(c, 0) for c in ANSWER_CODES}
    assert ecir_result.meta["n_examples"] == len(ecir_study.answers)
