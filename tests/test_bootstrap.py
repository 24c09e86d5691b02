"""Bootstrap: batched fits equal statsmodels, backends agree, intervals cover the truth."""
import numpy as np
import pytest
from scipy.special import expit

from satcal.analysis import calibrate, design, fit_logit_batch, fit_logit_replicates
from satcal.analysis.bootstrap import bootstrap_calibration, replicate_weights
from satcal.measures import formulation
from satcal.report import write_analysis


def test_replicate_fits_equal_statsmodels(rng):
    import statsmodels.api as sm
    x = rng.uniform(0, 1, 500)
    y = (rng.uniform(size=500) < expit(-1 + 3 * x - x * x)).astype(float)
    W = replicate_weights(500, 5, seed=3)
    beta, ok = fit_logit_replicates(design(x), y, W)
    assert ok.all()
    for b, w in zip(beta, W):
        ref = sm.GLM(y, design(x), family=sm.families.Binomial(), freq_weights=w).fit().params
        np.testing.assert_allclose(b, ref, atol=1e-6)


def test_replicate_weights_are_independent_streams():
    a = replicate_weights(100, 10, seed=1)
    b = replicate_weights(100, 4, seed=1)
    np.testing.assert_array_equal(a[:4], b)           # replicate b does not depend on B
    assert (a.sum(1) == 100).all() and not np.array_equal(a[0], a[1])


def _synthetic(rng, n=600):
    pa, pb = rng.uniform(0, 1, n), rng.uniform(0, 1, n)
    sa = rng.uniform(size=n) < expit(-3 + 6 * pa)
    sb = rng.uniform(size=n) < expit(-3 + 6 * pb)
    answers = np.select([sa & sb, ~sa & ~sb, sa], ["both_good", "both_bad", "a_better"], "b_better")
    return pa[:, None], pb[:, None], answers


@pytest.fixture(scope="module")
def small_boot():
    rng = np.random.default_rng(5)
    pa, pb, answers = _synthetic(rng)
    forms = [formulation("lin-const")]
    return pa, pb, answers, forms


def test_backends_give_identical_numbers(small_boot):
    pa, pb, answers, forms = small_boot
    one = bootstrap_calibration(pa, pb, answers, forms, replicates=50, seed=9, n_jobs=1)
    two = bootstrap_calibration(pa, pb, answers, forms, replicates=50, seed=9, n_jobs=2)
    # identical up to the last bits BLAS may order differently with another thread count
    np.testing.assert_allclose(one.indicators, two.indicators, rtol=1e-12, atol=1e-15)


def test_dask_local_cluster_gives_identical_numbers(small_boot):
    distributed = pytest.importorskip("dask.distributed")
    pa, pb, answers, forms = small_boot
    local = bootstrap_calibration(pa, pb, answers, forms, replicates=30, seed=4)
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=False,
                                  dashboard_address=None) as cluster:
        remote = bootstrap_calibration(pa, pb, answers, forms, replicates=30, seed=4,
                                       backend=f"dask:{cluster.scheduler_address}")
    np.testing.assert_allclose(local.indicators, remote.indicators, rtol=1e-12, atol=1e-15)


def _b1_estimand(pa, pb):
    """b1 of the curve the analysis converges to for this design (expected-data fit)."""
    from satcal.analysis import GRID
    p_a, p_b = expit(-3 + 6 * pa[:, 0]), expit(-3 + 6 * pb[:, 0])
    agree = p_a * p_b + (1 - p_a) * (1 - p_b)
    share = p_a * p_b / agree
    x = np.concatenate([pa[:, 0], pb[:, 0]])
    beta, _ = fit_logit_batch(design(x)[None], np.concatenate([share, share])[None],
                              np.concatenate([agree, agree])[None])
    return float(np.mean(np.abs(GRID - expit(design(GRID) @ beta[0]))))


def test_intervals_cover_the_truth_at_about_the_nominal_rate():
    rng = np.random.default_rng(2024)
    n, sims = 500, 60
    pa, pb = rng.uniform(0, 1, (n, 1)), rng.uniform(0, 1, (n, 1))
    truth = _b1_estimand(pa, pb)
    forms = [formulation("lin-const")]
    hits = 0
    for s in range(sims):
        sa = rng.uniform(size=n) < expit(-3 + 6 * pa[:, 0])
        sb = rng.uniform(size=n) < expit(-3 + 6 * pb[:, 0])
        answers = np.select([sa & sb, ~sa & ~sb, sa], ["both_good", "both_bad", "a_better"], "b_better")
        boot = bootstrap_calibration(pa, pb, answers, forms, replicates=200, seed=s)
        iv = boot.bias_intervals.iloc[0]
        hits += iv["b1_lo"] <= truth <= iv["b1_hi"]
    assert 0.85 <= hits / sims <= 1.0  # plain percentile intervals gave 0.75 here


