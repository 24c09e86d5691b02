"""Runs that chain stages outside a study directory: the demo, the analysis of published or
external answers, evaluation and reliability into an ``--out`` directory (written as one
output set), and the text the commands print of their results."""
from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path
from typing import Callable

import numpy as np

from ._threads import resolve_jobs
from .analysis import calibrate
from .datasets import ecir2015_file, load_ecir2015

__all__ = ["run_demo", "analyze_into", "evaluate_into", "reliability_into", "prepare_out", "output_dir",
           "parse_formulations", "ranking_text", "generation_text"]

#: The Prolific completion code of the demo study (a real study sets its own in study.toml).
DEMO_COMPLETION_CODE = "SATCAL-DEMO"


def run_demo(out: Path, seed: int = 2015, progress: bool = True,
             echo: Callable[[str], None] = print, min_per_cell: int = 200,
             bootstrap: int = 1000) -> dict:
    """The demo: a simulated study on the embedded judgments, then the real ECIR 2015 answers.

    Returns a summary with the ECIR analysis result, the simulated study's recovery check and
    a map of output labels to paths.

    The three parts are independent but for the reliability's join with the ECIR bias, so on
    more than one core they overlap: a second process runs the simulated study and then the
    reliability (its progress is not shown) while this one runs the ECIR 2015 calibration and
    its bootstrap workers, then draws the ECIR figures.
    Every output is the same as when the parts run one after the other (each is seeded).

    Parameters
    ----------
    out : pathlib.Path
        Directory for every output (the study under ``out/study``).
    seed : int, optional
        Seed of every random step (default 2015).
    progress : bool, optional
        Show progress (default True).
    echo : callable, optional
        Takes each line the demo says (default :func:`print`).
    min_per_cell : int, optional
        The simulated study's examples per cell (default 200).
    bootstrap : int, optional
        Bootstrap replicates of the ECIR 2015 analysis (default 1000).

    Returns
    -------
    dict
        ``result``, the recovery check and ``outputs`` (label to path).
    """
    out = Path(out)
    study = load_ecir2015()
    echo(study.notice)
    echo("1/3 A simulated study on the embedded judgments")
    cores = resolve_jobs(None)
    with _second_process(cores > 1) as side:
        simulated = side.submit(_simulated_study, out, seed, min_per_cell, progress and cores == 1)
        reliable = side.submit(_simulated_reliability, study.judgments, study.k, seed, out / "reliability",
                               progress and cores == 1)
        result = calibrate(study, seed=seed, progress=progress, bootstrap=bootstrap, sat_model="both",
                           n_jobs=cores)
        from .report import write_analysis, write_figures
        # this process draws the ECIR figures while the second one finishes the simulated study
        # and the reliability part (the longer share: 57 s against 50 in the parts' timings)
        drawn = write_figures(result, out / "ecir2015" / "figures")
        part1 = simulated.result()
        for line in part1.pop("lines"):
            echo(line)
        echo("2/3 The published ECIR 2015 answers")
        echo(f"    {len(study.examples)} examples, k = {study.k}, {study.n_levels} levels, 36 formulations, "
             f"{bootstrap} bootstrap replicates")
        echo("3/3 System-side reliability beside user-side bias (SIMULATED runs: the embedded data "
             "has no system runs)")
        rel, rel_written = reliable.result()
        rel = rel.beside(result.bias)
        rel_written.update(rel.save_beside(out / "reliability"))
        written = write_analysis(result, out / "ecir2015", drawn=drawn)
    best = rel.combined.sort_values("phi", ascending=False).iloc[0]
    echo(f"    most dependable on the simulated runs: {best.formulation} (Phi = {best.phi:.3f}); see "
         f"{rel_written['user_vs_system']}")
    outputs = {"ECIR 2015 report": written["report"],
               "ECIR 2015 bias table": written["bias"],
               "ECIR 2015 ANOVA": written["anova"],
               "ECIR 2015 figures": str(Path(written["fig1_sat.png"]).parent),
               **part1.pop("outputs"),
               "reliability beside bias (simulated runs)": rel_written["user_vs_system"],
               "reliability tables": str(out / "reliability")}
    return {"result": result, "reliability": rel, **part1, "outputs": outputs}


class _Inline:
    """An executor that runs each task when it is submitted (one core: nothing to overlap)."""

    def submit(self, func, *args):
        """Run ``func(*args)`` now; a done future of its result (or its error).

        Parameters
        ----------
        func : callable
        *args
            Its arguments.
        """
        from concurrent.futures import Future
        done = Future()
        try:
            done.set_result(func(*args))
        except BaseException as error:  # raised where the result is asked for, as a process's would be
            done.set_exception(error)
        return done


@contextmanager
def _second_process(parallel: bool):
    """One worker process when ``parallel``, else :class:`_Inline`; shut down on exit (its task
    killed when this one failed).

    The process is loky's, as the bootstrap's are: started afresh, it does not run the main
    script again (a caller's script needs no ``if __name__ == "__main__"`` guard).

    Parameters
    ----------
    parallel : bool
        Whether a second core is there to use.
    """
    if not parallel:
        yield _Inline()
        return
    from joblib.externals.loky import ProcessPoolExecutor
    pool = ProcessPoolExecutor(max_workers=1)
    try:
        yield pool
    except BaseException:
        pool.shutdown(wait=True, kill_workers=True)
        raise
    pool.shutdown(wait=True)


