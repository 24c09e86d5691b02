"""The Arrow CSV writer (fileio.write_csv_safe) writes the bytes pandas writes.

The reference is pandas itself: ``spreadsheet_safe(table).to_csv(index=False,
lineterminator="\\n")``, the path every table took before; each table is written both ways and
the bytes compared."""
import numpy as np
import pandas as pd
import pytest

from satcal import fileio
from satcal.fileio import spreadsheet_safe, table_csv_bytes, write_csv_safe

pa = pytest.importorskip("pyarrow")

TEXT = ["plain", "", " spaced ", "é", "日本語", "emoji 🎉", "=SUM(A1:A2)", "'=already", "''+twice", "+1",
        "-1.5", "-x", "@home", "\tindented", "1e5", "nan", "None", "True", "a;b", "r0", "x" * 300]
QUOTED = ['say "hi"', "a,b", "two\nlines", "carriage\rreturn"]


def reference(table: pd.DataFrame) -> bytes:
    return spreadsheet_safe(table).to_csv(index=False, lineterminator="\n").encode("utf-8")


@pytest.fixture(autouse=True)
def arrow_for_every_size(monkeypatch):
    monkeypatch.setattr(fileio, "ARROW_MIN_ROWS", 0)


def tricky_table(rng, n: int, text=TEXT, missing=(None, np.nan)) -> pd.DataFrame:
    pool = np.array(list(text) + list(missing), dtype=object)
    mixed = np.array(["", True, False, 1.5, np.nan, "x", 3], dtype=object)
    floats = np.array([0.0, -0.0, 1e-05, 1e16, 0.1 + 0.2, np.inf, -np.inf, np.nan, 2 / 3, 1.0, 123456789.125])
    return pd.DataFrame({
        "text": pool[rng.integers(0, pool.size, n)],
        "unique": [f"r{i}" for i in range(n)],
        "str_dtype": pd.array(np.array(list(text), dtype=object)[rng.integers(0, len(text), n)], dtype="str"),
        "flag": rng.integers(0, 2, n).astype(bool),
        "count": rng.integers(-5, 10**12, n),
        "share": floats[rng.integers(0, floats.size, n)],
        "mixed": mixed[rng.integers(0, mixed.size, n)],
        "=risky name": pool[rng.integers(0, pool.size, n)],
    })


@pytest.mark.parametrize("seed", range(5))
def test_arrow_path_writes_the_bytes_pandas_writes(seed):
    table = tricky_table(np.random.default_rng(seed), 500)
    assert fileio._arrow_columns(table) is not None  # the Arrow path is the one under test
    assert table_csv_bytes(table) == reference(table)


def test_every_value_alone_in_its_column():
    """Each tricky text in a column of its own, so that no other value hides a difference."""
    for value in TEXT + [None, np.nan, pd.NA]:
        table = pd.DataFrame({"a": [value] * 3, "b": ["x", "y", "z"]})
        assert table_csv_bytes(table) == reference(table), value


def test_cells_the_csv_module_quotes():
    """A comma or a quote: quoted by the Arrow path as the csv module quotes (after the
    spreadsheet rule, so a risky cell with a comma is marked, then quoted); a line end: the
    table goes to pandas."""
    rng = np.random.default_rng(7)
    for value in QUOTED + ['=a,b', '"', '""', ',', 'x",y']:
        table = tricky_table(rng, 50, text=TEXT + [value])
        table.loc[3, "text"] = value
        table.loc[4, "str_dtype"] = value
        assert (fileio._arrow_columns(table) is None) == ("\n" in value or "\r" in value)
        assert table_csv_bytes(table) == reference(table), value


def test_categorical_text_written_by_its_categories():
    """A categorical column of text (ingest's ids): each category rendered, made safe and quoted
    once, the cells spread by code; a missing cell empty; categories not text go to pandas."""
    rng = np.random.default_rng(5)
    cats = np.array(TEXT + ['a,b', 'say "hi"'], dtype=object)
    codes = rng.integers(-1, len(cats), 400)
    table = pd.DataFrame({"c": pd.Categorical.from_codes(codes, categories=pd.Index(cats, dtype=object)),
                          "n": np.arange(400)})
    assert fileio._arrow_columns(table) is not None
    assert table_csv_bytes(table) == reference(table)
    numbers = pd.DataFrame({"c": pd.Categorical([1.5, 2.0, None] * 5), "n": np.arange(15)})
    assert fileio._arrow_columns(numbers) is None
    assert table_csv_bytes(numbers) == reference(numbers)


