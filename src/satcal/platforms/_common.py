"""Shared helpers of the platform readers and writers."""
from __future__ import annotations

import csv
import io
import os

import numpy as np
import pandas as pd

from ..errors import InputFileError
from ..fileio import read_utf8_text as read_text
from . import RAW_ANSWER_COLUMNS

__all__ = ["read_table", "read_text", "raw_answers", "write_delimited"]


def read_table(path, delimiter: str, required: list[str]) -> pd.DataFrame:
    """A delimited file as strings, checked row by row (line numbers as in the file).

    Raises one-line errors for: a missing required column (naming the delimiter found when it
    looks like the wrong one), a row with the wrong number of fields (a truncated last line or
    quoting broken by a spreadsheet program), an unclosed quote.
    """
    text = read_text(path)
    if not text.strip():
        raise InputFileError(path, f"is empty: expected a header with {', '.join(required)}")
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=delimiter, strict=True)
    try:
        header = next(reader)
    except csv.Error as exc:
        raise InputFileError(path, f"unreadable header ({exc})", 1) from None
    header = [h.strip() for h in header]
    repeated = sorted({h for h in header if header.count(h) > 1 and h})
    if repeated:
        name = repeated[0]
        where = [i + 1 for i, h in enumerate(header) if h == name]
        raise InputFileError(path, f"column {name!r} appears {len(where)} times in the header "
                                   f"(columns {', '.join(map(str, where))}); which one holds the "
                                   "answer is ambiguous", 1)
    missing = [c for c in required if c not in header]
    if missing:
        other = "," if delimiter == "\t" else "\t"
        hint = ""
        if len(header) == 1 and other in header[0]:
            hint = (f" (the header is split by {'commas' if other == ',' else 'tabs'}: wrong "
                    f"delimiter, expected {'tabs' if delimiter == chr(9) else 'commas'})")
        raise InputFileError(path, f"missing column(s) {', '.join(missing)}{hint}", 1)
    rows, lines = [], []
    while True:
        start = reader.line_num + 1  # a quoted field may run over several lines: name the first
        try:
            row = next(reader)
        except StopIteration:
            break
        except csv.Error as exc:
            raise InputFileError(path, f"broken quoting ({exc}){_quote_hint(start, reader.line_num)}; "
                                       "was the file re-saved by a spreadsheet program?", start) from None
        if not row or (len(row) == 1 and not row[0].strip()):
            continue
        if len(row) != len(header):
            problem = "truncated line" if len(row) < len(header) else "extra fields"
            raise InputFileError(path, f"{problem}: {len(row)} fields, the header has {len(header)}"
                                       f"{_quote_hint(start, reader.line_num)}", start)
        rows.append(row)
        lines.append(start)
    table = pd.DataFrame(rows, columns=header, dtype=object) if rows else pd.DataFrame(columns=header)
    table["__line__"] = lines
    return table


def _quote_hint(start: int, end: int) -> str:
    """When a record ran over several lines, a stray quote on its first line opened a field."""
    if end <= start:
        return ""
    return f" (a quote opened on this line runs on to line {end}: a stray \" in a value?)"


def raw_answers(path, item_id, worker_id, answer, submitted_at=None, row_id=None, trust=None,
                status=None, line=None, seconds=None) -> pd.DataFrame:
    """The tidy table every reader returns (RAW_ANSWER_COLUMNS), plus the source file.

    ``seconds`` is the time the worker spent on the item's page or task, where the platform
    records it (blank otherwise)."""
    n = len(item_id)
    blank = np.full(n, "", dtype=object)
    out = pd.DataFrame({
        "item_id": np.asarray(item_id, dtype=object),
        "worker_id": np.asarray(worker_id, dtype=object),
        "answer": np.asarray(answer, dtype=object),
        "submitted_at": blank if submitted_at is None else np.asarray(submitted_at, dtype=object),
        "row_id": np.asarray([str(i + 1) for i in range(n)] if row_id is None else row_id, dtype=object),
        "trust": np.full(n, np.nan) if trust is None else pd.to_numeric(pd.Series(trust), errors="coerce").to_numpy(),
        "status": blank if status is None else np.asarray(status, dtype=object),
        "line": np.arange(2, n + 2) if line is None else np.asarray(line),
        "seconds": np.full(n, np.nan) if seconds is None else pd.to_numeric(pd.Series(seconds), errors="coerce").to_numpy(),
    })
    out["source_file"] = os.path.basename(str(path))
    return out[list(RAW_ANSWER_COLUMNS) + ["source_file"]]


def write_delimited(df: pd.DataFrame, delimiter: str) -> str:
    return df.to_csv(index=False, sep=delimiter, lineterminator="\n")


#: ``status`` of a simulated crowd's row for a page a worker took and left unfinished
UNFINISHED = "abandoned"


def unfinished(answers: pd.DataFrame) -> np.ndarray:
    """Rows of a simulated crowd's answers that are pages left unfinished (``status``)."""
    if "status" not in answers.columns:
        return np.zeros(len(answers), dtype=bool)
    return answers["status"].to_numpy() == UNFINISHED
