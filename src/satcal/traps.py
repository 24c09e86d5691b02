"""Trap questions: examples with known acceptable answers, used to score workers.

Built from the judgments so that the expected answer follows from the order of the relevance
levels alone, not from any model of users (``TRAP_RULE``):

- ``a_better``: A of k documents at the scale's top level, B of k non-relevant documents;
- ``b_better``: the mirror image;
- ``both_good``: A and B both of top-level documents;
- ``both_bad``: A and B both of non-relevant documents.

Non-relevant documents are those at the levels at or below 0 of the study's levels (the bottom
level when every level is positive). Where no query has k documents at the top level, the
good list holds the query's best k documents instead: A is then better than B by the order, but
whether such a list satisfies is the user's call, so these traps accept ``a_better;both_bad``,
and no ``both_good`` trap is built (its answer would rest on a user model).

Or read from a user file with ``query, a1..a<k>, b1..b<k>, expected`` where ``expected`` lists
one or more acceptable codes separated by ``;`` or ``|``.
"""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pandas as pd

from .errors import InputFileError, SatcalError, check_seed
from .judgments import Judgments

__all__ = ["build_traps", "read_traps", "TRAP_KINDS", "parse_expected", "TRAP_RULE"]

TRAP_KINDS = ("a_better", "b_better", "both_good", "both_bad")
_CODES = set(TRAP_KINDS)
#: The rule of the built-in traps, in one sentence (printed by generate).
TRAP_RULE = ("built-in traps expect only what the levels' order implies for any user: top-level lists "
             "beat non-relevant ones (a_better/b_better), two top-level lists are both good, two "
             "non-relevant lists both bad; a best-available list that is not all top level, against a "
             "non-relevant one, accepts 'better' or 'both bad'")


def _nonrelevant(levels) -> list[int]:
    """The levels counted as non-relevant: those at or below 0, or the bottom one."""
    return [lv for lv in levels if lv <= max(min(levels), 0)]


