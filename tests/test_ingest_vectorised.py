"""The array-based ingest (issue 23) against the per-row code it replaced, kept here as the
reference: the same answers, rejects (with their reasons), workers and answers before
exclusion on an input with every case a row can be."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from satcal.answers import ANSWER_ALIASES
from satcal.ingest import ANSWER_TABLE_COLUMNS, REJECT_TABLE_COLUMNS, resolve_rows


# ---- the per-row reference (satcal before issue 23) ------------------------------------------
def _normalise_shown_per_row(values: pd.Series) -> pd.Series:
    key = values.fillna("").astype(str).str.strip().str.lower().str.replace("-", "_")
    return key.map(lambda v: ANSWER_ALIASES.get(v, ANSWER_ALIASES.get(v.replace("_", " "), "")))


def resolve_rows_per_row(rows, key, example_ids, threshold, min_traps, screen=None, reading=None,
                         attention_limit=None, dominant=None):
    from satcal.platforms import swap_answer
    from satcal.platforms.ecir2015 import PREFIX
    from satcal.quality import attention_failures, exclude_failed_attention, worker_table

    r = rows.reset_index(drop=True).copy()
    k = key.set_index("item_id")
    is_ecir = r["item_id"].astype(str).str.startswith(PREFIX)
    known = r["item_id"].isin(k.index)
    r["example_id"] = np.where(known, r["item_id"].map(k["source_id"]),
                               np.where(is_ecir, r["item_id"].astype(str).str[len(PREFIX):], ""))
    r["is_trap"] = np.where(known, r["item_id"].map(k["is_trap"]).astype(str) == "True", False)
    r["swapped"] = np.where(known, r["item_id"].map(k["swapped"]).astype(str) == "True", False)
    hashes = k["example_hash"] if "example_hash" in k.columns else pd.Series(dtype=object)
    r["example_hash"] = r["item_id"].map(hashes).fillna("").astype(str)
    expected = np.where(known, r["item_id"].map(k["expected"]).fillna("").astype(str), "")
    shown = _normalise_shown_per_row(r["answer"])
    r["answer_canonical"] = [swap_answer(a) if s else a for a, s in zip(shown, r["swapped"])]
    reason = pd.Series("", index=r.index, dtype=object)

    def mark(mask, text):
        nonlocal reason
        fresh = (reason == "") & np.asarray(mask)
        reason = reason.where(~fresh, text if isinstance(text, str) else pd.Series(text, index=r.index))
    status = r["status"].fillna("").astype(str)
    mark(status != "", "platform status: " + status)
    mark(r["worker_id"].fillna("").astype(str).str.strip() == "", "missing worker id")
    unknown_ecir = is_ecir & ~r["example_id"].isin(example_ids)
    mark(~known & ~is_ecir, "unknown item id (not in key.csv: another study or export?)")
    mark(unknown_ecir, "unknown example id")
    mark(shown == "", "malformed answer " + r["answer"].astype(str).map(repr))
    ok = reason == ""
    ident = r["worker_id"].astype(str) + "\x1f" + r["example_id"].astype(str)
    when = r["submitted_at"].fillna("").astype(str).str.strip().to_numpy()
    order = np.lexsort((pd.to_numeric(r["line"], errors="coerce").fillna(0).to_numpy(),
                        r["source_file"].astype(str).to_numpy(), when, when == ""))
    later = ident.where(ok).iloc[order].duplicated(keep="first").to_numpy()
    first = pd.Series(True, index=r.index)
    first.iloc[order] = ~later
    first |= ~ok
    firsts = r[ok & first].assign(ident=ident[ok & first]).set_index("ident")
    dup = ok & ~first
    if dup.any():
        prev = firsts.loc[ident[dup]]
        same = prev["answer_canonical"].to_numpy() == r.loc[dup, "answer_canonical"].to_numpy()
        where = prev["source_file"].astype(str).to_numpy() + ":" + prev["line"].astype(str).to_numpy()
        text = np.where(same, "duplicate of " + where,
                        "conflicting duplicate: " + where + " said " + prev["answer_canonical"].to_numpy())
        full = pd.Series("", index=r.index, dtype=object)
        full[dup] = text
        mark(dup, full)
    ok = reason == ""
    r["correct"] = [a in e.split(";") if t else "" for a, e, t in zip(r["answer_canonical"], expected, r["is_trap"])]
    r["expected"] = expected  # the trust rule weighs a trap by its accepted codes (stats-qc's per-row code)
    r["answer_shown"] = shown
    # the dominant list, row by row: a trap's expected answers naming one list better, else the example's
    def dominant_of(e, t, ex):
        if t:
            accepted = e.split(";")
            return 1 if "a_better" in accepted and "b_better" not in accepted else \
                -1 if "b_better" in accepted and "a_better" not in accepted else 0
        return int(dominant.get(ex, 0)) if dominant is not None else 0
    r["dominant"] = [dominant_of(e, t, x) for e, t, x in zip(expected, r["is_trap"], r["example_id"])]
    accepted = r[ok].assign(answer=r.loc[ok, "answer_canonical"])
    if reading is not None:
        accepted = accepted.assign(reading_seconds=accepted["item_id"].map(reading))
    workers = worker_table(accepted.assign(correct=accepted["correct"].replace("", False)),
                           threshold, min_traps, **(screen or {}))
    if "attention_passed" in r.columns:
        workers = exclude_failed_attention(workers, attention_failures(r), attention_limit)
    if "simulated" in r.columns:
        marked = set(r.loc[r["simulated"].fillna("").astype(str) == "yes", "worker_id"])
        workers["simulated"] = workers["worker_id"].isin(marked)
    before_exclusion = accepted.assign(answer=accepted["answer_canonical"])[ANSWER_TABLE_COLUMNS]
    before_exclusion = before_exclusion.reset_index(drop=True)
    excluded = workers.set_index("worker_id")["reason"][workers.set_index("worker_id")["excluded"]]
    mark(ok & r["worker_id"].isin(excluded.index),
         "excluded worker: " + r["worker_id"].map(excluded).astype(object).fillna("").astype(str))
    ok = reason == ""
    answers = r[ok].assign(answer=r.loc[ok, "answer_canonical"])[ANSWER_TABLE_COLUMNS]
    rejects = r[~ok].assign(reason=reason[~ok])[REJECT_TABLE_COLUMNS]
    return answers.reset_index(drop=True), rejects.reset_index(drop=True), workers, before_exclusion


# ---- a varied input ---------------------------------------------------------------------------
SPELLINGS = ["a_better", "B_BETTER", " both-good ", "both bad", "a", "b", "good", "bad", "A better",
             "both_Good", "maybe", "", "=cmd()", "a-better"]


def _varied(seed: int, n: int = 3000):
    """A key of 60 items (some swapped, 12 traps, one with two right answers, hashes on some)
    and ``n`` rows from three files: aliases, unknown and embedded-dataset item ids, unknown
    examples, platform statuses, blank and whitespace worker ids, missing submission times,
    duplicates that agree and that conflict, attention checks and simulated workers."""
    rng = np.random.default_rng(seed)
    items = [f"it{i:03d}" for i in range(60)]
    is_trap = np.arange(60) % 5 == 0
    key = pd.DataFrame({
        "item_id": items,
        "source_id": [f"t{i}" if t else f"ex{i % 40}" for i, t in enumerate(is_trap)],
        "is_trap": np.where(is_trap, "True", "False"),
        "swapped": np.where(rng.random(60) < 0.5, "True", "False"),
        "expected": [("a_better;both_good" if i == 10 else "b_better") if t else "" for i, t in enumerate(is_trap)],
        "example_hash": [f"h{i}" if i % 3 else "" for i in range(60)],
    })
    pool = items + ["zz-unknown", "example:ex3", "example:ex999", "example:ex7"]
    workers = [f"w{i}" for i in range(25)] + ["", "  "]
    rows = pd.DataFrame({
        "item_id": rng.choice(pool, n),
        "worker_id": rng.choice(workers, n, p=[0.038] * 25 + [0.025, 0.025]),
        "answer": rng.choice(SPELLINGS, n),
        "submitted_at": rng.choice(["2026-01-01T10:00:00Z", "2026-01-01T09:00:00Z", "", " 2026-01-02 "], n),
        "row_id": [f"r{i}" for i in range(n)],
        "trust": np.where(rng.random(n) < 0.3, rng.random(n).round(2), np.nan),
        "status": rng.choice(["", "", "", "", "", "", "", "", "rejected", "tainted"], n),
        "line": np.arange(n) % 1000 + 2,
        "seconds": np.where(rng.random(n) < 0.5, rng.integers(1, 60, n), np.nan),
        "source_file": np.array(["b-file.csv", "a-file.csv", "c-file.csv"])[np.arange(n) // 1000],
        "attention_passed": rng.choice(["", "yes", "no"], n, p=[0.845, 0.15, 0.005]),
        "simulated": rng.choice(["", "yes"], n, p=[0.95, 0.05]),
    })
    example_ids = {f"ex{i}" for i in range(40)}
    return rows, key, example_ids


def assert_same_frame(a: pd.DataFrame, b: pd.DataFrame) -> None:
    assert list(a.columns) == list(b.columns)
    assert len(a) == len(b)
    for col in a.columns:
        left, right = a[col].tolist(), b[col].tolist()
        assert [("nan" if isinstance(x, float) and x != x else str(x)) for x in left] == \
               [("nan" if isinstance(x, float) and x != x else str(x)) for x in right], col


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("threshold", [0.0, 0.6])
@pytest.mark.parametrize("categorical", [False, True])
def test_array_ingest_equals_the_per_row_code(seed, threshold, categorical):
    """``categorical``: the text columns given as categoricals (as ``rebuild`` gives the source
    file), read by their codes; the tables returned hold plain text all the same."""
    rows, key, example_ids = _varied(seed)
    screen = {"screen_seconds": 2.0, "screen_same_side": 0.9, "drop_traps": ("t15",)}
    reading = pd.Series(np.linspace(1, 9, 60), index=key["item_id"])
    # which list dominates in each example (+1 A, -1 B, 0 neither), for the judgment-consistency test
    dominant = pd.Series(np.random.default_rng(seed).choice([-1, 0, 1], 40), index=[f"ex{i}" for i in range(40)])
    given = rows
    if categorical:
        rows = rows.copy()
        rows.loc[5, "worker_id"] = np.nan  # a missing cell: code -1
        given = rows.assign(**{c: pd.Categorical(rows[c], categories=[*sorted(set(rows[c].dropna())), "unused"])
                               for c in ("source_file", "item_id", "worker_id", "answer", "submitted_at", "status")},
                             row_id=rows["row_id"].astype("str"))  # Arrow text, as the fast reader gives it
    written = {}
    new = resolve_rows(given, key, example_ids, threshold, 2, screen, reading, attention_limit=2, dominant=dominant,
                       written=written)
    if categorical:
        assert not any(isinstance(t[c].dtype, pd.CategoricalDtype) for t in new for c in t.columns)
    old = resolve_rows_per_row(rows, key, example_ids, threshold, 2, screen, reading, attention_limit=2,
                               dominant=dominant)
    for got, want in zip(new, old):
        assert_same_frame(got, want)
    # deferred (as an ingest asks for them): built whole, or a few columns alone, the same tables
    lazy = resolve_rows(given, key, example_ids, threshold, 2, screen, reading, attention_limit=2,
                        dominant=dominant, deferred=True)
    assert sum(type(t).__name__ == "_Deferred" for t in lazy) == 3
    for got, want in zip(lazy, old):
        if type(got).__name__ != "_Deferred":
            assert_same_frame(got, want)
            continue
        assert_same_frame(got.build(None), want)
        some = list(want.columns[::-3])
        assert_same_frame(got.build(some), want[some])
    trap_rows = old[3][old[3]["is_trap"].astype(str) == "True"].reset_index(drop=True)
    assert len(trap_rows) and len(trap_rows) < len(old[3])
    assert_same_frame(lazy[3].build(None, traps=True), trap_rows)
    answers, rejects, before = new[0], new[1], new[3]
    # the input reaches every reason, so the comparison covers each path
    reasons = rejects["reason"].str.extract(r"^(platform status|missing worker|unknown item|unknown example|"
                                            r"malformed|duplicate|conflicting|excluded worker)")[0]
    wanted = {"platform status", "missing worker", "unknown item", "unknown example", "malformed",
              "duplicate", "conflicting"} | ({"excluded worker"} if threshold else set())
    assert wanted <= set(reasons.dropna())
    assert len(answers) + len(rejects) == len(rows)
    assert set(before["swapped"]) == {True, False} and set(before["correct"]) == {True, False, ""}
    # the tables as the writer takes them (text as codes) make the files pandas writes of the
    # tables returned, by pandas and by the Arrow path alike
    from satcal import fileio
    for name, table in (("answers", answers), ("rejects", rejects)):
        want = fileio.to_csv_safe(table).encode("utf-8")
        assert fileio.table_csv_bytes(written[name]) == want
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(fileio, "ARROW_MIN_ROWS", 1)
            mp.setattr(fileio, "ARROW_BLOCK_ROWS", 700)
            assert fileio.table_csv_bytes(written[name]) == want


# ---- spreadsheet safety once per distinct value -----------------------------------------------
def spreadsheet_safe_per_cell(table):
    """The per-cell rule as satcal applied it before issue 23 (the reference)."""
    out = table.copy()
    for col in out.columns:
        values = out[col]
        if not (pd.api.types.is_object_dtype(values) or pd.api.types.is_string_dtype(values)):
            continue
        text = values.astype(str)
        risky = text.str.contains(r"^'*[=+\-@\t\r]", regex=True) & values.notna()
        numeric = pd.to_numeric(text.where(risky), errors="coerce").notna()
        risky &= ~numeric
        if risky.any():
            out[col] = values.astype(object).where(~risky, "'" + text)
    return out


def test_spreadsheet_safety_per_distinct_value_equals_the_per_cell_rule():
    from satcal.fileio import spreadsheet_safe, spreadsheet_value
    cells = ["=1+2", "+33 6 12", "-1", "-1.5e3", "@SUM(A1)", "\tx", "\rx", "'=x", "''+y", "plain", "",
             "a=b", "-", "+", "nan", None, np.nan, "1e5", "-inf", "=HYPERLINK(\"x\")"]
    rng = np.random.default_rng(3)
    pick = rng.integers(0, len(cells), 500)
    table = pd.DataFrame({"text": pd.Series([cells[i] for i in pick], dtype=object),
                          "mixed": pd.Series([True, "", "=x", 3, None] * 100, dtype=object),
                          "number": rng.normal(size=500),
                          "string": pd.Series([cells[i] for i in pick], dtype="string")})
    assert_same_frame(spreadsheet_safe(table), spreadsheet_safe_per_cell(table))
    # a categorical column is protected by its categories, the cells read back as they were
    cat = pd.DataFrame({"c": pd.Categorical([c for c in (cells[i] for i in pick) if isinstance(c, str)])})
    safe = spreadsheet_safe(cat)
    assert_same_frame(safe.astype(object), spreadsheet_safe_per_cell(cat.astype(object)))
    assert_same_frame(spreadsheet_value(safe.astype(object)), cat.astype(object))


# ---- an external study read by codes --------------------------------------------------------
def read_external_study_per_cell(path, judgments, unjudged="error"):
    """The per-cell reader before issue 23 (the reference): levels and ids of every row."""
    from satcal.answers import normalise_answers
    from satcal.errors import InputFileError
    table = pd.read_csv(path, dtype=str, keep_default_na=False)
    k = len([c for c in table.columns if c.startswith("a") and c[1:].isdigit()])
    out = pd.DataFrame({"example_id": [str(i + 1) for i in range(len(table))],
                        "query": table["query"].str.strip()})
    answers = normalise_answers(table["answer"], path)
    for side in "ab":
        cols = [f"{side}{i}" for i in range(1, k + 1)]
        docs = table[cols].apply(lambda s: s.str.strip()).to_numpy()
        lv = judgments.lookup(table["query"].str.strip(), docs)
        if np.isnan(lv).any():
            r, c = map(int, np.argwhere(np.isnan(lv))[0])
            if unjudged == "error":
                raise InputFileError(path, f"document {docs[r, c]!r} of query {table['query'].iloc[r]!r} "
                                           f"is not in the judgments (use --unjudged zero to count "
                                           f"unjudged documents as level 0)", r + 2, cols[c])
            lv = np.nan_to_num(lv, nan=0.0)
        for i, c in enumerate(cols):
            out[c] = table[c].str.strip()
        for i in range(k):
            out[f"r{side}{i + 1}"] = lv.astype(int)[:, i]
    out["answer"] = answers.to_numpy()
    out["worker_id"] = table["worker_id"].str.strip()
    return out


def _external_file(tmp_path, seed, unknown=False):
    import satcal
    ex = satcal.load_ecir2015().examples
    rng = np.random.default_rng(seed)
    n = 1500
    cols = ["query", *[f"a{i}" for i in range(1, 6)], *[f"b{i}" for i in range(1, 6)]]
    t = ex.iloc[rng.integers(0, len(ex), n)][cols].reset_index(drop=True).astype(str)
    pad = rng.random((n, len(cols))) < 0.2  # the same id with and without white space
    for j, c in enumerate(cols):
        t.loc[pad[:, j], c] = " " + t.loc[pad[:, j], c] + "\t"
    if unknown:
        t.loc[rng.integers(0, n, 30), "b3"] = "zz-not-judged"
    t["answer"] = rng.choice(["a", "B_better", " both-good", "bad", "a better", "BOTH_BAD"], n)
    t["worker_id"] = rng.choice([" w1", "w1", "w2 ", "007"], n)
    path = tmp_path / f"answers-{seed}.csv"
    t.to_csv(path, index=False)
    return path


@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("unknown", [False, True])
def test_external_study_by_codes_equals_the_per_cell_reader(tmp_path, seed, unknown):
    from satcal import load_ecir2015, read_external_study
    judgments = load_ecir2015().judgments
    path = _external_file(tmp_path, seed, unknown)
    got = read_external_study(path, judgments, unjudged="zero" if unknown else "error").examples
    want = read_external_study_per_cell(path, judgments, unjudged="zero" if unknown else "error")
    assert_same_frame(got, want)
    assert "007" in set(got["worker_id"])  # an id that looks like a number stays text


def test_external_study_by_codes_names_the_same_first_unjudged_cell(tmp_path):
    from satcal import load_ecir2015, read_external_study
    from satcal.errors import InputFileError
    judgments = load_ecir2015().judgments
    path = _external_file(tmp_path, 3, unknown=True)
    with pytest.raises(InputFileError) as got:
        read_external_study(path, judgments)
    with pytest.raises(InputFileError) as want:
        read_external_study_per_cell(path, judgments)
    assert str(got.value) == str(want.value)


# ---- a regular delimited file read by the C parser -------------------------------------------
@pytest.mark.parametrize("delimiter", [",", "\t"])
def test_regular_file_read_by_the_c_parser_equals_the_csv_module(tmp_path, delimiter):
    """Every record one unquoted line: the fast reader gives the csv module's cells and lines
    (blank lines skipped, white space, empty cells, ids like 007 and non-ASCII kept)."""
    import csv
    import io
    from satcal.fileio import read_delimited
    rng = np.random.default_rng(7)
    cells = ["007", " w1 ", "", "a_better", "ünï", "1.50", "True", "=x", "x y"]
    lines = [delimiter.join(["item_id", "worker_id", "answer"])]
    for i in range(400):
        lines.append(delimiter.join(rng.choice(cells, 3)))
        if i % 97 == 0:
            lines.append("")  # a blank line, skipped
    text = "\n".join(lines) + "\n"
    got = read_delimited(tmp_path / "f.csv", delimiter, ["item_id", "answer"], text=text)
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=delimiter, strict=True)
    header = next(reader)
    want, where = [], []
    while True:
        start = reader.line_num + 1
        row = next(reader, None)
        if row is None:
            break
        if row:
            want.append(row)
            where.append(start)
    assert list(got.columns) == [*header, "__line__"]
    assert got[header].values.tolist() == want
    assert got["__line__"].tolist() == where


@pytest.mark.parametrize("delimiter", [",", "\t"])
@pytest.mark.parametrize("arrow,coded", [(True, False), (True, True), (False, True)])
def test_regular_file_without_blank_lines_read_by_arrow_equals_the_csv_module(tmp_path, monkeypatch,
                                                                              delimiter, arrow, coded):
    """A file with no blank line is read by pyarrow's CSV reader when it is installed (by the
    numpy check and pandas otherwise): the csv module's cells, line 2, 3, ... of each row
    (``coded``: columns of few values as Categoricals, the row ids as Arrow text, the same
    values); a line with a field too few still goes to the row-by-row reader, which names it."""
    import csv
    import io
    from satcal import fileio
    from satcal.errors import InputFileError
    if arrow:
        pytest.importorskip("pyarrow")
    else:
        monkeypatch.setattr(fileio, "_read_regular_arrow", lambda *a: NotImplemented)  # as without pyarrow
    rng = np.random.default_rng(8)
    cells = ["007", " w1 ", "", "a_better", "ünï", "1.50", "True", "=x", "x y", "-", "#c"]
    lines = [delimiter.join(["item_id", "worker_id", "answer"])]
    for i in range(30_000):  # more than 20,000 rows: the mostly-distinct column is kept apart
        lines.append(delimiter.join([f"r{i}", *rng.choice(cells, 2)]))
    text = "\n".join(lines)  # no line end after the last row
    got = fileio.read_delimited(tmp_path / "f.csv", delimiter, ["item_id", "answer"], text=text, coded=coded)
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=delimiter, strict=True)
    want = list(reader)
    assert list(got.columns) == [*want[0], "__line__"]
    if coded and arrow:
        assert isinstance(got["worker_id"].dtype, pd.CategoricalDtype) and got["item_id"].dtype == "str"
    assert got[want[0]].astype(object).values.tolist() == want[1:]
    assert got["__line__"].tolist() == list(range(2, len(want) + 1))
    broken = text.replace(f"\nr2000{delimiter}", "\nr2000", 1)
    with pytest.raises(InputFileError, match=r"f\.csv:2002: truncated line: 2 fields"):
        fileio.read_delimited(tmp_path / "f.csv", delimiter, ["item_id", "answer"], text=broken)


def test_chunked_text_coded_as_combined_and_a_file_of_several_arrow_blocks(tmp_path):
    """``_dictionary_codes`` of text in chunks (values first seen in later chunks, an empty
    chunk, no chunk) equals ``combine_chunks().dictionary_encode()``; and a file of several of
    Arrow's 1 MB blocks read with ``coded`` holds the csv module's cells."""
    import csv
    import io
    pa = pytest.importorskip("pyarrow")
    from satcal import fileio
    rng = np.random.default_rng(21)
    pool = np.array([f"v{i}" for i in range(300)] + ["", "=x", "é"], dtype=object)
    chunks = [pa.array(list(pool[rng.integers(0, 20 * (j + 1), rng.integers(0, 500))]), type=pa.string())
              for j in range(12)] + [pa.array([], type=pa.string())]
    for cells in (pa.chunked_array(chunks), pa.chunked_array([], type=pa.string())):
        codes, distinct = fileio._dictionary_codes(cells)
        whole = cells.combine_chunks().dictionary_encode()
        assert codes.tolist() == whole.indices.to_pylist()
        assert list(distinct) == whole.dictionary.to_pylist()
    lines = ["item_id,worker_id,answer,submitted_at"]
    stamps = np.array([f"2026-11-{d:02d}T10:00:00Z" for d in range(1, 29)], dtype=object)
    for i in range(110_000):  # about 4 MB: several blocks, each column in several chunks
        lines.append(f"i{rng.integers(0, 3000)},w{rng.integers(0, 900)},{pool[rng.integers(0, 5)]},"
                     f"{stamps[rng.integers(0, 28)]}")
    text = "\n".join(lines) + "\n"
    got = fileio.read_delimited(tmp_path / "f.csv", ",", ["item_id", "answer"], text=text, coded=True)
    want = list(csv.reader(io.StringIO(text, newline="")))
    assert all(isinstance(got[c].dtype, pd.CategoricalDtype) for c in want[0])
    assert got[want[0]].astype(object).values.tolist() == want[1:]
    assert got["__line__"].tolist() == list(range(2, len(want) + 1))


@pytest.mark.parametrize("setting", [True, False])
def test_ordinary_pages_restores_numpys_setting(setting):
    """An ingest's stages run with numpy's huge-page advice off and give it back as it was,
    also when the stage raises."""
    from numpy._core.multiarray import _set_madvise_hugepage
    from satcal.fileio import ordinary_pages
    seen = []

    @ordinary_pages
    def stage(fail):
        seen.append(_set_madvise_hugepage(False))  # the setting inside (set back just below)
        if fail:
            raise ValueError("stage failed")
        return 7

    previous = _set_madvise_hugepage(setting)
    try:
        assert stage(False) == 7
        with pytest.raises(ValueError):
            stage(True)
        assert _set_madvise_hugepage(setting) == setting  # restored after each call
    finally:
        _set_madvise_hugepage(previous)
    assert seen == [False, False]


def test_reasons_are_shortened_as_the_regular_expression_did():
    """The ingest summary counts duplicates, excluded workers and malformed answers each as one
    reason: ``_short_reason`` (``str.find``) against the regular expression it replaced, on
    reasons an ingest writes and on texts holding the heads anywhere, twice or across a line end."""
    import re
    from satcal.ingest import _short_reason
    pattern = re.compile(r"(duplicate).*|(excluded worker).*|(malformed answer).*")
    texts = ["duplicate of a.csv:3", "conflicting duplicate: a.csv:3 said a_better",
             "excluded worker: trust 0.20 (1 of 5 traps): below 0.70", "malformed answer 'maybe'",
             "platform status: rejected", "missing worker id", "", "platform status: duplicate\nexcluded worker",
             "malformed answer 'duplicate'", "excluded worker: duplicate", "unknown example id"]
    parts = ["duplicate", "excluded worker", "malformed answer", "x", ": ", "\n", "dup"]
    rng = np.random.default_rng(0)
    texts += ["".join(rng.choice(parts, rng.integers(0, 6))) for _ in range(2000)]
    for text in texts:
        want = pattern.sub(lambda m: m.group(1) or m.group(2) or m.group(3), text)
        assert _short_reason(text) == want, text


def test_every_rows_reason_shortened_by_arrow_as_one_by_one():
    """``_short_reasons`` (Arrow's ``starts_with`` for the duplicates' reasons, the others once
    per distinct text) against the regular expression applied to each row, on the texts above
    and random ones (a head at the start, later, across a line end), held as Arrow text and as
    objects; and the ingest summary's counts built from them, the same Series."""
    import re
    from satcal.ingest import _short_reasons
    pattern = re.compile(r"(duplicate).*|(excluded worker).*|(malformed answer).*")
    parts = ["duplicate", "conflicting duplicate", "excluded worker", "malformed answer", "x", ": ", "\n", "dup"]
    rng = np.random.default_rng(1)
    texts = ["duplicate of a.csv:3", "conflicting duplicate: a.csv:3 said a_better", "duplicate of a\nb.csv:2",
             "conflicting duplicate: x\n said b", "platform status: duplicate", "excluded worker: duplicate"]
    texts += ["".join(rng.choice(parts, rng.integers(0, 5))) for _ in range(3000)]
    texts = list(rng.choice(np.array(texts, dtype=object), 20_000))
    want = np.array([pattern.sub(lambda m: m.group(1) or m.group(2) or m.group(3), t) for t in texts], dtype=object)
    for held in (pd.Series(texts, dtype="str"), pd.Series(texts, dtype=object), pd.Series([], dtype="str")):
        got = _short_reasons(held)
        expected = want[:len(held)]
        assert got.dtype == object and list(got) == list(expected)
        pd.testing.assert_series_equal(pd.Series(got, dtype=object, name="reason").value_counts(),
                                       pd.Series(expected, dtype=object, name="reason").value_counts())