def _simulated_study(out: Path, seed: int, min_per_cell: int, progress: bool) -> dict:
    """Part 1 of the demo: a study on the embedded judgments, simulated, ingested, analysed and
    checked against the simulation's truth. Returns the lines it says (``lines``), its outputs
    (``outputs``) and the recovery check (the keys of :func:`run_demo`'s summary).

    Parameters
    ----------
    out : pathlib.Path
        The demo's directory (the study goes in ``out/study``).
    seed : int
        Seed of every random step.
    min_per_cell : int
        Examples per cell.
    progress : bool
        Show progress.
    """
    from .study import Study
    lines = []
    echo = lines.append
    ws = Study.init(out / "study", ecir2015_file("judgments.tsv"), seed=seed, min_per_cell=min_per_cell,
                    platform="appen", force=True, values={"serve.completion_code": DEMO_COMPLETION_CODE})
    gen = ws.generate(force=True, progress=progress)
    echo(f"    generate: {gen.n_examples} examples (cell floor {gen.lower_bound}), "
         f"{len(gen.infeasible)} infeasible cells")
    import warnings
    from .errors import SatcalWarning
    with warnings.catch_warnings():  # the embedded music data has ids only: no titles to show
        warnings.simplefilter("ignore", SatcalWarning)
        ws.export(force=True)
    results, truth = ws.simulate(force=True)
    echo(f"    simulate: {truth['answers']} answers from {truth['model']['workers']} workers, "
         f"{len(truth['spammers'])} of them spammers")
    report = ws.ingest([results])
    total = next(line for line in report.lines() if line.startswith("total:"))
    workers = next(line for line in report.lines() if line.startswith("workers:"))
    for line in (total, workers):
        echo("    ingest: " + line.strip())
    excluded = set(report.workers.loc[report.workers["excluded"], "worker_id"])
    caught = len(set(truth["spammers"]) & excluded)
    honest_out = len(excluded - set(truth["spammers"]))
    honest = int(truth["model"]["workers"]) - len(truth["spammers"])
    echo(f"    traps caught {caught} of {len(truth['spammers'])} spammers and excluded {honest_out} of "
         f"{honest} honest workers")
    sim = ws.analyze(force=True, seed=seed, progress=progress, sat_model="both", bootstrap=0)
    f_true = truth["model"]["formulation"]
    curves = sim.curves[(sim.curves.formulation == f_true) & (sim.curves.curve == "sat")]
    curve = curves[curves.sat_model == "published"]
    true_p = np.interp(curve.x, truth["p_sat_grid"], truth["p_sat_true"])
    inside = float(np.mean((true_p >= curve.lo) & (true_p <= curve.hi)))
    joint = curves[curves.sat_model == "joint"]
    list_p = np.interp(joint.x, truth["p_sat_grid"], truth["p_sat_list"])
    inside_joint = float(np.mean((list_p >= joint.lo) & (list_p <= joint.hi)))
    rank = int(sim.ranking.index[sim.ranking.formulation == f_true][0]) + 1
    # the standardised estimand of these users, computed from the simulated crowd itself: the
    # formulation users follow need not be the least biased (b1 measures |phi - s*(phi)|)
    from .analysis.adaptive import standardised_truth
    from .simulate import UserModel
    true_b1 = standardised_truth(ws.judgments(), UserModel(**truth["model"]), list(sim.bias["formulation"]),
                                 k=ws.k, n_levels=int(sim.meta["provenance"]["levels"]), reference_seed=seed)
    true_best = str(true_b1.idxmin())
    est_b1 = sim.bias.set_index("formulation")["b1_std"]
    rank_std = int(est_b1.rank(method="min")[true_best])
    agreement = float(est_b1.rank().corr(true_b1.reindex(est_b1.index).rank()))
    echo(f"    analyze: the paper's P(Sat|phi) estimates satisfaction among answers where both lists got "
         f"the same verdict; that estimand of {f_true} lies in its 95% band over {100 * inside:.0f}% of "
         f"[0, 1]. The joint model's s(phi) estimates the per-list satisfaction; the simulated users' "
         f"per-list curve lies in its band over {100 * inside_joint:.0f}% of [0, 1] (the simulation "
         f"adds worker heterogeneity and position bias; the joint model has the heterogeneity only as an effect shared by an answer's two lists, and no position bias). "
         f"{f_true} ranks {rank} of {len(sim.ranking)} by bias. For these users the least b1_std "
         f"(from the simulated crowd itself) is {true_best}'s; the estimate ranks it {rank_std} of "
         f"{len(est_b1)}, and ranks the 36 by b1_std at Spearman {agreement:.2f} with the truth")
    echo(f"    try the hosted study on this batch: satcal serve {ws.path} (Prolific completion "
         f"code {DEMO_COMPLETION_CODE})")
    outputs = {"simulated study (workspace)": str(ws.path),
               "simulated study coverage map": str(ws.file("coverage.png")),
               "simulated study Appen batch": str(ws.path / "batches" / "appen"),
               "simulated study answers / workers": f"{ws.file('answers.csv')}, {ws.file('workers.csv')}",
               "simulated study report": str(ws.path / "analysis" / "report.html")}
    return {"lines": lines, "outputs": outputs, "simulated": sim, "truth": truth, "band_coverage": inside,
            "joint_band_coverage": inside_joint, "truth_rank": rank, "true_least_biased": true_best,
            "true_least_biased_rank": rank_std, "b1_std_spearman": agreement, "spammers_caught": caught}


def _simulated_reliability(judgments, k: int, seed: int, out_dir: Path, progress: bool):
    """Part 3 of the demo but its join with the calibration's bias: system-side reliability of
    the 36 formulations (ideal-normalised) on 12 simulated runs (written to
    ``out_dir/simulated-runs``), saved into ``out_dir``. Returns the result and what it wrote
    (:meth:`~satcal.reliability.ReliabilityResult.save`).

    Parameters
    ----------
    judgments : satcal.judgments.Judgments
        The embedded judgments.
    k : int
        The depth scored.
    seed : int
        Seed of the runs and of the replicates.
    out_dir : pathlib.Path
        The reliability's directory.
    progress : bool
        Show progress.
    """
    from .measures import study_formulations
    from .reliability import reliability_report, simulate_runs
    runs = simulate_runs(judgments, n_systems=12, seed=seed, out_dir=out_dir / "simulated-runs")
    rel = reliability_report(runs, judgments, study_formulations(normalization="ideal"), k=k, seed=seed,
                             progress=progress)
    return rel, rel.save(out_dir)


