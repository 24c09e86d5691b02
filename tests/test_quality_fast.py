"""The ingest's quality steps computed faster give the values of the slower code they replace:
quality.binom_cdf is scipy.stats.binom.cdf value for value (it spares an ingest importing
scipy.stats), and agreement counts examples by answer on integer codes as pd.crosstab did."""
import numpy as np
from scipy.stats import binom

from satcal.quality import binom_cdf


def test_binom_cdf_equals_scipy_stats_exactly():
    n = np.repeat(np.arange(0, 61), 61)
    k = np.tile(np.arange(0, 61), 61)
    for p in (0.0, 1e-9, 0.05, 0.25, 0.5, 0.7, 0.9, 0.999999, 1.0):
        ours, theirs = binom_cdf(k, n, p), binom.cdf(k, n, p)
        assert np.array_equal(ours, theirs, equal_nan=True), p


def test_binom_cdf_of_pandas_columns():
    import pandas as pd
    k, n = pd.Series([0, 3, 5, 2]), pd.Series([5, 3, 10, 0])
    assert np.array_equal(binom_cdf(k, n, 0.7), binom.cdf(k, n, 0.7))


def _crosstab_agreement(answers):
    """The agreement computation before it counted on codes: pd.crosstab, then krippendorff."""
    import krippendorff
    import pandas as pd
    from satcal.answers import ANSWER_CODES
    counts = pd.crosstab(answers["example_id"], answers["answer"]).reindex(columns=list(ANSWER_CODES), fill_value=0)
    m = counts[counts.sum(axis=1) >= 2].to_numpy(dtype=float)
    pairs, totals = (m * (m - 1)).sum(axis=1), m.sum(axis=1)
    return (float(krippendorff.alpha(value_counts=m, level_of_measurement="nominal")),
            float(pairs.sum() / (totals * (totals - 1)).sum()), len(m), int(totals.sum()), float(totals.mean()))


def test_agreement_equals_the_crosstab_computation():
    import pandas as pd
    from satcal.answers import ANSWER_CODES
    from satcal.quality import agreement
    rng = np.random.default_rng(4)
    n = 5_000
    codes = np.array(list(ANSWER_CODES) + ["not a code"], dtype=object)
    answers = pd.DataFrame({"example_id": np.array([f"ex{i:04d}" for i in rng.integers(0, 1_500, n)], dtype=object),
                            "answer": codes[rng.choice(codes.size, n, p=[0.4, 0.3, 0.15, 0.1, 0.05])]})
    answers.loc[::97, "example_id"] = None  # a missing id counts nowhere, as crosstab drops it
    got = agreement(answers)
    assert (got.alpha, got.observed, got.examples, got.answers, got.per_example) == _crosstab_agreement(answers)


def test_agreement_of_categorical_columns_equals_it_of_their_text():
    """An ingest's summary gives agreement its columns as Categoricals (codes into categories
    in first-appearance order, some unused, some cells missing): the same alpha, pairwise
    agreement and counts as the crosstab of the same values as text, to the last bit."""
    import pandas as pd
    from satcal.answers import ANSWER_CODES
    from satcal.quality import agreement
    rng = np.random.default_rng(9)
    n = 4_000
    codes = np.array(list(ANSWER_CODES) + ["not a code"], dtype=object)
    ids = np.array([f"ex{i:04d}" for i in rng.permutation(1_200)], dtype=object)  # categories unsorted
    example = rng.integers(-1, 1_000, n)  # -1: missing; ids 1,000-1,199 never used
    answer = rng.choice(np.arange(-1, codes.size), n, p=[0.02, 0.4, 0.3, 0.13, 0.1, 0.05])
    coded = pd.DataFrame({"example_id": pd.Categorical.from_codes(example, categories=pd.Index(ids, dtype=object)),
                          "answer": pd.Categorical.from_codes(answer, categories=pd.Index(codes[::-1], dtype=object))})
    text = coded.astype(object)
    assert text["example_id"].isna().any() and text["answer"].isna().any()
    got, want = agreement(coded), agreement(text)
    assert (got.alpha, got.observed, got.examples, got.answers, got.per_example) == \
        (want.alpha, want.observed, want.examples, want.answers, want.per_example) == _crosstab_agreement(text)


def _reading_seconds_per_item_view(items, k, wpm):
    """reading_seconds as it was: every item through platforms.item_view."""
    import pandas as pd
    from satcal.platforms import item_view
    words = {}
    for row in items.to_dict("records"):
        v = item_view(row, k)
        texts = [v["query_title"] or v["query"], v["query_description"]]
        texts += [d[f] for lst in v["lists"] for d in lst["docs"] for f in ("title", "url_text", "snippet")]
        words[v["item_id"]] = sum(len(str(t).split()) for t in texts)
    return pd.Series(words, dtype=float, name="reading_seconds") * 60.0 / wpm


def test_reading_seconds_equals_the_per_item_view_count():
    import pandas as pd
    from satcal.quality import SKIM_WORDS_PER_MINUTE, reading_seconds
    rng = np.random.default_rng(9)
    k, n = 3, 200
    pool = np.array(["", "one", "two words", "caf&eacute; &amp; bar", "  spaced   out  ", "a&nbsp;b", "&lt;b&gt;x",
                     "long " * 30, np.nan, None, "tab\tsep\nline"], dtype=object)
    pick = lambda: pool[rng.integers(0, pool.size, n)]  # noqa: E731
    items = {"item_id": [f"it{i}" for i in range(n)], "query": [f"q{i % 7}" for i in range(n)],
             "query_title": pick(), "query_description": pick()}
    for side in "AB":
        for i in range(1, k + 1):
            items[f"{side}{i}"] = np.array([f"d{j}" for j in rng.integers(0, 30, n)], dtype=object)
            items[f"{side}{i}_title"] = pick()
            items[f"{side}{i}_snippet"] = pick()
            if i != 2:  # a column missing altogether counts no words
                items[f"{side}{i}_url_text"] = pick()
    items = pd.DataFrame({c: pd.Series(v, dtype=object) for c, v in items.items()})
    ours = reading_seconds(items, k)
    theirs = _reading_seconds_per_item_view(items, k, SKIM_WORDS_PER_MINUTE)
    pd.testing.assert_series_equal(ours, theirs)
    as_read = pd.read_csv(__import__("io").StringIO(items.to_csv(index=False)))  # pandas' own dtypes
    pd.testing.assert_series_equal(reading_seconds(as_read, k),
                                   _reading_seconds_per_item_view(as_read, k, SKIM_WORDS_PER_MINUTE))
