"""Every result type answers to one protocol (satcal._results): tidy ``tables()``, a text
``summary()``, ``_repr_html_()``, and ``save()`` writing exactly what ``tables()`` returns,
through one writer (read back and compared cell by cell)."""
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from satcal._results import FLOAT_FORMAT, ResultTables, read_table

assert FLOAT_FORMAT == "%.10g"  # the tolerance below (rtol 1e-9) is for ten significant digits

FORMS = ["lin-const", "exp2-const", "lin-log2", "exp2-log2"]
QRELS = "q1 0 d1 2\nq1 0 d2 1\nq1 0 d3 0\nq2 0 d4 2\nq2 0 d5 0\n"
RUN_A = "q1 Q0 d1 1 9.0 sysA\nq1 Q0 d2 2 8.0 sysA\nq2 Q0 d5 1 5.0 sysA\nq2 Q0 d4 2 4.0 sysA\n"
RUN_B = "q1 Q0 d3 1 3.0 sysB\nq1 Q0 d1 2 2.0 sysB\nq2 Q0 d4 1 1.0 sysB\nq2 Q0 dX 2 1.0 sysB\n"


@pytest.fixture(scope="module")
def calibration(ecir_study):
    from satcal.analysis import calibrate
    return calibrate(ecir_study, FORMS, bootstrap=20, seed=1, model_check_folds=2)


def _generation(ecir_study, calibration):
    from satcal.generate import Design, generate
    return generate(ecir_study.judgments, Design(formulations=FORMS[:2], min_per_cell=2, seed=1))


def _power(ecir_study, calibration):
    from satcal.analysis.power import power_analysis
    from satcal.measures import formulation
    from satcal.simulate import UserModel
    return power_analysis(ecir_study.examples, 5, 2, UserModel(), [formulation(f) for f in FORMS],
                          budgets=(60,), sims=2, boot=10, seed=3)


def _evaluation(ecir_study, calibration, tmp_path_factory):
    from satcal.analysis.evaluate import Calibration, evaluate_runs
    from satcal.judgments import read_judgments
    from satcal.runs import read_runs
    d = tmp_path_factory.mktemp("runs")
    (d / "qrels").write_text(QRELS)
    (d / "a.run").write_text(RUN_A)
    (d / "b.run").write_text(RUN_B)
    cal = Calibration("lin-const", np.array([-2.0, 4.0, 0.0]), np.array([-1.0, 3.0, 0.0]))
    return evaluate_runs(read_judgments(d / "qrels"), read_runs([d / "a.run", d / "b.run"]), cal, k=2)


def _reliability(ecir_study, calibration):
    from satcal.judgments import Judgments
    from satcal.reliability import reliability_report, simulate_runs
    rng = np.random.default_rng(3)
    rows = [(f"q{q}", f"d{q}_{i}", int(rng.choice([0, 0, 1, 2]))) for q in range(6) for i in range(12)]
    j = Judgments(pd.DataFrame(rows, columns=["query", "doc", "level"]))
    return reliability_report(simulate_runs(j, n_systems=4, depth=8, seed=4), j, FORMS[:2], k=5,
                              replicates=20, seed=1)


def _ingest(ecir_study, calibration):
    # built from its tables: a real ingest needs a study directory, and the protocol is what is
    # checked here (ingest's own row accounting is checked in test_ingest)
    from satcal.ingest import ANSWER_TABLE_COLUMNS, REJECT_TABLE_COLUMNS, IngestReport
    answers = pd.DataFrame([["e1", "w1", "a_better", False, None, "2024-01-01", "r.csv", "1", "i1", False,
                             2, "h", 12.5]], columns=ANSWER_TABLE_COLUMNS)
    rejects = pd.DataFrame([["r.csv", 3, "2", "i2", "w2", "=cmd", "unknown answer"]], columns=REJECT_TABLE_COLUMNS)
    files = pd.DataFrame({"source_file": ["r.csv"], "platform": ["appen"], "rows": [2], "answers": [1],
                          "rejects": [1], "new": [True]})
    workers = pd.DataFrame({"worker_id": ["w1"], "trust": [0.875], "excluded": [False], "reason": [""]})
    return IngestReport(files, rejects["reason"].value_counts(), workers, answers, rejects)


