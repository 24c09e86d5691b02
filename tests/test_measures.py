"""Measures against hand-worked examples, exhaustive enumeration, trec_eval and the paper's data."""
import itertools
import math

import numpy as np
import pytest

from satcal.measures import (Discount, Formulation, Gain, bin_index, dcg_matrix, formulation, get_discount,
                             get_gain, pool_bounds, score_lists, study_formulations)


@pytest.mark.parametrize("gain,level,expected", [
    ("lin", 2, 2.0), ("exp2", 2, 3.0), ("exp3", 2, 8.0), ("exp5", 2, 24.0), ("exp5", 1, 4.0),
    ("bin1", 1, 1.0), ("bin1", 0, 0.0), ("bin2", 1, 0.0), ("bin2", 2, 1.0), ("bin1", -2, 0.0),
    ("lin", -2, -2.0), ("exp2", -1, -0.5),
])
def test_gain_values(gain, level, expected):
    assert get_gain(gain)([level])[0] == pytest.approx(expected)


@pytest.mark.parametrize("discount,k,expected", [
    ("zipf", 4, [1, 1 / 2, 1 / 3, 1 / 4]),
    ("lin", 5, [1, .8, .6, .4, .2]),
    ("log2", 3, [1, 1 / math.log2(3), 1 / math.log2(4)]),
    ("log3", 3, [1, 1 / math.log(4, 3), 1 / math.log(5, 3)]),
    ("log5", 2, [1, 1 / math.log(6, 5)]),
    ("const", 3, [1, 1, 1]),
    ("jarvelin2", 5, [1, 1, 1 / math.log2(3), 1 / 2, 1 / math.log2(5)]),
])
def test_discount_factors(discount, k, expected):
    np.testing.assert_allclose(get_discount(discount).factors(k), expected, rtol=1e-12)


def test_unknown_ids_are_explained():
    with pytest.raises(ValueError, match="unknown gain 'quad'.*lin, exp<b>, bin<m>"):
        get_gain("quad")
    with pytest.raises(ValueError, match="<gain>-<discount>"):
        formulation("exp2")


def test_registry_has_the_36_study_formulations_in_plot_order():
    forms = study_formulations()
    assert len(forms) == 36 and len({f.id for f in forms}) == 36
    assert forms[0].id == "bin2-zipf" and forms[5].id == "lin-zipf" and forms[-1].id == "lin-const"


def _naive_phi(levels, gain, disc, top):
    """Straight from the paper's formula, one list at a time."""
    g = {"lin": lambda l: l, "exp2": lambda l: 2 ** l - 1, "exp3": lambda l: 3 ** l - 1,
         "exp5": lambda l: 5 ** l - 1, "bin1": lambda l: float(l >= 1), "bin2": lambda l: float(l >= 2)}[gain]
    k = len(levels)
    d = {"zipf": lambda i: 1 / i, "lin": lambda i: (k + 1 - i) / k, "log2": lambda i: 1 / math.log(i + 1, 2),
         "log3": lambda i: 1 / math.log(i + 2, 3), "log5": lambda i: 1 / math.log(i + 4, 5),
         "const": lambda i: 1.0}[disc]
    dcg = sum(g(l) * d(i) for i, l in enumerate(levels, start=1))
    bound = sum(g(top) * d(i) for i in range(1, k + 1))
    return dcg / bound if bound else 0.0  # e.g. bin2 on a 2-level scale: documented as 0


@pytest.mark.parametrize("k,n_levels", [(5, 3), (10, 5), (3, 2)])
def test_vectorised_scores_equal_the_formula(rng, k, n_levels):
    levels = rng.integers(0, n_levels, size=(50, k))
    forms = study_formulations()
    got = score_lists(levels, forms, n_levels=n_levels)
    for j, f in enumerate(forms):
        expected = [_naive_phi(row, f.gain.id, f.discount.id, n_levels - 1) for row in levels]
        np.testing.assert_allclose(got[:, j], expected, rtol=1e-12, atol=1e-14)


