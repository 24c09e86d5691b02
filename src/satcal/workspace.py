"""The study workspace: one directory per study (SPEC section 10).

``study.toml`` holds the design; every command reads and validates it. Outputs are written
atomically, nothing is overwritten without ``force``, and ``manifest.json`` records the package
versions, the seeds, the hashes of the inputs and the command history.
"""
from __future__ import annotations

import json
import math
import os
import platform as _platform
import re
import shutil
import sys
import tomllib
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ._version import __version__
from .errors import InputFileError, SatcalError
from .fileio import OutputSet, atomic_write_text, sha256_file, spreadsheet_safe, spreadsheet_value
from .judgments import Judgments, read_judgments
from .measures import STUDY_DISCOUNTS, STUDY_GAINS, formulation, get_discount, get_gain

#: Seconds a command waits for another one holding the workspace lock.
LOCK_WAIT = 600

__all__ = ["Workspace", "STUDY_TEMPLATE", "SCHEMA"]

DEFAULT_INSTRUCTIONS = ("You will see a query and the results of two search systems, A and B. "
                        "{verb} the results of both and tell us whether A gives "
                        "better results, B does, both are equally good, or both are equally bad.")


def default_instructions(documents: pd.DataFrame | None) -> str:
    """The default instructions, in the study's medium: results to listen to when the documents
    table has audio, to read otherwise."""
    audio = documents is not None and "audio_url" in documents.columns and (documents["audio_url"] != "").any()
    text = documents is not None and any(c in documents.columns for c in ("title", "snippet", "url"))
    verb = ("Look at and listen to" if text else "Listen to") if audio else "Read"
    return DEFAULT_INSTRUCTIONS.format(verb=verb)

STUDY_TEMPLATE = '''# satcal study design. Every satcal command in this directory reads this file.
# Edit it, then run: satcal generate DIR, satcal export DIR, ...

[study]
name = "{name}"
# Judgments (TREC qrels or CSV/TSV with query, doc, level), copied into inputs/.
judgments = "{judgments}"
# Optional documents table (CSV with doc and any of title, snippet, url, audio_url).
documents = "{documents}"
# Optional topics (TREC topics, "id<TAB>text" lines, or CSV/TSV with query, title and
# optionally description, narrative): workers see the title and description, not the id.
topics = "{topics}"
# Documents per ranked list.
k = {k}
# Relevance levels lists are built from; the top one is the L-1 of the max normalisation.
levels = {levels}
# Seed of every random step (generation, traps, presentation, simulation, bootstrap).
seed = {seed}

[formulations]
# Gains: lin, exp<b> (b^l - 1), bin<m> (1 if l >= m). Discounts: zipf, lin, log<b>,
# jarvelin<b>, const. Every gain is crossed with every discount.
gains = {gains}
discounts = {discounts}
# Custom gains (one value per level of study.levels) and discounts (k factors), e.g. the
# optimal ones found by satcal reliability --optimize; each is crossed like the others:
# custom_gains = {{ optimal = [0.0, 0.17, 0.83] }}
# custom_discounts = {{ optimal = [0.26, 0.21, 0.19, 0.17, 0.17] }}
# Other measures calibrated beside them on the same answers: RBP as lin-geo<p> or
# bin1-geo<p>, err, rr (rr<m>), p (p<m>), ap (ap<m>), e.g.
# extra = ["lin-geo0.8", "err", "rr", "ap"]

[generator]
# optimal (fewest examples), greedy, or published (the algorithm of Urbano & Marrero 2015).
method = "optimal"
# Equal bins over [0, 1] for phi and |dphi|.
n_bins = 10
# Examples (|dphi|) or lists (phi) wanted in every feasible cell of every formulation.
min_per_cell = {min_per_cell}
# May lists A and B share documents? "allow" or "disjoint".
overlap = "allow"
# The largest share of the examples one query may hold, e.g. 0.05 (0: no limit). Without a
# limit, queries with many highly relevant documents can hold much of the batch.
max_query_share = 0
# Fill the cells of the extra measures of [formulations] too (each covered cell is paid
# for; generate reports what covering them costs either way). Pool-based ones (ap) cannot be
# placed by the generator and are calibrated on the lists the examples hold.
cover_extra = false

[traps]
# Built from the judgments, expected answers spread evenly over the four codes ...
count = 20
# ... or read from a CSV with query, a1..a<k>, b1..b<k>, expected (codes separated by ';').
file = ""

[presentation]
# appen, toloka, labelstudio, csv, or serve (satcal's own hosted study).
platform = "{platform}"
# Items per page / task suite, or "auto": by reading load (k, titles, snippets), as many as
# keep a page of satcal serve within about three screens at 1280 px.
items_per_page = {items_per_page}
# Show A and B swapped at random (recorded in key.csv)?
swap = true
instructions = """{instructions}"""

[design]
# Answers each example collects, each from a different worker (on every platform and in
# satcal serve); more than one lets the report measure agreement between workers.
answers_per_example = 1
# Adaptive study: ask each next question where the ranking of formulations is still open,
# and stop once it is settled. generate then writes pool.csv (the candidate examples, also
# examples.csv); satcal export DIR --next-batch writes the next wave of wave_pages pages
# chosen from the answers ingested so far; satcal serve chooses each page it hands out.
adaptive = false
wave_pages = 10
# Settled when the least-biased formulation (the top_m set) is known at this confidence,
# over repeated looks; every phi and |dphi| cell keeps min_depth answered examples first.
confidence = 0.95
top_m = 1
min_depth = 10
# Stop at this many answers (budget_unit = "answers") or pages ("pages"); 0: no budget.
budget = 0
budget_unit = "answers"
# Candidate examples in pool.csv (0: ten times as many as the coverage design has).
pool_size = 0

[serve]
# The hosted study (satcal serve). Completion codes of your Prolific study: participants
# who finish are sent to https://app.prolific.com/submissions/complete?cc=<code>.
completion_code = ""
failed_attention_code = ""
# Pages of items one participant answers.
pages_per_participant = 5
# Instructional attention checks per participant ("select 'Both are equally bad'"), and
# how many failed checks send a participant to failed_attention_code (Prolific allows
# rejecting only after two failed checks). Traps never reject anyone: they only exclude data.
attention_checks = 2
attention_fail_limit = 2
# Minutes before a page a participant left unanswered is given to someone else.
assignment_timeout_minutes = 30
# Adaptive studies: seconds between two refits of the page order (never waited for).
refit_seconds = 5
# Screening: every participant meets quality.min_traps traps, spread over their pages;
# traps are shown on top of a page's own items where the pages they get hold too few (as
# platforms show test questions to every worker). Participants who failed
# attention_fail_limit attention checks are excluded at ingest unless keep_failed_attention.
traps_on_top = true
keep_failed_attention = false
# What the consent page tells participants besides the instructions: the study's duration
# in minutes (0: not stated), the pay, who to contact, and any consent text of your
# ethics board (paragraphs separated by blank lines).
duration_minutes = 0
pay = ""
contact = ""
consent = ""

[quality]
# Workers whose trap accuracy is below this are excluded from the analysis.
trust_threshold = 0.7
# Traps a worker must have answered before their trust counts (fewer let one slip decide).
min_traps = 3
# Screening flags in workers.csv and the report (flags to look at, not exclusions): faster
# than this many seconds an item (where the platform records times), and choosing the same
# shown side (first or second) in at least this share of one's answers.
screen_seconds_per_answer = 2.0
screen_same_side = 0.9
# Traps left out of trust (ingest's traps_report.csv flags those most trusted workers miss).
drop_traps = []

[simulation]
# The simulated crowd (satcal simulate): the formulation whose phi drives the true
# satisfaction curve, P(Sat|phi) = expit(intercept + slope * phi).
formulation = "lin-const"
intercept = -3.0
slope = 6.0
# Standard deviation of each worker's own shift of the intercept.
heterogeneity = 0.5
# Workers, the share of spammers (random answers), and the position bias (extra
# probability of answering "A" when undecided).
workers = 60
spammers = 0.15
position_bias = 0.05
# The answer process of the joint satisfaction model: a user who likes both lists or
# neither still prefers one with probability undecided_preference (the higher-scored one
# with probability preference_accuracy); one who likes exactly one prefers the other with
# probability lapse. 0, 1, 0 is the paper's special case.
undecided_preference = 0.0
preference_accuracy = 1.0
lapse = 0.0
# Share of example answers whose page another worker took first and left unfinished; the
# platforms that report such assignments (Toloka, Label Studio) get them in their files.
abandoned = 0.02
'''