def _agreement(ecir_study, calibration):
    # three examples answered twice or three times: alpha and pairwise agreement by hand are
    # checked in test_quality; here the protocol
    from satcal.quality import agreement
    answers = pd.DataFrame({"example_id": ["e1", "e1", "e2", "e2", "e3", "e3", "e3"],
                            "answer": ["a_better", "a_better", "both_bad", "b_better", "both_good", "both_good",
                                       "a_better"]})
    return agreement(answers)


BUILDERS = {
    "CalibrationResult": lambda s, c: c,
    "BootstrapResult": lambda s, c: c.bootstrap,
    "RankingVerdict": lambda s, c: c.verdict,
    "GenerationResult": _generation,
    "PowerResult": _power,
    "ReliabilityResult": _reliability,
    "IngestReport": _ingest,
    "Agreement": _agreement,
}


def _cell(v) -> str:
    """A cell as CSV text carries it: missing as empty, numbers by value."""
    if v is None or (isinstance(v, float) and np.isnan(v)):
        return ""
    if isinstance(v, (bool, np.bool_)):
        return str(bool(v))
    if isinstance(v, (int, np.integer)) or (isinstance(v, (float, np.floating)) and float(v).is_integer()):
        return str(int(v))
    return str(v)


def _assert_same(read: pd.DataFrame, table: pd.DataFrame, name: str) -> None:
    """A table read back equals the one written: same columns and rows, floats to the writer's
    ten digits, every other cell by its text (CSV carries no types)."""
    assert list(read.columns) == [str(c) for c in table.columns], name
    assert len(read) == len(table), name
    for col in table.columns:
        ours, back = table[col].reset_index(drop=True), read[str(col)]
        if pd.api.types.is_float_dtype(ours):
            np.testing.assert_allclose(back.to_numpy(float), ours.to_numpy(float), rtol=1e-9, atol=0,
                                       equal_nan=True, err_msg=f"{name}.{col}")
        else:
            assert back.map(_cell).tolist() == ours.map(_cell).tolist(), f"{name}.{col}"


@pytest.fixture(scope="module")
def results(ecir_study, calibration, tmp_path_factory):
    out = {}
    for name, build in BUILDERS.items():
        out[name] = build(ecir_study, calibration)
    out["EvaluationResult"] = _evaluation(ecir_study, calibration, tmp_path_factory)
    return out


@pytest.mark.parametrize("name", list(BUILDERS) + ["EvaluationResult"])
def test_every_result_has_the_protocol(results, name, tmp_path):
    result = results[name]
    assert type(result).__name__ == name and isinstance(result, ResultTables)
    tables = {k: t for k, t in result.tables().items() if t is not None}
    assert tables and all(isinstance(t, pd.DataFrame) for t in tables.values())
    text = result.summary()
    assert isinstance(text, str) and text.strip()
    assert "<" in result._repr_html_()
    written = result.save(tmp_path)
    csvs = sorted(p.name for p in tmp_path.glob("*.csv"))
    assert csvs == sorted(result.table_file(t) for t in tables)
    for t, table in tables.items():
        _assert_same(read_table(tmp_path / result.table_file(t)), table, f"{name}.{t}")
    assert all(Path(p).exists() for p in written.values())


def test_a_formula_cell_is_written_safe_and_read_back_as_it_was(results, tmp_path):
    report = results["IngestReport"]
    report.save(tmp_path)
    assert "'=cmd" in (tmp_path / "rejects.csv").read_text()
    assert read_table(tmp_path / "rejects.csv")["answer"].tolist() == ["=cmd"]


