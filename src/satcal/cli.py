"""The ``satcal`` command line.

Every user mistake (a bad file, a bad option) ends in one line on stderr, ``satcal: error: ...``,
and exit code 2; a full disk, a denied permission or a read-only file system in one line naming
the path and exit code 1 (the command's outputs are written as one set, so nothing is left
half-written); no traceback.
"""
from __future__ import annotations

import sys
from contextlib import contextmanager
from pathlib import Path

import click

from ._version import __version__
from .errors import SatcalError

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


#: Errors of the machine, not of satcal or the user's files: one line naming the path, exit 1.
_ENVIRONMENT_ERRORS = {"ENOSPC": "no space left on the device; free some and run the command again "
                                 "(nothing was changed)",
                       "EDQUOT": "disk quota exceeded; free some space and run the command again "
                                 "(nothing was changed)",
                       "EACCES": "permission denied",
                       "EPERM": "operation not permitted",
                       "EROFS": "read-only file system"}


def environment_error(exc: OSError) -> str | None:
    """The one line for a full disk, a denied permission, a read-only file system or any other
    system error about a named path (named by the path the failing call was given), or None
    for an error that names no path."""
    import errno
    import re
    name = errno.errorcode.get(exc.errno or 0, "")
    if name not in _ENVIRONMENT_ERRORS:
        # any other error the system gives about a named file (a directory where a file was
        # expected, a path too long...) is one line too; one about no file stays a traceback
        if exc.filename is None or not exc.strerror:
            return None
        where = re.sub(r"/\.satcal-stage-[^/]+/new/", "/", str(exc.filename))
        words = exc.strerror
        if len(words) > 1 and words[1].islower():  # "Is a directory" -> "is a directory"; "I/O error" stays
            words = words[0].lower() + words[1:]
        return f"{where}: {words}"
    # a copy that fails for want of space names its source first and its target second
    target = exc.filename2 if name in ("ENOSPC", "EDQUOT") and exc.filename2 is not None else exc.filename
    where = str(target) if target is not None else "a file"
    # a file written aside into an output set is named where it was to go
    where = re.sub(r"/\.satcal-stage-[^/]+/new/", "/", where)
    return f"{where}: {_ENVIRONMENT_ERRORS[name]}"


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


def _prepare_out(out: Path, force: bool, create: bool = True) -> Path:
    """Check ``--out`` (refused when it holds files, unless ``force``); made only if ``create``,
    so a command that checks it before its work leaves nothing when the work fails."""
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
def _output_dir(out: Path, force: bool):
    """An --out directory written as one set: the command writes into a stage inside it, and
    the files move into place together at the end (same names replaced, other files kept),
    so a killed command leaves the old files or the new ones, never a mix. A directory this
    made is removed again if the command fails before anything is in it."""
    from .fileio import OutputSet
    out = Path(out)
    made = [p for p in (out, *out.parents) if not p.exists()]
    try:
        with OutputSet(_prepare_out(out, force), "out") as outputs:
            yield outputs
    except BaseException:
        for p in made:  # innermost first; a directory that holds anything stays
            try:
                p.rmdir()
            except OSError:
                break
        raise


PLATFORM_NAMES = ["appen", "toloka", "labelstudio", "csv", "serve"]
_workspace_platform_option = click.option(
    "--platform", type=click.Choice(PLATFORM_NAMES), help="Default: presentation.platform of study.toml.")


def _expand_runs(values) -> list[Path]:
    """Run arguments: files, directories (every file inside) or glob patterns."""
    import glob
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


def _echo_ranking(result, top: int = 10) -> None:
    """The warnings, the bootstrap's verdict and the top of the ranking (its lead estimator)."""
    from .analysis.ranking import ESTIMATOR_NAMES, estimator_columns
    for warning in result.meta.get("warnings", []) + result.meta.get("design_warnings", []):
        click.echo(f"warning: {warning}")
    cols = estimator_columns(result.bias, result.estimator)
    rank = result.ranking.head(top)
    lo, hi = f"{cols[0]}_lo", f"{cols[0]}_hi"
    intervals = lo in result.bias.columns
    if intervals:
        rank = rank.merge(result.bias[["formulation", lo, hi]], on="formulation")
    ranks = "rank_lo" in rank.columns
    click.echo(f"\nFormulations ranked by bias ({ESTIMATOR_NAMES[result.estimator]}; mean rank over "
               f"{', '.join(cols)}; 1 = least biased):")
    click.echo(f"  {'#':>2}  {'formulation':<14} {cols[0]:>8}{'  95% interval    ' if intervals else ''} "
               f"{cols[1]:>8} {cols[2]:>8}{'  P(first)  rank 95%' if ranks else ''}")
    for i, r in enumerate(rank.itertuples(index=False), start=1):
        r = r._asdict()
        iv = f"  [{r[lo]:.4f}, {r[hi]:.4f}]" if intervals else ""
        rk = f"  {r['p_best']:8.2f}  {r['rank_lo']}-{r['rank_hi']}" if ranks else ""
        click.echo(f"  {i:>2}  {r['formulation']:<14} {r[cols[0]]:8.4f}{iv} {r[cols[1]]:8.4f} {r[cols[2]]:8.4f}{rk}")
    click.echo("\n" + result.verdict.sentence())


