"""The hosted study (``satcal serve``) as a platform: the batch it serves, and the reader of
the snapshot that ``satcal ingest DIR --platform serve`` takes of its database (one row per
stored response: ``row_id, item_id, worker_id, answer, submitted_at, seconds, status, ...``).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
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


#: Heights in CSS px of the hosted study's page at 1280 px wide (serve/static/satcal.css),
#: measured in headless Chromium: a page's frame (title, progress, button), an item's frame
#: (query, list headings, the question and its options), a result's one-line title, and each
#: further line (a title's second, a snippet's, an address). Checked on k = 5 without
#: snippets (246 px an item, measured 246) and k = 10 with 25-word snippets (653, measured
#: 653); a phone (390 px) shows the same page at about 1.3-1.6 times the height.
PAGE_FRAME_PX, ITEM_FRAME_PX, RESULT_PX, LINE_PX = 356, 136, 22, 15
#: The page a participant should not have to scroll past: three screens of 800 px.
PAGE_BUDGET_PX = 3 * 800
#: Words a line holds in a list's column at 1280 px: titles (larger type) and the rest.
TITLE_WORDS_PER_LINE, WORDS_PER_LINE = 8, 10


def item_heights(visible: pd.DataFrame, k: int) -> np.ndarray:
    """Estimated height (px, at 1280 px wide) of each worker-visible item on the hosted study's
    page: the item's frame plus the taller of lists A and B, each result a title of up to two
    lines, an address line if any, and a snippet of up to two lines (the stylesheet clamps
    both).

    Parameters
    ----------
    visible : pandas.DataFrame
        items.csv.
    k : int
        List length.

    Returns
    -------
    numpy.ndarray
        Pixels per item.
    """
    def words(column):
        """Words of each item's ``column`` (0 when the column is missing).

        Parameters
        ----------
        column : str
            A column of ``visible``.
        """
        if column not in visible.columns:
            return np.zeros(len(visible))
        return visible[column].fillna("").astype(str).str.split().str.len().to_numpy(float)

    sides = []
    for side in ("A", "B"):
        h = np.zeros(len(visible))
        for i in range(1, k + 1):
            title = np.maximum(words(f"{side}{i}_title"), 1)  # a bare id is the title
            h += (RESULT_PX + LINE_PX * (np.minimum(np.ceil(title / TITLE_WORDS_PER_LINE), 2) - 1)
                  + LINE_PX * (words(f"{side}{i}_url_text") > 0)
                  + LINE_PX * np.minimum(np.ceil(words(f"{side}{i}_snippet") / WORDS_PER_LINE), 2))
        sides.append(h)
    return ITEM_FRAME_PX + np.maximum(*sides)


def auto_items_per_page(visible: pd.DataFrame, k: int, budget_px: int = PAGE_BUDGET_PX, reserve: int = 1) -> int:
    """Items per page by reading load (``presentation.items_per_page = "auto"``): as many items
    of the mean estimated height (:func:`item_heights`) as fit, with the page's frame, in
    ``budget_px`` (three screens at 1280 px), less ``reserve`` items' room for a trap shown on
    top of the page (the hosted study's ``traps_on_top``, a platform's test question) or an
    attention check; at least one.

    Parameters
    ----------
    visible : pandas.DataFrame
        items.csv (or a sample of it).
    k : int
        List length.
    budget_px : int, optional
        Height of a page in pixels.
    reserve : int, optional
        Items' room kept free (default 1).

    Returns
    -------
    int
    """
    mean = float(item_heights(visible, k).mean()) if len(visible) else ITEM_FRAME_PX
    return max(1, int((budget_px - PAGE_FRAME_PX) // mean) - reserve)


def write_batch(visible: pd.DataFrame, key: pd.DataFrame, out_dir: Path, k: int,
                instructions: str, items_per_page: int, answers_per_example: int = 1) -> list[Path]:
    """The hosted study's batch: ``items.csv`` and a ``README.txt`` saying how to serve it.

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
            atomic_write_text(out_dir / "README.txt", HOWTO)]


#: Columns of a snapshot the reader carries beside the answers, where present (a snapshot of
#: a database from before they were kept has none): an attention check's result, and whether
#: the participant is the simulated crowd's (``satcal simulate --serve``).
SNAPSHOT_EXTRA = ["attention_passed", "simulated"]


def read_results(path) -> pd.DataFrame:
    """A snapshot of the hosted study's database -> raw answers (with the snapshot's extra
    columns, empty when absent).

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
    t = read_table(path, ",", SNAPSHOT_COLUMNS)
    out = raw_answers(path, t["item_id"], t["worker_id"], t["answer"], t["submitted_at"], t["row_id"],
                      None, t["status"], t["__line__"], t["seconds"])
    for column in SNAPSHOT_EXTRA:
        out[column] = (t[column].fillna("").astype(str).str.strip().to_numpy() if column in t.columns
                       else "")
    return out


def write_results(answers: pd.DataFrame, visible: pd.DataFrame, key: pd.DataFrame, path: Path) -> Path:
    """The snapshot layout, for the simulated crowd's file-based dry run.

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
    out = pd.DataFrame({"row_id": [f"r{i + 1}" for i in range(len(answers))],
                        "item_id": answers["item_id"], "worker_id": answers["worker_id"],
                        "answer": answers["answer"], "submitted_at": answers["submitted_at"],
                        "seconds": "", "status": ""})
    return atomic_write_text(path, write_delimited(out, ","))


PLATFORM = Platform("serve", "satcal's own hosted study (satcal serve), for Prolific and lab participants",
                    write_batch, read_results, "csv", write_results)
