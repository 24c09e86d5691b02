import re
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


#: Five formulations, five of the six gains and five of the six discounts: the external study's
#: default analysis (1,000 replicates) on them alone costs about a seventh of all 36's.
SPREAD = ["lin-const", "exp2-log2", "bin1-zipf", "exp5-lin", "bin2-log3"]


def test_external_study_equals_the_dataset_analysis(external, ecir_result, tmp_path):
    res = run("analyze", "--answers", external / "answers.csv", "--judgments", external / "qrels.txt",
              "--out", tmp_path / "out", "--formulations", ",".join(SPREAD), "-q")
    assert res.exit_code == 0, res.output
    bias = pd.read_csv(tmp_path / "out" / "bias.csv")
    want = ecir_result.bias.set_index("formulation").loc[SPREAD, ["b1", "b2", "b3"]]
    assert list(bias.formulation) == SPREAD
    np.testing.assert_allclose(bias[["b1", "b2", "b3"]], want, atol=1e-9)
    # the first formulation printed is the lowest mean rank over the standardised indicators
    # (the lead estimator when the study has judgments)
    cols = ["b1_std", "b2_std", "b3_std"]
    mean_rank = bias[cols].rank(method="min").mean(axis=1)
    first = bias.assign(m=mean_rank).sort_values(["m", "b1_std"]).formulation.iloc[0]
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
              "--out", tmp_path / "o", "--unjudged", "zero", "--bootstrap", "0", "--formulations", "lin-const", "-q")
    assert res.exit_code == 0, res.output
    import json  # every answer analysed, the unjudged document's among them
    assert json.loads((tmp_path / "o" / "calibration.json").read_text())["answers"] == 300


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


def test_every_option_says_what_it_does_and_its_default():
    """Each option of each command has a help text in --help, and one that takes a value
    with a default shows the default or names it in its help."""
    import click
    UNSET = getattr(__import__("click._utils", fromlist=["UNSET"]), "UNSET", None)  # click >= 8.3
    missing, silent_default = [], []
    for name, command in main.commands.items():
        for param in command.params:
            if not isinstance(param, click.Option) or param.name == "help":
                continue
            if not (param.help or "").strip():
                missing.append(f"{name} {param.opts[0]}")
            elif (not param.is_flag and param.default not in (None, UNSET) and not param.show_default
                  and "default" not in param.help.lower()):
                silent_default.append(f"{name} {param.opts[0]}")
    assert missing == [] and silent_default == [], (missing, silent_default)
    # and the texts reach --help
    assert "Port to listen on." in run("serve", "--help").output


def test_console_script_reports_errors_without_traceback(tmp_path):
    bad = tmp_path / "q.txt"
    bad.write_text("q1 0 d1 x\n")
    (tmp_path / "a.csv").write_text("query,a1,b1,answer\nq1,d1,d1,a\n")
    proc = subprocess.run([sys.executable, "-m", "satcal", "analyze", "--answers", tmp_path / "a.csv",
                           "--judgments", bad, "--out", tmp_path / "o"], capture_output=True, text=True)
    assert proc.returncode == 2
    assert proc.stderr.strip() == f"satcal: error: {bad}:1: level 'x' is not an integer"


def test_analyze_with_bootstrap_on_both_backends(tmp_path):
    """The same bootstrap on loky and on dask gives the same bias.csv. (Four formulations: the
    bootstrap's tasks are one a formulation, so four still spread over both workers.)"""
    distributed = pytest.importorskip("dask.distributed")
    forms = "lin-const,exp2-log2,bin2-zipf,lin-log2"
    res = run("analyze", "--dataset", "ecir2015", "--formulations", forms, "--bootstrap", "20", "--jobs", "2",
              "--out", tmp_path / "a", "-q")
    assert res.exit_code == 0, res.output
    local = pd.read_csv(tmp_path / "a" / "bias.csv")
    assert {"b1_lo", "b1_hi", "b3_lo", "b3_hi"} <= set(local.columns)
    with distributed.LocalCluster(n_workers=1, threads_per_worker=2, processes=False, dashboard_address=None) as c:
        res = run("analyze", "--dataset", "ecir2015", "--formulations", forms, "--bootstrap", "20",
                  "--backend", "dask", "--scheduler", c.scheduler_address, "--out", tmp_path / "b", "-q")
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