@dataclass(frozen=True)
class Key:
    section: str
    name: str
    kind: type | tuple
    check: Any = None
    what: str = ""


def _positive(v):
    return v >= 1


#: Bounds that keep the generator's tables within memory (cells = formulations x bins x 2;
#: examples up to min_per_cell x bins per formulation).
MAX_BINS = 100
MAX_PER_CELL = 100_000
#: Keys study.toml may hold besides SCHEMA's.
OPTIONAL_KEYS = {("formulations", "custom_gains"), ("formulations", "custom_discounts"),
                 ("formulations", "extra"), ("study", "topics")}


def _code(v):
    return v == "" or bool(re.fullmatch(r"[A-Za-z0-9_-]{1,64}", v))


#: Keys that studies made before they existed may lack: (key, default).
DEFAULTED = [
    (Key("generator", "max_query_share", (int, float), lambda v: 0 <= v <= 1,
         "a share in [0, 1] (0: no limit)"), 0),
    (Key("generator", "cover_extra", bool), False),
    (Key("simulation", "undecided_preference", (int, float), lambda v: 0 <= v <= 1, "a probability"), 0.0),
    (Key("simulation", "preference_accuracy", (int, float), lambda v: 0 <= v <= 1, "a probability"), 1.0),
    (Key("simulation", "lapse", (int, float), lambda v: 0 <= v < 0.5, "a number in [0, 0.5)"), 0.0),
    (Key("simulation", "abandoned", (int, float), lambda v: 0 <= v < 1, "a share in [0, 1)"), 0.0),
    (Key("quality", "screen_seconds_per_answer", (int, float), lambda v: 0 <= v < 3600,
         "seconds, at least 0"), 2.0),
    (Key("quality", "screen_same_side", (int, float), lambda v: 0.5 < v <= 1, "a share above 0.5, at most 1"), 0.9),
    (Key("quality", "drop_traps", list, lambda v: all(isinstance(x, str) for x in v),
         'a list of trap ids, e.g. ["trap03"]'), []),
    (Key("design", "answers_per_example", int, lambda v: 1 <= v <= 100, "an integer from 1 to 100"), 1),
    (Key("design", "adaptive", bool), False),
    (Key("design", "wave_pages", int, lambda v: 1 <= v <= 100_000, "an integer from 1 to 100,000"), 10),
    (Key("design", "confidence", (int, float), lambda v: 0.5 <= v < 1, "a probability in [0.5, 1)"), 0.95),
    (Key("design", "top_m", int, lambda v: 1 <= v <= 1000, "an integer from 1 to 1,000"), 1),
    (Key("design", "min_depth", int, lambda v: 0 <= v <= MAX_PER_CELL, f"an integer from 0 to {MAX_PER_CELL:,}"), 10),
    (Key("design", "budget", int, lambda v: 0 <= v <= 10 ** 9, "an integer >= 0 (0: no budget)"), 0),
    (Key("design", "budget_unit", str, lambda v: v in ("answers", "pages"), '"answers" or "pages"'), "answers"),
    (Key("design", "pool_size", int, lambda v: 0 <= v <= 10 ** 7, "an integer >= 0 (0: ten times the coverage design's size)"), 0),
    (Key("serve", "refit_seconds", (int, float), lambda v: 0.1 <= v <= 3600, "seconds from 0.1 to 3600"), 5),
    (Key("serve", "completion_code", str, _code, "letters, digits, _ or -, at most 64"), ""),
    (Key("serve", "failed_attention_code", str, _code, "letters, digits, _ or -, at most 64"), ""),
    (Key("serve", "pages_per_participant", int, lambda v: 1 <= v <= 10_000, "an integer from 1 to 10,000"), 5),
    (Key("serve", "attention_checks", int, lambda v: 0 <= v <= 100, "an integer from 0 to 100"), 2),
    (Key("serve", "attention_fail_limit", int, lambda v: 1 <= v <= 100, "an integer from 1 to 100"), 2),
    (Key("serve", "assignment_timeout_minutes", (int, float), lambda v: 0 < v <= 7 * 24 * 60,
         "a number of minutes above 0, at most a week"), 30),
    (Key("serve", "traps_on_top", bool), True),
    (Key("serve", "keep_failed_attention", bool), False),
    (Key("serve", "duration_minutes", (int, float), lambda v: 0 <= v <= 24 * 60, "minutes, 0 to 1440"), 0),
    (Key("serve", "pay", str, lambda v: len(v) <= 500, "text of at most 500 characters"), ""),
    (Key("serve", "contact", str, lambda v: len(v) <= 500, "text of at most 500 characters"), ""),
    (Key("serve", "consent", str, lambda v: len(v) <= 20_000, "text of at most 20,000 characters"), ""),
]