# ------------------------------------------------------------------------------------------
# Runs outside a study directory (an --out directory of their own), for the command line
# ------------------------------------------------------------------------------------------
def prepare_out(out: Path, force: bool, create: bool = True) -> Path:
    """Check ``--out`` (refused when it holds files, unless ``force``); made only if ``create``,
    so a command that checks it before its work leaves nothing when the work fails.

    Parameters
    ----------
    out : pathlib.Path
        The --out directory.
    force : bool
        Whether an --out directory that holds files may be written into.
    create : bool, optional
        Make the directory (default True).

    Returns
    -------
    pathlib.Path

    Raises
    ------
    SatcalError
        ``out`` is a file, or holds files and ``force`` is false.
    """
    from .errors import SatcalError
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise SatcalError(f"{out}: exists and is not a directory")
    if out.exists():
        from .fileio import OutputSet
        OutputSet.recover(out)  # what a killed earlier run left: finished or discarded
    if out.exists() and any(out.iterdir()) and not force:
        raise SatcalError(f"{out}: already holds files; pass --force to overwrite them, or choose "
                          "another --out")
    if create:
        out.mkdir(parents=True, exist_ok=True)
    return out


@contextmanager
def output_dir(out: Path, force: bool):
    """An --out directory written as one set: the command writes into a stage inside it, and
    the files move into place together at the end (same names replaced, other files kept),
    so a killed command leaves the old files or the new ones, never a mix. A directory this
    made is removed again if the command fails before anything is in it.

    Parameters
    ----------
    out : pathlib.Path
        The --out directory.
    force : bool
        Whether an --out directory that holds files may be written into.

    Yields
    ------
    satcal.fileio.OutputSet
    """
    from .fileio import OutputSet
    out = Path(out)
    made = [p for p in (out, *out.parents) if not p.exists()]
    try:
        with OutputSet(prepare_out(out, force), "out") as outputs:
            yield outputs
    except BaseException:
        for p in made:  # innermost first; a directory that holds anything stays
            try:
                p.rmdir()
            except OSError:
                break
        raise


def expand_runs(values) -> list[Path]:
    """Run arguments: files, directories (every file inside) or glob patterns.

    Parameters
    ----------
    values : iterable of str
        The arguments.

    Returns
    -------
    list of pathlib.Path

    Raises
    ------
    SatcalError
        An argument finds no file.
    """
    import glob
    from .errors import SatcalError
    out: list[Path] = []
    for v in values:
        p = Path(v)
        if p.is_dir():
            found = sorted(f for f in p.iterdir() if f.is_file() and not f.name.startswith("."))
        elif any(ch in str(v) for ch in "*?["):
            found = sorted(Path(f) for f in glob.glob(str(v)))
        else:
            found = [p]
        if not found:
            raise SatcalError(f"{v}: no run files there")
        out.extend(found)
    return out


def ranking_text(result, top: int = 10) -> str:
    """The warnings, the bootstrap's verdict and the top of the ranking (its lead estimator).

    Parameters
    ----------
    result : satcal.analysis.CalibrationResult
        The analysis.
    top : int, optional
        Formulations shown (default 10).

    Returns
    -------
    str
    """
    from .analysis.ranking import ESTIMATOR_NAMES, estimator_columns, share_text
    lines = [f"warning: {w}" for w in result.meta.get("warnings", []) + result.meta.get("design_warnings", [])]
    cols = estimator_columns(result.bias, result.estimator)
    rank = result.ranking.head(top)
    lo, hi = f"{cols[0]}_lo", f"{cols[0]}_hi"
    intervals = lo in result.bias.columns
    if intervals:
        rank = rank.merge(result.bias[["formulation", lo, hi]], on="formulation")
    ranks = "rank_lo" in rank.columns
    lines.append(f"\nFormulations ranked by bias ({ESTIMATOR_NAMES[result.estimator]}; mean rank over "
                 f"{', '.join(cols)}; 1 = least biased):")
    lines.append(f"  {'#':>2}  {'formulation':<14} {cols[0]:>8}{'  95% interval    ' if intervals else ''} "
                 f"{cols[1]:>8} {cols[2]:>8}{'  P(first)  rank 95%' if ranks else ''}")
    for i, r in enumerate(rank.itertuples(index=False), start=1):
        r = r._asdict()
        iv = f"  [{r[lo]:.4f}, {r[hi]:.4f}]" if intervals else ""
        rk = f"  {share_text(r['p_best'], 3, percent=False):>8}  {r['rank_lo']}-{r['rank_hi']}" if ranks else ""
        lines.append(f"  {i:>2}  {r['formulation']:<14} {r[cols[0]]:8.4f}{iv} {r[cols[1]]:8.4f} {r[cols[2]]:8.4f}{rk}")
    lines.append("\n" + result.verdict.sentence())
    return "\n".join(lines)


def parse_formulations(text: str, study=None, normalization: str = "max", negatives: str = "keep") -> list:
    """``--formulations``: comma-separated ids; 'study' and 'all' expand (see ``analyze --help``).

    Parameters
    ----------
    text : str
        The option's value.
    study : iterable of Formulation or None, optional
        What ``study`` means; None (default) is the 36 study formulations.
    normalization : str, optional
        Normalisation of every formulation (default ``"max"``).
    negatives : str, optional
        Treatment of negative labels (default ``"keep"``).

    Returns
    -------
    list of Formulation
        Without repeats, in the order given.

    Raises
    ------
    SatcalError
        An unknown id, or no id at all.
    """
    from .errors import SatcalError
    from .measures import EXTRA_MEASURES, formulation, study_formulations
    study = list(study) if study is not None else study_formulations(normalization, negatives)
    out, seen = [], set()
    for token in (t.strip() for t in text.split(",")):
        if not token:
            continue
        expanded = {"study": study, "all": study + list(EXTRA_MEASURES)}.get(token, [token])
        for spec in expanded:
            try:
                f = formulation(spec, normalization, negatives)
            except ValueError as exc:
                raise SatcalError(f"--formulations: {exc}") from None
            if f.id not in seen:
                seen.add(f.id)
                out.append(f)
    if not out:
        raise SatcalError("--formulations: no formulation given; use study, all or a list of ids")
    return out