# --------------------------------------------------------------------------------------------
# Issue 25.5 and 25.6: spreadsheet-safe tables everywhere; no empty --out after a failure
# --------------------------------------------------------------------------------------------
RISKY = ("=", "+", "-", "@", "\t", "\r")


def _risky_cells(path):
    """Cells of a CSV a spreadsheet would run as a formula (read with the csv module, not
    satcal's reader): text starting with = + - @ tab or CR that is not a number."""
    import csv
    bad = []
    with open(path, newline="", encoding="utf-8") as fh:
        for row in csv.reader(fh):
            for cell in row:
                if cell.startswith(RISKY):
                    try:
                        float(cell)
                    except ValueError:
                        bad.append(cell)
    return bad


@pytest.fixture
def hostile_ids(tmp_path):
    """Judgments whose query and document ids start with every formula prefix."""
    qrels = tmp_path / "qrels.tsv"
    lines = ["query\tdoc\tlevel"]
    for q in ("=q1", "+q2", "@q3", "-q4", "q5", "-6"):
        lines += [f"{q}\t{'=@+-'[d % 4]}d{q[-1]}{d}\t{d % 3}" for d in range(14)]
    qrels.write_text("\n".join(lines) + "\n")
    return qrels


def test_workspace_tables_are_spreadsheet_safe_and_read_back_exactly(hostile_ids, tmp_path):
    """examples, traps, scores, coverage, key and items of a study whose ids start with
    = + - @: no cell a spreadsheet would run; the csv platform's upload file keeps the ids as
    they are; the answers still join the examples (ids read back exactly)."""
    from satcal.judgments import read_judgments
    from satcal.workspace import Workspace
    ws_dir = tmp_path / "s"
    for args in (("init", ws_dir, "--judgments", hostile_ids, "--k", "3", "--min-per-cell", "1",
                  "--platform", "csv"), ("generate", ws_dir, "-q"), ("export", ws_dir)):
        res = run(*args)
        assert res.exit_code == 0, res.output
    for name in ("examples.csv", "traps.csv", "scores.csv", "coverage.csv", "key.csv", "items.csv",
                 "batches/keys/batch-1.csv"):
        assert _risky_cells(ws_dir / name) == [], name
    raw = pd.read_csv(ws_dir / "batches" / "csv" / "items.csv", dtype=str, keep_default_na=False)
    assert raw["query"].str.startswith(("=", "+", "@", "-")).any()  # the platform gets the ids as they are
    ws = Workspace.open(ws_dir)
    judged = read_judgments(hostile_ids)
    examples = ws.table("examples.csv")
    assert set(examples["query"]) <= set(judged.table["query"])
    assert set(examples["a1"]) <= set(judged.table["doc"])
    # the simulated crowd answers the batch; every answer resolves and joins its example
    assert run("simulate", ws_dir).exit_code == 0
    res = run("ingest", ws_dir, ws_dir / "simulated" / "csv-results.csv", "--threshold", "0")
    # every row resolves: the only rejects are the answers of workers the quality rules
    # exclude (trust is off at threshold 0; the others stay), and those are the simulated spammers
    assert res.exit_code == 0 and re.search(r"rejects\n(  \d+ rows rejected: excluded worker\n)?workers", res.output), res.output
    import json
    spammers = set(json.loads((ws_dir / "simulated" / "csv-truth.json").read_text())["spammers"])
    workers = Workspace.open(ws_dir).table("workers.csv")
    assert set(workers.loc[workers["excluded"] == "True", "worker_id"]) <= spammers
    study = Workspace.open(ws_dir).study_data()
    levels = judged.lookup(study.examples["query"], study.examples[["a1", "a2", "a3"]].to_numpy())
    assert (levels == study.levels("a")).all()


