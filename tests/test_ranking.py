"""Ranking with its uncertainty, support of the curves, and the warnings of thin studies."""
import numpy as np
import pandas as pd
import pytest
from scipy.special import expit

from satcal.analysis import calibrate
from satcal.analysis.core import GRID, bias_indicators, supported_range
from satcal.analysis.ranking import rank_formulations, rank_uncertainty, ranking_verdict


def test_indicators_over_the_whole_range_are_the_papers():
    rng = np.random.default_rng(0)
    p_sat, p_pref = rng.random((4, GRID.size)), rng.random((4, GRID.size))
    full = bias_indicators(p_sat, p_pref)
    ranged = bias_indicators(p_sat, p_pref, sat_range=np.tile([0.0, 1.0], (4, 1)),
                             pref_range=np.tile([0.0, 1.0], (4, 1)))
    for k in ("b1", "b2", "b3"):
        np.testing.assert_allclose(ranged[k], full[k], rtol=0, atol=1e-15)


def test_indicators_over_a_supported_range_by_hand():
    x = GRID
    p_sat = expit(-2 + 5 * x)[None]
    p_pref = expit(1 + 2 * x)[None]
    got = bias_indicators(p_sat, p_pref, sat_range=np.array([[0.2, 0.6]]), pref_range=np.array([[0.0, 0.3]]))
    inside = [i for i, v in enumerate(x) if 0.2 - 1e-9 <= v <= 0.6 + 1e-9]
    b1 = sum(abs(x[i] - p_sat[0, i]) for i in inside) / len(inside)
    i_lo, i_hi = inside[0], inside[-1]
    b2 = ((p_sat[0, i_lo] - 0.2) + (0.6 - p_sat[0, i_hi])) / 2
    inside_p = [i for i, v in enumerate(x) if v <= 0.3 + 1e-9]
    b3 = sum(1 - p_pref[0, i] for i in inside_p) / len(inside_p)
    assert got["b1"][0] == pytest.approx(b1, abs=1e-12)
    assert got["b2"][0] == pytest.approx(b2, abs=1e-12)
    assert got["b3"][0] == pytest.approx(b3, abs=1e-12)
    assert len(inside) == 401 and x[i_lo] == 0.2 and x[i_hi] == 0.6


def test_supported_range_is_the_hull_of_bins_with_enough_data():
    # bins 0.1-0.2: 6 lists, 0.3-0.4: 2 lists (too few), 0.5-0.6: 5 lists -> [0.1, 0.6]
    x = np.r_[np.full(6, 0.15), np.full(2, 0.35), np.full(5, 0.55), [0.95]]
    assert supported_range(x) == (0.1, 0.6)
    assert np.isnan(supported_range(x, min_count=7)).all()
    # weights count as observations
    assert supported_range([0.95], weights=[5]) == (0.9, 1.0)


def _rank_by_loop(reps):
    """Independent computation: pandas ranks replicate by replicate."""
    B, F, m = reps.shape
    ranks = np.empty((B, F))
    for b in range(B):
        frame = pd.DataFrame(reps[b])
        mean_rank = frame.rank(method="min").mean(axis=1)
        ranks[b] = mean_rank.rank(method="min").to_numpy()
    return ranks


def test_rank_uncertainty_against_a_replicate_loop():
    rng = np.random.default_rng(3)
    reps = rng.normal(np.linspace(0, 1, 7)[None, :, None], 0.4, size=(300, 7, 3))
    got = rank_uncertainty(reps, list("abcdefg"))
    ranks = _rank_by_loop(reps)
    first = ranks == 1
    share = (first / first.sum(1, keepdims=True)).mean(0)
    np.testing.assert_allclose(got["p_best"], share, atol=1e-12)
    assert got["p_best"].sum() == pytest.approx(1.0)
    for j in range(7):
        r = np.sort(ranks[:, j])
        assert got["rank_lo"][j] == int(np.percentile(r, 2.5, method="lower"))
        assert got["rank_hi"][j] == int(np.percentile(r, 97.5, method="higher"))


