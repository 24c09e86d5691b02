"""The declarations of the ``satcal`` command line's shared and long options (as pip keeps
them in ``cli/cmdoptions.py``): ``cli`` then reads as one short function per command.

Defaults and choices of study keys come from :mod:`satcal.settings`; nothing here loads the
scientific stack, so ``satcal --help`` stays fast.
"""
from __future__ import annotations

from pathlib import Path

import click

from .settings import choices as _choices

PLATFORM_NAMES = _choices("presentation.platform")


def stack(*options):
    """One decorator applying ``options`` in the order listed (the first is the first in --help).

    Parameters
    ----------
    *options : callable
        Click decorators (``click.option(...)``, ``click.argument(...)``).

    Returns
    -------
    callable
        The decorator.
    """
    def decorate(f):
        """``f`` with every option of ``options`` applied.

        Parameters
        ----------
        f : callable
            The click command function.
        """
        for opt in reversed(options):
            f = opt(f)
        return f
    return decorate


platform_option = click.option(
    "--platform", type=click.Choice(PLATFORM_NAMES), help="Default: presentation.platform of study.toml.")


class LevelsType(click.ParamType):
    """``--levels``, the same everywhere: a list of levels (``0,1,2,3``) or their number L
    (``4``, meaning 0..L-1). Converts to the sorted list of levels."""

    name = "LEVELS"

    def convert(self, value, param, ctx):
        """The sorted levels of ``value`` (a list passes through); a usage error otherwise.

        Parameters
        ----------
        value : str or list
            The option's value.
        param : click.Parameter or None
            The option.
        ctx : click.Context or None
            The command's context.
        """
        from .settings import parse_levels
        try:
            return value if isinstance(value, list) else parse_levels(value)
        except ValueError as exc:
            self.fail(str(exc), param, ctx)


LEVELS = LevelsType()


def analysis_options(f):
    """Decorator adding the analysis options of ``satcal analyze`` to ``f``.

    Parameters
    ----------
    f : callable
        The click command function.

    Returns
    -------
    callable
    """
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
        click.option("--seed", type=click.IntRange(min=0), default=2015, show_default=True,
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
        click.option("--standardised-intervals/--no-standardised-intervals", "standardised_intervals",
                     default=True, show_default=True,
                     help="Bootstrap the standardised indicators b1_std-b3_std (a design-free "
                          "estimand over a reference population of lists drawn from the judgments): "
                          "their intervals, tests and rank uncertainty (a few seconds per 1,000 "
                          "replicates)."),
        click.option("--force", is_flag=True, help="Overwrite an output directory that holds files."),
        click.option("--quiet", "-q", is_flag=True, help="No progress bars."),
    ]
    for opt in reversed(options):
        f = opt(f)
    return f


analyze_sources = stack(  # where ``satcal analyze`` reads answers from, and --out
    click.argument("workspace", required=False, type=click.Path(path_type=Path)),
    click.option("--dataset", type=click.Choice(["ecir2015"]), help="Analyse an embedded dataset."),
    click.option("--answers", type=click.Path(path_type=Path),
                 help="External study: CSV with query, a1..a<k>, b1..b<k>, answer[, worker_id]."),
    click.option("--judgments", type=click.Path(path_type=Path), help="Judgments of the external study."),
    click.option("--k", type=click.IntRange(min=1), default=None, help="Documents per list (default: "
                 "the number of a<i> columns)."),
    click.option("--levels", type=LEVELS, default=None,
                 help="The relevance levels, 0..L-1: as a list (0,1,2,3) or their number L (4) "
                      "(default: from the judgments)."),
    click.option("--unjudged", type=click.Choice(["error", "zero"]), default="error", show_default=True,
                 help="A listed document with no judgment: an error, or level 0."),
    click.option("--scores", type=click.Choice(["exact", "published"]), default="exact",
                 show_default=True, help="ecir2015 only: phi recomputed from the recovered "
                 "judgments, or the published 3-decimal scores."),
    click.option("--out", type=click.Path(path_type=Path), help="Output directory."),
)


