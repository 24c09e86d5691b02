import numpy as np
import pytest

from satcal.errors import InputFileError
from satcal.judgments import read_judgments


def write(tmp_path, name, text, encoding="utf-8", newline="\n"):
    p = tmp_path / name
    p.write_bytes(text.replace("\n", newline).encode(encoding))
    return p


def test_trec_qrels(tmp_path):
    p = write(tmp_path, "q.txt", "q1 0 d1 2\nq1 0 d2 0\nq2 0 d1 1\n\n")
    j = read_judgments(p)
    assert len(j) == 3 and j.queries == ["q1", "q2"] and j.levels == (0, 1, 2)
    np.testing.assert_array_equal(j.lookup(["q1", "q2"], [["d1", "d2"], ["d1", "zz"]]),
                                  [[2, 0], [1, np.nan]])


@pytest.mark.parametrize("sep", [",", "\t"])
def test_named_columns_with_bom_and_crlf(tmp_path, sep):
    text = sep.join(["topic", "docno", "relevance"]) + "\n" + sep.join(["q1", "d1", "2"]) + "\n" + \
        sep.join(["q1", "d2", "-2"]) + "\n"
    p = write(tmp_path, "q.csv", text, encoding="utf-8-sig", newline="\r\n")
    j = read_judgments(p)
    assert j.table.to_dict("list") == {"query": ["q1", "q1"], "doc": ["d1", "d2"], "level": [2, -2]}
    assert j.levels == (-2, 0, 1, 2)


def test_exact_repeat_is_kept_once(tmp_path):
    j = read_judgments(write(tmp_path, "q.txt", "q1 0 d1 2\nq1 0 d1 2\n"))
    assert len(j) == 1


@pytest.mark.parametrize("text,line,fragment", [
    ("q1 0 d1 2\nq1 0 d2 high\n", 2, "level 'high' is not an integer"),
    ("q1 0 d1 2\nq1 0 d2 1.5\n", 2, "level '1.5' is not an integer"),
    ("q1 0 d1 2\nq1 1 d1 1\n", 2, "judged 1 here but 2 on line 1"),
    ("q1 0 d1 2\nq1 0 d2\n", 2, "expected 4 fields"),
    ("q1 0 d1 2\nq1 0 d2 7\n", 2, "level 7 is outside the declared scale 0..2"),
    ("query,doc,level\nq1,d1,1\nq1,d2\n", 3, "expected 3 columns"),
    ("query,doc,level\nq1,d1,x\n", 2, "not an integer"),
    # a header that names two of the three columns is a header with one missing, not a
    # qrels line with the wrong number of fields
    ("query,doc\nq1,d1\n", 1, "no level column in the header (expected one of level, relevance"),
    ("qid\tdocno\tlvl\nq1\td1\t2\n", 1, "no level column in the header"),
    ("doc,relevance\nd1,2\n", 1, "no query column in the header"),
    ("topic,grade\nq1,2\n", 1, "no document column in the header"),
    ("query doc level\nq1 d1 2\n", 1, "is separated by spaces: a CSV/TSV needs commas or tabs"),
    ("qid iter docno rel\nq1 0 d1 2\n", 1, "is separated by spaces"),
])
def test_malformed_input_names_file_and_line(tmp_path, text, line, fragment):
    p = write(tmp_path, "bad.txt", text)
    with pytest.raises(InputFileError) as info:
        read_judgments(p, levels=3)
    msg = str(info.value)
    assert msg.startswith(f"{p}:{line}") and fragment in msg and "\n" not in msg


@pytest.mark.parametrize("text", ["", "\n\n  \n", "# only a comment\n"])
def test_empty_file(tmp_path, text):
    with pytest.raises(InputFileError, match="empty|no judgments"):
        read_judgments(write(tmp_path, "e.txt", text))