def test_replicates_with_failed_fits_are_left_out():
    reps = np.random.default_rng(1).random((50, 4, 3))
    reps[:5, 2, 1] = np.nan
    assert rank_uncertainty(reps, list("abcd"))["replicates_used"].iloc[0] == 45


def _bias(values):
    return pd.DataFrame({"formulation": list("abc"), "gain": list("abc"), "discount": "x",
                         "b1": values, "b2": values, "b3": values})


def test_verdict_crowns_only_a_formulation_set_apart():
    bias = _bias([0.1, 0.2, 0.3])
    ranking = rank_formulations(bias, "paper")
    rng = np.random.default_rng(0)
    apart = rng.normal(np.array([0.1, 0.2, 0.3])[None, :, None], 0.01, size=(400, 3, 3))
    v = ranking_verdict(ranking, rank_uncertainty(apart, list("abc")))
    assert v.settled and v.top == "a" and v.contenders == ("a",)
    assert "is the least biased" in v.sentence()
    close = rng.normal(np.array([0.1, 0.2, 0.3])[None, :, None], 0.2, size=(400, 3, 3))
    v = ranking_verdict(ranking, rank_uncertainty(close, list("abc")))
    assert not v.settled and len(v.contenders) > 1 and "cannot tell apart" in v.sentence()
    assert "a is the least biased" not in v.sentence()
    v = ranking_verdict(ranking, rank_uncertainty(apart, list("abc")), thin=True)
    assert not v.settled and "too thin" in v.sentence()
    v = ranking_verdict(ranking, None)
    assert not v.settled and "not bootstrapped" in v.sentence()


def test_verdict_never_rounds_a_share_to_every_replicate():
    """a first in 996 of 1,000 replicates (b in the other 4) is settled, and the sentence says
    99.6%, not 100%: counted by hand from the replicates."""
    from satcal.analysis.ranking import share_text
    ranking = rank_formulations(_bias([0.1, 0.2, 0.3]), "paper")
    reps = np.tile(np.array([0.1, 0.2, 0.3])[None, :, None], (1000, 1, 3))
    reps[:4, 0, :] = 0.25  # a second, behind b, in 4 replicates
    v = ranking_verdict(ranking, rank_uncertainty(reps, list("abc")))
    assert v.settled and v.p_best["a"] == pytest.approx(996 / 1000)
    assert "first in 99.6% of the bootstrap replicates" in v.sentence() and "100%" not in v.sentence()
    assert share_text(0.996, 2, percent=False) == "0.996" and share_text(1.0, 2, percent=False) == "1.00"
    assert share_text(0.0004) == "0.04%" and share_text(0.0) == "0%"


def test_share_text_never_says_every_or_none_of_a_share_that_is_neither():
    """hand-worked: 0.9996 at 0 decimals is 99.96%, 1e-15 is below the 12th decimal and is
    written as a bound (not 0.000000000000%), 0 and 1 are 0% and 100%; a share outside [0, 1]
    is refused rather than printed as '-0%' or '120%'."""
    from satcal.analysis.ranking import share_text
    assert share_text(0.9996) == "99.96%" and share_text(0.0) == "0%" and share_text(1.0) == "100%"
    assert share_text(1e-15) == "<0.000000000001%" and share_text(1 - 1e-15) == ">99.999999999999%"
    assert share_text(1e-15, 2, percent=False) == "<0.000000000001"
    for bad in (-1e-5, 1.2):
        with pytest.raises(ValueError, match="a share is in \\[0, 1\\]"):
            share_text(bad)