class LevelsType(click.ParamType):
    """``--levels``, the same everywhere: a list of levels (``0,1,2,3``) or their number L
    (``4``, meaning 0..L-1). Converts to the sorted list of levels."""

    name = "LEVELS"

    def convert(self, value, param, ctx):
        if isinstance(value, list):
            return value
        text = str(value).strip()
        try:
            parts = [int(v) for v in text.split(",") if v.strip()]
        except ValueError:
            self.fail(f"{value!r}: expected levels separated by commas (e.g. 0,1,2,3) or their number "
                      "(e.g. 4 for 0..3)", param, ctx)
        if len(parts) == 1 and "," not in text:
            if parts[0] < 2:
                self.fail(f"{value!r}: a scale needs at least 2 levels", param, ctx)
            return list(range(parts[0]))
        if len(set(parts)) != len(parts) or len(parts) < 2:
            self.fail(f"{value!r}: expected at least 2 distinct levels", param, ctx)
        return sorted(parts)


LEVELS = LevelsType()


def _analysis_options(f):
    options = [
        click.option("--population", type=click.Choice(["all", "preferences_only"]), default="all",
                     show_default=True,
                     help="Preference population: 'all' answers (ties and both_* answers count as "
                          "not siding with the higher score; this reproduces the published numbers) "
                          "or only a_better/b_better answers."),
        click.option("--bootstrap", "bootstrap", type=click.IntRange(min=0), default=1000,
                     show_default=True, help="Bootstrap replicates (over workers and examples "
                                             "when answers carry worker ids, else examples), for "
                                             "intervals and pairwise tests (0 for none)."),
        click.option("--seed", type=int, default=2015, show_default=True,
                     help="Seed of the bootstrap and of the model-check folds."),
        click.option("--jobs", type=int, default=0, show_default=True,
                     help="Worker processes for the bootstrap: 0 one per core this process may "
                          "use (its CPU affinity), -1 the same, -2 one fewer, N exactly N."),
        click.option("--backend", type=click.Choice(["loky", "dask"]), default="loky",
                     show_default=True, help="Parallel backend for the bootstrap."),
        click.option("--scheduler", default=None, help="Dask scheduler address (with --backend dask)."),
        click.option("--normalization", type=click.Choice(["max", "ideal", "minmax", "ul1", "ul2"]),
                     default="max", show_default=True,
                     help="How DCG becomes phi: 'max' (the study's: divided by k top-level "
                          "documents) or a per-query one computed from the judgments' pool "
                          "('ideal' calibrates classic nDCG@k)."),
        click.option("--negatives", type=click.Choice(["keep", "zero"]), default="keep",
                     show_default=True, help="Negative levels: gain applied as given, or mapped to 0."),
        click.option("--formulations", "formulations", default=None, metavar="IDS",
                     help="What to calibrate: 'study' (the 36 gain x discount formulations, or a "
                          "workspace's own), 'all' (those plus RBP, ERR, RR, AP and P), or a "
                          "comma-separated list of ids such as exp2-log2,lin-geo0.8,err,ap "
                          "('study' and 'all' may appear in the list)."),
        click.option("--sat-model", "sat_model", type=click.Choice(["both", "published", "joint"]),
                     default="both", show_default=True,
                     help="Satisfaction curves: 'published' (the paper's, from both_good/both_bad "
                          "answers: satisfaction of a list whose partner got the same verdict; "
                          "reproduces the paper exactly), or 'both' (also the per-list curve of a "
                          "joint model over all four answers; 'joint' is the same)."),
        click.option("--indicator-range", "indicator_range", type=click.Choice(["data", "full"]),
                     default="data", show_default=True,
                     help="Where b1-b3 are computed: over the scores the answers reach ('data'; "
                          "curves beyond them are extrapolations) or over all of [0, 1] ('full', as "
                          "the paper, whose design reached it). The same when answers reach [0, 1]."),
        click.option("--force", is_flag=True, help="Overwrite an output directory that holds files."),
        click.option("--quiet", "-q", is_flag=True, help="No progress bars."),
    ]
    for opt in reversed(options):
        f = opt(f)
    return f


@main.command(context_settings=CONTEXT)
@click.argument("workspace", required=False, type=click.Path(path_type=Path))
@click.option("--dataset", type=click.Choice(["ecir2015"]), help="Analyse an embedded dataset.")
@click.option("--answers", type=click.Path(path_type=Path),
              help="External study: CSV with query, a1..a<k>, b1..b<k>, answer[, worker_id].")
@click.option("--judgments", type=click.Path(path_type=Path), help="Judgments of the external study.")
@click.option("--k", type=click.IntRange(min=1), default=None, help="Documents per list (default: "
              "the number of a<i> columns).")
@click.option("--levels", type=LEVELS, default=None,
              help="The relevance levels, 0..L-1: as a list (0,1,2,3) or their number L (4) "
                   "(default: from the judgments).")
@click.option("--unjudged", type=click.Choice(["error", "zero"]), default="error", show_default=True,
              help="A listed document with no judgment: an error, or level 0.")
@click.option("--scores", type=click.Choice(["exact", "published"]), default="exact",
              show_default=True, help="ecir2015 only: phi recomputed from the recovered "
              "judgments, or the published 3-decimal scores.")