def calibrated_id(name: str) -> str:
    """The id a calibration stores for a name (``nDCG@10`` is stored as ``lin-log2``).

    Parameters
    ----------
    name : str
        A formulation id or measure name.

    Returns
    -------
    str
        The formulation's id, or ``name`` itself if it names no known measure.
    """
    from .measures import formulation
    try:
        return formulation(name).id
    except ValueError:
        return name  # a custom formulation's id, looked up as given


def analyze_ecir(scores: str, kwargs: dict):
    """The published ECIR 2015 answers, on recomputed (``exact``) or published scores.

    Parameters
    ----------
    scores : str
        ``"exact"`` (recomputed) or ``"published"``.
    kwargs : dict
        Passed to :func:`satcal.analysis.calibrate` (``formulations`` is taken out of it
        for published scores).

    Returns
    -------
    satcal.analysis.CalibrationResult

    Raises
    ------
    SatcalError
        Published scores asked for a formulation outside the 36 of the study.
    """
    from .datasets import ECIR2015_NOTICE, load_ecir2015_crowd, published_scores
    from .errors import SatcalError
    from .measures import study_formulations
    study = load_ecir2015()
    if scores == "exact":
        return calibrate(study, **kwargs)
    forms = kwargs.pop("formulations", None)
    published = {f.id for f in study_formulations()}
    if forms is not None and any(f.id not in published for f in forms):
        other = next(f.id for f in forms if f.id not in published)
        raise SatcalError(f"--scores published has the 36 study formulations only, not {other}; "
                          "use --scores exact (the default) for other measures")
    crowd = load_ecir2015_crowd()
    result = calibrate(phi_a=published_scores(crowd, "A", forms), phi_b=published_scores(crowd, "B", forms),
                       answers=study.answers, formulations=forms, **kwargs)
    result.meta.update(name="ecir2015 (published scores)", notice=ECIR2015_NOTICE)
    return result


def analyze_external(answers, judgments, k, levels, unjudged: str, kwargs: dict):
    """An external study's answers (CSV) against its judgments.

    Parameters
    ----------
    answers : path
        The answers CSV.
    judgments : path or None
        The judgments file (required).
    k : int or None
        List length; None counts the answers' ``a<i>`` columns.
    levels : list of int or None
        The scale, which must be 0..L-1; None takes the judgments' own.
    unjudged : str
        What to do with an unjudged document (see :func:`satcal.ingest.read_external_study`).
    kwargs : dict
        Passed to :func:`satcal.analysis.calibrate`.

    Returns
    -------
    satcal.analysis.CalibrationResult

    Raises
    ------
    SatcalError
        No judgments, or levels that are not 0..L-1.
    """
    from .errors import SatcalError
    from .fileio import sha256_file
    from .ingest import read_external_study
    from .judgments import read_judgments
    if judgments is None:
        raise SatcalError("--answers needs --judgments FILE (the levels of its documents)")
    qrels = read_judgments(judgments)
    if levels is not None and levels != list(range(len(levels))):
        raise SatcalError(f"--levels {','.join(map(str, levels))}: an analysis scale is 0..L-1; "
                          f"give {','.join(map(str, range(len(levels))))} or {len(levels)}")
    study = read_external_study(answers, qrels, k=k, n_levels=None if levels is None else len(levels),
                                unjudged=unjudged)
    result = calibrate(study, **kwargs)
    result.meta["provenance"].update(judgments_sha256=sha256_file(judgments), answers_sha256=sha256_file(answers))
    return result


def analyze_into(out, force: bool, dataset=None, answers=None, judgments=None, k=None, levels=None,
                 unjudged: str = "error", scores: str = "exact", formulations=None, scale=None, **kwargs):
    """``satcal analyze --dataset/--answers --out DIR``: calibrate and write the analysis.

    Parameters
    ----------
    out : path or None
        The output directory (required).
    force : bool
        Whether an --out directory that holds files may be written into.
    dataset : str or None, optional
        An embedded dataset (``"ecir2015"``); otherwise ``answers`` is read.
    answers, judgments, k, levels, unjudged
        An external study (see :func:`analyze_external`).
    scores : str, optional
        ``"exact"`` (default) or ``"published"``, for the dataset.
    formulations : str or None, optional
        The ``--formulations`` text; None means the study formulations.
    scale : dict or None, optional
        ``normalization`` and ``negatives``; None means max and keep.
    **kwargs
        Passed to :func:`satcal.analysis.calibrate`.

    Returns
    -------
    satcal.analysis.CalibrationResult
    """
    from .errors import SatcalError
    from .report import write_analysis
    if out is None:
        raise SatcalError("--out DIR is required with --dataset or --answers")
    prepare_out(out, force, create=False)  # refused before the work, not after
    scale = scale or {"normalization": "max", "negatives": "keep"}
    if formulations is not None or scale != {"normalization": "max", "negatives": "keep"}:
        kwargs["formulations"] = parse_formulations(formulations or "study", **scale)
    result = (analyze_ecir(scores, kwargs) if dataset
              else analyze_external(answers, judgments, k, levels, unjudged, kwargs))
    with output_dir(out, force) as outputs:
        write_analysis(result, outputs.tree())
    return result


