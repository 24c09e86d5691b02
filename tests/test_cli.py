import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from satcal.cli import main


def run(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


@pytest.fixture(scope="module")
def external(tmp_path_factory, ecir_study):
    """The ECIR answers written as an external study, plus its judgments."""
    d = tmp_path_factory.mktemp("external")
    ex = ecir_study.examples
    cols = ["query"] + [f"a{i}" for i in range(1, 6)] + [f"b{i}" for i in range(1, 6)] + ["answer"]
    ex[cols].to_csv(d / "answers.csv", index=False)
    ecir_study.judgments.to_trec(d / "qrels.txt")
    return d


def test_external_study_equals_the_dataset_analysis(external, ecir_result, tmp_path):
    res = run("analyze", "--answers", external / "answers.csv", "--judgments", external / "qrels.txt",
              "--out", tmp_path / "out", "-q")
    assert res.exit_code == 0, res.output
    bias = pd.read_csv(tmp_path / "out" / "bias.csv")
    np.testing.assert_allclose(bias[["b1", "b2", "b3"]], ecir_result.bias[["b1", "b2", "b3"]], atol=1e-9)
    # the first formulation printed is the lowest mean rank over the per-list indicators
    cols = ["b1_joint", "b2_joint", "b3_joint" if "b3_joint" in bias.columns else "b3"]
    mean_rank = bias[cols].rank(method="min").mean(axis=1)
    first = bias.assign(m=mean_rank).sort_values(["m", "b1_joint"]).formulation.iloc[0]
    assert next(line for line in res.output.splitlines() if line.startswith("   1  ")).split()[1] == first
    # intervals by default: 1000 bootstrap replicates, each interval around its estimate
    assert (bias["b1_lo"] <= bias["b1"]).all() and (bias["b1"] <= bias["b1_hi"]).all()
    import json
    assert json.loads((tmp_path / "out" / "calibration.json").read_text())["bootstrap"] == 1000


@pytest.mark.parametrize("mutate,fragment", [
    (lambda t: t.drop(columns=["b3"]), "missing column(s) b3"),
    (lambda t: t.assign(answer=["maybe"] + list(t.answer[1:])), ":2: column 'answer': answer 'maybe'"),
    (lambda t: t.assign(a1=["nope"] + list(t.a1[1:])), "answers.csv:2: column 'a1': document 'nope'"),
    (lambda t: t.assign(a2=t.a1), "answers.csv:2: list A repeats a document"),
])
def test_external_study_errors_are_one_line(external, tmp_path, mutate, fragment):
    t = pd.read_csv(external / "answers.csv", dtype=str).head(50)
    bad = tmp_path / "answers.csv"
    mutate(t).to_csv(bad, index=False)
    res = run("analyze", "--answers", bad, "--judgments", external / "qrels.txt", "--out", tmp_path / "o")
    assert res.exit_code == 2
    assert fragment in res.output and res.output.count("\n") == 1 and "Traceback" not in res.output


def test_unjudged_as_zero_is_allowed(external, tmp_path):
    t = pd.read_csv(external / "answers.csv", dtype=str).head(300)
    t.loc[0, "a1"] = "unjudged-doc"
    t.to_csv(tmp_path / "a.csv", index=False)
    res = run("analyze", "--answers", tmp_path / "a.csv", "--judgments", external / "qrels.txt",
              "--out", tmp_path / "o", "--unjudged", "zero", "-q")
    assert res.exit_code == 0, res.output


def test_refuses_to_overwrite(tmp_path):
    (tmp_path / "keep.txt").write_text("x")
    res = run("analyze", "--dataset", "ecir2015", "--out", tmp_path)
    assert res.exit_code == 2 and "--force" in res.output


def test_source_is_required():
    res = run("analyze", "--out", "x")
    assert res.exit_code == 2 and "exactly one of" in res.output


def test_help_explains():
    res = run("--help")
    assert res.exit_code == 0 and "calibration studies" in res.output and "satcal demo" in res.output
    res = run("analyze", "--help")
    assert "--population" in res.output and "report.html" in res.output


def test_console_script_reports_errors_without_traceback(tmp_path):
    bad = tmp_path / "q.txt"
    bad.write_text("q1 0 d1 x\n")
    (tmp_path / "a.csv").write_text("query,a1,b1,answer\nq1,d1,d1,a\n")
    proc = subprocess.run([sys.executable, "-m", "satcal", "analyze", "--answers", tmp_path / "a.csv",
                           "--judgments", bad, "--out", tmp_path / "o"], capture_output=True, text=True)
    assert proc.returncode == 2
    assert proc.stderr.strip() == f"satcal: error: {bad}:1: level 'x' is not an integer"


def test_analyze_with_bootstrap_on_both_backends(tmp_path):
    distributed = pytest.importorskip("dask.distributed")
    res = run("analyze", "--dataset", "ecir2015", "--bootstrap", "20", "--jobs", "2", "--out", tmp_path / "a", "-q")
    assert res.exit_code == 0, res.output
    local = pd.read_csv(tmp_path / "a" / "bias.csv")
    assert {"b1_lo", "b1_hi", "b3_lo", "b3_hi"} <= set(local.columns)
    with distributed.LocalCluster(n_workers=1, threads_per_worker=2, processes=False, dashboard_address=None) as c:
        res = run("analyze", "--dataset", "ecir2015", "--bootstrap", "20", "--backend", "dask",
                  "--scheduler", c.scheduler_address, "--out", tmp_path / "b", "-q")
    assert res.exit_code == 0, res.output
    pd.testing.assert_frame_equal(local, pd.read_csv(tmp_path / "b" / "bias.csv"))


def test_workspace_journey_through_the_cli(tmp_path, ecir_study):
    q = tmp_path / "qrels.txt"
    ecir_study.judgments.to_trec(q)
    d = tmp_path / "study"
    for args in (["init", d, "--judgments", q, "--min-per-cell", "15", "--platform", "labelstudio"],
                 ["generate", d, "-q"], ["export", d], ["simulate", d]):
        res = run(*args)
        assert res.exit_code == 0, (args, res.output)
    results = d / "simulated" / "labelstudio-results.json"
    res = run("ingest", d, results)
    assert res.exit_code == 0 and "rows =" in res.output
    res = run("analyze", d, "--bootstrap", "0", "-q")
    assert res.exit_code == 0, res.output
    assert (d / "analysis" / "report.html").exists() and "Workers" in (d / "analysis" / "report.html").read_text()
    res = run("power", d, "--budgets", "100,400", "--sims", "3", "--boot", "10", "-q")
    assert res.exit_code == 0, res.output
    assert (d / "power" / "power.csv").exists()
