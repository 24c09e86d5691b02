"""Reliability: G-theory by hand and by simulation, discriminative power, BV, optimisation."""
import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner
from scipy import stats

from satcal.judgments import Judgments
from satcal.measures import formulation, study_formulations
from satcal.reliability import (buckley_voorhees, d_study, discriminative_power, g_study, kendall_matrix,
                                optimal_discounts, optimal_gains, reliability_report, score_matrix, simulate_runs)
from satcal.report import write_analysis


# 3 systems x 4 topics, worked by hand:
# grand mean 3; system means 2.5, 4, 2.5; topic means 1, 3, 4, 4
# SS_s = 4 * (0.25 + 1 + 0.25) = 6 -> MS_s = 3;  SS_t = 3 * (4 + 0 + 1 + 1) = 18 -> MS_t = 6
# SS_total = sum (x - 3)^2 = 6 + 10 + 10 = 26 -> SS_e = 26 - 6 - 18 = 2 -> MS_e = 2/6
X = np.array([[1, 2, 3, 4],
              [2, 4, 5, 5],
              [0, 3, 4, 3]], dtype=float)


def test_g_study_by_hand():
    g = g_study(X)
    assert g.ms_system == pytest.approx(3) and g.ms_topic == pytest.approx(6) and g.ms_residual == pytest.approx(2 / 6)
    assert g.var_residual == pytest.approx(2 / 6)
    assert g.var_system == pytest.approx((3 - 2 / 6) / 4)
    assert g.var_topic == pytest.approx((6 - 2 / 6) / 3)
    d = d_study(g, topics=[4, 10], target=0.9).set_index("topics")
    s, t, e = (3 - 2 / 6) / 4, (6 - 2 / 6) / 3, 2 / 6
    assert d.loc[10, "erho2"] == pytest.approx(s / (s + e / 10))
    assert d.loc[10, "phi"] == pytest.approx(s / (s + (t + e) / 10))
    assert d.loc[4, "erho2"] == pytest.approx(1 - 1 / (3 / (2 / 6)))   # E rho^2 = 1 - 1/F at n' = n
    assert d.loc[4, "topics_for_phi"] == np.ceil(0.9 * (t + e) / (s * 0.1))


def test_g_study_equals_statsmodels_anova():
    import statsmodels.formula.api as smf
    from statsmodels.stats.anova import anova_lm
    rng = np.random.default_rng(0)
    x = rng.normal(size=(6, 9)) + rng.normal(size=(6, 1)) + rng.normal(size=(1, 9))
    df = pd.DataFrame([(s, t, x[s, t]) for s in range(6) for t in range(9)], columns=["s", "t", "y"])
    table = anova_lm(smf.ols("y ~ C(s) + C(t)", df).fit())
    g = g_study(x)
    assert g.ms_system == pytest.approx(table.loc["C(s)", "mean_sq"])
    assert g.ms_topic == pytest.approx(table.loc["C(t)", "mean_sq"])
    assert g.ms_residual == pytest.approx(table.loc["Residual", "mean_sq"])


def test_negative_components_are_zero():
    x = np.array([[1.0, 5.0, 2.0], [1.1, 4.9, 2.05]]) + np.array([[0.3, -0.3, 0.0], [-0.3, 0.3, 0.0]])
    g = g_study(x)
    assert g.ms_system < g.ms_residual and g.var_system == 0.0


def test_feldt_interval_by_formula():
    g = g_study(X)
    d = d_study(g, alpha=0.05).iloc[0]
    f = g.ms_system / g.ms_residual
    assert d["erho2_lo"] == pytest.approx(1 - stats.f.ppf(0.975, 2, 6) / f)
    assert d["erho2_hi"] == pytest.approx(1 - stats.f.ppf(0.025, 2, 6) / f)