@click.option("--out", type=click.Path(path_type=Path), help="Output directory.")
@_analysis_options
def analyze(workspace, dataset, answers, judgments, k, levels, unjudged, scores, out, population,
            bootstrap, seed, jobs, backend, scheduler, normalization, negatives, formulations, sat_model,
            indicator_range, force, quiet):
    """Fit P(Sat|phi) and P(Pref|dphi), bias b1-b3, ANOVA; write tables, figures and a report.

    \b
    Three sources of answers:
      satcal analyze --dataset ecir2015 --out DIR          the published ECIR 2015 answers
      satcal analyze --answers A.csv --judgments Q --out DIR   an external study
      satcal analyze WORKSPACE                             a workspace's ingested answers,
                                                           into WORKSPACE/analysis/

    Output: bias.csv, anova.csv, fits.csv, curves.csv, points.csv, model_check.csv,
    ranking.csv, figures/ (fig1_sat, fig2_pref, fig3_bias; PNG and PDF) and report.html.
    """
    from ._threads import resolve_jobs
    from .analysis import calibrate
    from .report import write_analysis

    sources = sum(x is not None for x in (workspace, dataset, answers))
    if sources != 1:
        raise SatcalError("give exactly one of: a WORKSPACE directory, --dataset ecir2015, or "
                          "--answers FILE with --judgments FILE")
    kwargs = dict(population=population, bootstrap=bootstrap, seed=seed, n_jobs=resolve_jobs(jobs),
                  backend=_backend(backend, scheduler), progress=not quiet, sat_model=sat_model,
                  indicator_range=indicator_range)
    scale = dict(normalization=normalization, negatives=negatives)
    if workspace is not None:
        from .workspace import Workspace
        ws = Workspace.open(workspace)
        base = ws.formulations(**scale)
        kwargs["formulations"] = parse_formulations(formulations, base, **scale) if formulations else base
        result = ws.analyze(force=force, **kwargs)
        out = ws.path / "analysis"
    else:
        if out is None:
            raise SatcalError("--out DIR is required with --dataset or --answers")
        _prepare_out(out, force, create=False)  # refused before the work, not after
        if formulations is not None or scale != {"normalization": "max", "negatives": "keep"}:
            kwargs["formulations"] = parse_formulations(formulations or "study", **scale)
        if dataset:
            result = _analyze_ecir(scores, kwargs)
        else:
            if judgments is None:
                raise SatcalError("--answers needs --judgments FILE (the levels of its documents)")
            from .ingest import read_external_study
            from .judgments import read_judgments
            qrels = read_judgments(judgments)
            if levels is not None and levels != list(range(len(levels))):
                raise SatcalError(f"--levels {','.join(map(str, levels))}: an analysis scale is 0..L-1; "
                                  f"give {','.join(map(str, range(len(levels))))} or {len(levels)}")
            study = read_external_study(answers, qrels, k=k, n_levels=None if levels is None else len(levels),
                                        unjudged=unjudged)
            result = calibrate(study, **kwargs)
            from .fileio import sha256_file
            result.meta["provenance"].update(judgments_sha256=sha256_file(judgments),
                                             answers_sha256=sha256_file(answers))
        with _output_dir(out, force) as outputs:
            write_analysis(result, outputs.tree())
    if result.meta.get("notice"):
        click.echo(result.meta["notice"])
    _echo_ranking(result)
    click.echo(f"\nWrote tables, figures and the report to {out}/ (open {out}/report.html)")


def parse_formulations(text: str, study=None, normalization: str = "max", negatives: str = "keep") -> list:
    """``--formulations``: comma-separated ids; 'study' and 'all' expand (see ``analyze --help``)."""
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


def _calibrated_id(name: str) -> str:
    """The id a calibration stores for a name (``nDCG@10`` is stored as ``lin-log2``)."""
    from .measures import formulation
    try:
        return formulation(name).id
    except ValueError:
        return name  # a custom formulation's id, looked up as given


def _backend(name: str, scheduler: str | None):
    if name == "dask":
        return f"dask:{scheduler}" if scheduler else "dask"
    return name


def _analyze_ecir(scores: str, kwargs: dict):
    from .analysis import calibrate
    from .datasets import ECIR2015_NOTICE, load_ecir2015, load_ecir2015_crowd, published_scores
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


@main.command(context_settings=CONTEXT)
@click.argument("directory", type=click.Path(path_type=Path))
@click.option("--judgments", type=click.Path(path_type=Path), required=True,
              help="TREC qrels or CSV/TSV with query, doc, level columns.")
@click.option("--documents", type=click.Path(path_type=Path),
              help="Optional CSV with doc and any of title, snippet, url, audio_url.")
@click.option("--topics", type=click.Path(path_type=Path),
              help="Optional topics: TREC topics file, 'id<TAB>text' lines, or CSV/TSV with query, "
                   "title (and description, narrative); workers see the title and description.")
@click.option("--k", type=click.IntRange(min=1), default=5, show_default=True, help="Documents per list.")
@click.option("--levels", type=LEVELS, default=None, help="Levels to build lists from: a list (0,1,2) "
              "or their number (3 for 0..2) (default: the judgments' non-negative levels).")