ingest_options = stack(  # every option and argument of ``satcal ingest``
    click.argument("files", nargs=-1, type=click.Path(path_type=Path)),
    click.option("--platform", type=click.Choice(PLATFORM_NAMES + ["ecir2015"]),
                 help="Format of the files (default: detected from name and header). With serve and "
                      "no files, the hosted study's database is read."),
    click.option("--db", "db_url", default=None,
                 help="With --platform serve: the study database (default DIR/serve.db; a SQLAlchemy "
                      "URL such as postgresql+psycopg://user@host/study)."),
    click.option("--remove", "remove_name", default=None, metavar="FILE",
                 help="Take an ingested file back out (its archived name, original name or hash "
                      "prefix): the tables are rebuilt without it; the file moves to raw/removed/."),
    click.option("--threshold", type=click.FloatRange(0, 1), default=None,
                 help="Trust threshold (default: quality.trust_threshold of study.toml)."),
    click.option("--dawid-skene", is_flag=True,
                 help="Also fit Dawid-Skene worker models (optional crowd-kit extra); writes "
                      "workers_ds.csv with each worker's estimated accuracy."),
    click.option("--drop-trap", "drop_trap", multiple=True, metavar="ID",
                 help="Leave this trap out of trust for this ingest (repeatable; with no files, rebuilds "
                      "the tables from the files ingested before). To keep it out, add it to [quality] "
                      "drop_traps in study.toml."),
)


reliability_options = stack(  # every option of ``satcal reliability``
    click.option("--judgments", type=click.Path(path_type=Path), required=True,
                 help="TREC qrels or CSV/TSV with query, doc, level columns, to score the runs with."),
    click.option("--run", "--runs", "runs", type=click.Path(path_type=Path), multiple=True,
                 help="A TREC run file, a directory of them, or a glob (repeatable; or --simulate-runs)."),
    click.option("--simulate-runs", type=click.IntRange(min=2), default=None,
                 help="No runs at hand: simulate this many systems of graded quality (labelled "
                      "simulated; for trying the analysis only)."),
    click.option("--calibration", type=click.Path(path_type=Path),
                 help="An analysis directory (its bias.csv): user-side b1-b3 beside the system side, "
                      "scored at the calibration's own k, normalisation and negative policy."),
    click.option("--k", type=click.IntRange(min=1), default=None,
                 help="Cutoff (default: the calibration's, else 10; another than the calibration's is refused)."),
    click.option("--normalization", type=click.Choice(["ideal", "max", "minmax", "ul1", "ul2", "raw"]),
                 default=None, help="Default: the calibration's, else ideal (as nDCG)."),
    click.option("--negatives", type=click.Choice(["keep", "zero"]), default=None,
                 help="Negative levels: gain applied as given, or mapped to 0 first (default: the "
                      "calibration's, else keep)."),
    click.option("--replicates", type=click.IntRange(min=100), default=1000, show_default=True,
                 help="Bootstrap replicates of the discriminative-power test."),
    click.option("--alpha", type=click.FloatRange(0, 1, min_open=True, max_open=True), default=0.05,
                 show_default=True, help="Significance level: intervals of E rho^2 and Phi are two-sided "
                 "(1 - alpha) intervals (alpha/2 in each tail: a tool whose alpha is per tail would "
                 "call this 0.025), and a pair of systems counts as told apart when its ASL < alpha."),
    click.option("--target", type=click.FloatRange(0, 1, min_open=True, max_open=True), default=0.95,
                 show_default=True, help="The E rho^2 and Phi to reach when counting the topics needed."),
    click.option("--optimize", type=click.Choice(["none", "gains", "discounts"]), default="none",
                 show_default=True, help="Also find the gains (log2 discount) or discounts (linear "
                 "gain) that maximise Phi at one topic (Kanoulas and Aslam, CIKM 2009)."),
    click.option("--seed", type=click.IntRange(min=0), default=2015, show_default=True,
                 help="Seed of the bootstrap and of the simulated runs."),
    click.option("--out", type=click.Path(path_type=Path), required=True,
                 help="Output directory (refused when it holds files, unless --force)."),
    click.option("--force", is_flag=True, help="Overwrite an output directory that holds files."),
    click.option("--quiet", "-q", is_flag=True, help="No progress bars."),
)
