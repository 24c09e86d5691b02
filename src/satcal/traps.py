"""Trap questions: examples with known acceptable answers, used to score workers (SPEC 5.2).

Built from the judgments, spread evenly over the four answers:

- ``a_better``: A all good (the query's best judged documents), B all bad (the lowest level);
- ``b_better``: the mirror image;
- ``both_good``: A and B both all good;
- ``both_bad``: A and B both all bad.

Or read from a user file with ``query, a1..a<k>, b1..b<k>, expected`` where ``expected`` lists
one or more acceptable codes separated by ``;`` or ``|``.
"""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pandas as pd

from .errors import InputFileError, SatcalError
from .judgments import Judgments

__all__ = ["build_traps", "read_traps", "TRAP_KINDS", "parse_expected"]

TRAP_KINDS = ("a_better", "b_better", "both_good", "both_bad")
_CODES = set(TRAP_KINDS)


def _trap_lists(kind: str):
    """Which end of the scale list A and list B are drawn from."""
    return {"a_better": ("top", "bottom"), "b_better": ("bottom", "top"),
            "both_good": ("top", "top"), "both_bad": ("bottom", "bottom")}[kind]


def build_traps(judgments: Judgments, k: int = 5, n: int = 20, seed: int = 0,
                levels=None) -> pd.DataFrame:
    """``n`` traps from the judgments, their expected answers spread evenly over the four codes.

    A *good* list holds k documents judged at or above the query's good level, a *bad* list k
    documents at the bottom level of ``levels`` (default: the judgments' scale). The good level
    is the highest level at which the query has k documents at or above it (the top of the
    scale where the judgments allow), so traps work on any judgments: a query without k
    documents at the very top still gives clear traps from its best documents. Queries with the
    highest good levels are used first, and evenly; documents are drawn without replacement.
    What was built is described in ``traps.attrs["built"]``.

    Returns
    -------
    DataFrame with ``trap_id, query, a1..a<k>, b1..b<k>, ra1..ra<k>, rb1..rb<k>, expected``.
    """
    if n < 0:
        raise SatcalError(f"the number of traps must be >= 0, got {n}")
    if n == 0:
        return _empty(k)
    levels = sorted(levels if levels is not None else judgments.levels)
    bottom = min(levels)
    above = [lv for lv in levels if lv > bottom]
    by_level = judgments.docs_by_level()
    good_level = {}
    for q, docs in by_level.items():
        if len(docs.get(bottom, ())) < k:
            continue
        for lv in sorted(above, reverse=True):
            if sum(len(docs.get(x, ())) for x in above if x >= lv) >= k:
                good_level[q] = lv
                break
    if not good_level:
        raise SatcalError(f"no query has {k} judged documents above level {bottom} and {k} at level "
                          f"{bottom}, which the built-in traps need; give a traps file (traps.file in "
                          "study.toml) or lower k")
    # the best tiers of good level first, enough of them to vary the queries
    tiers = sorted(set(good_level.values()), reverse=True)
    eligible: list = []
    for lv in tiers:
        eligible += sorted(q for q, g in good_level.items() if g == lv)
        if len(eligible) >= min(n, 5):
            break
    floor = min(good_level[q] for q in eligible)
    rng = np.random.default_rng(seed)
    kinds = [TRAP_KINDS[i % 4] for i in range(n)]
    order = list(rng.permutation(eligible))
    records = []
    for i, kind in enumerate(kinds):
        q = order[i % len(order)]
        pool_good = [(d, x) for x in above if x >= good_level[q] for d in by_level[q].get(x, ())]
        sides = {}
        for side, end in zip(("a", "b"), _trap_lists(kind)):
            if end == "top":
                pick = rng.choice(len(pool_good), size=k, replace=False)
                sides[side] = ([pool_good[j][0] for j in pick], [pool_good[j][1] for j in pick])
            else:
                docs = list(rng.choice(by_level[q][bottom], size=k, replace=False))
                sides[side] = (docs, [bottom] * k)
        records.append({"trap_id": f"trap{i + 1:02d}", "query": q,
                        **{f"a{j + 1}": d for j, d in enumerate(sides["a"][0])},
                        **{f"b{j + 1}": d for j, d in enumerate(sides["b"][0])},
                        **{f"ra{j + 1}": int(v) for j, v in enumerate(sides["a"][1])},
                        **{f"rb{j + 1}": int(v) for j, v in enumerate(sides["b"][1])},
                        "expected": kind})
    traps = pd.DataFrame(records)
    top = max(levels)
    where = f"at level {top}" if floor == top else f"at levels {floor} to {top} (no query has {k} at {top} alone)" \
        if floor < top and all(good_level[q] < top for q in eligible) else f"at level {floor} or above"
    traps.attrs["built"] = (f"{n} traps from {len(set(traps['query']))} queries: good lists of documents "
                            f"{where}, bad lists of documents at level {bottom}")
    return traps


