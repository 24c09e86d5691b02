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
#: Largest |level| accepted: relevance scales are small; a larger number is a broken file.
MAX_LEVEL = 1000


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
        t = self.table.loc[:, ["query", "doc", "level"]]
        t = pd.DataFrame({"query": t["query"].astype(str), "doc": t["doc"].astype(str),
                          "level": t["level"].to_numpy(dtype=np.int64)})
        self.table = t
        if not self.levels:
            present = np.unique(t["level"].to_numpy()).tolist() if len(t) else [0]
            top = max(present[-1], 0)
            # the scale 0..top, plus any negative levels present (top is bounded by the reader)
            self.levels = tuple(sorted(set(range(0, min(top, MAX_LEVEL) + 1)) | set(present)))
        self._codes = None

    def _keys(self):
        """Integer codes of the table, built on first use: sorted query names and each row's
        query code, a doc index and each row's doc code, and the sorted (query, doc) keys."""
        if self._codes is None:
            qcode, qnames = pd.factorize(self.table["query"], sort=True)
            dcode, dnames = pd.factorize(self.table["doc"])
            self._codes = self._index_codes(qcode, qnames, dcode, dnames)
        return self._codes

    def _index_codes(self, qcode, qnames, dcode, dnames) -> dict:
        key = qcode.astype(np.int64) * max(len(dnames), 1) + dcode
        order = np.argsort(key, kind="stable")
        return {"qcode": qcode, "qnames": pd.Index(qnames, dtype=object),
                "dnames": pd.Index(dnames, dtype=object), "keys": key[order],
                "key_levels": self.table["level"].to_numpy()[order]}

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
        """Each query's judged levels (its pool), as an array, queries in sorted order."""
        c = self._keys()
        order = np.argsort(c["qcode"], kind="stable")
        bounds = np.searchsorted(c["qcode"][order], np.arange(1, len(c["qnames"])))
        parts = np.split(self.table["level"].to_numpy()[order], bounds)
        return dict(zip(c["qnames"].tolist(), parts))

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
        c = self._keys()
        q = np.repeat(np.asarray(queries, dtype=object), docs.shape[1]).astype(str)
        d = docs.reshape(-1).astype(str)
        qc = c["qnames"].get_indexer(q)
        dc = c["dnames"].get_indexer(d)
        key = qc.astype(np.int64) * max(len(c["dnames"]), 1) + dc
        pos = np.minimum(np.searchsorted(c["keys"], key), max(len(c["keys"]) - 1, 0))
        found = (qc >= 0) & (dc >= 0) & (c["keys"][pos] == key) if len(c["keys"]) else np.zeros(key.size, bool)
        levels = np.where(found, c["key_levels"][pos] if len(c["keys"]) else 0, unjudged).astype(float)
        empty = (d == "") | (d == "nan")
        levels = np.where(empty, np.nan, levels)
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
    if abs(value) > MAX_LEVEL:
        raise InputFileError(path, f"level {text} is not a relevance level (expected an integer "
                                   f"between -{MAX_LEVEL} and {MAX_LEVEL})", line, column)
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
    first = next((ln for ln in text[:65536].splitlines() if ln.strip()), None)
    if first is None and text.strip():
        first = text.strip().splitlines()[0]
    if first is None:
        raise InputFileError(path, "is empty: expected judgments (qid iter docid level, or a CSV/TSV "
                                   "with query, doc, level columns)")
    header = _header_columns(first) if fmt in ("auto", "csv", "tsv") else None
    if fmt in ("csv", "tsv") and header is None:
        raise InputFileError(path, "expected a header naming query, doc and level columns", 1)
    allowed = None
    if levels is not None:
        allowed = set(range(levels)) if isinstance(levels, (int, np.integer)) else set(int(v) for v in levels)
    declared = tuple(sorted(allowed)) if allowed is not None else ()
    fast = _read_fast(text, header, allowed)
    if fast is not None:
        table, codes = fast
        judgments = Judgments(table, declared, str(path))
        judgments._codes = judgments._index_codes(*codes)
        return judgments
    # Something in the file is off: read it line by line to name the first offending line.
    if header:
        rows = _rows_named(text, path, *header)
        level_col = "level"
    else:
        rows = _rows_trec(text.splitlines(), path)
        level_col = None

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
    return Judgments(table, declared, str(path))


def _read_fast(text: str, header, allowed):
    """The whole file in columns (pandas' C parser), checked column by column.

    Returns the (query, doc, level) table of a valid file with the codes it computed on the
    way (handed to :class:`Judgments`, which needs them), or None as soon as any check fails:
    the line-by-line reader then finds the first offending line and names it. Files with '#'
    (comment lines) or quotes also go line by line, where their rules are spelt out.
    """
    if "#" in text or '"' in text:
        return None
    try:
        if header:
            delim, names = header
            table = pd.read_csv(io.StringIO(text), sep=delim, dtype=str, engine="c",
                                keep_default_na=False, quoting=csv.QUOTE_NONE)
            table.columns = [c.strip().lower() for c in table.columns]
            pick = lambda aliases: next((a for a in aliases if a in table.columns), None)
            cols = [pick(QUERY_ALIASES), pick(DOC_ALIASES), pick(LEVEL_ALIASES)]
            if None in cols or len(set(table.columns)) != len(table.columns):
                return None
            q, d = table[cols[0]].str.strip(), table[cols[1]].str.strip()
            level = pd.to_numeric(table[cols[2]].str.strip(), errors="coerce").to_numpy(dtype=float)
        else:
            # names=4: a line with a field too many or too few makes the parser raise
            table = pd.read_csv(io.StringIO(text), sep=r"\s+", header=None, names=range(4),
                                dtype={0: object, 1: object, 2: object, 3: np.float64}, engine="c",
                                quoting=csv.QUOTE_NONE, na_filter=False)
            q, d, level = table[0], table[2], table[3].to_numpy(dtype=float)
    except (ValueError, pd.errors.ParserError):
        return None
    if len(table) == 0 or not np.isfinite(level).all() or (level != np.round(level)).any():
        return None
    if np.abs(level).max() > MAX_LEVEL or (header and ((q == "").any() or (d == "").any())):
        return None
    level = level.astype(np.int64)
    if allowed is not None and not np.isin(level, sorted(allowed)).all():
        return None
    out = pd.DataFrame({"query": q.to_numpy(dtype=object), "doc": d.to_numpy(dtype=object), "level": level})
    qcode, qnames = pd.factorize(out["query"], sort=True)
    dcode, dnames = pd.factorize(out["doc"])
    pair = pd.Series(qcode.astype(np.int64) * max(len(dnames), 1) + dcode)
    dup = pair.duplicated().to_numpy()
    if dup.any():
        same = pd.Series(pair.to_numpy() * (2 * MAX_LEVEL + 1) + level + MAX_LEVEL).duplicated().to_numpy()
        if (dup & ~same).any():
            return None  # a pair judged twice with different levels
        out = out[~dup].reset_index(drop=True)  # an exact repeat adds nothing
        qcode, dcode = qcode[~dup], dcode[~dup]
    return out, (qcode, qnames, dcode, dnames)