def test_intervals_cover_at_the_nominal_rate():
    """Random-effects data with known components: the 95% intervals of E rho^2 and Phi cover."""
    rng = np.random.default_rng(11)
    ns, nt, s2, t2, e2 = 20, 25, 0.02, 0.03, 0.05
    true_erho = s2 / (s2 + e2 / nt)
    true_phi = s2 / (s2 + (t2 + e2) / nt)
    hits_e = hits_p = 0
    sims = 300
    for _ in range(sims):
        x = (rng.normal(0, np.sqrt(s2), (ns, 1)) + rng.normal(0, np.sqrt(t2), (1, nt))
             + rng.normal(0, np.sqrt(e2), (ns, nt)))
        d = d_study(g_study(x)).iloc[0]
        hits_e += d["erho2_lo"] <= true_erho <= d["erho2_hi"]
        hits_p += d["phi_lo"] <= true_phi <= d["phi_hi"]
    assert 0.91 <= hits_e / sims <= 0.99 and 0.91 <= hits_p / sims <= 0.99


def test_discriminative_power():
    rng = np.random.default_rng(1)
    base = rng.uniform(0.2, 0.6, 30)
    x = np.stack([base, base + 0.2 + rng.normal(0, 0.02, 30), base + rng.normal(0, 0.2, 30), base])
    asl = discriminative_power(x, ["a", "b", "c", "d"], replicates=500, seed=2).set_index(["system_1", "system_2"])
    assert asl.loc[("a", "b"), "asl"] < 0.01 and asl.loc[("a", "b"), "significant"]
    assert asl.loc[("a", "d"), "asl"] == 1.0 and not asl.loc[("a", "d"), "significant"]
    assert asl.loc[("a", "c"), "t"] == pytest.approx(stats.ttest_rel(x[0], x[2]).statistic)


def test_buckley_voorhees_by_hand():
    # two systems: A beats B on 3 topics, B beats A on 1; with all 4 topics A wins every trial.
    x = np.array([[0.9, 0.9, 0.9, 0.1], [0.5, 0.5, 0.5, 0.5]])
    r = buckley_voorhees(x, sizes=[4, 1], trials=400, seed=0).set_index("topics")
    assert r.loc[4, "error_rate"] == 0 and r.loc[4, "tie_rate"] == 0
    assert r.loc[1, "error_rate"] == pytest.approx(0.25, abs=0.06)     # min(3/4, 1/4) of the trials
    same = buckley_voorhees(np.ones((3, 5)), sizes=[2], trials=10)
    assert same["tie_rate"].iloc[0] == 1 and same["error_rate"].iloc[0] == 0


def test_kendall_matrix():
    k = kendall_matrix({"f1": np.array([1, 2, 3, 4.0]), "f2": np.array([1, 3, 2, 4.0])})
    assert k["tau"].iloc[0] == pytest.approx(stats.kendalltau([1, 2, 3, 4], [1, 3, 2, 4]).statistic)


@pytest.fixture(scope="module")
def web_collection():
    """A TREC Web style collection with levels -2..4 and simulated runs."""
    rng = np.random.default_rng(3)
    rows = [(f"q{q}", f"d{q}_{i}", int(rng.choice([-2, 0, 0, 0, 1, 1, 2, 3, 4]))) for q in range(25) for i in range(40)]
    j = Judgments(pd.DataFrame(rows, columns=["query", "doc", "level"]))
    return j, simulate_runs(j, n_systems=8, depth=20, seed=4)


def test_minmax_with_negative_labels(web_collection):
    j, runs = web_collection
    forms = [formulation("exp2-log2", "minmax"), formulation("exp2-log2", "ideal"),
             formulation("exp2-log2", "ideal", negatives="zero")]
    s, systems, queries = score_matrix(runs, j, forms, k=10)
    assert s[0].min() >= -1e-12 and s[0].max() <= 1 + 1e-12
    assert s[2].min() >= 0


