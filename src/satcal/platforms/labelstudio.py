"""Label Studio: JSON tasks, a labeling configuration with ``<Choices choice="single">``, and
the export-JSON reader.

Label Studio has no gold column hidden from annotators, so trap answers stay in key.csv only.
Each task carries an ``html`` field (the two lists, pre-escaped) shown by ``<HyperText>``.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

from ..errors import InputFileError
from ..fileio import atomic_write_text
from . import ANSWER_LABELS, Platform, check_worker_visible, render_item_html
from ._common import raw_answers, read_text

LABEL_CONFIG = """<View>
  <Header value="Which system gives better results?"/>
  <HyperText name="lists" value="$html"/>
  <Choices name="answer" toName="lists" choice="single" required="true">
{choices}
  </Choices>
</View>
"""


def label_config() -> str:
    choices = "\n".join(f'    <Choice value="{label}" alias="{code}"/>' for code, label in ANSWER_LABELS.items())
    return LABEL_CONFIG.format(choices=choices)


def write_batch(visible: pd.DataFrame, key: pd.DataFrame, out_dir: Path, k: int,
                instructions: str, items_per_page: int) -> list[Path]:
    check_worker_visible(visible.columns)
    tasks = []
    for _, row in visible.iterrows():
        data = {c: (int(v) if isinstance(v, (np.integer,)) else v) for c, v in row.items()}
        data["html"] = render_item_html(row, k)
        tasks.append({"data": data})
    out_dir.mkdir(parents=True, exist_ok=True)
    return [atomic_write_text(out_dir / "tasks.json", json.dumps(tasks, indent=1) + "\n"),
            atomic_write_text(out_dir / "label_config.xml", label_config()),
            atomic_write_text(out_dir / "instructions.html", f"<div>{instructions}</div>\n")]


_LABEL_TO_CODE = {label: code for code, label in ANSWER_LABELS.items()}


def _annotator(value) -> str:
    if isinstance(value, dict):
        return str(value.get("email") or value.get("id") or "")
    return "" if value is None else str(value)


def read_results(path) -> pd.DataFrame:
    """Label Studio export JSON (a list of tasks with their annotations) -> raw answers."""
    text = read_text(path)
    try:
        tasks = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputFileError(path, f"is not valid JSON ({exc.msg}; truncated?)", exc.lineno) from None
    if not isinstance(tasks, list):
        raise InputFileError(path, "expected a JSON list of tasks (Label Studio's JSON export)")
    rows = []
    for t_index, task in enumerate(tasks, start=1):
        data = task.get("data", {}) if isinstance(task, dict) else {}
        if "item_id" not in data:
            raise InputFileError(path, f"task {t_index} has no data.item_id: was it exported from a "
                                       "satcal batch?")
        for ann in task.get("annotations", []):
            choice = ""
            for res in ann.get("result", []):
                if res.get("from_name") == "answer":
                    values = res.get("value", {}).get("choices", [])
                    choice = values[0] if values else ""
            status = "cancelled" if ann.get("was_cancelled") else ""
            rows.append((data["item_id"], _annotator(ann.get("completed_by")),
                         _LABEL_TO_CODE.get(choice, choice), ann.get("created_at", ""),
                         str(ann.get("id", "")), status, t_index))
    if not rows:
        return raw_answers(path, [], [], [])
    item, worker, answer, created, ann_id, status, line = zip(*rows)
    return raw_answers(path, item, worker, answer, created, ann_id, None, status, line)


def write_results(answers: pd.DataFrame, visible: pd.DataFrame, key: pd.DataFrame, path: Path) -> Path:
    by_item: dict[str, list] = {}
    for i, r in enumerate(answers.itertuples()):
        by_item.setdefault(r.item_id, []).append({
            "id": 9000 + i, "completed_by": r.worker_id,
            "result": [{"from_name": "answer", "to_name": "lists", "type": "choices",
                        "value": {"choices": [r.answer]}}],
            "was_cancelled": False, "created_at": r.submitted_at})
    tasks = [{"id": i + 1, "data": {"item_id": item, **{c: v for c, v in row.items() if c != "item_id"}},
              "annotations": by_item.get(item, [])}
             for i, (item, row) in enumerate(visible.set_index("item_id").astype(str).iterrows())]
    return atomic_write_text(path, json.dumps(tasks, indent=1) + "\n")


PLATFORM = Platform("labelstudio", "Label Studio: JSON tasks + labeling config",
                    write_batch, read_results, "json", write_results)
