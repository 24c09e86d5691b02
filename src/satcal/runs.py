"""TREC run files: reading, validation, and the (system, query, rank) level cube.

A run line is ``qid Q0 docid rank score tag``. Documents are ranked by decreasing score, ties
broken by decreasing document id, as trec_eval does (the rank column is ignored, as there).
"""
from __future__ import annotations

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
        return list(dict.fromkeys(self.table["system"]))

    def ranked(self, k: int) -> pd.DataFrame:
        """The top k of every (system, query), with ``position`` 0..k-1."""
        t = self.table.sort_values(["system", "query", "score", "doc"], ascending=[True, True, False, False],
                                   kind="mergesort")
        t = t.assign(position=t.groupby(["system", "query"], sort=False).cumcount())
        return t[t["position"] < k]


def _read_run(path: Path) -> pd.DataFrame:
    from .fileio import read_utf8_text
    text = read_utf8_text(path)
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
    table = pd.DataFrame(rows, columns=["system", "query", "doc", "score"])
    tags = table["system"].unique()
    if len(tags) > 1:
        raise InputFileError(path, f"holds several run tags ({', '.join(tags[:3])}); one run per file")
    return table


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
    top = runs.ranked(k)
    top = top[top["query"].isin(queries)]
    lv = judgments.lookup(top["query"].to_numpy(), top["doc"].to_numpy()[:, None], unjudged=unjudged)[:, 0]
    cube = np.full((len(systems), len(queries), k), np.nan)
    s_idx = pd.Index(systems).get_indexer(top["system"])
    q_idx = pd.Index(queries).get_indexer(top["query"])
    cube[s_idx, q_idx, top["position"].to_numpy()] = lv
    return cube, systems, queries
