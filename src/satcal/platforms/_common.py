"""Shared helpers of the platform readers and writers."""
from __future__ import annotations

import os

import numpy as np
import pandas as pd

from ..fileio import read_delimited
from ..fileio import read_utf8_text as read_text
from .base import RAW_ANSWER_COLUMNS

__all__ = ["read_table", "read_text", "raw_answers", "write_delimited"]


def read_table(path, delimiter: str, required: list[str], expected: str | None = None,
               coded: bool = False) -> pd.DataFrame:
    """A result file's table as strings, checked row by row (line numbers as in the file, in
    ``__line__``): :func:`satcal.fileio.read_delimited`. A header with no row under it is an
    error: a result file that yields no answers is never read as an empty success.

    Parameters
    ----------
    path : str or pathlib.Path
        The result file.
    delimiter : str
        The field delimiter.
    required : list of str
        Columns the header must hold.
    expected : str or None, optional
        The layout, as errors describe it.
    coded : bool, default False
        Columns with few distinct values as Categoricals when pyarrow reads the file
        (:func:`satcal.fileio.read_delimited`).

    Returns
    -------
    pandas.DataFrame

    Raises
    ------
    InputFileError
        A missing column, a broken row or no row at all.
    """
    return read_delimited(path, delimiter, required, expected=expected, rows="one row per answer", coded=coded)


def raw_answers(path, item_id, worker_id, answer, submitted_at=None, row_id=None, trust=None,
                status=None, line=None, seconds=None) -> pd.DataFrame:
    """The tidy table every reader returns (RAW_ANSWER_COLUMNS), plus the source file.

    ``seconds`` is the time the worker spent on the item's page or task, where the platform
    records it (blank otherwise).

    Parameters
    ----------
    path : str or pathlib.Path
        The result file (its base name goes to ``source_file``).
    item_id, worker_id, answer : array_like
        One value per row.
    submitted_at : array_like or None, optional
        Submission times; None leaves them empty.
    row_id : array_like or None, optional
        The platform's row ids; None numbers the rows from 1.
    trust : array_like or None, optional
        Platform trust; None (or a non-number) is NaN.
    status : array_like or None, optional
        Reasons to reject a row; None leaves them empty.
    line : array_like or None, optional
        Line of each row in the file; None counts from line 2.
    seconds : array_like or None, optional
        Seconds on the page or task; None is NaN.

    Returns
    -------
    pandas.DataFrame
    """
    n = len(item_id)
    blank = pd.Categorical.from_codes(np.zeros(n, dtype=np.int8), dtype=pd.CategoricalDtype(pd.Index([""], dtype=object)))

    def text(v):
        """A column of text: a Categorical of strings as it is (codes), else Python strings in
        an object column (not re-encoded by pandas 3)."""
        if isinstance(v, (pd.Categorical, pd.Series)) and isinstance(v.dtype, pd.CategoricalDtype):
            return pd.Series(pd.Categorical(v), copy=False)
        if isinstance(v, pd.Series) and _arrow_text(v):
            return v.reset_index(drop=True)
        return pd.Series(v, dtype=object, copy=False)
    out = pd.DataFrame({
        "item_id": text(_text(item_id)),
        "worker_id": text(_text(worker_id)),
        "answer": text(_text(answer)),
        "submitted_at": text(blank if submitted_at is None else _text(submitted_at)),
        "row_id": text(np.asarray([str(i + 1) for i in range(n)], dtype=object) if row_id is None else _text(row_id)),
        "trust": np.full(n, np.nan) if trust is None else _numbers(trust),
        "status": text(blank if status is None else _text(status)),
        "line": np.arange(2, n + 2) if line is None else np.asarray(line),
        "seconds": np.full(n, np.nan) if seconds is None else _numbers(seconds),
    })
    # one name for every row, as a code (a bare string would make pandas 3 build a
    # million-cell Arrow column)
    out["source_file"] = pd.Categorical.from_codes(np.zeros(n, dtype=np.int8),
                                                   dtype=pd.CategoricalDtype(pd.Index([os.path.basename(str(path))],
                                                                                      dtype=object)))
    return out[list(RAW_ANSWER_COLUMNS) + ["source_file"]]


def _arrow_text(values: pd.Series) -> bool:
    """Whether a column is Arrow-backed text with no missing cell (the fast reader's row ids)."""
    dtype = values.dtype
    return isinstance(dtype, pd.StringDtype) and dtype.storage == "pyarrow" and not values.isna().any()


def _numbers(values) -> np.ndarray:
    """Values as floats, a non-number NaN (the cells as they were read, codes or not)."""
    return pd.to_numeric(pd.Series(np.asarray(values, dtype=object)), errors="coerce").to_numpy()


def _text(values) -> np.ndarray:
    """Values as text (missing ones empty): ids and answers from JSON may be numbers, null, or
    anything else a hostile file holds, and are compared as strings downstream. Converted
    once per distinct value; a column that is all text already (a delimited file's) is kept."""
    if isinstance(getattr(values, "dtype", None), pd.CategoricalDtype) and \
            pd.api.types.infer_dtype(np.asarray(values.cat.categories, dtype=object), skipna=False) in ("string", "empty") \
            and not values.isna().any():
        return values  # text already, held as codes
    if isinstance(values, pd.Series) and _arrow_text(values):
        return values  # text already, held by Arrow
    values = np.asarray(values, dtype=object)
    if pd.api.types.infer_dtype(values, skipna=False) in ("string", "empty"):
        return values
    try:
        codes, uniques = pd.factorize(values, use_na_sentinel=False)
    except TypeError:  # unhashable values (a JSON list or object): one by one
        codes, uniques = np.arange(values.size), values
    return np.array(["" if v is None or (isinstance(v, float) and v != v) else str(v)
                     for v in uniques], dtype=object)[codes].reshape(values.shape)


def write_delimited(df: pd.DataFrame, delimiter: str) -> str:
    """``df`` as delimited text with a header, no index and ``\\n`` line ends.

    Parameters
    ----------
    df : pandas.DataFrame
    delimiter : str

    Returns
    -------
    str
    """
    return df.to_csv(index=False, sep=delimiter, lineterminator="\n")


#: ``status`` of a simulated crowd's row for a page a worker took and left unfinished
UNFINISHED = "abandoned"


def unfinished(answers: pd.DataFrame) -> np.ndarray:
    """Rows of a simulated crowd's answers that are pages left unfinished (``status``).

    Parameters
    ----------
    answers : pandas.DataFrame
        The simulated answers.

    Returns
    -------
    numpy.ndarray of bool
        All False without a ``status`` column.
    """
    if "status" not in answers.columns:
        return np.zeros(len(answers), dtype=bool)
    return answers["status"].to_numpy() == UNFINISHED