def test_lecture_notes_worked_example():
    """Paper 001: DCG and IDCG vectors (1 decimal) and NDCG@10 = 0.29, linear gain, jarvelin2."""
    ranking = [1, 0, 1, 0, 0, 3, 0, 0, 0, 2, 0, 0, 0, 0, 3]
    pool = [3, 3, 3, 2, 2, 2, 1, 1, 1, 1]
    dcg_vector = [1.0, 1.0, 1.6, 1.6, 1.6, 2.8, 2.8, 2.8, 2.8, 3.4, 3.4, 3.4, 3.4, 3.4, 4.2]
    idcg_vector = [3.0, 6.0, 7.9, 8.9, 9.8, 10.5, 10.9, 11.2, 11.5, 11.8]
    ndcg_vector = [0.33, 0.17, 0.20, 0.18, 0.16, 0.27, 0.26, 0.25, 0.24, 0.29]
    for k in range(1, 16):
        raw = Formulation(get_gain("lin"), get_discount("jarvelin2"), "raw")
        assert round(raw.score([ranking[:k]])[0], 1) == dcg_vector[k - 1]
    for k in range(1, 11):
        f = Formulation(get_gain("lin"), get_discount("jarvelin2"), "ideal")
        ideal = pool_bounds([np.array(pool)], [f], k)["ideal"][0, 0]
        assert round(ideal, 1) == idcg_vector[k - 1]
        ndcg = f.score([ranking[:k]], pools=[np.array(pool)], query_index=[0])[0]
        # The notes divide the 1-decimal DCG by the 1-decimal IDCG, hence the 0.01 slack.
        assert ndcg == pytest.approx(ndcg_vector[k - 1], abs=0.011)
    assert round(ndcg, 2) == 0.29


def _dcg(gains, disc):
    return float(np.dot(gains[: len(disc)], disc[: len(gains)]))


@pytest.mark.parametrize("pool", [[0, 1, 2], [2, 2, 0, 1, 0, 1], [-2, 0, 3, 1], [-1, -1, 2, 0, 4], [1], [0, 0]])
@pytest.mark.parametrize("fid", ["exp2-log2", "lin-zipf", "bin1-lin", "exp3-jarvelin2"])
@pytest.mark.parametrize("k", [2, 3, 5])
def test_pool_bounds_by_exhaustive_enumeration(pool, fid, k):
    """IDCG and E[DCG@k] (RLB, Karmaker and Feng 2022) against all orderings of the pool; WDCG against all
    lists of k drawn from the pool and unjudged (gain 0) documents."""
    f = formulation(fid)
    gains = f.gains(pool)
    disc = f.discount.factors(k)
    values = [_dcg(np.array(p), disc) for p in itertools.permutations(gains)]
    with_unjudged = [_dcg(np.array(p), disc) for p in itertools.permutations(list(gains) + [0.0] * k, k)]
    b = pool_bounds([np.array(pool)], [f], k)
    assert b["ideal"][0, 0] == pytest.approx(max(values))
    assert b["worst"][0, 0] == pytest.approx(min(with_unjudged))
    assert b["best"][0, 0] == pytest.approx(max(with_unjudged))
    assert b["rlb"][0, 0] == pytest.approx(np.mean(values))


def _scores_of_permutations(pool, f, k, norm, unjudged=0):
    """phi of every list of k drawn from the pool and ``unjudged`` unjudged documents (NaN)."""
    f = Formulation(f.gain, f.discount, norm, f.negatives)
    candidates = list(pool) + [np.nan] * unjudged
    perms = np.array(list(itertools.permutations(candidates, min(k, len(candidates)))), dtype=float)
    if perms.shape[1] < k:
        perms = np.pad(perms, ((0, 0), (0, k - perms.shape[1])), constant_values=np.nan)
    return f.score(perms, pools=[np.array(pool)], query_index=np.zeros(len(perms), int))


@pytest.mark.parametrize("pool", [[-2, -1, 0, 2, 4, 1], [-2, -2, 3], [4, 3, 0, 0, 0, -1]])
@pytest.mark.parametrize("negatives", ["keep", "zero"])
def test_minmax_in_unit_interval_with_negative_levels(pool, negatives):
    f = formulation("exp2-log2", negatives=negatives)
    s = _scores_of_permutations(pool, f, 3, "minmax", unjudged=3)
    assert s.min() >= -1e-12 and s.max() <= 1 + 1e-12
    if len(set(f.gains(pool))) > 1:
        assert s.min() == pytest.approx(0) and s.max() == pytest.approx(1)


