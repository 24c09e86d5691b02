"""Toloka: the project, the pool and the tasks as Toloka's API (and toloka-kit) takes them, a
tasks TSV for the web interface, and the results reader.

``project.json`` (task spec, classic view with its script and settings, instructions),
``pool.json`` (overlap = answers per example, control tasks mixed into each task suite as
many as bring a worker to the trap rule's count within ``suites_per_worker`` suites, a
golden-set quality rule, a limit of ``suites_per_worker`` suites a worker; add ``project_id``
and ``will_expire`` when you create it),
``tasks.json`` (input values, known solutions of the traps: control tasks, no hints) and
``tasks.tsv`` (``INPUT:`` and ``GOLDEN:`` columns).

Results TSV: ``INPUT:...``, ``OUTPUT:answer``, ``GOLDEN:answer``, ``ASSIGNMENT:worker_id``,
``ASSIGNMENT:assignment_id``, ``ASSIGNMENT:status``, ``ASSIGNMENT:submitted`` ... One row per
task; a task suite (assignment) holds several tasks, so a row is identified by assignment id
and item id together.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

from ..fileio import atomic_write_text
from .base import (ANSWER_LABELS, SHOWN_CODES, Platform, Setting, TrapCount, check_worker_visible, trap_count_line,
                   traps_a_page)
from ._common import raw_answers, read_table, unfinished, write_delimited


def view_markup(visible: pd.DataFrame, k: int) -> str:
    """The task's HTML (Handlebars; triple braces as the values are escaped already).

    Parameters
    ----------
    visible : pandas.DataFrame
        items.csv.
    k : int
        List length.

    Returns
    -------
    str
    """
    query = "query_title" if "query_title" in visible.columns else "query"
    lists = []
    for side in ("A", "B"):
        name = lambda i: f"{side}{i}_title" if f"{side}{i}_title" in visible.columns else f"{side}{i}"
        items = "".join(f"<li>{{{{{{{name(i)}}}}}}}</li>" for i in range(1, k + 1))
        lists.append(f'<div class="list"><h3>System {side}</h3><ol>{items}</ol></div>')
    options = "".join(f"{{{{field type=\"radio\" name=\"answer\" value=\"{c}\" label=\"{l}\"}}}}"
                      for c, l in ANSWER_LABELS.items())
    description = ("<p>{{{query_description}}}</p>" if "query_description" in visible.columns else "")
    return (f"<h2>Query: {{{{{{{query}}}}}}}</h2>{description}<div class=\"lists\">{''.join(lists)}</div>"
            f"<p>Which system gives better results?</p>{options}")


#: Toloka's classic task view script: the template's own (``extend`` is defined there).
VIEW_SCRIPT = """exports.Task = extend(TolokaHandlebarsTask, function (options) {
  TolokaHandlebarsTask.call(this, options);
}, {
  onRender: function () {},
  onDestroy: function () {}
});