@click.option("--min-per-cell", type=click.IntRange(min=1), default=200, show_default=True)
@click.option("--platform", type=click.Choice(PLATFORM_NAMES), default="appen", show_default=True)
@click.option("--seed", type=int, default=2015, show_default=True)
@click.option("--force", is_flag=True, help="Start over in a directory that has a study.toml.")
def init(directory, judgments, documents, topics, k, levels, min_per_cell, platform, seed, force):
    """Create a study workspace with a commented study.toml to edit.

    The judgments (and documents table) are copied into DIRECTORY/inputs/ so the workspace is
    self-contained; every later command reads study.toml.
    """
    from .workspace import Workspace
    ws = Workspace.init(directory, judgments, documents, k=k, levels=levels, seed=seed,
                        min_per_cell=min_per_cell, platform=platform, force=force, topics=topics)
    click.echo(f"Created {ws.path}/study.toml; edit it, then run: satcal generate {ws.path}")


@main.command(context_settings=CONTEXT)
@click.argument("directory", type=click.Path(path_type=Path))
@click.option("--force", is_flag=True, help="Overwrite examples generated before.")
@click.option("--quiet", "-q", is_flag=True, help="No progress bar.")
def generate(directory, force, quiet):
    """Build examples that cover every phi and |dphi| cell of every formulation.

    Writes examples.csv, traps.csv, scores.csv, coverage.csv and coverage.png/pdf, and reports
    the examples used against the cell floor (the fewest that can fill every cell), the
    infeasible cells, and warnings: a few queries holding most examples, the query share asked
    and got, a level too rare to reach phi's upper range.
    """
    from .workspace import Workspace
    ws = Workspace.open(directory)
    result = ws.generate(force=force, progress=not quiet)
    s = result.summary()
    click.echo(f"{s['examples']} examples (cell floor {s['lower_bound']} = min_per_cell x the "
               f"{s['floor_cells']} |dphi| cells of the widest formulation"
               + (f", LP bound {s['lp_bound']}" if "lp_bound" in s else "")
               + f"; method {s['method']}); every feasible cell has >= "
               f"{result.design.min_per_cell}: {'yes' if result.complete else 'NO'}")
    inf = result.infeasible
    if len(inf):
        click.echo(f"{len(inf)} infeasible cells (no buildable example lands there): "
                   + ", ".join(f"{r.formulation} {r.kind} bin {r.bin}" for r in inf.head(8).itertuples())
                   + (" ..." if len(inf) > 8 else ""))
    share = result.candidates.get("max_query_share", 0)
    line = f"Queries: {result.candidates.get('queries_used', 0)} used, the busiest holds {100 * share:.1f}% of the examples"
    if "query_cap" in result.candidates:
        line += (f" (limit {result.candidates['query_cap']} each: {result.candidates['query_cap_extra_examples']:+d} "
                 f"examples, {result.candidates['query_cap_short_cells']} cells left short)")
    click.echo(line)
    for warning in result.warnings:
        click.echo(f"Warning: {warning}")
    from .generate import ECIR2015_PAIRING_CORRELATION
    click.echo(f"Pairing correlation corr(phi_A, phi_B): {result.pairing_correlation().median():.2f} (median over "
               f"the {len(result.design.formulations)} formulations; the ECIR 2015 pairs: "
               f"{ECIR2015_PAIRING_CORRELATION:.2f}); the paper's P(Sat|phi) depends on it, the per-list curve does not")
    extra = _extra_measures_line(result)
    if extra:
        click.echo(extra)
    click.echo(f"Traps: {getattr(result, 'traps_built', '')}")
    if not ws["traps.file"]:
        from .traps import TRAP_RULE
        click.echo(f"  The {TRAP_RULE}.")
    if "adaptive_pool" in result.candidates:  # adaptive: the examples are the candidate pool
        click.echo(f"Adaptive: examples.csv and pool.csv hold the candidate pool, {result.candidates['adaptive_pool']} "
                   f"examples; the coverage design above had {result.candidates['coverage_design_examples']} (its "
                   f"coverage.csv is the fixed design's). Next: satcal export {ws.path} --next-batch")
    click.echo(f"Wrote examples.csv, traps.csv, scores.csv, coverage.csv, coverage.png in {ws.path}/")


def _drop_traps(ws, ids) -> None:
    """Add ``ids`` to the workspace's dropped traps for this command (not to study.toml), after
    checking that each names a trap of traps.csv."""
    traps = ws.table("traps.csv", required=False)
    known = set(traps["trap_id"]) if traps is not None else set()
    unknown = [t for t in ids if t not in known]
    if unknown:
        raise SatcalError(f"--drop-trap {unknown[0]}: no such trap in {ws.path}/traps.csv"
                          + (f" (traps are {min(known)} to {max(known)})" if known else ""))
    ws.config["quality"]["drop_traps"] = sorted(set(ws.config["quality"]["drop_traps"]) | set(ids))


def _extra_measures_line(result) -> str:
    """What the measures beyond the DCG family cost, in examples, or what they lack."""
    s, design = result.summary(), result.design
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


