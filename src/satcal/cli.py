"""The ``satcal`` command line.

Every user mistake (a bad file, a bad option) ends in one line on stderr, ``satcal: error: ...``,
and exit code 2; a full disk, a denied permission or a read-only file system in one line naming
the path and exit code 1 (the command's outputs are written as one set, so nothing is left
half-written); no traceback.
"""
from __future__ import annotations

import sys
from pathlib import Path

import click

from ._version import __version__
from .errors import SatcalError, environment_error

CONTEXT = {"help_option_names": ["-h", "--help"], "max_content_width": 100}


class SatcalGroup(click.Group):
    """Turns a :class:`SatcalError` into a one-line message and exit code 2."""

    def invoke(self, ctx):
        import warnings
        from .errors import SatcalWarning
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", SatcalWarning)
            warnings.filterwarnings("always", category=SatcalWarning)
            original = warnings.showwarning
            warnings.showwarning = lambda message, category, *rest, **kw: (
                click.echo(f"satcal: warning: {message}", err=True) if issubclass(category, SatcalWarning)
                else original(message, category, *rest, **kw))
            try:
                return super().invoke(ctx)
            except SatcalError as exc:
                click.echo(f"satcal: error: {exc}", err=True)
                ctx.exit(2)
            except OSError as exc:
                line = environment_error(exc)
                if line is None:
                    raise
                click.echo(f"satcal: error: {line}", err=True)
                ctx.exit(1)


@click.group(name="satcal", cls=SatcalGroup, context_settings=CONTEXT)
@click.version_option(__version__, prog_name="satcal")
def main():
    """satcal: what does an nDCG score mean to a user?

    satcal runs user-satisfaction calibration studies of graded-relevance measures (the DCG
    family): it prepares side-by-side crowdsourcing batches from relevance judgments, ingests
    worker answers, and maps metric scores onto P(Sat | phi), the probability that users are
    satisfied, and P(Pref | dphi), the probability that they agree with a difference between
    two systems, for 36 gain x discount formulations.

    \b
    Start here:
      satcal demo                                  the whole job on the embedded ECIR 2015 data
      satcal analyze --dataset ecir2015 --out DIR  the published study, re-analysed
      satcal init DIR --judgments QRELS            a study of your own (then generate, export,
                                                   ingest, analyze)
    """


from .cli_options import (LEVELS, PLATFORM_NAMES, analysis_options, analyze_sources,  # noqa: E402
                          ingest_options, platform_option, reliability_options)
from .settings import default as _default  # noqa: E402  (no scientific stack)


def _study_command(f):
    """A command on a study directory (its first argument)."""
    return main.command(context_settings=CONTEXT)(click.argument("directory", type=click.Path(path_type=Path))(f))
@main.command(context_settings=CONTEXT)
@analyze_sources
@analysis_options
def analyze(workspace, dataset, answers, judgments, k, levels, unjudged, scores, out, population,
            bootstrap, seed, jobs, backend, scheduler, normalization, negatives, formulations, sat_model,
            indicator_range, standardised_intervals, force, quiet):
    """Fit P(Sat|phi) and P(Pref|dphi), bias b1-b3, ANOVA; write tables, figures and a report.

    \b
    Three sources of answers:
      satcal analyze --dataset ecir2015 --out DIR          the published ECIR 2015 answers
      satcal analyze --answers A.csv --judgments Q --out DIR   an external study
      satcal analyze WORKSPACE                             a workspace's ingested answers,
                                                           into WORKSPACE/analysis/

    Output: bias.csv, anova.csv, fits.csv, curves.csv, points.csv, model_check.csv,
    ranking.csv, figures/ (fig0_standardised, fig1_sat, fig2_pref, fig3_bias; PNG and PDF) and report.html.
    """
    from .pipeline import analysis_text, analyze_any
    result, out = analyze_any(workspace, dataset, answers, out, force, judgments, k, levels, unjudged, scores,
                              formulations, normalization, negatives, jobs, backend, scheduler, quiet,
                              population=population, bootstrap=bootstrap, seed=seed, sat_model=sat_model,
                              indicator_range=indicator_range, standardised_intervals=standardised_intervals)
    click.echo(analysis_text(result, out))


@_study_command
@click.option("--judgments", type=click.Path(path_type=Path), required=True,
              help="TREC qrels or CSV/TSV with query, doc, level columns.")
@click.option("--documents", type=click.Path(path_type=Path),
              help="Optional CSV with doc and any of title, snippet, url, audio_url.")
