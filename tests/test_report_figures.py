"""Figure 0 (satcal.report.figure_standardised): the lines it draws are the standardised curves,
recomputed here from fits.csv's joint models with statsmodels, and nothing is drawn solid (or
banded) where the study's answers hold no data. Figure 4 (figure_intervals) draws the intervals
of the estimator the ranking leads with, as bias.csv records them."""
import numpy as np
import pandas as pd
import pytest
from scipy.special import expit

from satcal.analysis.core import GRID, TIE_TOLERANCE

FORMS = 3


def _answers(phi_a, phi_b, rng):
    """SPEC 7.1's answer process on formulation 0's scores: s = expit(-2 + 4 phi), pi = 0.3,
    delta = 0.8, lambda = 0.1."""
    n = len(phi_a)
    sa = rng.random(n) < expit(-2 + 4 * phi_a[:, 0])
    sb = rng.random(n) < expit(-2 + 4 * phi_b[:, 0])
    out = np.where(sa & sb, "both_good", np.where(~sa & ~sb, "both_bad", "")).astype(object)
    one = sa != sb
    lapse = rng.random(n) < 0.1
    out[one] = np.where(sa[one] != lapse[one], "a_better", "b_better")
    states = ~one & (rng.random(n) < 0.3)
    higher_a = phi_a[:, 0] >= phi_b[:, 0]
    pick_a = (rng.random(n) < 0.8) == higher_a
    out[states] = np.where(pick_a[states], "a_better", "b_better")
    return out


@pytest.fixture(scope="module")
def partial():
    """A study whose lists reach phi < 0.6 under every formulation (the reference population
    reaches 1), so the standardised curves are unsupported beyond; indicators over [0, 1]
    (``full``), which must not change where curves.csv and the figure mark the data."""
    from satcal.analysis import calibrate
    forms, phi_a, phi_b, answers, ref = _partial_study()
    return calibrate(None, forms, phi_a=phi_a, phi_b=phi_b, answers=answers,
                     sat_model="both", model_check_folds=0, indicator_range="full", reference=ref,
                     bootstrap=20, seed=3)


def _partial_study():
    """(formulations, phi_a, phi_b, answers, reference scores) of the ``partial`` study."""
    from satcal.measures import study_formulations
    rng = np.random.default_rng(7)
    forms = study_formulations()[:FORMS]
    n = 2500
    base_a, base_b = rng.random(n) * 0.59, rng.random(n) * 0.59
    jitter = lambda base: np.clip(base[:, None] + rng.normal(0, 0.05, (n, FORMS)) * [0, 1, 1], 0, 0.59)
    phi_a, phi_b = np.round(jitter(base_a), 3), np.round(jitter(base_b), 3)
    ref_base = rng.random(4000)
    ref = np.round(np.clip(ref_base[:, None] + rng.normal(0, 0.05, (4000, FORMS)) * [0, 1, 1], 0, 1), 3)
    return forms, phi_a, phi_b, _answers(phi_a, phi_b, rng), ref


def _lines(ax, name):
    """(x, y) of the solid and of the dotted line of one formulation (NaN where not drawn)."""
    lines = [l for l in ax.get_lines() if l.get_color() == name]
    solid = next(l for l in lines if l.get_linestyle() == "-")
    dotted = [l for l in lines if l.get_linestyle() == ":"]
    return solid.get_xydata(), (dotted[0].get_xydata() if dotted else None)