def evaluate_into(judgments, runs, calibration, formulations, k, out, force: bool):
    """``satcal evaluate``: expected satisfaction of runs under a calibration, into ``out``.
    Returns (result, {name: path written}).

    Parameters
    ----------
    judgments : path
        The judgments file.
    runs : iterable of str
        Run files, directories or glob patterns.
    calibration : path
        An analysis directory or a study directory.
    formulations : str or None
        Comma-separated measures to evaluate; None for every calibrated one.
    k : int
        The depth evaluated.
    out : path
        The output directory.
    force : bool
        Whether an --out directory that holds files may be written into.
    """
    from .analysis.evaluate import evaluate_runs, load_calibrations
    from .judgments import read_judgments
    from .runs import read_runs
    wanted = None if formulations is None else [calibrated_id(t.strip()) for t in formulations.split(",")
                                                if t.strip()]
    from .study import analysis_directory
    cals = load_calibrations(analysis_directory(calibration), wanted)
    prepare_out(out, force, create=False)  # refused before the work, not after
    result = evaluate_runs(read_judgments(judgments), read_runs(expand_runs(runs)), cals, k)
    with output_dir(out, force) as outputs:
        written = {name: str(outputs.final(p)) for name, p in result.save(outputs.tree()).items()}
    return result, written


def read_calibration_bias(calibration):
    """bias.csv and calibration.json of an analysis directory (or of a study's analysis/).

    Parameters
    ----------
    calibration : path
        An analysis directory or a study directory.

    Returns
    -------
    tuple of (pandas.DataFrame, dict)

    Raises
    ------
    SatcalError
        There is no bias.csv.
    """
    import pandas as pd
    from .analysis.evaluate import read_provenance
    from .errors import SatcalError
    from .study import analysis_directory
    path = analysis_directory(calibration) / "bias.csv"
    if not path.exists():
        raise SatcalError(f"{calibration}: no bias.csv; give the output directory of satcal analyze")
    return pd.read_csv(path), read_provenance(path.parent)


def reliability_into(judgments, runs, simulate_runs, calibration, k, normalization, negatives, replicates,
                     alpha, target, optimize, seed, out, force, progress=True, echo=print):
    """``satcal reliability``: system-side reliability (beside a calibration's bias), into ``out``.
    Returns (result, written).

    Parameters
    ----------
    judgments : path
        The judgments file.
    runs : iterable of str
        Run files, directories or globs (give these or ``simulate_runs``).
    simulate_runs : int or None
        Number of simulated systems to use instead of runs.
    calibration : path or None
        An analysis whose bias goes beside the reliability, and whose scale is used.
    k, normalization, negatives
        The scale; None takes the calibration's (see :func:`calibration_scale`).
    replicates : int
        Bootstrap replicates of the discriminative power.
    alpha : float
        Significance level (see :func:`satcal.reliability.reliability_report`).
    target : float
        The dependability the D-study asks the topics for.
    optimize : str
        ``"gains"``, ``"discounts"`` or ``"none"``.
    seed : int
        Seed of the simulated runs and replicates.
    out : path
        The output directory.
    force : bool
        Whether an --out directory that holds files may be written into.
    progress : bool, optional
        Show progress (default True).
    echo : callable, optional
        Takes each line said (default :func:`print`).

    Raises
    ------
    SatcalError
        Both or neither of ``runs`` and ``simulate_runs``.
    """
    from .errors import SatcalError
    from .measures import study_formulations
    from .reliability import reliability_report
    from .reliability import simulate_runs as sim_runs
    from .runs import read_runs
    from .judgments import read_judgments
    if bool(runs) == bool(simulate_runs):
        raise SatcalError("give run files with --runs, or --simulate-runs N to try it on simulated systems")
    qrels = read_judgments(judgments)
    bias, prov = read_calibration_bias(calibration) if calibration is not None else (None, {})
    k, normalization, negatives = calibration_scale(prov, calibration, qrels, k, normalization, negatives)
    prepare_out(out, force, create=False)  # refused before the work, not after
    with output_dir(out, force) as outputs:
        root = outputs.tree()
        if simulate_runs:
            run_set = sim_runs(qrels, simulate_runs, seed=seed, out_dir=root / "simulated-runs")
            echo(f"SIMULATED runs: {simulate_runs} systems of graded quality, in {out}/simulated-runs/")
        else:
            run_set = read_runs(expand_runs(runs))
        forms = study_formulations(normalization=normalization, negatives=negatives)
        result = reliability_report(run_set, qrels, forms, k=k, replicates=replicates, alpha=alpha,
                                    target=target, seed=seed, calibration_bias=bias, progress=progress)
        written = result.save(root)
        if optimize != "none":
            echo(_optimize(optimize, run_set, qrels, k, normalization, root))
    return result, written


def _optimize(optimize: str, run_set, qrels, k: int, normalization: str, root: Path) -> str:
    """The gains or discounts of best Phi at one topic, as a study.toml snippet in ``root``."""
    from .reliability import optimal_discounts, optimal_gains
    found = (optimal_gains(run_set, qrels, k=k, normalization=normalization) if optimize == "gains"
             else optimal_discounts(run_set, qrels, k=k, normalization=normalization))
    item, phi_opt, phi_start = found
    if optimize == "gains":
        levels = [0] + [lv for lv in sorted(set(qrels.table["level"])) if lv > 0]
        values = item(levels)
    else:
        values = item.factors(k)
    snippet = f"custom_{optimize} = {{ optimal = [{', '.join(f'{v:.6g}' for v in values)}] }}"
    (root / f"optimal_{optimize}.toml").write_text(
        f"# Phi at one topic {phi_opt:.6f} (from {phi_start:.6f}); paste under [formulations] of a\n"
        f"# study.toml to calibrate it like the others{' (levels ' + str(levels) + ')' if optimize == 'gains' else ''}\n"
        f"{snippet}\n")
    return f"optimal {optimize}: {item.formula}; Phi at one topic {phi_opt:.4f} (from {phi_start:.4f})"


