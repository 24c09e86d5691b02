"""Relevance judgments (qrels): reading, validation and level look-up.

Formats read:

- TREC qrels: ``qid iter docid level`` separated by white space, no header;
- CSV or TSV with a header naming a query, a document and a level column (aliases below).

A UTF-8 byte-order mark and CRLF line ends are accepted. Every problem is reported in one line
naming the file, the line and what was expected.
"""
from __future__ import annotations

import csv
import io
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Sequence

import numpy as np
import pandas as pd

from .errors import InputFileError
from .fileio import read_utf8_text

__all__ = ["Judgments", "read_judgments", "QUERY_ALIASES", "DOC_ALIASES", "LEVEL_ALIASES"]

QUERY_ALIASES = ("query", "qid", "query_id", "topic", "topic_id")
DOC_ALIASES = ("doc", "docid", "doc_id", "docno", "document")
LEVEL_ALIASES = ("level", "relevance", "rel", "label", "grade", "judgment")


@dataclass
class Judgments:
    """Judged (query, document, level) triples with fast vectorised look-up.

    Parameters
    ----------
    table : pandas.DataFrame
        Columns ``query``, ``doc`` (strings) and ``level`` (integers); one row per pair.
    levels : sequence of int, optional
        The declared scale; defaults to ``0 .. max level`` plus any negative levels present.
    source : str, optional
        Where the judgments came from (shown in messages).
    """

    table: pd.DataFrame
    levels: tuple[int, ...] = ()
    source: str = "<judgments>"

    def __post_init__(self):
        t = self.table.loc[:, ["query", "doc", "level"]].copy()
        t["query"] = t["query"].astype(str)
        t["doc"] = t["doc"].astype(str)
        t["level"] = t["level"].astype(np.int64)
        self.table = t.reset_index(drop=True)
        if not self.levels:
            present = sorted(set(t["level"].tolist())) if len(t) else [0]
            top = max(present[-1], 0)
            self.levels = tuple(sorted(set(range(0, top + 1)) | set(present)))
        self._index = pd.Index(self.table["query"] + "\x1f" + self.table["doc"])

    # -- summary ---------------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self.table)

    @property
    def queries(self) -> list[str]:
        return sorted(self.table["query"].unique().tolist())

    @property
    def top_level(self) -> int:
        return max(self.levels)

    @property
    def n_levels(self) -> int:
        """L, the number of non-negative levels 0..L-1 of the declared scale."""
        return self.top_level + 1

    def pools(self) -> dict[str, np.ndarray]:
        """Each query's judged levels (its pool), as an array."""
        return {q: g.to_numpy() for q, g in self.table.groupby("query", sort=True)["level"]}

    def docs_by_level(self) -> dict[str, dict[int, np.ndarray]]:
        """For each query, the judged documents at each level."""
        out: dict[str, dict[int, np.ndarray]] = {}
        for (q, lv), g in self.table.groupby(["query", "level"], sort=True)["doc"]:
            out.setdefault(q, {})[int(lv)] = g.to_numpy()
        return out

    # -- look-up ---------------------------------------------------------------------------
    def lookup(self, queries: Sequence[str], docs, unjudged: float = np.nan) -> np.ndarray:
        """Levels of a (n, k) array of document ids, each row for ``queries[row]``.

        Unjudged documents get ``unjudged`` (NaN by default, so callers can decide); empty
        document ids (a run shorter than k) are always NaN.
        """
        docs = np.asarray(docs, dtype=object)
        if docs.ndim == 1:
            docs = docs[:, None]
        q = np.repeat(np.asarray(queries, dtype=str), docs.shape[1])
        d = docs.reshape(-1).astype(str)
        keys = pd.Index(np.char.add(np.char.add(q, "\x1f"), d))
        pos = self._index.get_indexer(keys)
        levels = np.where(pos >= 0, self.table["level"].to_numpy()[np.maximum(pos, 0)], unjudged)
        empty = (d == "") | (d == "nan")
        levels = np.where(empty, np.nan, levels.astype(float))
        return levels.reshape(docs.shape)

    def to_trec(self, path: "str | os.PathLike") -> None:
        """Write TREC qrels (``qid 0 docid level``)."""
        lines = (self.table["query"] + " 0 " + self.table["doc"] + " " +
                 self.table["level"].astype(str))
        Path(path).write_text("\n".join(lines) + "\n", encoding="utf-8")

    def to_frame(self) -> pd.DataFrame:
        return self.table.copy()