SCHEMA = [
    Key("study", "name", str),
    Key("study", "judgments", str, lambda v: bool(v), "a path to the judgments"),
    Key("study", "documents", str),
    Key("study", "k", int, _positive, "a positive integer"),
    Key("study", "levels", list,
        lambda v: len(v) >= 2 and all(isinstance(x, int) and not isinstance(x, bool) and abs(x) <= 1000
                                      for x in v) and len(set(v)) == len(v),
        "a list of at least two distinct integer levels, e.g. [0, 1, 2]"),
    Key("study", "seed", int, lambda v: 0 <= v < 2 ** 63, "an integer >= 0"),
    Key("formulations", "gains", list, lambda v: len(v) >= 1, "a non-empty list of gain ids"),
    Key("formulations", "discounts", list, lambda v: len(v) >= 1, "a non-empty list of discount ids"),
    Key("generator", "method", str, lambda v: v in ("optimal", "greedy", "published"),
        "one of optimal, greedy, published"),
    Key("generator", "n_bins", int, lambda v: 2 <= v <= MAX_BINS, f"an integer from 2 to {MAX_BINS}"),
    Key("generator", "min_per_cell", int, lambda v: 1 <= v <= MAX_PER_CELL,
        f"an integer from 1 to {MAX_PER_CELL:,}"),
    Key("generator", "overlap", str, lambda v: v in ("allow", "disjoint"), "allow or disjoint"),
    Key("traps", "count", int, lambda v: v >= 0, "an integer >= 0"),
    Key("traps", "file", str),
    Key("presentation", "platform", str, lambda v: v in ("appen", "toloka", "labelstudio", "csv", "serve"),
        "one of appen, toloka, labelstudio, csv, serve"),
    Key("presentation", "items_per_page", (int, str),
        lambda v: v == "auto" or (isinstance(v, int) and not isinstance(v, bool) and v >= 1),
        'a positive integer or "auto"'),
    Key("presentation", "swap", bool),
    Key("presentation", "instructions", str),
    Key("quality", "trust_threshold", (int, float), lambda v: 0 <= v <= 1, "a number in [0, 1]"),
    Key("quality", "min_traps", int, lambda v: v >= 0, "an integer >= 0"),
    Key("simulation", "formulation", str),
    Key("simulation", "intercept", (int, float), math.isfinite, "a finite number"),
    Key("simulation", "slope", (int, float), math.isfinite, "a finite number"),
    Key("simulation", "heterogeneity", (int, float), lambda v: 0 <= v < math.inf, "a finite number >= 0"),
    Key("simulation", "workers", int, _positive, "a positive integer"),
    Key("simulation", "spammers", (int, float), lambda v: 0 <= v < 1, "a share in [0, 1)"),
    Key("simulation", "position_bias", (int, float), lambda v: 0 <= v <= 0.5, "a number in [0, 0.5]"),
]

_TYPE_NAMES = {str: "a string", int: "an integer", list: "a list", bool: "true or false",
               (int, float): "a number"}


def _unknown_keys(config: dict, path: Path) -> None:
    """A misspelt section or key is an error, not a silently ignored line."""
    import difflib
    known = {(k.section, k.name) for k in SCHEMA} | OPTIONAL_KEYS | {(k.section, k.name) for k, _ in DEFAULTED}
    sections = sorted({s for s, _ in known} | {"platforms"})
    for section, body in config.items():
        if section == "platforms":
            continue  # checked by _validate_platforms
        if section not in sections:
            close = difflib.get_close_matches(section, sections, n=1)
            hint = f" (did you mean [{close[0]}]?)" if close else f"; sections are {', '.join(sections)}"
            raise SatcalError(f"{path}: unknown section [{section}]{hint}")
        if not isinstance(body, dict):
            raise SatcalError(f"{path}: {section} = ...: expected a [{section}] section")
        names = sorted(n for s, n in known if s == section)
        for name in body:
            if name not in names:
                close = difflib.get_close_matches(name, names, n=1)
                hint = f" (did you mean {section}.{close[0]}?)" if close else ""
                raise SatcalError(f"{path}: unknown key {section}.{name}{hint}")


def _platform_schemas() -> dict:
    """``{platform: (Setting, ...)}`` for the platforms with settings of their own."""
    from .platforms import PLATFORMS
    return {name: p.settings for name, p in PLATFORMS().items() if p.settings}


def _toml_value(v) -> str:
    return ("true" if v else "false") if isinstance(v, bool) else json.dumps(v)


def _platforms_template() -> str:
    """The ``[platforms.<name>]`` sections of study.toml, from the platforms' own settings."""
    out = ["", "# Settings of each platform's exported files (satcal export prints them). How many workers",
           "# answer each example is [design] answers_per_example, on every platform."]
    for name, schema in _platform_schemas().items():
        out.append(f"\n[platforms.{name}]")
        for setting in schema:
            out.append(f"# {setting.help[0].upper()}{setting.help[1:]}.")
            out.append(f"{setting.name} = {_toml_value(setting.default)}")
    return "\n".join(out) + "\n"


def _validate_platforms(config: dict, path: Path) -> None:
    """``[platforms.<name>]``: known platforms and keys, each value of the expected kind; the
    defaults fill what a study made before these keys existed lacks."""
    import difflib
    schemas = _platform_schemas()
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
        for setting in schema:
            value = body.setdefault(setting.name, setting.default)
            if not setting.valid(value):
                raise SatcalError(f"{path}: platforms.{name}.{setting.name} = {value!r}: expected {setting.what}")


def validate_config(config: dict, path: Path) -> dict:
    """Check every key of study.toml; one line naming the file, the key and what is expected."""
    _unknown_keys(config, path)
    _validate_platforms(config, path)
    for key, default in DEFAULTED:
        config.setdefault(key.section, {}).setdefault(key.name, default)
    for key in SCHEMA + [k for k, _ in DEFAULTED]:
        section = config.get(key.section)
        if not isinstance(section, dict) or key.name not in section:
            raise SatcalError(f"{path}: missing key {key.section}.{key.name} (see the template "
                              "written by satcal init)")
        value = section[key.name]
        ok_type = isinstance(value, key.kind) and not (key.kind is int and isinstance(value, bool))
        if not ok_type or (key.check is not None and not key.check(value)):
            what = key.what or _TYPE_NAMES.get(key.kind, str(key.kind))
            raise SatcalError(f"{path}: {key.section}.{key.name} = {value!r}: expected {what}")
    section = config["formulations"]
    levels, k = config["study"]["levels"], config["study"]["k"]
    for kind, size, what in (("custom_gains", len(levels), f"one value per level of study.levels ({len(levels)})"),
                             ("custom_discounts", k, f"k = {k} factors")):
        custom = section.get(kind, {})
        if not isinstance(custom, dict):
            raise SatcalError(f"{path}: formulations.{kind}: expected a table of name = [values]")
        for name, values in custom.items():
            ok = isinstance(values, list) and len(values) == size and all(
                isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) for v in values)
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
    for g in config["formulations"]["gains"]:
        try:
            get_gain(str(g))
        except ValueError as exc:
            raise SatcalError(f"{path}: formulations.gains: {exc}") from None
    for d in config["formulations"]["discounts"]:
        try:
            get_discount(str(d))
        except ValueError as exc:
            raise SatcalError(f"{path}: formulations.discounts: {exc}") from None
    return config


def _toml_list(values) -> str:
    return "[" + ", ".join(json.dumps(v) for v in values) + "]"


#: Workspace locks this process holds, with their depth: the lock is re-entrant in a process
#: (a file lock object per call is not).
_HELD: dict[str, int] = {}