def test_optimal_gains_respect_constraints_and_improve(web_collection):
    j, runs = web_collection
    gain, phi_opt, phi_start = optimal_gains(runs, j, k=10)
    levels = [1, 2, 3, 4]
    values = gain([0] + levels)
    assert values[0] == 0 and values[1:].sum() == pytest.approx(1) and (np.diff(values[1:]) >= -1e-9).all()
    assert phi_opt >= phi_start - 1e-9
    disc, phi_d, phi_d0 = optimal_discounts(runs, j, k=10)
    f = disc.factors(10)
    assert f.sum() == pytest.approx(1) and (np.diff(f) <= 1e-9).all() and (f >= 0).all()
    assert phi_d >= phi_d0 - 1e-9
    # usable as a custom formulation elsewhere
    from satcal.measures import Formulation
    assert Formulation(gain, disc, "max").score([[4, 0, 1, 2, 3, 0, 0, 0, 0, 1]], top_level=4)[0] > 0


def test_reliability_report_and_cli(web_collection, tmp_path, ecir_result):
    j, runs = web_collection
    r = reliability_report(runs, j, study_formulations(normalization="minmax")[:6], k=10, replicates=200,
                           calibration_bias=ecir_result.bias)
    assert len(r.gstudy) == 6 and {"b1", "b2", "b3", "phi", "discriminative_power"} <= set(r.combined.columns)
    assert (r.gstudy[["var_system", "var_topic", "var_residual"]] >= 0).all().all()
    qrels = tmp_path / "qrels.txt"
    j.to_trec(qrels)
    run_dir = tmp_path / "runs"
    simulate_runs(j, n_systems=5, depth=20, seed=1, out_dir=run_dir)
    args = ["reliability", "--judgments", str(qrels), "--k", "10", "--replicates", "100", "--alpha", "0.2",
            "--normalization", "minmax", "--out", str(tmp_path / "rel"), "-q"]
    for f in sorted(run_dir.glob("*.run")):
        args += ["--runs", str(f)]
    from satcal.cli import main
    res = CliRunner().invoke(main, args)
    assert res.exit_code == 0, res.output
    for name in ("gstudy", "dstudy", "discrimination", "asl", "bv_error", "kendall"):
        assert (tmp_path / "rel" / f"{name}.csv").exists()
    assert (tmp_path / "rel" / "asl_curves.png").exists()
    assert set(pd.read_csv(tmp_path / "rel" / "gstudy.csv")["normalization"]) == {"minmax"}
    # --alpha is the level of the significance count (and of the two-sided intervals)
    asl = pd.read_csv(tmp_path / "rel" / "asl.csv")
    power = pd.read_csv(tmp_path / "rel" / "discrimination.csv").set_index("formulation")["discriminative_power"]
    by_hand = asl.groupby("formulation")["asl"].apply(lambda a: float((a < 0.2).mean()))
    np.testing.assert_allclose(power.loc[by_hand.index], by_hand)


def test_bias_put_beside_later_writes_the_same_files(web_collection, tmp_path, ecir_result):
    """Saved without the bias and given it later (save, then beside and save_beside, as the demo
    does while the calibration runs) gives the files of the one call with the bias, byte for
    byte; the join is the gstudy's and discrimination's rows with the bias's b1-b3 by name."""
    j, runs = web_collection
    forms = study_formulations(normalization="minmax")[:5]
    once = reliability_report(runs, j, forms, k=10, replicates=100, calibration_bias=ecir_result.bias)
    once.save(tmp_path / "once")
    alone = reliability_report(runs, j, forms, k=10, replicates=100)
    assert alone.combined is None
    alone.save(tmp_path / "later")
    later = alone.beside(ecir_result.bias)
    later.save_beside(tmp_path / "later")
    files = sorted(p.name for p in (tmp_path / "once").iterdir())
    assert files == sorted(p.name for p in (tmp_path / "later").iterdir()) and "user_vs_system.csv" in files
    for name in files:
        assert (tmp_path / "once" / name).read_bytes() == (tmp_path / "later" / name).read_bytes(), name
    bias = ecir_result.bias.set_index("formulation")
    row = later.combined.iloc[0]
    assert row["b1"] == bias.loc[row["formulation"], "b1"]
    assert row["phi"] == alone.gstudy.set_index("formulation").loc[row["formulation"], "phi"]