def _thin_partial_study(n=300, seed=5):
    """Three formulations whose scores never pass 0.55, answered by a per-list user model."""
    rng = np.random.default_rng(seed)
    phi_a = rng.uniform(0, 0.55, (n, 3)) * np.array([1.0, 0.9, 0.8])
    phi_b = rng.uniform(0, 0.55, (n, 3)) * np.array([1.0, 0.9, 0.8])
    sa = rng.random(n) < expit(-2 + 6 * phi_a[:, 0])
    sb = rng.random(n) < expit(-2 + 6 * phi_b[:, 0])
    answers = np.select([sa & sb, ~sa & ~sb, sa], ["both_good", "both_bad", "a_better"], "b_better")
    return phi_a, phi_b, answers


def test_a_thin_partly_unreachable_study_says_so_and_crowns_nobody():
    phi_a, phi_b, answers = _thin_partial_study()
    r = calibrate(phi_a=phi_a, phi_b=phi_b, answers=answers,
                  formulations=["lin-const", "lin-log2", "exp2-log2"], bootstrap=40, seed=2,
                  model_check_folds=0, sat_model="published")
    warnings = " ".join(r.meta["warnings"])
    assert "Only 300 answers" in warnings
    assert "do not reach all of [0, 1]" in warnings
    assert not r.verdict.settled
    assert f"{r.verdict.top} is the least biased" not in r.verdict.sentence()
    # curves are marked unsupported beyond the data, and b1 is computed where they are supported
    c = r.curves[(r.curves.formulation == "lin-const") & (r.curves.curve == "sat")]
    lo, hi = r.meta["provenance"]["support"]["ranges"]["lin-const"]["sat"]
    assert hi <= 0.6 and not c[c.x > hi + 1e-9].supported.any() and c[(c.x >= lo) & (c.x <= hi)].supported.all()
    inside = c[c.supported]
    assert r.bias.set_index("formulation").loc["lin-const", "b1"] == pytest.approx(
        np.mean(np.abs(inside.x - inside.p)), abs=1e-12)
    full = calibrate(phi_a=phi_a, phi_b=phi_b, answers=answers, formulations=["lin-const", "lin-log2", "exp2-log2"],
                     model_check_folds=0, indicator_range="full", bootstrap=0, seed=0, sat_model="published")
    assert full.bias.b1.iloc[0] == pytest.approx(np.mean(np.abs(c.x - c.p)), abs=1e-12)
    assert full.meta["provenance"]["indicator_range"] == "full"


def test_the_papers_estimator_on_an_unlike_design_is_flagged(ecir_result):
    """A design pairing lists with a strong negative correlation gets the warning; the ECIR 2015
    pairs themselves do not."""
    assert ecir_result.meta["design_warnings"] == []
    rng = np.random.default_rng(8)
    phi_a = rng.random((800, 1))
    phi_b = np.clip(1 - phi_a + rng.normal(0, 0.05, phi_a.shape), 0, 1)
    sa, sb = rng.random(800) < expit(-3 + 6 * phi_a[:, 0]), rng.random(800) < expit(-3 + 6 * phi_b[:, 0])
    answers = np.select([sa & sb, ~sa & ~sb, sa], ["both_good", "both_bad", "a_better"], "b_better")
    r = calibrate(phi_a=phi_a, phi_b=phi_b, answers=answers, formulations=["lin-const"], model_check_folds=0, bootstrap=0, seed=0, sat_model="published")
    r_hand = np.corrcoef(phi_a[:, 0], phi_b[:, 0])[0, 1]
    assert r.meta["provenance"]["pairing_correlation"]["median"] == pytest.approx(r_hand, abs=1e-4)
    assert len(r.meta["design_warnings"]) == 1 and f"{r_hand:+.2f}" in r.meta["design_warnings"][0]
    # the warning names the estimator the ranking leads with: the standardised one when there is
    # a reference population, the per-list one without
    for reference, lead in ((None, "the ranking leads with the per-list estimator"),
                            (np.c_[rng.random(400)], "the ranking leads with the standardised per-list estimator")):
        r = calibrate(phi_a=phi_a, phi_b=phi_b, answers=answers, formulations=["lin-const"], model_check_folds=0,
                      bootstrap=0, seed=0, sat_model="both", reference=reference)
        assert r.estimator == ("standardised" if reference is not None else "per_list")
        assert lead in r.meta["design_warnings"][0]