@dataclass
class Workspace:
    """A study directory. Use :meth:`init` to create one and :meth:`open` to use it."""

    path: Path
    config: dict = field(default_factory=dict)

    # -- creation and loading --------------------------------------------------------------
    @classmethod
    def init(cls, path, judgments, documents=None, k: int = 5, levels=None, seed: int = 2015,
             min_per_cell: int = 200, platform: str = "appen", force: bool = False,
             topics=None) -> "Workspace":
        """Create a workspace: copy the inputs into ``inputs/`` and write a commented study.toml.

        Everything is checked before anything is written. ``force`` starts a study over in a
        directory that has a study.toml, but never one that holds collected answers.
        """
        path = Path(path)
        if path.exists() and not path.is_dir():
            raise SatcalError(f"{path}: exists and is not a directory")
        if (path / "study.toml").exists():
            if not force:
                raise SatcalError(f"{path}/study.toml exists; pass --force to start the study over")
            collected = [n for n in ("raw", "answers.csv") if (path / n).exists()]
            _refuse_while_served(path, "init --force")
            held = served_answers(path)
            if held is not None:
                collected.append(f"{held[1]} answers not ingested yet in {held[0]}")
            if collected:
                raise SatcalError(f"{path} holds collected answers ({', '.join(collected)}); --force "
                                  "would leave them beside a new design. Start the new study in "
                                  "another directory")
        judgments = Path(judgments)
        qrels = read_judgments(judgments)  # validate before writing anything
        documents_table = _read_documents(Path(documents)) if documents is not None else None
        if topics is not None:
            from .topics import read_topics
            read_topics(topics)
        levels = list(levels) if levels is not None else [lv for lv in qrels.levels if lv >= 0]
        judgments_name = judgments.name
        documents_name = Path(documents).name if documents is not None else ""
        if documents_name and documents_name == judgments_name:
            documents_name = f"documents-{documents_name}"  # two inputs, two copies
        topics_name = Path(topics).name if topics is not None else ""
        if topics_name and topics_name in (judgments_name, documents_name):
            topics_name = f"topics-{topics_name}"
        text = STUDY_TEMPLATE.format(name=path.name, judgments=f"inputs/{judgments_name}",
                                     topics=f"inputs/{topics_name}" if topics_name else "",
                                     documents=f"inputs/{documents_name}" if documents_name else "",
                                     k=k, levels=_toml_list(levels), seed=seed,
                                     gains=_toml_list(STUDY_GAINS), discounts=_toml_list(STUDY_DISCOUNTS),
                                     min_per_cell=min_per_cell, platform=platform,
                                     items_per_page='"auto"' if platform == "serve" else 10,
                                     instructions=default_instructions(documents_table)) + _platforms_template()
        present = set(qrels.levels)
        if len([lv for lv in levels if lv in present]) < 2:
            raise SatcalError(f"{judgments}: the judgments use level(s) {sorted(present)}; a study "
                              "needs lists built from at least two levels (give --levels)")
        validate_config(tomllib.loads(text), path / "study.toml")
        made = not path.exists()
        path.mkdir(parents=True, exist_ok=True)
        OutputSet.recover(path)
        try:
            cls._write_init(path, text, judgments, documents, topics, judgments_name, documents_name,
                            topics_name)
        except BaseException:
            if made:  # a directory this made stays only with something in it
                try:
                    path.rmdir()
                except OSError:
                    pass
            raise
        return cls.open(path)

    @classmethod
    def _write_init(cls, path, text, judgments, documents, topics, judgments_name, documents_name,
                    topics_name) -> None:
        # the inputs and study.toml as one set: a killed init leaves the old study or the new one
        with OutputSet(path, "init") as outputs:
            for source, name in ((judgments, judgments_name), (documents, documents_name), (topics, topics_name)):
                if source is not None and name:
                    shutil.copyfile(source, outputs.file(f"inputs/{name}"))
            atomic_write_text(outputs.file("study.toml"), text)
            # the manifest in the same set: a full disk leaves no study without its record
            cls(path, validate_config(tomllib.loads(text), path / "study.toml")).record(
                "init", {"judgments": str(judgments), "documents": str(documents or ""),
                         "topics": str(topics or "")}, outputs=outputs)

    @classmethod
    def open(cls, path) -> "Workspace":
        path = Path(path)
        toml = path / "study.toml"
        if not toml.is_file():
            what = "is a directory, not a file" if toml.is_dir() else "missing"
            raise SatcalError(f"{path}: not a satcal workspace (study.toml {what}); create one with "
                              "satcal init DIR --judgments FILE")
        from .fileio import read_utf8_text
        try:
            config = tomllib.loads(read_utf8_text(toml))
        except tomllib.TOMLDecodeError as exc:
            raise SatcalError(f"{toml}: {exc}") from None
        return cls(path, validate_config(config, toml))

    # -- accessors -------------------------------------------------------------------------
    def __getitem__(self, dotted: str):
        section, name = dotted.split(".")
        return self.config[section][name]

    def platform_settings(self, platform: str) -> str:
        """One line of the settings ``[platforms.<platform>]`` gives the exported files ("" for a
        platform without settings of its own)."""
        from .platforms import get_platform
        plat = get_platform(platform or self["presentation.platform"])
        if plat.describe is None:
            return ""
        return plat.describe(self.config["platforms"][plat.name], self["presentation.items_per_page"],
                             self["design.answers_per_example"])

    @property
    def k(self) -> int:
        return self["study.k"]

    @property
    def seed(self) -> int:
        return self["study.seed"]

    def file(self, name: str) -> Path:
        return self.path / name

    def judgments(self) -> Judgments:
        return read_judgments(self.path / self["study.judgments"])

    def documents(self) -> pd.DataFrame | None:
        rel = self["study.documents"]
        return _read_documents(self.path / rel) if rel else None

    def topics(self) -> pd.DataFrame | None:
        rel = self.config["study"].get("topics", "")
        if not rel:
            return None
        from .topics import read_topics
        return read_topics(self.path / rel)

    def formulations(self, normalization: str = "max", negatives: str = "keep", extra: bool = True):
        """The study's gains crossed with its discounts, custom ones included, then (unless
        ``extra`` is false) the extra measures of ``formulations.extra``."""
        from .measures import Discount, Gain, formulation, study_formulations
        section = self.config["formulations"]
        levels = self["study.levels"]
        gains = list(self["formulations.gains"])
        for name, values in section.get("custom_gains", {}).items():
            gains.append(Gain.from_mapping(dict(zip(levels, map(float, values))), name))
        discounts = list(self["formulations.discounts"])
        for name, values in section.get("custom_discounts", {}).items():
            discounts.append(Discount.from_factors([float(v) for v in values], name))
        forms = study_formulations(normalization, negatives, gains=gains, discounts=discounts)
        if not extra:
            return forms
        known = {f.id for f in forms}
        return forms + [formulation(m, normalization, negatives) for m in section.get("extra", [])
                        if m not in known]

    def table(self, name: str, required: bool = True) -> pd.DataFrame | None:
        path = self.path / name
        if not path.exists():
            if required:
                step = {"examples.csv": "satcal generate", "key.csv": "satcal export",
                        "items.csv": "satcal export", "answers.csv": "satcal ingest",
                        "traps.csv": "satcal generate", "scores.csv": "satcal generate",
                        "workers.csv": "satcal ingest", "traps_report.csv": "satcal ingest"}.get(name)
                hint = f"run {step} {self.path} first" if step else "was it deleted?"
                raise SatcalError(f"{path}: missing; {hint}")
            return None
        from .fileio import spreadsheet_value
        table = spreadsheet_value(pd.read_csv(path, dtype=str, keep_default_na=False))
        if name in DESIGN_TABLES:
            self.check_design(name, table)
        return table

    def check_design(self, name: str, table: pd.DataFrame) -> None:
        """Refuse a table made under another k or other levels than study.toml now says: its
        lists would be read with the wrong length, or its scores rescaled without a word."""
        design = self.generated_design()
        was_k = design.get("k")
        cols = {"examples.csv": r"a\d+", "items.csv": r"A\d+"}.get(name)
        if cols is not None:
            own_k = sum(bool(re.fullmatch(cols, c)) for c in table.columns)
            if name == "items.csv" and was_k is not None and own_k and own_k != was_k:
                raise SatcalError(f"{self.path}/items.csv was exported with k = {own_k}, but examples.csv was "
                                  f"generated with k = {was_k}: run satcal export {self.path} --force")
            was_k = was_k if was_k is not None else own_k or None
        if was_k is not None and was_k != self.k:
            raise SatcalError(f"{self.path}/study.toml: study.k = {self.k}, but {name} was made with k = {was_k}; "
                              + self._design_fix(f"study.k back to {was_k}"))
        levels = design.get("levels")
        if levels is not None and list(levels) != list(self["study.levels"]):
            raise SatcalError(f"{self.path}/study.toml: study.levels = {self['study.levels']}, but {name} was made "
                              f"with levels = {levels} (phi would be rescaled); "
                              + self._design_fix(f"study.levels back to {levels}"))

    def generated_design(self) -> dict:
        """k and levels the examples were generated with (empty before generate, or for a
        workspace generated before they were recorded)."""
        path = self.path / DESIGN_FILE
        if not path.exists():
            return {}
        try:
            return json.loads(path.read_text(encoding="utf-8"))
        except ValueError:
            raise SatcalError(f"{path}: not readable JSON; run satcal generate {self.path} --force "
                              "to write it again") from None

    def _design_fix(self, back: str) -> str:
        if self.collected() or served_answers(self.path) is not None:
            return (f"put {back} (the answers were collected with it; another design needs a new "
                    "study directory: satcal init NEW_DIR ...)")
        return (f"put {back}, or run satcal generate {self.path} --force and satcal export {self.path} "
                "--force to make the examples and batch again")

    def guard(self, names, force: bool) -> None:
        """Refuse to overwrite outputs unless asked."""
        existing = [n for n in names if (self.path / n).exists()]
        if existing and not force:
            what = (f"{existing[0]} already exists" if len(existing) == 1 else
                    f"{', '.join(existing)} already exist")
            raise SatcalError(f"{self.path}: {what}; pass --force to overwrite")

    def answers_simulated(self) -> bool:
        """Whether any answer is simulated (see :meth:`simulated_share`)."""
        return self.simulated_share() > 0

    def simulated_share(self) -> float:
        """The share of answers.csv that is simulated: from a file the simulated crowd wrote
        (same content as one in simulated/), or from a worker that workers.csv marks
        ``simulated`` (the hosted study's dry run, ``satcal simulate --serve``)."""
        answers = self.table("answers.csv", required=False)
        if answers is None or not len(answers):
            return 0.0
        index, sim_dir = self.path / "raw" / "index.csv", self.path / "simulated"
        sim = {sha256_file(f) for f in sim_dir.glob("*-results.*")} if sim_dir.exists() else set()
        files = pd.read_csv(index, dtype=str) if index.exists() and sim else pd.DataFrame(columns=["sha256", "file"])
        workers = self.table("workers.csv", required=False)
        marked = (set(workers.loc[workers["simulated"].astype(str) == "True", "worker_id"])
                  if workers is not None and "simulated" in workers.columns else set())
        simulated = (answers["source_file"].isin(set(files.loc[files["sha256"].isin(sim), "file"]))
                     | answers["worker_id"].isin(marked))
        return float(simulated.mean())

    def collected(self) -> bool:
        """Whether any result file has been ingested."""
        index = self.path / "raw" / "index.csv"
        return index.exists() and len(pd.read_csv(index, dtype=str)) > 0

    def refuse_if_collected(self, command: str) -> None:
        """Once answers are collected, the examples and the key they refer to are fixed: a new
        design or presentation would change what the collected answers mean. Answers still in
        a hosted study's database count as collected."""
        if self.collected():
            raise SatcalError(f"{self.path} holds collected answers (raw/); {command} would change the "
                              "examples or the key they answer, even with --force. For a new batch, "
                              "start a new study directory (satcal init NEW_DIR ...)")
        _refuse_while_served(self.path, command)
        held = served_answers(self.path)
        if held is not None:
            url, n = held
            raise SatcalError(f"{url} holds {n} answers to this study's key.csv, not ingested yet; {command} "
                              "would change the examples they answer, even with --force. Ingest them "
                              f"first ({_ingest_served(self.path, url)}); a new design then needs a new "
                              "study directory (satcal init NEW_DIR ...)")

    @contextmanager
    def serving(self, url: str | None):
        """While the block runs, ``batches/serving.json`` names this process and its database, so
        commands that would replace the key refuse (:func:`running_server`). The entry is taken
        off at the end; a process ended by a signal (uvicorn re-raises SIGTERM after its
        shutdown) or killed leaves it behind, and an entry whose process is gone never counts."""
        from .serve import db
        shown = _hide_password(url or db.default_url(self.path))
        marker = self.path / SERVING
        me = {"pid": os.getpid(), "database": shown}
        with self.locked():
            atomic_write_text(marker, json.dumps(_live_servers(self.path) + [me], indent=1) + "\n")
        try:
            yield
        finally:
            with self.locked():
                rest = [e for e in _live_servers(self.path) if e.get("pid") != me["pid"]]
                if rest:
                    atomic_write_text(marker, json.dumps(rest, indent=1) + "\n")
                elif marker.exists():
                    marker.unlink()

    def remember_database(self, url: str | None) -> None:
        """Note a study database ``satcal serve`` uses (a URL's password left out), so that
        commands that would replace the key it is bound to can look for answers in it."""
        from .serve import db
        url = url or db.default_url(self.path)
        path = self.path / SERVED_DATABASES
        known = json.loads(path.read_text()) if path.exists() else []
        shown = _hide_password(url)
        if shown not in known:
            atomic_write_text(path, json.dumps(known + [shown], indent=1) + "\n")

    # -- concurrency and interrupted commands ----------------------------------------------
    @contextmanager
    def locked(self):
        """Hold the workspace lock (``.satcal.lock``): one writing command at a time.

        Re-entrant within a process. Another process's command is waited for, with a line on
        stderr, up to ``LOCK_WAIT`` seconds.
        """
        from filelock import FileLock, Timeout
        key = str((self.path / ".satcal.lock").resolve())
        if _HELD.get(key):  # this process holds it already (a command calling a stage)
            _HELD[key] += 1
            try:
                yield self
            finally:
                _HELD[key] -= 1
            return
        lock = FileLock(key)
        try:
            lock.acquire(timeout=0)
        except Timeout:
            print(f"satcal: waiting for another satcal command working on {self.path} ...",
                  file=sys.stderr, flush=True)
            try:
                lock.acquire(timeout=LOCK_WAIT)
            except Timeout:
                raise SatcalError(f"{self.path}: another satcal command has held the workspace "
                                  f"for over {LOCK_WAIT} s; let it finish, or stop it and run "
                                  "this one again") from None
        _HELD[key] = 1
        try:
            OutputSet.recover(self.path)  # finish or discard what a killed command left
            yield self
        finally:
            _HELD.pop(key, None)
            lock.release()

    @contextmanager
    def staged(self, command: str):
        """``command``'s outputs as one set (:class:`~satcal.fileio.OutputSet`): written aside,
        then moved into place together, so a killed command leaves the old set or the new one,
        never half of each."""
        with OutputSet(self.path, command) as outputs:
            yield outputs

    # -- manifest --------------------------------------------------------------------------
    def record(self, command: str, details: dict | None = None, inputs: list[Path] | None = None,
               outputs: OutputSet | None = None) -> None:
        """Append to manifest.json: versions, seeds, input hashes and the command (into
        ``outputs`` when the record belongs to a set of outputs)."""
        path = self.path / "manifest.json"
        target = outputs.file("manifest.json") if outputs is not None else path
        manifest = json.loads(path.read_text()) if path.exists() else {"history": [], "inputs": {}}
        manifest["satcal_version"] = __version__
        manifest["python"] = sys.version.split()[0]
        manifest["platform"] = _platform.platform()
        manifest["packages"] = _package_versions()
        manifest["seeds"] = {"study": self.seed}
        files = [self.path / self["study.judgments"]]
        if self["study.documents"]:
            files.append(self.path / self["study.documents"])
        files += list(inputs or [])
        for f in map(Path, files):
            # a file of this set is recorded under the name it will have once committed, with
            # the content it will have then
            name = outputs.final(f) if outputs is not None and f.is_relative_to(outputs.stage / "new") else f
            if outputs is not None and f.is_relative_to(self.path) and not f.is_relative_to(outputs.stage):
                staged = outputs.stage / "new" / f.relative_to(self.path)
                f = staged if staged.exists() else f
            if f.exists():
                manifest["inputs"][str(name.relative_to(self.path) if name.is_relative_to(self.path) else name)] = sha256_file(f)
        manifest["history"].append({"command": command, "at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
                                    **({"details": details} if details else {})})
        atomic_write_text(target, json.dumps(manifest, indent=2, sort_keys=True) + "\n")

    # -- stages ----------------------------------------------------------------------------
    def generate(self, force: bool = False, progress: bool = False):
        """Examples, traps, scores, coverage table and heat map."""
        with self.locked():
            return self._generate(force, progress)

    def _generate(self, force: bool, progress: bool):
        from .generate import Design, coverage_heatmap, generate
        from .traps import build_traps, read_traps
        self.refuse_if_collected("generate")
        self.guard(["examples.csv", "traps.csv", "scores.csv", "coverage.csv"], force)
        judgments = self.judgments()
        family, every = self.formulations(extra=False), self.formulations()
        design = Design(k=self.k, levels=self["study.levels"], formulations=family,
                        extra=every[len(family):], cover_extra=self["generator.cover_extra"],
                        n_bins=self["generator.n_bins"], min_per_cell=self["generator.min_per_cell"],
                        overlap=self["generator.overlap"], method=self["generator.method"], seed=self.seed,
                        max_query_share=float(self["generator.max_query_share"]))
        if self["traps.file"]:
            if (self.path / self["traps.file"]).resolve() == self.file("traps.csv").resolve():
                raise SatcalError(f"{self.path}/study.toml: traps.file = 'traps.csv' is the name of the "
                                  "generated traps table; rename your traps file (e.g. my-traps.csv)")
            traps = read_traps(self.path / self["traps.file"], judgments, self.k, levels=self["study.levels"])
        else:
            traps = build_traps(judgments, self.k, self["traps.count"], seed=self.seed + 1,
                                levels=self["study.levels"])
        result = generate(judgments, design, progress=progress)
        if self["design.adaptive"]:  # adaptive: the examples are the candidate pool waves draw from
            from .adaptive_study import adopt_pool
            adopt_pool(self, result, judgments, design)
        # query and document ids are the user's: no cell may run as a formula in a spreadsheet
        # (read back through table(), which gives the values as they were)
        csv = lambda df: spreadsheet_safe(df).to_csv(index=False, lineterminator="\n", float_format="%.10g")
        with self.staged("generate") as outputs:
            atomic_write_text(outputs.file("examples.csv"), csv(result.examples))
            atomic_write_text(outputs.file("traps.csv"), csv(traps))
            atomic_write_text(outputs.file("scores.csv"), csv(result.scores))
            atomic_write_text(outputs.file("coverage.csv"), csv(result.coverage))
            if self["design.adaptive"]:
                atomic_write_text(outputs.file("pool.csv"), csv(result.examples))
            outputs.file("coverage.png"), outputs.file("coverage.pdf")
            coverage_heatmap(result.coverage, design.min_per_cell, outputs.file("coverage"))
            atomic_write_text(outputs.file(DESIGN_FILE), json.dumps(
                {"k": self.k, "levels": list(self["study.levels"])}, indent=1) + "\n")
            self.record("generate", {"seed": self.seed, **result.summary(),
                                     "traps": traps.attrs.get("built", f"{len(traps)} traps from {self['traps.file']}")},
                        outputs=outputs)
        result.traps_built = traps.attrs.get("built", f"{len(traps)} traps read from {self['traps.file']}")
        return result

    def export(self, platform: str | None = None, force: bool = False, new_batch: bool = False,
               next_batch: bool = False):
        """Platform task files under batches/<platform>/ and the hidden key.csv.

        Each batch (a presentation of the examples: opaque ids, orientation, pages) keeps its
        key under ``batches/keys/batch-<n>.csv``, and ingest resolves item ids across all of
        them. Once answers are collected, the current batch can be exported again (to another
        platform, say), and ``new_batch`` starts the next one; nothing replaces a key that
        collected answers refer to.
        """
        if next_batch:  # adaptive: the next wave, chosen from the answers so far
            from .adaptive_study import export_next
            return export_next(self, platform)
        with self.locked():
            return self._export(platform, force, new_batch)

    def batch_number(self) -> int:
        """The current batch (0 before the first export)."""
        key = self.table("key.csv", required=False)
        if key is None:
            return 0
        return int(key["batch"].iloc[0]) if "batch" in key.columns and len(key) else 1

    def _export(self, platform: str | None, force: bool, new_batch: bool = False, wave=None):
        from .platforms import build_items, get_platform
        plat = get_platform(platform or self["presentation.platform"])
        out = self.path / "batches" / plat.name
        current = self.batch_number()
        batch = current + 1 if new_batch or current == 0 else current
        collected = self.collected()
        held = None if collected else served_answers(self.path)
        if not collected:
            self.guard([f"batches/{plat.name}"] if out.exists() and any(out.iterdir()) and not new_batch else [],
                       force)
        examples = self.table("examples.csv") if wave is None else wave.examples
        traps = self.table("traps.csv", required=False) if wave is None else wave.traps
        traps = traps if traps is not None else pd.DataFrame()
        # batch 1 keeps the seed of earlier versions, so existing keys are reproduced
        documents, topics = self.documents(), self.topics()
        per_page = self["presentation.items_per_page"] if wave is None else wave.items_per_page
        build = lambda n: build_items(examples, traps, self.k, seed=self.seed + 2 + 7919 * (batch - 1),
                                      items_per_page=n, documents=documents, swap=self["presentation.swap"],
                                      topics=topics)
        visible, key = build(10 if per_page == "auto" else per_page)
        if per_page == "auto":  # by reading load: the items' text decides how many fit a page
            from .platforms.serve import auto_items_per_page
            per_page = auto_items_per_page(visible, self.k)
            visible, key = build(per_page)
        _warn_bare_ids(visible, self.path)
        key["batch"] = batch
        existing_key = self.table("key.csv", required=False)
        same = existing_key is not None and existing_key.drop(columns=["batch"], errors="ignore").equals(
            key.drop(columns=["batch"]).astype(str))
        if existing_key is not None and not same and not new_batch:
            _refuse_while_served(self.path, "export --force")
            if held is not None:
                url, n = held
                raise SatcalError(f"{url} holds {n} answers to this study's key.csv, not ingested yet, and "
                                  "key.csv would change, even with --force. Ingest them first "
                                  f"({_ingest_served(self.path, url)}), or start a new batch and keep "
                                  f"this key: satcal export {self.path} --new-batch")
            if collected:
                raise SatcalError(f"{self.path} holds collected answers and key.csv would change (the "
                                  "examples, documents or presentation settings changed), even with "
                                  f"--force. To present the examples again, start a new batch: satcal "
                                  f"export {self.path} --new-batch")
            if not force:
                raise SatcalError(f"{self.path}/key.csv holds another presentation; pass --force to "
                                  "replace it, or --new-batch to keep it and start another")
        with self.staged("export") as outputs:
            # spreadsheet-safe like every table of the workspace; the platform's own upload
            # files (written by plat.write_batch) keep the values the platform shows
            text = spreadsheet_safe(key).to_csv(index=False, lineterminator="\n")
            atomic_write_text(outputs.file(f"batches/keys/batch-{batch}.csv"), text)
            atomic_write_text(outputs.file("key.csv"), text)
            atomic_write_text(outputs.file("items.csv"),
                              spreadsheet_safe(visible).to_csv(index=False, lineterminator="\n"))
            staged_out = outputs.dir(f"batches/{plat.name}")
            settings = {"settings": self.config["platforms"][plat.name]} if plat.settings else {}
            written = plat.write_batch(visible, key, staged_out, self.k, self["presentation.instructions"],
                                       per_page,
                                       answers_per_example=self["design.answers_per_example"], **settings)
            self.record("export", {"platform": plat.name, "items": len(visible), "batch": batch,
                                   **({"wave_examples": len(examples)} if wave is not None else {})},
                        outputs=outputs)
        return [out / Path(p).relative_to(staged_out) for p in written]

    def keys(self) -> pd.DataFrame | None:
        """Every batch's key in one table (item ids are unique across batches), for ingest."""
        frames = [spreadsheet_value(pd.read_csv(p, dtype=str, keep_default_na=False))
                  for p in sorted((self.path / "batches" / "keys").glob("batch-*.csv"))]
        current = self.table("key.csv", required=False)
        if current is not None:
            frames.append(current)
        if not frames:
            return None
        table = pd.concat(frames, ignore_index=True).drop_duplicates()
        clash = table["item_id"].duplicated(keep=False)
        if clash.any():
            raise SatcalError(f"{self.path}/batches/keys: item id {table.loc[clash, 'item_id'].iloc[0]!r} means "
                              "different things in two batch keys; restore the keys as exported")
        return table.reset_index(drop=True)

    def preview(self, n: int = 6, path: Path | None = None, force: bool = False) -> Path:
        """A static page with a sample of units exactly as a worker sees them (preview.html is
        kept unless ``force``)."""
        with self.locked():
            if path is None:
                self.guard(["preview.html"], force)
            return self._preview(n, path)

    def _preview(self, n: int, path: Path | None) -> Path:
        from .platforms import render_form_html
        visible = self.table("items.csv")
        key = self.table("key.csv")
        rng = np.random.default_rng(self.seed + 3)
        # Show at least one trap, as workers meet them among the examples.
        traps = key.index[key["is_trap"] == "True"].to_numpy()
        picks = list(rng.choice(len(visible), size=min(n, len(visible)), replace=False))
        if traps.size and not set(picks) & set(traps):
            picks[-1] = int(rng.choice(traps))
        sample = visible.iloc[sorted(picks)]
        target = path or self.file("preview.html")
        atomic_write_text(target, render_form_html(sample, self.k, self["presentation.instructions"],
                                            f"Preview: {self['study.name']}"))
        return target

    def analyze(self, force: bool = False, **kwargs):
        """Analyse the ingested answers into analysis/ (an earlier analysis is kept unless
        ``force``)."""
        with self.locked():
            return self._analyze(force, **kwargs)

    def _analyze(self, force: bool, **kwargs):
        from .analysis import calibrate
        from .ingest import repair_interrupted_ingest, study_from_workspace
        repair_interrupted_ingest(self)
        previous = self.path / "analysis"
        if previous.exists() and any(previous.iterdir()):
            self.guard(["analysis"], force)
        study = study_from_workspace(self)
        kwargs.setdefault("formulations", self.formulations())
        result = calibrate(study, **kwargs)
        result.workers = self.table("workers.csv", required=False)
        result.trap_report = self.table("traps_report.csv", required=False)
        result.meta["provenance"].update(
            judgments_sha256=sha256_file(self.path / self["study.judgments"]),
            answers_sha256=sha256_file(self.file("answers.csv")), simulated=self.answers_simulated())
        result.meta["simulated"] = result.meta["provenance"]["simulated"]
        result.meta["simulated_share"] = result.meta["provenance"]["simulated_share"] = self.simulated_share()
        rejects = self.table("rejects.csv", required=False)
        if rejects is not None:
            result.meta["rejected_rows"] = int(len(rejects))
        from .quality import agreement
        agreed = agreement(study.examples)
        counts = study.examples.groupby("example_id").size()
        result.meta["crowd"] = {"answers": int(len(study.examples)), "examples": int(len(counts)),
                                "answers_per_example_design": self["design.answers_per_example"],
                                "answers_per_example_mean": float(counts.mean()),
                                **({"agreement": agreed.as_dict()} if agreed is not None else {})}
        if self["design.adaptive"]:  # the stopping rule's verdict, in calibration.json and the report
            from .adaptive_study import calibration_record
            result.meta["provenance"]["adaptive"] = calibration_record(self, result)
        from .report import write_analysis
        with self.staged("analyze") as outputs:
            write_analysis(result, outputs.dir("analysis"))
            self.record("analyze", {**{k: v for k, v in kwargs.items() if k in ("population", "bootstrap", "seed")},
                                    "formulations": result.bias["formulation"].tolist()}, outputs=outputs)
        return result