@click.option("--topics", type=click.Path(path_type=Path),
              help="Optional topics: TREC topics file, 'id<TAB>text' lines, or CSV/TSV with query, "
                   "title (and description, narrative); workers see the title and description.")
@click.option("--k", type=click.IntRange(min=1), default=_default("study.k"), show_default=True,
              help="Documents per list.")
@click.option("--levels", type=LEVELS, default=None, help="Levels to build lists from: a list (0,1,2) "
              "or their number (3 for 0..2) (default: the judgments' non-negative levels).")
@click.option("--min-per-cell", type=click.IntRange(min=1), default=_default("generator.min_per_cell"),
              show_default=True, help="Examples (|dphi|) or lists (phi) wanted in every feasible cell of "
              "every formulation ([generator] min_per_cell of study.toml).")
@click.option("--platform", type=click.Choice(PLATFORM_NAMES), default=_default("presentation.platform"),
              show_default=True, help="Platform the batch is exported to ([presentation] platform of "
              "study.toml; export --platform can still choose another).")
@click.option("--seed", type=click.IntRange(min=0), default=_default("study.seed"), show_default=True,
              help="Seed of every random step: generation, traps, presentation, simulation, bootstrap.")
@click.option("--force", is_flag=True, help="Start over in a directory that has a study.toml.")
def init(directory, judgments, documents, topics, k, levels, min_per_cell, platform, seed, force):
    """Create a study workspace with a commented study.toml to edit.

    The judgments (and documents table) are copied into DIRECTORY/inputs/ so the workspace is
    self-contained; every later command reads study.toml.
    """
    from .study import Study
    ws = Study.init(directory, judgments, documents, k=k, levels=levels, seed=seed,
                        min_per_cell=min_per_cell, platform=platform, force=force, topics=topics)
    click.echo(f"Created {ws.path}/study.toml; edit it, then run: satcal generate {ws.path}")


@_study_command
@click.option("--force", is_flag=True, help="Overwrite examples generated before.")
@click.option("--quiet", "-q", is_flag=True, help="No progress bar.")
def generate(directory, force, quiet):
    """Build examples that cover every phi and |dphi| cell of every formulation.

    Writes examples.csv, traps.csv, scores.csv, coverage.csv and coverage.png/pdf, and reports
    the examples used against the cell floor (the fewest that can fill every cell), the
    infeasible cells, and warnings: a few queries holding most examples, the query share asked
    and got, a level too rare to reach phi's upper range.
    """
    from .pipeline import generation_text
    from .study import Study
    ws = Study.open(directory)
    result = ws.generate(force=force, progress=not quiet)
    click.echo(generation_text(result, ws["traps.file"], ws.path))


@_study_command
@platform_option
@click.option("--force", is_flag=True, help="Replace an earlier export and its key (before any answers "
              "are collected).")
@click.option("--new-batch", is_flag=True,
              help="Present the examples again as a new batch (new ids, orientation and pages), "
                   "keeping every earlier batch's key: answers to all of them are ingested.")
@click.option("--next-batch", is_flag=True,
              help="Adaptive studies ([design] adaptive = true): the next wave of wave_pages pages, "
                   "chosen from the answers ingested so far, as a new batch.")
def export(directory, platform, force, new_batch, next_batch):
    """Write the task files a crowdsourcing platform accepts, into batches/<platform>/.

    Examples and traps are shuffled, shown with A and B swapped at random, given opaque ids and
    packed into pages; the answer key stays in key.csv (and batches/keys/batch-<n>.csv), never
    in a worker-visible field. Once answers are collected the current batch can still be
    exported to another platform; a changed presentation needs --new-batch.
    """
    from .pipeline import export_text
    from .study import Study
    ws = Study.open(directory)
    paths = ws.export(platform, force=force, new_batch=new_batch, next_batch=next_batch)
    said, warned = export_text(ws, paths, platform, next_batch)
    click.echo(said)
    for line in warned:
        click.echo(line, err=True)


@_study_command
@click.option("--n", "n", type=click.IntRange(min=1), default=6, show_default=True, help="Units to show.")
@click.option("--force", is_flag=True, help="Replace an earlier preview.html.")
def preview(directory, n, force):
    """A static HTML page with a sample of units exactly as a worker sees them."""
    from .study import Study
    path = Study.open(directory).preview(n, force=force)
    click.echo(f"Open {path} in a browser.")