@pytest.mark.parametrize("pool", [[2, 2, 1], [1, 2], [3, 3, 3, 3, 3, 3]])
def test_minmax_stays_in_unit_interval_with_unjudged_documents(pool):
    """A pool of relevant documents only: a run whose top k is unjudged or short scores 0, not
    below (the worst list is built from the pool plus unjudged, zero-gain documents)."""
    f = formulation("exp2-log2")
    s = _scores_of_permutations(pool, f, 5, "minmax", unjudged=5)
    assert s.min() == pytest.approx(0, abs=1e-12) and s.max() == pytest.approx(1)


@pytest.mark.parametrize("pool", [[0, 0, 0, 1, 2, 2], [0, 0, 1, 0, 1]])
def test_minmax_equals_ideal_when_worst_is_zero(pool):
    f = formulation("exp2-log2")
    np.testing.assert_allclose(_scores_of_permutations(pool, f, 3, "minmax"),
                               _scores_of_permutations(pool, f, 3, "ideal"))


def test_ul_normalisations_by_definition():
    pool = np.array([2, 1, 0, 0, 1])
    f = formulation("lin-log2")
    d = f.discount.factors(3)
    rlb = pool.mean() * d.sum()
    ideal = 2 * d[0] + 1 * d[1] + 1 * d[2]
    for ranking in ([0, 0, 1], [2, 1, 0], [1, 0, 0]):
        dcg = float(np.dot(ranking, d))
        ul1 = Formulation(f.gain, f.discount, "ul1").score([ranking], pools=[pool], query_index=[0])[0]
        ul2 = Formulation(f.gain, f.discount, "ul2").score([ranking], pools=[pool], query_index=[0])[0]
        assert ul1 == pytest.approx(dcg / ideal * dcg / (dcg + rlb))
        expected2 = (dcg - rlb) / (ideal - rlb) if dcg >= rlb else (dcg - rlb) / rlb
        assert ul2 == pytest.approx(expected2)


def test_zero_denominators_give_zero():
    f = Formulation(get_gain("lin"), get_discount("log2"), "ideal")
    assert f.score([[0, 0]], pools=[np.array([0, 0, 0])], query_index=[0])[0] == 0.0


def test_negative_policies():
    keep = formulation("lin-const", normalization="raw")
    zero = formulation("lin-const", normalization="raw", negatives="zero")
    assert keep.score([[-2, 1, 2]])[0] == 1.0
    assert zero.score([[-2, 1, 2]])[0] == 3.0


def test_custom_gain_and_discount_equal_builtins(rng):
    levels = rng.integers(0, 3, size=(40, 5))
    custom = Formulation(Gain.from_mapping({0: 0, 1: 1, 2: 3}), Discount.from_factors(1 / np.arange(1, 6)))
    np.testing.assert_allclose(custom.score(levels), formulation("exp2-zipf").score(levels))
    with pytest.raises(ValueError, match="no value for level"):
        Gain.from_mapping({0: 0, 1: 1})([2])
    with pytest.raises(ValueError, match="has 5 factors"):
        custom.score(np.zeros((1, 4)))


def test_missing_positions_count_nothing():
    f = formulation("lin-zipf", normalization="raw")
    assert f.score([[2, np.nan, 1]])[0] == pytest.approx(2 + 1 / 3)


@pytest.mark.parametrize("x,expected", [(0.0, 0), (0.09999999, 1), (0.3, 3), (0.2999999999, 3),
                                        (0.95, 9), (1.0, 9), (-0.2, 0), (0.55, 5)])
def test_bin_rule(x, expected):
    assert bin_index([x])[0] == expected


def test_all_published_scores_match(ecir_study):
    """SPEC 2: the 8,230 published lists x 36 formulations match within 5e-4."""
    from satcal.datasets import load_ecir2015_crowd, published_scores
    crowd = load_ecir2015_crowd()
    for side in ("a", "b"):
        ours = score_lists(ecir_study.levels(side), study_formulations(), n_levels=3)
        published = published_scores(crowd, side.upper())
        assert ours.shape == (4115, 36)
        assert np.abs(ours - published).max() < 5e-4


