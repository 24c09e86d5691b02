"""Generic export: the worker-visible items as CSV and JSONL, with a plain HTML form; and the
generic result CSV reader (``item_id, worker_id, answer`` [, ``submitted_at``, ``row_id``]).
"""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from ..fileio import atomic_write_text
from .base import Platform, check_worker_visible, render_form_html
from ._common import raw_answers, read_table, write_delimited


def write_batch(visible: pd.DataFrame, key: pd.DataFrame, out_dir: Path, k: int,
                instructions: str, items_per_page: int, answers_per_example: int = 1) -> list[Path]:
    """``items.csv``, ``items.jsonl`` and a plain HTML form ``template.html`` of the first page.

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
    out_dir.mkdir(parents=True, exist_ok=True)
    return [atomic_write_text(out_dir / "items.csv", write_delimited(visible, ",")),
            atomic_write_text(out_dir / "items.jsonl", visible.to_json(orient="records", lines=True)),
            atomic_write_text(out_dir / "template.html", render_form_html(visible.head(items_per_page), k,
                                                                   instructions, "Which results are better?"))]


def read_results(path) -> pd.DataFrame:
    """A CSV of answers (``item_id``, ``worker_id``, ``answer``, optionally ``submitted_at``,
    ``row_id``, ``trust``) -> raw answers.

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
    t = read_table(path, ",", ["item_id", "worker_id", "answer"],
                   expected="a CSV of answers with item_id, worker_id, answer [, submitted_at, row_id, trust]",
                   coded=True)
    return raw_answers(path, t["item_id"], t["worker_id"], t["answer"], t.get("submitted_at"),
                       t.get("row_id"), t.get("trust"), None, t["__line__"])


def write_results(answers: pd.DataFrame, visible: pd.DataFrame, key: pd.DataFrame, path: Path) -> Path:
    """The answers as that CSV, each with a ``row_id`` (for the simulated crowd).

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
    out = answers[["item_id", "worker_id", "answer", "submitted_at"]].copy()
    out["row_id"] = [f"r{i + 1}" for i in range(len(out))]
    return atomic_write_text(path, write_delimited(out, ","))


PLATFORM = Platform("csv", "Generic CSV/JSONL with a plain HTML form", write_batch, read_results,
                    "csv", write_results)
