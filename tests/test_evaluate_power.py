"""evaluate on small real-format runs against a hand computation; power by simulation; runs."""
import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner
from scipy.special import expit

from satcal.analysis.evaluate import Calibration, evaluate_runs
from satcal.analysis.power import power_analysis
from satcal.cli import main
from satcal.errors import InputFileError
from satcal.judgments import read_judgments
from satcal.measures import formulation
from satcal.runs import read_runs
from satcal.simulate import UserModel
from satcal.report import write_analysis

QRELS = "q1 0 d1 2\nq1 0 d2 1\nq1 0 d3 0\nq2 0 d4 2\nq2 0 d5 0\n"
RUN_A = "q1 Q0 d1 1 9.0 sysA\nq1 Q0 d2 2 8.0 sysA\nq2 Q0 d5 1 5.0 sysA\nq2 Q0 d4 2 4.0 sysA\n"
RUN_B = "q1 Q0 d3 1 3.0 sysB\nq1 Q0 d1 2 2.0 sysB\nq2 Q0 d4 1 1.0 sysB\nq2 Q0 dX 2 1.0 sysB\n"


@pytest.fixture
def files(tmp_path):
    (tmp_path / "qrels").write_text(QRELS)
    (tmp_path / "a.run").write_text(RUN_A)
    (tmp_path / "b.run").write_text(RUN_B)
    return tmp_path


def test_evaluate_matches_hand_computation(files):
    cal = Calibration("lin-const", np.array([-2.0, 4.0, 0.0]), np.array([-1.0, 3.0, 0.0]))
    r = evaluate_runs(read_judgments(files / "qrels"), read_runs([files / "a.run", files / "b.run"]), cal, k=2)
    # lin-const, k=2, top level 2: phi = (l1 + l2) / 4
    # sysA: q1 (d1=2, d2=1) -> 3/4; q2 (d5=0, d4=2) -> 2/4
    # sysB: q1 (d3=0, d1=2) -> 2/4; q2 (d4=2, dX unjudged=0; tie on score broken by docid desc: dX first) -> 2/4
    phi = r.per_query.set_index(["system", "query"])["phi"]
    assert phi[("sysA", "q1")] == 0.75 and phi[("sysA", "q2")] == 0.5
    assert phi[("sysB", "q1")] == 0.5 and phi[("sysB", "q2")] == 0.5
    sat = lambda x: expit(-2 + 4 * x)
    s = r.per_system.set_index("system")
    assert s.loc["sysA", "expected_sat"] == pytest.approx((sat(0.75) + sat(0.5)) / 2)
    sd = np.std([sat(0.75), sat(0.5)], ddof=1)
    assert s.loc["sysA", "sat_hi"] - s.loc["sysA", "expected_sat"] == pytest.approx(12.7062047 * sd / np.sqrt(2), rel=1e-6)
    pair = r.pairs.iloc[0]
    assert pair["p_prefer_1"] == pytest.approx(expit(-1 + 3 * 0.25) / 2)   # q1 dphi = .25, q2 tie
    assert pair["p_prefer_2"] == 0 and pair["queries_1_higher"] == 1


def test_evaluate_cli(files, tmp_path, ecir_result):
    write_analysis(ecir_result, tmp_path / "cal", figures=False, report=False)
    args = ["evaluate", "--judgments", str(files / "qrels"), "--run", str(files / "a.run"),
            "--run", str(files / "b.run"), "--calibration", str(tmp_path / "cal"), "--out", str(tmp_path / "ev")]
    wrong = CliRunner().invoke(main, args + ["--k", "2"])
    assert wrong.exit_code == 2 and "--k 2 contradicts the calibration, made on lists of k = 5" in wrong.output
    res = CliRunner().invoke(main, args)  # at the calibration's own k
    assert res.exit_code == 0, res.output
    assert (tmp_path / "ev" / "evaluation_per_system.csv").exists() and (tmp_path / "ev" / "evaluation.png").exists()
    # 36 measures and 2 systems: one measure a line (a terminal would wrap 36 columns), each
    # value the side-by-side table's
    side = pd.read_csv(tmp_path / "ev" / "evaluation_side_by_side.csv").set_index("system")
    lines = res.output.splitlines()
    assert max(len(line) for line in lines[:-1]) < 100 and len(side.columns) == 36
    row = next(line for line in lines if line.startswith("lin-log2 ")).split()
    header = next(line for line in lines if line.split()[:1] in (["sysA"], ["sysB"])).split()
    for name, value in zip(header, row[1:]):
        assert float(value) == pytest.approx(side.loc[name, "lin-log2"], abs=5e-5)