def _independent(result):
    """s*_f and P*_f on GRID from fits.csv's joint rows, the recorded Akaike weights and the
    reference lists: S = sum_g w_g s_g(phi_g) and each reference pair's probability of an answer
    siding with its higher-phi_f list (SPEC 7.1 written out), each fitted by statsmodels'
    fractional-response binomial GLM on (phi_f, phi_f^2), scores grouped to 0.001; P*_f over the
    pairs f does not tie."""
    import statsmodels.api as sm
    std = result.meta["standardisation"]
    ref, w = std["reference_phi"], std["weights"]
    joint = result.fits[(result.fits.sat_model == "joint") & (result.fits.curve == "sat")].set_index("formulation")
    forms = list(result.bias.formulation)
    X = lambda x: np.stack([np.ones_like(x), x, x ** 2], axis=1)
    # the shared-effect joint model: beta at v = 0, both lists of a pair at the same v ~ N(0, tau^2),
    # integrated by Gauss-Hermite on the package's number of nodes (the quadrature's own error
    # would otherwise show at the 1e-6 this test reads)
    from satcal.analysis.joint import SHARED_NODES
    z, wz = np.polynomial.hermite_e.hermegauss(SHARED_NODES)
    wz = wz / wz.sum()
    s_of = lambda g, phi, v=0.0: expit(X(phi) @ joint.loc[forms[g], ["beta0", "beta1", "beta2"]].to_numpy(float) + v)
    tau = lambda g: float(joint.loc[forms[g]].get("joint_tau", 0.0) or 0.0)
    S = sum(w[g] * sum(wk * s_of(g, ref[:, g], tau(g) * zk) for zk, wk in zip(z, wz)) for g in range(len(forms)))
    x, y = ref[0::2], ref[1::2]
    to_x, to_y = np.zeros(len(x)), np.zeros(len(x))
    for g in range(len(forms)):
        row = joint.loc[forms[g]]
        d = x[:, g] - y[:, g]
        d = np.where(np.abs(d) < TIE_TOLERANCE, 0.0, d)
        pi = expit(row.joint_c0 + row.joint_c1 * np.abs(d))
        lam, delta = row.joint_lambda, row.joint_delta
        t = np.where(d > 0, delta, np.where(d < 0, 1 - delta, 0.5))
        for zk, wk in zip(z, wz):
            sx, sy = s_of(g, x[:, g], tau(g) * zk), s_of(g, y[:, g], tau(g) * zk)
            same = sx * sy + (1 - sx) * (1 - sy)
            to_x += w[g] * wk * (sx * (1 - sy) * (1 - lam) + sy * (1 - sx) * lam + same * pi * t)
            to_y += w[g] * wk * (sy * (1 - sx) * (1 - lam) + sx * (1 - sy) * lam + same * pi * (1 - t))
    out = {}
    for j, f in enumerate(forms):
        phi = np.round(ref[:, j], 3)
        out[(f, "sat")] = sm.GLM(S, X(phi), family=sm.families.Binomial()).fit(tol=1e-12).predict(X(GRID))
        d = x[:, j] - y[:, j]
        ordered = np.abs(d) >= TIE_TOLERANCE         # P*_f: the pairs f orders only
        agree = np.where(d > 0, to_x, to_y)[ordered]
        ad = np.round(np.abs(d[ordered]), 3)
        out[(f, "pref")] = sm.GLM(agree, X(ad), family=sm.families.Binomial()).fit(tol=1e-12).predict(X(GRID))
    return out


@pytest.mark.filterwarnings("ignore::statsmodels.tools.sm_exceptions.PerfectSeparationWarning")   # statsmodels' perfect-prediction heuristic, on the s* fit's fractional outcomes
def test_figure_draws_the_standardised_curves(partial):
    """Each formulation's line, read back from the Axes (solid and dotted parts together), is
    s*_f (left) and P*_f (right) recomputed independently, to 1e-6; P*'s legend gives the share
    of reference pairs the formulation ties, counted here."""
    from satcal.report import figure_standardised
    forms = list(partial.bias.formulation)
    fig = figure_standardised(partial, formulations=forms)
    expected = _independent(partial)
    for ax, curve in zip(fig.axes[:2], ("sat", "pref")):
        for i, f in enumerate(forms):
            solid, dotted = _lines(ax, f"C{i}")
            both = solid if dotted is None else np.where(np.isnan(solid), dotted, solid)
            np.testing.assert_allclose(both[:, 0], GRID)
            y = both[:, 1]
            assert np.abs(y - expected[(f, curve)]).max() < 1e-6, (f, curve)
    ref = partial.meta["standardisation"]["reference_phi"]
    tied = np.mean(np.abs(ref[0::2] - ref[1::2]) < TIE_TOLERANCE, axis=0)
    labels = [t.get_text() for t in fig.axes[1].get_legend().get_texts()][1:]
    assert [lab.rsplit("ties ", 1)[1] for lab in labels] == [f"{100 * t:.0f}%)" for t in tied]
    # and they are curves.csv's rows
    c = partial.curves[partial.curves.sat_model == "standardised"]
    np.testing.assert_allclose(c[(c.formulation == forms[1]) & (c.curve == "sat")].p, expected[(forms[1], "sat")],
                               atol=1e-6)