def test_neighbouring_coded_columns_joined_once_per_combination(monkeypatch):
    """Neighbouring categorical, bool and float columns (an ingest's answer, is_trap, correct,
    submitted_at, source_file) are joined once per combination of their values and spread by
    one code: the bytes are pandas', with missing, risky and quoted categories among them, with
    and without a table that is all such columns, and whether or not the product of their
    distinct values is small enough to join (the limit moved both ways)."""
    rng = np.random.default_rng(13)
    n = 2_000
    cats = np.array(["a_better", "=risky", "a,b", 'say "hi"', "", "'+1"], dtype=object)

    def categorical(size, k):
        return pd.Categorical.from_codes(rng.integers(-1, k, size), categories=pd.Index(cats[:k], dtype=object))

    floats = np.array([0.0, -0.0, np.nan, 2 / 3, 1e16])
    table = pd.DataFrame({"id": categorical(n, 6), "flag": rng.integers(0, 2, n).astype(bool),
                          "answer": categorical(n, 4), "one": categorical(n, 1),
                          "share": floats[rng.integers(0, floats.size, n)],
                          "row": [f"r{i}" for i in range(n)], "trap": rng.integers(0, 2, n).astype(bool),
                          "kind": categorical(n, 3), "last": rng.integers(0, 2, n).astype(bool)})
    all_coded = table.drop(columns=["row"])
    # the runs by hand: 7 x 2 x 5 x 2 distinct values (missing included) = 140, x 5 = 700; 5 x 2 x 4 x 2 = 80
    for share in (4, 0.1, 10 ** 6):  # 4: two runs (limit 500); 0.1: one (limit 20,000); 10**6: none
        monkeypatch.setattr(fileio, "_JOINED_DICTIONARY_SHARE", share)
        for t in (table, all_coded, table.iloc[:7]):
            columns = fileio._arrow_columns(t)
            assert columns is not None
            assert table_csv_bytes(t) == reference(t)
        joined = len(fileio._arrow_columns(all_coded))
        assert joined == {4: 2, 0.1: 1, 10 ** 6: all_coded.shape[1]}[share]  # the runs were joined


def test_other_cells_and_shapes_fall_back_to_pandas():
    """bytes, dates, text categoricals (Arrow now), nullable integers, one column, no rows: the
    bytes are pandas' whichever path writes them."""
    frames = [pd.DataFrame({"a": [b"x", "y"], "b": [1, 2]}),
              pd.DataFrame({"a": pd.to_datetime(["2026-01-01", None]), "b": [1, 2]}),
              pd.DataFrame({"a": pd.Categorical(["=x", "y"]), "b": [1, 2]}),
              pd.DataFrame({"a": pd.array([1, None], dtype="Int64"), "b": [1, 2]}),
              pd.DataFrame({"a": ["", "x", None]}),
              pd.DataFrame({"a": pd.Series([], dtype=object), "b": pd.Series([], dtype=float)})]
    for table in frames:
        assert table_csv_bytes(table) == reference(table)


def test_ingest_tables_written_both_ways(tmp_path, monkeypatch):
    """The four tables of an ingest written through write_csv_safe are pandas' bytes."""
    table = tricky_table(np.random.default_rng(3), 2_000)
    path = write_csv_safe(tmp_path / "t.csv", table)
    assert path.read_bytes() == reference(table)
    monkeypatch.setattr(fileio, "_arrow_columns", lambda t: None)  # as without pyarrow
    assert write_csv_safe(tmp_path / "u.csv", table).read_bytes() == reference(table)


def test_blocks_written_one_by_one_and_a_late_quoted_cell(monkeypatch):
    """Written in blocks, the file is the same; a cell with a line end in a later block sends
    the whole table to pandas (what the earlier blocks wrote is discarded)."""
    monkeypatch.setattr(fileio, "ARROW_BLOCK_ROWS", 70)
    table = tricky_table(np.random.default_rng(11), 300)
    assert table_csv_bytes(table) == reference(table)
    table.loc[290, "text"] = "late, quoted"
    assert table_csv_bytes(table) == reference(table)
    table.loc[295, "text"] = "late\nline"
    assert table_csv_bytes(table) == reference(table)


def test_objects_equal_across_types_keep_their_own_text():
    """1, 1.0 and True are equal objects, as are 0.0 and -0.0, but each prints its own text."""
    cells = np.array([1, 1.0, True, np.int64(1), 0.0, -0.0, np.float32(0.1), np.float64(0.1), 0.1 + 0.2,
                      1e16, pd.Timestamp("2026-01-01"), pd.NaT, None, np.nan, 1 + 2j, "-3", "=1+2", b"x"] * 3,
                     dtype=object)
    table = pd.DataFrame({"a": cells, "b": np.arange(cells.size)})
    assert fileio._arrow_columns(table) is not None
    assert table_csv_bytes(table) == reference(table)


def test_text_arrow_cannot_encode_goes_to_pandas_which_refuses_it_as_before():
    table = pd.DataFrame({"a": pd.Series(["ok", "lone \ud800 surrogate"], dtype=object), "b": [1, 2]})
    with pytest.raises(UnicodeEncodeError):
        reference(table)
    with pytest.raises(UnicodeEncodeError):
        table_csv_bytes(table)