#: What generate records of the design its examples were made under.
DESIGN_FILE = "design.json"
#: The tables made under one k and one set of levels.
DESIGN_TABLES = ("examples.csv", "scores.csv", "traps.csv", "items.csv", "key.csv", "answers.csv")

#: The study databases ``satcal serve`` used, besides the default DIR/serve.db.
SERVED_DATABASES = "batches/served-databases.json"
#: The ``satcal serve`` processes running on the study now (pid, database), one entry each.
SERVING = "batches/serving.json"


def _alive(pid: int) -> bool:
    try:
        os.kill(int(pid), 0)  # signal 0: only asks whether the process exists
    except ProcessLookupError:
        return False
    except OSError:  # it exists, under another user
        pass
    return True


def _live_servers(path: Path) -> list[dict]:
    """The entries of ``batches/serving.json`` whose process still runs (a killed server's
    entry stays behind and is ignored)."""
    marker = Path(path) / SERVING
    try:
        entries = json.loads(marker.read_text()) if marker.exists() else []
    except (OSError, ValueError):
        return []
    return [e for e in entries if _alive(e.get("pid", -1))]


def running_server(path: Path) -> dict | None:
    """A ``satcal serve`` still running on the study at ``path``, or None."""
    return next(iter(_live_servers(path)), None)


