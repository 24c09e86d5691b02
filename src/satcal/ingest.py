"""Answers in: the canonical answers table and external studies.

An *external study* is a CSV with ``query``, ``a1..a<k>``, ``b1..b<k>`` (document ids in rank
order), ``answer`` (one of the four codes) and optionally ``worker_id``, analysed against a
judgments file (SPEC section 6).
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from .errors import InputFileError, SatcalError
from .judgments import Judgments

__all__ = ["ANSWER_CODES", "ANSWER_ALIASES", "StudyData", "read_external_study", "normalise_answers"]

#: Canonical answer codes, in the example's own A/B orientation.
ANSWER_CODES = ("a_better", "b_better", "both_good", "both_bad")
#: Spellings accepted on input (case-insensitive) for each code.
ANSWER_ALIASES = {
    **{c: c for c in ANSWER_CODES},
    "a": "a_better", "b": "b_better", "good": "both_good", "bad": "both_bad",
    "a better": "a_better", "b better": "b_better", "both good": "both_good", "both bad": "both_bad",
}


@dataclass
class StudyData:
    """Answers to examples, with the levels of both lists: what an analysis needs.

    ``examples`` has ``example_id, query, a1..a<k>, b1..b<k>, ra1..ra<k>, rb1..rb<k>,
    answer`` and optionally ``worker_id``; ``k`` and ``n_levels`` describe the scale.
    """

    examples: pd.DataFrame
    k: int
    n_levels: int
    judgments: Judgments | None = None
    notice: str = ""
    name: str = ""

    def levels(self, side: str) -> np.ndarray:
        """(n, k) levels of list ``side`` ('a' or 'b')."""
        return self.examples[[f"r{side}{i}" for i in range(1, self.k + 1)]].to_numpy(dtype=float)

    @property
    def answers(self) -> np.ndarray:
        return self.examples["answer"].to_numpy()


def normalise_answers(values: pd.Series, path, column: str = "answer", first_line: int = 2) -> pd.Series:
    """Map answer spellings to the canonical codes; an unknown one is a one-line error."""
    key = values.astype(str).str.strip().str.lower().str.replace("-", "_")
    mapped = key.map(lambda v: ANSWER_ALIASES.get(v, ANSWER_ALIASES.get(v.replace("_", " "))))
    bad = mapped.isna().to_numpy()
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise InputFileError(path, f"answer {values.iloc[i]!r} is not one of {', '.join(ANSWER_CODES)}",
                             first_line + i, column)
    return mapped


def _list_columns(columns, side: str) -> list[str]:
    found = sorted((int(m.group(1)), c) for c in columns if (m := re.fullmatch(rf"{side}(\d+)", c)))
    return [c for _, c in found]


def read_external_study(path: "str | os.PathLike", judgments: Judgments, k: int | None = None,
                        n_levels: int | None = None, unjudged: str = "error") -> StudyData:
    """Read an external study's answers and attach the levels of every listed document.

    Parameters
    ----------
    path : path-like
        CSV with ``query``, ``a1..a<k>``, ``b1..b<k>``, ``answer`` and optional ``worker_id``.
    judgments : Judgments
    k : int, optional
        Documents per list; by default the number of ``a<i>`` columns.
    n_levels : int, optional
        L of the scale (top level L-1); by default the judgments' own.
    unjudged : {"error", "zero"}
        A listed document with no judgment is an error (the default, so nothing is silently
        assumed) or counts as level 0 (the usual IR convention).
    """
    if unjudged not in ("error", "zero"):
        raise SatcalError(f"unjudged must be 'error' or 'zero', got {unjudged!r}")
    path = Path(path)
    try:
        table = pd.read_csv(path, dtype=str, keep_default_na=False, encoding="utf-8-sig")
    except FileNotFoundError:
        raise SatcalError(f"{path}: no such file") from None
    except (pd.errors.ParserError, UnicodeDecodeError) as exc:
        raise InputFileError(path, f"is not a readable UTF-8 CSV ({str(exc).splitlines()[0]})") from None
    except pd.errors.EmptyDataError:
        raise InputFileError(path, "is empty: expected columns query, a1..a<k>, b1..b<k>, answer") from None
    table.columns = [c.strip() for c in table.columns]
    a_cols, b_cols = _list_columns(table.columns, "a"), _list_columns(table.columns, "b")
    k = k or len(a_cols)
    expected_a, expected_b = [f"a{i}" for i in range(1, k + 1)], [f"b{i}" for i in range(1, k + 1)]
    missing = [c for c in ["query", *expected_a, *expected_b, "answer"] if c not in table.columns]
    if missing or k == 0:
        raise InputFileError(path, f"missing column(s) {', '.join(missing) or 'a1'}: expected query, "
                                   f"a1..a{k or '<k>'}, b1..b{k or '<k>'}, answer", 1)
    if table.empty:
        raise InputFileError(path, "has a header but no answers")
    answers = normalise_answers(table["answer"], path)
    levels = {}
    for side, cols in (("a", expected_a), ("b", expected_b)):
        docs = table[cols].apply(lambda s: s.str.strip()).to_numpy()
        _check_lists(docs, cols, path)
        lv = judgments.lookup(table["query"].str.strip(), docs)
        if np.isnan(lv).any():
            r, c = map(int, np.argwhere(np.isnan(lv))[0])
            if unjudged == "error" or docs[r, c] == "":
                raise InputFileError(path, f"document {docs[r, c]!r} of query {table['query'].iloc[r]!r} "
                                           f"is not in the judgments (use --unjudged zero to count "
                                           f"unjudged documents as level 0)", r + 2, cols[c])
            lv = np.nan_to_num(lv, nan=0.0)
        levels[side] = lv.astype(int)
    out = pd.DataFrame({"example_id": [str(i + 1) for i in range(len(table))],
                        "query": table["query"].str.strip()})
    for side, cols in (("a", expected_a), ("b", expected_b)):
        for i, c in enumerate(cols):
            out[c] = table[c].str.strip()
        for i in range(k):
            out[f"r{side}{i + 1}"] = levels[side][:, i]
    out["answer"] = answers.to_numpy()
    if "worker_id" in table.columns:
        out["worker_id"] = table["worker_id"].str.strip()
    n_levels = n_levels or judgments.n_levels
    return StudyData(out, k, n_levels, judgments, name=path.stem)


def _check_lists(docs: np.ndarray, cols: list[str], path) -> None:
    """A list never repeats a document and has no empty position."""
    empty = docs == ""
    if empty.any():
        r, c = map(int, np.argwhere(empty)[0])
        raise InputFileError(path, "empty document id", r + 2, cols[c])
    srt = np.sort(docs, axis=1)
    dup = (srt[:, 1:] == srt[:, :-1]).any(axis=1)
    if dup.any():
        r = int(np.flatnonzero(dup)[0])
        raise InputFileError(path, f"list {cols[0][0].upper()} repeats a document", r + 2)
