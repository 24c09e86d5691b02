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