def test_latin1_is_reported(tmp_path):
    p = tmp_path / "l.txt"
    p.write_bytes("q1 0 d1 2\nq\xe9 0 d2 1\n".encode("latin-1"))
    with pytest.raises(InputFileError, match=r"l.txt:2: is not UTF-8"):
        read_judgments(p)


def test_negative_levels_declared(tmp_path):
    p = write(tmp_path, "q.txt", "q1 0 d1 -2\nq1 0 d2 4\n")
    j = read_judgments(p, levels=range(-2, 5))
    assert j.top_level == 4 and j.n_levels == 5


def _parse_by_hand(text):
    """The reference reader: split every line, as the format defines it."""
    rows = {}
    for line in text.splitlines():
        parts = line.split()
        if parts:
            rows[(parts[0], parts[2])] = int(float(parts[3]))
    return sorted((q, d, lv) for (q, d), lv in rows.items())


@pytest.mark.parametrize("extra", ["", "007 0 NA 1\n01 0 null 2\n1 0 1e3 0\n", "# comment\n"])
def test_column_reader_equals_line_reader(tmp_path, rng, extra):
    """Ids that look like numbers or missing values stay strings ('01', 'NA', '1e3'), whether a
    file goes through the column reader or (for comments) the line reader."""
    lines = [f"{q} 0 d{int(rng.integers(0, 50))} {int(rng.integers(-1, 4))}" for q in
             rng.choice(["q1", "q2", "003", "4"], size=300)]
    text = "\n".join(dict.fromkeys(lines)) + "\n" + extra
    # repeated pairs would conflict: keep the first level of each pair, as a valid file must
    seen, kept = set(), []
    for line in text.splitlines():
        parts = line.split()
        if parts and not parts[0].startswith("#") and (parts[0], parts[2]) not in seen:
            seen.add((parts[0], parts[2]))
            kept.append(line)
    body = "\n".join(kept) + "\n" + ("# comment\n" if extra.startswith("#") else "")
    j = read_judgments(write(tmp_path, "q.txt", body))
    got = sorted(j.table.itertuples(index=False, name=None))
    assert got == _parse_by_hand("\n".join(kept))
    docs = np.array([[d for _, d, _ in got[:5]]], dtype=object)
    np.testing.assert_array_equal(j.lookup([got[0][0]], docs[:, :1]), [[got[0][2]]])


@pytest.mark.parametrize("text,line,fragment", [
    ("q1 0 d1 2\n" * 3 + "q1 0 d2 1 extra\n", 4, "expected 4 fields"),
    ("q1 0 d1 2\nq1 0 d2 100000000\n", 2, "not a relevance level"),
    ("q1 0 d1 2\nq1 0 d2 1e30\n", 2, "not a relevance level"),
])
def test_bad_lines_found_after_the_column_reader_fails(tmp_path, text, line, fragment):
    p = write(tmp_path, "bad.txt", text)
    with pytest.raises(InputFileError) as info:
        read_judgments(p)
    assert str(info.value).startswith(f"{p}:{line}") and fragment in str(info.value)


def test_run_reader_keeps_ids_as_text_and_names_bad_lines(tmp_path):
    from satcal.runs import read_runs
    p = write(tmp_path, "r.txt", "01 Q0 NA 1 2.5 t\n01 Q0 007 2 2.0 t\n1 Q0 d 1 1 t\n")
    t = read_runs([p]).table
    assert t["query"].tolist() == ["01", "01", "1"] and t["doc"].tolist() == ["NA", "007", "d"]
    for text, line, fragment in (("q Q0 d1 1 2 t\nq Q0 d2 1 t\n", 2, "expected 6 fields"),
                                 ("q Q0 d1 1 2 t\nq Q0 d1 2 1 t\n", 2, "retrieved twice"),
                                 ("q Q0 d1 1 2 t\nq Q0 d2 2 inf t\n", 2, "not finite")):
        bad = write(tmp_path, "bad.run", text)
        with pytest.raises(InputFileError) as info:
            read_runs([bad])
        assert str(info.value).startswith(f"{bad}:{line}") and fragment in str(info.value)
