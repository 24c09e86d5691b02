"""Appen (ex Figure Eight / CrowdFlower): units CSV with gold columns, a CML job template, and
the full-report reader.

Units: the worker-visible fields, ``_golden`` (TRUE for traps), ``answer_gold`` (the accepted
answers in the shown orientation, one per line) and ``answer_gold_reason``. Appen uses the gold
columns to score workers and never shows them in the task.

Full report: ``_unit_id,_created_at,_golden,_id,_missed,_started_at,_tainted,_channel,_trust,
_worker_id,...`` then the job's output (``answer``) and unit fields.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from ..fileio import atomic_write_text
from . import ANSWER_LABELS, Platform, check_worker_visible
from ._common import raw_answers, read_table, write_delimited

REPORT_COLUMNS = ["_unit_id", "_created_at", "_golden", "_id", "_missed", "_started_at", "_tainted",
                  "_channel", "_trust", "_worker_id", "_country", "_region", "_city", "_ip"]


def _field(visible: pd.DataFrame, side: str, i: int) -> str:
    return f"{side}{i}_title" if f"{side}{i}_title" in visible.columns else f"{side}{i}"


def cml_template(visible: pd.DataFrame, k: int) -> str:
    """The job's CML: both lists side by side and a required 4-way ``cml:radios`` (gold)."""
    query = "query_title" if "query_title" in visible.columns else "query"
    lists = []
    for side in ("A", "B"):
        items = []
        for i in range(1, k + 1):
            extra = ""
            if f"{side}{i}_snippet" in visible.columns:
                extra += f'<div class="snippet">{{{{{side}{i}_snippet}}}}</div>'
            if f"{side}{i}_audio_url" in visible.columns:
                extra += f'<audio controls preload="none" src="{{{{{side}{i}_audio_url}}}}"></audio>'
            items.append(f"      <li>{{{{{_field(visible, side, i)}}}}}{extra}</li>")
        lists.append(f'  <div class="list">\n    <h3>System {side}</h3>\n    <ol>\n'
                     + "\n".join(items) + "\n    </ol>\n  </div>")
    radios = "\n".join(f'  <cml:radio label="{label}" value="{code}" />'
                       for code, label in ANSWER_LABELS.items())
    return (f'<h2>Query: {{{{{query}}}}}</h2>\n<div class="lists">\n' + "\n".join(lists) + "\n</div>\n"
            '<cml:radios label="Which system gives better results?" name="answer" '
            'validates="required" gold="true">\n' + radios + "\n</cml:radios>\n")


def write_batch(visible: pd.DataFrame, key: pd.DataFrame, out_dir: Path, k: int,
                instructions: str, items_per_page: int) -> list[Path]:
    check_worker_visible(visible.columns)
    units = visible.copy()
    golden = key.set_index("item_id").loc[units["item_id"]]
    units["_golden"] = np.where(golden["is_trap"].to_numpy(), "TRUE", "FALSE")
    units["answer_gold"] = [e.replace(";", "\n") for e in golden["expected_shown"].fillna("")]
    units["answer_gold_reason"] = np.where(golden["is_trap"].to_numpy(),
                                           "The relevance of the two lists makes this answer clear.", "")
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = [atomic_write_text(out_dir / "units.csv", write_delimited(units, ",")),
             atomic_write_text(out_dir / "job.cml", cml_template(visible, k)),
             atomic_write_text(out_dir / "instructions.html", f"<div>{instructions}</div>\n"),
             atomic_write_text(out_dir / "job-settings.txt",
                               f"units_per_assignment = {items_per_page}\n"
                               "judgments_per_unit = 1\n"
                               "# Upload units.csv, paste job.cml into the CML editor and\n"
                               "# instructions.html into the instructions; answer_gold columns are\n"
                               "# Appen's test questions and are never shown to workers.\n")]
    return paths


def read_results(path) -> pd.DataFrame:
    """Appen full report -> raw answers (platform trust kept; tainted rows flagged)."""
    t = read_table(path, ",", ["_unit_id", "_id", "_worker_id", "answer", "item_id"])
    status = np.where(t.get("_tainted", pd.Series([""] * len(t))).astype(str).str.lower() == "true",
                      "tainted", "")
    return raw_answers(path, t["item_id"], t["_worker_id"], t["answer"], t.get("_created_at"),
                       t["_id"], t.get("_trust"), status, t["__line__"])


def write_results(answers: pd.DataFrame, visible: pd.DataFrame, key: pd.DataFrame, path: Path) -> Path:
    """A full report in Appen's layout (for the simulated crowd)."""
    units = visible.set_index("item_id")
    gold = key.set_index("item_id")
    n = len(answers)
    unit_ids = {item: 1_000_000 + i for i, item in enumerate(visible["item_id"])}
    out = pd.DataFrame({
        "_unit_id": [unit_ids[i] for i in answers["item_id"]],
        "_created_at": answers["submitted_at"].to_numpy(),
        "_golden": np.where(gold.loc[answers["item_id"], "is_trap"].to_numpy(), "true", "false"),
        "_id": np.arange(5_000_000, 5_000_000 + n),
        "_missed": "", "_started_at": answers["submitted_at"].to_numpy(), "_tainted": "false",
        "_channel": "simulated", "_trust": answers.get("trust", pd.Series([""] * n)).to_numpy(),
        "_worker_id": answers["worker_id"].to_numpy(), "_country": "", "_region": "", "_city": "",
        "_ip": "", "answer": answers["answer"].to_numpy(),
    })
    fields = units.loc[answers["item_id"]].reset_index()
    out = pd.concat([out, fields], axis=1)
    out["answer_gold"] = [e.replace(";", "\n") for e in gold.loc[answers["item_id"], "expected_shown"]]
    return atomic_write_text(path, write_delimited(out, ","))


PLATFORM = Platform("appen", "Appen (ex Figure Eight / CrowdFlower): units CSV + CML",
                    write_batch, read_results, "csv", write_results)