@pytest.mark.parametrize("text,fragment", [
    ("q1 Q0 d1 1 9.0\n", "expected 6 fields"),
    ("q1 Q0 d1 1 high sysA\n", "score 'high' is not a number"),
    ("q1 Q0 d1 1 9 sysA\nq1 Q0 d1 2 8 sysA\n", "retrieved twice"),
    ("q1 Q0 d1 1 9 sysA\nq1 Q0 d2 2 8 sysB\n", "several run tags"),
])
def test_run_errors(tmp_path, text, fragment):
    p = tmp_path / "bad.run"
    p.write_text(text)
    with pytest.raises(InputFileError, match=fragment):
        read_runs([p])


@pytest.fixture(scope="module")
def power(ecir_study):
    # a 3 x 2 grid of the study's formulations keeps the simulated analyses fast
    forms = [formulation(f"{g}-{d}") for d in ("const", "log2") for g in ("lin", "exp2", "exp5")]
    return power_analysis(ecir_study.examples, 5, 2, UserModel(), forms,
                          budgets=(60, 1500), sims=10, boot=40, seed=3)


def test_power_grows_with_budget(power):
    t = power.table.set_index("answers")
    assert t.loc[1500, "power_pair_b3"] >= t.loc[60, "power_pair_b3"]
    assert t.loc[1500, "power_pair_b3"] >= 0.8          # lin-const vs exp2-log2 differ in b3 by ~0.02
    assert t.loc[1500, "power_gain_b2"] >= 0.8
    assert (t.filter(like="power_") <= 1).all().all() and (t.filter(like="power_") >= 0).all().all()
    # Monte-Carlo standard error of each share of 10 simulated studies
    for col in [c for c in t.columns if c.startswith("power_") and not c.endswith("_se")]:
        np.testing.assert_allclose(t[f"{col}_se"], np.sqrt(t[col] * (1 - t[col]) / 10))


def test_power_figure(power, tmp_path):
    written = power.save(tmp_path)
    assert pd.read_csv(written["table"]).shape[0] == 2 and (tmp_path / "power.png").exists()


def test_calibrated_ndcg_maps_trec_eval_ndcg(tmp_path, rng):
    """analyze --normalization ideal calibrates classic nDCG@10; evaluate then scores a TREC
    run with the calibration's own k and normalisation, and its phi is trec_eval's ndcg_cut_10."""
    import json
    pytrec_eval = pytest.importorskip("pytrec_eval")
    qrels_lines, answer_rows, run_lines = [], [], []
    for q in range(20):
        docs = [f"q{q}d{i}" for i in range(30)]
        qrels_lines += [f"q{q} 0 {d} {int(rng.integers(0, 4))}" for d in docs]
        for _ in range(25):
            a, b = rng.choice(docs, 10, replace=False), rng.choice(docs, 10, replace=False)
            answer_rows.append([f"q{q}", *a, *b, rng.choice(["a_better", "b_better", "both_good", "both_bad"])])
        for rank, d in enumerate(rng.choice(docs, 15, replace=False), start=1):
            run_lines.append(f"q{q} Q0 {d} {rank} {100 - rank} sys")
    (tmp_path / "qrels").write_text("\n".join(qrels_lines) + "\n")
    (tmp_path / "run").write_text("\n".join(run_lines) + "\n")
    cols = ["query", *[f"a{i}" for i in range(1, 11)], *[f"b{i}" for i in range(1, 11)], "answer"]
    pd.DataFrame(answer_rows, columns=cols).to_csv(tmp_path / "answers.csv", index=False)
    cal = tmp_path / "cal"
    res = CliRunner().invoke(main, ["analyze", "--answers", str(tmp_path / "answers.csv"), "--judgments",
                                    str(tmp_path / "qrels"), "--normalization", "ideal", "--formulations",
                                    "lin-log2,exp2-log2", "--bootstrap", "0", "--out", str(cal), "-q"])
    assert res.exit_code == 0, res.output
    prov = json.loads((cal / "calibration.json").read_text())
    assert prov["k"] == 10 and prov["normalization"] == {"lin-log2": "ideal", "exp2-log2": "ideal"}
    assert len(prov["answers_sha256"]) == 64 and prov["simulated"] is False
    args = ["evaluate", "--judgments", str(tmp_path / "qrels"), "--run", str(tmp_path / "run"),
            "--calibration", str(cal), "--out", str(tmp_path / "ev")]
    assert CliRunner().invoke(main, args + ["--k", "5"]).exit_code == 2
    res = CliRunner().invoke(main, args)
    assert res.exit_code == 0, res.output
    per_query = pd.read_csv(tmp_path / "ev" / "evaluation_per_query.csv", dtype={"query": str})
    ours = per_query[per_query["formulation"] == "lin-log2"].set_index("query")["phi"]
    with open(tmp_path / "qrels") as fq, open(tmp_path / "run") as fr:
        trec = pytrec_eval.RelevanceEvaluator(pytrec_eval.parse_qrel(fq), {"ndcg_cut.10"}).evaluate(
            pytrec_eval.parse_run(fr))
    np.testing.assert_allclose(ours.to_numpy(), [trec[q]["ndcg_cut_10"] for q in ours.index], atol=1e-9)