@pytest.mark.parametrize("content", [b"item_id,worker_id,answer\ni1,w1,a\ni2,w2,b\n", b"a,b\n1,2",
                                     b'a,b\n"x,y",2\n', b"a,b\r\n1,2\r\n", b"a,b\n1\n", b" \n\x1c\t\n", b""])
def test_an_ascii_file_is_read_as_its_decoded_text(tmp_path, content):
    """An ASCII file is read from its bytes (no decoded copy): the same table, or the same
    error, as from its text decoded by ``decode_utf8`` and given to ``read_delimited``."""
    from satcal.errors import InputFileError
    from satcal.fileio import decode_utf8, read_delimited
    path = tmp_path / "f.csv"
    path.write_bytes(content)
    header = content.split(b"\n")[0].decode().strip().split(",")
    outcomes = []
    for text in (None, decode_utf8(content, path)):
        try:
            outcomes.append(read_delimited(path, ",", header[:1], text=text, rows="rows"))
        except InputFileError as exc:
            outcomes.append(str(exc))
    if isinstance(outcomes[0], str):
        assert outcomes[0] == outcomes[1]
    else:
        pd.testing.assert_frame_equal(outcomes[0], outcomes[1])


def test_a_result_file_is_parsed_from_the_bytes_archived(tmp_path):
    """``read_result_files`` reads a file once: its platform's reader parses the bytes that are
    hashed and archived (held by ``fileio.holding``), not a second read of the path."""
    import hashlib
    from satcal import fileio
    from satcal.ingest import read_result_files
    path = tmp_path / "results.csv"
    first = b"item_id,worker_id,answer\ni1,w1,a_better\ni2,w2,b_better\n"
    path.write_bytes(first)
    calls = []
    real = fileio.Path.read_bytes
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(fileio.Path, "read_bytes", lambda self: calls.append(self) or real(self))
        (got,) = read_result_files([path], "csv", set())
    assert len(calls) == 1
    assert got.data == first and got.sha256 == hashlib.sha256(first).hexdigest()
    assert got.rows["worker_id"].astype(str).tolist() == ["w1", "w2"]
    with fileio.holding(path, b"other"):
        assert fileio.read_file_bytes(path) == b"other"
    assert fileio.read_file_bytes(path) == first


