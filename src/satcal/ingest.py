"""Answers in: the canonical answers table and external studies.

An *external study* is a CSV with ``query``, ``a1..a<k>``, ``b1..b<k>`` (document ids in rank
order), ``answer`` (one of the four codes) and optionally ``worker_id``, analysed against a
judgments file.
"""
from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from .answers import ANSWER_ALIASES, ANSWER_CODES, StudyData, normalise_answers
from ._results import ResultTables
from .errors import InputFileError, SatcalError
from .fileio import ordinary_pages
from .judgments import Judgments, require_judgments

__all__ = ["ANSWER_CODES", "ANSWER_ALIASES", "StudyData", "read_external_study", "normalise_answers"]

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
        As :func:`satcal.read_judgments` reads them from a file.
    k : int, optional
        Documents per list; by default the number of ``a<i>`` columns.
    n_levels : int, optional
        L of the scale (top level L-1); by default the judgments' own.
    unjudged : {"error", "zero"}
        A listed document with no judgment is an error (the default, so nothing is silently
        assumed) or counts as level 0 (the usual IR convention).

    Returns
    -------
    StudyData

    Raises
    ------
    SatcalError
        ``judgments`` is not a Judgments (a path, say), or ``unjudged`` is neither choice.
    InputFileError
        The answers file lacks a column, or lists a document with no judgment.
    """
    require_judgments(judgments)
    if unjudged not in ("error", "zero"):
        raise SatcalError(f"unjudged must be 'error' or 'zero', got {unjudged!r}")
    from .fileio import read_csv_strings
    path = Path(path)
    table = read_csv_strings(path, "columns query, a1..a<k>, b1..b<k>, answer")
    table.columns = [c.strip() for c in table.columns]
    a_cols = _list_columns(table.columns, "a")
    k = k or len(a_cols)
    expected_a, expected_b = [f"a{i}" for i in range(1, k + 1)], [f"b{i}" for i in range(1, k + 1)]
    missing = [c for c in ["query", *expected_a, *expected_b, "answer"] if c not in table.columns]
    if missing or k == 0:
        raise InputFileError(path, f"missing column(s) {', '.join(missing) or 'a1'}: expected query, "
                                   f"a1..a{k or '<k>'}, b1..b{k or '<k>'}, answer", 1)
    if table.empty:
        raise InputFileError(path, "has a header but no answers")
    answers = normalise_answers(table["answer"], path)
    query_codes, queries = _stripped_codes(table[["query"]])
    doc_codes, docs = _stripped_codes(table[expected_a + expected_b])
    levels = {}
    for side, cols, at in (("a", expected_a, slice(0, k)), ("b", expected_b, slice(k, 2 * k))):
        codes = doc_codes[:, at]
        _check_lists(codes, docs == "", cols, path)
        lv = _pair_levels(judgments, query_codes[:, 0], codes, queries, docs)
        if np.isnan(lv).any():
            r, c = map(int, np.argwhere(np.isnan(lv))[0])
            doc = docs[codes[r, c]]
            if unjudged == "error" or doc == "":
                raise InputFileError(path, f"document {doc!r} of query {table['query'].iloc[r]!r} "
                                           f"is not in the judgments (use --unjudged zero to count "
                                           f"unjudged documents as level 0)", r + 2, cols[c])
            lv = np.nan_to_num(lv, nan=0.0)
        if n_levels is not None and (lv > n_levels - 1).any():
            r, c = map(int, np.argwhere(lv > n_levels - 1)[0])
            raise InputFileError(path, f"document {docs[codes[r, c]]!r} of query {table['query'].iloc[r]!r} "
                                       f"is judged {int(lv[r, c])}, above the top level {n_levels - 1} of "
                                       f"--levels {n_levels} (levels 0..{n_levels - 1})", r + 2, cols[c])
        levels[side] = lv.astype(int)
    text = table["query"].dtype
    out = {"example_id": pd.Series(np.arange(1, len(table) + 1)).astype(str),
           "query": _spread(queries, query_codes[:, 0], text)}
    for side, cols, at in (("a", expected_a, 0), ("b", expected_b, k)):
        for i, c in enumerate(cols):
            out[c] = _spread(docs, doc_codes[:, at + i], text)
        for i in range(k):
            out[f"r{side}{i + 1}"] = levels[side][:, i]
    out["answer"] = answers.to_numpy()
    if "worker_id" in table.columns:
        worker_codes, workers = _stripped_codes(table[["worker_id"]])
        out["worker_id"] = _spread(workers, worker_codes[:, 0], text)
    n_levels = n_levels or judgments.n_levels
    return StudyData(pd.DataFrame(out), k, n_levels, judgments, name=path.stem)


def _stripped_codes(columns: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """(n, m) integer codes of the columns' values with surrounding white space stripped, and
    the distinct stripped values they index: one strip per distinct value, one code space for
    all the columns (so that a document has the same code in every position)."""
    per_column = [pd.factorize(columns.iloc[:, j], use_na_sentinel=False) for j in range(columns.shape[1])]
    raw = pd.Series(np.concatenate([np.asarray(u, dtype=object) for _, u in per_column]), dtype=object)
    codes, distinct = pd.factorize(raw.astype(columns.dtypes.iloc[0]).str.strip().to_numpy(dtype=object),
                                   use_na_sentinel=False)
    out = np.empty((len(columns), len(per_column)), dtype=np.int64)
    offset = 0
    for j, (c, u) in enumerate(per_column):
        out[:, j] = codes[offset + c]
        offset += len(u)
    return out, np.asarray(distinct, dtype=object)


def _spread(distinct: np.ndarray, codes: np.ndarray, dtype) -> pd.Series:
    """The column ``distinct[codes]`` in the text dtype the file was read with."""
    return pd.Series(pd.array(list(distinct), dtype=dtype)[codes])


def _pair_levels(judgments: Judgments, query_codes: np.ndarray, doc_codes: np.ndarray,
                 queries: np.ndarray, docs: np.ndarray) -> np.ndarray:
    """The (n, k) levels of each listed document for its row's query, looked up once per
    distinct (query, document) pair."""
    pair = query_codes[:, None].astype(np.int64) * max(len(docs), 1) + doc_codes
    codes, pairs = pd.factorize(pair.ravel())
    pairs = np.asarray(pairs, dtype=np.int64)
    lv = judgments.lookup(queries[pairs // max(len(docs), 1)], docs[pairs % max(len(docs), 1)][:, None])[:, 0]
    return lv[codes].reshape(doc_codes.shape)


def _check_lists(codes: np.ndarray, empty: np.ndarray, cols: list[str], path) -> None:
    """A list never repeats a document and has no empty position (``codes``: (n, k) document
    codes, ``empty``: which codes are the empty id)."""
    blank = empty[codes]
    if blank.any():
        r, c = map(int, np.argwhere(blank)[0])
        raise InputFileError(path, "empty document id", r + 2, cols[c])
    srt = np.sort(codes, axis=1)
    dup = (srt[:, 1:] == srt[:, :-1]).any(axis=1)
    if dup.any():
        r = int(np.flatnonzero(dup)[0])
        raise InputFileError(path, f"list {cols[0][0].upper()} repeats a document", r + 2)


# --------------------------------------------------------------------------------------------
# Workspace ingest: result files in, one answers table out
# --------------------------------------------------------------------------------------------
ANSWER_TABLE_COLUMNS = ["example_id", "worker_id", "answer", "is_trap", "correct", "submitted_at",
                        "source_file", "row_id", "item_id", "swapped", "line", "example_hash", "seconds"]
REJECT_TABLE_COLUMNS = ["source_file", "line", "row_id", "item_id", "worker_id", "answer", "reason"]


class _Deferred:
    """A table of a report built when it is first read: ``build(columns)`` makes it, or only
    the named columns of it (same rows, same index), for a caller that reads a few."""

    __slots__ = ("build",)

    def __init__(self, build):
        self.build = build


@dataclass(repr=False)
class IngestReport(ResultTables):
    """Row accounting of an ingest: every row read is an answer or a reject.

    Attributes
    ----------
    files : pandas.DataFrame
        One row per raw file: ``source_file``, ``platform``, ``rows`` read, ``answers``,
        ``rejects``, and ``new`` (archived by this call, not before).
    reasons : pandas.Series
        Rejected rows by reason (duplicates, excluded workers and malformed answers each
        counted as one reason).
    workers : pandas.DataFrame
        workers.csv: one row per worker, with trust, exclusion and the screening flags
        (:func:`satcal.quality.worker_table`).
    answers : pandas.DataFrame
        answers.csv: the valid answers of the workers kept, ``ANSWER_TABLE_COLUMNS``.
    rejects : pandas.DataFrame
        rejects.csv: every row not kept, with its ``reason`` (``REJECT_TABLE_COLUMNS``).
    before_exclusion : pandas.DataFrame or None
        Every valid answer before workers are excluded (what worker models are estimated on);
        None when not computed.
    traps : pandas.DataFrame or None
        traps_report.csv: per trap, answers and accuracy among otherwise trusted workers; None
        when not computed.
    """

    files: pd.DataFrame      # per raw file: rows, answers, rejects, new (this call) or not
    reasons: pd.Series       # rejects by reason
    workers: pd.DataFrame
    answers: pd.DataFrame
    rejects: pd.DataFrame
    #: every valid answer before workers are excluded (what worker models are estimated on)
    before_exclusion: pd.DataFrame = None
    #: per trap: answers and accuracy among otherwise trusted workers (traps_report.csv)
    traps: pd.DataFrame = None
    #: answers and rejects as the CSV writer takes them (:func:`resolve_rows`' ``written``)
    _written: dict = field(default=None, repr=False, compare=False)

    def __getattribute__(self, name):
        # answers, rejects and before_exclusion may be deferred (an ingest writes its tables
        # from codes; the object columns a caller reads are made on first reading, once)
        value = object.__getattribute__(self, name)
        if type(value) is _Deferred:
            value = value.build(None)
            object.__setattr__(self, name, value)
        return value

    def _columns(self, name: str, columns: list[str], coded: bool = False) -> pd.DataFrame:
        """``getattr(self, name)[columns]``, made alone while the table is deferred (with
        ``coded``, its text columns left as the Categoricals the rows were resolved as: the same
        values, for a reader that counts them)."""
        value = object.__getattribute__(self, name)
        if type(value) is not _Deferred:
            return value[columns]
        return value.build(columns, coded=True) if coded else value.build(columns)

    def tables(self) -> dict[str, pd.DataFrame]:
        """Per file, rejects by reason, workers, answers, rejects, the answers before workers
        were excluded, and the traps (tables that are absent are left out)."""
        reasons = self.reasons.rename_axis("reason").reset_index(name="rows")
        out = {"files": self.files, "reasons": reasons, "workers": self.workers, "answers": self.answers,
               "rejects": self.rejects, "before_exclusion": self.before_exclusion, "traps": self.traps}
        return {name: t for name, t in out.items() if t is not None}

    def summary(self) -> str:
        """:meth:`lines`, one a line."""
        return "\n".join(self.lines())

    def lines(self) -> list[str]:
        out = []
        for r in self.files.itertuples():
            tag = "new" if r.new else "already ingested"
            out.append(f"{r.source_file} ({r.platform}, {tag}): {r.rows} rows = {r.answers} answers "
                       f"+ {r.rejects} rejects")
        # the columns read here, not the whole tables (an ingest's tables may be deferred)
        answers = self._columns("answers", ["example_id", "answer", "is_trap"], coded=True)
        out.append(f"total: {int(self.files['rows'].sum())} rows = {len(answers)} answers "
                   f"({int(answers['is_trap'].sum())} on traps) + {len(self._columns('rejects', []))} rejects")
        for reason, n in self.reasons.items():
            out.append(f"  {n} rows rejected: {reason}")
        excl = self.workers[self.workers["excluded"]]
        reason = excl["reason"].astype(str) if len(excl) else pd.Series(dtype=str)
        attention, lined = int(reason.str.startswith("failed").sum()), int(reason.str.startswith("straight").sum())
        dominated = int(reason.str.startswith("prefers the dominated").sum())
        at_random = int(reason.str.startswith("answers likelier at random").sum())
        parts = [f"{len(excl) - attention - lined - dominated - at_random} trust below threshold"]
        parts += [f"{lined} straight-lining"] if lined else []
        parts += [f"{dominated} preferring dominated lists"] if dominated else []
        parts += [f"{at_random} answering as at random"] if at_random else []
        parts += [f"{attention} failed attention checks"] if attention else []
        why = ", ".join(parts) if len(parts) > 1 else "trust below threshold"
        out.append(f"workers: {len(self.workers)}, excluded {len(excl)} ({why}), kept {len(self.workers) - len(excl)}")
        out.extend(self.warnings())
        for flag, what in (("too_fast", "answered too fast (under the seconds an item, or twice the typical pace for their pages' reading load)"),
                           ("same_side", "nearly always chose the same side as shown")):
            if flag in self.workers.columns and self.workers[flag].astype(bool).any():
                out.append(f"  screening: {int(self.workers[flag].astype(bool).sum())} workers {what} "
                           "(see workers.csv)")
        out += _trap_lines(self.traps)
        from .quality import agreement
        # the two columns agreement reads, not a copy of every column of the answers
        examples = answers.loc[~answers["is_trap"].astype(bool), ["example_id", "answer"]]
        agreed = agreement(examples) if len(examples) else None
        if agreed is not None:
            out.append(f"agreement: Krippendorff's alpha {agreed.alpha:.3f} (pairwise {agreed.observed:.3f}) "
                       f"over {agreed.examples} examples answered {agreed.per_example:.2f} times on average")
        return out

    def warnings(self) -> list[str]:
        """What the reader of an ingest must not miss: most workers unscored (too few traps),
        and simulated participants among the workers."""
        out = []
        w = self.workers
        if len(w) and "trust_source" in w.columns:
            unscored = int((w["trust_source"] == "none").sum())
            if unscored > len(w) / 2:
                out.append(f"  warning: {unscored} of {len(w)} workers answered too few traps to be scored "
                           "(quality.min_traps): they are kept whatever they answered. Give every worker more "
                           "traps ([serve] traps_on_top, more [traps] count or pages per worker)")
        if "simulated" in w.columns and w["simulated"].astype(bool).any():
            n = int(w["simulated"].astype(bool).sum())
            said = self._columns("answers", ["worker_id"])["worker_id"]
            share = float(said.isin(set(w.loc[w["simulated"].astype(bool), "worker_id"])).mean()) \
                if len(said) else 0.0
            out.append(f"  warning: {n} of {len(w)} workers are simulated (satcal simulate --serve), "
                       f"{100 * share:.0f}% of the answers: the analysis will be reported as simulated")
        return out


def _trap_lines(traps) -> list[str]:
    """The traps most otherwise trusted workers miss, and those dropped (traps_report.csv)."""
    if traps is None or not len(traps):
        return []
    out = []
    for r in traps[traps["suspect"] & ~traps["dropped"]].itertuples():
        out.append(f"  trap {r.trap_id} (expected {r.expected}): {100 * r.trusted_accuracy:.0f}% of "
                   f"{r.trusted_answers} otherwise trusted workers got it right (most answered "
                   f"{r.most_common_answer}); check it, and drop it with --drop-trap {r.trap_id} or "
                   "[quality] drop_traps in study.toml")
    dropped = traps.loc[traps["dropped"], "trap_id"].tolist()
    if dropped:
        out.append(f"  traps dropped from trust: {', '.join(dropped)}")
    return out


def _as_text(v) -> str:
    """A cell as text, a missing one (None, NaN) empty."""
    return "" if v is None or (isinstance(v, float) and v != v) else str(v)


def _distinct(values) -> tuple[np.ndarray, np.ndarray]:
    """(codes, distinct values) of a column, missing values among the distinct ones, so that
    a per-value step runs once per distinct value and spreads back by ``distinct[codes]``.
    A categorical column gives its own codes and categories (no hashing; a category no row
    holds is one more distinct value, looked at for nothing)."""
    if isinstance(getattr(values, "dtype", None), pd.CategoricalDtype):
        codes = values.cat.codes.to_numpy().astype(np.intp)
        uniques = np.asarray(values.cat.categories, dtype=object)
        if (codes < 0).any():  # missing cells: one more distinct value, NaN
            uniques = np.append(uniques, np.array([np.nan], dtype=object))
            codes = np.where(codes < 0, len(uniques) - 1, codes)
        return codes, uniques
    codes, uniques = pd.factorize(np.asarray(values, dtype=object), use_na_sentinel=False)
    return codes, np.asarray(uniques, dtype=object)


def _text_of(values) -> np.ndarray:
    """``values.fillna("").astype(str)`` as an object array, computed once per distinct value."""
    codes, uniques = _distinct(values)
    return np.array([_as_text(v) for v in uniques],
                    dtype=object)[codes]


def _text_codes(values, sort: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """``pd.factorize(_text_of(values), sort=sort)`` with one factorisation of the column:
    the distinct raw values are made text, and those texts factorised (two raw values with
    one text, None and "", share a code)."""
    codes, uniques = _distinct(values)
    text_codes, text = pd.factorize(np.array([_as_text(v) for v in uniques], dtype=object), sort=sort)
    return text_codes[codes], np.asarray(text, dtype=object)


def _normalise_shown(values: pd.Series) -> pd.Series:
    """The canonical code of each shown answer ('' for a spelling that is none), looked up
    once per distinct spelling."""
    codes, mapped = _shown_codes(values)
    return pd.Series(mapped[codes], index=getattr(values, "index", None), dtype=object)


def _shown_codes(values) -> tuple[np.ndarray, np.ndarray]:
    """:func:`_normalise_shown` as (codes, canonical code of each distinct spelling)."""
    codes, uniques = _distinct(values)
    text = [_as_text(v).strip().lower().replace("-", "_")
            for v in uniques]
    mapped = np.array([ANSWER_ALIASES.get(v, ANSWER_ALIASES.get(v.replace("_", " "), "")) for v in text],
                      dtype=object)
    return codes, mapped


def _sorted_categorical(distinct: np.ndarray, codes: np.ndarray) -> pd.Categorical:
    """``distinct[codes]`` (text) as a Categorical whose categories are the distinct texts in
    sorted order, so that factorising it, sorted or not, numbers the values as factorising
    the text would when sorted."""
    rank, names = pd.factorize(pd.Series(np.asarray(distinct, dtype=object), dtype=object), sort=True)
    return pd.Categorical.from_codes(rank[codes], dtype=pd.CategoricalDtype(pd.Index(np.asarray(names, dtype=object),
                                                                                     dtype=object)))


def _plain(frame: pd.DataFrame, keep=()) -> pd.DataFrame:
    """``frame`` with each categorical column as an object column of its values (the tables
    an ingest returns and what :func:`satcal.quality.worker_table` reads hold plain text),
    but those named in ``keep``."""
    cats = [c for c in frame.columns if isinstance(frame[c].dtype, pd.CategoricalDtype) and c not in keep]
    if not cats:
        return frame
    out = {}
    for c in cats:
        codes, uniques = _distinct(frame[c])
        out[c] = pd.Series(uniques[codes], index=frame.index, dtype=object)
    return frame.assign(**out)


def _column(values) -> pd.Series:
    """A column as it is, text kept in an object array (pandas 3 would re-encode it)."""
    if isinstance(values, pd.Series) and values.dtype != object and not pd.api.types.is_string_dtype(values):
        return values.reset_index(drop=True)
    arr = values.to_numpy(dtype=object) if isinstance(values, pd.Series) else np.asarray(values)
    if arr.dtype.kind in "biufc":
        return pd.Series(arr, copy=False)
    return pd.Series(arr, dtype=object, copy=False)


def _sorted_codes(values: np.ndarray) -> np.ndarray:
    """Integer codes ordered as the strings ``values`` sort (for lexsort without strings)."""
    return pd.factorize(values, sort=True)[0]


def _key_columns(item_id: pd.Series, key: pd.DataFrame, example_ids: set[str]) -> dict:
    """Per row: what the key (or an embedded-dataset item id) says of its item, computed once
    per distinct item id. ``known`` items are in the key; ``ecir`` ones name an embedded
    example directly."""
    from .platforms.ecir2015 import PREFIX
    codes, items = _distinct(item_id)
    text = np.array([str(v) for v in items], dtype=object)
    at = pd.Index(key["item_id"]).get_indexer(items) if len(key) else np.full(len(items), -1)
    known = at >= 0
    ecir = np.array([v.startswith(PREFIX) for v in text], dtype=bool)

    def column(name, default):
        """Per distinct item, the key's column ``name``; ``default`` for an item not in the key.

        Parameters
        ----------
        name : str
            A column of the key.
        default : object
            The value when the key lacks the column or the item.
        """
        if name not in key.columns:
            return np.full(len(items), default, dtype=object)
        vals = key[name].to_numpy(dtype=object)
        return np.where(known, vals[np.maximum(at, 0)] if len(vals) else default, default).astype(object)

    source = column("source_id", "")
    example = np.where(known, source, np.where(ecir, np.array([v[len(PREFIX):] for v in text], dtype=object), ""))
    flag = lambda name: np.array([str(v) == "True" for v in column(name, None)], dtype=bool) & known  # noqa: E731
    expected = np.array([_as_text(v) for v in column("expected", None)], dtype=object)
    hashes = np.array([_as_text(v) for v in column("example_hash", None)], dtype=object)
    wanted = set(example_ids)
    unknown_example = ecir & np.array([e not in wanted for e in example], dtype=bool)
    # the codes of the example ids' texts, per row, from the distinct items' ones
    example_codes = pd.factorize(np.array([_as_text(v) for v in example], dtype=object))[0]
    return {"codes": codes, "items": items, "item_example": np.array([_as_text(v) for v in example], dtype=object),
            "per_item": {"example_id": example.astype(object), "example_hash": hashes},
            "example_codes": example_codes[codes], "known": known[codes],
            "ecir": ecir[codes],
            "is_trap": flag("is_trap")[codes], "swapped": flag("swapped")[codes],
            "expected": (codes, expected), "unknown_example": unknown_example[codes]}


def _canonical(shown, swapped: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The answer in the example's own orientation (A and B exchanged where the item was shown
    swapped), as (codes, distinct values): the answers are ``distinct[codes]``. ``shown`` is
    the shown answers, or already (codes, values) of them (values may repeat)."""
    from .platforms import swap_answer
    codes, uniques = shown if isinstance(shown, tuple) else _distinct(shown)
    uniques = np.asarray(uniques, dtype=object)
    swapped_text = np.array([swap_answer(v) for v in uniques], dtype=object)
    return np.where(swapped, codes + len(uniques), codes), np.concatenate([uniques, swapped_text])


