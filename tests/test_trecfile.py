"""The columnar TREC reader (satcal.trecfile) against Python's own parsing of the same bytes:
float() for numbers, str.split() for fields, dictionaries for ids, and the string-table path
of Judgments/Runs for ranking and look-up."""
import numpy as np
import pandas as pd
import pytest

from satcal import trecfile
from satcal.judgments import Judgments, read_judgments
from satcal.runs import Runs, level_cube, read_runs
from satcal.trecfile import TokenIds, parse_decimals, read_columns


def _random_numbers(rng, n):
    out = []
    for _ in range(n):
        kind = rng.integers(0, 7)
        digits = "".join(rng.choice(list("0123456789"), size=int(rng.integers(1, 19))))
        if kind == 0:
            out.append(digits)
        elif kind == 1:
            out.append("-" + digits[:8] + "." + digits[8:])
        elif kind == 2:
            out.append("+." + digits)
        elif kind == 3:
            out.append(digits + ".")
        elif kind == 4:
            out.append(repr(float(rng.normal() * 10.0 ** rng.integers(-12, 12))))  # exponents, 17 digits
        elif kind == 5:
            out.append(str(rng.choice(["-0", "0.0", "inf", "-inf", "1e3", "-2.5E-07", "nan"])))
        else:
            out.append(f"{rng.uniform(-100, 100):.{int(rng.integers(0, 10))}f}")
    return out


def _column(tokens):
    raw = " ".join(tokens).encode() + b"\n"
    buf = np.frombuffer(raw + b"\0" * 8, dtype=np.uint8)
    lengths = np.array([len(t) for t in tokens])
    starts = np.concatenate([[0], np.cumsum(lengths + 1)[:-1]])
    return buf, starts, lengths


def test_decimals_equal_python_float_bit_for_bit(rng):
    tokens = _random_numbers(rng, 5000)
    got = parse_decimals(*_column(tokens))
    want = np.array([float(t) for t in tokens])
    np.testing.assert_array_equal(got.view(np.int64)[~np.isnan(want)], want.view(np.int64)[~np.isnan(want)])
    assert np.isnan(got[np.isnan(want)]).all()


@pytest.mark.parametrize("token", ["1.2.3", "--1", "1-", "-", ".", "abc", "1,5", "0x10"])
def test_non_numbers_are_refused(token):
    assert parse_decimals(*_column(["1.5", token])) is None