@main.command(context_settings=CONTEXT)
@click.argument("directory", type=click.Path(path_type=Path))
@_workspace_platform_option
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
    from .workspace import Workspace
    ws = Workspace.open(directory)
    if next_batch and new_batch:
        raise SatcalError("give --new-batch (the whole study again) or --next-batch (an adaptive wave), not both")
    paths = ws.export(platform, force=force, new_batch=new_batch, next_batch=next_batch)
    click.echo("Wrote " + ", ".join(str(p) for p in paths) + f" and the hidden key {ws.path}/key.csv "
               f"(batch {ws.batch_number()})")
    settings = ws.platform_settings(platform)
    if settings:
        name = platform or ws["presentation.platform"]
        click.echo(f"Settings ([platforms.{name}] of study.toml): {settings}")
    if ws["design.adaptive"] and not next_batch and (platform or ws["presentation.platform"]) != "serve":
        click.echo("  warning: an adaptive study: this batch holds the whole candidate pool; ask the next "
                   f"wave with satcal export {ws.path} --next-batch", err=True)
    if (platform or ws["presentation.platform"]) == "serve":
        from .serve.study import workspace_warnings
        for warning in workspace_warnings(ws):
            click.echo(f"  warning: {warning}", err=True)


@main.command(context_settings=CONTEXT)
@click.argument("directory", type=click.Path(path_type=Path))
@click.option("--n", "n", type=click.IntRange(min=1), default=6, show_default=True, help="Units to show.")
@click.option("--force", is_flag=True, help="Replace an earlier preview.html.")
def preview(directory, n, force):
    """A static HTML page with a sample of units exactly as a worker sees them."""
    from .workspace import Workspace
    path = Workspace.open(directory).preview(n, force=force)
    click.echo(f"Open {path} in a browser.")


@main.command(context_settings=CONTEXT)
@click.argument("directory", type=click.Path(path_type=Path))
@_workspace_platform_option
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
    from .simulate import simulate_workspace
    from .workspace import Workspace
    ws = Workspace.open(directory)
    if serve_url:
        import json
        from .fileio import atomic_write_text
        from .simulate import simulate_served
        visits, truth = simulate_served(ws, serve_url, concurrency=concurrency, progress=True)
        if truth["errors"]:
            raise SatcalError(f"{len(truth['errors'])} simulated participants failed, first: {truth['errors'][0]}")
        with ws.locked():
            (ws.path / "simulated").mkdir(exist_ok=True)
            atomic_write_text(ws.path / "simulated" / "serve-truth.json", json.dumps(truth, indent=1) + "\n")
            ws.record("simulate", {"served_at": serve_url, "participants": len(visits), "pages": truth["pages"]})
        click.echo(f"{len(visits)} simulated participants answered {truth['pages']} pages at {serve_url} "
                   f"({len(truth['spammers'])} spammers); truth in {ws.path}/simulated/serve-truth.json")
        return
    with ws.locked():
        path, truth = simulate_workspace(ws, platform, force=force)
    click.echo(f"Wrote {truth['answers']} simulated answers to {path} ({len(truth['spammers'])} "
               f"spammers among {truth['model']['workers']} workers); truth in {path.parent}/{path.name.split('-')[0]}-truth.json")


@main.command(context_settings=CONTEXT)
@click.argument("directory", type=click.Path(path_type=Path))
@click.argument("files", nargs=-1, type=click.Path(path_type=Path))
@click.option("--platform", type=click.Choice(PLATFORM_NAMES + ["ecir2015"]),
              help="Format of the files (default: detected from name and header). With serve and "
                   "no files, the hosted study's database is read.")
@click.option("--db", "db_url", default=None,
              help="With --platform serve: the study database (default DIR/serve.db; a SQLAlchemy "
                   "URL such as postgresql+psycopg://user@host/study).")
@click.option("--remove", "remove_name", default=None, metavar="FILE",
              help="Take an ingested file back out (its archived name, original name or hash "
                   "prefix): the tables are rebuilt without it; the file moves to raw/removed/.")
@click.option("--threshold", type=click.FloatRange(0, 1), default=None,
              help="Trust threshold (default: quality.trust_threshold of study.toml).")
@click.option("--dawid-skene", is_flag=True,
              help="Also fit Dawid-Skene worker models (optional crowd-kit extra); writes "
                   "workers_ds.csv with each worker's estimated accuracy.")
@click.option("--drop-trap", "drop_trap", multiple=True, metavar="ID",
              help="Leave this trap out of trust for this ingest (repeatable; with no files, rebuilds "
                   "the tables from the files ingested before). To keep it out, add it to [quality] "
                   "drop_traps in study.toml.")
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
    import tempfile
    from .ingest import ingest as run_ingest
    from .ingest import snapshot_served
    from .workspace import Workspace
    ws = Workspace.open(directory)
    if drop_trap:
        _drop_traps(ws, drop_trap)
    if remove_name:
        if files or platform:
            raise SatcalError("--remove takes one archived file back out: give no files or --platform with it")
        from .ingest import remove
        removed, report = remove(ws, remove_name, threshold)
        click.echo(f"Removed {removed} (kept in {ws.path}/raw/removed/); tables rebuilt:")
        for line in report.lines():
            click.echo(line)
        return
    if db_url and platform != "serve":
        raise SatcalError("--db reads a hosted study's database: give it with --platform serve")
    if not files and platform != "serve" and not drop_trap:
        raise SatcalError("give the result files to ingest (or --platform serve to read the hosted "
                          "study's database)")
    if dawid_skene:
        from .quality import require_crowdkit
        require_crowdkit()  # before anything is written
    with tempfile.TemporaryDirectory() as tmp:
        if not files and platform == "serve":
            files = [snapshot_served(ws, db_url, tmp)]
        report = run_ingest(ws, files, platform=platform, threshold=threshold)
    for line in report.lines():
        click.echo(line)
    if dawid_skene:
        from .fileio import atomic_write_text
        from .quality import dawid_skene as fit_ds
        # every worker's answers, those excluded by trap trust included: the model judges them too
        everyone = report.before_exclusion
        repeated = everyone[~everyone["is_trap"].astype(bool)].groupby("example_id").size()
        if not (repeated >= 2).any():
            raise SatcalError("Dawid-Skene estimates workers from examples that several workers answered; "
                              "in these answers every example has one, so it cannot estimate anything. "
                              "Set [design] answers_per_example to 2 or more (trap-based trust is in "
                              "workers.csv)")
        labels, accuracy = fit_ds(everyone)
        with ws.locked(), ws.staged("dawid-skene") as outputs:
            from .ingest import spreadsheet_safe
            atomic_write_text(outputs.file("workers_ds.csv"),
                              spreadsheet_safe(accuracy).to_csv(index=False, lineterminator="\n"))
            # beside trap trust in workers.csv, so one table says all about a worker
            workers = report.workers.drop(columns=["ds_accuracy"], errors="ignore").merge(
                accuracy, on="worker_id", how="left")
            atomic_write_text(outputs.file("workers.csv"), spreadsheet_safe(workers).to_csv(index=False, lineterminator="\n"))
        click.echo(f"Dawid-Skene accuracies of {len(accuracy)} workers in {ws.file('workers_ds.csv')} and "
                   "workers.csv (ds_accuracy)")