def _correct(canonical: tuple, expected: tuple, is_trap: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``True``/``False`` for an answer to a trap (one of the expected answers, ';'-separated),
    '' otherwise, as (codes, distinct values); checked once per distinct (item, answer) pair
    (``canonical``: the answers' codes and distinct values, :func:`_canonical`)."""
    item_codes, expected_text = expected
    # the answers' codes by first appearance, as _distinct of the answers gives them, from
    # the canonical codes (no object array of a million answers hashed)
    value_of, ans = pd.factorize(np.asarray(canonical[1], dtype=object), use_na_sentinel=False)
    first, ans_order = pd.factorize(value_of[canonical[0]])
    ans_codes, ans = first, np.asarray(ans, dtype=object)[ans_order]
    pair = item_codes.astype(np.int64) * max(len(ans), 1) + ans_codes
    pcodes, pairs = pd.factorize(pair)
    ok = np.array([ans[p % max(len(ans), 1)] in expected_text[p // max(len(ans), 1)].split(";") for p in pairs],
                  dtype=object)
    return np.where(is_trap, pcodes + 1, 0), np.concatenate([np.array([""], dtype=object), ok])


def _coded_values(distinct: np.ndarray, codes: np.ndarray) -> pd.Categorical:
    """``distinct[codes]`` as a Categorical of the same values (equal distinct values merged,
    a missing one a missing cell)."""
    value_codes, uniques = pd.factorize(np.asarray(distinct, dtype=object))
    return pd.Categorical.from_codes(np.where(value_codes[codes] < 0, -1, value_codes[codes]),
                                     dtype=pd.CategoricalDtype(pd.Index(np.asarray(uniques, dtype=object), dtype=object)))


def _written_text(distinct: np.ndarray, codes: np.ndarray) -> pd.Categorical:
    """``distinct[codes]`` as the CSV writer renders its cells (a string as it is, a missing
    value empty, ``str`` of any other value), as a Categorical of text: each distinct value
    rendered once, so that a table is written from codes without a string object per cell
    (:func:`satcal.fileio.write_csv_safe`)."""
    text = np.array([v if isinstance(v, str) else "" if pd.isna(v) else str(v) for v in distinct], dtype=object)
    text_codes, uniques = pd.factorize(text)
    return pd.Categorical.from_codes(text_codes[codes],
                                     dtype=pd.CategoricalDtype(pd.Index(np.asarray(uniques, dtype=object), dtype=object)))


def _duplicates(r: pd.DataFrame, ok: np.ndarray, canonical: tuple, worker: np.ndarray,
                example: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Rows repeating an earlier answer of the same worker to the same example, and each one's
    reason naming the winner. The earliest submission wins, then the file (archived under its
    content hash) and the line: the same winner whatever order the files were ingested in.
    Rows without a submission time come after those with one. Worker and example are
    compared as integer codes (``worker``, ``example``: the codes of their texts), never as
    joined strings; the answers are ``canonical``, (codes, values) (:func:`_canonical`), read
    for the duplicates and their winners alone."""
    n = len(r)
    worker, example = worker.astype(np.int64), example.astype(np.int64)
    pair = worker * (int(example.max()) + 1 if n else 1) + example
    when_codes, when_vals = _distinct(r["submitted_at"])
    when_text = np.array([_as_text(v).strip()
                          for v in when_vals], dtype=object)
    when = _sorted_codes(when_text)[when_codes]
    blank = (when_text == "")[when_codes]
    source_codes, sources = _text_codes(r["source_file"], sort=True)
    line = pd.to_numeric(r["line"], errors="coerce").fillna(0).to_numpy()
    order = _stable_order(blank, when, source_codes, line)
    ordered_ok = order[ok[order]]
    # the pairs factorised in that order number themselves as they first appear: a row is the
    # first of its pair when its code exceeds every code before it, and the row of pair c's
    # first answer is then the c-th of those rows (one hashing pass, of the valid rows only)
    ident = _first_appearance_codes(pair[ordered_ok])
    first = np.empty(len(ident), dtype=bool)
    if len(ident):
        first[0] = True
        first[1:] = ident[1:] > np.maximum.accumulate(ident[:-1])
    dup = np.zeros(n, dtype=bool)
    dup[ordered_ok[~first]] = True
    winner = ordered_ok[first]
    pair_of = np.zeros(n, dtype=np.int64)
    pair_of[ordered_ok] = ident
    text = np.full(n, "", dtype=object)
    if dup.any():
        rows = np.flatnonzero(dup)
        prev = winner[pair_of[rows]]
        where = sources[source_codes[prev]] + ":" + r["line"].iloc[prev].astype(str).to_numpy(dtype=object)
        answer_codes, answer_values = canonical[0], np.asarray(canonical[1], dtype=object)
        said = answer_values[answer_codes[prev]]
        same = said == answer_values[answer_codes[rows]]
        both = np.empty(len(rows), dtype=object)  # each row's own wording, not both for every row
        both[same] = "duplicate of " + where[same]
        both[~same] = "conflicting duplicate: " + where[~same] + " said " + said[~same]
        text[rows] = both
    return dup, text


def _first_appearance_codes(values: np.ndarray) -> np.ndarray:
    """``pd.factorize(values)[0]`` of non-negative integers: each value's number in the order
    values first appear. When the values span at most a few times their count (the pairs of
    worker and example codes), without a hash table: each value's first position by
    ``np.minimum.at`` over a dense array, and the codes by counting the first positions
    (25 against 50-65 ms at 889,000 pairs). Up to 8 values of span per value: 2,500 workers by
    2,110 examples, 5.3M for 890,000 pairs, is 21 MB of int32 against pandas' larger hash
    table (20 against 40 ms)."""
    n = len(values)
    span = int(values.max()) + 1 if n else 0
    if not n or values.min() < 0 or span > 8 * n + 1024 or n >= 2 ** 31 - 1:
        return pd.factorize(values)[0]
    position = np.arange(n, dtype=np.int32)
    first_at = np.full(span, n, dtype=np.int32)
    np.minimum.at(first_at, values, position)
    first_at = first_at[values]  # each row's first position of its value
    return (np.cumsum(first_at == position) - 1)[first_at]


def _stable_order(*keys) -> np.ndarray:
    """``np.lexsort(keys[::-1])``: the rows ordered by the first key, then the next, ties in
    row order. When every key is a non-negative integer and their ranges multiply to less
    than 2**62, one stable sort of a combined integer key (same order, a third of the time)."""
    keys = [np.asarray(k) for k in keys]
    if all(k.dtype.kind in "biu" or (k.dtype.kind == "f" and (k == np.floor(k)).all()) for k in keys) and \
            all(not k.size or k.min() >= 0 for k in keys):
        spans = [int(k.max()) + 1 if k.size else 1 for k in keys]
        if np.prod([float(x) for x in spans]) < 2.0 ** 62:
            combined = np.zeros(keys[0].size if keys else 0, dtype=np.int64)
            for k, span in zip(keys, spans):
                combined = combined * span + k.astype(np.int64)
            return np.argsort(combined, kind="stable")
    return np.lexsort(keys[::-1])


def resolve_rows(rows: pd.DataFrame, key: pd.DataFrame, example_ids: set[str], threshold: float,
                 min_traps: int, screen: dict | None = None, reading: pd.Series | None = None,
                 attention_limit: int | None = None, dominant: pd.Series | None = None,
                 written: dict | None = None, deferred: bool = False):
    """Raw rows -> (answers, rejects, workers), in canonical orientation.

    ``dominant`` (by example id: +1 where list A dominates by the judged levels, -1 where B
    does, :func:`satcal.quality.dominance`) and the traps' expected answers
    (:func:`satcal.quality.trap_dominance`) feed the judgment-consistency test.

    ``reading`` (seconds to skim each item, by item id: :func:`satcal.quality.reading_seconds`)
    calibrates the "too fast" flag to each page's reading load; ``attention_limit`` excludes
    workers who failed that many attention checks (rows with ``attention_passed``, the hosted
    study's), None keeps them. Rows with ``simulated`` ("yes": the hosted study's dry run) mark
    their workers ``simulated`` in the workers table.

    Reasons, in order of precedence: platform status (tainted, rejected, cancelled), missing
    worker id, unknown item id, malformed answer, duplicate / conflicting duplicate of an
    earlier row (same worker and example), excluded worker. The fourth table returned holds
    every valid answer before workers are excluded, excluded workers' included.

    Every per-value step (key lookup, answer spelling, orientation, trap check) runs once per
    distinct value and is spread to the rows by integer codes, so the cost per row is a few
    array operations.

    Parameters
    ----------
    rows : pandas.DataFrame
        The raw rows of the result files (:func:`satcal.platforms._common.raw_answers`).
    key : pandas.DataFrame
        Every batch's key.
    example_ids : set of str
        The study's example ids (an embedded-dataset item id must name one).
    threshold : float
        The trust threshold, in [0, 1] (:func:`satcal.quality.worker_table`).
    min_traps : int
        Traps a worker needs to be scored on them.
    screen : dict or None, optional
        Screening options passed to :func:`satcal.quality.worker_table`.
    reading : pandas.Series or None, optional
        Reading seconds by item id.
    attention_limit : int or None, optional
        Failed attention checks that exclude a worker; None keeps them.
    dominant : pandas.Series or None, optional
        The dominant list of each example (+1 A, -1 B, 0 neither), by example id.
    written : dict or None, optional
        When given, receives ``"answers"`` and ``"rejects"``: the same tables as the CSV writer
        takes them, their text columns Categoricals of the text written (codes into distinct
        values, as the rows were resolved), so that writing them makes no string per cell. The
        files are byte for byte those of the returned tables.
    deferred : bool, optional
        When True, answers, rejects and the answers before exclusion come back deferred: made
        when an :class:`IngestReport` holding them is first read, or only the columns it reads
        (its summary reads three), so that an ingest that writes its tables from ``written``
        does not also make an object column per answer column (default False: tables).

    Returns
    -------
    tuple of four pandas.DataFrame
        answers, rejects, workers and the answers before exclusion.
    """
    from .quality import (attention_failures, empty_worker_table, exclude_failed_attention, trap_dominance,
                          worker_table)

    # text stays Python strings in object arrays: selecting rows is then a copy of pointers
    r = rows.reset_index(drop=True)
    # (a categorical column stays one: its codes are its distinct values; the row ids, only
    # ever selected into the tables, stay Arrow text if they are)
    for c in r.columns:
        if r[c].dtype != object and not isinstance(r[c].dtype, pd.CategoricalDtype) and c != "row_id" \
                and pd.api.types.is_string_dtype(r[c]):
            r[c] = _column(r[c])
    n = len(r)
    keyed = _key_columns(r["item_id"], key, example_ids)
    # the columns resolved per distinct value stay codes into those values (Categoricals of
    # them), never an object array of a million strings; the tables made from ``r`` turn the
    # rows they take into text (:func:`_plain`), the same values
    for name in ("is_trap", "swapped"):
        r[name] = _column(keyed[name])
    for name in ("example_id", "example_hash"):
        r[name] = pd.Series(_coded_values(keyed["per_item"][name], keyed["codes"]), copy=False)
    shown_codes, shown_text = _shown_codes(r["answer"])
    malformed = (shown_text == "")[shown_codes]
    canonical_coded = _canonical((shown_codes, shown_text), keyed["swapped"])
    r["answer_canonical"] = pd.Series(_coded_values(*canonical_coded[::-1]), copy=False)

    reason = np.full(n, "", dtype=object)
    free = np.ones(n, dtype=bool)  # rows with no reason yet (every reason is non-empty text)

    def mark(mask, text, codes=None):
        """Give the rows of ``mask`` that have no reason yet the reason ``text``.

        Parameters
        ----------
        mask : array of bool
            The rows.
        text : str or array of str
            One reason, one per row, or (with ``codes``) one per distinct value.
        codes : array of int, optional
            Each row's index into ``text`` (a reason built once per distinct value).
        """
        fresh = free & np.asarray(mask, dtype=bool)
        if isinstance(text, str):
            reason[fresh] = text
        elif codes is not None:
            reason[fresh] = np.asarray(text, dtype=object)[codes[fresh]]
        else:
            reason[fresh] = np.asarray(text, dtype=object)[fresh]
        free[fresh] = False

    scodes, suniq = _distinct(r["status"])
    stext = np.array([_as_text(v) for v in suniq], dtype=object)
    mark((stext != "")[scodes], "platform status: " + stext, scodes)
    wcodes, wuniq = _text_codes(r["worker_id"])
    mark(np.array([w.strip() == "" for w in wuniq], dtype=bool)[wcodes], "missing worker id")
    mark(~keyed["known"] & ~keyed["ecir"], "unknown item id (not in key.csv: another study or export?)")
    mark(keyed["unknown_example"], "unknown example id")
    if malformed.any():
        acodes, auniq = _distinct(r["answer"])
        mark(malformed, "malformed answer " + np.array([repr(str(v)) for v in auniq], dtype=object), acodes)
    dup, dup_text = _duplicates(r, free.copy(), canonical_coded, wcodes, keyed["example_codes"])
    mark(dup, dup_text)
    ok = free.copy()
    correct_coded = _correct(canonical_coded, keyed["expected"], keyed["is_trap"])
    r["correct"] = pd.Series(_coded_values(*correct_coded[::-1]), copy=False)
    r["answer_shown"] = pd.Series(_coded_values(shown_text, shown_codes), copy=False)
    codes, expected_text = keyed["expected"]
    # a trap's accepted codes: its chance rate weighs it in the trust rule
    r["expected"] = pd.Series(_coded_values(expected_text, codes), copy=False)
    # worker_table copies what it is given: only the columns it reads, and of those only the
    # ones not given below as codes (the order of the columns kept as it was)
    order = [c for c in ("worker_id", "example_id", "is_trap", "correct", "expected", "trust", "answer_shown",
                         "seconds", "submitted_at") if c in r.columns]
    scored = r.loc[ok, [c for c in order if c not in ("example_id", "correct", "expected", "answer_shown")]]
    # which list dominates: the examples' levels, the traps' expected answers
    dom = trap_dominance(expected_text)[codes] * keyed["is_trap"]
    if dominant is not None and len(dominant):
        ex = pd.Series(dominant.to_numpy(), index=dominant.index.astype(str))
        ex = ex[~ex.index.duplicated()]
        # once per distinct item (its example's), spread by the item codes
        per_item = ex.reindex(pd.Index(keyed["item_example"], dtype=object)).fillna(0).to_numpy()
        dom = np.where(dom != 0, dom, per_item[keyed["codes"]])
    scored = scored.assign(dominant=dom[ok])
    if reading is not None:  # looked up once per distinct item, spread by the item codes
        per_item = reading.reindex(pd.Index(keyed["items"], dtype=object)).to_numpy(dtype=float)
        scored = scored.assign(reading_seconds=pd.Series(per_item[keyed["codes"][ok]], index=scored.index))
    scored = _plain(scored, keep=("worker_id",))  # worker_table codes a categorical's workers itself
    # the shown answers as codes into their sorted texts (worker_table factorises them twice)
    scored = scored.assign(answer_shown=pd.Series(_sorted_categorical(shown_text, shown_codes[ok]),
                                                  index=scored.index))
    # the columns worker_table only factorises (unsorted) as Categoricals of the same values:
    # the same codes, without hashing 900,000 strings three times
    scored = scored.assign(**{name: pd.Series(r[name].array[ok], index=scored.index)
                              for name in ("answer_canonical", "expected", "example_id")})
    scored = scored.rename(columns={"answer_canonical": "answer"})
    # a trap's '' (not a trap) as False, once per distinct value: scored["correct"].replace("", False)
    truth = correct_coded[1].copy()
    truth[np.array([v == "" for v in truth], dtype=bool)] = False
    scored = scored.assign(correct=pd.Series(truth[correct_coded[0][ok]], index=scored.index, dtype=object))
    # the columns in the order worker_table was always given them
    scored = scored[order[:1] + [c for c in order[1:] if c in scored.columns] + ["answer", "dominant"]
                    + (["reading_seconds"] if "reading_seconds" in scored.columns else [])]
    workers = worker_table(scored, threshold, min_traps, **(screen or {})) if len(scored) else empty_worker_table()
    del scored  # its copies of the valid rows, freed before the answer tables are made (a lower peak)
    if "attention_passed" in r.columns:
        workers = exclude_failed_attention(workers, attention_failures(_plain(r)), attention_limit)
    if "simulated" in r.columns:
        marked = set(r.loc[_text_of(r["simulated"]) == "yes", "worker_id"])
        workers["simulated"] = workers["worker_id"].isin(marked)
    valid = ok  # the rows before exclusion (``ok`` is rebound below, this array never changed)

    def answer_table(rows, columns=None, coded=False):
        """The answer table's ``columns`` (all by default) of the rows ``rows`` of ``r``
        (a mask), as :func:`_plain` makes them, the canonical answer in ``answer``.

        Parameters
        ----------
        rows : array of bool
            The rows.
        columns : list of str or None, optional
            The columns, in the order wanted.
        coded : bool, optional
            Leave the categorical columns as they are (the same values as codes).
        """
        names = [c for c in ANSWER_TABLE_COLUMNS if columns is None or c in columns]
        table = r.loc[rows, [c for c in names if c != "answer"]]
        table = table if coded else _plain(table)
        if "answer" in names and coded:
            table = table.assign(answer=pd.Series(r["answer_canonical"].array[rows], index=r.index[rows]))
        elif "answer" in names:
            answer_codes, answer_values = canonical_coded
            table = table.assign(answer=pd.Series(np.asarray(answer_values, dtype=object)[answer_codes[rows]],
                                                  index=r.index[rows], dtype=object))
        return table[names if columns is None else list(columns)].reset_index(drop=True)

    by_worker = workers.set_index("worker_id")
    excluded = by_worker["reason"][by_worker["excluded"].astype(bool)]
    if len(excluded):
        said = dict(zip(excluded.index, excluded.to_numpy(dtype=object)))  # not a Series lookup per worker
        wtext = np.array(["excluded worker: " + _as_text(said.get(w)) for w in wuniq], dtype=object)
        mark(ok & np.isin(wcodes, np.flatnonzero(pd.Index(wuniq).isin(excluded.index))), wtext, wcodes)
    kept = free[ok]
    ok = free

    def reject_table(columns=None):
        """The rejects' ``columns`` (all by default), as :func:`_plain` makes them.

        Parameters
        ----------
        columns : list of str or None, optional
            The columns, in the order wanted.
        """
        names = [c for c in REJECT_TABLE_COLUMNS if columns is None or c in columns]
        table = _plain(r.loc[~ok, [c for c in names if c != "reason"]])
        if "reason" in names:
            table = table.assign(reason=pd.Series(reason[~ok], index=r.index[~ok], dtype=object))
        return table[names if columns is None else list(columns)].reset_index(drop=True)

    if deferred:
        # (``traps``: the trap rows alone, all the trap report reads)
        before_exclusion = _Deferred(lambda columns, traps=False, coded=False: answer_table(
            valid & keyed["is_trap"] if traps else valid, columns, coded))
        # the valid rows of kept workers
        answers = _Deferred(lambda columns, coded=False: answer_table(ok, columns, coded))
        rejects = _Deferred(reject_table)
    else:
        before_exclusion = answer_table(valid)
        # the answers are the valid ones of kept workers: rows of before_exclusion, shared when
        # no worker was excluded (one copy of the largest table, not two)
        answers = before_exclusion.copy(deep=False) if kept.all() else before_exclusion[kept].reset_index(drop=True)
        rejects = reject_table()
    if written is not None:
        # the columns resolved here by distinct value, kept as codes; the reader's own
        # categoricals as they are
        text = {"example_id": _written_text(keyed["per_item"]["example_id"], keyed["codes"]),
                "example_hash": _written_text(keyed["per_item"]["example_hash"], keyed["codes"]),
                "answer": _written_text(*canonical_coded[::-1]), "correct": _written_text(*correct_coded[::-1])}
        rest = [c for c in ANSWER_TABLE_COLUMNS if c not in text]
        written["answers"] = r.loc[ok, rest].reset_index(drop=True).assign(
            **{c: v[ok] for c, v in text.items()})[ANSWER_TABLE_COLUMNS]
        written["rejects"] = r.loc[~ok, [c for c in REJECT_TABLE_COLUMNS if c != "reason"]].reset_index(
            drop=True).assign(reason=reason[~ok])[REJECT_TABLE_COLUMNS]
    return answers, rejects, workers, before_exclusion


INDEX_COLUMNS = ["sha256", "file", "platform", "original"]
PENDING = ".ingest-pending.json"
SETTINGS = "ingest-settings.json"


def _read_index(raw_dir: Path) -> pd.DataFrame:
    path = raw_dir / "index.csv"
    return (pd.read_csv(path, dtype=str, keep_default_na=False) if path.exists()
            else pd.DataFrame(columns=INDEX_COLUMNS))


@dataclass
class ResultFile:
    """One result file read for ingest, before anything is written.

    Attributes
    ----------
    sha256 : str
        The hex SHA-256 of its bytes (an ingest skips a file whose hash is archived already).
    name : str
        Its name in raw/: the hash's first 12 digits, ``-``, and the original file name.
    platform : str
        The platform it was read as (given, or detected from its first 4096 bytes).
    data : bytes
        Its bytes, archived as they are.
    rows : pandas.DataFrame
        Its rows as the platform's reader parses them (``RAW_ANSWER_COLUMNS``).
    """

    sha256: str
    name: str          # its name in raw/: hash prefix + original name
    platform: str
    data: bytes
    rows: pd.DataFrame


@ordinary_pages
def read_result_files(files, platform: str | None, known: set[str],
                      items: set[str] | None = None) -> list[ResultFile]:
    """Read and parse result files, skipping any whose content hash is in ``known`` or seen
    before in ``files``. A broken file raises (with its line) before anything is written.

    Parameters
    ----------
    files : iterable of path
        The result files.
    platform : str or None
        Their platform; None detects it per file.
    known : set of str
        Content hashes of files already archived.
    items : set of str or None, optional
        The item ids of the study's batch keys: a file none of whose answers names one of
        them is refused (:func:`refuse_foreign_file`). None (default) checks nothing.

    Returns
    -------
    list of ResultFile

    Raises
    ------
    SatcalError
        A file is missing, unreadable or cannot be parsed, or (with ``items``) answers none
        of the study's items.
    """
    from .fileio import holding, read_file_bytes, sha256_bytes
    from .platforms import detect_platform, get_platform
    out: list[ResultFile] = []
    for f in files:
        path = Path(f)
        if not path.is_file():
            raise SatcalError(f"{path}: no such file")
        data = read_file_bytes(path)  # an unreadable file is a one-line error
        digest = sha256_bytes(data)
        if digest in known or digest in {r.sha256 for r in out}:
            continue
        detected = detect_platform(path, data[:4096].decode("utf-8", "replace"))
        plat = platform or detected
        with holding(path, data):  # the platform's reader parses these bytes, not a second read
            try:
                parsed = get_platform(plat).read_results(path)  # raises on a broken file: nothing written yet
            except InputFileError as exc:
                if detected in (plat, "csv"):
                    raise
                # --platform named another platform than the file's own layout: say whose it looks like
                raise InputFileError(exc.path, f"{exc.problem} (the file looks like {detected}'s result file: "
                                               f"--platform {detected}?)", exc.line, exc.column) from None
        if items is not None:
            refuse_foreign_file(path, plat, parsed, items)
        out.append(ResultFile(digest, f"{digest[:12]}-{path.name}", plat, data, parsed))
    return out


def refuse_foreign_file(path, platform: str, rows: pd.DataFrame, items: set[str]) -> None:
    """Refuse a result file none of whose answers names an item of the study's batches: it is
    another study's, or an export's that was replaced since, and ingesting it would archive it
    and reject every row. (A file with some rows of this study's items is ingested, its other
    rows rejected with their reason, as before.)

    Parameters
    ----------
    path : path-like
        The file, as given.
    platform : str
        The platform it was read as; the embedded dataset's rows name examples, and a hosted
        study's snapshot is the study's own database, so neither is checked.
    rows : pandas.DataFrame
        Its parsed rows (``item_id`` and, where the platform has it, ``status``).
    items : set of str
        The item ids of every batch key of the study.

    Raises
    ------
    InputFileError
        No answered row names one of ``items``.
    """
    from .platforms.ecir2015 import PREFIX
    if platform in ("ecir2015", "serve") or "item_id" not in rows.columns or not len(rows):
        return
    ids = rows["item_id"]
    if "status" in rows.columns:  # rows the platform marks (skipped, abandoned) answer nothing
        ids = ids[rows["status"].fillna("").astype(str).str.strip() == ""]
    distinct = [str(v) for v in pd.unique(ids.astype(str))]
    if not distinct or any(v in items or v.startswith(PREFIX) for v in distinct):
        return
    where = ("the study has no exported batch yet (satcal export)" if not items else
             f"item_id {distinct[0]!r} is in no batch key of the study (key.csv, batches/keys/)")
    raise InputFileError(path, f"none of its {len(ids)} answers names an item of this study: {where}; "
                               "a result file of another study, or of an export replaced since?",
                         column="item_id")


def index_rows(new: list[ResultFile]) -> pd.DataFrame:
    """The raw/index.csv rows of newly archived files.

    Parameters
    ----------
    new : list of ResultFile
        The files archived.

    Returns
    -------
    pandas.DataFrame
    """
    return pd.DataFrame([{"sha256": r.sha256, "file": r.name, "platform": r.platform,
                          "original": r.name.split("-", 1)[1]} for r in new], columns=INDEX_COLUMNS)


SUPERSEDED = "superseded.csv"


def supersede_snapshots(raw_dir: Path, index: pd.DataFrame, added: pd.DataFrame, parsed: dict):
    """A new snapshot of a hosted study's database replaces the earlier snapshots of the same
    database (same original name), which stay in raw/ and are listed in raw/superseded.csv.

    The database only ever gains responses, so an earlier snapshot's rows must all be in the
    new one (same row id, same answer); if any is missing, the database was replaced or
    damaged, and the new snapshot is refused before anything is written.

    Parameters
    ----------
    raw_dir : pathlib.Path
        The study's raw/ directory.
    index : pandas.DataFrame
        raw/index.csv with the new files.
    added : pandas.DataFrame
        The index rows of the new files.
    parsed : dict
        ``{sha256: rows}`` of the new files.

    Returns
    -------
    tuple of (pandas.DataFrame, pandas.DataFrame)
        The index kept and the rows superseded.

    Raises
    ------
    SatcalError
        A response of an earlier snapshot is missing from the new one.
    """
    from .platforms import get_platform
    new = added[added["platform"] == "serve"]
    old = index["platform"].eq("serve") & index["original"].isin(new["original"])
    if not old.any():
        return index, pd.DataFrame(columns=INDEX_COLUMNS)
    for row in index[old].itertuples():
        fresh = parsed[new.loc[new["original"] == row.original, "sha256"].iloc[0]]
        earlier = get_platform("serve").read_results(raw_dir / row.file)
        have = set(zip(fresh["row_id"], fresh["answer"]))
        lost = [r for r in zip(earlier["row_id"], earlier["answer"]) if r not in have]
        if lost:
            raise SatcalError(f"{raw_dir}/{row.file}: response {lost[0][0]} (and {len(lost) - 1} more) "
                              "of this earlier snapshot is not in the study database now; was the "
                              "database replaced or restored from an older copy? Nothing was ingested")
    return index[~old].reset_index(drop=True), index[old].reset_index(drop=True)


#: The tables an ingest rebuilds, by the :class:`IngestReport` attribute each comes from.
INGEST_TABLES = {"answers.csv": "answers", "rejects.csv": "rejects", "workers.csv": "workers",
                 "traps_report.csv": "traps"}


@ordinary_pages
def rebuild(index: pd.DataFrame, parsed: dict, raw_dir: Path, key: pd.DataFrame | None,
            examples: pd.DataFrame | None, items: pd.DataFrame | None, k: int, quality, serve,
            threshold: float | None = None) -> IngestReport:
    """answers, rejects, workers and the trap report from every result file of ``index``.

    Parameters
    ----------
    index : pandas.DataFrame
        raw/index.csv (sha256, file, platform, original), one row per archived file.
    parsed : dict of str to pandas.DataFrame
        ``{sha256: rows}`` of files read already (the others are read from ``raw_dir``).
    raw_dir : pathlib.Path
        The raw archive the ``file`` column of ``index`` is relative to; read with each file's
        own platform reader.
    key : pandas.DataFrame or None
        Every batch's key (answers to any batch resolve); None before any export.
    examples, items : pandas.DataFrame or None
        examples.csv and items.csv (items give each page's reading time).
    k : int
        Documents per list, for the reading time of an item (:func:`satcal.quality.reading_seconds`).
    quality, serve : settings sections
        The ``[quality]`` and ``[serve]`` sections (:mod:`satcal.settings`).
    threshold : float, optional
        The trust threshold in [0, 1], if not ``quality.trust_threshold``.
    """
    from .platforms import RAW_ANSWER_COLUMNS, get_platform
    from .quality import reading_seconds
    if key is None:
        key = pd.DataFrame(columns=["item_id", "source_id", "is_trap", "swapped", "expected"])
    frames = []
    for row in index.itertuples():
        table = parsed.get(row.sha256)
        if table is None:
            table = get_platform(row.platform).read_results(raw_dir / row.file)
        frames.append(table.drop(columns=["source_file"], errors="ignore"))
    # no file (the only one removed, say): empty tables with their columns, not an error
    rows = (pd.concat(frames, ignore_index=True) if frames
            else pd.DataFrame(columns=[*RAW_ANSWER_COLUMNS, "source_file"], dtype=object))
    if frames:
        # each row's archived file as a code into the files' names (a bare string would make
        # pandas 3 build a million-cell Arrow column); resolve_rows reads the codes and
        # returns the names as text
        lengths = [len(t) for t in frames]
        files = pd.Index(index["file"].tolist(), dtype=object)
        codes = np.repeat(np.arange(len(frames)), lengths)
        rows["source_file"] = (pd.Categorical.from_codes(codes, categories=files) if files.is_unique
                               else pd.Series(files.to_numpy()[codes], dtype=object))
    example_ids = set(examples["example_id"]) if examples is not None else set()
    threshold = quality.trust_threshold if threshold is None else threshold
    screen = {"screen_seconds": float(quality.screen_seconds_per_answer),
              "screen_same_side": float(quality.screen_same_side),
              "straight_alpha": float(quality.straight_lining_alpha),
              "consistency_alpha": float(quality.consistency_alpha),
              "crowd_alpha": float(quality.crowd_alpha),
              "drop_traps": tuple(quality.drop_traps)}
    reading = reading_seconds(items, k) if items is not None and len(items) else None
    attention_limit = None if serve.keep_failed_attention else int(serve.attention_fail_limit)
    dominant = None
    if examples is not None and len(examples) and f"ra{k}" in examples.columns:
        from .quality import dominance
        ranks = [f"r{s}{i}" for s in "ab" for i in range(1, k + 1)]
        lv = examples[ranks].apply(pd.to_numeric, errors="coerce").to_numpy(float)
        dominant = pd.Series(dominance(lv[:, :k], lv[:, k:]), index=examples["example_id"].astype(str))
    written = {}
    answers, rejects, workers, before_exclusion = resolve_rows(rows, key, example_ids, threshold,
                                                               quality.min_traps, screen, reading,
                                                               attention_limit, dominant, written, deferred=True)
    # trap_table reads the trap rows and these columns alone (the same rows in the same order)
    traps = _trap_report(key, before_exclusion.build(["example_id", "worker_id", "answer", "is_trap", "correct"],
                                                     traps=True), threshold, quality.min_traps, screen["drop_traps"])
    per_file = []
    fresh = set(parsed)
    # rows per file counted once (from the written tables' categorical files when there are
    # some: a count of codes), not one comparison of every row per file
    counts = {name: (written[name] if name in written else table.build(["source_file"]))["source_file"].value_counts()
              for name, table in (("answers", answers), ("rejects", rejects))}
    for row in index.itertuples():
        per_file.append({"source_file": row.file, "platform": row.platform,
                         "rows": lengths[len(per_file)],
                         "answers": int(counts["answers"].get(row.file, 0)),
                         "rejects": int(counts["rejects"].get(row.file, 0)),
                         "new": row.sha256 in fresh})
    said = written["rejects"] if "rejects" in written else rejects.build(["reason"])
    reasons = pd.Series(_short_reasons(said["reason"]), dtype=object, name="reason").value_counts()
    return IngestReport(pd.DataFrame(per_file, columns=["source_file", "platform", "rows", "answers",
                                                        "rejects", "new"]),
                        reasons, workers, answers, rejects, before_exclusion, traps, written)


#: The reasons counted as one whatever follows them (the row a duplicate repeats, the worker's
#: own reason, the spelling): each is cut after the first of these words it holds.
_REASON_HEADS = ("duplicate", "excluded worker", "malformed answer")


def _short_reasons(reason: pd.Series) -> np.ndarray:
    """:func:`_short_reason` of every row's reason, as an object array: each distinct reason
    shortened once. A duplicate's reason names its winner, so most distinct reasons are the
    duplicates'; held as Arrow text (pandas' ``str`` dtype), the rows that start with
    "duplicate" or "conflicting duplicate" and hold no line end are told by Arrow's
    ``starts_with`` (their short reason is that head), with no Python string made for them."""
    short = np.empty(len(reason), dtype=object)
    rest = np.ones(len(reason), dtype=bool)
    dtype = reason.dtype
    cells = None
    if isinstance(dtype, pd.StringDtype) and dtype.storage == "pyarrow" and len(reason):
        import pyarrow as pa
        import pyarrow.compute as pc
        cells = pa.array(reason.array)
        plain = pc.invert(pc.match_substring(cells, "\n")).fill_null(False).to_numpy(zero_copy_only=False)
        # "conflicting duplicate" first: the two heads never start the same text
        for head in ("conflicting duplicate", "duplicate"):
            hit = rest & plain & pc.starts_with(cells, head).fill_null(False).to_numpy(zero_copy_only=False)
            short[hit] = head
            rest &= ~hit
    if rest.any():  # the other rows' texts alone made Python strings
        text = cells.filter(pa.array(rest)).to_numpy(zero_copy_only=False) if cells is not None \
            else reason.to_numpy(dtype=object)[rest]
        codes, distinct = pd.factorize(np.asarray(text, dtype=object))
        short[rest] = np.array([_short_reason(v) for v in distinct], dtype=object)[codes]
    return short


def _short_reason(text: str) -> str:
    """``re.sub(r"(duplicate).*|(excluded worker).*|(malformed answer).*", r"\1\2\3", text)``
    by ``str.find`` (a duplicate's reason names its row, so there are about as many distinct
    reasons as duplicates): the text up to the first of the heads it holds, and that head."""
    if "\n" in text:  # ``.`` stops at a line end (a platform's status may hold one)
        return re.sub(r"(duplicate).*|(excluded worker).*|(malformed answer).*",
                      lambda m: m.group(1) or m.group(2) or m.group(3), text)
    # the two reasons most rows carry (one distinct text per duplicate row), without a search
    # per head: "duplicate" found at 0, or at 12 after a prefix holding no head
    if text.startswith("duplicate"):
        return "duplicate"
    if text.startswith("conflicting duplicate"):
        return "conflicting duplicate"
    at, head = min(((text.find(h), h) for h in _REASON_HEADS if h in text), default=(-1, ""))
    return text if at < 0 else text[:at] + head


def _trap_report(key: pd.DataFrame, answers: pd.DataFrame, threshold: float, min_traps: int,
                 drop_traps) -> pd.DataFrame:
    """quality.trap_table over every batch's traps (their expected answers from the keys)."""
    from .quality import trap_table
    is_trap = key["is_trap"].astype(str) == "True"
    expected = key[is_trap].drop_duplicates("source_id").set_index("source_id")["expected"].astype(str)
    return trap_table(answers, expected, threshold, min_traps, drop_traps)


def snapshot_served(url: str, directory, served_dir=None) -> Path:
    """Write the hosted study's responses (database at ``url``) to
    ``directory/serve-<database id>.csv``, ready to ingest with platform ``serve``
    (``served_dir``: the study directory, named when its default database is missing).

    Parameters
    ----------
    url : str
        The database URL.
    directory : path
        Where to write the file.
    served_dir : path or None, optional
        The study directory, for the message.

    Returns
    -------
    pathlib.Path

    Raises
    ------
    SatcalError
        There is no database at a SQLite ``url``, or it is not a satcal serve database.
    """
    import hashlib
    from .fileio import atomic_write_text
    from .serve import db
    if url.startswith("sqlite:///") and not Path(url[len("sqlite:///"):]).exists():
        raise SatcalError(f"{url[len('sqlite:///'):]}: no study database here; has satcal serve {served_dir} run?")
    engine = db.connect(url)
    try:
        from sqlalchemy import inspect, select
        if not inspect(engine).has_table("satcal_meta"):
            raise SatcalError(f"{engine.url.render_as_string(hide_password=True)}: not a satcal serve database")
        with engine.connect() as conn:
            t = db.tables()["meta"]
            secret = conn.execute(select(t.c.value).where(t.c.name == "secret")).scalar_one()
        table = db.snapshot(engine)
    finally:
        engine.dispose()
    name = f"serve-{hashlib.sha256(secret.encode()).hexdigest()[:12]}.csv"
    return atomic_write_text(Path(directory) / name, table.to_csv(index=False, lineterminator="\n"))


REMOVED = "removed"
#: Marker of a removal killed half-way, written by satcal before 0.x's output sets; still read.
REBUILD = ".rebuild-pending"


def find_archived(index: pd.DataFrame, name: str, raw_dir: Path) -> pd.Series:
    """The one row of raw/index.csv that ``name`` means: the archived name, the file's original
    name or a hash prefix of at least 8 digits.

    Parameters
    ----------
    index : pandas.DataFrame
        raw/index.csv.
    name : str
        The file's name or hash prefix.
    raw_dir : pathlib.Path
        raw/, for the message.

    Returns
    -------
    pandas.Series

    Raises
    ------
    SatcalError
        ``name`` matches no file or several.
    """
    hit = index[(index["file"] == name) | (index["original"] == Path(name).name)
                | (index["sha256"].str.startswith(name) & (len(name) >= 8))]
    if len(hit) != 1:
        listing = ", ".join(index["file"]) or "none"
        what = "matches several archived files" if len(hit) > 1 else "is not an archived result file"
        raise SatcalError(f"{raw_dir}: {name!r} {what}; archived files: {listing}")
    return hit.iloc[0]


def read_pending(marker: Path) -> pd.DataFrame:
    """The files an ingest of an older satcal was adding when it was killed (its marker).

    Parameters
    ----------
    marker : pathlib.Path
        The marker file.

    Returns
    -------
    pandas.DataFrame
        Index rows; none when the marker was cut short.
    """
    text = marker.read_text(encoding="utf-8").strip()
    try:
        return pd.DataFrame(json.loads(text or "[]"), columns=INDEX_COLUMNS)
    except ValueError:  # a marker cut short: its files are those not in the index
        return pd.DataFrame(columns=INDEX_COLUMNS)


# the OWASP rule, shared by every table satcal writes (kept importable from here)
from .fileio import FORMULA_PREFIXES, spreadsheet_safe  # noqa: E402


def _check_examples_unchanged(where, merged: pd.DataFrame, k: int) -> None:
    """Refuse answers whose example has changed since they were collected (hash in the key)."""
    if "example_hash" not in merged.columns:
        return  # answers ingested before the hashes existed
    from .platforms import example_digest
    recorded = merged["example_hash"].fillna("").astype(str)
    current = pd.Series(example_digest(merged, k), index=merged.index)
    changed = (recorded != "") & (recorded != current)
    if changed.any():
        first = merged.loc[changed, "example_id"].iloc[0]
        raise SatcalError(f"{where}: {int(changed.sum())} answers were collected for "
                          f"examples that have changed since (example {first!r} of examples.csv no "
                          "longer shows the lists that were answered); restore the examples.csv of "
                          "the batch, or analyse the new examples in a new study")


def study_data(answers: pd.DataFrame, examples: pd.DataFrame, k: int, levels, judgments: Judgments,
               name: str = "", where="answers.csv") -> StudyData:
    """The ingested, non-trap answers of kept workers (answers.csv), with both lists' levels
    from examples.csv; ``where`` names answers.csv in errors.

    Parameters
    ----------
    answers : pandas.DataFrame
        answers.csv, as strings.
    examples : pandas.DataFrame
        examples.csv.
    k : int
        List length.
    levels : list of int
        The study's levels (the scale is 0..max).
    judgments : satcal.judgments.Judgments
        The study's judgments.
    name : str, optional
        The study's name.
    where : str or path, optional
        answers.csv as errors name it (default ``"answers.csv"``).

    Returns
    -------
    satcal.answers.StudyData

    Raises
    ------
    SatcalError
        No answer to an example, an example missing from examples.csv, or one that changed.
    """
    real = answers[answers["is_trap"] != "True"]
    if real.empty:
        raise SatcalError(f"{where} has no answers to examples; ingest result files "
                          "first (satcal ingest DIR FILE...)")
    keep = ["example_id", "worker_id", "answer"] + (["example_hash"] if "example_hash" in real.columns else [])
    merged = real[keep].merge(examples, on="example_id", how="left", validate="many_to_one")
    if merged["query"].isna().any():
        missing = merged.loc[merged["query"].isna(), "example_id"].iloc[0]
        raise SatcalError(f"{where}: example {missing!r} is not in examples.csv")
    _check_examples_unchanged(where, merged, k)
    for side in "ab":
        for i in range(1, k + 1):
            merged[f"r{side}{i}"] = merged[f"r{side}{i}"].astype(int)
    return StudyData(merged, k, max(levels) + 1, judgments, name=name)
