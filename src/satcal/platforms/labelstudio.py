"""Label Studio: JSON tasks, a labeling configuration with ``<Choices choice="single">``, and
the export-JSON reader.

Label Studio has no gold column hidden from annotators, so trap answers stay in key.csv only.
Each task carries an ``html`` field shown by ``<HyperText>``: the query and the two lists side by
side (pre-escaped, layout in style attributes), without answer controls: the only controls are
the labeling config's ``<Choices>``. ``project.json`` holds the project settings (title, config,
instructions, annotations per task) as label-studio-sdk's ``projects.create`` takes them.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

from ..errors import InputFileError
from ..fileio import atomic_write_text
from . import (ANSWER_LABELS, Platform, Setting, check_worker_visible, render_instructions_html,
               render_lists_html)
from ._common import raw_answers, read_text, unfinished

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


#: The researcher's project settings, ``[platforms.labelstudio]`` in study.toml (project.json;
#: maximum_annotations is [design] answers_per_example).
SETTINGS = (
    Setting("overlap_cohort_percentage", 100, int, lambda v: 1 <= v <= 100, "an integer from 1 to 100",
            "percentage of tasks given to maximum_annotations annotators (the rest get one)"),
    Setting("show_skip_button", False, bool, None, "true or false", "let annotators skip a task"),
    Setting("show_instruction", True, bool, None, "true or false", "show the instructions before the tasks"),
)
DEFAULTS = {s.name: s.default for s in SETTINGS}


def describe_settings(settings: dict, items_per_page: int, answers_per_example: int) -> str:
    """One line of the project settings, for export to print."""
    s = {**DEFAULTS, **(settings or {})}
    return (f"maximum_annotations {answers_per_example} ([design] answers_per_example) on "
            f"{s['overlap_cohort_percentage']}% of tasks, skip button {'shown' if s['show_skip_button'] else 'hidden'}, "
            f"instructions {'shown' if s['show_instruction'] else 'hidden'}")


def write_batch(visible: pd.DataFrame, key: pd.DataFrame, out_dir: Path, k: int,
                instructions: str, items_per_page: int, answers_per_example: int = 1,
                settings: dict | None = None) -> list[Path]:
    s = {**DEFAULTS, **(settings or {})}
    check_worker_visible(visible.columns)
    tasks = []
    for _, row in visible.iterrows():
        data = {c: (int(v) if isinstance(v, (np.integer,)) else v) for c, v in row.items()}
        data["html"] = render_lists_html(row, k, inline_style=True)
        tasks.append({"data": data})
    project = {"title": "Which search results are better?", "label_config": label_config(),
               "expert_instruction": render_instructions_html(instructions),
               "show_instruction": s["show_instruction"], "show_skip_button": s["show_skip_button"],
               "maximum_annotations": answers_per_example,
               "overlap_cohort_percentage": s["overlap_cohort_percentage"], "show_ground_truth_first": False}
    out_dir.mkdir(parents=True, exist_ok=True)
    return [atomic_write_text(out_dir / "tasks.json", json.dumps(tasks, indent=1) + "\n"),
            atomic_write_text(out_dir / "label_config.xml", label_config()),
            atomic_write_text(out_dir / "project.json", json.dumps(project, indent=1) + "\n"),
            atomic_write_text(out_dir / "instructions.html", render_instructions_html(instructions) + "\n")]


_LABEL_TO_CODE = {label: code for code, label in ANSWER_LABELS.items()}


def _annotator(value) -> str:
    """One id per person: Label Studio gives ``completed_by`` as a user id, or as a user
    object with ``id`` and ``email`` depending on the export; the id is used either way."""
    if isinstance(value, dict):
        return str(value.get("id") if value.get("id") is not None else value.get("email") or "")
    return "" if value is None else str(value)


def _choice(ann: dict) -> tuple[str, str]:
    """(choice, problem) of one annotation; a problem makes the row a reject with that reason."""
    results = ann.get("result") or []
    if not isinstance(results, list):
        return "", "malformed annotation: result is not a list"
    chosen = []
    for res in results:
        if not isinstance(res, dict) or res.get("from_name") != "answer":
            continue
        value = res.get("value")
        choices = value.get("choices") if isinstance(value, dict) else value
        if isinstance(choices, str):
            choices = [choices]
        if not isinstance(choices, list) or not all(isinstance(c, str) for c in choices):
            return "", "malformed annotation: choices is not a list of labels"
        chosen.extend(choices)
    if len(chosen) > 1:
        return "", f"several answers in one annotation ({', '.join(chosen)})"
    return (chosen[0] if chosen else ""), ""


def read_results(path) -> pd.DataFrame:
    """Label Studio export JSON (a list of tasks with their annotations) -> raw answers.

    Every annotation is a row. Cancelled (skipped) annotations, ground-truth annotations (a
    reviewer's reference, not a worker's answer) and malformed ones become rejects with the
    reason; nothing is dropped.
    """
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
        if not isinstance(data, dict) or "item_id" not in data:
            raise InputFileError(path, f"task {t_index} has no data.item_id: was it exported from a "
                                       "satcal batch?")
        annotations = task.get("annotations")
        if annotations is None:
            continue  # a task nobody annotated
        if isinstance(annotations, dict):
            annotations = [annotations]
        if not isinstance(annotations, list):
            rows.append((data["item_id"], "", "", "", "", "malformed task: annotations is not a list",
                         t_index))
            continue
        for a_index, ann in enumerate(annotations):
            if not isinstance(ann, dict):
                rows.append((data["item_id"], "", "", "", f"{t_index}.{a_index + 1}",
                             "malformed annotation: not an object", t_index))
                continue
            choice, problem = _choice(ann)
            status = (problem or ("cancelled" if ann.get("was_cancelled") else "")
                      or ("ground truth (a reviewer's reference answer)" if ann.get("ground_truth") else ""))
            rows.append((data["item_id"], _annotator(ann.get("completed_by")),
                         _LABEL_TO_CODE.get(choice, choice), str(ann.get("created_at") or ""),
                         str(ann.get("id", "")), status, t_index))
    if not rows:
        return raw_answers(path, [], [], [])
    item, worker, answer, created, ann_id, status, line = zip(*rows)
    return raw_answers(path, item, worker, answer, created, ann_id, None, status, line)


def write_results(answers: pd.DataFrame, visible: pd.DataFrame, key: pd.DataFrame, path: Path) -> Path:
    """An export in Label Studio's JSON layout (for the simulated crowd): a page left unfinished
    is a cancelled annotation, and each trap carries the researcher's ground-truth annotation,
    as a reviewer who marks reference answers leaves it."""
    by_item: dict[str, list] = {}
    abandoned = unfinished(answers)
    for i, (r, left) in enumerate(zip(answers.itertuples(), abandoned)):
        result = [] if left else [{"from_name": "answer", "to_name": "lists", "type": "choices",
                                   "value": {"choices": [r.answer]}}]
        by_item.setdefault(r.item_id, []).append({
            "id": 9000 + i, "completed_by": r.worker_id, "result": result,
            "was_cancelled": bool(left), "ground_truth": False, "created_at": r.submitted_at})
    gold = key.set_index("item_id")
    for j, (item, expected) in enumerate(gold.loc[gold["is_trap"].astype(str) == "True", "expected_shown"].items()):
        by_item.setdefault(item, []).append({
            "id": 1000 + j, "completed_by": "researcher", "ground_truth": True, "was_cancelled": False,
            "result": [{"from_name": "answer", "to_name": "lists", "type": "choices",
                        "value": {"choices": [str(expected).split(";")[0]]}}], "created_at": ""})
    tasks = [{"id": i + 1, "data": {"item_id": item, **{c: v for c, v in row.items() if c != "item_id"}},
              "annotations": by_item.get(item, [])}
             for i, (item, row) in enumerate(visible.set_index("item_id").astype(str).iterrows())]
    return atomic_write_text(path, json.dumps(tasks, indent=1) + "\n")


PLATFORM = Platform("labelstudio", "Label Studio: JSON tasks + labeling config",
                    write_batch, read_results, "json", write_results, reports_unfinished=True,
                    settings=SETTINGS, describe=describe_settings)
