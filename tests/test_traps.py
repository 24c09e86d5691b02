import numpy as np
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
    with pytest.raises(SatcalError, match="no query has 40 documents"):
        build_traps(ecir_study.judgments, k=40, n=4)
