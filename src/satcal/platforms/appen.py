"""Appen (ex Figure Eight / CrowdFlower): units CSV with gold columns, a CML job template, and
the full-report reader.

Units: the worker-visible fields (column names in lower case: Appen lower-cases column names
on upload, and the CML's Liquid variables must match them), ``_golden`` (TRUE for traps),
``answer_gold`` (the accepted answers in the shown orientation, one per line) and
``answer_gold_reason``. Appen uses the gold columns to score workers; the columns are not part
of the task, but a worker who misses a test question is shown the expected answer and the reason
unless the job's test-question settings hide them (job-settings.txt says how).

Full report: ``_unit_id,_created_at,_golden,_id,_missed,_started_at,_tainted,_channel,_trust,
_worker_id,...`` then the job's output (``answer``) and unit fields.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from ..fileio import atomic_write_text
from .base import (ANSWER_LABELS, Platform, Setting, TrapCount, check_worker_visible, render_instructions_html,
                   trap_count_line, traps_a_page)
from ._common import raw_answers, read_table, write_delimited

REPORT_COLUMNS = ["_unit_id", "_created_at", "_golden", "_id", "_missed", "_started_at", "_tainted",
                  "_channel", "_trust", "_worker_id", "_country", "_region", "_city", "_ip"]


def _field(visible: pd.DataFrame, side: str, i: int) -> str:
    return f"{side}{i}_title" if f"{side}{i}_title" in visible.columns else f"{side}{i}"


def _lower(visible: pd.DataFrame) -> pd.DataFrame:
    """Column names as Appen keeps them (lower case), so that ``{{a1}}`` finds ``a1``."""
    return visible.rename(columns=str.lower)


def cml_template(visible: pd.DataFrame, k: int) -> str:
    """The job's CML: both lists side by side and a required 4-way ``cml:radios`` (gold).
    ``visible`` has Appen's lower-case column names.

    Parameters
    ----------
    visible : pandas.DataFrame
        items.csv, with Appen's lower-case column names.
    k : int
        List length.

    Returns
    -------
    str
    """
    query = "query_title" if "query_title" in visible.columns else "query"
    lists = []
    for shown in ("A", "B"):
        side = shown.lower()
        items = []
        for i in range(1, k + 1):
            extra = ""
            if f"{side}{i}_snippet" in visible.columns:
                extra += f'<div class="snippet">{{{{{side}{i}_snippet}}}}</div>'
            if f"{side}{i}_audio_url" in visible.columns:
                extra += f'<audio controls preload="none" src="{{{{{side}{i}_audio_url}}}}"></audio>'
            items.append(f"      <li>{{{{{_field(visible, side, i)}}}}}{extra}</li>")
        lists.append(f'  <div class="list">\n    <h3>System {shown}</h3>\n    <ol>\n'
                     + "\n".join(items) + "\n    </ol>\n  </div>")
    radios = "\n".join(f'  <cml:radio label="{label}" value="{code}" />'
                       for code, label in ANSWER_LABELS.items())
    description = ('<p class="description">{{query_description}}</p>\n'
                   if "query_description" in visible.columns else "")
    return (f'<h2>Query: {{{{{query}}}}}</h2>\n{description}<div class="lists">\n' + "\n".join(lists) + "\n</div>\n"
            '<cml:radios label="Which system gives better results?" name="answer" '
            'validates="required" gold="true">\n' + radios + "\n</cml:radios>\n")


#: The researcher's job settings, ``[platforms.appen]`` in study.toml (written to
#: job-settings.txt: Appen takes them in its job editor, not from a file).
SETTINGS = (
    Setting("payment_cents_per_page", 10, int, lambda v: 1 <= v <= 100_000, "a positive number of cents",
            "payment per page (units_per_assignment rows), in US cents"),
    Setting("test_questions_per_page", "auto", (int, str), lambda v: v == "auto" or (
                isinstance(v, int) and not isinstance(v, bool) and 0 <= v <= 100), 'an integer from 0 to 100 or "auto"',
            "test questions (traps) on each page of work mode; auto: as many as bring a worker to the trap "
            "rule's count ([quality] trap_power) within pages_per_worker pages, after the quiz page"),
    Setting("pages_per_worker", 10, int, lambda v: 0 <= v <= 100_000, "an integer from 0 to 100,000",
            "pages of work mode one contributor may do (max judgments per contributor = this x rows per "
            "page; 0: no limit, and auto gives one test question a page)"),
    Setting("min_accuracy", 70, (int, float), lambda v: 0 <= v <= 100, "a percentage from 0 to 100",
            "minimum accuracy on test questions to stay in the job"),
    Setting("quiz_mode", True, bool, None, "true or false",
            "a first page of test questions only, which a worker must pass to enter"),
    Setting("hide_answer", True, bool, None, "true or false",
            "hide the expected answer from a worker who misses a test question (showing it teaches the traps)"),
)
DEFAULTS = {s.name: s.default for s in SETTINGS}


def test_questions(settings: dict | None, items_per_page: int, needed: int | None) -> tuple[int, int]:
    """Test questions on the quiz page (``items_per_page`` in quiz mode, else 0) and on each
    page of work mode: ``test_questions_per_page``, or with ``"auto"``
    :func:`satcal.platforms.base.traps_a_page` of the rest of the trap rule's count over
    ``pages_per_worker`` pages.

    Parameters
    ----------
    settings : dict or None
        ``[platforms.appen]``; None (or a missing key) takes the defaults.
    items_per_page : int
        Rows on a page.
    needed : int or None
        The trap rule's count (:class:`satcal.platforms.base.TrapCount`).

    Returns
    -------
    tuple of (int, int)
    """
    s = {**DEFAULTS, **(settings or {})}
    quiz = items_per_page if s["quiz_mode"] else 0
    if s["test_questions_per_page"] != "auto":
        return quiz, int(s["test_questions_per_page"])
    return quiz, traps_a_page(needed, s["pages_per_worker"], items_per_page, first=quiz)


def describe_settings(settings: dict, items_per_page: int, answers_per_example: int,
                      traps: TrapCount | None = None) -> str:
    """One line of the job settings, for export to print: payment, test questions and where a
    contributor meets the trap rule's count.

    Parameters
    ----------
    settings : dict
        ``[platforms.<name>]`` of study.toml (missing keys take the defaults).
    items_per_page : int
        Items on one page.
    answers_per_example : int
        Workers answering each item.
    traps : TrapCount or None, optional
        The trap rule's count for the batch; None: not known (auto then gives 1 a page).

    Returns
    -------
    str
    """
    s = {**DEFAULTS, **(settings or {})}
    needed = traps.needed if traps is not None else None
    no_traps = traps is not None and not traps.in_batch
    quiz, per_page = (0, 0) if no_traps else test_questions(s, items_per_page, needed)
    limit = (f"at most {s['pages_per_worker']} pages a contributor" if s["pages_per_worker"]
             else "no limit of pages a contributor")
    auto = traps_a_page(needed, s["pages_per_worker"], items_per_page, first=quiz)
    where = (trap_count_line(needed, per_page, s["pages_per_worker"], first=quiz, available=traps.in_batch,
                             platform="Appen", keys=("pages_per_worker", "test_questions_per_page"), auto=auto,
                             fix=traps.fix)
             if traps is not None and per_page else
             ("no test questions: the batch has no traps" if no_traps else "no test questions"))
    said = (" (auto)" if s["test_questions_per_page"] == "auto" else "") + (
        f" after a quiz page of {quiz}" if quiz else "")
    return (f"payment {s['payment_cents_per_page']} cents per page of {items_per_page} units, "
            f"{answers_per_example} judgments per unit ([design] answers_per_example), "
            f"{per_page} test question(s) a page{said}, {limit}: {where}; "
            f"minimum accuracy {s['min_accuracy']}%, "
            f"quiz mode {'on' if s['quiz_mode'] else 'off'}, answers of missed test questions "
            f"{'hidden' if s['hide_answer'] else 'shown'} (set them in Appen's job editor: job-settings.txt)")


def write_batch(visible: pd.DataFrame, key: pd.DataFrame, out_dir: Path, k: int,
                instructions: str, items_per_page: int, answers_per_example: int = 1,
                settings: dict | None = None, traps: TrapCount | None = None) -> list[Path]:
    """Appen's job files: ``units.csv`` (traps as test questions), ``job.cml``,
    ``instructions.html`` and ``job-settings.txt``.

    Parameters
    ----------
    visible : pandas.DataFrame
        items.csv: what workers see, one row per item, with its ``page``.
    key : pandas.DataFrame
        key.csv of the batch (traps and their expected answers).
    out_dir : pathlib.Path
        Directory to write into (made if missing).
    k : int
        List length.
    instructions : str
        The instructions text.
    items_per_page : int
        Items on one page.
    answers_per_example : int, optional
        Workers answering each item (default 1).
    settings : dict or None, optional
        ``[platforms.<name>]`` of study.toml; None (or a missing key) takes the defaults.
    traps : TrapCount or None, optional
        The trap rule's count for the batch (test questions under ``"auto"``).

    Returns
    -------
    list of pathlib.Path
        The files written.

    Raises
    ------
    AssertionError
        ``visible`` has a key column (:func:`satcal.platforms.base.check_worker_visible`).
    """
    check_worker_visible(visible.columns)
    s = {**DEFAULTS, **(settings or {})}
    units = _lower(visible)
    golden = key.set_index("item_id").loc[units["item_id"]]
    units["_golden"] = np.where(golden["is_trap"].to_numpy(), "TRUE", "FALSE")
    units["answer_gold"] = [e.replace(";", "\n") for e in golden["expected_shown"].fillna("")]
    units["answer_gold_reason"] = np.where(golden["is_trap"].to_numpy(),
                                           "The relevance of the two lists makes this answer clear.", "")
    n_traps = int(golden["is_trap"].sum())
    quiz, per_page = test_questions(s, items_per_page, traps.needed if traps else None) if n_traps else (0, 0)
    pages = s["pages_per_worker"]
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = [atomic_write_text(out_dir / "units.csv", write_delimited(units, ",")),
             atomic_write_text(out_dir / "job.cml", cml_template(_lower(visible), k)),
             atomic_write_text(out_dir / "instructions.html", render_instructions_html(instructions) + "\n"),
             atomic_write_text(out_dir / "job-settings.txt", JOB_SETTINGS.format(
                 rows=items_per_page, judgments=answers_per_example,
                 traps=n_traps, cents=s["payment_cents_per_page"],
                 per_page=per_page, accuracy=s["min_accuracy"],
                 max_judgments=pages * items_per_page if pages else "none (no limit)",
                 rule=("nothing: the batch has no traps" if not n_traps
                       else "none is enough for these traps" if traps is None or traps.needed is None
                       else f"{traps.needed} test questions a contributor"),
                 meets=(min(quiz + per_page * pages, len(golden[golden["is_trap"]])) if pages
                        else "one a page"),
                 quiz="on" if s["quiz_mode"] else "off",
                 hide='turn on "Hide answer"' if s["hide_answer"] else 'leave "Hide answer" off'))]
    return paths


JOB_SETTINGS = """# Appen job settings for this batch (Design > Quality, Settings > Launch), from
# [platforms.appen] and [design] of study.toml:
units_per_assignment = {rows}
judgments_per_unit = {judgments}
payment_per_assignment_cents = {cents}
test_questions_per_page = {per_page}
minimum_accuracy_percent = {accuracy}
quiz_mode = {quiz}
max_judgments_per_contributor = {max_judgments}
# The trap rule ([quality] trap_power) asks {rule}; with these settings a contributor meets
# {meets} (the quiz page and every page of work mode, never one test question twice), so the
# job needs at least that many test questions (units.csv has {traps}). Appen cannot make a
# contributor do every page: one who stops sooner meets fewer, and under [quality] min_traps
# is kept unscored by satcal's ingest.
# 1. Data: upload units.csv. Appen reads the {traps} rows with _golden = TRUE and their
#    answer_gold / answer_gold_reason columns as test questions, but only once you convert them:
#    Quality > Test Questions > "Convert uploaded test questions".
# 2. Design: paste job.cml into the CML editor and instructions.html into the instructions.
# 3. Quality > Test Questions settings: {hide} (when off, the expected answer and the
#    reason are shown to a worker who misses one, which teaches the traps), set test
#    questions per page to {per_page}, quiz mode {quiz}, minimum accuracy {accuracy}%;
#    Settings > Launch: max judgments per contributor {max_judgments}.
"""


def read_results(path) -> pd.DataFrame:
    """Appen full report -> raw answers (platform trust kept; tainted rows flagged).

    Parameters
    ----------
    path : str or pathlib.Path
        The result file.

    Returns
    -------
    pandas.DataFrame
        Raw answers (:func:`satcal.platforms._common.raw_answers`).

    Raises
    ------
    InputFileError
        The file is not readable in this layout (naming the line).
    """
    t = read_table(path, ",", ["_unit_id", "_id", "_worker_id", "answer", "item_id"], expected=(
        "Appen's full report, one row per judgment (_unit_id, _id, _worker_id, answer and the "
        "units' item_id); the aggregated report has one row per unit and no workers"))
    status = np.where(t.get("_tainted", pd.Series([""] * len(t))).astype(str).str.lower() == "true",
                      "tainted", "")
    seconds = None
    if "_started_at" in t.columns and "_created_at" in t.columns:  # the time on the page
        seconds = (pd.to_datetime(t["_created_at"], errors="coerce", utc=True, format="mixed")
                   - pd.to_datetime(t["_started_at"], errors="coerce", utc=True, format="mixed")).dt.total_seconds()
    return raw_answers(path, t["item_id"], t["_worker_id"], t["answer"], t.get("_created_at"),
                       t["_id"], t.get("_trust"), status, t["__line__"], seconds)


def write_results(answers: pd.DataFrame, visible: pd.DataFrame, key: pd.DataFrame, path: Path) -> Path:
    """A full report in Appen's layout (for the simulated crowd).

    Parameters
    ----------
    answers : pandas.DataFrame
        The simulated answers (``item_id``, ``worker_id``, ``answer``, ``submitted_at``, ...).
    visible : pandas.DataFrame
        items.csv.
    key : pandas.DataFrame
        key.csv.
    path : pathlib.Path
        The file to write.

    Returns
    -------
    pathlib.Path
    """
    units = _lower(visible).set_index("item_id")
    gold = key.set_index("item_id")
    n = len(answers)
    unit_ids = {item: 1_000_000 + i for i, item in enumerate(visible["item_id"])}
    out = pd.DataFrame({
        "_unit_id": [unit_ids[i] for i in answers["item_id"]],
        "_created_at": answers["submitted_at"].to_numpy(),
        "_golden": np.where(gold.loc[answers["item_id"], "is_trap"].to_numpy(), "true", "false"),
        "_id": np.arange(5_000_000, 5_000_000 + n),
        "_missed": "", "_started_at": answers.get("started_at", answers["submitted_at"]).to_numpy(),
        "_tainted": "false",
        "_channel": "simulated", "_trust": answers.get("trust", pd.Series([""] * n)).to_numpy(),
        "_worker_id": answers["worker_id"].to_numpy(), "_country": "", "_region": "", "_city": "",
        "_ip": "", "answer": answers["answer"].to_numpy(),
    })
    fields = units.loc[answers["item_id"]].reset_index()
    out = pd.concat([out, fields], axis=1)
    out["answer_gold"] = [e.replace(";", "\n") for e in gold.loc[answers["item_id"], "expected_shown"]]
    return atomic_write_text(path, write_delimited(out, ","))


PLATFORM = Platform("appen", "Appen (ex Figure Eight / CrowdFlower): units CSV + CML",
                    write_batch, read_results, "csv", write_results, settings=SETTINGS,
                    describe=describe_settings)
