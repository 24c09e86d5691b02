import pandas as pd
import pytest

from satcal.datasets import (ecir2015_file, load_ecir2015_crowd, published_scores, recover_judgments,
                             recover_patterns)
from satcal.errors import SatcalError
from satcal.judgments import read_judgments


def test_recovered_judgments_equal_the_shipped_file():
    recovered = recover_judgments()
    shipped = read_judgments(ecir2015_file("judgments.tsv"), levels=3)
    assert len(recovered) == 15018 and len(recovered.queries) == 432
    pd.testing.assert_frame_equal(recovered.table, shipped.table)


def test_licence_and_citation_ship_with_the_data():
    assert "Attribution-ShareAlike 4.0" in ecir2015_file("LICENSE-DATA").read_text()
    assert "Urbano" in ecir2015_file("CITE.bib").read_text()
    assert "judgments.tsv" in ecir2015_file("README.md").read_text()


def test_ambiguous_scores_are_refused():
    crowd = load_ecir2015_crowd().head(3)
    scores = published_scores(crowd, "A")
    scores[1] += 0.01  # no pattern is within rounding of these any more
    with pytest.raises(SatcalError, match="row 2"):
        recover_patterns(scores)


def test_study_levels(ecir_study):
    ex = ecir_study.examples
    assert len(ex) == 4115 and ex["query"].nunique() == 432
    assert ex["answer"].value_counts().to_dict() == {"b_better": 1071, "both_bad": 1056,
                                                     "a_better": 1019, "both_good": 969}
    assert "CC BY-SA 4.0" in ecir_study.notice