def reliability_table(result) -> str:
    """The ten most dependable formulations (by Phi), with their bias beside them if any.

    Parameters
    ----------
    result : satcal.reliability.ReliabilityResult
        The reliability report.

    Returns
    -------
    str
    """
    shown = result.combined if result.combined is not None else result.gstudy
    cols = [c for c in ("formulation", "b1", "b2", "b3", "phi", "erho2", "topics_for_phi") if c in shown.columns]
    return shown[cols].sort_values("phi", ascending=False).head(10).to_string(index=False,
                                                                             float_format=lambda v: f"{v:.4f}")


def calibration_scale(prov: dict, directory, judgments, k, normalization, negatives):
    """k, normalisation and negative policy for the system side: the calibration's own (from
    calibration.json) unless given; a contradicting option is refused, as user-side bias and
    system-side reliability are only comparable on the same scores.

    Parameters
    ----------
    prov : dict
        The calibration's provenance (empty without a calibration).
    directory : path
        The calibration's directory, named in messages.
    judgments : satcal.judgments.Judgments
        The judgments, whose top level must fit the calibration's levels.
    k, normalization, negatives
        The values given, or None.

    Returns
    -------
    list
        ``[k, normalization, negatives]``; without either, 10, ``"ideal"`` and ``"keep"``.

    Raises
    ------
    SatcalError
        A given value contradicts the calibration, or the judgments go above its levels.
    """
    from .errors import SatcalError

    def single(by_formulation):
        """The one value of a per-formulation mapping, or None when it holds none or several.

        Parameters
        ----------
        by_formulation : dict or None
            Formulation id to value.
        """
        values = set((by_formulation or {}).values())
        return values.pop() if len(values) == 1 else None

    chosen = []
    for name, given, own, default in (("k", k, prov.get("k"), 10),
                                      ("normalization", normalization, single(prov.get("normalization")), "ideal"),
                                      ("negatives", negatives, single(prov.get("negatives")), "keep")):
        if given is not None and own is not None and given != own:
            raise SatcalError(f"--{name} {given} contradicts the calibration in {directory}, made with "
                              f"{name} = {own} (calibration.json); leave --{name} out to use it")
        chosen.append(given if given is not None else own if own is not None else default)
    levels = prov.get("levels")
    if levels is not None and judgments.top_level > int(levels) - 1:
        raise SatcalError(f"{judgments.source}: levels go up to {judgments.top_level}, but the calibration "
                          f"in {directory} was made on levels 0..{int(levels) - 1} (calibration.json)")
    return chosen


def generation_text(result, traps_file: str, where) -> str:
    """What ``satcal generate`` says of its examples: the count against the cell floor, the
    infeasible cells, the busiest query, warnings, the pairing correlation, the extra
    measures and the traps.

    Parameters
    ----------
    result : satcal.generate.GenerationResult
        What generate returned.
    traps_file : str
        The study's traps file; empty when traps follow the built-in rule.
    where : path
        The study directory, named in the text.

    Returns
    -------
    str
    """
    from .generate import ECIR2015_PAIRING_CORRELATION
    s = result.as_dict()
    lines = [f"{s['examples']} examples (cell floor {s['lower_bound']} = min_per_cell x the "
             f"{s['floor_cells']} |dphi| cells of the widest formulation"
             + (f", LP bound {s['lp_bound']}" if "lp_bound" in s else "")
             + f"; method {s['method']}); every feasible cell has >= "
             f"{result.design.min_per_cell}: {'yes' if result.complete else 'NO'}"]
    inf = result.infeasible
    if len(inf):
        lines.append(f"{len(inf)} infeasible cells (no buildable example lands there): "
                     + ", ".join(f"{r.formulation} {r.kind} bin {r.bin}" for r in inf.head(8).itertuples())
                     + (" ..." if len(inf) > 8 else ""))
    c = result.candidates
    line = f"Queries: {c.get('queries_used', 0)} used, the busiest holds {100 * c.get('max_query_share', 0):.1f}% of the examples"
    if "query_cap" in c:
        line += (f" (limit {c['query_cap']} each: {c['query_cap_extra_examples']:+d} "
                 f"examples, {c['query_cap_short_cells']} cells left short)")
    lines.append(line)
    lines += [f"Warning: {w}" for w in result.warnings]
    lines.append(f"Pairing correlation corr(phi_A, phi_B): {result.pairing_correlation().median():.2f} (median over "
                 f"the {len(result.design.formulations)} formulations; the ECIR 2015 pairs: "
                 f"{ECIR2015_PAIRING_CORRELATION:.2f}); the paper's P(Sat|phi) depends on it, the per-list curve does not")
    extra = extra_measures_line(result)
    if extra:
        lines.append(extra)
    lines.append(f"Traps: {getattr(result, 'traps_built', '')}")
    if not traps_file:
        from .traps import TRAP_RULE
        lines.append(f"  The {TRAP_RULE}.")
    lines.append(f"Wrote examples.csv, traps.csv, scores.csv, coverage.csv, coverage.png in {where}/")
    if "adaptive_pool" in c:  # adaptive: the examples are the candidate pool
        lines.append(f"Adaptive: examples.csv and pool.csv hold the candidate pool, {c['adaptive_pool']} "
                     f"examples; the coverage design had {c['coverage_design_examples']} (its "
                     f"coverage.csv is the fixed design's). Next: satcal export {where} --next-batch")
    return "\n".join(lines)


