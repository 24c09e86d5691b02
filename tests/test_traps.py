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