def test_evaluate_and_reliability_tables_are_spreadsheet_safe(tmp_path, ecir_result):
    """Run tags reached evaluate's and reliability's tables verbatim (=HYPERLINK in 3,675
    cells); now no cell runs, and satcal's reader gives the tags back."""
    from satcal.fileio import spreadsheet_value
    from satcal.report import write_analysis
    write_analysis(ecir_result, tmp_path / "cal", figures=False, report=False)
    qrels = tmp_path / "qrels"
    qrels.write_text("".join(f"q{q} 0 d{d} {(d + q) % 3}\n" for q in range(4) for d in range(8)))
    tags = ['=HYPERLINK("http://x","y")', "@SUM(1)", "+cmd", "-x"]
    runs = []
    for i, tag in enumerate(tags):
        f = tmp_path / f"r{i}.run"
        order = [np.random.default_rng([i, q]).permutation(8)[:6] for q in range(4)]
        f.write_text("".join(f"q{q} Q0 d{order[q][d]} {d + 1} {10 - d} {tag}\n"
                             for q in range(4) for d in range(6)))
        runs += ["--run", f]
    res = run("evaluate", "--judgments", qrels, *runs, "--calibration", tmp_path / "cal",
              "--formulation", "lin-const,exp2-log2", "--out", tmp_path / "ev")
    assert res.exit_code == 0, res.output
    res = run("reliability", "--judgments", qrels, *runs, "--k", "5", "--replicates", "100",
              "--out", tmp_path / "rel", "-q")
    assert res.exit_code == 0, res.output
    written = list((tmp_path / "ev").glob("*.csv")) + list((tmp_path / "rel").glob("*.csv"))
    assert len(written) >= 6
    for path in written:
        assert _risky_cells(path) == [], path.name
    systems = spreadsheet_value(pd.read_csv(tmp_path / "ev" / "evaluation_per_system.csv", dtype=str))
    assert sorted(set(systems["system"])) == sorted(tags)


def test_failing_commands_leave_no_empty_out(tmp_path, external, ecir_result):
    """analyze --answers, evaluate and reliability that fail after checking --out: the
    directory they were to write is not left behind, empty."""
    from satcal.report import write_analysis
    write_analysis(ecir_result, tmp_path / "cal", figures=False, report=False)
    bad = tmp_path / "bad.csv"
    bad.write_text("query,a1,b1,answer\nnope,x,y,a_better\n")
    qrels = tmp_path / "qrels"
    qrels.write_text("q1 0 d1 1\nq1 0 d2 0\n")
    off = tmp_path / "off.run"
    off.write_text("q9 Q0 d1 1 3.0 blind\n")  # retrieves for no judged query
    cases = [("analyze", "--answers", bad, "--judgments", external / "qrels.txt", "--out", tmp_path / "a" / "out"),
             ("evaluate", "--judgments", qrels, "--run", off, "--calibration", tmp_path / "cal",
              "--out", tmp_path / "e"),
             ("reliability", "--judgments", qrels, "--run", off, "--out", tmp_path / "r", "-q")]
    for args in cases:
        res = run(*args)
        assert res.exit_code == 2 and res.output.startswith("satcal: error: "), res.output
    assert not (tmp_path / "a").exists() and not (tmp_path / "e").exists() and not (tmp_path / "r").exists()


