"""The hosted study (``satcal serve``) as a platform: the batch it serves, and the reader of
the snapshot that ``satcal ingest DIR --platform serve`` takes of its database (one row per
stored response: ``row_id, item_id, worker_id, answer, submitted_at, seconds, status, ...``).
"""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from ..fileio import atomic_write_text
from .base import Platform, check_worker_visible
from ._common import raw_answers, read_table, write_delimited

#: Columns of a snapshot of the study database.
SNAPSHOT_COLUMNS = ["row_id", "item_id", "worker_id", "answer", "submitted_at", "seconds", "status"]

HOWTO = """Serve this batch to participants yourself. With STUDY the study directory (the one
that holds this batches/ folder),

    satcal serve STUDY

prints the entry URL for Prolific (with PROLIFIC_PID, STUDY_ID and SESSION_ID) and for lab
participants, and a researcher's status page. Answers are stored in STUDY/serve.db (or the
database given with --db); read them with

    satcal ingest STUDY --platform serve
"""


def write_batch(visible: pd.DataFrame, key: pd.DataFrame, out_dir: Path, k: int,
                instructions: str, items_per_page: int, answers_per_example: int = 1) -> list[Path]:
    check_worker_visible(visible.columns)
    out_dir.mkdir(parents=True, exist_ok=True)
    return [atomic_write_text(out_dir / "items.csv", write_delimited(visible, ",")),
            atomic_write_text(out_dir / "README.txt", HOWTO)]


def read_results(path) -> pd.DataFrame:
    t = read_table(path, ",", SNAPSHOT_COLUMNS)
    return raw_answers(path, t["item_id"], t["worker_id"], t["answer"], t["submitted_at"], t["row_id"],
                       None, t["status"], t["__line__"], t["seconds"])


def write_results(answers: pd.DataFrame, visible: pd.DataFrame, key: pd.DataFrame, path: Path) -> Path:
    """The snapshot layout, for the simulated crowd's file-based dry run."""
    out = pd.DataFrame({"row_id": [f"r{i + 1}" for i in range(len(answers))],
                        "item_id": answers["item_id"], "worker_id": answers["worker_id"],
                        "answer": answers["answer"], "submitted_at": answers["submitted_at"],
                        "seconds": "", "status": ""})
    return atomic_write_text(path, write_delimited(out, ","))


PLATFORM = Platform("serve", "satcal's own hosted study (satcal serve), for Prolific and lab participants",
                    write_batch, read_results, "csv", write_results)