@_study_command
@platform_option
@click.option("--force", is_flag=True, help="Overwrite an earlier simulation.")
@click.option("--serve", "serve_url", default=None, metavar="URL",
              help="Instead of writing a file, send the simulated participants through a running "
                   "satcal serve at URL (e.g. http://127.0.0.1:8000), as browsers would.")
@click.option("--concurrency", type=click.IntRange(1, 500), default=8, show_default=True,
              help="With --serve: participants at a time.")
def simulate(directory, platform, force, serve_url, concurrency):
    """Simulate a crowd: answers from a known user model, as the platform's result file.

    The model ([simulation] in study.toml): a true P(Sat|phi) over one formulation's phi,
    worker heterogeneity, spammers and position bias. Writes simulated/<platform>-results.<ext>
    and simulated/<platform>-truth.json; ingest the file like a real one to dry-run the study.
    With --serve URL the simulated participants take the hosted study itself (a dry run of the
    real thing); their answers land in its database, read with satcal ingest DIR --platform serve.
    """
    from .pipeline import simulation_text
    from .study import Study
    ws = Study.open(directory)
    if serve_url:
        visits, truth = ws.simulate_served(serve_url, concurrency=concurrency, progress=True)
        click.echo(simulation_text(truth, served_at=serve_url, participants=len(visits), where=ws.path,
                                   unserved=sum(v.pages == 0 for v in visits)))
        return
    path, truth = ws.simulate(platform, force=force)
    click.echo(simulation_text(truth, path))


@_study_command
@ingest_options
def ingest(directory, files, platform, threshold, dawid_skene, db_url, remove_name, drop_trap):
    """Ingest result files: archive them under raw/ and rebuild answers.csv, rejects.csv,
    workers.csv and traps_report.csv (each trap's accuracy among the workers the other traps
    trust; a trap most of them miss is flagged: see --drop-trap).

    Every row read ends in answers.csv (canonical A/B orientation) or rejects.csv (with the
    reason); ingesting a file again changes nothing; a broken file is refused with its line
    and leaves the workspace untouched.

    \b
    satcal ingest DIR --platform serve   reads the hosted study's database (satcal serve): a
                                         snapshot of every stored response is archived; it
                                         replaces the earlier snapshot of the same database.
    satcal ingest DIR --remove FILE      takes a file ingested by mistake back out.
    """
    import gc
    # a command of a few seconds that makes millions of cells and few reference cycles: the
    # collector's passes over everything imported (0.08 s of the imports alone) buy nothing.
    # What is left when it ends (the modules it imported, mostly, and any cycles the run left,
    # which are then never freed: harmless for a command that exits, a small leak for a
    # process that calls it many times, like the tests' CliRunner) goes to the permanent
    # generation, so that neither the next collection nor the one at exit walks it (0.06 s each)
    was_enabled = gc.isenabled()
    gc.disable()
    if _own_process():  # freed memory reused, not faulted in again (fileio.keep_freed_memory)
        from .fileio import keep_freed_memory
        keep_freed_memory()
    try:
        _ingest(directory, files, platform, threshold, dawid_skene, db_url, remove_name, drop_trap)
    finally:
        gc.freeze()
        if was_enabled:   # a caller that turned the collector off keeps it off
            gc.enable()


def _own_process() -> bool:
    """Whether this process is the ``satcal`` command itself (the console script or
    ``python -m satcal``), not a caller that runs a command inside its own process (the tests'
    CliRunner): a setting for the rest of the process is then the command's to make."""
    import sys
    main_file = Path(sys.argv[0]) if sys.argv and sys.argv[0] else Path()
    return main_file.name == "satcal" or (main_file.name == "__main__.py" and main_file.parent.name == "satcal")


def _ingest(directory, files, platform, threshold, dawid_skene, db_url, remove_name, drop_trap):
    """:func:`ingest`, with the collector as the caller left it."""
    from .study import Study
    ws = Study.open(directory)
    if drop_trap:
        ws.drop_traps(drop_trap)
    if remove_name:
        removed, report = ws.remove_alone(remove_name, threshold, files, platform)
        click.echo(f"Removed {removed} (kept in {ws.path}/raw/removed/); tables rebuilt:")
        click.echo("\n".join(report.lines()))
        return
    report = ws.ingest_any(files, platform, threshold, db_url, rebuild=bool(drop_trap), dawid_skene=dawid_skene)
    click.echo("\n".join(report.lines()))
    if dawid_skene:
        accuracy = ws.dawid_skene(report)
        click.echo(f"Dawid-Skene accuracies of {len(accuracy)} workers in {ws.file('workers_ds.csv')} and "
                   "workers.csv (ds_accuracy)")