def test_levels_mean_the_same_everywhere(external, tmp_path):
    """--levels takes a list or a count in analyze as in init: 0,1,2 and 3 give the same
    analysis; a scale that is not 0..L-1 is refused in one line."""
    small = tmp_path / "answers.csv"
    pd.read_csv(external / "answers.csv").head(600).to_csv(small, index=False)
    common = ["analyze", "--answers", small, "--judgments", external / "qrels.txt", "--bootstrap", "0",
              "--sat-model", "published", "--formulations", "lin-const,exp2-log2", "-q"]
    by_list = run(*common, "--levels", "0,1,2", "--out", tmp_path / "a")
    by_count = run(*common, "--levels", "3", "--out", tmp_path / "b")
    assert by_list.exit_code == 0 and by_count.exit_code == 0, by_list.output + by_count.output
    pd.testing.assert_frame_equal(pd.read_csv(tmp_path / "a" / "bias.csv"), pd.read_csv(tmp_path / "b" / "bias.csv"))
    bad = run(*common, "--levels", "1,2,3", "--out", tmp_path / "c")
    assert bad.exit_code == 2 and "0..L-1" in bad.output and "Traceback" not in bad.output
    from satcal.workspace import Workspace
    for spec, d in (("0,1,2", "w1"), ("3", "w2")):
        res = run("init", tmp_path / d, "--judgments", external / "qrels.txt", "--levels", spec)
        assert res.exit_code == 0, res.output
    assert Workspace.open(tmp_path / "w1")["study.levels"] == Workspace.open(tmp_path / "w2")["study.levels"] == [0, 1, 2]


def test_an_interval_that_misses_its_estimate_is_drawn(tmp_path, ecir_study):
    """Issue 25.6: on a small study a percentile interval could lie wholly on one side of its
    point estimate (lin-log2's b1 on 40 of the ECIR answers); analyze drew the figure with
    negative error bars and died (ValueError: 'xerr' must not contain negative values). b1's
    interval is now the span of the percentile and the basic interval, which always holds its
    estimate; a percentile interval (b2, b3) still can miss it when nearly every replicate lies on one
    side. So the study runs end to end, and the figure is drawn from its own bias table with
    one b2_std interval (the figure draws the ranking's lead estimator, standardised with
    judgments and the joint model) moved wholly above its estimate: that bar is clipped at the
    point and the point marked with a red cross (read back from the Axes)."""
    from types import SimpleNamespace
    from satcal.report import figure_intervals
    ex = ecir_study.examples.sample(40, random_state=0)
    cols = ["query"] + [f"a{i}" for i in range(1, 6)] + [f"b{i}" for i in range(1, 6)] + ["answer"]
    ex[cols].to_csv(tmp_path / "answers.csv", index=False)
    ecir_study.judgments.to_trec(tmp_path / "qrels.txt")
    res = run("analyze", "--answers", tmp_path / "answers.csv", "--judgments", tmp_path / "qrels.txt",
              "--formulations", "lin-const,exp2-log2,lin-log2", "--bootstrap", "40", "--seed", "1",
              "--out", tmp_path / "out", "-q")
    assert res.exit_code == 0, res.output
    bias = pd.read_csv(tmp_path / "out" / "bias.csv")
    assert ((bias["b1_lo"] <= bias["b1"]) & (bias["b1"] <= bias["b1_hi"])).all()
    assert (tmp_path / "out" / "figures" / "fig4_intervals.png").exists()
    assert "a red cross marks an interval that lies wholly on one side" in (tmp_path / "out" / "report.html").read_text()
    planted = bias.copy()
    j = int(planted["b2_std"].idxmax())
    planted.loc[j, "b2_std_lo"], planted.loc[j, "b2_std_hi"] = planted.loc[j, "b2_std"] + 0.01, planted.loc[j, "b2_std"] + 0.05
    fig = figure_intervals(SimpleNamespace(bias=planted))
    crosses = [ln for ln in fig.axes[1].get_lines() if ln.get_marker() == "x"]
    assert len(crosses) == 1 and list(crosses[0].get_xdata()) == [planted.loc[j, "b2_std"]]
    assert not any(ln.get_marker() == "x" for ax in (fig.axes[0], fig.axes[2]) for ln in ax.get_lines())


def test_a_system_error_about_a_path_is_one_line(tmp_path):
    """A directory given where a results file is expected: the system's own words, one line
    naming the path, no traceback (the cause is independent of satcal: open() on a directory)."""
    import errno
    import os
    from satcal.cli import environment_error
    try:
        open(tmp_path, "rb")
    except OSError as exc:
        line = environment_error(exc)
    assert line == f"{tmp_path}: {os.strerror(errno.EISDIR)[0].lower() + os.strerror(errno.EISDIR)[1:]}"
    assert environment_error(OSError(errno.EIO, "I/O error")) is None   # no path: not for a user