@main.command(context_settings=CONTEXT)
@click.argument("directory", type=click.Path(path_type=Path))
@click.option("--host", default="127.0.0.1", show_default=True,
              help="Address to listen on; this machine only unless you say otherwise (put a TLS "
                   "reverse proxy in front for participants on the internet).")
@click.option("--port", type=click.IntRange(1, 65535), default=8000, show_default=True)
@click.option("--db", "db_url", default=None,
              help="Study database: default DIR/serve.db (SQLite); a SQLAlchemy URL such as "
                   "postgresql+psycopg://user@host/study when several servers share one study.")
@click.option("--workers", type=click.IntRange(1, 64), default=1, show_default=True,
              help="Server processes (each with its own threads).")
@click.option("--https-only", is_flag=True,
              help="Send the session cookie over HTTPS only (behind a TLS reverse proxy).")
@click.option("--public-url", default=None,
              help="The address participants use (behind a proxy), for the printed links.")
def serve(directory, host, port, db_url, workers, https_only, public_url):
    """Serve the study to participants: Prolific or lab, in any browser, no JavaScript needed.

    Participants open the entry URL (Prolific adds PROLIFIC_PID, STUDY_ID and SESSION_ID; lab
    participants type a code), read the instructions, consent, and answer pages of the batch
    that satcal export wrote; Prolific participants end with a redirect to the completion code
    of study.toml [serve]. Every page is stored in one transaction; nothing is stored twice.
    A researcher's status page is printed at start. Read the answers with
    satcal ingest DIR --platform serve.
    """
    from .serve import HostedStudy
    from .workspace import Workspace
    ws = Workspace.open(directory)
    study = HostedStudy.from_workspace(ws, db_url)
    from .adaptive_study import attach
    if attach(ws, study):  # adaptive: pages in the criterion's order, refitted in the background
        click.echo(f"  adaptive: pages in the order the answers so far ask for, refitted in the background every "
                   f"{ws['serve.refit_seconds']:g} s; no page handed out once settled or at the budget")
    with ws.locked():
        ws.remember_database(db_url)  # its answers then count as collected (export --force refuses)
    base = (public_url or f"http://{'127.0.0.1' if host in ('0.0.0.0', '::') else host}:{port}").rstrip("/")
    settings = study.settings
    click.echo(f"Serving {len(study.pages)} pages x {settings.answers_per_example} answers "
               f"({study.per_participant} pages per participant) from {study.engine.url.render_as_string(hide_password=True)}")
    click.echo(f"  Prolific study URL: {base}/?PROLIFIC_PID={{{{%PROLIFIC_PID%}}}}&STUDY_ID={{{{%STUDY_ID%}}}}"
               "&SESSION_ID={{%SESSION_ID%}}")
    click.echo(f"  lab participants:   {base}/  (they type their participant code)")
    click.echo(f"  researcher status:  {base}/status/{study.status_token}  (keep this link private)")
    for warning in study.warnings:
        click.echo(f"  warning: {warning}", err=True)
    if not settings.completion_code:
        click.echo("  note: [serve] completion_code is empty in study.toml: Prolific participants will see a "
                   "thank-you page instead of the redirect that marks them complete", err=True)
    with ws.serving(db_url):  # while it runs, commands that would replace the key refuse
        _run_server(ws, study, host, port, db_url, workers, https_only)


def _run_server(ws, study, host, port, db_url, workers, https_only):
    import os
    import uvicorn
    from .serve import create_app
    if workers == 1:
        uvicorn.run(create_app(study, https_only=https_only), host=host, port=port, log_level="warning",
                    proxy_headers=True, server_header=False)
        return
    study.engine.dispose()
    os.environ.update({"SATCAL_SERVE_DIR": str(ws.path.resolve()), "SATCAL_SERVE_DB": db_url or "",
                       "SATCAL_SERVE_HTTPS_ONLY": "1" if https_only else "0"})
    uvicorn.run("satcal.cli:served_app", factory=True, host=host, port=port, workers=workers,
                log_level="warning", proxy_headers=True, server_header=False)