def _refuse_while_served(path: Path, command: str) -> None:
    """Replacing the key under a running hosted study would orphan every answer stored after
    it (they are bound to the old key): refuse until the server is stopped."""
    live = running_server(path)
    if live is not None:
        raise SatcalError(f"satcal serve is running on {path} (process {live['pid']}, database "
                          f"{live['database']}); {command} would replace the key its participants are "
                          "answering, even with --force. Stop the server first, then ingest its answers "
                          f"({_ingest_served(Path(path), live['database'])})")


def _hide_password(url: str) -> str:
    from sqlalchemy.engine import make_url
    try:
        return make_url(url).render_as_string(hide_password=True)
    except Exception:  # not a URL SQLAlchemy reads: kept as given (connect() will say why)
        return url


def _ingest_served(path: Path, url: str) -> str:
    from .serve import db
    own = url == _hide_password(db.default_url(path))
    return f"satcal ingest {path} --platform serve" + ("" if own else f" --db {url}")


def served_answers(path: Path) -> tuple[str, int] | None:
    """The first study database of the workspace at ``path`` (``DIR/serve.db`` and those
    ``satcal serve`` noted) that holds answers to the current key.csv, with their number;
    None if none does. Answers to another key are not counted: that key is kept under
    batches/keys/ (an earlier batch) or was never served."""
    key = path / "key.csv"
    if not key.exists():
        return None
    from .serve import db
    urls = [db.default_url(path)]
    noted = path / SERVED_DATABASES
    if noted.exists():
        urls += [u for u in json.loads(noted.read_text()) if u not in urls]
    digest = sha256_file(key)
    for url in urls:
        n = _responses_to(url, digest)
        if n:
            return _hide_password(url), n
    return None