def extra_measures_line(result) -> str:
    """What the measures beyond the DCG family cost, in examples, or what they lack.

    Parameters
    ----------
    result : satcal.generate.GenerationResult
        What generate returned.

    Returns
    -------
    str
        Empty when there is nothing to say.
    """
    s, design = result.as_dict(), result.design
    placeable = {f.id for f in design.placeable_extra}
    unplaced = [f.id for f in design.extra if f.id not in placeable]
    line = ""
    if "extra_cost_examples" in s:
        ids = ", ".join(f.id for f in design.placeable_extra)
        cost = (f"{s['extra_cost_examples']:+d} examples over the {s['examples_without_extra']} the "
                "crossed family alone needs")
        if s["extra_covered"]:
            line = f"Extra measures {ids}: covered, {cost}"
        else:
            line = (f"Extra measures {ids}: not covered (cover_extra = false), {s['extra_cells_short_without']} "
                    f"of their cells hold fewer than {design.min_per_cell}; covering them: {cost}")
    if unplaced:
        line += ("\n" if line else "") + (f"Extra measures {', '.join(unplaced)}: pool-based, not placed by the "
                                          "generator; calibrated on the lists the examples hold")
    return line


def serve_banner(study, base: str) -> tuple[str, list[str]]:
    """What ``satcal serve`` says at start: the pages and database, the links for Prolific, lab
    participants and the researcher; and, apart, the warnings (screening, no completion code).

    Parameters
    ----------
    study : satcal.serve.HostedStudy
        The hosted study.
    base : str
        The address participants use (:func:`serve_url`).

    Returns
    -------
    tuple of (str, list of str)
    """
    settings = study.settings
    said = (f"Serving {len(study.pages)} pages x {settings.answers_per_example} answers "
            f"({study.per_participant} pages per participant) from {study.engine.url.render_as_string(hide_password=True)}\n"
            f"  Prolific study URL: {base}/?PROLIFIC_PID={{{{%PROLIFIC_PID%}}}}&STUDY_ID={{{{%STUDY_ID%}}}}"
            "&SESSION_ID={{%SESSION_ID%}}\n"
            f"  lab participants:   {base}/  (they type their participant code)\n"
            f"  researcher status:  {base}/status/{study.status_token}  (keep this link private)\n"
            f"  {study.screening[0].upper() + study.screening[1:]}")
    warned = [f"  warning: {w}" for w in study.warnings]
    if not settings.completion_code:
        warned.append("  note: [serve] completion_code is empty in study.toml: Prolific participants will see a "
                      "thank-you page instead of the redirect that marks them complete")
    return said, warned


def analyze_any(workspace=None, dataset=None, answers=None, out=None, force: bool = False, judgments=None,
                k=None, levels=None, unjudged: str = "error", scores: str = "exact", formulations=None,
                normalization: str = "max", negatives: str = "keep", jobs: int = 0, backend: str = "loky",
                scheduler=None, quiet: bool = False, **options):
    """``satcal analyze``: a study's answers (``workspace``), the embedded ``dataset`` or external
    ``answers``, exactly one of them. Returns (result, the directory written).

    Parameters
    ----------
    workspace, dataset, answers : optional
        What to analyse; exactly one is given.
    out : path or None, optional
        Output directory (with ``dataset`` or ``answers``).
    force : bool, optional
        Overwrite an earlier analysis (default False).
    judgments, k, levels, unjudged, scores
        An external study or the dataset's scores (see :func:`analyze_into`).
    formulations : str or None, optional
        The ``--formulations`` text; None means the study's own.
    normalization : str, optional
        Default ``"max"``.
    negatives : str, optional
        Default ``"keep"``.
    jobs : int, optional
        Worker processes; 0 (default) one per core (:func:`satcal._threads.resolve_jobs`).
    backend : str, optional
        ``"loky"`` (default) or ``"dask"``.
    scheduler : str or None, optional
        The dask scheduler's address.
    quiet : bool, optional
        Hide progress (default False).
    **options
        Passed to :func:`satcal.analysis.calibrate`.

    Raises
    ------
    SatcalError
        Not exactly one of ``workspace``, ``dataset`` and ``answers``.
    """
    from .errors import SatcalError
    if sum(x is not None for x in (workspace, dataset, answers)) != 1:
        raise SatcalError("give exactly one of: a WORKSPACE directory, --dataset ecir2015, or "
                          "--answers FILE with --judgments FILE")
    kwargs = dict(n_jobs=resolve_jobs(jobs), backend=f"dask:{scheduler}" if backend == "dask" and scheduler else backend,
                  progress=not quiet, **options)
    scale = dict(normalization=normalization, negatives=negatives)
    if workspace is None:
        return analyze_into(out, force, dataset, answers, judgments, k, levels, unjudged, scores,
                            formulations, scale, **kwargs), out
    from .study import Study
    ws = Study.open(workspace)
    base = ws.formulations(**scale)
    chosen = parse_formulations(formulations, base, **scale) if formulations else base
    return ws.analyze(force=force, formulations=chosen, **kwargs), ws.path / "analysis"


def analysis_text(result, out) -> str:
    """What ``satcal analyze`` says: the notice, the ranking and where the outputs are.

    Parameters
    ----------
    result : satcal.analysis.CalibrationResult
        The analysis.
    out : path
        Where the outputs were written.

    Returns
    -------
    str
    """
    notice = [result.meta["notice"]] if result.meta.get("notice") else []
    return "\n".join(notice + [ranking_text(result),
                               f"\nWrote tables, figures and the report to {out}/ (open {out}/report.html)"])