def _ids(rng, n, pool):
    """Ids of 1 to 30 characters (one, two and four 64-bit words), some sharing long prefixes."""
    alphabet = list("abcdefghijklmnopqrstuvwxyz0123456789-_.:/")
    names = ["".join(rng.choice(alphabet, size=int(rng.integers(1, 31)))) for _ in range(pool)]
    names += ["clueweb12-0000tw-00-0000" + str(i) for i in range(pool // 4)]
    return [names[i] for i in rng.integers(0, len(names), size=n)]


def _write_qrels(path, rng, n=3000, crlf=False):
    queries = _ids(rng, n, 40)
    docs = _ids(rng, n, 800)
    pairs = {}
    for q, d in zip(queries, docs):
        pairs.setdefault((q, d), int(rng.integers(-2, 5)))
    sep = "\r\n" if crlf else "\n"
    lines = []
    for (q, d), lv in pairs.items():
        lines.append(f"{q}{' ' * int(rng.integers(1, 3))}0\t{d} {lv}")
        if rng.random() < 0.05:
            lines.append("   ")  # blank lines are allowed
    path.write_bytes(sep.join(lines).encode() + (b"" if rng.random() < 0.5 else sep.encode()))
    return pairs


@pytest.mark.parametrize("crlf", [False, True])
def test_qrels_read_in_columns_equal_a_python_parse(tmp_path, rng, crlf):
    p = tmp_path / "qrels.txt"
    pairs = _write_qrels(p, rng, crlf=crlf)
    j = read_judgments(p)
    assert j._ids is not None  # the columnar reader took this file
    got = {(q, d): lv for q, d, lv in j.table.itertuples(index=False, name=None)}
    assert got == pairs
    assert j.queries == sorted({q for q, _ in pairs})
    pools = j.pools()
    for q in j.queries[:5]:
        assert sorted(pools[q].tolist()) == sorted(lv for (qq, _), lv in pairs.items() if qq == q)


def test_hash_collisions_fall_back_to_exact_comparison(tmp_path, rng, monkeypatch):
    p = tmp_path / "qrels.txt"
    pairs = _write_qrels(p, rng, n=500)
    monkeypatch.setattr(trecfile, "_hash", lambda words: np.zeros(len(words), dtype=np.uint64))
    j = read_judgments(p)
    assert {(q, d): lv for q, d, lv in j.table.itertuples(index=False, name=None)} == pairs
    # factorising: with no multiplier, ids ending in the same word share a hash
    monkeypatch.setattr(trecfile, "_MIX", np.uint64(0))
    j = read_judgments(p)
    assert {(q, d): lv for q, d, lv in j.table.itertuples(index=False, name=None)} == pairs
    words = trecfile._pack(*_column(["ab", "xxxxxxxxab", "yyyyyyyyab", "ab", "xxxxxxxxab"]))
    codes, distinct = trecfile.factorize_words(words)
    assert len(distinct) == 3 and codes[0] == codes[3] and codes[1] == codes[4] != codes[2]
    ids = TokenIds(np.arange(3), trecfile._pack(*_column(["a", "bbbbbbbbbbbb", "c"])))
    probe = trecfile._pack(*_column(["c", "zz", "bbbbbbbbbbbb"]))
    np.testing.assert_array_equal(ids.locate(probe), [2, -1, 1])


def _write_run(path, rng, tag, queries, docs):
    rows = []
    for q in queries:
        chosen = rng.choice(docs, size=int(rng.integers(1, 12)), replace=False)
        for d in chosen:
            score = float(rng.integers(0, 4)) / 2  # many ties: the doc id decides
            rows.append((q, d, score))
    text = "".join(f"{q} Q0 {d} {i} {s} {tag}\n" for i, (q, d, s) in enumerate(rows))
    path.write_text(text)
    return rows


def test_runs_and_cube_equal_the_string_table_path(tmp_path, rng):
    p = tmp_path / "qrels.txt"
    pairs = _write_qrels(p, rng, n=1500)
    queries = sorted({q for q, _ in pairs})
    docs = sorted({d for _, d in pairs}) + ["never-judged-" + str(i) for i in range(30)]
    paths, tables = [], []
    for tag in ("sysB", "sysA", "sysC"):
        path = tmp_path / f"{tag}.run"
        rows = _write_run(path, rng, tag, queries[:-3] + ["unknown-query"], docs)
        paths.append(path)
        tables.append(pd.DataFrame([(tag, q, d, s) for q, d, s in rows], columns=["system", "query", "doc", "score"]))
    j_cols, runs_cols = read_judgments(p), read_runs(paths)
    assert j_cols._ids is not None and runs_cols._ids is not None
    j_table = Judgments(j_cols.table.copy())
    runs_table = Runs(pd.concat(tables, ignore_index=True))
    pd.testing.assert_frame_equal(runs_cols.table, runs_table.table)
    for k in (1, 5, 10):
        cube_a, systems_a, queries_a = level_cube(runs_cols, j_cols, k)
        cube_b, systems_b, queries_b = level_cube(runs_table, j_table, k)
        assert systems_a == systems_b == ["sysB", "sysA", "sysC"] and queries_a == queries_b
        np.testing.assert_array_equal(cube_a, cube_b)
    # the trec_eval order, by hand: decreasing score, then decreasing document id
    top = runs_cols.ranked(3)
    for (system, query), g in list(runs_table.table.groupby(["system", "query"]))[:20]:
        want = sorted(g.itertuples(index=False), key=lambda r: (r.score, r.doc), reverse=True)[:3]
        got = top[(top["system"] == system) & (top["query"] == query)]
        assert got["doc"].tolist() == [r.doc for r in want]


@pytest.mark.parametrize("text", [
    "q 0 d 1\nq 0 e\n",          # a line with a field missing
    "q 0 d 1 x\nq 0 e\n",        # one field too many, one too few: the right count overall
    "q 0\nd 1 q 0 e 2\n",         # the same, with no blank line either
    "q 0 d 1\n# a comment\n",    # comments are for the line reader
    'q 0 "d" 1\n',               # quotes are for the line reader
    "q 0 d\xe9 1\n",             # non-ASCII
    "q 0 d 1\rq 0 e 2\n",        # a bare carriage return
    "q 0 d\x01 1\n",             # a control character
    "q 0 d one\n",               # not a number
    "\n  \n",                    # no line at all
])
def test_files_off_the_fast_path_are_left_to_the_general_reader(text):
    assert read_columns(text.encode(), 4, ids=(0, 2), numbers=(3,), forbidden=b'"#') is None


def test_file_larger_than_a_chunk_is_read_whole(tmp_path, rng, monkeypatch):
    monkeypatch.setattr(trecfile, "_CHUNK", 64)  # many chunks, each cut at a line end
    p = tmp_path / "qrels.txt"
    pairs = _write_qrels(p, rng, n=400)
    j = read_judgments(p)
    assert j._ids is not None
    assert {(q, d): lv for q, d, lv in j.table.itertuples(index=False, name=None)} == pairs


@pytest.mark.parametrize("groups,presorted", [(50, False), (50, True), (200_000, False)])
def test_group_then_score_order_equals_a_lexicographic_sort(rng, groups, presorted):
    """Each of the three ways (as written, radix on 16-bit groups, one integer sort) gives the
    order np.lexsort gives (tied rows may come in any order, so compare the keys)."""
    from satcal.runs import _order_by_group_then_score
    n = 300_000
    group = rng.integers(0, groups, size=n)
    score = np.round(rng.normal(size=n), 2)  # many ties
    if presorted:
        first = np.lexsort((-score, group))
        group, score = group[first], score[first]
    order = _order_by_group_then_score(group, score)
    want = np.lexsort((-score, group))
    assert sorted(order.tolist()) == list(range(n))
    np.testing.assert_array_equal(group[order], group[want])
    np.testing.assert_array_equal(score[order], score[want])