function extend(ParentClass, constructorFunction, prototypeHash) {
  constructorFunction = constructorFunction || function () {};
  prototypeHash = prototypeHash || {};
  if (ParentClass) {
    constructorFunction.prototype = Object.create(ParentClass.prototype);
  }
  for (var i in prototypeHash) {
    constructorFunction.prototype[i] = prototypeHash[i];
  }
  return constructorFunction;
}
"""
VIEW_STYLES = ".lists{display:flex;gap:1.5em;align-items:flex-start}.list{flex:1 1 0;min-width:0}"
#: The researcher's pool settings, ``[platforms.toloka]`` in study.toml. Workers whose share of
#: correct control tasks falls under ``control_min_accuracy`` (after ``control_min_answers``)
#: are restricted from the project: for ``restriction_days`` ("temporary", the default: a worker
#: a bad trap failed can come back), for good ("permanent") or not at all ("none"). satcal's own
#: trust threshold applies at ingest either way.
SETTINGS = (
    Setting("reward_per_assignment", 0.05, (int, float), lambda v: 0 < v <= 1000, "a positive amount in USD",
            "USD per task suite: one page of items_per_page comparisons of two ranked lists; price the time a page takes"),
    Setting("assignment_max_duration_seconds", 600, int, lambda v: 60 <= v <= 86400,
            "seconds from 60 to 86,400", "time a worker has for one task suite"),
    Setting("control_tasks_per_suite", "auto", (int, str), lambda v: v == "auto" or (
                isinstance(v, int) and not isinstance(v, bool) and 0 <= v <= 100), 'an integer from 0 to 100 or "auto"',
            "traps (control tasks) mixed into each task suite; auto: as many as bring a worker to the trap "
            "rule's count ([quality] trap_power) within suites_per_worker suites"),
    Setting("suites_per_worker", 10, int, lambda v: 0 <= v <= 100_000, "an integer from 0 to 100,000",
            "task suites one worker may do (then restricted from the pool: a quality rule on submitted "
            "suites; 0: no limit, and auto gives one control task a suite)"),
    # 5, as [quality] min_traps: after 3, one honest slip (67%) falls under 70% and restricts
    Setting("control_min_answers", 5, int, lambda v: 1 <= v <= 1000, "an integer from 1 to 1,000",
            "control tasks a worker answers before the quality rule judges them"),
    Setting("control_min_accuracy", 70, (int, float), lambda v: 0 <= v <= 100, "a percentage from 0 to 100",
            "restrict workers with a lower percentage of correct control tasks"),
    Setting("control_history_size", 10, int, lambda v: 1 <= v <= 1000, "an integer from 1 to 1,000",
            "the most recent control tasks the rule counts"),
    Setting("restriction", "temporary", str, lambda v: v in ("temporary", "permanent", "none"),
            "temporary, permanent or none",
            "what the quality rule does to such workers: temporary (restriction_days), permanent, or none"),
    Setting("restriction_days", 7, int, lambda v: 1 <= v <= 365, "an integer from 1 to 365",
            "length of a temporary restriction"),
)
DEFAULTS = {s.name: s.default for s in SETTINGS}


def project_json(visible: pd.DataFrame, k: int, instructions: str) -> dict:
    """The Toloka project (API / toloka-kit ``Project``): task spec, classic view with its
    settings, instructions.

    Parameters
    ----------
    visible : pandas.DataFrame
        items.csv.
    k : int
        List length.
    instructions : str
        The instructions text.

    Returns
    -------
    dict
    """
    fields = [c for c in visible.columns if c != "page"]
    always = {c: bool((visible[c].astype(str) != "").all()) for c in fields}
    return {
        "public_name": "Which search results are better?",
        "public_description": "Compare the results of two search systems for a query and say which is better.",
        "public_instructions": instructions,
        "assignments_issuing_type": "AUTOMATED",
        "task_spec": {
            # required only where every task has a value: Toloka refuses an empty required field
            "input_spec": {c: {"type": "string", "required": always[c], "hidden": False} for c in fields},
            "output_spec": {"answer": {"type": "string", "required": True, "hidden": False,
                                       "allowed_values": list(SHOWN_CODES)}},
            "view_spec": {"type": "classic", "markup": view_markup(visible, k), "script": VIEW_SCRIPT,
                          "styles": VIEW_STYLES, "assets": {"script_urls": ["$TOLOKA_ASSETS/js/toloka-handlebars-templates.js"]},
                          "settings": {"showSkip": True, "showTimer": True, "showTitle": True, "showSubmit": True,
                                       "showFullscreen": True, "showInstructions": True, "showFinish": True,
                                       "showMessage": True, "showReward": True}},
        },
    }


def control_tasks(settings: dict | None, items_per_page: int, needed: int | None) -> int:
    """Control tasks in each task suite: ``control_tasks_per_suite``, or with ``"auto"``
    :func:`satcal.platforms.base.traps_a_page` of the trap rule's count over
    ``suites_per_worker`` suites.

    Parameters
    ----------
    settings : dict or None
        ``[platforms.toloka]``; None (or a missing key) takes the defaults.
    items_per_page : int
        Items in a task suite.
    needed : int or None
        The trap rule's count (:class:`satcal.platforms.base.TrapCount`).

    Returns
    -------
    int
    """
    s = {**DEFAULTS, **(settings or {})}
    if s["control_tasks_per_suite"] != "auto":
        return int(s["control_tasks_per_suite"])
    return traps_a_page(needed, s["suites_per_worker"], items_per_page)


def pool_json(items_per_page: int, answers_per_example: int, n_traps: int, settings: dict | None = None,
              needed: int | None = None) -> dict:
    """The Toloka pool (API / toloka-kit ``Pool``), without ``project_id`` and ``will_expire``,
    which only exist once the project is created and the pool is opened: each task suite mixes
    :func:`control_tasks` control tasks (traps, with their known solutions) into the real
    tasks, every task is given to ``answers_per_example`` workers, workers failing the control
    tasks are restricted as ``settings`` (``[platforms.toloka]``, see ``SETTINGS``) say, and a
    worker who has submitted ``suites_per_worker`` suites is restricted from the pool (Toloka's
    "submitted answers" rule, an ``ANSWER_COUNT`` collector), so that the control tasks
    ``"auto"`` spreads over those suites reach the trap rule's count.

    Parameters
    ----------
    items_per_page : int
        Items in a task suite.
    answers_per_example : int
        Workers per task (the overlap).
    n_traps : int
        Traps in the batch.
    settings : dict or None, optional
        ``[platforms.toloka]``; None (or a missing key) takes the defaults.
    needed : int or None, optional
        The trap rule's count (traps a worker must meet); None: one control task a suite
        under ``"auto"``.

    Returns
    -------
    dict
    """
    s = {**DEFAULTS, **(settings or {})}
    golden = control_tasks(s, items_per_page, needed) if n_traps else 0
    if s["restriction"] == "temporary":
        duration = {"duration": s["restriction_days"], "duration_unit": "DAYS"}
    else:
        duration = {"duration_unit": "PERMANENT"}
    rules = [{"conditions": [{"key": "total_answers_count", "operator": "GTE", "value": s["control_min_answers"]},
                             {"key": "correct_answers_rate", "operator": "LT", "value": s["control_min_accuracy"]}],
              "action": {"type": "RESTRICTION_V2",
                         "parameters": {"scope": "PROJECT", **duration,
                                        "private_comment": "control tasks (traps) failed"}}}]
    configs = [{
        "collector_config": {"type": "GOLDEN_SET", "parameters": {"history_size": s["control_history_size"]}},
        "rules": rules,
    }] if golden and s["restriction"] != "none" else []
    if s["suites_per_worker"]:  # each worker's share: the suites over which auto spreads the traps
        configs.append({"collector_config": {"type": "ANSWER_COUNT"},
                        "rules": [{"conditions": [{"key": "assignments_accepted_count", "operator": "GTE",
                                                   "value": s["suites_per_worker"]}],
                                   "action": {"type": "RESTRICTION_V2",
                                              "parameters": {"scope": "POOL", "duration_unit": "PERMANENT",
                                                             "private_comment": "did suites_per_worker task suites"}}}]})
    return {
        "private_name": "satcal batch",
        "may_contain_adult_content": False,
        "reward_per_assignment": s["reward_per_assignment"],
        "assignment_max_duration_seconds": s["assignment_max_duration_seconds"],
        "auto_accept_solutions": True,
        "defaults": {"default_overlap_for_new_task_suites": answers_per_example,
                     "default_overlap_for_new_tasks": answers_per_example},
        "mixer_config": {"real_tasks_count": max(items_per_page - golden, 1), "golden_tasks_count": golden,
                         "training_tasks_count": 0},
        "quality_control": {"configs": configs},
    }


def describe_settings(settings: dict, items_per_page: int, answers_per_example: int,
                      traps: TrapCount | None = None) -> str:
    """One line of what the exported pool does, for export to print: reward, control tasks and
    where a worker meets the trap rule's count, overlap, quality rule.

    Parameters
    ----------
    settings : dict
        ``[platforms.<name>]`` of study.toml (missing keys take the defaults).
    items_per_page : int
        Items on one page.
    answers_per_example : int
        Workers answering each item.
    traps : TrapCount or None, optional
        The trap rule's count for the batch; None: not known (auto then gives 1 a suite).

    Returns
    -------
    str
    """
    s = {**DEFAULTS, **(settings or {})}
    needed = traps.needed if traps is not None else None
    no_traps = traps is not None and not traps.in_batch
    golden = 0 if no_traps else control_tasks(s, items_per_page, needed)   # as pool_settings writes it
    limit = (f"at most {s['suites_per_worker']} task suites a worker" if s["suites_per_worker"]
             else "no limit of task suites a worker")
    auto = traps_a_page(needed, s["suites_per_worker"], items_per_page)
    where = trap_count_line(needed, golden, s["suites_per_worker"], available=traps.in_batch, page="task suite",
                            platform="Toloka", keys=("suites_per_worker", "control_tasks_per_suite"), auto=auto,
                            fix=traps.fix) \
        if traps is not None and golden else ("no control tasks: the batch has no traps" if no_traps else "no control tasks")
    per_item = s["reward_per_assignment"] / max(items_per_page, 1)
    rule = ("no quality rule" if s["restriction"] == "none" else
            f"workers under {s['control_min_accuracy']}% correct after {s['control_min_answers']} control "
            f"tasks restricted {'for ' + str(s['restriction_days']) + ' days' if s['restriction'] == 'temporary' else 'permanently'}")
    said = " (auto)" if s["control_tasks_per_suite"] == "auto" else ""
    return (f"reward {s['reward_per_assignment']} USD per task suite of {items_per_page} items "
            f"({per_item:.4g} an item), {golden} control task(s) a suite{said}, {limit}: {where}; overlap "
            f"{answers_per_example} ([design] answers_per_example), {rule}")


def write_batch(visible: pd.DataFrame, key: pd.DataFrame, out_dir: Path, k: int,
                instructions: str, items_per_page: int, answers_per_example: int = 1,
                settings: dict | None = None, traps: TrapCount | None = None) -> list[Path]:
    """Toloka's files: ``tasks.tsv`` and ``tasks.json`` (traps as control tasks),
    ``project.json`` and ``pool.json``.

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
        The trap rule's count for the batch (control tasks under ``"auto"``).

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
    gold = key.set_index("item_id").loc[visible["item_id"]]
    expected = gold["expected_shown"].fillna("").astype(str).to_numpy()
    fields = visible.drop(columns=["page"])
    # Control tasks carry GOLDEN: values and no HINT: (a hint would make them training tasks).
    # The TSV takes one golden value; tasks.json keeps every accepted answer.
    tasks_tsv = fields.add_prefix("INPUT:")
    tasks_tsv["GOLDEN:answer"] = [e.split(";")[0] if e else "" for e in expected]
    tasks = [{"input_values": values, "overlap": answers_per_example, "infinite_overlap": False,
              **({"known_solutions": [{"output_values": {"answer": code}, "correctness_weight": 1}
                                      for code in e.split(";")]} if e else {})}
             for values, e in zip(fields.astype(str).to_dict("records"), expected)]
    out_dir.mkdir(parents=True, exist_ok=True)
    return [atomic_write_text(out_dir / "tasks.tsv", write_delimited(tasks_tsv, "\t")),
            atomic_write_text(out_dir / "tasks.json", json.dumps(tasks, indent=1) + "\n"),
            atomic_write_text(out_dir / "project.json", json.dumps(project_json(visible, k, instructions), indent=2) + "\n"),
            atomic_write_text(out_dir / "pool.json", json.dumps(pool_json(items_per_page, answers_per_example,
                                                                           int(gold["is_trap"].sum()), settings,
                                                                           traps.needed if traps else None),
                                                                 indent=2) + "\n")]