def test_ndcg_matches_trec_eval(rng, tmp_path):
    """Classic nDCG@5 from TREC-format qrels and run files, read by satcal, equals trec_eval's
    ndcg_cut_5 (pytrec_eval) on the same files: linear gain, 1/log2(i+1), ideal over the pool,
    ties in score broken by document id."""
    pytrec_eval = pytest.importorskip("pytrec_eval")
    from satcal.judgments import read_judgments
    from satcal.runs import level_cube, read_runs
    qrel_lines, run_lines = [], []
    for q in range(30):
        docs = [f"d{q}_{i:02d}" for i in range(25)]
        for d in docs[:15]:
            qrel_lines.append(f"q{q} 0 {d} {int(rng.integers(0, 4))}")
        retrieved = rng.choice(docs, size=12, replace=False)
        scores = rng.integers(0, 6, size=12)          # many ties, to check tie-breaking
        for rank, (d, sc) in enumerate(zip(retrieved, scores), start=1):
            run_lines.append(f"q{q} Q0 {d} {rank} {sc} myrun")
    (tmp_path / "qrels").write_text("\n".join(qrel_lines) + "\n")
    (tmp_path / "run").write_text("\n".join(run_lines) + "\n")
    with open(tmp_path / "qrels") as fq, open(tmp_path / "run") as fr:
        trec = pytrec_eval.RelevanceEvaluator(pytrec_eval.parse_qrel(fq), {"ndcg_cut.5"}).evaluate(
            pytrec_eval.parse_run(fr))
    judgments = read_judgments(tmp_path / "qrels")
    cube, systems, queries = level_cube(read_runs([tmp_path / "run"]), judgments, 5)
    pools = judgments.pools()
    ours = formulation("lin-log2", normalization="ideal").score(
        cube[0], pools=[pools[q] for q in queries], query_index=np.arange(len(queries)))
    np.testing.assert_allclose(ours, [trec[q]["ndcg_cut_5"] for q in queries], atol=1e-9)


def test_pools_as_padded_array_equal_pools_as_list(rng):
    pools = [rng.integers(-1, 4, size=n) for n in (3, 7, 1, 12)]
    padded = np.full((4, 12), np.nan)
    for i, p in enumerate(pools):
        padded[i, : len(p)] = p
    forms = [formulation("exp2-log2", "minmax"), formulation("lin-zipf", "ul2")]
    for a, b in zip(pool_bounds(pools, forms, 5).values(), pool_bounds(padded, forms, 5).values()):
        np.testing.assert_allclose(a, b)


def test_pattern_table_path_equals_gather_path(rng):
    """Many lists (pattern table) and few lists (per-position gathers) give the same scores."""
    levels = rng.integers(0, 3, size=(5000, 5))
    many = score_lists(levels)
    few = np.vstack([score_lists(levels[i:i + 3]) for i in range(0, 60, 3)])
    np.testing.assert_allclose(many[:60], few, rtol=1e-13)


@pytest.mark.parametrize("k, chunk", [(3, 500), (5, 97), (5, 4000)])
def test_scores_gathered_into_the_result_equal_the_per_row_formula(rng, k, chunk):
    """Blocks gathered straight into the result (pattern table when a block has many lists,
    per-position gathers otherwise; blocks of uneven size) equal the formula list by list;
    in float32 they are the float64 scores rounded once."""
    levels = rng.integers(0, 3, size=(4001, k))
    forms = study_formulations()
    got = score_lists(levels, forms, n_levels=3, chunk_size=chunk)
    rows = rng.choice(len(levels), 300, replace=False)
    for j, f in enumerate(forms):
        expected = [_naive_phi(levels[i], f.gain.id, f.discount.id, 2) for i in rows]
        np.testing.assert_allclose(got[rows, j], expected, rtol=1e-12, atol=1e-14)
    single = score_lists(levels, forms, n_levels=3, chunk_size=chunk, dtype=np.float32)
    np.testing.assert_array_equal(single, got.astype(np.float32))
    into = np.full((len(levels), len(forms)), np.nan)
    assert dcg_matrix(levels, forms, out=into) is into
    # raw DCG = phi x the max bound g(top) * sum_i d(i)
    bound = [f.gains([2])[0] * f.discount.factors(k).sum() for f in forms]
    np.testing.assert_allclose(into, got * bound, rtol=1e-12)


def test_score_table_is_score_lists_labelled():
    import satcal
    levels = [[2, 1, 0, 0, 1], [0, 0, 0, 0, 0]]
    table = satcal.score_table(levels, ["exp2-log2", "lin-const"])
    assert list(table.columns) == ["exp2-log2", "lin-const"]
    np.testing.assert_array_equal(table.to_numpy(), satcal.score_lists(levels, ["exp2-log2", "lin-const"]))
    assert table.loc[0, "lin-const"] == pytest.approx(4 / 10)   # (2+1+0+0+1) / (2 * 5)