def test_summaries_that_were_dicts_keep_their_data_in_as_dict(results):
    gen = results["GenerationResult"]
    d = gen.as_dict()
    assert d["examples"] == len(gen.examples) and d["complete"] == gen.complete
    assert str(d["examples"]) in gen.summary()


@pytest.mark.parametrize("name", ["PowerResult", "EvaluationResult", "GenerationResult", "ReliabilityResult"])
def test_plot_draws_on_the_callers_axes(results, name):
    from satcal.fileio import new_figure
    fig, axes = new_figure(1, 2)
    one_panel = name in ("EvaluationResult", "ReliabilityResult")  # one discount in the reliability fixture
    drawn = results[name].plot(ax=axes[:1] if name == "ReliabilityResult" else axes[0] if one_panel else axes)
    assert drawn is fig
    assert all(ax.has_data() or ax.images for ax in (axes[:1] if one_panel else axes))


@pytest.mark.parametrize("kwargs, says", [
    ({"bootstrap": 1}, "bootstrap must be 0 (none) or at least 2 replicates, got 1"),
    ({"bootstrap": -1}, "bootstrap must be 0 (none) or at least 2 replicates, got -1"),
    ({"bootstrap": 2.5}, "bootstrap must be 0 (none) or at least 2 replicates, got 2.5"),
    ({"n_bins": 0}, "n_bins must be a whole number of bins, at least 1, got 0"),
    ({"model_check_folds": 1}, "model_check_folds must be 0 (no check) or at least 2 folds, got 1"),
    ({"model_check_folds": -1}, "model_check_folds must be 0 (no check) or at least 2 folds, got -1"),
    ({"n_jobs": 0}, "n_jobs must be a number of processes, or -1 for every core"),
    ({"seed": "a"}, "seed must be a whole number >= 0 (e.g. seed=2015), got 'a'"),
    ({"seed": 2.5}, "seed must be a whole number >= 0 (e.g. seed=2015), got 2.5"),
    ({"seed": -1}, "seed must be a whole number >= 0 (e.g. seed=2015), got -1"),
])
def test_calibrate_refuses_a_bad_count_in_one_line_before_fitting(ecir_study, kwargs, says, monkeypatch):
    """Each bad count is a one-line SatcalError naming the parameter and what it takes, before
    any curve is fitted (not NumPy's, scikit-learn's or joblib's message, nor after a minute
    of fits)."""
    import satcal
    from satcal.analysis import calibration
    from satcal.errors import SatcalError
    monkeypatch.setattr(calibration, "collapse_study", lambda *a: pytest.fail("fitting began"))
    with pytest.raises(SatcalError) as err:
        satcal.calibrate(ecir_study, FORMS, **{"bootstrap": 0, **kwargs})
    assert says in str(err.value) and "\n" not in str(err.value)


def _seeded_entry_points(ecir_study):
    """Every public function taking a seed, called cheaply with ``seed=s``."""
    import satcal
    from satcal.analysis.power import power_analysis
    from satcal.measures import formulation
    from satcal.reliability import simulate_runs
    from satcal.simulate import UserModel
    j = ecir_study.judgments
    return {
        "simulate_runs": lambda s: simulate_runs(j, n_systems=3, depth=5, seed=s),
        "reliability_report": lambda s: satcal.reliability_report(
            simulate_runs(j, n_systems=3, depth=5, seed=0), j, ["lin-const"], replicates=5, seed=s),
        "power_analysis": lambda s: power_analysis(ecir_study.examples, 5, 2, UserModel(),
                                                   [formulation(f) for f in ("lin-const", "exp2-log2")],
                                                   budgets=(60,), sims=2, boot=10, seed=s),
        "build_traps": lambda s: satcal.build_traps(j, seed=s),
        "Design": lambda s: satcal.Design(seed=s),
    }