# ------------------------------------------------------------------------------------------
# Reading
# ------------------------------------------------------------------------------------------
def _parse_level(text: str, path, line: int, column: str | None = None) -> int:
    try:
        value = float(text)
    except ValueError:
        value = None
    if value is None or not np.isfinite(value) or value != int(value):
        raise InputFileError(path, f"level {text!r} is not an integer", line, column)
    return int(value)


def _header_columns(first_line: str) -> tuple[str, list[str]] | None:
    for delim in ("\t", ","):
        if delim in first_line:
            names = [c.strip().strip('"').lower() for c in first_line.split(delim)]
            if any(n in QUERY_ALIASES for n in names) and any(n in LEVEL_ALIASES for n in names):
                return delim, names
    return None


def _rows_trec(lines: list[str], path) -> Iterable[tuple[int, str, str, str]]:
    for number, line in enumerate(lines, start=1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        parts = line.split()
        if len(parts) != 4:
            raise InputFileError(path, f"expected 4 fields 'qid iter docid level', found {len(parts)}",
                                 number)
        yield number, parts[0], parts[2], parts[3]


def _rows_named(text: str, path, delim: str, names: list[str]):
    def pick(aliases, what):
        for a in aliases:
            if a in names:
                return names.index(a)
        raise InputFileError(path, f"no {what} column in the header (expected one of "
                                   f"{', '.join(aliases)})", 1)

    iq, idoc, ilv = pick(QUERY_ALIASES, "query"), pick(DOC_ALIASES, "document"), pick(LEVEL_ALIASES, "level")
    reader = csv.reader(io.StringIO(text), delimiter=delim)
    next(reader)
    for row in reader:
        number = reader.line_num
        if not row or all(not c.strip() for c in row):
            continue
        if len(row) != len(names):
            raise InputFileError(path, f"expected {len(names)} columns as in the header, found {len(row)}",
                                 number)
        yield number, row[iq].strip(), row[idoc].strip(), row[ilv].strip()


def read_judgments(path: "str | os.PathLike", levels: "int | Sequence[int] | None" = None,
                   fmt: str = "auto") -> Judgments:
    """Read judgments from a TREC qrels file or a CSV/TSV with named columns.

    Parameters
    ----------
    path : path-like
    levels : int or sequence of int, optional
        The declared scale: an int L means 0..L-1; a sequence lists the legal levels
        (negative ones included, e.g. ``range(-2, 5)`` for TREC Web). Levels outside it are
        an error. If omitted any integer level is accepted.
    fmt : {"auto", "trec", "csv", "tsv"}

    Raises
    ------
    InputFileError
        Naming file and line: non-integer level, wrong number of fields, a (query, doc)
        judged twice with different levels, a level outside the declared scale, no rows.
    """
    path = Path(path)
    text = read_utf8_text(path)
    lines = text.splitlines()
    first = next((ln for ln in lines if ln.strip()), None)
    if first is None:
        raise InputFileError(path, "is empty: expected judgments (qid iter docid level, or a CSV/TSV "
                                   "with query, doc, level columns)")
    header = _header_columns(first) if fmt in ("auto", "csv", "tsv") else None
    if fmt in ("csv", "tsv") and header is None:
        raise InputFileError(path, "expected a header naming query, doc and level columns", 1)
    if header:
        rows = _rows_named(text, path, *header)
        level_col = "level"
    else:
        rows = _rows_trec(lines, path)
        level_col = None
    allowed = None
    if levels is not None:
        allowed = set(range(levels)) if isinstance(levels, (int, np.integer)) else set(int(v) for v in levels)

    seen: dict[tuple[str, str], tuple[int, int]] = {}
    records = []
    for number, q, d, lv_text in rows:
        if not q or not d:
            raise InputFileError(path, "empty query or document id", number)
        lv = _parse_level(lv_text, path, number, level_col)
        if allowed is not None and lv not in allowed:
            raise InputFileError(path, f"level {lv} is outside the declared scale "
                                       f"{min(allowed)}..{max(allowed)}", number, level_col)
        key = (q, d)
        if key in seen:
            prev_level, prev_line = seen[key]
            if prev_level != lv:
                raise InputFileError(path, f"query {q!r} document {d!r} is judged {lv} here but "
                                           f"{prev_level} on line {prev_line}", number)
            continue  # an exact repeat adds nothing
        seen[key] = (lv, number)
        records.append((q, d, lv))
    if not records:
        raise InputFileError(path, "has no judgments, only blank or comment lines")
    table = pd.DataFrame.from_records(records, columns=["query", "doc", "level"])
    declared = tuple(sorted(allowed)) if allowed is not None else ()
    return Judgments(table, declared, str(path))
