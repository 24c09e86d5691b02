"""TREC run files: reading, validation, and the (system, query, rank) level cube.

A run line is ``qid Q0 docid rank score tag``. Documents are ranked by decreasing score, ties
broken by decreasing document id, as trec_eval does (the rank column is ignored, as there).
"""
from __future__ import annotations

import csv
import io
import os
from pathlib import Path
from typing import Sequence

import numpy as np

from ._lazy import pandas as pd
from .errors import InputFileError, SatcalError
from .judgments import Judgments
from .trecfile import TokenIds, read_columns

__all__ = ["Runs", "read_runs", "level_cube"]


class Runs:
    """Retrieved documents of several systems: ``system, query, doc, score``.

    Parameters
    ----------
    table : pandas.DataFrame
        Columns ``system``, ``query``, ``doc`` (strings) and ``score`` (numbers).
    """

    def __init__(self, table: pd.DataFrame):
        self._table = table
        self._ids = None

    @classmethod
    def _from_ids(cls, system: TokenIds, query: TokenIds, doc: TokenIds, score: np.ndarray,
                  order: Sequence[str]) -> "Runs":
        """Runs read by the columnar reader: the string table is built only if asked for.
        ``order`` names the systems in the order they first appear."""
        self = cls.__new__(cls)
        self._table = None
        self._ids = {"system": system, "query": query, "doc": doc, "score": score, "order": tuple(order)}
        return self

    @property
    def table(self) -> pd.DataFrame:
        """One row per retrieved document: ``system``, ``query``, ``doc`` (strings), ``score``."""
        if self._table is None:
            ids = self._ids
            self._table = pd.DataFrame({"system": ids["system"].values(), "query": ids["query"].values(),
                                        "doc": ids["doc"].values(), "score": ids["score"]})
        return self._table

    def __len__(self) -> int:
        return len(self._ids["score"]) if self._table is None else len(self._table)

    def __repr__(self) -> str:
        return f"Runs({len(self):,} retrieved documents, systems {self.systems})"

    @property
    def systems(self) -> list[str]:
        """System names in the order they first appear."""
        if self._table is None:
            return list(self._ids["order"])
        return pd.unique(self._table["system"].to_numpy(dtype=object)).tolist()

    def _column_codes(self, name: str) -> tuple[np.ndarray, np.ndarray]:
        """Each row's code in the sorted distinct values of a column, and those values."""
        if self._table is None:
            ids = self._ids[name].sorted()
            return ids.codes, ids.names
        return pd.factorize(self._table[name].to_numpy(dtype=object), sort=True)

    def _doc_order(self, rows: np.ndarray) -> np.ndarray:
        """Integer ranks of the documents of ``rows`` in id order (equal ids, equal ranks)."""
        if self._table is None:
            doc = self._ids["doc"]
            distinct, inverse = np.unique(doc.codes[rows], return_inverse=True)
            return TokenIds(inverse.ravel(), doc.words[distinct]).sorted().codes
        return pd.factorize(self._table["doc"].to_numpy(dtype=object)[rows], sort=True)[0]

    def _values(self, name: str, rows: np.ndarray) -> np.ndarray:
        """The strings of a column at ``rows``."""
        if self._table is None:
            ids = self._ids[name]
            return ids.names[ids.codes[rows]]
        return self._table[name].to_numpy(dtype=object)[rows]

    def _score(self) -> np.ndarray:
        return self._ids["score"] if self._table is None else self._table["score"].to_numpy(dtype=float)

    def ranked(self, k: int) -> pd.DataFrame:
        """The top k of every (system, query), with ``position`` 0..k-1.

        Sorted by system and query, then by decreasing score, ties by decreasing document id
        (trec_eval).

        Parameters
        ----------
        k : int
            The cutoff.

        Returns
        -------
        pandas.DataFrame
            ``system, query, doc, score, position``.
        """
        rows, position = self._ranked_rows(k)
        return self.table.iloc[rows].assign(position=position)

    def _ranked_rows(self, k: int) -> tuple[np.ndarray, np.ndarray]:
        """Row numbers of the top k of every (system, query), in ranked order, and their
        positions. Document ids are compared only inside groups of tied scores, where they
        decide the order."""
        scode, _ = self._column_codes("system")
        qcode, _ = self._column_codes("query")
        score = self._score()
        group = scode.astype(np.int64) * (int(qcode.max()) + 1 if qcode.size else 1) + qcode
        order = _order_by_group_then_score(group, score)
        tied = np.zeros(order.size, dtype=bool)
        same = (group[order][1:] == group[order][:-1]) & (score[order][1:] == score[order][:-1])
        tied[1:] |= same
        tied[:-1] |= same
        if tied.any():
            at = np.flatnonzero(tied)
            block = np.cumsum(np.concatenate([[True], ~same[at[1:] - 1]]))  # one per run of ties
            rows = order[at]
            order[at] = rows[np.lexsort((-self._doc_order(rows), block))]
        group = group[order]
        start = np.ones(order.size, dtype=bool)
        start[1:] = group[1:] != group[:-1]
        first = np.maximum.accumulate(np.where(start, np.arange(order.size), 0))
        position = np.arange(order.size) - first
        keep = position < k
        return order[keep], position[keep]


