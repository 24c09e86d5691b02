"""TREC run files: reading, validation, and the (system, query, rank) level cube.

A run line is ``qid Q0 docid rank score tag``. Documents are ranked by decreasing score, ties
broken by decreasing document id, as trec_eval does (the rank column is ignored, as there).
"""
from __future__ import annotations

import csv
import io
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np
import pandas as pd

from .errors import InputFileError, SatcalError
from .judgments import Judgments

__all__ = ["Runs", "read_runs", "level_cube"]


@dataclass
class Runs:
    """Retrieved documents of several systems: ``system, query, doc, score``."""

    table: pd.DataFrame

    @property
    def systems(self) -> list[str]:
        return pd.unique(self.table["system"].to_numpy(dtype=object)).tolist()

    def ranked(self, k: int) -> pd.DataFrame:
        """The top k of every (system, query), with ``position`` 0..k-1.

        Sorted by system and query, then by decreasing score, ties by decreasing document id
        (trec_eval). One numeric sort: document ids are compared only inside groups of tied
        scores, where they decide the order.
        """
        t = self.table
        scode, _ = pd.factorize(t["system"], sort=True)
        qcode, _ = pd.factorize(t["query"], sort=True)
        score = t["score"].to_numpy(dtype=float)
        order = np.lexsort((-score, qcode, scode))
        group = scode[order].astype(np.int64) * (int(qcode.max()) + 1 if qcode.size else 1) + qcode[order]
        tied = np.zeros(order.size, dtype=bool)
        same = (group[1:] == group[:-1]) & (score[order][1:] == score[order][:-1])
        tied[1:] |= same
        tied[:-1] |= same
        if tied.any():
            rows = order[tied]
            doc_rank = np.zeros(order.size, dtype=np.int64)
            doc_rank[rows] = pd.factorize(t["doc"].to_numpy()[rows], sort=True)[0]
            order = np.lexsort((-doc_rank, -score, qcode, scode))
            group = scode[order].astype(np.int64) * (int(qcode.max()) + 1) + qcode[order]
        start = np.ones(order.size, dtype=bool)
        start[1:] = group[1:] != group[:-1]
        first = np.maximum.accumulate(np.where(start, np.arange(order.size), 0))
        position = np.arange(order.size) - first
        keep = position < k
        out = t.iloc[order[keep]].assign(position=position[keep])
        return out


def _read_run(path: Path) -> pd.DataFrame:
    from .fileio import read_utf8_text
    text = read_utf8_text(path)
    table = _read_run_fast(text)
    if table is None:  # something is off: read line by line to name the first offending line
        table = _read_run_lines(path, text)
    tags = table["system"].unique()
    if len(tags) > 1:
        raise InputFileError(path, f"holds several run tags ({', '.join(tags[:3])}); one run per file")
    return table


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
    """Read many TREC run files; each file is one system, named by its tag."""
    if not paths:
        raise SatcalError("no run files given")
    tables = []
    names: dict[str, Path] = {}
    for p in paths:
        t = _read_run(Path(p))
        tag = t["system"].iloc[0]
        if tag in names:
            raise SatcalError(f"{p}: run tag {tag!r} is also the tag of {names[tag]}; tags name systems")
        names[tag] = Path(p)
        tables.append(t)
    return Runs(pd.concat(tables, ignore_index=True))


def level_cube(runs: Runs, judgments: Judgments, k: int, queries: Sequence[str] | None = None,
               unjudged: float = 0.0):
    """Levels of every system's top k for every query: (S, Q, k), NaN where a run has fewer
    than k documents (or none) for a query; unjudged documents get ``unjudged`` (level 0 by
    the usual convention). Queries default to those judged."""
    queries = list(queries) if queries is not None else judgments.queries
    systems = runs.systems
    judged = runs.table["query"].isin(set(queries))
    blind = sorted(set(runs.table["system"]) - set(runs.table.loc[judged, "system"]))
    if blind:
        raise SatcalError(f"run {blind[0]!r} retrieves documents for no judged query (its query ids "
                          f"are not those of the judgments): every query would score 0")
    top = runs.ranked(k)
    top = top[top["query"].isin(queries)]
    lv = judgments.lookup(top["query"].to_numpy(), top["doc"].to_numpy()[:, None], unjudged=unjudged)[:, 0]
    cube = np.full((len(systems), len(queries), k), np.nan)
    s_idx = pd.Index(systems).get_indexer(top["system"])
    q_idx = pd.Index(queries).get_indexer(top["query"])
    cube[s_idx, q_idx, top["position"].to_numpy()] = lv
    return cube, systems, queries