@_study_command
@click.option("--host", default="127.0.0.1", show_default=True,
              help="Address to listen on; this machine only unless you say otherwise (put a TLS "
                   "reverse proxy in front for participants on the internet).")
@click.option("--port", type=click.IntRange(1, 65535), default=8000, show_default=True,
              help="Port to listen on.")
@click.option("--db", "db_url", default=None,
              help="Study database: default DIR/serve.db (SQLite); a SQLAlchemy URL such as "
                   "postgresql+psycopg://user@host/study when several servers share one study.")
@click.option("--workers", type=click.IntRange(1, 64), default=1, show_default=True,
              help="Server processes (each with its own threads).")
@click.option("--https-only", is_flag=True,
              help="Send the session cookie over HTTPS only (behind a TLS reverse proxy).")
@click.option("--public-url", default=None,
              help="The address participants use (behind a proxy), for the printed links.")
@click.option("--loop", type=click.Choice(["auto", "asyncio", "uvloop"]), default="auto", show_default=True,
              help="uvicorn's event loop; auto: uvloop when installed (pip install 'satcal[serve]'), else asyncio.")
@click.option("--http", type=click.Choice(["auto", "h11", "httptools"]), default="auto", show_default=True,
              help="uvicorn's HTTP parser; auto: httptools when installed, else h11.")
def serve(directory, host, port, db_url, workers, https_only, public_url, loop, http):
    """Serve the study to participants: Prolific or lab, in any browser, no JavaScript needed.

    Participants open the entry URL (Prolific adds PROLIFIC_PID, STUDY_ID and SESSION_ID; lab
    participants type a code), read the instructions, consent, and answer pages of the batch
    that satcal export wrote; Prolific participants end with a redirect to the completion code
    of study.toml [serve]. Every page is stored in one transaction; nothing is stored twice.
    A researcher's status page is printed at start. Read the answers with
    satcal ingest DIR --platform serve.
    """
    from .pipeline import adaptive_serve_line, serve_banner, serve_url
    from .study import Study
    from .study.hosting import server_stack
    loop, http = server_stack(loop, http)  # a named one not installed: refused before anything starts
    ws = Study.open(directory)
    study = ws.hosted_study(db_url)
    adaptive = adaptive_serve_line(study, ws["serve.refit_seconds"])
    if adaptive:
        click.echo(adaptive)
    ws.remember_database(db_url)  # its answers then count as collected (export --force refuses)
    said, warned = serve_banner(study, serve_url(public_url, host, port))
    click.echo(said)
    hint = ("" if server_stack() == ("uvloop", "httptools") else
            " (uvloop and httptools take less CPU a request: pip install 'satcal[serve]')")
    click.echo(f"  server: uvicorn, {loop} event loop, {http} HTTP parser{hint}")
    for line in warned:
        click.echo(line, err=True)
    with ws.serving(db_url):  # while it runs, commands that would replace the key refuse
        ws.run_server(study, host, port, db_url, workers, https_only, loop, http)


@_study_command
@click.option("--budgets", default="250,500,1000,2000", show_default=True,
              help="Budgets in answers, separated by commas.")
@click.option("--answers-per-example", type=click.IntRange(min=1), default=None,
              help="Answers each example collects (default: [design] answers_per_example of study.toml).")
@click.option("--pair", default="lin-const,exp2-log2", show_default=True,
              help="The two formulations whose bias difference should be detected.")
@click.option("--sims", type=click.IntRange(min=2), default=50, show_default=True,
              help="Simulated studies per budget.")
@click.option("--boot", type=click.IntRange(min=10), default=100, show_default=True,
              help="Bootstrap replicates inside each simulated study.")
@click.option("--force", is_flag=True, help="Replace an earlier power/ analysis.")
@click.option("--quiet", "-q", is_flag=True, help="No progress bars.")
def power(directory, budgets, answers_per_example, pair, sims, boot, quiet, force):
    """Power of the design by simulation: P(detect the bias difference of two formulations)
    and P(detect the ANOVA gain and discount effects), against budget.

    Uses the workspace's examples.csv and the user model of [simulation] in study.toml;
    writes power/power.csv and power/power.png.
    """
    from .pipeline import parse_budgets, parse_pair, power_text
    from .study import Study
    ws = Study.open(directory)
    ws.guard(["power"], force)  # before the simulations, not after
    result, written = ws.power(parse_budgets(budgets), parse_pair(pair), sims, boot, answers_per_example,
                               force=force, progress=not quiet)
    click.echo(power_text(result, written))


