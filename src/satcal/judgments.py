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
from pathlib import Path
from typing import Iterable, Sequence

import numpy as np

from ._lazy import pandas as pd
from .errors import InputFileError, SatcalError
from .fileio import decode_utf8, read_file_bytes, read_utf8_text
from .trecfile import TokenIds, read_columns

__all__ = ["Judgments", "read_judgments", "require_judgments", "QUERY_ALIASES", "DOC_ALIASES", "LEVEL_ALIASES"]

QUERY_ALIASES = ("query", "qid", "query_id", "topic", "topic_id")
DOC_ALIASES = ("doc", "docid", "doc_id", "docno", "document")
LEVEL_ALIASES = ("level", "relevance", "rel", "label", "grade", "judgment")
#: Largest |level| accepted: relevance scales are small; a larger number is a broken file.
MAX_LEVEL = 1000


def _distinct_levels(level: np.ndarray) -> list[int]:
    """The distinct levels, by counting (levels are small integers, bounded by MAX_LEVEL)."""
    lowest = int(level.min())
    if lowest < -MAX_LEVEL or int(level.max()) > MAX_LEVEL:
        return np.unique(level).tolist()
    return (np.flatnonzero(np.bincount(level - lowest)) + lowest).tolist()


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

    Examples
    --------
    >>> import pandas as pd
    >>> j = Judgments(pd.DataFrame({"query": ["q1", "q1", "q2"], "doc": ["d1", "d2", "d3"],
    ...                             "level": [2, 0, -1]}))
    >>> j.levels, j.queries, j.top_level
    ((-1, 0, 1, 2), ['q1', 'q2'], 2)
    >>> j.lookup(["q1", "q2"], [["d1", "d9"], ["d3", ""]]).tolist()
    [[2.0, nan], [-1.0, nan]]
    """

    def __init__(self, table: pd.DataFrame, levels: Sequence[int] = (), source: str = "<judgments>"):
        t = table.loc[:, ["query", "doc", "level"]]
        self._table = pd.DataFrame({"query": t["query"].astype(str), "doc": t["doc"].astype(str),
                                    "level": t["level"].to_numpy(dtype=np.int64)})
        self._ids = None
        self._set_levels(self._table["level"].to_numpy(), levels, source)

    @classmethod
    def _from_ids(cls, queries: TokenIds, docs: TokenIds, level: np.ndarray, levels: Sequence[int],
                  source: str, key_order: np.ndarray) -> "Judgments":
        """Judgments read by the columnar reader: the string table is built only if asked for.
        ``queries`` are in sorted code order; ``key_order`` sorts the (query, doc) keys."""
        self = cls.__new__(cls)
        self._table = None
        self._ids = (queries, docs, level)
        self._set_levels(level, levels, source)
        self._codes = self._index_codes(queries.codes, queries.names, docs.codes, None, len(docs), key_order)
        return self

    def _set_levels(self, level: np.ndarray, levels: Sequence[int], source: str) -> None:
        self.source = source
        self.levels = tuple(levels)
        if not self.levels:
            present = _distinct_levels(level) if len(level) else [0]
            top = max(present[-1], 0)
            # the scale 0..top, plus any negative levels present (top is bounded by the reader)
            self.levels = tuple(sorted(set(range(0, min(top, MAX_LEVEL) + 1)) | set(present)))
        self._codes = None

    @property
    def table(self) -> pd.DataFrame:
        """One row per judged pair: ``query``, ``doc`` (strings) and ``level`` (integers)."""
        if self._table is None:
            queries, docs, level = self._ids
            self._table = pd.DataFrame({"query": queries.values(), "doc": docs.values(), "level": level})
        return self._table

    def _level_column(self) -> np.ndarray:
        return self._ids[2] if self._table is None else self._table["level"].to_numpy()

    def __repr__(self) -> str:
        return (f"Judgments({len(self):,} pairs, {len(self._keys()['qnames']):,} queries, levels "
                f"{list(self.levels)}, source={self.source!r})")

    def _keys(self):
        """Integer codes of the table, built on first use: sorted query names and each row's
        query code, a doc index and each row's doc code, and the sorted (query, doc) keys."""
        if self._codes is None:
            if self._ids is not None:
                queries, docs, _ = self._ids
                self._codes = self._index_codes(queries.codes, queries.names, docs.codes, None, len(docs))
            else:
                qcode, qnames = pd.factorize(self._table["query"], sort=True)
                dcode, dnames = pd.factorize(self._table["doc"])
                self._codes = self._index_codes(qcode, qnames, dcode, dnames, len(dnames))
        return self._codes

    def _index_codes(self, qcode, qnames, dcode, dnames, n_docs: int, order=None) -> dict:
        key = qcode.astype(np.int64) * max(n_docs, 1) + dcode
        order = np.argsort(key) if order is None else order  # keys are distinct: any sort will do
        return {"qcode": qcode, "qnames": np.asarray(qnames, dtype=object), "n_docs": n_docs,
                "dnames": None if dnames is None else pd.Index(dnames, dtype=object),
                "keys": key[order], "key_levels": self._level_column()[order]}

    def _query_codes(self, names) -> np.ndarray:
        """The code of each query name (its place among the sorted judged queries), -1 if none."""
        qnames = self._keys()["qnames"]
        names = np.asarray(names, dtype=object)
        if not len(qnames):
            return np.full(len(names), -1, dtype=np.int64)
        at = np.minimum(np.searchsorted(qnames, names), len(qnames) - 1)
        return np.where(qnames[at] == names, at, -1)

    def _doc_index(self) -> pd.Index:
        c = self._keys()
        if c["dnames"] is None:
            c["dnames"] = pd.Index(self._ids[1].names, dtype=object)
        return c["dnames"]

    # -- summary ---------------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self._level_column())

    @property
    def queries(self) -> list[str]:
        """The judged queries, sorted."""
        return self._keys()["qnames"].tolist()

    @property
    def top_level(self) -> int:
        """The highest level of the declared scale."""
        return max(self.levels)

    @property
    def n_levels(self) -> int:
        """L, the number of non-negative levels 0..L-1 of the declared scale."""
        return self.top_level + 1

    def pools(self) -> dict[str, np.ndarray]:
        """Each query's judged levels (its pool), as an array, queries in sorted order.

        Returns
        -------
        dict of str to numpy.ndarray
        """
        c = self._keys()  # the sorted keys group the pairs by query
        bounds = np.searchsorted(c["keys"], np.arange(1, len(c["qnames"])) * max(c["n_docs"], 1))
        return dict(zip(c["qnames"].tolist(), np.split(c["key_levels"], bounds)))

    def docs_by_level(self) -> dict[str, dict[int, np.ndarray]]:
        """For each query, the judged documents at each level.

        Returns
        -------
        dict of str to dict of int to numpy.ndarray
        """
        out: dict[str, dict[int, np.ndarray]] = {}
        for (q, lv), g in self.table.groupby(["query", "level"], sort=True)["doc"]:
            out.setdefault(q, {})[int(lv)] = g.to_numpy()
        return out

    # -- look-up ---------------------------------------------------------------------------
    def lookup(self, queries: Sequence[str], docs, unjudged: float = np.nan) -> np.ndarray:
        """Levels of a (n, k) array of document ids, each row for ``queries[row]``.

        Parameters
        ----------
        queries : sequence of str, length n
        docs : array-like of str, shape (n, k) or (n,)
            Document ids; an empty id (a run shorter than k) is always NaN.
        unjudged : float, default NaN
            The level of a document not judged for its query (NaN lets callers decide).

        Returns
        -------
        numpy.ndarray of float, shape (n, k)
        """
        docs = np.asarray(docs, dtype=object)
        if docs.ndim == 1:
            docs = docs[:, None]
        q = np.repeat(np.asarray(queries, dtype=object), docs.shape[1]).astype(str)
        d = docs.reshape(-1).astype(str)
        levels = self._levels_at(self._query_codes(q), self._doc_index().get_indexer(d),
                                 unjudged)
        empty = (d == "") | (d == "nan")
        levels = np.where(empty, np.nan, levels)
        return levels.reshape(docs.shape)

    def _levels_at(self, query_code: np.ndarray, doc_code: np.ndarray, unjudged: float) -> np.ndarray:
        """Levels of (query code, doc code) pairs in this object's codes; -1 codes are unjudged."""
        c = self._keys()
        keys = c["keys"]
        key = query_code.astype(np.int64) * max(c["n_docs"], 1) + doc_code
        if not len(keys):
            return np.full(key.size, unjudged, dtype=float)
        pos = np.minimum(np.searchsorted(keys, key), len(keys) - 1)
        found = (query_code >= 0) & (doc_code >= 0) & (keys[pos] == key)
        return np.where(found, c["key_levels"][pos], unjudged).astype(float)

    def to_trec(self, path: "str | os.PathLike") -> None:
        """Write TREC qrels (``qid 0 docid level``).

        Parameters
        ----------
        path : path-like
        """
        lines = (self.table["query"] + " 0 " + self.table["doc"] + " " +
                 self.table["level"].astype(str))
        Path(path).write_text("\n".join(lines) + "\n", encoding="utf-8")

    def to_frame(self) -> pd.DataFrame:
        """A copy of :attr:`table`.

        Returns
        -------
        pandas.DataFrame
        """
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


