import numpy as np
import pandas as pd
import pytest

from satcal.errors import InputFileError, SatcalError
from satcal.traps import TRAP_KINDS, build_traps, read_traps


def test_twenty_traps_spread_evenly(ecir_study):
    t = build_traps(ecir_study.judgments, k=5, n=20, seed=1)
    assert len(t) == 20 and t["expected"].value_counts().to_dict() == {k: 5 for k in TRAP_KINDS}
    j = ecir_study.judgments
    for side in "ab":
        lv = j.lookup(t["query"], t[[f"{side}{i}" for i in range(1, 6)]].to_numpy())
        np.testing.assert_array_equal(lv, t[[f"r{side}{i}" for i in range(1, 6)]].to_numpy(float))
    # the expected answer follows from the levels
    a_top = t[[f"ra{i}" for i in range(1, 6)]].eq(2).all(axis=1)
    b_top = t[[f"rb{i}" for i in range(1, 6)]].eq(2).all(axis=1)
    derived = np.select([a_top & ~b_top, ~a_top & b_top, a_top & b_top], ["a_better", "b_better", "both_good"], "both_bad")
    assert (derived == t["expected"]).all()


def test_user_traps_with_several_answers(ecir_study, tmp_path):
    ex = ecir_study.examples.head(3)
    cols = ["query"] + [f"a{i}" for i in range(1, 6)] + [f"b{i}" for i in range(1, 6)]
    f = tmp_path / "traps.csv"
    ex[cols].assign(expected=["a_better; both_good", "both_bad", "b_better|both_bad"]).to_csv(f, index=False)
    t = read_traps(f, ecir_study.judgments, 5)
    assert t["expected"].tolist() == ["a_better;both_good", "both_bad", "b_better;both_bad"]


def test_user_traps_bad_code(ecir_study, tmp_path):
    ex = ecir_study.examples.head(2)
    cols = ["query"] + [f"a{i}" for i in range(1, 6)] + [f"b{i}" for i in range(1, 6)]
    f = tmp_path / "traps.csv"
    ex[cols].assign(expected=["a_better", "maybe"]).to_csv(f, index=False)
    with pytest.raises(InputFileError, match=r"traps.csv:3: column 'expected'"):
        read_traps(f, ecir_study.judgments, 5)


def test_no_eligible_query(ecir_study):
    with pytest.raises(SatcalError, match=r"no query has 40 judged relevant documents \(above level 0\) and 40 non-relevant"):
        build_traps(ecir_study.judgments, k=40, n=4)


def test_traps_on_judgments_without_the_top_level_everywhere(tmp_path):
    """Levels -2..4 where no query has k documents at level 4 (as in TREC Web 2011-2014):
    traps come from each query's best documents, and say so."""
    from satcal.judgments import read_judgments
    rng = np.random.default_rng(3)
    lines = []
    for q in range(201, 211):
        for d in range(60):
            level = int(rng.choice([-2, 0, 0, 0, 1, 1, 2, 3, 4], p=[.05, .3, .2, .1, .1, .1, .07, .05, .03]))
            lines.append(f"{q} 0 clueweb12-{q}-{d:04d} {level}")
    for q in range(201, 211):  # at most 2 documents at level 4 per query
        lines = [l for l in lines if not (l.startswith(f"{q} ") and l.endswith(" 4"))] + \
            [f"{q} 0 clueweb12-{q}-top{j} 4" for j in range(2)]
    path = tmp_path / "qrels.web.txt"
    path.write_text("\n".join(lines) + "\n")
    judgments = read_judgments(path)
    traps = build_traps(judgments, k=5, n=9, seed=1, levels=[0, 1, 2, 3, 4])
    good_cols, bad_cols = [f"ra{i}" for i in range(1, 6)], [f"rb{i}" for i in range(1, 6)]
    a_better = traps[traps["expected"].str.startswith("a_better")]
    # no "both good" trap: whether lists of level 2-4 documents satisfy is not for the levels to say
    assert len(traps) == 9 and traps["expected"].str.split(";").str[0].value_counts().to_dict() == \
        {"a_better": 3, "b_better": 3, "both_bad": 3}
    assert (a_better[good_cols].to_numpy() >= 2).all() and (a_better[bad_cols].to_numpy() == 0).all()
    # good lists not all at level 4 accept "both bad" too; both-bad traps only "both bad"
    not_top = a_better[good_cols].ne(4).any(axis=1)
    assert (a_better["expected"] == np.where(not_top, "a_better;both_bad", "a_better")).all()
    assert (traps.loc[traps["expected"] == "both_bad", good_cols + bad_cols].to_numpy() == 0).all()
    # every listed level is the document's own judgment
    for _, t in traps.iterrows():
        levels = judgments.lookup(pd.Series([t["query"]]), t[[f"a{i}" for i in range(1, 6)]].to_numpy()[None, :].astype(str))
        assert list(levels[0]) == list(t[good_cols])
    assert "no query has 5 documents at level 4" in traps.attrs["built"]


# --------------------------------------------------------------------------------------------
# A traps file is validated like judgments: one line per mistake, naming file, line, column
# --------------------------------------------------------------------------------------------
COLS = ["query"] + [f"a{i}" for i in range(1, 6)] + [f"b{i}" for i in range(1, 6)]


def _traps_file(ecir_study, tmp_path, edit=None, extra_levels=False, name="my-traps.csv"):
    """Three traps from published examples (lists of distinct judged documents); ``edit``
    changes the table before it is written."""
    t = ecir_study.examples.head(3)[COLS].reset_index(drop=True).assign(
        expected=["a_better", "both_bad", "b_better"])
    if extra_levels:
        j = ecir_study.judgments
        for side in "ab":
            lv = j.lookup(t["query"], t[[f"{side}{i}" for i in range(1, 6)]].to_numpy())
            for i in range(5):
                t[f"r{side}{i + 1}"] = lv[:, i].astype(int)
    if edit is not None:
        edit(t)
    f = tmp_path / name
    t.to_csv(f, index=False)
    return f, t


