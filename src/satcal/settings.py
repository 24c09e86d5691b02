"""The settings of a study (study.toml), declared once.

Each section of study.toml is a frozen dataclass; each of its fields declares, in one place,
its type, its default, its constraint (with the words an error uses for it), a one-line help
and the comment study.toml shows above it. The template ``satcal init`` writes
(:func:`render_template`), the validation every command runs (:func:`validate_config`), the
CLI's defaults and choices, the table in docs/settings.md (:func:`settings_table`) and each
section's numpydoc ``Attributes`` are all read from these declarations. :func:`stream_seed` gives each random step of a study a stream
of its own, named, instead of ``seed + 1``, ``seed + 2`` ...
"""
from __future__ import annotations

import difflib
import inspect
import json
import math
import re
import textwrap
import zlib
from dataclasses import MISSING, dataclass, field, fields
from pathlib import Path

from .errors import SatcalError

__all__ = ["Settings", "StudySection", "FormulationsSection", "GeneratorSection", "TrapsSection",
           "PresentationSection", "DesignSection", "ServeSection", "QualitySection",
           "SimulationSection", "SECTIONS", "render_template", "validate_config", "settings_table",
           "stream_seed", "choices", "default", "parse_levels"]

#: Bounds that keep the generator's tables within memory (cells = formulations x bins x 2;
#: examples up to min_per_cell x bins per formulation).
MAX_BINS = 100
MAX_PER_CELL = 100_000
PLATFORM_NAMES = ("appen", "toloka", "labelstudio", "csv", "serve")

_NUMBER = (int, float)
_TYPE_NAMES = {str: "a string", int: "an integer", list: "a list", bool: "true or false",
               _NUMBER: "a number", dict: "a table"}


def setting(default=MISSING, kind=str, check=None, what: str = "", help: str = "", comment: str = "",
            required: bool = True, new=MISSING, choices: tuple = (), example: str = "",
            factory=None, multiline: bool = False, shown: str = ""):
    """One key of study.toml.

    Parameters
    ----------
    default : object, optional
        The value a study without the key gets (keys added after studies existed).
    kind : type or tuple of type, default str
        The TOML type(s) accepted: ``str``, ``int``, ``bool``, ``list``, ``dict``, ``(int, float)``.
    check : callable, optional
        A constraint on the value (True when it holds); ``what`` says it in the words of an error.
    what : str, default ""
        What the key takes, as the error on a bad value and the docs table say it ("an integer
        from 1 to 10,000"); default from ``choices``, else the name of ``kind``.
    help : str, default ""
        One line for the CLI and the docs table.
    comment : str, default ""
        The lines study.toml shows above the key (lines separated by newlines).
    required : bool, default True
        The key must be in study.toml (it was in every study.toml ever written).
    new : object, optional
        The value a new study.toml gets, when it differs from ``default``.
    choices : tuple, default ()
        The values allowed (a check and the CLI's choices at once).
    example : str, default ""
        A key left out of the template, shown as this commented line instead.
    factory : callable, optional
        Makes the default instead of ``default``, for a mutable or computed one (the
        dataclass field's ``default_factory``).
    multiline : bool, default False
        Written to the template as a triple-quoted TOML string (a text of several lines).
    shown : str, default ""
        The default as the docs table states it, when it is not a value (e.g. "from the
        judgments").

    Returns
    -------
    dataclasses.Field
        The field, with the above in its ``metadata``.
    """
    if choices:
        check = check or (lambda v, c=choices: v in c)
        what = what or "one of " + ", ".join(choices)
    meta = dict(kind=kind, check=check, what=what, help=help, comment=comment, required=required,
                new=new, choices=choices, example=example, multiline=multiline,
                shown=shown)
    if factory is not None:
        return field(default_factory=factory, metadata=meta)
    return field(default=default, metadata=meta)


def _positive(v) -> bool:
    return v >= 1


def _share(lo, hi, hi_open=False, lo_open=False):
    return lambda v: (lo < v if lo_open else lo <= v) and (v < hi if hi_open else v <= hi)


def _code(v) -> bool:
    return v == "" or bool(re.fullmatch(r"[A-Za-z0-9_-]{1,64}", v))


def _levels(v) -> bool:
    return (len(v) >= 2 and len(set(v)) == len(v)
            and all(isinstance(x, int) and not isinstance(x, bool) and abs(x) <= 1000 for x in v))


def _study_gains() -> tuple:
    """the gains of ``satcal.measures.STUDY_GAINS``"""
    from .measures import STUDY_GAINS
    return tuple(STUDY_GAINS)


def _study_discounts() -> tuple:
    """the discounts of ``satcal.measures.STUDY_DISCOUNTS``"""
    from .measures import STUDY_DISCOUNTS
    return tuple(STUDY_DISCOUNTS)


def _default_of(f):
    return f.default_factory() if f.default is MISSING else f.default