def test_pairwise_differences_of_the_per_list_indicators(ecir_study):
    """The joint model's indicators are paired like the paper's: the full-sample difference from
    bias.csv, p_normal by hand from the joint replicates."""
    from scipy.stats import norm
    r = calibrate(ecir_study, ["lin-const", "lin-log5", "bin2-zipf"], model_check_folds=0, bootstrap=20,
                  seed=4, sat_model="both")
    pairs = r.bootstrap.pairwise
    joint = pairs[pairs.indicator.str.endswith("_joint")]
    assert set(joint.indicator) == {"b1_joint", "b2_joint", "b3_joint"} and len(joint) == 9
    bias = r.bias.set_index("formulation")
    ids = r.bootstrap.formulations
    for row in joint.itertuples():
        i, j = ids.index(row.formulation_1), ids.index(row.formulation_2)
        k = int(row.indicator[1]) - 1
        d = r.bootstrap.joint["indicators"][:, i, k] - r.bootstrap.joint["indicators"][:, j, k]
        assert row.diff == pytest.approx(bias.loc[row.formulation_1, row.indicator]
                                         - bias.loc[row.formulation_2, row.indicator], abs=1e-9)
        se = np.subtract(*np.percentile(d, [75, 25])) / (2 * norm.ppf(0.75))   # the normalised IQR
        assert row.p_normal == pytest.approx(2 * norm.sf(abs(row.diff) / se), abs=1e-12)


def test_the_report_of_a_thin_partial_study_warns_and_crowns_nobody(tmp_path):
    from satcal.report import write_analysis
    phi_a, phi_b, answers = _thin_partial_study()
    r = calibrate(phi_a=phi_a, phi_b=phi_b, answers=answers, formulations=["lin-const", "lin-log2", "exp2-log2"],
                  bootstrap=20, seed=2, model_check_folds=0, sat_model="both")
    write_analysis(r, tmp_path, figures=True, report=True)
    html = (tmp_path / "report.html").read_text()
    assert "Thin or partial data" in html and "Only 300 answers" in html
    assert f"{r.verdict.top} is the least biased" not in html
    import json
    record = json.loads((tmp_path / "calibration.json").read_text())
    assert record["indicator_range"] == "data" and record["warnings"] == r.meta["warnings"]
    assert record["support"]["ranges"]["lin-const"]["sat_joint"][1] <= 0.6