def served_app():
    """The application of one of several server processes (``satcal serve --workers N``)."""
    import os
    from .serve import HostedStudy, create_app
    from .workspace import Workspace
    ws = Workspace.open(os.environ["SATCAL_SERVE_DIR"])
    study = HostedStudy.from_workspace(ws, os.environ.get("SATCAL_SERVE_DB") or None)
    from .adaptive_study import attach
    attach(ws, study)  # adaptive: each server process refits its own page order
    return create_app(study, https_only=os.environ.get("SATCAL_SERVE_HTTPS_ONLY") == "1")


@main.command(context_settings=CONTEXT)
@click.argument("directory", type=click.Path(path_type=Path))
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
@click.option("--quiet", "-q", is_flag=True)
def power(directory, budgets, answers_per_example, pair, sims, boot, quiet, force):
    """Power of the design by simulation: P(detect the bias difference of two formulations)
    and P(detect the ANOVA gain and discount effects), against budget.

    Uses the workspace's examples.csv and the user model of [simulation] in study.toml;
    writes power/power.csv and power/power.png.
    """
    from .analysis.power import power_analysis
    from .simulate import _workspace_model
    from .workspace import Workspace
    ws = Workspace.open(directory)
    ws.guard(["power"], force)  # before the simulations, not after
    try:
        budget_list = [int(b) for b in budgets.split(",")]
    except ValueError:
        raise SatcalError(f"--budgets {budgets!r}: expected integers separated by commas") from None
    pair_t = tuple(p.strip() for p in pair.split(","))
    if len(pair_t) != 2:
        raise SatcalError(f"--pair {pair!r}: expected two formulation ids separated by a comma")
    model = _workspace_model(ws)  # every [simulation] key, as satcal simulate reads them
    result = power_analysis(ws.table("examples.csv"), ws.k, max(ws["study.levels"]), model, ws.formulations(),
                            pair_t, budget_list, answers_per_example or ws["design.answers_per_example"],
                            sims, boot, seed=ws.seed + 5,
                            progress=not quiet)
    with ws.locked(), ws.staged("power") as outputs:
        ws.guard(["power"], force)
        staged = outputs.dir("power")
        written = {name: ws.path / "power" / Path(p).relative_to(staged)
                   for name, p in result.save(staged).items()}
        ws.record("power", {"budgets": budget_list, "sims": sims, "boot": boot, "pair": list(pair_t)},
                  outputs=outputs)
    cols = ["answers"] + [c for c in result.table.columns if c.startswith("power_")]
    click.echo(result.table[cols].to_string(index=False))
    click.echo(f"Wrote {written['table']} and {written['figure']}")


@main.command(context_settings=CONTEXT)
@click.option("--judgments", type=click.Path(path_type=Path), required=True)
@click.option("--run", "--runs", "runs", type=click.Path(path_type=Path), multiple=True, required=True,
              help="A TREC run file, a directory of them, or a glob (repeatable).")
@click.option("--calibration", type=click.Path(path_type=Path), required=True,
              help="Output directory of satcal analyze (its fits.csv), or a workspace.")
@click.option("--formulation", "formulations", default=None, metavar="IDS",
              help="Comma-separated formulations or measures to evaluate under (default: every "
                   "one the calibration holds), e.g. lin-const,lin-geo0.8,err,ap.")
@click.option("--k", type=click.IntRange(min=1), default=None,
              help="Cutoff (default: the calibration's own k; another one is refused).")
@click.option("--out", type=click.Path(path_type=Path), required=True)
@click.option("--force", is_flag=True)
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
    from .analysis.evaluate import evaluate_runs, load_calibrations
    from .judgments import read_judgments
    from .runs import read_runs
    wanted = None if formulations is None else [_calibrated_id(t.strip()) for t in formulations.split(",")
                                                if t.strip()]
    cals = load_calibrations(calibration, wanted)
    _prepare_out(out, force, create=False)  # refused before the work, not after
    result = evaluate_runs(read_judgments(judgments), read_runs(_expand_runs(runs)), cals, k)
    with _output_dir(out, force) as outputs:
        written = {name: str(outputs.final(p)) for name, p in result.save(outputs.tree()).items()}
    click.echo("Expected P(Sat) per query, mean over queries, under each measure:")
    click.echo(result.side_by_side.to_string(index=False, float_format=lambda v: f"{v:.4f}"))
    click.echo(f"Wrote {', '.join(written.values())}")


@main.command(context_settings=CONTEXT)
@click.option("--judgments", type=click.Path(path_type=Path), required=True)
@click.option("--run", "--runs", "runs", type=click.Path(path_type=Path), multiple=True,
              help="A TREC run file, a directory of them, or a glob (repeatable).")
@click.option("--simulate-runs", type=click.IntRange(min=2), default=None,
              help="No runs at hand: simulate this many systems of graded quality (labelled "
                   "simulated; for trying the analysis only).")
@click.option("--calibration", type=click.Path(path_type=Path),
              help="An analysis directory (its bias.csv): user-side b1-b3 beside the system side, "
                   "scored at the calibration's own k, normalisation and negative policy.")
@click.option("--k", type=click.IntRange(min=1), default=None,
              help="Cutoff (default: the calibration's, else 10; another than the calibration's is refused).")