@pytest.mark.parametrize("seed", ["a", 2.5, -1, True])
def test_every_seeded_entry_point_refuses_a_bad_seed_in_one_line(ecir_study, seed):
    """A seed NumPy's generators do not take (a string, a float, a negative number) or a bool
    is the one shared one-line SatcalError in every public function taking one (NumPy's was a
    TypeError from inside SeedSequence; Design took any, generate failed later)."""
    from satcal.errors import SatcalError
    for name, call in _seeded_entry_points(ecir_study).items():
        with pytest.raises(SatcalError) as err:
            call(seed)
        text = str(err.value)
        assert f"seed must be a whole number >= 0 (e.g. seed=2015), got {seed!r}" in text, name
        assert "\n" not in text, name


def test_a_numpy_integer_seed_is_the_same_seed(ecir_study):
    """NumPy's integers are seeds too, drawing what the same Python int draws."""
    from satcal.reliability import simulate_runs
    a = simulate_runs(ecir_study.judgments, n_systems=3, depth=5, seed=np.int64(7)).table
    b = simulate_runs(ecir_study.judgments, n_systems=3, depth=5, seed=7).table
    pd.testing.assert_frame_equal(a, b)
    assert not a.equals(simulate_runs(ecir_study.judgments, n_systems=3, depth=5, seed=8).table)


def test_calibrate_runs_on_one_blas_thread(ecir_study, monkeypatch):
    """calibrate limits BLAS to one thread while it fits (threadpoolctl's own report, read where
    the fitting begins) and gives the caller its own limit back: b32e2bd had moved its
    ``one_blas_thread`` onto the count check above it."""
    from threadpoolctl import threadpool_info, threadpool_limits
    import satcal
    from satcal.analysis import calibration
    blas = lambda: [p["num_threads"] for p in threadpool_info() if p["user_api"] == "blas"]
    seen = []

    class Stop(Exception):
        pass

    def record(*args, **kwargs):
        seen.append(blas())
        raise Stop

    monkeypatch.setattr(calibration, "collapse_study", record)
    with threadpool_limits(limits=2, user_api="blas"):
        before = blas()
        with pytest.raises(Stop):
            satcal.calibrate(ecir_study, FORMS, bootstrap=0, model_check_folds=0)
        after = blas()
    assert before and seen and seen[0] == [1] * len(before) and after == before


def test_notebook_misuse_is_a_one_line_error_that_says_what_to_pass(calibration, ecir_study, tmp_path):
    """What a notebook user tries by mistake: a directory for the study, the study for the
    result, the ranking's estimator name as p_sat's model, p_sat at a score outside [0, 1]
    (its quadratic extrapolated), intervals of an analysis without a bootstrap. Each is a SatcalError of one line naming what to pass instead."""
    import satcal
    from satcal.analysis import calibrate
    from satcal.errors import SatcalError
    cases = [
        (lambda: satcal.calibrate(str(tmp_path), FORMS), "study must be a StudyData", "satcal.load_ecir2015()"),
        (lambda: satcal.write_analysis(ecir_study, tmp_path / "out"), "write_analysis writes a calibration",
         "satcal.calibrate(study)"),
        (lambda: calibration.p_sat("lin-const", 0.5, model="paper"), "model must be one of standardised, joint, "
         "published", "got 'paper'"),
        (lambda: calibration.p_sat("lin-const", 1.2), "phi must be normalised scores in [0, 1], got 1.2",
         "satcal.score_table"),
        (lambda: calibration.p_sat("lin-const", [0.5, -0.1, 3.0], model="published"), "got -0.1 and 1 more outside",
         "scores of the formulation"),
        (lambda: satcal.figure_intervals(calibrate(ecir_study, FORMS[:1], bootstrap=0, model_check_folds=0,
                                                   sat_model="published")),
         "figure_intervals needs a bootstrapped calibration", "bootstrap=1000"),
    ]
    for call, what, fix in cases:
        with pytest.raises(SatcalError) as err:
            call()
        assert what in str(err.value) and fix in str(err.value) and "\n" not in str(err.value)
    assert not (tmp_path / "out").exists()
    # the right model name still answers, with the paper's curve (expit of fits.csv's betas)
    row = calibration.fits.query("formulation == 'lin-const' and curve == 'sat' and sat_model == 'published'")
    b = row[["beta0", "beta1", "beta2"]].to_numpy()[0]
    assert calibration.p_sat("lin-const", 0.5, model="published") == pytest.approx(
        1 / (1 + np.exp(-(b[0] + b[1] * 0.5 + b[2] * 0.25))))
    # the ends of [0, 1] are scores too
    np.testing.assert_allclose(calibration.p_sat("lin-const", [0.0, 1.0], model="published"),
                               1 / (1 + np.exp(-np.array([b[0], b.sum()]))))


