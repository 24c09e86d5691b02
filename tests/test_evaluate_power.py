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
from satcal.measures import study_formulations
from satcal.runs import read_runs
from satcal.simulate import UserModel

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
    ecir_result.save(tmp_path / "cal", figures=False, report=False)
    res = CliRunner().invoke(main, ["evaluate", "--judgments", str(files / "qrels"), "--run", str(files / "a.run"),
                                    "--run", str(files / "b.run"), "--calibration", str(tmp_path / "cal"),
                                    "--k", "2", "--out", str(tmp_path / "ev")])
    assert res.exit_code == 0, res.output
    assert (tmp_path / "ev" / "evaluation_per_system.csv").exists() and (tmp_path / "ev" / "evaluation.png").exists()


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
    return power_analysis(ecir_study.examples, 5, 2, UserModel(), study_formulations(),
                          budgets=(60, 1500), sims=12, boot=40, seed=3)


def test_power_grows_with_budget(power):
    t = power.table.set_index("answers")
    assert t.loc[1500, "power_pair_b3"] >= t.loc[60, "power_pair_b3"]
    assert t.loc[1500, "power_pair_b3"] >= 0.8          # lin-const vs exp2-log2 differ in b3 by ~0.02
    assert t.loc[1500, "power_gain_b2"] >= 0.8
    assert (t.filter(like="power_") <= 1).all().all() and (t.filter(like="power_") >= 0).all().all()


def test_power_figure(power, tmp_path):
    written = power.save(tmp_path)
    assert pd.read_csv(written["table"]).shape[0] == 2 and (tmp_path / "power.png").exists()