def export_text(study, paths, platform, next_batch: bool) -> tuple[str, list[str]]:
    """What ``satcal export`` says of a batch written by ``study`` (a :class:`~satcal.study.Study`):
    the files and the platform's settings; and, apart, the warnings.

    Parameters
    ----------
    study : satcal.study.Study
        The study.
    paths : iterable of path
        The files written.
    platform : str or None
        The platform; None takes the study's.
    next_batch : bool
        Whether this was an adaptive wave.

    Returns
    -------
    tuple of (str, list of str)
    """
    from .study.design import trap_rule
    said = ["Wrote " + ", ".join(str(p) for p in paths) + f" and the hidden key {study.path}/key.csv "
            f"(batch {study.batch_number()})"]
    # the trap rule's count, information (export warns where the traps fall short of it, and
    # where no count reaches the power the line itself is that warning); about traps.csv, of
    # which an adaptive wave's traps are a draw
    rule, short = trap_rule(study.table("traps.csv", required=False), study["quality.trust_threshold"],
                            study["quality.trap_power"], 0)
    if rule not in short:
        said.append(rule[0].upper() + rule[1:])
    platform = platform or study["presentation.platform"]
    if study.platform_settings(platform):
        said.append(f"Settings ([platforms.{platform}] of study.toml): {study.platform_settings(platform)}")
    warned = []
    if study["design.adaptive"] and not next_batch and platform != "serve":
        warned.append("  warning: an adaptive study: this batch holds the whole candidate pool; ask the next "
                      f"wave with satcal export {study.path} --next-batch")
    if platform == "serve":
        line, screening = study.serve_screening()
        said.append(line[0].upper() + line[1:])
        warned += [f"  warning: {w}" for w in screening]
    return "\n".join(said), warned


def simulation_text(truth: dict, path=None, served_at=None, participants: int = 0, where=None,
                    unserved: int = 0) -> str:
    """What ``satcal simulate`` says of its crowd: written to ``path``, or ``participants`` sent
    to ``served_at`` (the truth then in ``where``/simulated/), ``unserved`` of whom were given
    no page.

    Parameters
    ----------
    truth : dict
        The simulated crowd's truth.
    path : pathlib.Path or None, optional
        The result file written.
    served_at : str or None, optional
        The hosted study's address the crowd answered.
    participants : int, optional
        Participants sent (default 0).
    where : path or None, optional
        The study directory.
    unserved : int, optional
        Participants sent who were given no page (the study had none left for them; default 0).

    Returns
    -------
    str
    """
    if served_at:
        # participants beyond the study's pages get none: say so, rather than count them in
        none = (f"; {unserved} of them were given no page (the study had none left: [simulation] workers "
                "is more than its pages hold)" if unserved else "")
        return (f"{participants} simulated participants answered {truth['pages']} pages at {served_at} "
                f"({len(truth['spammers'])} spammers){none}; truth in {where}/simulated/serve-truth.json")
    return (f"Wrote {truth['answers']} simulated answers to {path} ({len(truth['spammers'])} spammers among "
            f"{truth['model']['workers']} workers); truth in {path.parent}/{path.name.split('-')[0]}-truth.json")


def serve_url(public_url, host: str, port: int) -> str:
    """The address participants use: ``public_url``, else this server's own (a wildcard host
    named as 127.0.0.1).

    Parameters
    ----------
    public_url : str or None
        The address given by the researcher.
    host : str
        Address the server listens on.
    port : int
        Its port.

    Returns
    -------
    str
        Without a trailing slash.
    """
    return (public_url or f"http://{'127.0.0.1' if host in ('0.0.0.0', '::') else host}:{port}").rstrip("/")


def adaptive_serve_line(study, refit_seconds: float) -> str | None:
    """What ``satcal serve`` says first of an adaptive study (``study.order`` set), else None.

    Parameters
    ----------
    study : satcal.serve.HostedStudy
        The hosted study.
    refit_seconds : float
        Seconds between refits.

    Returns
    -------
    str or None
    """
    if study.order is None:
        return None
    return (f"  adaptive: pages in the order the answers so far ask for, refitted in the background every "
            f"{refit_seconds:g} s; no page handed out once settled or at the budget")


def parse_budgets(text: str) -> list[int]:
    """``satcal power --budgets``: integers separated by commas.

    Parameters
    ----------
    text : str
        The option's value.

    Returns
    -------
    list of int

    Raises
    ------
    SatcalError
        A value is not an integer.
    """
    from .errors import SatcalError
    try:
        return [int(b) for b in text.split(",")]
    except ValueError:
        raise SatcalError(f"--budgets {text!r}: expected integers separated by commas") from None


def parse_pair(text: str) -> tuple[str, str]:
    """``satcal power --pair``: two formulation ids separated by a comma.

    Parameters
    ----------
    text : str
        The option's value.

    Returns
    -------
    tuple of (str, str)

    Raises
    ------
    SatcalError
        Not exactly two ids.
    """
    from .errors import SatcalError
    pair = tuple(p.strip() for p in text.split(","))
    if len(pair) != 2:
        raise SatcalError(f"--pair {text!r}: expected two formulation ids separated by a comma")
    return pair


def power_text(result, written: dict) -> str:
    """What ``satcal power`` says: the power at each budget and the files written.

    Parameters
    ----------
    result : satcal.analysis.power.PowerResult
        The power analysis.
    written : dict
        Paths written, with keys ``table`` and ``figure``.

    Returns
    -------
    str
    """
    cols = ["answers"] + [c for c in result.table.columns if c.startswith("power_")]
    return result.table[cols].to_string(index=False) + f"\nWrote {written['table']} and {written['figure']}"


def evaluation_text(result, written: dict) -> str:
    """What ``satcal evaluate`` says: the systems x measures table and the files written.

    Parameters
    ----------
    result : satcal.analysis.evaluate.EvaluationResult
        The evaluation.
    written : dict
        Name to path written.

    Returns
    -------
    str
    """
    return result.summary() + f"\nWrote {', '.join(written.values())}"


def demo_text(summary: dict) -> str:
    """What ``satcal demo`` says at the end: the ranking and where each output is.

    Parameters
    ----------
    summary : dict
        What :func:`run_demo` returned.

    Returns
    -------
    str
    """
    width = max(len(label) for label in summary["outputs"])
    return "\n".join([ranking_text(summary["result"]), "\nOutputs:"]
                     + [f"  {label:<{width}}  {path}" for label, path in summary["outputs"].items()])