def _held(x, n_bins=10, min_count=5):
    """Grid points inside the hull of the SPEC 4 bins (width 1/10, a score of 1 in the last)
    holding at least 5 observations, counted here with numpy's histogram."""
    counts, _ = np.histogram(np.minimum(np.asarray(x, float) + 1e-5, 1.0), bins=np.linspace(0, 1, n_bins + 1))
    held = np.flatnonzero(counts >= min_count)
    lo, hi = held[0] / n_bins, (held[-1] + 1) / n_bins
    return (GRID >= lo - 1e-9) & (GRID <= hi + 1e-9)


def test_supported_marks_where_the_answers_hold_data_whatever_the_indicator_range(partial):
    """curves.csv's ``supported`` is where the study's answers hold data (the curve's own
    observations: the both_good/both_bad answers' lists for the paper's s, every answered list
    for the per-list and standardised s, every answer's |dphi| for P), recomputed here from the
    scores; the same under ``--indicator-range full`` (``partial``) as under ``data``, where it is
    also the range b1 averages over."""
    from satcal.analysis import calibrate
    forms, phi_a, phi_b, answers, ref = _partial_study()
    data = calibrate(None, forms, phi_a=phi_a, phi_b=phi_b, answers=answers, sat_model="both",
                     model_check_folds=0, indicator_range="data", reference=ref, bootstrap=0, seed=3)
    both = np.isin(answers, ["both_good", "both_bad"])
    dphi = np.abs(phi_a - phi_b)
    dphi[dphi < TIE_TOLERANCE] = 0.0
    for result in (partial, data):
        c = result.curves
        for j, f in enumerate(f.id for f in forms):
            expected = {("published", "sat"): _held(np.r_[phi_a[both, j], phi_b[both, j]]),
                        ("joint", "sat"): _held(np.r_[phi_a[:, j], phi_b[:, j]]),
                        ("standardised", "sat"): _held(np.r_[phi_a[:, j], phi_b[:, j]]),
                        ("published", "pref"): _held(dphi[:, j]),
                        ("standardised", "pref"): _held(dphi[:, j])}
            for (model, curve), mask in expected.items():
                rows = c[(c.formulation == f) & (c.sat_model == model) & (c.curve == curve)]
                np.testing.assert_array_equal(rows.x, GRID)
                assert not mask.all(), (f, model, curve)   # the study reaches phi < 0.6 only
                np.testing.assert_array_equal(rows.supported.astype(bool), mask, err_msg=f"{f} {model} {curve}")
    # with indicators over the data, b1_joint is the per-list curve's mean distance over them
    c = data.curves[(data.curves.sat_model == "joint") & (data.curves.formulation == forms[1].id)]
    inside = c[c.supported.astype(bool)]
    assert data.bias.set_index("formulation").loc[forms[1].id, "b1_joint"] == pytest.approx(
        np.mean(np.abs(inside.x - inside.p)), abs=1e-12)


def test_nothing_solid_or_banded_beyond_the_data(partial):
    """The study's lists reach phi < 0.6 (and |dphi| < 0.6): the solid line and the band stop
    at the supported range calibration.json records, the dotted line covers the rest (with
    indicators over [0, 1] too)."""
    from satcal.report import figure_standardised
    forms = list(partial.bias.formulation)
    ranges = partial.meta["provenance"]["support"]["ranges"]
    fig = figure_standardised(partial, formulations=forms)
    for ax, curve, key in zip(fig.axes[:2], ("sat", "pref"), ("sat_joint", "pref")):
        bands = [p for p in ax.collections if type(p).__name__ in ("PolyCollection", "FillBetweenPolyCollection")]
        assert len(bands) == FORMS
        for i, f in enumerate(forms):
            lo, hi = ranges[f][key]
            assert lo == 0.0 and (hi == pytest.approx(0.6) if curve == "sat" else 0.4 <= hi <= 0.6)
            solid, dotted = _lines(ax, f"C{i}")
            drawn = solid[~np.isnan(solid[:, 1]), 0]
            assert drawn.min() >= lo - 1e-9 and drawn.max() <= hi + 1e-9
            assert drawn.size == np.sum((GRID >= lo - 1e-12) & (GRID <= hi + 1e-12))
            rest = dotted[~np.isnan(dotted[:, 1]), 0]
            assert rest.min() > hi and rest.max() == 1.0
            verts = np.concatenate([p.vertices for p in bands[i].get_paths()])
            assert verts[:, 0].max() <= hi + 1e-9