def _empty(k: int) -> pd.DataFrame:
    cols = (["trap_id", "query"] + [f"a{i}" for i in range(1, k + 1)] + [f"b{i}" for i in range(1, k + 1)]
            + [f"ra{i}" for i in range(1, k + 1)] + [f"rb{i}" for i in range(1, k + 1)] + ["expected"])
    return pd.DataFrame(columns=cols)


def parse_expected(text: str) -> list[str]:
    """``"a_better;both_good"`` -> ``["a_better", "both_good"]`` (``|`` also separates)."""
    parts = [p.strip().lower() for p in str(text).replace("|", ";").split(";") if p.strip()]
    return parts


#: Mistakes listed, one line each, before the rest are only counted.
MAX_MISTAKES = 20


def read_traps(path: "str | os.PathLike", judgments: Judgments, k: int, levels=None) -> pd.DataFrame:
    """Traps from a user CSV: ``query, a1..a<k>, b1..b<k>, expected`` (several codes allowed),
    optionally with the documents' levels ``ra1..ra<k>, rb1..rb<k>`` (as in a generated
    ``traps.csv``).

    Checked as the generator builds lists, each mistake one line naming the file, the line and
    the column: an expected answer that is not one of the four codes; an empty document id; a
    document twice in one list; a document the judgments do not give for the query, or give a
    level outside ``levels`` (the study's levels, which lists are built from; default every
    judged level); a level column that is not one of ``levels`` or contradicts the judgments.

    Raises
    ------
    InputFileError
        Its first line is the first mistake; each further mistake follows on a line of its own
        (at most ``MAX_MISTAKES``, then how many more).
    """
    from .fileio import read_delimited
    path = Path(path)
    cols = ["query"] + [f"a{i}" for i in range(1, k + 1)] + [f"b{i}" for i in range(1, k + 1)] + ["expected"]
    table = read_delimited(path, ",", cols, expected="a traps CSV with " + ", ".join(cols),
                           rows="one row per trap")
    scale = sorted(int(v) for v in (levels if levels is not None else judgments.levels))
    scale_text = ", ".join(map(str, scale))
    out = table[cols].copy().reset_index(drop=True)
    line = table["__line__"].to_numpy()
    out.insert(0, "trap_id", [f"trap{i + 1:02d}" for i in range(len(out))])
    mistakes: list[tuple[int, int, str, str]] = []  # (line, column position, column, problem)
    where = {c: i for i, c in enumerate(table.columns)}
    note = lambda r, col, problem: mistakes.append((int(line[r]), where[col], col, problem))
    for r, text in enumerate(out["expected"]):
        codes = parse_expected(text)
        if not codes or any(c not in _CODES for c in codes):
            note(r, "expected", f"expected {text!r} is not one or more of {', '.join(TRAP_KINDS)} "
                                "separated by ';'")
    out["expected"] = out["expected"].map(lambda t: ";".join(parse_expected(t)))
    for side in ("a", "b"):
        names = [f"{side}{i}" for i in range(1, k + 1)]
        docs = out[names].to_numpy(dtype=object)
        lv = judgments.lookup(out["query"], docs)
        given = [f"r{side}{i}" for i in range(1, k + 1)]
        given = table[given].reset_index(drop=True) if all(c in table.columns for c in given) else None
        for r in range(len(out)):
            query = out["query"].iloc[r]
            for i, col in enumerate(names):
                doc = docs[r, i]
                if not str(doc).strip():
                    note(r, col, "empty document id")
                    continue
                first = next((names[j] for j in range(i) if docs[r, j] == doc), None)
                if first is not None:
                    note(r, col, f"document {doc!r} is in list {side} twice (columns {first} and {col}): "
                                 "a list holds distinct documents")
                if np.isnan(lv[r, i]):
                    note(r, col, f"document {doc!r} of query {query!r} is not in the judgments")
                    continue
                level = int(lv[r, i])
                if level not in scale:
                    note(r, col, f"document {doc!r} of query {query!r} is judged {level}, outside the "
                                 f"study's levels {scale_text}")
                if given is not None:
                    text = str(given.iloc[r, i]).strip()
                    try:
                        stated = int(text)
                    except ValueError:
                        stated = None
                    if stated is None or (stated not in scale and stated != level):
                        note(r, f"r{col}", f"level {stated if stated is not None else text!r} is not one of "
                                           f"the study's levels {scale_text}")
                    elif stated != level:  # (a judged level out of the scale is named above)
                        note(r, f"r{col}", f"level {stated} but the judgments give document {doc!r} of "
                                           f"query {query!r} level {level}")
        if not mistakes:
            for i in range(k):
                out[f"r{side}{i + 1}"] = lv[:, i].astype(int)
    if mistakes:
        mistakes.sort(key=lambda m: (m[0], m[1]))
        lines = [str(InputFileError(path, problem, ln, col)) for ln, _, col, problem in mistakes]
        error = InputFileError(path, mistakes[0][3], mistakes[0][0], mistakes[0][2])
        more = len(lines) - MAX_MISTAKES
        error.args = ("\n".join(lines[:MAX_MISTAKES] + ([f"{path}: and {more} more mistakes"] if more > 0 else [])),)
        raise error
    return out