@click.option("--normalization", type=click.Choice(["ideal", "max", "minmax", "ul1", "ul2", "raw"]),
              default=None, help="Default: the calibration's, else ideal (as nDCG).")
@click.option("--negatives", type=click.Choice(["keep", "zero"]), default=None,
              help="Negative levels: gain applied as given, or mapped to 0 first (default: the "
                   "calibration's, else keep).")
@click.option("--replicates", type=click.IntRange(min=100), default=1000, show_default=True,
              help="Bootstrap replicates of the discriminative-power test.")
@click.option("--alpha", type=click.FloatRange(0, 1, min_open=True, max_open=True), default=0.05,
              show_default=True, help="Significance level: intervals of E rho^2 and Phi are two-sided "
              "(1 - alpha) intervals (alpha/2 in each tail: a tool whose alpha is per tail would "
              "call this 0.025), and a pair of systems counts as told apart when its ASL < alpha.")
@click.option("--target", type=click.FloatRange(0, 1, min_open=True, max_open=True), default=0.95,
              show_default=True, help="The E rho^2 and Phi to reach when counting the topics needed.")
@click.option("--optimize", type=click.Choice(["none", "gains", "discounts"]), default="none",
              show_default=True, help="Also find the gains (log2 discount) or discounts (linear "
              "gain) that maximise Phi at one topic (Kanoulas and Aslam, CIKM 2009).")
@click.option("--seed", type=int, default=2015, show_default=True)
@click.option("--out", type=click.Path(path_type=Path), required=True)
@click.option("--force", is_flag=True)
@click.option("--quiet", "-q", is_flag=True)
def reliability(judgments, runs, simulate_runs, calibration, k, normalization, negatives, replicates,
                alpha, target, optimize, seed, out, force, quiet):
    """System-side reliability of every formulation: G-study variance components, D-study
    E rho^2 and Phi with intervals and topics needed, discriminative power (Sakai's paired
    bootstrap, ASL curves), Buckley-Voorhees error rates, Kendall tau between formulations;
    with --calibration, the user-side b1-b3 beside them in one table and one figure.
    """
    import pandas as pd
    from .judgments import read_judgments
    from .measures import study_formulations
    from .reliability import optimal_discounts, optimal_gains, reliability_report, simulate_runs as sim_runs
    from .runs import read_runs
    if bool(runs) == bool(simulate_runs):
        raise SatcalError("give run files with --runs, or --simulate-runs N to try it on simulated systems")
    qrels = read_judgments(judgments)
    bias, prov = None, {}
    if calibration is not None:
        from .analysis.evaluate import read_provenance
        path = Path(calibration) / "bias.csv"
        if not path.exists():
            path = Path(calibration) / "analysis" / "bias.csv"
        if not path.exists():
            raise SatcalError(f"{calibration}: no bias.csv; give the output directory of satcal analyze")
        bias, prov = pd.read_csv(path), read_provenance(path.parent)
    k, normalization, negatives = _calibration_scale(prov, calibration, qrels, k, normalization, negatives)
    _prepare_out(out, force, create=False)  # refused before the work, not after
    with _output_dir(out, force) as outputs:
        root = outputs.tree()
        if simulate_runs:
            run_set = sim_runs(qrels, simulate_runs, seed=seed, out_dir=root / "simulated-runs")
            click.echo(f"SIMULATED runs: {simulate_runs} systems of graded quality, in {out}/simulated-runs/")
        else:
            run_set = read_runs(_expand_runs(runs))
        forms = study_formulations(normalization=normalization, negatives=negatives)
        result = reliability_report(run_set, qrels, forms, k=k, replicates=replicates, alpha=alpha,
                                    target=target, seed=seed, calibration_bias=bias, progress=not quiet)
        written = result.save(root)
        if optimize != "none":
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
            click.echo(f"optimal {optimize}: {item.formula}; Phi at one topic {phi_opt:.4f} (from {phi_start:.4f})")
        shown = result.combined if result.combined is not None else result.gstudy
        cols = [c for c in ("formulation", "b1", "b2", "b3", "phi", "erho2", "topics_for_phi") if c in shown.columns]
        click.echo(shown[cols].sort_values("phi", ascending=False).head(10).to_string(index=False, float_format=lambda v: f"{v:.4f}"))
        click.echo(f"Wrote {len(written)} tables and figures to {out}/")


def _calibration_scale(prov: dict, directory, judgments, k, normalization, negatives):
    """k, normalisation and negative policy for the system side: the calibration's own (from
    calibration.json) unless given; a contradicting option is refused, as user-side bias and
    system-side reliability are only comparable on the same scores."""
    def single(by_formulation):
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


@main.command(context_settings=CONTEXT)
@click.option("--out", type=click.Path(path_type=Path), default=Path("satcal-demo"),
              show_default=True, help="Where the demo writes everything.")
@click.option("--seed", type=int, default=2015, show_default=True, help="Seed of every random step.")
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
    from .pipeline import run_demo
    out = _prepare_out(out, force)
    summary = run_demo(out, seed=seed, progress=not quiet, echo=click.echo)
    _echo_ranking(summary["result"])
    click.echo("\nOutputs:")
    width = max(len(label) for label in summary["outputs"])
    for label, path in summary["outputs"].items():
        click.echo(f"  {label:<{width}}  {path}")


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