def test_report_leads_with_figure_0_and_same_bytes(partial, tmp_path):
    """write_analysis draws fig0_standardised (PNG and PDF, the same bytes twice) and the report
    shows it before the paper's Figure 1."""
    from satcal.fileio import save_figure
    from satcal.report import figure_standardised, write_analysis
    written = write_analysis(partial, tmp_path / "a")
    again = save_figure(figure_standardised(partial), tmp_path / "again")
    for path in again:
        assert path.read_bytes() == (tmp_path / "a" / "figures" / f"fig0_standardised{path.suffix}").read_bytes()
    html = open(written["report"]).read()
    assert html.index("Figure 0.") < html.index("Figure 1.") < html.index("Figure 2.")
    assert "fig0_standardised" in written["fig0_standardised.png"]


def _drawn_intervals(ax, labelled):
    """{formulation: (estimate, bar's left end, bar's right end)} read back from an Axes of
    figure_intervals (its errorbar's points and bars; the names from the y tick labels of
    ``labelled``, the panel that shows them on the shared y axis)."""
    points, _, (bars,) = ax.containers[0]
    names = {round(t): label.get_text() for t, label in zip(labelled.get_yticks(), labelled.get_yticklabels())}
    return {names[round(y)]: (x, seg[0][0], seg[1][0])
            for x, y, seg in zip(points.get_xdata(), points.get_ydata(), bars.get_segments())}


def test_figure_4_draws_the_lead_estimators_intervals(partial, tmp_path):
    """With the joint model and a reference population the ranking leads with b1_std-b3_std:
    Figure 4 draws their estimates and 95% intervals as bias.csv records them (read back from
    the file; a bar is clipped at its estimate), sorted by b1_std and named on its axes, its
    title and the report's caption. Without the lead estimator's intervals it draws the paper's
    b1-b3 and says so."""
    from types import SimpleNamespace
    from satcal.report import figure_intervals, render_report, write_analysis
    assert partial.estimator == "standardised"
    write_analysis(partial, tmp_path / "a", figures=False, report=False)
    bias = pd.read_csv(tmp_path / "a" / "bias.csv").set_index("formulation")
    for drawn, cols, name in ((bias, ["b1_std", "b2_std", "b3_std"], "standardised"),
                              (bias.drop(columns=[c for c in bias if c.endswith(("_std_lo", "_std_hi"))]),
                               ["b1", "b2", "b3"], "paper's")):
        fig = figure_intervals(SimpleNamespace(bias=drawn.reset_index()))
        assert name in fig._suptitle.get_text() and f"{cols[0]}-{cols[2]}" in fig._suptitle.get_text()
        labels = [t.get_text() for t in fig.axes[0].get_yticklabels()]
        assert labels == list(bias[cols[0]].sort_values().index)
        for ax, col in zip(fig.axes, cols):
            assert col in ax.get_xlabel() and col in ax.get_title()
            expected = {f: (bias.loc[f, col], min(bias.loc[f, f"{col}_lo"], bias.loc[f, col]),
                            max(bias.loc[f, f"{col}_hi"], bias.loc[f, col])) for f in bias.index}
            got = _drawn_intervals(ax, fig.axes[0])
            assert got.keys() == expected.keys()
            np.testing.assert_allclose([got[f] for f in bias.index], [expected[f] for f in bias.index])
    png = tmp_path / "fig4_intervals.png"
    figure_intervals(partial).savefig(png)
    html = render_report(partial, {"fig4_intervals": png})
    assert ("Figure 4. Bootstrap intervals of each formulation&#39;s bias by the per-list curves standardised "
            "to a reference population of lists (b1_std-b3_std)") in html


def test_figure_refuses_a_result_without_standardised_curves(ecir_result):
    from satcal.report import figure_standardised
    with pytest.raises(ValueError, match="no standardised curves"):
        figure_standardised(ecir_result)


def test_report_never_says_every_answer_simulated_when_some_are_real():
    """The report's 'answers simulated' line: 4111 of 4115 simulated answers is 99.9%, not
    '100%' (as if none were real); all of them is 'yes', none 'no'."""
    from satcal.report import _simulated_text
    assert _simulated_text({"simulated": True, "simulated_share": 4111 / 4115}) == "yes, 99.9% of the answers"
    assert _simulated_text({"simulated": True, "simulated_share": 0.25}) == "yes, 25% of the answers"
    assert _simulated_text({"simulated": True, "simulated_share": 1.0}) == "yes"
    assert _simulated_text({"simulated": False}) == "no"