def build_traps(judgments: Judgments, k: int = 5, n: int = 20, seed: int = 0,
                levels=None) -> pd.DataFrame:
    """``n`` traps from the judgments whose expected answers hold for any reasonable user.

    A *top* list holds k documents at the top level of ``levels`` (default: the judgments'
    scale): phi = 1 under every gain and discount of the ``max`` normalisation. A *bad* list
    holds k non-relevant documents (levels at or below 0, or the bottom level where all are
    positive): phi <= 0. Traps are ``a_better``/``b_better`` (top against bad), ``both_good``
    (top against top, other documents where the query has 2k) and ``both_bad`` (bad against bad),
    spread evenly, from the queries that can build them, used evenly.

    Where no query has k documents at the top level, the good list holds a query's best k
    documents (the queries with the best such lists first); those traps accept ``a_better``
    or ``both_bad`` (the mirror ones ``b_better`` or ``both_bad``), and none is ``both_good``:
    the order of the levels says which list is better, not whether a list of, say, level-2
    documents satisfies. What was built is described in ``traps.attrs["built"]``.

    Parameters
    ----------
    judgments : Judgments
    k : int, default 5
        Documents per list.
    n : int, default 20
        Traps to build.
    seed : int, default 0
    levels : sequence of int, optional
        The study's levels; default the judgments' scale.

    Returns
    -------
    DataFrame with ``trap_id, query, a1..a<k>, b1..b<k>, ra1..ra<k>, rb1..rb<k>, expected``.
"""
    if n < 0:
        raise SatcalError(f"the number of traps must be >= 0, got {n}")
    check_seed(seed)
    if n == 0:
        return _empty(k)
    levels = sorted(levels if levels is not None else judgments.levels)
    top, bad_levels = max(levels), _nonrelevant(levels)
    relevant = [lv for lv in levels if lv not in bad_levels]
    by_level = judgments.docs_by_level()
    bad_pool = {q: [(d, x) for x in bad_levels for d in docs.get(x, ())] for q, docs in by_level.items()}
    with_bad = sorted(q for q in by_level if len(bad_pool[q]) >= k)
    with_top = [q for q in with_bad if len(by_level[q].get(top, ())) >= k]
    bad_text = f"level {bad_levels[0]}" if len(bad_levels) == 1 else f"levels {bad_levels[0]} to {bad_levels[-1]}"
    if with_top:
        good_pool = {q: [(d, top) for d in by_level[q][top]] for q in with_top}
        good_queries, all_top = with_top, True
        kinds = [TRAP_KINDS[i % 4] for i in range(n)]
    else:
        # the best k documents of each query, and the level the k-th of them reaches
        floor = {}
        for q in with_bad:
            docs = by_level[q]
            got = 0
            for lv in sorted(relevant, reverse=True):
                got += len(docs.get(lv, ()))
                if got >= k:
                    floor[q] = lv
                    break
        if not floor:
            raise SatcalError(f"no query has {k} judged relevant documents (above {bad_text}) and {k} "
                              f"non-relevant ones ({bad_text}), which the built-in traps need; give a traps "
                              "file (traps.file in study.toml) or lower k")
        tiers = sorted(set(floor.values()), reverse=True)
        good_queries = []
        for lv in tiers:  # the best tiers first, enough of them to vary the queries
            good_queries += sorted(q for q, f in floor.items() if f == lv)
            if len(good_queries) >= min(n, 5):
                break
        good_pool = {q: [(d, x) for x in relevant if x >= floor[q] for d in by_level[q].get(x, ())]
                     for q in good_queries}
        all_top = False
        kinds = [("a_better", "b_better", "both_bad")[i % 3] for i in range(n)]
    rng = np.random.default_rng(seed)
    order_good = list(rng.permutation(good_queries))
    order_bad = list(rng.permutation(with_bad))
    used_good = used_bad = 0
    records = []
    for i, kind in enumerate(kinds):
        if kind == "both_bad":
            q = order_bad[used_bad % len(order_bad)]
            used_bad += 1
            a, b = _two_lists(bad_pool[q], k, rng)
        else:
            q = order_good[used_good % len(order_good)]
            used_good += 1
            if kind == "both_good":
                a, b = _two_lists(good_pool[q], k, rng)
            else:
                good, bad = _draw(good_pool[q], k, rng), _draw(bad_pool[q], k, rng)
                a, b = (good, bad) if kind == "a_better" else (bad, good)
        expected = kind
        if not all_top and kind in ("a_better", "b_better"):
            # not all at the top: better by the order, but both may be unsatisfying
            good = a if kind == "a_better" else b
            if any(x != top for _, x in good):
                expected = f"{kind};both_bad"
        records.append({"trap_id": f"trap{i + 1:02d}", "query": q,
                        **{f"a{j + 1}": d for j, (d, _) in enumerate(a)},
                        **{f"b{j + 1}": d for j, (d, _) in enumerate(b)},
                        **{f"ra{j + 1}": int(x) for j, (_, x) in enumerate(a)},
                        **{f"rb{j + 1}": int(x) for j, (_, x) in enumerate(b)},
                        "expected": expected})
    traps = pd.DataFrame(records)
    n_q = len(set(traps["query"]))
    if all_top:
        traps.attrs["built"] = (f"{n} traps from {n_q} queries: good lists of documents at level {top}, "
                                f"bad lists of non-relevant documents ({bad_text})")
    else:
        lowest = min(x for side in ("ra", "rb") for j in range(1, k + 1)
                     for x in traps[f"{side}{j}"] if x not in bad_levels)
        traps.attrs["built"] = (f"{n} traps from {n_q} queries: no query has {k} documents at level {top}, so "
                                f"good lists hold each query's best documents (levels {lowest} to {top}) and "
                                f"accept 'better' or 'both bad'; bad lists of non-relevant documents ({bad_text}); "
                                "no 'both good' trap (merging the top levels in study.levels would allow them)")
    return traps


def _draw(pool: list, k: int, rng) -> list:
    """k distinct (document, level) pairs of ``pool``, in random order."""
    return [pool[j] for j in rng.choice(len(pool), size=k, replace=False)]


def _two_lists(pool: list, k: int, rng) -> tuple[list, list]:
    """Two lists of ``pool``: of different documents where the pool has 2k, else the second
    reuses documents (never in the same order, where k > 1)."""
    if len(pool) >= 2 * k:
        pick = rng.choice(len(pool), size=2 * k, replace=False)
        return [pool[j] for j in pick[:k]], [pool[j] for j in pick[k:]]
    a = _draw(pool, k, rng)
    for _attempt in range(20):
        b = _draw(pool, k, rng)
        if b != a or k == 1:
            break
    return a, b


def _empty(k: int) -> pd.DataFrame:
    cols = (["trap_id", "query"] + [f"a{i}" for i in range(1, k + 1)] + [f"b{i}" for i in range(1, k + 1)]
            + [f"ra{i}" for i in range(1, k + 1)] + [f"rb{i}" for i in range(1, k + 1)] + ["expected"])
    return pd.DataFrame(columns=cols)


def parse_expected(text: str) -> list[str]:
    """``"a_better;both_good"`` -> ``["a_better", "both_good"]`` (``|`` also separates).

    Parameters
    ----------
    text : str

    Returns
    -------
    list of str
    """
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

    Parameters
    ----------
    path : path-like
    judgments : Judgments
    k : int
        Documents per list.
    levels : sequence of int, optional
        The study's levels; default every judged level.

    Returns
    -------
    pandas.DataFrame
        As :func:`build_traps` gives.

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