def test_reliability_takes_the_calibrations_scale(ecir_result, ecir_study, tmp_path):
    """With --calibration, the system side is scored at the calibration's k, normalisation and
    negative policy (calibration.json); a contradicting option or a wider level scale is a
    one-line refusal."""
    from satcal.cli import main
    write_analysis(ecir_result, tmp_path / "cal", figures=False, report=False)
    qrels = tmp_path / "qrels.txt"
    ecir_study.judgments.to_trec(qrels)
    base = ["reliability", "--judgments", str(qrels), "--simulate-runs", "5", "--replicates", "100",
            "--calibration", str(tmp_path / "cal"), "-q"]
    res = CliRunner().invoke(main, base + ["--k", "10", "--out", str(tmp_path / "bad")])
    assert res.exit_code != 0 and "--k 10 contradicts the calibration" in res.output and "k = 5" in res.output
    res = CliRunner().invoke(main, base + ["--normalization", "ideal", "--out", str(tmp_path / "bad2")])
    assert res.exit_code != 0 and "normalization = max" in res.output
    wide = tmp_path / "wide.txt"
    wide.write_text(qrels.read_text() + "extra 0 doc-x 3\n")
    res = CliRunner().invoke(main, [*base[:2], str(wide), *base[3:], "--out", str(tmp_path / "bad3")])
    assert res.exit_code != 0 and "levels go up to 3" in res.output and "0..2" in res.output
    assert not any((tmp_path / d).exists() for d in ("bad", "bad2", "bad3"))  # refused before writing
    res = CliRunner().invoke(main, base + ["--out", str(tmp_path / "rel")])
    assert res.exit_code == 0, res.output
    g = pd.read_csv(tmp_path / "rel" / "gstudy.csv")
    assert set(g["normalization"]) == {"max"} and set(g["negatives"]) == {"keep"}
    assert (tmp_path / "rel" / "user_vs_system.csv").exists()


def test_asl_of_a_constant_difference_is_the_most_significant():
    """Sakai's test on a pair that differs by the same amount on every topic (zero variance):
    ASL 0, not 1; two identical systems: ASL 1."""
    from satcal.reliability import discriminative_power
    base = np.linspace(0.2, 0.8, 30)
    scores = np.stack([base, base + 0.1, base])
    asl = discriminative_power(scores, ["a", "b", "c"], replicates=200).set_index(["system_1", "system_2"])["asl"]
    assert asl[("a", "b")] == 0 and asl[("b", "c")] == 0 and asl[("a", "c")] == 1


def test_reliability_figures_are_small_multiples_in_gain_colours(web_collection):
    """One panel per discount, one line per gain in the calibration figures' gain colours, the
    measures beyond DCG (which have no gain or discount) named in a last panel."""
    from matplotlib.colors import to_hex
    from satcal.fileio import GAIN_COLOURS
    j, runs = web_collection
    forms = study_formulations(normalization="ideal", negatives="zero")[:12] + \
        [formulation(m, "ideal", negatives="zero") for m in ("err", "lin-geo0.8")]
    r = reliability_report(runs, j, forms, k=10, replicates=100)
    assert r.gstudy.set_index("formulation").loc["err", ["gain", "discount"]].tolist() == ["err", ""]
    for fig in (r._fig_phi(), r._fig_asl()):
        panels = [ax for ax in fig.axes if ax.get_visible() and ax.get_title()]
        titles = [ax.get_title() for ax in panels]
        discounts = list(dict.fromkeys(f.labels["discount"] for f in forms))
        assert titles == [f"discount: {d}" if d else "other measures" for d in discounts]
        for ax, d in zip(panels, discounts):
            mine = [f for f in forms if f.labels["discount"] == d]
            lines = [l for l in ax.get_lines() if l.get_linestyle() == "-"]
            assert len(lines) == len(mine)
            if d:  # a DCG or RBP panel: each line in its gain's colour
                assert {to_hex(l.get_color()) for l in lines} == {GAIN_COLOURS[f.labels["gain"]] for f in mine}
            else:
                assert sorted(t.get_text() for t in ax.get_legend().get_texts()) == ["err"]