def _responses_to(url: str, digest: str) -> int:
    """Item responses stored in the database at ``url`` while it was bound to the key of hash
    ``digest`` (0 for a missing SQLite file or a database of another key)."""
    from sqlalchemy import func, inspect, select
    from sqlalchemy.exc import SQLAlchemyError
    from .serve import db
    if url.startswith("sqlite:///") and not Path(url[len("sqlite:///"):]).exists():
        return 0
    engine = db.connect(url)
    try:
        if not inspect(engine).has_table("satcal_meta"):
            return 0
        t = db.tables()
        with engine.connect() as conn:
            bound = conn.execute(select(t["meta"].c.value).where(t["meta"].c.name == "key_sha256")).scalar()
            if bound != digest:
                return 0
            return int(conn.execute(select(func.count()).select_from(t["responses"])
                                    .where(t["responses"].c.kind == "item")).scalar_one())
    except SQLAlchemyError as exc:
        what = (f"if it is gone, remove it from {SERVED_DATABASES}" if not url.startswith("sqlite:///")
                else "if it is not a study database, move it away")
        raise SatcalError(f"{_hide_password(url)}: cannot read this study database to look for answers "
                          f"({str(getattr(exc, 'orig', exc)).strip()}); ingest its answers first, or, {what}") from None
    finally:
        engine.dispose()