def _mistakes(info) -> list[str]:
    lines = str(info.value).splitlines()
    assert all(not l.startswith("Traceback") for l in lines)
    return lines


def test_a_traps_file_repeating_a_document_in_a_list(ecir_study, tmp_path):
    """A list that shows one document twice is a trap the generator could never build; each
    repetition is one line naming the file, the line and the column."""
    def edit(t):
        t.loc[1, "a4"] = t.loc[1, "a2"]  # line 3
        t.loc[2, "b5"] = t.loc[2, "b1"]  # line 4
    f, t = _traps_file(ecir_study, tmp_path, edit)
    with pytest.raises(InputFileError) as info:
        read_traps(f, ecir_study.judgments, 5)
    assert _mistakes(info) == [
        f"{f}:3: column 'a4': document {t.loc[1, 'a2']!r} is in list a twice (columns a2 and a4): a list "
        "holds distinct documents",
        f"{f}:4: column 'b5': document {t.loc[2, 'b1']!r} is in list b twice (columns b1 and b5): a list "
        "holds distinct documents"]


def test_a_traps_file_with_levels_out_of_range(ecir_study, tmp_path):
    """Documents judged outside the study's levels (which lists are built from), and level
    columns (ra1.., rb1.., as in a generated traps.csv) that are no level or contradict the
    judgments: one line each."""
    j = ecir_study.judgments
    f, t = _traps_file(ecir_study, tmp_path, extra_levels=True,
                       edit=lambda t: t.__setitem__("rb2", [t.loc[0, "rb2"], 7, "high"]))
    with pytest.raises(InputFileError) as info:
        read_traps(f, j, 5, levels=[0, 1])
    # independently: every document judged 2 is out of the levels [0, 1]
    expected = []
    for r in range(3):
        row = []
        for side in "ab":
            lv = j.lookup(t["query"].iloc[[r]], t[[f"{side}{i}" for i in range(1, 6)]].iloc[[r]].to_numpy())[0]
            for i in range(5):
                col = f"{side}{i + 1}"
                if lv[i] == 2:
                    row.append(f"{f}:{r + 2}: column {col!r}: document {t.loc[r, col]!r} of query "
                               f"{t.loc[r, 'query']!r} is judged 2, outside the study's levels 0, 1")
        if r == 1:
            row.append(f"{f}:3: column 'rb2': level 7 is not one of the study's levels 0, 1")
        if r == 2:
            row.append(f"{f}:4: column 'rb2': level 'high' is not one of the study's levels 0, 1")
        expected += row
    assert len(expected) >= 3
    lines = _mistakes(info)
    shown = min(len(expected), 20)
    assert lines[:shown] == expected[:shown]


def test_a_level_column_contradicting_the_judgments(ecir_study, tmp_path):
    j = ecir_study.judgments
    f, t = _traps_file(ecir_study, tmp_path, extra_levels=True,
                       edit=lambda t: t.__setitem__("ra3", [t.loc[0, "ra3"], t.loc[1, "ra3"], (t.loc[2, "ra3"] + 1) % 3]))
    with pytest.raises(InputFileError) as info:
        read_traps(f, j, 5)
    true = int(j.lookup(t["query"].iloc[[2]], t[["a3"]].iloc[[2]].to_numpy())[0, 0])
    assert _mistakes(info) == [f"{f}:4: column 'ra3': level {(true + 1) % 3} but the judgments give "
                               f"document {t.loc[2, 'a3']!r} of query {t.loc[2, 'query']!r} level {true}"]


def test_a_good_traps_file_with_level_columns_reads_as_without(ecir_study, tmp_path):
    plain, _ = _traps_file(ecir_study, tmp_path, name="plain.csv")
    with_levels, _ = _traps_file(ecir_study, tmp_path, extra_levels=True, name="levels.csv")
    pd.testing.assert_frame_equal(read_traps(plain, ecir_study.judgments, 5),
                                  read_traps(with_levels, ecir_study.judgments, 5))


def test_traps_file_mistakes_through_the_cli(exported_workspace, tmp_path, ecir_study, copy_workspace):
    """generate with traps.file = a file with two mistakes: exit code 2, one error line, then
    one line for the second mistake; no traceback; nothing written."""
    from click.testing import CliRunner
    from satcal.cli import main
    ws = copy_workspace(exported_workspace("csv", 5), tmp_path)

    def edit(t):
        t.loc[0, "a5"] = t.loc[0, "a1"]
        t.loc[2, "expected"] = "maybe"
    f, _ = _traps_file(ecir_study, ws.path, edit)
    toml = ws.path / "study.toml"
    toml.write_text(toml.read_text().replace('file = ""', 'file = "my-traps.csv"', 1))
    assert 'file = "my-traps.csv"' in toml.read_text()
    before = (ws.path / "examples.csv").read_bytes()
    res = CliRunner().invoke(main, ["generate", str(ws.path), "--force", "-q"])
    assert res.exit_code == 2 and "Traceback" not in res.output, res.output
    lines = res.output.strip().splitlines()
    assert lines[0].startswith(f"satcal: error: {f}:2: column 'a5': document ") and len(lines) == 2
    assert lines[1].startswith(f"{f}:4: column 'expected': expected 'maybe' is not one or more of")
    assert (ws.path / "examples.csv").read_bytes() == before