def test_bootstrap_in_tables_and_report(ecir_study, tmp_path):
    r = calibrate(ecir_study, ["lin-const", "exp2-log2", "bin2-zipf"], bootstrap=40, seed=1, model_check_folds=0, sat_model="published")
    for c in ("b1_lo", "b1_hi", "b2_lo", "b2_hi", "b3_lo", "b3_hi"):
        assert c in r.bias.columns
    assert (r.bias.b1_lo <= r.bias.b1).all() and (r.bias.b1 <= r.bias.b1_hi).all()
    pairs = r.bootstrap.pairwise
    assert len(pairs) == 3 * 3 and set(pairs.indicator) == {"b1", "b2", "b3"}
    row = pairs[(pairs.indicator == "b1") & (pairs.formulation_1 == "lin-const")
                & (pairs.formulation_2 == "bin2-zipf")].iloc[0]
    bias = r.bias.set_index("formulation")
    assert row["diff"] == pytest.approx(bias.loc["lin-const", "b1"] - bias.loc["bin2-zipf", "b1"], abs=0.01)
    assert row["hi"] < 0 and row["p"] < 0.05    # the paper's best is clearly less biased
    assert {"boot_lo", "boot_hi"} <= set(r.curves.columns) and {"boot_lo", "boot_hi"} <= set(r.points.columns)
    write_analysis(r, tmp_path)
    assert (tmp_path / "bias_pairs.csv").exists() and (tmp_path / "figures" / "fig4_intervals.png").exists()
    assert "Pairwise differences" in (tmp_path / "report.html").read_text()


def _pairwise_one_pair_at_a_time(boot):
    """BootstrapResult.pairwise as first written (b2d84f8): a Python loop over the pairs, each
    pair's finite differences on their own, Holm by statsmodels; the standard error the
    differences' normalised interquartile range (q75 - q25) / (2 Phi^-1(0.75))."""
    import pandas as pd
    from itertools import combinations
    from scipy.stats import norm
    from statsmodels.stats.multitest import multipletests
    rows, ids = [], boot.formulations
    sets = [(name, boot.indicators[:, :, k], boot.estimates[:, k]) for k, name in enumerate(("b1", "b2", "b3"))]
    for name, vals, est in sets:
        for i, j in combinations(range(len(ids)), 2):
            d = vals[:, i] - vals[:, j]
            d = d[np.isfinite(d)]
            if d.size < 2:
                continue
            lo, hi = np.percentile(d, [2.5, 97.5])
            diff = est[i] - est[j]
            q25, q75 = np.percentile(d, [25, 75])
            se = float((q75 - q25) / (2 * norm.ppf(0.75)))
            rows.append({"indicator": name, "formulation_1": ids[i], "formulation_2": ids[j],
                         "diff": float(diff), "lo": lo, "hi": hi, "se": se,
                         "p": min(1.0, 2 * min(np.mean(d <= 0), np.mean(d >= 0))),
                         "p_normal": float(2 * norm.sf(abs(diff) / se)) if se > 0 else float(diff == 0)})
    out = pd.DataFrame(rows)
    out["p_holm"] = np.nan
    for _, g in out.groupby("indicator"):
        out.loc[g.index, "p_holm"] = multipletests(g["p_normal"], method="holm")[1]
    out["p_floor"] = 1.0 / boot.replicates
    return out


def test_pairwise_equals_the_one_pair_at_a_time_code_bit_for_bit(rng):
    """All pairs at once give the loop's table exactly, with non-finite replicates (dropped per
    pair), a pair left with one finite difference (left out) and a zero-spread pair."""
    from satcal.analysis.bootstrap import BootstrapResult
    B, F = 300, 6
    ind = rng.normal(0.2, 0.05, (B, F, 3))
    ind[::17, 1, 0] = np.nan
    ind[:-1, 4, 1] = np.inf                   # formulation 4's b2: one finite replicate
    ind[:, 5, 2] = ind[:, 3, 2]               # b3 of 3 and 5: every difference 0
    est = ind.mean(axis=0)
    boot = BootstrapResult(formulations=[f"f{i}" for i in range(F)], replicates=B, indicators=ind,
                           estimates=est, curve_bands={}, point_bands={}, failed=None, seed=0)
    fast, slow = boot.pairwise, _pairwise_one_pair_at_a_time(boot)
    assert len(fast) == 3 * 15 - 5
    assert list(fast.columns) == list(slow.columns) and (fast.dtypes == slow.dtypes).all()
    assert fast.equals(slow)


def test_holm_adjusted_is_statsmodels_holm_bit_for_bit(rng):
    from statsmodels.stats.multitest import multipletests
    from satcal.analysis.bootstrap import holm_adjusted
    p = np.concatenate([rng.uniform(0, 1, 200), rng.uniform(0, 1e-4, 30), [0.01] * 5, [0.0, 1.0]])
    rng.shuffle(p)
    assert np.array_equal(holm_adjusted(p), multipletests(p, method="holm")[1])
    # by hand: sorted 0.01, 0.02, 0.04 -> 3 x 0.01, max(2 x 0.02, 0.03), max(0.04, 0.04)
    np.testing.assert_allclose(holm_adjusted([0.04, 0.01, 0.02]), [0.04, 0.03, 0.04])