def _toml_value(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    return json.dumps(list(v) if isinstance(v, tuple) else v)


def _help_as_attributes(klass):
    """Append to the docstring of section ``klass`` a numpydoc ``Attributes`` section read from
    its fields' declarations (type, help, what the key takes, default), so that help() and
    numpydoc show every key without a second copy of its help to keep in step. A factory that
    looks its default up elsewhere (the measures) is described by its docstring, not called,
    so importing the settings imports nothing more."""
    lines = ["", "Attributes", "----------"]
    for f in fields(klass):
        meta, factory = f.metadata, f.default_factory
        if meta["shown"]:
            shown = meta["shown"]
        elif f.default is MISSING and hasattr(factory, "__code__") and factory.__doc__:
            shown = factory.__doc__
        else:
            shown = _toml_value(_default_of(f))
        if meta["new"] is not MISSING:
            shown = f"{shown} ({_toml_value(meta['new'])} in a new study.toml)"
        takes = meta["what"] or _TYPE_NAMES.get(meta["kind"], str(meta["kind"]))
        lines.append(f"{f.name} : {f.type}")
        lines += textwrap.wrap(f"{meta['help']} Takes {takes}; default {shown}.", 88, initial_indent="    ",
                               subsequent_indent="    ", break_on_hyphens=False)
    klass.__doc__ = inspect.cleandoc(klass.__doc__ or "") + "\n" + "\n".join(lines) + "\n"
    return klass


_CODE_WHAT = "letters, digits, _ or -, at most 64"


@_help_as_attributes
@dataclass(frozen=True)
class StudySection:
    """``[study]``: the inputs, the lists' shape and the seed."""

    name: str = setting("study", help="The study's name (the report's title).", shown="the directory's name")
    judgments: str = setting("", check=bool, what="a path to the judgments",
                             help="Judgments file, relative to the study directory.", shown="given at init",
                             comment="Judgments (TREC qrels or CSV/TSV with query, doc, level), copied into inputs/.")
    documents: str = setting("", help="Optional documents table (doc, title, snippet, url, audio_url).",
                             comment="Optional documents table (CSV with doc and any of title, snippet, url, audio_url).")
    topics: str = setting("", required=False, help="Optional topics file: what workers read of each query.",
                          comment="Optional topics (TREC topics, \"id<TAB>text\" lines, or CSV/TSV with query, title and\n"
                                  "optionally description, narrative): workers see the title and description, not the id.")
    k: int = setting(5, int, _positive, "a positive integer", "Documents per list.",
                     comment="Documents per ranked list.")
    levels: tuple = setting(kind=list, check=_levels, factory=lambda: (0, 1, 2),
                            what="a list of at least two distinct integer levels, e.g. [0, 1, 2]",
                            help="Relevance levels lists are built from.", shown="the judgments' levels >= 0",
                            comment="Relevance levels lists are built from; the top one is the L-1 of the max normalisation.")
    seed: int = setting(2015, int, lambda v: 0 <= v < 2 ** 63, "an integer >= 0",
                        "Seed of every random step.",
                        comment="Seed of every random step (generation, traps, presentation, simulation, bootstrap).")


@_help_as_attributes
@dataclass(frozen=True)
class FormulationsSection:
    """``[formulations]``: the gains and discounts crossed, custom ones, and other measures."""

    gains: tuple = setting(kind=list, check=lambda v: len(v) >= 1, what="a non-empty list of gain ids",
                           factory=_study_gains, help="Gain ids, each crossed with every discount.",
                           comment="Gains: lin, exp<b> (b^l - 1), bin<m> (1 if l >= m). Discounts: zipf, lin, log<b>,\n"
                                   "jarvelin<b>, const. Every gain is crossed with every discount.")
    discounts: tuple = setting(kind=list, check=lambda v: len(v) >= 1, what="a non-empty list of discount ids",
                               factory=_study_discounts, help="Discount ids, each crossed with every gain.")
    custom_gains: dict = setting(kind=dict, required=False, factory=dict,
                                 help="Named gains: one value per level of study.levels.",
                                 comment="Custom gains (one value per level of study.levels) and discounts (k factors), e.g. the\n"
                                         "optimal ones found by satcal reliability --optimize; each is crossed like the others:",
                                 example="custom_gains = { optimal = [0.0, 0.17, 0.83] }")
    custom_discounts: dict = setting(kind=dict, required=False, factory=dict,
                                     help="Named discounts: k factors each.",
                                     example="custom_discounts = { optimal = [0.26, 0.21, 0.19, 0.17, 0.17] }")
    extra: tuple = setting(kind=list, required=False, factory=tuple,
                           help="Other measures calibrated on the same answers (RBP, ERR, RR, P, AP).",
                           comment="Other measures calibrated beside them on the same answers: RBP as lin-geo<p> or\n"
                                   "bin1-geo<p>, err, rr (rr<m>), p (p<m>), ap (ap<m>), e.g.",
                           example='extra = ["lin-geo0.8", "err", "rr", "ap"]')


@_help_as_attributes
@dataclass(frozen=True)
class GeneratorSection:
    """``[generator]``: how examples are built to cover every cell."""

    method: str = setting("optimal", choices=("optimal", "greedy", "published"),
                          help="Example generator: optimal, greedy or published.",
                          comment="optimal (fewest examples), greedy, or published (the algorithm of Urbano & Marrero 2015).")
    n_bins: int = setting(10, int, lambda v: 2 <= v <= MAX_BINS, f"an integer from 2 to {MAX_BINS}",
                          "Equal bins over [0, 1] for phi and |dphi|.",
                          comment="Equal bins over [0, 1] for phi and |dphi|.")
    min_per_cell: int = setting(200, int, lambda v: 1 <= v <= MAX_PER_CELL, f"an integer from 1 to {MAX_PER_CELL:,}",
                                "Examples or lists wanted in every feasible cell.",
                                comment="Examples (|dphi|) or lists (phi) wanted in every feasible cell of every formulation.")
    overlap: str = setting("allow", choices=("allow", "disjoint"), what="allow or disjoint",
                           help="Whether lists A and B may share documents.",
                           comment='May lists A and B share documents? "allow" or "disjoint".')
    max_query_share: float = setting(0, _NUMBER, _share(0, 1), "a share in [0, 1] (0: no limit)",
                                     "Largest share of the examples one query may hold (0: no limit).", required=False,
                                     comment="The largest share of the examples one query may hold, e.g. 0.05 (0: no limit). Without a\n"
                                             "limit, queries with many highly relevant documents can hold much of the batch.")
    cover_extra: bool = setting(False, bool, required=False, help="Fill the cells of the extra measures too.",
                                comment="Fill the cells of the extra measures of [formulations] too (each covered cell is paid\n"
                                        "for; generate reports what covering them costs either way). Pool-based ones (ap) cannot be\n"
                                        "placed by the generator and are calibrated on the lists the examples hold.")


def _trap_count(v) -> bool:
    return v == "auto" or (isinstance(v, int) and not isinstance(v, bool) and v >= 0)


@_help_as_attributes
@dataclass(frozen=True)
class TrapsSection:
    """``[traps]``: examples with a known answer, built or read."""

    count: object = setting("auto", (int, str), _trap_count, 'an integer >= 0 or "auto"',
                            'Traps built from the judgments, or "auto": as many as quality.trap_power needs.',
                            comment='Built from the judgments, expected answers spread evenly over the four codes; "auto": as\n'
                                    "many as a worker must meet for the traps alone to exclude a random answerer with\n"
                                    "probability quality.trap_power (from the traps' chance acceptance rates) ...")
    file: str = setting("", help="A CSV of traps to read instead.",
                        comment="... or read from a CSV with query, a1..a<k>, b1..b<k>, expected (codes separated by ';').")


def _per_page(v) -> bool:
    return v == "auto" or (isinstance(v, int) and not isinstance(v, bool) and v >= 1)


@_help_as_attributes
@dataclass(frozen=True)
class PresentationSection:
    """``[presentation]``: what workers see and where."""

    platform: str = setting("appen", choices=PLATFORM_NAMES, help="Platform of the exported batch.",
                            comment="appen, toloka, labelstudio, csv, or serve (satcal's own hosted study).")
    items_per_page: object = setting(10, (int, str), _per_page, 'a positive integer or "auto"',
                                     'Items per page, or "auto" by reading load.',
                                     comment='Items per page / task suite, or "auto": by reading load (k, titles, snippets), as many as\n'
                                             "keep a page of satcal serve within about three screens at 1280 px.")
    swap: bool = setting(True, bool, help="Show A and B swapped at random.",
                         comment="Show A and B swapped at random (recorded in key.csv)?")
    instructions: str = setting("", help="What workers are told.", multiline=True,
                                shown="by the study's medium (read, listen to)")


@_help_as_attributes
@dataclass(frozen=True)
class DesignSection:
    """``[design]``: answers per example."""

    answers_per_example: int = setting(1, int, lambda v: 1 <= v <= 100, "an integer from 1 to 100",
                                       "Answers each example collects, each from another worker.", required=False,
                                       comment="Answers each example collects, each from a different worker (on every platform and in\n"
                                               "satcal serve); more than one lets the report measure agreement between workers.")
    adaptive: bool = setting(False, bool, help="Adaptive study: ask where the ranking is open, stop when settled.",
                             required=False,
                             comment="Adaptive study: ask each next question where the ranking of formulations is still open,\n"
                                     "and stop once it is settled. generate then writes pool.csv (the candidate examples, also\n"
                                     "examples.csv); satcal export DIR --next-batch writes the next wave of wave_pages pages\n"
                                     "chosen from the answers ingested so far; satcal serve chooses each page it hands out.")
    wave_pages: int = setting(10, int, lambda v: 1 <= v <= 100_000, "an integer from 1 to 100,000",
                              "Pages of one wave (export --next-batch; a look of the stopping rule).", required=False)
    confidence: float = setting(0.95, _NUMBER, lambda v: 0.5 <= v < 1, "a probability in [0.5, 1)",
                                "Confidence at which the adaptive study is settled.", required=False,
                                comment="Settled when the least-biased formulation (the top_m set) is known at this confidence,\n"
                                        "over repeated looks; every phi and |dphi| cell keeps min_depth answered examples first.")
    top_m: int = setting(1, int, lambda v: 1 <= v <= 1000, "an integer from 1 to 1,000",
                         "Size of the least-biased set the adaptive study settles.", required=False)
    margin: float = setting(0.005, _NUMBER, lambda v: 0 <= v <= 1, "a number in [0, 1]",
                            "Indifference margin of the stopping rule, in b1 units.", required=False,
                            comment="Formulations whose b1_std differ by less than this count as tied: the study settles on\n"
                                    "one within margin of the best (0: only an exact ranking settles; ties then never do).")
    min_depth: int = setting(10, int, lambda v: 0 <= v <= MAX_PER_CELL, f"an integer from 0 to {MAX_PER_CELL:,}",
                             "Answers every cell gets before the criterion may pass it by.", required=False)
    cell_cap: float = setting(0.25, _NUMBER, lambda v: 0 < v <= 1, "a number in (0, 1] (1: no cap)",
                              "Largest share of a wave one phi or |dphi| cell may take.", required=False,
                              comment="Once there are answers, no phi or |dphi| cell of the formulations the criterion reads takes\n"
                                      "more than this share of a wave (export --next-batch) or of each run of wave_pages pages in\n"
                                      "satcal serve's page order, while other examples are free; when no page fits, serve takes\n"
                                      "the best of the rest (1: no cap).")
    budget: int = setting(0, int, lambda v: 0 <= v <= 10 ** 9, "an integer >= 0 (0: no budget)",
                          "Adaptive study's budget in budget_unit (0: none).", required=False,
                          comment='Stop at this many answers (budget_unit = "answers") or pages ("pages"); 0: no budget.')
    budget_unit: str = setting("answers", str, lambda v: v in ("answers", "pages"), '"answers" or "pages"',
                               "Unit of budget.", required=False)
    pool_size: int = setting(0, int, lambda v: 0 <= v <= 10 ** 7, "an integer >= 0 (0: ten times the coverage design's size)",
                             "Candidate examples in pool.csv.", required=False,
                             comment="Candidate examples in pool.csv (0: ten times as many as the coverage design has).")


@_help_as_attributes
@dataclass(frozen=True)
class ServeSection:
    """``[serve]``: the hosted study (satcal serve)."""

    completion_code: str = setting("", str, _code, _CODE_WHAT, "Prolific completion code.", required=False,
                                   comment="The hosted study (satcal serve). Completion codes of your Prolific study: participants\n"
                                           "who finish are sent to https://app.prolific.com/submissions/complete?cc=<code>.")
    failed_attention_code: str = setting("", str, _code, _CODE_WHAT, "Prolific code for failed attention checks.",
                                         required=False)
    pages_per_participant: int = setting(5, int, lambda v: 1 <= v <= 10_000, "an integer from 1 to 10,000",
                                         "Pages of items one participant answers.", required=False,
                                         comment="Pages of items one participant answers.")
    attention_checks: int = setting(2, int, lambda v: 0 <= v <= 100, "an integer from 0 to 100",
                                    "Instructional attention checks per participant.", required=False,
                                    comment="Instructional attention checks per participant (\"select 'Both are equally bad'\"), and\n"
                                            "how many failed checks send a participant to failed_attention_code (Prolific allows\n"
                                            "rejecting only after two failed checks). Traps never reject anyone: they only exclude data.")
    attention_fail_limit: int = setting(2, int, lambda v: 1 <= v <= 100, "an integer from 1 to 100",
                                        "Failed attention checks after which a participant ends with the failed-attention code.", required=False)
    assignment_timeout_minutes: float = setting(30, _NUMBER, lambda v: 0 < v <= 7 * 24 * 60,
                                                "a number of minutes above 0, at most a week",
                                                "Minutes before an unanswered page goes to someone else.", required=False,
                                                comment="Minutes before a page a participant left unanswered is given to someone else.")
    refit_seconds: float = setting(5, _NUMBER, lambda v: 0.1 <= v <= 3600, "seconds from 0.1 to 3600",
                                   "Adaptive studies: seconds between two refits of the page order.", required=False,
                                   comment="Adaptive studies: seconds between two refits of the page order (never waited for).")
    traps_on_top: bool = setting(True, bool, help="Show traps beyond a page's own items where it holds too few.",
                                 required=False,
                                 comment="Screening: every participant meets traps_per_participant traps, spread over their pages;\n"
                                         "traps are shown on top of a page's own items where the pages they get hold too few (as\n"
                                         "platforms show test questions to every worker). Participants who failed\n"
                                         "attention_fail_limit attention checks are excluded at ingest unless keep_failed_attention.")
    traps_per_participant: object = setting("auto", (int, str), lambda v: v == "auto" or (
                                                isinstance(v, int) and not isinstance(v, bool) and 0 <= v <= 10_000),
                                            'an integer from 0 to 10,000 or "auto"',
                                            'Traps each participant meets, or "auto": the trap rule\'s count.',
                                            required=False,
                                            comment='"auto": the trap rule\'s count (quality.trap_power, from the batch\'s traps), at most as many\n'
                                                    "as the items a participant's own pages hold (traps then make up at most half of their\n"
                                                    "answers; export and serve say the power reached and the pages that would reach the\n"
                                                    "rule's count), and at least quality.min_traps. A number: that many, with a warning of\n"
                                                    "the power when it is below the rule's count.")
    keep_failed_attention: bool = setting(False, bool, help="Keep the answers of participants who failed attention checks.",
                                          required=False)
    duration_minutes: float = setting(0, _NUMBER, lambda v: 0 <= v <= 24 * 60, "minutes, 0 to 1440",
                                      "The study's duration the consent page states (0: not stated).", required=False,
                                      comment="What the consent page tells participants besides the instructions: the study's duration\n"
                                              "in minutes (0: not stated), the pay, who to contact, and any consent text of your\n"
                                              "ethics board (paragraphs separated by blank lines).")
    pay: str = setting("", str, lambda v: len(v) <= 500, "text of at most 500 characters",
                       "The pay the consent page states.", required=False)
    contact: str = setting("", str, lambda v: len(v) <= 500, "text of at most 500 characters",
                           "Who participants contact.", required=False)
    consent: str = setting("", str, lambda v: len(v) <= 20_000, "text of at most 20,000 characters",
                           "Consent text of your ethics board.", required=False)


@_help_as_attributes
@dataclass(frozen=True)
class QualitySection:
    """``[quality]``: trust from traps and screening flags."""

    trust_threshold: float = setting(0.7, _NUMBER, _share(0, 1), "a number in [0, 1]",
                                     "Trap accuracy below which a worker is excluded.",
                                     comment="Workers whose trap accuracy is below this are excluded from the analysis.")
    min_traps: int = setting(5, int, lambda v: v >= 0, "an integer >= 0",
                             "Traps a worker must answer before their trust counts.",
                             comment="Traps a worker must have answered before their trust counts (fewer let one slip decide).")
    trap_power: float = setting(0.999, _NUMBER, _share(0, 1, hi_open=True), "a number in [0, 1)",
                                "Chance the traps alone exclude a worker answering at random.", required=False,
                                comment="The traps each worker must meet are set from the traps' chance acceptance rates so that a\n"
                                        "worker answering at random is excluded by the trap rule alone with this probability\n"
                                        "(generate and export print the number and warn when the batch or min_traps gives fewer).\n"
                                        "Per worker: a study with m random answerers keeps one with probability up to\n"
                                        "m x (1 - trap_power), so 0.999 keeps none of 10 with probability 0.99.")
    screen_seconds_per_answer: float = setting(2.0, _NUMBER, lambda v: 0 <= v < 3600, "seconds, at least 0",
                                               "Flag workers faster than this many seconds an item.", required=False,
                                               comment="Screening flags in workers.csv and the report (flags to look at, not exclusions): faster\n"
                                                       "than this many seconds an item (where the platform records times), and choosing the same\n"
                                                       "shown side (first or second) in at least this share of one's answers.")
    screen_same_side: float = setting(0.9, _NUMBER, _share(0.5, 1, lo_open=True), "a share above 0.5, at most 1",
                                      "Flag workers choosing one shown side this often.", required=False)
    straight_lining_alpha: float = setting(0.001, _NUMBER, _share(0, 1), "a number in [0, 1] (0: exclude nobody)",
                                           "Level of the test that excludes workers repeating one answer.",
                                           required=False,
                                           comment="Straight-liners are excluded: one answer (as shown) in at least 90% of 10 or more\n"
                                                   "answers, far more often than the other workers give it (exact one-sided binomial\n"
                                                   "test, Bonferroni over the four answers, at this level; 0 excludes nobody).")
    consistency_alpha: float = setting(0.01, _NUMBER, _share(0, 1), "a number in [0, 1] (0: exclude nobody)",
                                       "Level of the test that excludes workers preferring dominated lists.",
                                       required=False,
                                       comment="Workers who prefer the dominated list are excluded: among their decisive answers to pairs\n"
                                               "where one list's levels are at least the other's at every rank (traps naming a better list\n"
                                               "count too), the dominated list named far more often than honest workers name it (a one-sided\n"
                                               "beta-binomial test at this level, its spread fitted to the crowd, since honest workers\n"
                                               "differ; 0 excludes nobody).")
    crowd_alpha: float = setting(0.01, _NUMBER, _share(0, 1), "a number in [0, 1] (0: exclude nobody)",
                                 "Level of the rule that excludes workers answering as at random.",
                                 required=False,
                                 comment="Workers whose answers are at least 1/crowd_alpha times likelier at random than as the\n"
                                         "other workers answer the same items are excluded (a likelihood ratio over every\n"
                                         "item others answered too; 0 excludes nobody).")
    drop_traps: tuple = setting(kind=list, check=lambda v: all(isinstance(x, str) for x in v),
                                what='a list of trap ids, e.g. ["trap03"]', factory=tuple, required=False,
                                help="Traps left out of trust.",
                                comment="Traps left out of trust (ingest's traps_report.csv flags those most trusted workers miss).")


@_help_as_attributes
@dataclass(frozen=True)
class SimulationSection:
    """``[simulation]``: the simulated crowd of satcal simulate and satcal power."""

    formulation: str = setting("lin-const", help="Formulation whose phi drives the true satisfaction curve.",
                               comment="The simulated crowd (satcal simulate): the formulation whose phi drives the true\n"
                                       "satisfaction curve, P(Sat|phi) = expit(intercept + slope * phi).")
    intercept: float = setting(-3.0, _NUMBER, math.isfinite, "a finite number", "Intercept of the true curve.")
    slope: float = setting(6.0, _NUMBER, math.isfinite, "a finite number", "Slope of the true curve.")
    heterogeneity: float = setting(0.5, _NUMBER, lambda v: 0 <= v < math.inf, "a finite number >= 0",
                                   "Standard deviation of each worker's shift of the intercept.",
                                   comment="Standard deviation of each worker's own shift of the intercept.")
    workers: int = setting(60, int, _positive, "a positive integer", "Simulated workers.",
                           comment="Workers, the share of spammers, and the position bias (extra probability of\n"
                                   "answering \"A\" when undecided).")
    spammers: float = setting(0.15, _NUMBER, _share(0, 1, hi_open=True), "a share in [0, 1)",
                              "Share of spammers (answering as spammer_kind says).")
    position_bias: float = setting(0.05, _NUMBER, _share(0, 0.5), "a number in [0, 0.5]",
                                   "Extra probability of answering A when undecided.")
    spammer_kind: str = setting("random", choices=("random", "both_bad", "first", "mixed"),
                                help="How spammers answer: random, both_bad, first (the side shown first) or mixed.",
                                required=False,
                                comment="How spammers answer: at random, \"both bad\" to everything, always the side shown first,\n"
                                        "or mixed (the three in turn).")
    undecided_preference: float = setting(0.0, _NUMBER, _share(0, 1), "a probability",
                                          "P(a preference) of a user who likes both lists or neither.", required=False,
                                          comment="The answer process of the joint satisfaction model: a user who likes both lists or\n"
                                                  "neither still prefers one with probability undecided_preference (the higher-scored one\n"
                                                  "with probability preference_accuracy); one who likes exactly one prefers the other with\n"
                                                  "probability lapse. 0, 1, 0 is the paper's special case.")
    preference_accuracy: float = setting(1.0, _NUMBER, _share(0, 1), "a probability",
                                         "P(the higher-scored list) of such a preference.", required=False)
    lapse: float = setting(0.0, _NUMBER, _share(0, 0.5, hi_open=True), "a number in [0, 0.5)",
                           "P(preferring the other list) of a user who likes exactly one.", required=False)
    abandoned: float = setting(0.0, _NUMBER, _share(0, 1, hi_open=True), "a share in [0, 1)",
                               "Share of answers whose page another worker left unfinished first.", required=False,
                               new=0.02,
                               comment="Share of example answers whose page another worker took first and left unfinished; the\n"
                                       "platforms that report such assignments (Toloka, Label Studio) get them in their files.")


#: study.toml's sections, in the template's order.
SECTIONS = {"study": StudySection, "formulations": FormulationsSection, "generator": GeneratorSection,
            "traps": TrapsSection, "presentation": PresentationSection, "design": DesignSection,
            "serve": ServeSection, "quality": QualitySection, "simulation": SimulationSection}


@dataclass(frozen=True)
class Settings:
    """Every section of a validated study.toml as frozen values (lists become tuples);
    ``platforms`` maps each platform with settings of its own to its key-value table.

    Attributes
    ----------
    study : StudySection
        ``[study]``: the inputs, the lists' shape and the seed.
    formulations : FormulationsSection
        ``[formulations]``: the gains and discounts crossed, custom ones, other measures.
    generator : GeneratorSection
        ``[generator]``: how examples are built to cover every cell.
    traps : TrapsSection
        ``[traps]``: examples with a known answer, built or read.
    presentation : PresentationSection
        ``[presentation]``: what workers see and where.
    design : DesignSection
        ``[design]``: answers per example and the adaptive study.
    serve : ServeSection
        ``[serve]``: the hosted study (satcal serve).
    quality : QualitySection
        ``[quality]``: trust from traps and screening flags.
    simulation : SimulationSection
        ``[simulation]``: the simulated crowd of satcal simulate and satcal power.
    platforms : dict
        ``{platform: {key: value}}``, the ``[platforms.<name>]`` sections, each filled with
        its platform's defaults; empty unless read from a study.toml.
    """

    study: StudySection
    formulations: FormulationsSection
    generator: GeneratorSection
    traps: TrapsSection
    presentation: PresentationSection
    design: DesignSection
    serve: ServeSection
    quality: QualitySection
    simulation: SimulationSection
    platforms: dict = field(default_factory=dict)

    @classmethod
    def from_config(cls, config: dict) -> "Settings":
        """From a study.toml validated by :func:`validate_config`.

        Parameters
        ----------
        config : dict
            The validated configuration; keys it lacks keep their defaults.

        Returns
        -------
        Settings
        """
        def section(name, klass):
            """Section ``name`` of ``config`` as a ``klass`` instance (lists turned to tuples).

            Parameters
            ----------
            name : str
                The section's name in study.toml.
            klass : type
                The section's dataclass.
            """
            body = config.get(name, {})
            return klass(**{f.name: tuple(body[f.name]) if isinstance(body.get(f.name), list) else body[f.name]
                            for f in fields(klass) if f.name in body})
        return cls(**{name: section(name, klass) for name, klass in SECTIONS.items()},
                   platforms={k: dict(v) for k, v in config.get("platforms", {}).items()})


def default(dotted: str):
    """The default of a key, e.g. ``default("generator.min_per_cell")`` (for the CLI).

    Parameters
    ----------
    dotted : str
        The key as ``section.name``.

    Returns
    -------
    object
        The declared default value.
    """
    section, name = dotted.split(".")
    return _default_of(next(f for f in fields(SECTIONS[section]) if f.name == name))


def choices(dotted: str) -> list:
    """The values a key allows, e.g. ``choices("presentation.platform")`` (for the CLI).

    Parameters
    ----------
    dotted : str
        The key as ``section.name``; the key must declare choices.

    Returns
    -------
    list
    """
    section, name = dotted.split(".")
    return list(next(f for f in fields(SECTIONS[section]) if f.name == name).metadata["choices"])


# ------------------------------------------------------------------------------------------
# The template
# ------------------------------------------------------------------------------------------
def _comment(text: str) -> list[str]:
    return [f"# {line}" for line in text.split("\n")] if text else []


def render_template(values: dict, platform_schemas: dict | None = None) -> str:
    """The commented study.toml of a new study.

    Parameters
    ----------
    values : ``{"section.key": value}`` for the keys given at ``satcal init`` (the rest take
        the value a new study gets).
    platform_schemas : ``{platform: (Setting, ...)}``, the ``[platforms.<name>]`` sections.
    """
    out = ["# satcal study design. Every satcal command in this directory reads this file.",
           "# Edit it, then run: satcal generate DIR, satcal export DIR, ..."]
    for section, klass in SECTIONS.items():
        out += ["", f"[{section}]"]
        for f in fields(klass):
            meta = f.metadata
            out += _comment(meta["comment"])
            if meta["example"]:
                out.append(f"# {meta['example']}")
                continue
            value = values.get(f"{section}.{f.name}", meta["new"] if meta["new"] is not MISSING else _default_of(f))
            out.append(f'{f.name} = """{value}"""' if meta["multiline"] else f"{f.name} = {_toml_value(value)}")
    return "\n".join(out) + "\n" + _platforms_template(platform_schemas or {})


def _platforms_template(schemas: dict) -> str:
    """The ``[platforms.<name>]`` sections of study.toml, from the platforms' own settings."""
    out = ["", "# Settings of each platform's exported files (satcal export prints them). How many workers",
           "# answer each example is [design] answers_per_example, on every platform."]
    for name, schema in schemas.items():
        out.append(f"\n[platforms.{name}]")
        for s in schema:
            out.append(f"# {s.help[0].upper()}{s.help[1:]}.")
            out.append(f"{s.name} = {_toml_value(s.default)}")
    return "\n".join(out) + "\n"


def settings_table() -> str:
    """A Markdown table of every key: section, key, default, what it takes, help (for the docs)."""
    rows = ["| key | default | takes | meaning |", "|---|---|---|---|"]
    for section, klass in SECTIONS.items():
        for f in fields(klass):
            meta = f.metadata
            takes = meta["what"] or _TYPE_NAMES.get(meta["kind"], str(meta["kind"]))
            shown = meta["shown"] or f"`{_toml_value(_default_of(f))}`"
            if meta["new"] is not MISSING:
                shown = f"`{_toml_value(meta['new'])}` ({shown} in a study.toml without the key)"
            cells = (f"`{section}.{f.name}`", shown, takes, meta["help"])
            rows.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    return "\n".join(rows) + "\n"


# ------------------------------------------------------------------------------------------
# Validation
# ------------------------------------------------------------------------------------------
def _kind_ok(value, kind) -> bool:
    numeric = kind in (int, _NUMBER, (int, str))
    return isinstance(value, kind) and not (numeric and isinstance(value, bool))


def _unknown_keys(config: dict, path: Path) -> None:
    """A misspelt section or key is an error, not a silently ignored line."""
    sections = sorted(set(SECTIONS) | {"platforms"})
    for section, body in config.items():
        if section == "platforms":
            continue  # checked by _validate_platforms
        if section not in SECTIONS:
            close = difflib.get_close_matches(section, sections, n=1)
            hint = f" (did you mean [{close[0]}]?)" if close else f"; sections are {', '.join(sections)}"
            raise SatcalError(f"{path}: unknown section [{section}]{hint}")
        if not isinstance(body, dict):
            raise SatcalError(f"{path}: {section} = ...: expected a [{section}] section")
        names = sorted(f.name for f in fields(SECTIONS[section]))
        for name in body:
            if name not in names:
                close = difflib.get_close_matches(name, names, n=1)
                hint = f" (did you mean {section}.{close[0]}?)" if close else ""
                raise SatcalError(f"{path}: unknown key {section}.{name}{hint}")


def _validate_platforms(config: dict, path: Path, schemas: dict) -> None:
    """``[platforms.<name>]``: known platforms and keys, each value of the expected kind; the
    defaults fill what a study made before these keys existed lacks."""
    given = config.setdefault("platforms", {})
    if not isinstance(given, dict):
        raise SatcalError(f"{path}: platforms = ...: expected [platforms.<name>] sections")
    for name, body in given.items():
        if name not in schemas:
            close = difflib.get_close_matches(name, list(schemas), n=1)
            hint = f" (did you mean [platforms.{close[0]}]?)" if close else f"; platforms with settings are {', '.join(schemas)}"
            raise SatcalError(f"{path}: unknown section [platforms.{name}]{hint}")
        if not isinstance(body, dict):
            raise SatcalError(f"{path}: platforms.{name} = ...: expected a [platforms.{name}] section")
        names = [st.name for st in schemas[name]]
        for key in body:
            if key not in names:
                close = difflib.get_close_matches(key, names, n=1)
                hint = f" (did you mean platforms.{name}.{close[0]}?)" if close else f"; keys are {', '.join(names)}"
                raise SatcalError(f"{path}: unknown key platforms.{name}.{key}{hint}")
    for name, schema in schemas.items():
        body = given.setdefault(name, {})
        for s in schema:
            value = body.setdefault(s.name, s.default)
            if not s.valid(value):
                raise SatcalError(f"{path}: platforms.{name}.{s.name} = {value!r}: expected {s.what}")


def _check_keys(config: dict, path: Path) -> None:
    """Each declared key present (or defaulted), of its type, within its constraint."""
    for section, klass in SECTIONS.items():
        body = config.setdefault(section, {})
        for f in fields(klass):
            meta = f.metadata
            if f.name not in body:
                if meta["required"]:
                    raise SatcalError(f"{path}: missing key {section}.{f.name} (see the template written "
                                      "by satcal init)")
                if meta["example"]:
                    continue  # an optional table or list: absent is empty
                body[f.name] = _default_of(f)
                body[f.name] = list(body[f.name]) if isinstance(body[f.name], tuple) else body[f.name]
                continue
            value = body[f.name]
            if not _kind_ok(value, meta["kind"]) or (meta["check"] is not None and not meta["check"](value)):
                what = meta["what"] or _TYPE_NAMES.get(meta["kind"], str(meta["kind"]))
                raise SatcalError(f"{path}: {section}.{f.name} = {value!r}: expected {what}")


def _check_measures(config: dict, path: Path) -> None:
    """Custom gains and discounts of the right length, known measure ids, none listed twice."""
    from .measures import formulation, get_discount, get_gain
    section = config["formulations"]
    levels, k = config["study"]["levels"], config["study"]["k"]
    for kind, size, what in (("custom_gains", len(levels), f"one value per level of study.levels ({len(levels)})"),
                             ("custom_discounts", k, f"k = {k} factors")):
        custom = section.get(kind, {})
        if not isinstance(custom, dict):
            raise SatcalError(f"{path}: formulations.{kind}: expected a table of name = [values]")
        for name, values in custom.items():
            ok = isinstance(values, list) and len(values) == size and all(
                isinstance(v, _NUMBER) and not isinstance(v, bool) and math.isfinite(v) for v in values)
            if not ok:
                raise SatcalError(f"{path}: formulations.{kind}.{name} = {values!r}: expected {what}")
    extra = section.get("extra", [])
    if not isinstance(extra, list) or not all(isinstance(v, str) for v in extra):
        raise SatcalError(f"{path}: formulations.extra = {extra!r}: expected a list of measure ids, "
                          "e.g. [\"lin-geo0.8\", \"err\", \"rr\", \"ap\"]")
    for m in extra:
        try:
            formulation(m)
        except ValueError as exc:
            raise SatcalError(f"{path}: formulations.extra: {exc}") from None
    for kind in ("gains", "discounts"):
        values = [str(v) for v in section[kind]]
        repeated = sorted({v for v in values if values.count(v) > 1})
        if repeated:
            raise SatcalError(f"{path}: formulations.{kind} lists {', '.join(repeated)} more than once")
    for kind, parse in (("gains", get_gain), ("discounts", get_discount)):
        for v in section[kind]:
            try:
                parse(str(v))
            except ValueError as exc:
                raise SatcalError(f"{path}: formulations.{kind}: {exc}") from None


def validate_config(config: dict, path: Path, platform_schemas: dict | None = None) -> dict:
    """Check every key of study.toml against its declaration; one line naming the file, the key
    and what is expected. Keys a study made before they existed lacks get their defaults.

    Parameters
    ----------
    config : the parsed study.toml (filled in place with defaults).
    path : the file, for the errors.
    platform_schemas : ``{platform: (Setting, ...)}`` of the platforms with settings of their own.
    """
    _unknown_keys(config, path)
    _validate_platforms(config, path, platform_schemas or {})
    _check_keys(config, path)
    _check_measures(config, path)
    return config


# ------------------------------------------------------------------------------------------
# Random streams
# ------------------------------------------------------------------------------------------
#: The streams that existed before streams had names, at their old offsets from the study's
#: seed (``export`` moves 7919 on per batch): a study keeps its examples, traps, keys, preview,
#: simulated answers and power simulations, value for value.
LEGACY_STREAMS = {"generate": 0, "traps": 1, "export": 2, "preview": 3, "simulate": 4, "power": 5}
_BATCH_STEP = 7919


def stream_seed(seed: int, name: str, index: int = 0) -> int:
    """The seed of the random stream ``name`` (its ``index``-th one, e.g. a batch) of a study.

    The named streams of :data:`LEGACY_STREAMS` keep the values they always had
    (``seed + offset + 7919 * index``), so that same study files give the same bytes; any other
    name gets a stream of its own from :class:`numpy.random.SeedSequence`, keyed by the name's
    CRC-32 and the index, so adding a stream moves none of the others.

    Parameters
    ----------
    seed : int
        The study seed.
    name : str
        The stream's name (e.g. ``"simulate"``, ``"power"``).
    index : int, optional
        Which stream of that name (default 0).

    Returns
    -------
    int
        A non-negative seed.
    """
    if name in LEGACY_STREAMS:
        return int(seed) + LEGACY_STREAMS[name] + _BATCH_STEP * int(index)
    import numpy as np
    state = np.random.SeedSequence(int(seed), spawn_key=(zlib.crc32(name.encode()), int(index)))
    return int(state.generate_state(1, np.uint64)[0] >> np.uint64(1))


def parse_levels(value) -> list[int]:
    """Levels as the command line gives them: a list (``0,1,2,3``) or their number L (``4``,
    meaning 0..L-1). Returns the sorted levels; a ValueError says what was expected.

    Parameters
    ----------
    value : str or int
        The levels, comma-separated, or their number.

    Returns
    -------
    list of int

    Raises
    ------
    ValueError
        Not integers, fewer than 2 levels, or a level repeated.
    """
    text = str(value).strip()
    try:
        parts = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise ValueError(f"{value!r}: expected levels separated by commas (e.g. 0,1,2,3) or their number "
                         "(e.g. 4 for 0..3)") from None
    if len(parts) == 1 and "," not in text:
        if parts[0] < 2:
            raise ValueError(f"{value!r}: a scale needs at least 2 levels")
        return list(range(parts[0]))
    if len(set(parts)) != len(parts) or len(parts) < 2:
        raise ValueError(f"{value!r}: expected at least 2 distinct levels")
    return sorted(parts)
