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
    check_worker_visible(visible.columns)
    out_dir.mkdir(parents=True, exist_ok=True)
    return [atomic_write_text(out_dir / "items.csv", write_delimited(visible, ",")),
            atomic_write_text(out_dir / "items.jsonl", visible.to_json(orient="records", lines=True)),
            atomic_write_text(out_dir / "template.html", render_form_html(visible.head(items_per_page), k,
                                                                   instructions, "Which results are better?"))]


def read_results(path) -> pd.DataFrame:
    t = read_table(path, ",", ["item_id", "worker_id", "answer"],
                   expected="a CSV of answers with item_id, worker_id, answer [, submitted_at, row_id, trust]")
    return raw_answers(path, t["item_id"], t["worker_id"], t["answer"], t.get("submitted_at"),
                       t.get("row_id"), t.get("trust"), None, t["__line__"])


def write_results(answers: pd.DataFrame, visible: pd.DataFrame, key: pd.DataFrame, path: Path) -> Path:
    out = answers[["item_id", "worker_id", "answer", "submitted_at"]].copy()
    out["row_id"] = [f"r{i + 1}" for i in range(len(out))]
    return atomic_write_text(path, write_delimited(out, ","))


PLATFORM = Platform("csv", "Generic CSV/JSONL with a plain HTML form", write_batch, read_results,
                    "csv", write_results)