def _warn_bare_ids(visible: pd.DataFrame, path: Path) -> None:
    """Workers shown only ids cannot judge anything: say so (a warning: an id may be all a
    study of, say, known-item music tracks needs)."""
    import warnings
    from .errors import SatcalWarning
    if "query_title" not in visible.columns:
        warnings.warn(f"{path}: workers will see query ids (e.g. {visible['query'].iloc[0]!r}) with no "
                      "text: give a topics file (satcal init --topics, or topics = ... in study.toml)",
                      SatcalWarning, stacklevel=3)
    if "A1_title" not in visible.columns and "A1_audio_url" not in visible.columns:
        warnings.warn(f"{path}: workers will see bare document ids (e.g. {visible['A1'].iloc[0]!r}): give a "
                      "documents table with title, snippet, url or audio_url", SatcalWarning, stacklevel=3)


def _read_documents(path: Path) -> pd.DataFrame:
    from .fileio import read_csv_strings
    table = read_csv_strings(path, "a documents CSV with doc and any of title, snippet, url, audio_url")
    if "doc" not in table.columns:
        raise InputFileError(path, "missing column doc (the documents table needs doc and any of "
                                   "title, snippet, url, audio_url)", 1)
    dup = table["doc"].duplicated()
    if dup.any():
        raise InputFileError(path, f"document {table['doc'][dup].iloc[0]!r} is listed twice",
                             int(np.flatnonzero(dup)[0]) + 2, "doc")
    return table


def _package_versions() -> dict:
    from .fileio import package_versions
    return package_versions()