def test_p_sat_reads_the_lead_curve_of_fits(ecir_study):
    """With judgments the standardised estimator leads: p_sat's default is its s*_f of
    fits.csv, the ranking's order is the mean rank over b1_std-b3_std (recomputed here with
    pandas) and the summary names its indicators."""
    r = calibrate(ecir_study, ["lin-const", "exp2-log2", "lin-log5"], model_check_folds=0, sat_model="both",
                  bootstrap=0, seed=0)
    fits = r.fits.set_index(["formulation", "curve", "sat_model"])
    for model in ("standardised", "joint", "published"):
        b = fits.loc[("exp2-log2", "sat", model), ["beta0", "beta1", "beta2"]].to_numpy(float)
        x = np.array([0.0, 0.3, 1.0])
        tau = float(fits.loc[("exp2-log2", "sat", model)].get("joint_tau", np.nan))
        if model == "joint" and tau > 0:
            # the shared-effect model's curve averages over v ~ N(0, tau^2): integrated by quad
            from scipy.integrate import quad
            from scipy.stats import norm
            want = [quad(lambda v: expit(b[0] + v + b[1] * xi + b[2] * xi ** 2) * norm.pdf(v, 0, tau),
                         -12 * tau, 12 * tau, epsabs=1e-12)[0] for xi in x]
            np.testing.assert_allclose(r.p_sat("exp2-log2", x, model), want, rtol=1e-5)
        else:
            np.testing.assert_allclose(r.p_sat("exp2-log2", x, model), expit(b[0] + b[1] * x + b[2] * x ** 2),
                                       rtol=1e-12)
    assert r.estimator == "standardised"
    np.testing.assert_allclose(r.p_sat("exp2-log2", 0.3), r.p_sat("exp2-log2", 0.3, "standardised"))
    with pytest.raises(Exception, match="no standardised satisfaction curve for 'nope'"):
        r.p_sat("nope", 0.5)
    ranks = r.bias.set_index("formulation")[["b1_std", "b2_std", "b3_std"]].rank(method="min").mean(axis=1)
    table = r.ranking.set_index("formulation")
    assert table["mean_rank"].is_monotonic_increasing
    assert table["mean_rank"].to_dict() == pytest.approx(ranks.to_dict())
    joint = r.bias.set_index("formulation")[["b1_joint", "b2_joint", "b3_joint"]].rank(method="min").mean(axis=1)
    assert table["mean_rank_per_list"].to_dict() == pytest.approx(joint.to_dict())
    text = r.summary()
    assert r.verdict.sentence() in text and "b1_std" in text
    # without judgments (no reference population) the per-list estimator leads, as before
    published = calibrate(phi_a=r.meta["standardisation"]["reference_phi"][0:400:2],
                          phi_b=r.meta["standardisation"]["reference_phi"][1:400:2],
                          answers=np.resize(["both_good", "a_better", "both_bad", "b_better"], 200),
                          formulations=["lin-const", "exp2-log2", "lin-log5"], model_check_folds=0,
                          bootstrap=0, seed=0)
    assert published.estimator == "per_list" and "b1_std" not in published.bias.columns


def test_an_indicator_without_data_ranks_last():
    """A formulation whose curve has no bin with enough data has NaN indicators: it ranks last
    instead of breaking the ranking."""
    bias = _bias([0.2, np.nan, 0.1])
    r = rank_formulations(bias, "paper")
    assert list(r.formulation) == ["c", "a", "b"] and r.rank_b1.tolist() == [1, 2, 3]


def test_an_indicator_missing_from_every_replicate_ranks_last():
    reps = np.random.default_rng(2).normal(np.array([0.1, 0.5, 0.9])[None, :, None], 0.01, size=(100, 3, 3))
    reps[:, 0, 2] = np.nan          # no data for the best formulation's third indicator
    reps[:3, 1, 0] = np.nan          # three failed fits
    u = rank_uncertainty(reps, list("abc"))
    assert u["replicates_used"].iloc[0] == 97
    # by hand: a's third indicator ranks 3rd (missing), b's 1st: mean ranks a (1+1+3)/3 = b (2+2+1)/3
    # < c 8/3, so a and b tie for first in every replicate and share it
    u = u.set_index("formulation")
    assert u.loc["a", "p_best"] == pytest.approx(0.5) and u.loc["b", "p_best"] == pytest.approx(0.5)
    assert u.loc["c", "rank_lo"] == 3


def test_analysis_tables_are_spreadsheet_safe(ecir_result, tmp_path):
    """A cell that a spreadsheet would run as a formula is written behind an apostrophe in every
    analysis table (numbers, negative ones included, are left alone)."""
    import copy
    from satcal.report import write_analysis
    r = copy.copy(ecir_result)
    r.bias = ecir_result.bias.assign(formulation=["=HYPERLINK(1)"] + list(ecir_result.bias.formulation[1:]))
    write_analysis(r, tmp_path, figures=False, report=False)
    bias = pd.read_csv(tmp_path / "bias.csv", dtype=str)
    assert bias.formulation.iloc[0] == "'=HYPERLINK(1)" and bias.formulation.iloc[1] == ecir_result.bias.formulation.iloc[1]
    anova = pd.read_csv(tmp_path / "anova.csv")
    assert anova.select_dtypes("number").shape[1] > 3