def test_figures_and_summary_say_when_the_runs_are_simulated(web_collection, ecir_result):
    """On simulate_runs' systems every figure's title and the summary say SIMULATED runs; the
    same runs under other tags (real runs) say nothing of the kind."""
    from satcal.runs import Runs
    j, runs = web_collection
    forms = study_formulations(normalization="ideal", negatives="zero")[:6]
    r = reliability_report(runs, j, forms, k=10, replicates=100, calibration_bias=ecir_result.bias)
    assert r.simulated and "on SIMULATED runs" in r.summary().splitlines()[0]
    for name, fig in r.figures().items():
        assert "SIMULATED runs" in fig._suptitle.get_text(), name
    real = Runs(runs.table.assign(system=runs.table["system"].str.replace("simulated-sys", "team", regex=False)))
    r = reliability_report(real, j, forms, k=10, replicates=100, calibration_bias=ecir_result.bias)
    assert not r.simulated and "SIMULATED" not in r.summary()
    assert all("SIMULATED" not in fig._suptitle.get_text() for fig in r.figures().values())


def test_user_vs_system_labels_never_overlap(web_collection, ecir_result):
    """The least biased formulations are named in each panel, and no two names overlap, however
    close their points are (drawn with Agg and measured)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    j, runs = web_collection
    r = reliability_report(runs, j, study_formulations(normalization="ideal", negatives="zero"), k=10,
                           replicates=100, calibration_bias=ecir_result.bias)
    fig = r._fig_combined()
    renderer = FigureCanvasAgg(fig).get_renderer()
    fig.draw(renderer)
    for ax in fig.axes:
        from matplotlib.text import Text
        boxes = [Text.get_window_extent(t, renderer)  # the label itself, without its leader line
                 for t in ax.texts if t.get_text()[:2] in ("1.", "2.", "3.")]
        assert len(boxes) == 3
        for i in range(3):
            for k in range(i + 1, 3):
                assert not boxes[i].overlaps(boxes[k])


def test_user_vs_system_plots_the_rankings_lead_estimator(web_collection, ecir_study, tmp_path):
    """With the joint model on a study with judgments the calibration's ranking leads with
    b1_std-b3_std: the figure beside reliability plots those (read back from bias.csv, as
    ``satcal reliability --calibration`` does), names them on its axes and title, and names
    first the formulation bias.csv has lowest in each; the summary shows them too."""
    from satcal.analysis import calibrate
    from satcal.pipeline import read_calibration_bias
    forms = ["lin-const", "lin-log2", "exp2-zipf", "bin1-lin"]
    cal = calibrate(ecir_study, forms, sat_model="both", bootstrap=0, model_check_folds=0, seed=0)
    assert cal.estimator == "standardised"
    write_analysis(cal, tmp_path / "cal", figures=False, report=False)
    bias, _ = read_calibration_bias(tmp_path / "cal")
    j, runs = web_collection
    r = reliability_report(runs, j, forms, k=10,
                           replicates=100, calibration_bias=bias)
    assert r.estimator == "standardised" and r.bias_columns == ["b1_std", "b2_std", "b3_std"]
    phi = r.gstudy.set_index("formulation")["phi"]
    expected_by = bias.set_index("formulation")
    fig = r._fig_combined()
    assert "standardised" in fig._suptitle.get_text()
    for ax, col in zip(fig.axes, ["b1_std", "b2_std", "b3_std"]):
        assert col in ax.get_xlabel()
        plotted = sorted(tuple(xy) for c in ax.collections for xy in c.get_offsets())
        expected = sorted((expected_by.loc[f, col], phi[f]) for f in forms)
        np.testing.assert_allclose(plotted, expected)
        first = next(t.get_text() for t in ax.texts if t.get_text().startswith("1. "))
        assert first == f"1. {expected_by[col].idxmin()}"
    # b1 (the paper's) orders these four otherwise than b1_std: the figure is not the paper's
    assert expected_by["b1"].idxmin() != expected_by["b1_std"].idxmin()
    header = r.summary().splitlines()[2].split()
    assert header[:4] == ["formulation", "b1_std", "b2_std", "b3_std"]