#: Assignment statuses of a results download; an accepted or submitted one is an answer.
STATUS_REASONS = {"ACCEPTED": "", "SUBMITTED": "", "APPROVED": "", "REJECTED": "rejected",
                  "EXPIRED": "expired", "SKIPPED": "skipped", "ACTIVE": "not submitted"}


def read_results(path) -> pd.DataFrame:
    """Toloka's results TSV -> raw answers (assignment status as the reject reason, seconds
    from started to submitted when both are there).

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
    t = read_table(path, "\t", ["INPUT:item_id", "OUTPUT:answer", "ASSIGNMENT:worker_id",
                                "ASSIGNMENT:assignment_id"],
                   expected="Toloka's results TSV (INPUT:item_id, OUTPUT:answer, ASSIGNMENT:worker_id, "
                            "ASSIGNMENT:assignment_id, ...)")
    row_id = t["ASSIGNMENT:assignment_id"].astype(str) + ":" + t["INPUT:item_id"].astype(str)
    status = t.get("ASSIGNMENT:status", pd.Series([""] * len(t), index=t.index)).astype(str).str.strip().str.upper()
    status = status.map(lambda v: STATUS_REASONS.get(v, f"assignment status {v}") if v else "")
    # the default download has ASSIGNMENT:started but not always ASSIGNMENT:submitted
    started = t.get("ASSIGNMENT:started")
    submitted = t.get("ASSIGNMENT:submitted")
    when = submitted if submitted is not None else started
    seconds = None
    if started is not None and submitted is not None:
        seconds = (pd.to_datetime(submitted, errors="coerce", utc=True, format="mixed")
                   - pd.to_datetime(started, errors="coerce", utc=True, format="mixed")).dt.total_seconds()
    return raw_answers(path, t["INPUT:item_id"], t["ASSIGNMENT:worker_id"], t["OUTPUT:answer"],
                       when, row_id, None, status, t["__line__"], seconds)


def write_results(answers: pd.DataFrame, visible: pd.DataFrame, key: pd.DataFrame, path: Path) -> Path:
    """A results TSV in Toloka's layout (for the simulated crowd); unfinished pages are
    expired or skipped assignments.

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
    fields = visible.set_index("item_id").drop(columns=["page"]).loc[answers["item_id"]].reset_index()
    out = fields.add_prefix("INPUT:")
    gold = key.set_index("item_id").loc[answers["item_id"]]
    out["OUTPUT:answer"] = answers["answer"].to_numpy()
    out["GOLDEN:answer"] = [e.split(";")[0] if e else "" for e in gold["expected_shown"].fillna("")]
    out["ASSIGNMENT:link"] = ""
    out["ASSIGNMENT:task_id"] = [f"task-{i}" for i in answers["item_id"]]
    out["ASSIGNMENT:assignment_id"] = answers["assignment_id"].to_numpy()
    out["ASSIGNMENT:task_suite_id"] = answers["assignment_id"].to_numpy()
    out["ASSIGNMENT:worker_id"] = answers["worker_id"].to_numpy()
    # pages left unfinished: Toloka reports them as expired (time ran out) or skipped
    left = np.flatnonzero(unfinished(answers))
    status = np.full(len(answers), "SUBMITTED", dtype=object)
    status[left] = np.where(np.arange(left.size) % 2 == 0, "EXPIRED", "SKIPPED")
    out["ASSIGNMENT:status"] = status
    out["ASSIGNMENT:started"] = answers.get("started_at", answers["submitted_at"]).to_numpy()
    out["ASSIGNMENT:submitted"] = answers["submitted_at"].to_numpy()
    out["ASSIGNMENT:accepted"] = ""
    out["ASSIGNMENT:reward"] = "0.03"
    return atomic_write_text(path, write_delimited(out, "\t"))


PLATFORM = Platform("toloka", "Toloka: tasks TSV (INPUT:/GOLDEN:/HINT:) + project.json",
                    write_batch, read_results, "tsv", write_results, reports_unfinished=True,
                    settings=SETTINGS, describe=describe_settings)