def test_floor_interval_by_hand_and_against_scipys_percentile_and_basic_intervals():
    """floor_interval is the span of the percentile and the basic interval, cut at 0.
    By hand: replicates 0.100, 0.101, ..., 0.140 (41 values) have np.percentile's 2.5% and
    97.5% quantiles 0.101 and 0.139; at the estimate 0.09 (below every replicate, as near the
    floor) the basic interval is (0.18 - 0.139, 0.18 - 0.101) = (0.041, 0.079), the union
    (0.041, 0.139); replicates 0, 0.01, ..., 0.40 at estimate 0.05 give the basic (-0.29, 0.09),
    percentile (0.01, 0.39), so (0, 0.39) after the cut. A failed (NaN) replicate is left out;
    a column with none finite gives NaN. Then a peer: |mean| of 60 normal values (the textbook
    boundary case), scipy.stats.bootstrap's percentile and basic intervals from one bootstrap
    distribution, which floor_interval reads."""
    from scipy.stats import bootstrap
    from satcal.analysis.bootstrap import floor_interval
    reps = np.full((42, 3), np.nan)
    reps[:41, 0] = 0.100 + np.arange(41) / 1000
    reps[:41, 1] = np.arange(41) / 100
    lo, hi = floor_interval(reps, np.array([0.09, 0.05, 0.1]))
    np.testing.assert_allclose(lo[:2], [0.041, 0.0], atol=1e-12)
    np.testing.assert_allclose(hi[:2], [0.139, 0.39], atol=1e-12)
    assert np.isnan(lo[2]) and np.isnan(hi[2])
    x = np.random.default_rng(3).normal(0.02, 0.1, 60)
    stat = lambda v, axis=-1: np.abs(np.mean(v, axis=axis))  # noqa: E731
    res = {m: bootstrap((x,), stat, method=m, n_resamples=999, random_state=np.random.default_rng(5),
                        vectorized=True) for m in ("percentile", "basic")}
    dist = res["percentile"].bootstrap_distribution
    np.testing.assert_array_equal(dist, res["basic"].bootstrap_distribution)
    lo, hi = floor_interval(dist, np.array(stat(x)))
    ci_p, ci_b = res["percentile"].confidence_interval, res["basic"].confidence_interval
    assert lo == pytest.approx(max(0.0, min(ci_p.low, ci_b.low)), abs=1e-15)
    assert hi == pytest.approx(max(ci_p.high, ci_b.high), abs=1e-15)
    assert ci_b.low < 0 == lo  # the cut at the floor is what happened here


def test_robust_se_is_the_normals_sd_despite_a_few_wild_replicates(rng):
    """1000 replicates from N(0.1, 0.03^2), 10 of them planted far out (k-step replicates whose tau
    ran away): robust_se is scipy.stats.iqr(scale="normal") to 1e-12 and the normal's SD within
    12% (the normalised IQR's sampling error at B = 1000 is about 0.036 relative, the 1% outliers
    move the quartiles by about 0.02), while the replicates' SD is inflated several times; one
    column per position, NaN (a failed replicate) left out."""
    from scipy.stats import iqr
    from satcal.analysis.bootstrap import robust_se
    reps = rng.normal(0.1, 0.03, (1000, 4))
    reps[:10] = 0.1 + np.array([2.0, -1.5, 3.0, -2.5, 1.8, 2.2, -0.9, 1.1, 4.0, -0.7])[:, None]
    reps[17, 3] = np.nan
    got = robust_se(reps)
    want = [iqr(reps[:, j][np.isfinite(reps[:, j])], scale="normal") for j in range(4)]
    np.testing.assert_allclose(got, want, rtol=1e-12)
    np.testing.assert_allclose(got, 0.03, rtol=0.12)
    assert (np.nanstd(reps, axis=0, ddof=1) > 5 * 0.03).all()
    assert robust_se(reps[:, 0]) == pytest.approx(want[0], rel=1e-12) and np.isnan(robust_se(reps[:1, 0]))


def test_quantiles_with_failed_replicates_are_numpys_nanpercentile(rng):
    """Rows of NaN (failed replicates) left out before np.percentile give each column
    numpy's nanpercentile, bit for bit, with and without other NaN scattered; all rows failed
    gives NaN, as nanpercentile does."""
    import warnings
    from satcal.analysis.bootstrap import LEVEL, _quantiles
    values = rng.normal(size=(200, 7, 5))
    values[[3, 50, 199]] = np.nan
    q = [(1 - LEVEL) / 2 * 100, (1 + LEVEL) / 2 * 100]
    scattered = values.copy()
    scattered[10, 2, 1] = np.nan
    for v in (values, scattered):
        lo, hi = _quantiles(v)
        want = np.nanpercentile(v, q, axis=0)
        np.testing.assert_array_equal(lo, want[0])
        np.testing.assert_array_equal(hi, want[1])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        assert np.isnan(_quantiles(np.full((4, 3), np.nan))[0]).all()