def _names_columns(names: list[str]) -> bool:
    """Whether ``names`` (a first line's fields, lower case) name at least two of the query,
    document and level columns: a header, even when it lacks the third (whose absence is
    then the error, not the number of fields of a qrels line)."""
    return sum(any(n in aliases for n in names) for aliases in (QUERY_ALIASES, DOC_ALIASES, LEVEL_ALIASES)) >= 2


def _header_columns(first_line: str) -> tuple[str, list[str]] | None:
    for delim in ("\t", ","):
        if delim in first_line:
            names = [c.strip().strip('"').lower() for c in first_line.split(delim)]
            if _names_columns(names):
                return delim, names
    return None


def _rows_trec(lines: list[str], path) -> Iterable[tuple[int, str, str, str]]:
    first = True
    for number, line in enumerate(lines, start=1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        parts = line.split()
        if first and _names_columns([p.strip('"').lower() for p in parts]):
            raise InputFileError(path, f"the header {' '.join(parts)!r} is separated by spaces: a CSV/TSV "
                                       "needs commas or tabs between its query, doc and level columns "
                                       "(TREC qrels 'qid iter docid level' have no header)", number)
        first = False
        if len(parts) != 4:
            raise InputFileError(path, f"expected 4 fields 'qid iter docid level', found {len(parts)}",
                                 number)
        yield number, parts[0], parts[2], parts[3]


def _rows_named(text: str, path, delim: str, names: list[str]):
    def pick(aliases, what):
        """The position in the header of the first of ``aliases`` it holds.

        Parameters
        ----------
        aliases : sequence of str
            Accepted names of the column.
        what : str
            The column, as the error names it.

        Raises
        ------
        InputFileError
            The header holds none of them.
        """
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


def require_judgments(judgments) -> "Judgments":
    """``judgments`` itself when it is a :class:`Judgments`, else a one-line error saying how to
    make one (a path passed where a table is expected fails later, and obscurely).

    Parameters
    ----------
    judgments : object

    Returns
    -------
    Judgments

    Raises
    ------
    SatcalError
        It is not a Judgments.
    """
    if not isinstance(judgments, Judgments):
        raise SatcalError(f"judgments must be a Judgments: read the file with satcal.read_judgments(path), "
                          f"got {type(judgments).__name__}")
    return judgments


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

    Returns
    -------
    Judgments

    Raises
    ------
    InputFileError
        Naming file and line: non-integer level, wrong number of fields, a (query, doc)
        judged twice with different levels, a level outside the declared scale, no rows.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "qrels"
    >>> _ = path.write_text("q1 0 d1 2\\nq1 0 d2 0\\nq2 0 d3 1\\n")
    >>> j = read_judgments(path, levels=3)
    >>> len(j), j.levels, j.pools()["q1"].tolist()
    (3, (0, 1, 2), [2, 0])
    """
    path = Path(path)
    raw = read_file_bytes(path)
    sniff = raw[:65536].decode("utf-8-sig", errors="replace")  # enough to tell the format
    first = next((ln for ln in sniff.splitlines() if ln.strip()), None)
    header = _header_columns(first) if first is not None and fmt in ("auto", "csv", "tsv") else None
    allowed = None
    if levels is not None:
        allowed = set(range(levels)) if isinstance(levels, (int, np.integer)) else set(int(v) for v in levels)
    declared = tuple(sorted(allowed)) if allowed is not None else ()
    if not header and fmt != "csv" and fmt != "tsv":
        columnar = _read_columnar(raw, allowed, declared, str(path))
        if columnar is not None:
            return columnar
    text = decode_utf8(raw, path)
    first = next((ln for ln in text[:65536].splitlines() if ln.strip()), None)
    if first is None and text.strip():
        first = text.strip().splitlines()[0]
    if first is None:
        raise InputFileError(path, "is empty: expected judgments (qid iter docid level, or a CSV/TSV "
                                   "with query, doc, level columns)")
    header = _header_columns(first) if fmt in ("auto", "csv", "tsv") else None
    if fmt in ("csv", "tsv") and header is None:
        raise InputFileError(path, "expected a header naming query, doc and level columns", 1)
    fast = _read_fast(text, header, allowed)
    if fast is not None:
        table, codes = fast
        judgments = Judgments(table, declared, str(path))
        judgments._codes = judgments._index_codes(*codes, len(codes[3]))
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


def _read_columnar(raw: bytes, allowed, declared: tuple, source: str) -> Judgments | None:
    """A plain TREC qrels read in columns from its bytes (see :mod:`satcal.trecfile`), checked
    column by column; None as soon as anything is off (the slower readers then take over)."""
    columns = read_columns(raw, 4, ids=(0, 2), numbers=(3,), forbidden=b'"#')
    if columns is None:
        return None
    queries, docs, level = columns[0].sorted(), columns[2], columns[3]
    if not np.isfinite(level).all() or (level != np.round(level)).any() or np.abs(level).max() > MAX_LEVEL:
        return None
    level = level.astype(np.int64)
    if allowed is not None and not np.isin(level, sorted(allowed)).all():
        return None
    pair = queries.codes * max(len(docs), 1) + docs.codes
    order = np.argsort(pair)
    repeat = pair[order][1:] == pair[order][:-1]
    if repeat.any():
        order = np.argsort(pair, kind="stable")  # so that the first of repeated lines is kept
        repeat = pair[order][1:] == pair[order][:-1]
        if (level[order][1:][repeat] != level[order][:-1][repeat]).any():
            return None  # a pair judged twice with different levels
        keep = np.ones(len(pair), dtype=bool)
        keep[order[1:][repeat]] = False  # an exact repeat adds nothing
        renumber = np.cumsum(keep) - 1
        order = renumber[order[np.concatenate([[True], ~repeat])]]
        queries = TokenIds(queries.codes[keep], queries.words, queries._names)
        docs = TokenIds(docs.codes[keep], docs.words)
        level = level[keep]
    return Judgments._from_ids(queries, docs, level, declared, source, order)


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
