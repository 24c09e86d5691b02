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
from .base import (ANSWER_LABELS, Platform, Setting, TrapCount, check_worker_visible, render_instructions_html,
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


def describe_settings(settings: dict, items_per_page: int, answers_per_example: int,
                      traps: TrapCount | None = None) -> str:
    """One line of the project settings, for export to print, and what Label Studio cannot do
    with traps: it has no test questions, so the traps are tasks like the others and an
    annotator meets them in proportion to the tasks they annotate.

    Parameters
    ----------
    settings : dict
        ``[platforms.<name>]`` of study.toml (missing keys take the defaults).
    items_per_page : int
        Items on one page.
    answers_per_example : int
        Workers answering each item.
    traps : TrapCount or None, optional
        The trap rule's count for the batch; None: not stated.

    Returns
    -------
    str
    """
    s = {**DEFAULTS, **(settings or {})}
    line = (f"maximum_annotations {answers_per_example} ([design] answers_per_example) on "
            f"{s['overlap_cohort_percentage']}% of tasks, skip button {'shown' if s['show_skip_button'] else 'hidden'}, "
            f"instructions {'shown' if s['show_instruction'] else 'hidden'}")
    if traps is None or not traps.in_batch:
        return line
    every = traps.items / traps.in_batch
    rule = (f"the trap rule's {traps.needed} only after about {traps.needed * every:.0f} tasks"
            if traps.needed is not None else "no count of them is enough for the trap rule")
    return (f"{line}; Label Studio cannot set how many traps an annotator meets: its {traps.in_batch} traps are "
            f"tasks like the others, about one in {every:.0f} of the {traps.items}, so an annotator meets {rule} "
            "(one who does fewer is scored on fewer, and under [quality] min_traps not at all)")


def write_batch(visible: pd.DataFrame, key: pd.DataFrame, out_dir: Path, k: int,
                instructions: str, items_per_page: int, answers_per_example: int = 1,
                settings: dict | None = None) -> list[Path]:
    """Label Studio's project files: ``tasks.json``, ``label_config.xml``, ``project.json``
    and ``instructions.html``.

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

    Returns
    -------
    list of pathlib.Path
        The files written.

    Raises
    ------
    AssertionError
        ``visible`` has a key column (:func:`satcal.platforms.base.check_worker_visible`).
    """
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
        return _scalar(value.get("id") if value.get("id") is not None else value.get("email") or "")
    return _scalar(value)


def _choice(ann: dict) -> tuple[str, str]:
    """(choice, problem) of one annotation; a problem makes the row a reject with that reason."""
    results = ann.get("result") or []
    if not isinstance(results, list):
        return "", "malformed annotation: result is not a list"
    chosen = []
    for res in results:
        if not isinstance(res, dict) or res.get("from_name") != CONTROL:
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


#: What the reader accepts, named in its errors.
LAYOUTS = ("Label Studio's JSON export (a list of tasks with data.item_id and annotations, or "
           "completions before Label Studio 1.0), JSON-MIN (flat records with item_id and answer), "
           "or its CSV / TSV export (columns item_id, annotator, annotation_id, answer)")


def read_results(path) -> pd.DataFrame:
    """A Label Studio export -> raw answers, in any of its layouts.

    - JSON (a list of tasks, or one task): each task's ``annotations`` (``completions`` in
      Label Studio before 1.0, and in some exports since). Every annotation is a row.
      Cancelled (skipped) annotations, ground-truth annotations (a reviewer's reference, not a
      worker's answer) and malformed ones become rejects with the reason; nothing is dropped.
    - JSON-MIN: one flat record per annotation (the task's data, then the choice under the
      control's name ``answer``, ``annotator``, ``annotation_id``, ``created_at``,
      ``lead_time``); a task nobody annotated is a record without an answer.
    - CSV / TSV: the JSON-MIN records as a table.

    JSON-MIN and CSV leave cancelled annotations out and do not mark ground-truth ones: a
    reviewer's reference answer there reads as an answer (a warning says so). A file with
    content but no annotation at all is an error, never an empty read.

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
    suffix = str(path).lower().rsplit(".", 1)[-1]
    if suffix in ("csv", "tsv"):
        return _read_table_export(path, "\t" if suffix == "tsv" else None)
    text = read_text(path)
    if not text.strip():
        raise InputFileError(path, f"is empty: expected {LAYOUTS}")
    try:
        tasks = json.loads(text)
    except json.JSONDecodeError as exc:
        if exc.msg == "Extra data" and text.lstrip().startswith("{"):
            raise InputFileError(path, "holds one JSON object per line (JSON lines, as Appen's JSON report), "
                                       f"which Label Studio does not export: expected {LAYOUTS}; for Appen, "
                                       "give the full report as CSV (--platform appen)", exc.lineno) from None
        raise InputFileError(path, f"is not valid JSON ({exc.msg}; truncated?)", exc.lineno) from None
    except RecursionError:
        raise InputFileError(path, "is JSON nested too deeply to be a Label Studio export") from None
    except ValueError as exc:  # e.g. a number too long to convert
        raise InputFileError(path, f"is not JSON that can be read ({str(exc).splitlines()[0]})") from None
    if isinstance(tasks, dict) and isinstance(tasks.get("data"), dict):
        tasks = [tasks]  # one task exported on its own
    if not isinstance(tasks, list):
        raise InputFileError(path, f"expected a JSON list: {LAYOUTS}")
    if not tasks:
        raise InputFileError(path, f"is an empty list: no tasks, so no answers (expected {LAYOUTS})")
    first = tasks[0]
    if isinstance(first, dict) and "data" not in first and "item_id" in first:
        return _read_min(path, tasks)
    if not isinstance(first, dict) or not ({"data", "annotations", "completions"} & set(first)):
        raise InputFileError(path, f"the first entry is not a Label Studio task: expected {LAYOUTS}")
    return _read_tasks(path, tasks)


#: The Choices control of satcal's labeling config: where an annotation holds its answer.
CONTROL = "answer"


def _renamed_control(path, names: set | None = None) -> InputFileError:
    found = f" (found {', '.join(sorted(map(str, names))[:5])})" if names else ""
    return InputFileError(path, f"no annotation holds a choice under {CONTROL!r}, the name of the Choices in "
                                f"satcal's labeling config{found}: was the labeling config changed?")


def _read_tasks(path, tasks: list) -> pd.DataFrame:
    rows = []
    controls: set = set()  # the controls the annotations' results come from
    for t_index, task in enumerate(tasks, start=1):
        data = task.get("data", {}) if isinstance(task, dict) else {}
        if not isinstance(data, dict) or "item_id" not in data:
            raise InputFileError(path, f"task {t_index} has no data.item_id: was it exported from a "
                                       "satcal batch?")
        item = _scalar(data["item_id"])
        # Label Studio before 1.0 called annotations completions; some exports still do
        annotations = task.get("annotations", task.get("completions"))
        if annotations is None:
            continue  # a task nobody annotated
        if isinstance(annotations, dict):
            annotations = [annotations]
        if not isinstance(annotations, list):
            rows.append((item, "", "", "", "", "malformed task: annotations is not a list", t_index, None))
            continue
        for a_index, ann in enumerate(annotations):
            if not isinstance(ann, dict):
                rows.append((item, "", "", "", f"{t_index}.{a_index + 1}",
                             "malformed annotation: not an object", t_index, None))
                continue
            choice, problem = _choice(ann)
            if isinstance(ann.get("result"), list):
                controls.update(r.get("from_name") for r in ann["result"] if isinstance(r, dict))
            cancelled = ann.get("was_cancelled") or ann.get("skipped")  # 'skipped' before 1.0
            status = (problem or ("cancelled" if cancelled else "")
                      or ("ground truth (a reviewer's reference answer)" if ann.get("ground_truth") else ""))
            rows.append((item, _annotator(ann.get("completed_by")), _LABEL_TO_CODE.get(choice, choice),
                         _scalar(ann.get("created_at")), _scalar(ann.get("id", "")), status, t_index,
                         ann.get("lead_time")))
    if not rows:
        raise InputFileError(path, f"none of its {len(tasks)} tasks has an annotation (no 'annotations' or "
                                   "'completions' entries): is it the tasks file of the batch rather than "
                                   "the project's export after annotating?")
    if CONTROL not in controls and controls - {None}:
        raise _renamed_control(path, controls - {None})
    return _answers(path, rows)


def _read_min(path, records: list) -> pd.DataFrame:
    rows = []
    for r_index, rec in enumerate(records, start=1):
        if not isinstance(rec, dict) or "item_id" not in rec:
            raise InputFileError(path, f"record {r_index} has no item_id: expected {LAYOUTS}")
        if rec.get("annotation_id") is None and rec.get(CONTROL) is None:
            continue  # a task nobody annotated
        rows.append(_min_row(rec.get("item_id"), rec.get(CONTROL), rec.get("annotator"),
                             rec.get("annotation_id"), rec.get("created_at"), rec.get("lead_time"), r_index))
    if not rows:
        raise InputFileError(path, f"none of its {len(records)} JSON-MIN records has an answer: were they "
                                   "exported before anyone annotated?")
    if not any(isinstance(r, dict) and CONTROL in r for r in records):
        raise _renamed_control(path)
    _warn_minimal(path)
    return _answers(path, rows)


def _read_table_export(path, delimiter) -> pd.DataFrame:
    from ..fileio import read_delimited
    text = read_text(path)
    if delimiter is None:  # CSV by default; a header with tabs and no commas is Label Studio's TSV
        head = text.lstrip("\ufeff").split("\n", 1)[0]
        delimiter = "\t" if "\t" in head and "," not in head else ","
    t = read_delimited(path, delimiter, ["item_id", "annotator", "annotation_id"], text=text,
                       expected=LAYOUTS, rows="one row per annotation")
    answer = t[CONTROL] if CONTROL in t.columns else pd.Series([""] * len(t), index=t.index)
    keep = (t["annotation_id"].str.strip() != "") | (answer.str.strip() != "")
    if not keep.any():
        raise InputFileError(path, f"none of its {len(t)} rows has an annotation (annotation_id and answer "
                                   "are empty): was it exported before anyone annotated?")
    if CONTROL not in t.columns:
        raise InputFileError(path, f"no column {CONTROL!r}, the name of the Choices in satcal's labeling config, "
                                   "though annotations are listed: was the labeling config changed?", 1)
    rows = [_min_row(r["item_id"], answer[i], r["annotator"], r["annotation_id"], r.get("created_at"),
                     r.get("lead_time"), r["__line__"]) for i, r in t[keep].iterrows()]
    _warn_minimal(path)
    return _answers(path, rows)


def _min_row(item, answer, annotator, annotation_id, created_at, lead_time, line) -> tuple:
    """One JSON-MIN record or CSV row: the choice is the label (or its alias) as a string; a
    list or an object there means several answers or something other than one choice."""
    problem = ""
    if isinstance(answer, (list, dict)):
        problem = "several answers in one annotation" if isinstance(answer, list) else \
            "malformed annotation: the answer is not one choice"
        answer = ""
    answer = _scalar(answer)
    return (_scalar(item), _scalar(annotator), _LABEL_TO_CODE.get(answer, answer), _scalar(created_at),
            _scalar(annotation_id), problem, line, lead_time)


def _warn_minimal(path) -> None:
    import warnings
    from ..errors import SatcalWarning
    warnings.warn(f"{path}: Label Studio's JSON-MIN and CSV exports leave out skipped annotations and do "
                  "not mark ground-truth ones, so a reviewer's reference answer counts as an answer; "
                  "export JSON to tell them apart", SatcalWarning, stacklevel=4)


def _scalar(value) -> str:
    """A JSON value as text: null is empty, a whole float (a CSV export's 12.0) its integer."""
    if value is None:
        return ""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _answers(path, rows: list) -> pd.DataFrame:
    item, worker, answer, created, ann_id, status, line, seconds = zip(*rows)
    seconds = [v if isinstance(v, (int, float, str)) and not isinstance(v, bool) else None for v in seconds]
    return raw_answers(path, item, worker, answer, created, ann_id, None, status, line, seconds)


def write_results(answers: pd.DataFrame, visible: pd.DataFrame, key: pd.DataFrame, path: Path) -> Path:
    """An export in Label Studio's JSON layout (for the simulated crowd): a page left unfinished
    is a cancelled annotation, and each trap carries the researcher's ground-truth annotation,
    as a reviewer who marks reference answers leaves it.

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