def test_evaluate_leads_with_the_standardised_curves(ecir_study, tmp_path):
    """An analysis with judgments has standardised curves: evaluate maps phi through s*_f and
    P*_f of fits.csv's standardised rows (the analysis's lead estimator), computed here from
    those coefficients."""
    from satcal.analysis import calibrate
    from satcal.analysis.evaluate import load_calibrations
    result = calibrate(ecir_study, ["lin-const", "lin-log5"], bootstrap=0, seed=0, model_check_folds=0)
    write_analysis(result, tmp_path / "cal", figures=False, report=False)
    fits = pd.read_csv(tmp_path / "cal" / "fits.csv")
    checked = 0
    for cal in load_calibrations(tmp_path / "cal"):
        assert cal.sat_model == "standardised"
        rows = fits[(fits.sat_model == "standardised") & (fits.formulation == cal.formulation)].set_index("curve")
        x = np.array([0.0, 0.25, 0.8])
        for curve, mapped in (("sat", cal.p_sat(x)), ("pref", cal.p_pref(x))):
            b = rows.loc[curve, ["beta0", "beta1", "beta2"]].to_numpy(float)
            if str(rows.loc[curve, "monotone"]) == "True":
                np.testing.assert_allclose(mapped, expit(b[0] + b[1] * x + b[2] * x * x), rtol=1e-12)
                checked += 1
            else:   # a curve that turns down somewhere maps through its running maximum
                grid = np.round(np.linspace(0, 1, 1001), 3)
                run = np.maximum.accumulate(expit(b[0] + b[1] * grid + b[2] * grid ** 2))
                np.testing.assert_allclose(mapped, np.interp(x, grid, run), rtol=1e-12)
                checked += 1
    assert checked == 4


def test_evaluate_leads_with_the_per_list_curve(files, tmp_path):
    """With the joint model in the analysis, evaluate maps phi through s(phi) of fits.csv's joint
    rows (computed here from those coefficients), and says so in its tables."""
    from satcal.analysis import calibrate
    from satcal.analysis.evaluate import load_calibrations
    rng = np.random.default_rng(4)
    n = 600
    phi_a, phi_b = rng.random((n, 1)), rng.random((n, 1))
    sa, sb = rng.random(n) < expit(-3 + 6 * phi_a[:, 0]), rng.random(n) < expit(-3 + 6 * phi_b[:, 0])
    answers = np.select([sa & sb, ~sa & ~sb, sa], ["both_good", "both_bad", "a_better"], "b_better")
    result = calibrate(phi_a=phi_a, phi_b=phi_b, answers=answers, formulations=["lin-const"],
                       sat_model="both", model_check_folds=0, bootstrap=0, seed=0)
    result.meta["provenance"]["k"] = 2
    write_analysis(result, tmp_path / "cal", figures=False, report=False)
    cal, = load_calibrations(tmp_path / "cal")
    fits = pd.read_csv(tmp_path / "cal" / "fits.csv")
    joint = fits[(fits.sat_model == "joint")].iloc[0]
    assert cal.sat_model == "joint"
    np.testing.assert_allclose(cal.sat, joint[["beta0", "beta1", "beta2"]].to_numpy(float))
    r = evaluate_runs(read_judgments(files / "qrels"), read_runs([files / "a.run"]), cal, k=2)
    b = joint[["beta0", "beta1", "beta2"]].to_numpy(float)
    expected = np.mean([expit(b[0] + b[1] * x + b[2] * x * x) for x in (0.75, 0.5)])
    assert r.per_system["expected_sat"].iloc[0] == pytest.approx(expected, rel=1e-9)
    assert set(r.per_system["sat_model"]) == {"joint"}