def _order_by_group_then_score(group: np.ndarray, score: np.ndarray) -> np.ndarray:
    """Rows by increasing group, then decreasing score (tied rows in any order).

    A run written in that order (as TREC runs usually are) is taken as it is. Otherwise: a
    sort by decreasing score, then a stable radix sort of the group numbers when they fit in
    16 bits, else one integer sort on ``group * R + descending score rank`` (R distinct
    scores); each is several times faster than a lexicographic sort on the two keys.
    """
    if group.size and (group[1:] >= group[:-1]).all() and \
            ((group[1:] != group[:-1]) | (score[1:] <= score[:-1])).all():
        return np.arange(group.size)
    if group.size and int(group.max()) < 1 << 16:
        by_score = np.argsort(-score)
        return by_score[np.argsort(group[by_score].astype(np.uint16), kind="stable")]
    by_score = np.argsort(score)
    ordered = score[by_score]
    dense = np.empty(score.size, dtype=np.int64)
    dense[by_score] = np.concatenate([[0], np.cumsum(ordered[1:] != ordered[:-1])]) if score.size else []
    distinct = int(dense.max(initial=0)) + 1
    if int(group.max(initial=0)) + 1 > (1 << 62) // distinct:
        return np.lexsort((-score, group))
    return np.argsort(group * distinct + (distinct - 1 - dense))


def _read_run(path: Path) -> Runs:
    from .fileio import decode_utf8, read_file_bytes
    raw = read_file_bytes(path)
    runs = _read_run_columnar(raw)
    if runs is None:
        text = decode_utf8(raw, path)
        table = _read_run_fast(text)
        if table is None:  # something is off: read line by line to name the first offending line
            table = _read_run_lines(path, text)
        runs = Runs(table)
    tags = runs.systems
    if len(tags) > 1:
        raise InputFileError(path, f"holds several run tags ({', '.join(tags[:3])}); one run per file")
    return runs


def _read_run_columnar(raw: bytes) -> Runs | None:
    """A plain run read in columns from its bytes (see :mod:`satcal.trecfile`), checked column
    by column; None as soon as anything is off (the slower readers then take over)."""
    columns = read_columns(raw, 6, ids=(0, 2, 5), numbers=(4,))
    if columns is None or not np.isfinite(columns[4]).all():
        return None
    query, doc, tag = columns[0], columns[2], columns[5]
    pair = query.codes * max(len(doc), 1) + doc.codes
    pair.sort()
    if (pair[1:] == pair[:-1]).any():
        return None  # a document retrieved twice for a query
    first_tag = tag.names[tag.codes[0]]
    return Runs._from_ids(tag, query, doc, columns[4], [first_tag] + [t for t in tag.names if t != first_tag])


def _read_run_fast(text: str) -> pd.DataFrame | None:
    """The whole run in columns (pandas' C parser), checked column by column; None as soon
    as a check fails (the line-by-line reader then names the offending line)."""
    if '"' in text:
        return None
    try:
        # names=6: a line with a field too many or too few makes the parser raise (a missing
        # tag leaves an empty one, caught below)
        t = pd.read_csv(io.StringIO(text), sep=r"\s+", header=None, names=range(6),
                        dtype={0: object, 1: object, 2: object, 3: object, 4: np.float64, 5: object},
                        engine="c", quoting=csv.QUOTE_NONE, na_filter=False)
    except (ValueError, pd.errors.ParserError):
        return None
    score = t[4].to_numpy(dtype=float)
    tags = pd.unique(t[5].to_numpy(dtype=object))
    if len(t) == 0 or "" in tags or not np.isfinite(score).all():
        return None
    qcode, _ = pd.factorize(t[0].to_numpy(dtype=object))
    dcode, dnames = pd.factorize(t[2].to_numpy(dtype=object))
    if pd.Series(qcode.astype(np.int64) * max(len(dnames), 1) + dcode).duplicated().any():
        return None  # a document retrieved twice for a query
    return pd.DataFrame({"system": t[5].to_numpy(dtype=object), "query": t[0].to_numpy(dtype=object),
                         "doc": t[2].to_numpy(dtype=object), "score": score})