@pytest.mark.parametrize("trust", [False, True])
def test_worker_table_on_categorical_ids_equals_it_on_text(trust):
    """The ingest hands worker_table its workers and shown answers as Categoricals (codes, no
    string per row): the table is the one the same values as text give, with the categories
    in any order, unused categories and platform trust."""
    from satcal.ingest import ANSWER_CODES
    from satcal.quality import worker_table
    rng = np.random.default_rng(5)
    n = 6000
    workers = np.array([f"w{i:03d}" for i in range(60)], dtype=object)
    traps = rng.random(n) < 0.2
    text = pd.DataFrame({
        "worker_id": workers[rng.integers(0, 60, n)],
        "example_id": np.array([f"e{i}" for i in range(40)], dtype=object)[rng.integers(0, 40, n)],
        "is_trap": traps,
        "correct": np.where(traps, rng.random(n) < 0.7, False).astype(object),
        "expected": np.where(traps, "a_better", "").astype(object),
        "answer_shown": np.asarray(ANSWER_CODES, dtype=object)[rng.integers(0, 4, n)],
        "answer": np.asarray(ANSWER_CODES, dtype=object)[rng.integers(0, 4, n)],
        "dominant": rng.integers(-1, 2, n).astype(float)})
    if trust:
        text["trust"] = np.where(rng.random(n) < 0.5, rng.random(n), np.nan)
    order = list(pd.unique(text["worker_id"]))[::-1] + ["zz", "aa"]  # not sorted, two unused
    coded = text.assign(worker_id=pd.Categorical(text["worker_id"], categories=order),
                        answer_shown=pd.Categorical(text["answer_shown"], categories=sorted(ANSWER_CODES)))
    expected = worker_table(text, 0.6, 3)
    assert len(expected) == 60
    pd.testing.assert_frame_equal(worker_table(coded, 0.6, 3), expected)


@pytest.mark.parametrize("n,span", [(0, 1), (1, 1), (200, 3), (5000, 20_000), (5000, 35_000), (5000, 10**12)])
def test_first_appearance_codes_equal_pandas_factorize(n, span):
    """Duplicates number the (worker, example) pairs as they first appear, by a dense array
    when the pairs' span allows, by a hash table otherwise: pandas' codes either way."""
    from satcal.ingest import _first_appearance_codes
    values = np.random.default_rng(n).integers(0, span, n)
    np.testing.assert_array_equal(_first_appearance_codes(values), pd.factorize(values)[0])


def test_only_the_satcal_process_itself_keeps_freed_memory(monkeypatch):
    """The allocator setting (fileio.keep_freed_memory) lasts for the process: the ingest command
    makes it only when the process is the command (console script or ``python -m satcal``),
    never inside a caller's process such as a test runner's."""
    import sys

    from satcal.cli import _own_process
    for argv, own in ((["/usr/local/bin/satcal", "ingest"], True), (["/src/satcal/__main__.py", "ingest"], True),
                      (["/venv/lib/pytest/__main__.py"], False), (["/usr/bin/python3"], False), ([""], False)):
        monkeypatch.setattr(sys, "argv", argv)
        assert _own_process() is own, argv
