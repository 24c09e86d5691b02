"""Toloka: tasks TSV with ``INPUT:``, ``GOLDEN:`` and ``HINT:`` columns, a project
configuration (input/output specification and the task's HTML view), and the results reader.

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
from . import ANSWER_LABELS, SHOWN_CODES, Platform, check_worker_visible
from ._common import raw_answers, read_table, write_delimited


def view_markup(visible: pd.DataFrame, k: int) -> str:
    """The task's HTML (Handlebars; triple braces as the values are escaped already)."""
    query = "query_title" if "query_title" in visible.columns else "query"
    lists = []
    for side in ("A", "B"):
        name = lambda i: f"{side}{i}_title" if f"{side}{i}_title" in visible.columns else f"{side}{i}"
        items = "".join(f"<li>{{{{{{{name(i)}}}}}}}</li>" for i in range(1, k + 1))
        lists.append(f'<div class="list"><h3>System {side}</h3><ol>{items}</ol></div>')
    options = "".join(f"{{{{field type=\"radio\" name=\"answer\" value=\"{c}\" label=\"{l}\"}}}}"
                      for c, l in ANSWER_LABELS.items())
    return (f"<h2>Query: {{{{{{{query}}}}}}}</h2><div class=\"lists\">{''.join(lists)}</div>"
            f"<p>Which system gives better results?</p>{options}")


def write_batch(visible: pd.DataFrame, key: pd.DataFrame, out_dir: Path, k: int,
                instructions: str, items_per_page: int) -> list[Path]:
    check_worker_visible(visible.columns)
    gold = key.set_index("item_id").loc[visible["item_id"]]
    tasks = visible.drop(columns=["page"]).add_prefix("INPUT:")
    # Toloka takes one golden value per task: the first accepted answer (ingest scores traps
    # against all of them from key.csv).
    tasks["GOLDEN:answer"] = [e.split(";")[0] if e else "" for e in gold["expected_shown"].fillna("")]
    tasks["HINT:text"] = np.where(gold["is_trap"].to_numpy(),
                                  "Compare how relevant the two lists are as a whole.", "")
    spec = {
        "public_name": "Which search results are better?",
        "public_instructions": instructions,
        "task_spec": {
            "input_spec": {c: {"type": "string", "required": True}
                           for c in visible.columns if c != "page"},
            "output_spec": {"answer": {"type": "string", "required": True,
                                       "allowed_values": list(SHOWN_CODES)}},
            "view_spec": {"type": "classic", "markup": view_markup(visible, k),
                          "script": "exports.Task = extend(TolokaHandlebarsTask, {});",
                          "styles": ".lists{display:flex;gap:1em}.list{flex:1}"},
        },
        "assignments_issuing_type": "AUTOMATED",
        "pool": {"mixer_config": {"real_tasks_count": max(items_per_page - 1, 1),
                                  "golden_tasks_count": 1, "training_tasks_count": 0},
                 "overlap": 1},
    }
    out_dir.mkdir(parents=True, exist_ok=True)
    return [atomic_write_text(out_dir / "tasks.tsv", write_delimited(tasks, "\t")),
            atomic_write_text(out_dir / "project.json", json.dumps(spec, indent=2) + "\n")]


def read_results(path) -> pd.DataFrame:
    t = read_table(path, "\t", ["INPUT:item_id", "OUTPUT:answer", "ASSIGNMENT:worker_id",
                                "ASSIGNMENT:assignment_id"])
    row_id = t["ASSIGNMENT:assignment_id"].astype(str) + ":" + t["INPUT:item_id"].astype(str)
    status = t.get("ASSIGNMENT:status", pd.Series([""] * len(t))).astype(str)
    status = np.where(status.str.upper() == "REJECTED", "rejected", "")
    return raw_answers(path, t["INPUT:item_id"], t["ASSIGNMENT:worker_id"], t["OUTPUT:answer"],
                       t.get("ASSIGNMENT:submitted"), row_id, None, status, t["__line__"])


def write_results(answers: pd.DataFrame, visible: pd.DataFrame, key: pd.DataFrame, path: Path) -> Path:
    fields = visible.set_index("item_id").drop(columns=["page"]).loc[answers["item_id"]].reset_index()
    out = fields.add_prefix("INPUT:")
    gold = key.set_index("item_id").loc[answers["item_id"]]
    out["OUTPUT:answer"] = answers["answer"].to_numpy()
    out["GOLDEN:answer"] = [e.split(";")[0] if e else "" for e in gold["expected_shown"].fillna("")]
    out["HINT:text"] = ""
    out["ASSIGNMENT:link"] = ""
    out["ASSIGNMENT:task_id"] = [f"task-{i}" for i in answers["item_id"]]
    out["ASSIGNMENT:assignment_id"] = answers["assignment_id"].to_numpy()
    out["ASSIGNMENT:task_suite_id"] = answers["assignment_id"].to_numpy()
    out["ASSIGNMENT:worker_id"] = answers["worker_id"].to_numpy()
    out["ASSIGNMENT:status"] = "SUBMITTED"
    out["ASSIGNMENT:started"] = answers["submitted_at"].to_numpy()
    out["ASSIGNMENT:submitted"] = answers["submitted_at"].to_numpy()
    out["ASSIGNMENT:accepted"] = ""
    out["ASSIGNMENT:reward"] = "0.03"
    return atomic_write_text(path, write_delimited(out, "\t"))


PLATFORM = Platform("toloka", "Toloka: tasks TSV (INPUT:/GOLDEN:/HINT:) + project.json",
                    write_batch, read_results, "tsv", write_results)