def _read_run_lines(path: Path, text: str) -> pd.DataFrame:
    rows = []
    seen: dict[tuple[str, str], int] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        parts = line.split()
        if len(parts) != 6:
            raise InputFileError(path, f"expected 6 fields 'qid Q0 docid rank score tag', found {len(parts)}",
                                 number)
        q, _, doc, _, score, tag = parts
        try:
            value = float(score)
        except ValueError:
            raise InputFileError(path, f"score {score!r} is not a number", number) from None
        if not np.isfinite(value):
            raise InputFileError(path, f"score {score!r} is not finite", number)
        if (q, doc) in seen:
            raise InputFileError(path, f"document {doc!r} is retrieved twice for query {q!r} (first on "
                                       f"line {seen[(q, doc)]})", number)
        seen[(q, doc)] = number
        rows.append((tag, q, doc, value))
    if not rows:
        raise InputFileError(path, "is empty: expected lines 'qid Q0 docid rank score tag'")
    return pd.DataFrame(rows, columns=["system", "query", "doc", "score"])


def read_runs(paths: Sequence["str | os.PathLike"]) -> Runs:
    """Read many TREC run files (``qid Q0 docid rank score tag``); each file is one system,
    named by its tag.

    Parameters
    ----------
    paths : path-like or sequence of path-like
        One run file per system (one path alone is one system).

    Returns
    -------
    Runs

    Raises
    ------
    InputFileError
        Naming file and line: wrong field count, a score that is not a number, a document
        retrieved twice for a query, several run tags in one file.
    SatcalError
        No file given, or two files with one tag.
    """
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]  # else a string is read as a sequence of one-letter paths
    if not paths:
        raise SatcalError("no run files given")
    parts = []
    names: dict[str, Path] = {}
    for p in paths:
        runs = _read_run(Path(p))
        tag = runs.systems[0]
        if tag in names:
            raise SatcalError(f"{p}: run tag {tag!r} is also the tag of {names[tag]}; tags name systems")
        names[tag] = Path(p)
        parts.append(runs)
    if len(parts) == 1:
        return parts[0]
    if all(r._ids is not None for r in parts):
        columns = {c: TokenIds.concat([r._ids[c] for r in parts]) for c in ("system", "query", "doc")}
        return Runs._from_ids(**columns, score=np.concatenate([r._ids["score"] for r in parts]),
                              order=list(names))
    return Runs(pd.concat([r.table for r in parts], ignore_index=True))


def level_cube(runs: Runs, judgments: Judgments, k: int, queries: Sequence[str] | None = None,
               unjudged: float = 0.0):
    """Levels of every system's top k for every query.

    Parameters
    ----------
    runs : Runs
    judgments : Judgments
    k : int
        The cutoff.
    queries : sequence of str, optional
        Default: the judged queries.
    unjudged : float, default 0.0
        The level of a retrieved document not judged for its query (level 0 by the usual
        convention).

    Returns
    -------
    numpy.ndarray of float, shape (S, Q, k)
        Systems in sorted order; NaN where a run has fewer than k documents (or none) for a query.
    """
    queries = list(queries) if queries is not None else judgments.queries
    systems = runs.systems
    scode, snames = runs._column_codes("system")
    qcode, qnames = runs._column_codes("query")
    query_at = _places(queries, qnames)[qcode]  # each row's place in `queries`, or -1
    seeing = np.unique(scode[query_at >= 0])
    blind = np.setdiff1d(np.arange(len(snames)), seeing)
    if blind.size:
        raise SatcalError(f"run {snames[blind[0]]!r} retrieves documents for no judged query (its query "
                          f"ids are not those of the judgments): every query would score 0")
    rows, position = runs._ranked_rows(k)
    keep = query_at[rows] >= 0
    rows, position = rows[keep], position[keep]
    judged_query = judgments._query_codes(qnames)[qcode[rows]]
    lv = judgments._levels_at(judged_query, _judged_doc_codes(runs, judgments, rows), unjudged)
    cube = np.full((len(systems), len(queries), k), np.nan)
    s_idx = _places(systems, snames)[scode[rows]]
    cube[s_idx, query_at[rows], position] = lv
    return cube, systems, queries


def _judged_doc_codes(runs: Runs, judgments: Judgments, rows: np.ndarray) -> np.ndarray:
    """The judgments' code of the document of each of ``rows`` (-1: not judged). Two files
    read in columns are matched on their packed ids, without making strings."""
    if runs._ids is not None and judgments._ids is not None:
        doc = runs._ids["doc"]
        distinct, inverse = np.unique(doc.codes[rows], return_inverse=True)
        return judgments._ids[1].locate(doc.words[distinct])[inverse.ravel()]
    return judgments._doc_index().get_indexer(runs._values("doc", rows))


def _places(names: Sequence[str], wanted) -> np.ndarray:
    """The place of each of ``wanted`` in ``names`` (-1 where absent)."""
    place = {name: i for i, name in enumerate(names)}
    return np.array([place.get(w, -1) for w in wanted], dtype=np.int64)
