"""End-to-end runs that chain the stages: the demo."""
from __future__ import annotations

from pathlib import Path
from typing import Callable

import numpy as np

from ._threads import resolve_jobs
from .analysis import calibrate
from .datasets import ecir2015_file, load_ecir2015

__all__ = ["run_demo"]

#: The Prolific completion code of the demo study (a real study sets its own in study.toml).
DEMO_COMPLETION_CODE = "SATCAL-DEMO"


def _with_demo_completion_code(ws):
    from .fileio import atomic_write_text
    from .workspace import Workspace
    toml = ws.file("study.toml")
    text = toml.read_text(encoding="utf-8").replace('completion_code = ""',
                                                    f'completion_code = "{DEMO_COMPLETION_CODE}"', 1)
    atomic_write_text(toml, text)
    return Workspace.open(ws.path)


def run_demo(out: Path, seed: int = 2015, progress: bool = True,
             echo: Callable[[str], None] = print, min_per_cell: int = 200,
             bootstrap: int = 1000) -> dict:
    """The demo: a simulated study on the embedded judgments, then the real ECIR 2015 answers.

    Returns a summary with the ECIR analysis result, the simulated study's recovery check and
    a map of output labels to paths.
    """
    from .ingest import ingest
    from .simulate import simulate_workspace
    from .workspace import Workspace

    out = Path(out)
    study = load_ecir2015()
    echo(study.notice)
    echo("1/3 A simulated study on the embedded judgments")
    ws = Workspace.init(out / "study", ecir2015_file("judgments.tsv"), seed=seed,
                        min_per_cell=min_per_cell, platform="appen", force=True)
    ws = _with_demo_completion_code(ws)
    gen = ws.generate(force=True, progress=progress)
    echo(f"    generate: {gen.n_examples} examples (cell floor {gen.lower_bound}), "
         f"{len(gen.infeasible)} infeasible cells")
    import warnings
    from .errors import SatcalWarning
    with warnings.catch_warnings():  # the embedded music data has ids only: no titles to show
        warnings.simplefilter("ignore", SatcalWarning)
        ws.export(force=True)
    results, truth = simulate_workspace(ws, force=True)
    echo(f"    simulate: {truth['answers']} answers from {truth['model']['workers']} workers, "
         f"{len(truth['spammers'])} of them spammers")
    report = ingest(ws, [results])
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
    sim = ws.analyze(force=True, seed=seed, progress=progress, sat_model="both")
    f_true = truth["model"]["formulation"]
    curves = sim.curves[(sim.curves.formulation == f_true) & (sim.curves.curve == "sat")]
    curve = curves[curves.sat_model == "published"]
    true_p = np.interp(curve.x, truth["p_sat_grid"], truth["p_sat_true"])
    inside = float(np.mean((true_p >= curve.lo) & (true_p <= curve.hi)))
    joint = curves[curves.sat_model == "joint"]
    list_p = np.interp(joint.x, truth["p_sat_grid"], truth["p_sat_list"])
    inside_joint = float(np.mean((list_p >= joint.lo) & (list_p <= joint.hi)))
    rank = int(sim.ranking.index[sim.ranking.formulation == f_true][0]) + 1
    echo(f"    analyze: the paper's P(Sat|phi) estimates satisfaction among answers where both lists got "
         f"the same verdict; that estimand of {f_true} lies in its 95% band over {100 * inside:.0f}% of "
         f"[0, 1]. The joint model's s(phi) estimates the per-list satisfaction; the simulated users' "
         f"per-list curve lies in its band over {100 * inside_joint:.0f}% of [0, 1] (the simulation "
         f"adds worker heterogeneity and position bias, which the joint model does not have). "
         f"{f_true} ranks {rank} of {len(sim.ranking)} by bias")

    echo(f"    try the hosted study on this batch: satcal serve {ws.path} (Prolific completion "
         f"code {DEMO_COMPLETION_CODE})")

    echo("2/3 The published ECIR 2015 answers")
    echo(f"    {len(study.examples)} examples, k = {study.k}, {study.n_levels} levels, 36 formulations, "
         f"{bootstrap} bootstrap replicates")
    result = calibrate(study, seed=seed, progress=progress, bootstrap=bootstrap, sat_model="both",
                       n_jobs=resolve_jobs(None))
    from concurrent.futures import ThreadPoolExecutor
    from .report import write_analysis
    # the report is written (figures drawn) while the reliability part computes; matplotlib
    # draws in one thread at a time: the reliability figures wait for the report's
    background = ThreadPoolExecutor(1)
    written = background.submit(write_analysis, result, out / "ecir2015")
    echo("3/3 System-side reliability beside user-side bias (SIMULATED runs: the embedded data "
         "has no system runs)")
    from .measures import study_formulations
    from .reliability import reliability_report, simulate_runs
    runs = simulate_runs(study.judgments, n_systems=12, seed=seed, out_dir=out / "reliability" / "simulated-runs")
    rel = reliability_report(runs, study.judgments, study_formulations(normalization="ideal"), k=study.k,
                             seed=seed, calibration_bias=result.bias, progress=progress)
    written = written.result()
    background.shutdown()
    rel_written = rel.save(out / "reliability")
    best = rel.combined.sort_values("phi", ascending=False).iloc[0]
    echo(f"    most dependable on the simulated runs: {best.formulation} (Phi = {best.phi:.3f}); see "
         f"{rel_written['user_vs_system']}")
    outputs = {"ECIR 2015 report": written["report"],
               "ECIR 2015 bias table": written["bias"],
               "ECIR 2015 ANOVA": written["anova"],
               "ECIR 2015 figures": str(Path(written["fig1_sat.png"]).parent),
               "simulated study (workspace)": str(ws.path),
               "simulated study coverage map": str(ws.file("coverage.png")),
               "simulated study Appen batch": str(ws.path / "batches" / "appen"),
               "simulated study answers / workers": f"{ws.file('answers.csv')}, {ws.file('workers.csv')}",
               "simulated study report": str(ws.path / "analysis" / "report.html"),
               "reliability beside bias (simulated runs)": rel_written["user_vs_system"],
               "reliability tables": str(out / "reliability")}
    return {"result": result, "simulated": sim, "reliability": rel, "truth": truth, "band_coverage": inside,
            "joint_band_coverage": inside_joint,
            "truth_rank": rank, "spammers_caught": caught, "outputs": outputs}