@pytest.mark.parametrize("args, message", [
    (["power", "{ws}", "--budgets", "250,x"], "--budgets '250,x': expected integers separated by commas"),
    (["power", "{ws}", "--pair", "lin-const"], "--pair 'lin-const': expected two formulation ids separated by a comma"),
    (["ingest", "{ws}", "--remove", "f.csv", "--platform", "appen"],
     "--remove takes one archived file back out: give no files or --platform with it"),
    (["ingest", "{ws}", "--db", "sqlite:///x.db"], "--db reads a hosted study's database: give it with --platform serve"),
    (["ingest", "{ws}"], "give the result files to ingest (or --platform serve to read the hosted study's database)"),
    (["export", "{ws}", "--new-batch", "--next-batch"],
     "give --new-batch (the whole study again) or --next-batch (an adaptive wave), not both"),
])
def test_option_checks_outside_the_cli_keep_their_one_line(tmp_path, args, message):
    # the checks live in Study and pipeline; the command still answers with the same line
    from satcal.datasets import ecir2015_file
    ws = tmp_path / "ws"
    assert CliRunner().invoke(main, ["init", str(ws), "--judgments", str(ecir2015_file("judgments.tsv"))]).exit_code == 0
    r = CliRunner().invoke(main, [a.format(ws=ws) for a in args])
    assert (r.exit_code, r.output) == (2, f"satcal: error: {message}\n")


def test_budgets_and_pair_parse_to_the_values_written():
    from satcal.pipeline import parse_budgets, parse_pair
    assert parse_budgets("250,500,1000") == [250, 500, 1000]
    assert parse_pair("lin-const, exp2-log2") == ("lin-const", "exp2-log2")


def test_export_says_the_trap_rule_as_information_and_warns_only_when_short(tmp_path, ecir_study):
    """The trap rule's line (traps per worker, from quality.traps_needed) is printed as
    information when the batch holds the count; a batch with fewer traps than the rule asks gets
    the warning, naming the study.toml key and value to set."""
    from satcal.quality import _chance, traps_needed
    from satcal.workspace import Workspace
    q = tmp_path / "qrels.txt"
    ecir_study.judgments.to_trec(q)
    d = tmp_path / "study"
    for args in (["init", d, "--judgments", q, "--min-per-cell", "3", "--platform", "csv"], ["generate", d, "-q"]):
        assert run(*args).exit_code == 0
    ws = Workspace.open(d)
    needed = traps_needed(_chance(ws.table("traps.csv")), ws["quality.trust_threshold"], ws["quality.trap_power"])
    res = CliRunner().invoke(main, ["export", str(d)])
    assert res.exit_code == 0, res.output
    assert f"\nTraps per worker: {needed}, so that a worker answering at random" in res.stdout
    assert "warning" not in res.stderr.lower() or "traps" not in res.stderr.lower(), res.stderr
    ws.table("traps.csv").head(3).to_csv(d / "traps.csv", index=False)   # a batch short of the count
    res = CliRunner().invoke(main, ["export", str(d), "--force"])
    assert res.exit_code == 0, res.output
    short = [line for line in res.stderr.splitlines() if "the batch has 3 traps" in line]
    assert len(short) == 1 and short[0].startswith("satcal: warning: ") and short[0].endswith(
        f'set [traps] count = {needed} (or "auto")')
    assert "Traps per worker:" in res.stdout


def test_every_seed_option_refuses_a_negative_seed_before_running():
    """numpy takes no negative seed: reliability --seed -1 ran and ended in numpy's traceback
    ('expected non-negative integer'); every command's --seed refuses it as click's range."""
    seeded = [name for name, command in main.commands.items()
              if any(p.name == "seed" for p in command.params)]
    assert {"init", "analyze", "reliability", "demo"} <= set(seeded)
    for name in seeded:
        res = run(name, "--seed", "-1")
        assert res.exit_code == 2 and "-1 is not in the range x>=0" in res.output, (name, res.output)