# RankingVerdict holds no table: its dataclass repr (six short fields) is its one line
@pytest.mark.parametrize("name", [n for n in BUILDERS if n != "RankingVerdict"] + ["EvaluationResult"])
def test_repr_is_the_summarys_first_line(results, name):
    """A result typed at a terminal prompt shows one line, its summary's first (not every cell
    of every table, as a dataclass's own repr does)."""
    result = results[name]
    text = repr(result)
    assert "\n" not in text and len(text) < 300 and text.startswith(f"<{name}")
    if type(result).__repr__ is ResultTables.__repr__:   # Agreement words its own
        assert result.summary().splitlines()[0].strip("<>:") in text


def test_a_study_repr_is_its_directory(tmp_path, ecir_study):
    """``Study.open(dir)`` at a prompt shows its directory, not the whole study.toml."""
    import satcal
    ecir_study.judgments.to_trec(tmp_path / "qrels.txt")
    study = satcal.Study.init(tmp_path / "st", tmp_path / "qrels.txt")
    assert repr(study) == f"Study(path={(tmp_path / 'st')!r})" and study.config["study"]["k"] == 5


def test_a_path_where_a_table_goes_is_a_one_line_error_and_one_run_path_is_one_run(tmp_path):
    """The judgments of read_external_study and reliability_report, and the runs of the latter,
    are tables read first (a path there raised AttributeError deep inside); read_runs takes one
    path as one run file (a string was read letter by letter: "/: is a directory")."""
    import satcal
    from satcal.errors import SatcalError
    (tmp_path / "qrels.txt").write_text(QRELS)
    (tmp_path / "a.run").write_text(RUN_A)
    (tmp_path / "answers.csv").write_text("query,a1,a2,b1,b2,answer\nq1,d1,d2,d3,d2,a_better\n")
    judgments = satcal.read_judgments(tmp_path / "qrels.txt")
    one = satcal.read_runs(str(tmp_path / "a.run"))
    pd.testing.assert_frame_equal(one.table, satcal.read_runs([tmp_path / "a.run"]).table)
    assert one.systems == ["sysA"] and len(one.table) == 4
    cases = [
        (lambda: satcal.read_external_study(tmp_path / "answers.csv", str(tmp_path / "qrels.txt")),
         "judgments must be a Judgments: read the file with satcal.read_judgments(path), got str"),
        (lambda: satcal.reliability_report(one, tmp_path / "qrels.txt", FORMS),
         "judgments must be a Judgments: read the file with satcal.read_judgments(path), got PosixPath"),
        (lambda: satcal.reliability_report([str(tmp_path / "a.run")], judgments, FORMS),
         "runs must be a Runs: read the run files with satcal.read_runs(paths), got list"),
    ]
    for call, says in cases:
        with pytest.raises(SatcalError) as err:
            call()
        assert str(err.value) == says
    assert satcal.read_external_study(tmp_path / "answers.csv", judgments).answers.tolist() == ["a_better"]