@main.command(context_settings=CONTEXT)
@click.option("--judgments", type=click.Path(path_type=Path), required=True,
              help="TREC qrels or CSV/TSV with query, doc, level columns, to score the runs with.")
@click.option("--run", "--runs", "runs", type=click.Path(path_type=Path), multiple=True, required=True,
              help="A TREC run file, a directory of them, or a glob (repeatable).")
@click.option("--calibration", type=click.Path(path_type=Path), required=True,
              help="Output directory of satcal analyze (its fits.csv), or a workspace.")
@click.option("--formulation", "formulations", default=None, metavar="IDS",
              help="Comma-separated formulations or measures to evaluate under (default: every "
                   "one the calibration holds), e.g. lin-const,lin-geo0.8,err,ap.")
@click.option("--k", type=click.IntRange(min=1), default=None,
              help="Cutoff (default: the calibration's own k; another one is refused).")
@click.option("--out", type=click.Path(path_type=Path), required=True,
              help="Output directory (refused when it holds files, unless --force).")
@click.option("--force", is_flag=True, help="Overwrite an output directory that holds files.")
def evaluate(judgments, runs, calibration, formulations, k, out, force):
    """Expected user satisfaction of systems, from a calibration, under several measures at
    once.

    Per query phi and expected P(Sat|phi) under every calibrated measure; per system the mean
    expected satisfaction with a 95% interval over queries; for each pair of systems the
    expected share of queries on which users prefer either. Systems scored by different
    measures (nDCG, RBP, ERR, AP ...) land on one scale: the probability that users are
    satisfied. Writes evaluation_*.csv (evaluation_side_by_side.csv: systems x measures) and
    evaluation.png.
    """
    from .pipeline import evaluate_into, evaluation_text
    click.echo(evaluation_text(*evaluate_into(judgments, runs, calibration, formulations, k, out, force)))


@main.command(context_settings=CONTEXT)
@reliability_options
def reliability(judgments, runs, simulate_runs, calibration, k, normalization, negatives, replicates,
                alpha, target, optimize, seed, out, force, quiet):
    """System-side reliability of every formulation: G-study variance components, D-study
    E rho^2 and Phi with intervals and topics needed, discriminative power (Sakai's paired
    bootstrap, ASL curves), Buckley-Voorhees error rates, Kendall tau between formulations;
    with --calibration, the user-side b1-b3 beside them in one table and one figure.
    """
    from .pipeline import reliability_into, reliability_table
    result, written = reliability_into(judgments, runs, simulate_runs, calibration, k, normalization, negatives,
                                       replicates, alpha, target, optimize, seed, out, force,
                                       progress=not quiet, echo=click.echo)
    click.echo(reliability_table(result))
    click.echo(f"Wrote {len(written)} tables and figures to {out}/")


@main.command(context_settings=CONTEXT)
@click.option("--out", type=click.Path(path_type=Path), default=Path("satcal-demo"),
              show_default=True, help="Where the demo writes everything.")
@click.option("--seed", type=click.IntRange(min=0), default=2015, show_default=True, help="Seed of every random step.")
@click.option("--force", is_flag=True, help="Overwrite a previous demo directory.")
@click.option("--quiet", "-q", is_flag=True, help="No progress bars.")
def demo(out, seed, force, quiet):
    """The main job on the embedded ECIR 2015 data, into ./satcal-demo/.

    \b
    1. a study of your own on the embedded judgments: init, generate (coverage of every cell
       of the 36 formulations), export (Appen), simulate (a crowd with a known user model),
       ingest (traps score the workers, spammers are excluded), analyze;
    2. the published answers of Urbano & Marrero (ECIR 2015), analysed: P(Sat|phi) and
       P(Pref|dphi) for the 36 formulations, bias b1-b3, ANOVA, figures and report;
    3. system-side reliability (Phi, E rho^2, discriminative power) of every formulation
       beside its user-side bias, on SIMULATED runs (the embedded data has none).
    Ends with the ranking of formulations by bias and where each output is.
    """
    from .pipeline import demo_text, prepare_out, run_demo
    click.echo(demo_text(run_demo(prepare_out(out, force), seed=seed, progress=not quiet, echo=click.echo)))


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
