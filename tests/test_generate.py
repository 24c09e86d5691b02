"""The coverage generator, checked by recomputing coverage independently from its output."""
import itertools

import numpy as np
import pandas as pd
import pytest

from satcal.errors import SatcalError
from satcal.generate import Design, generate
from satcal.judgments import Judgments
from satcal.measures import bin_index, score_lists, study_formulations


@pytest.fixture(scope="module")
def ecir_judgments():
    from satcal.datasets import load_ecir2015
    return load_ecir2015().judgments


@pytest.fixture(scope="module")
def ecir_generated(ecir_judgments):
    return generate(ecir_judgments, seed=7)


def _independent_coverage(examples, judgments, k, top, forms, n_bins=10):
    """Counts per (formulation, kind, bin) from the documents alone, via the judgments."""
    la = judgments.lookup(examples["query"], examples[[f"a{i}" for i in range(1, k + 1)]].to_numpy())
    lb = judgments.lookup(examples["query"], examples[[f"b{i}" for i in range(1, k + 1)]].to_numpy())
    assert not np.isnan(la).any() and not np.isnan(lb).any()
    sa, sb = score_lists(la, forms, top_level=top), score_lists(lb, forms, top_level=top)
    counts = {}
    for j, f in enumerate(forms):
        phi = np.bincount(np.concatenate([bin_index(sa[:, j], n_bins), bin_index(sb[:, j], n_bins)]), minlength=n_bins)
        dphi = np.bincount(bin_index(np.abs(sa[:, j] - sb[:, j]), n_bins), minlength=n_bins)
        for b in range(n_bins):
            counts[(f.id, "phi", b)] = phi[b]
            counts[(f.id, "dphi", b)] = dphi[b]
    return counts, la, lb


def test_every_feasible_cell_is_covered(ecir_generated, ecir_judgments):
    r = ecir_generated
    counts, la, lb = _independent_coverage(r.examples, ecir_judgments, 5, 2, study_formulations())
    cov = r.coverage.set_index(["formulation", "kind", "bin"])
    for key, row in cov.iterrows():
        assert counts[key] == row["count"], key
        if row["feasible"]:
            assert counts[key] >= 200, key
    # levels stored with the examples are the judged ones
    np.testing.assert_array_equal(la, r.examples[[f"ra{i}" for i in range(1, 6)]].to_numpy(float))
    np.testing.assert_array_equal(lb, r.examples[[f"rb{i}" for i in range(1, 6)]].to_numpy(float))


def test_infeasible_cells_are_truly_unreachable(ecir_generated):
    """No pair of the 243 patterns lands in a cell reported infeasible (exhaustive check)."""
    forms = study_formulations()
    pats = np.array(list(itertools.product(range(3), repeat=5)))
    s = score_lists(pats, forms, n_levels=3)
    inf = ecir_generated.infeasible
    assert len(inf) > 0
    for row in inf.itertuples():
        j = [f.id for f in forms].index(row.formulation)
        if row.kind == "phi":
            assert row.bin not in set(bin_index(s[:, j]))
        else:
            d = np.abs(s[:, j][:, None] - s[:, j][None, :])
            assert row.bin not in set(bin_index(d).ravel())
    # SPEC 4: bin2-const takes only 0, .2, .4, .6, .8, 1
    b2 = inf[(inf.formulation == "bin2-const") & (inf.kind == "phi")]["bin"].tolist()
    assert b2 == [1, 3, 5, 7]


def test_cost_goal_and_bound(ecir_generated):
    r = ecir_generated
    assert r.lower_bound == 2000
    assert r.n_examples <= 2100                      # issue 3: <= 1.05 x the bound
    assert r.candidates["lp_bound"] >= 2000 and r.n_examples >= r.candidates["lp_bound"]


def test_lists_are_valid_and_queries_spread(ecir_generated):
    ex = ecir_generated.examples
    for side in "ab":
        docs = ex[[f"{side}{i}" for i in range(1, 6)]].to_numpy()
        assert all(len(set(row)) == 5 for row in docs)
    per_query = ex["query"].value_counts()
    assert per_query.max() <= 3 * max(1, len(ex) // ex["query"].nunique())
    assert not ex.duplicated(subset=[c for c in ex.columns if c != "example_id"]).any()


def test_same_seed_same_bytes(ecir_judgments, tmp_path):
    a = generate(ecir_judgments, method="published", seed=3, min_per_cell=20)
    b = generate(ecir_judgments, method="published", seed=3, min_per_cell=20)
    c = generate(ecir_judgments, method="published", seed=4, min_per_cell=20)
    assert a.examples.to_csv() == b.examples.to_csv()
    assert a.examples.to_csv() != c.examples.to_csv()


@pytest.mark.parametrize("method", ["published", "greedy", "optimal"])
def test_methods_all_cover(ecir_judgments, method):
    r = generate(ecir_judgments, method=method, seed=11, min_per_cell=30)
    assert r.complete


def test_optimal_beats_published(ecir_judgments):
    pub = generate(ecir_judgments, method="published", seed=5, min_per_cell=50)
    opt = generate(ecir_judgments, method="optimal", seed=5, min_per_cell=50)
    assert opt.n_examples < pub.n_examples


def _synthetic(n_queries=40, n_docs=120, levels=5, seed=0, probs=None):
    rng = np.random.default_rng(seed)
    probs = probs or [0.5, 0.2, 0.15, 0.1, 0.05][:levels]
    probs = np.array(probs) / np.sum(probs)
    rows = [(f"q{q}", f"d{q}_{i}", int(rng.choice(levels, p=probs))) for q in range(n_queries) for i in range(n_docs)]
    return Judgments(pd.DataFrame(rows, columns=["query", "doc", "level"]))


def test_other_k_and_levels_without_enumeration():
    """k = 10 with 5 levels: 5^10 patterns are sampled, not enumerated; coverage still full."""
    j = _synthetic()
    r = generate(j, k=10, levels=range(5), min_per_cell=15, seed=2)
    assert not r.candidates["exhaustive"] and r.candidates["candidate_patterns"] < 5 ** 10
    counts, _, _ = _independent_coverage(r.examples, j, 10, 4, study_formulations())
    for row in r.coverage[r.coverage.feasible].itertuples():
        assert counts[(row.formulation, row.kind, row.bin)] >= 15


def test_progress_bar_ends_full(capsys):
    """The selection's progress bar ends at 100% of the examples selected (its total was a
    guess, min_per_cell x bins x 2, that a design needing fewer never reached)."""
    import re
    j = _synthetic(n_queries=10, n_docs=60, levels=3, probs=[0.4, 0.3, 0.3])
    r = generate(j, k=5, levels=range(3), min_per_cell=5, seed=1, progress=True)
    last = capsys.readouterr().err.replace("\r", "\n").strip().splitlines()[-1]
    done = re.search(r"(\d+)%\|.*\| (\d+)/(\d+)", last)
    assert done and done.group(1) == "100" and done.group(2) == done.group(3), last
    assert int(done.group(2)) <= r.n_examples  # the bar counted selections, not more


def test_disjoint_overlap_policy():
    j = _synthetic(n_queries=10, n_docs=60, levels=3, probs=[0.4, 0.3, 0.3])
    r = generate(j, k=5, levels=range(3), min_per_cell=5, overlap="disjoint", seed=1)
    a = r.examples[[f"a{i}" for i in range(1, 6)]].to_numpy()
    b = r.examples[[f"b{i}" for i in range(1, 6)]].to_numpy()
    assert all(not set(x) & set(y) for x, y in zip(a, b))


@pytest.mark.parametrize("kwargs,fragment", [
    (dict(k=50), "no query has 50 judged documents"),
    (dict(method="magic"), "method must be one of"),
    (dict(overlap="sometimes"), "overlap must be one of"),
])
def test_impossible_designs_are_refused_up_front(kwargs, fragment):
    j = _synthetic(n_queries=3, n_docs=20, levels=3, probs=[0.4, 0.3, 0.3])
    with pytest.raises(SatcalError, match=fragment.replace("(", r"\(")):
        generate(j, **{"levels": range(3), "seed": 0, **kwargs})


@pytest.mark.parametrize("kwargs,says", [
    (dict(min_per_cell=2.5), "min_per_cell must be a whole number, at least 1, got 2.5"),
    (dict(min_per_cell=200.0), "min_per_cell must be a whole number, at least 1, got 200.0"),
    (dict(k=5.5), "k must be a whole number, at least 1, got 5.5"),
    (dict(k="5"), "k must be a whole number, at least 1, got '5'"),
    (dict(n_bins=True), "n_bins must be a whole number, at least 2, got True"),
    (dict(n_bins=1), "n_bins must be a whole number, at least 2, got 1"),
    (dict(levels=(0, 1.5, 2)), "levels must be whole numbers, got 1.5"),
    (dict(levels=(0, "high")), "levels must be whole numbers, got 'high'"),
])
def test_a_count_that_is_not_a_whole_number_is_refused_in_one_line(kwargs, says):
    """Design's counts (k, n_bins, min_per_cell) are whole numbers: 2.5 examples per cell was
    accepted (and the cells' targets compared against a float), a level of 1.5 read as 1. Each
    is one line naming the field and the value."""
    with pytest.raises(SatcalError) as err:
        Design(**kwargs)
    assert says in str(err.value) and "\n" not in str(err.value)


def test_numpy_integers_and_whole_float_levels_are_accepted():
    """NumPy's integers are counts; levels from a float array (2.0) are the integer levels."""
    d = Design(k=np.int64(4), min_per_cell=np.int32(3), n_bins=np.int64(5), levels=np.array([2.0, 0.0, 1.0]))
    assert (d.k, d.min_per_cell, d.n_bins, d.levels) == (4, 3, 5, (0, 1, 2))


def test_non_max_normalisation_is_refused():
    from satcal.measures import formulation
    with pytest.raises(SatcalError, match="normalisation 'ideal'"):
        Design(formulations=[formulation("exp2-log2", normalization="ideal")])


def test_unreachable_min_per_cell_is_refused():
    """One query with 6 documents cannot give 1000 distinct examples in any cell."""
    j = Judgments(pd.DataFrame({"query": ["q"] * 6, "doc": list("abcdef"), "level": [0, 0, 1, 1, 2, 2]}))
    with pytest.raises(SatcalError, match="min_per_cell = 1000 is unreachable.*distinct examples"):
        generate(j, k=5, levels=range(3), min_per_cell=1000)


def test_query_share_limit_spreads_examples_and_reports_its_cost(tmp_path):
    """Two queries hold all the highly relevant documents: without a limit they take most of
    the examples; with one, none exceeds it, and the cost is reported."""
    from satcal.generate import Design, generate
    from satcal.judgments import read_judgments
    lines = []
    for q in range(1, 21):
        tops = 12 if q <= 2 else 1
        lines += [f"q{q} 0 d{q}-{i} 2" for i in range(tops)]
        lines += [f"q{q} 0 d{q}-r{i} 1" for i in range(8)] + [f"q{q} 0 d{q}-n{i} 0" for i in range(12)]
    path = tmp_path / "qrels.txt"
    path.write_text("\n".join(lines) + "\n")
    judgments = read_judgments(path)
    design = dict(k=5, levels=(0, 1, 2), min_per_cell=5, seed=3, formulations=["lin-const", "exp2-log2"])
    free = generate(judgments, Design(**design))
    capped = generate(judgments, Design(**design, max_query_share=0.1))
    share = lambda r: r.examples["query"].value_counts(normalize=True).max()
    assert share(free) > 0.1
    counts = capped.examples["query"].value_counts()
    assert counts.max() <= capped.candidates["query_cap"]
    assert counts.max() <= capped.candidates["query_cap"] < counts.max() * 2
    assert capped.candidates["query_cap_extra_examples"] == capped.n_examples - free.n_examples
    # the share asked is honoured on the batch placed, or the shortfall is said with its reason
    honoured = counts.max() <= 0.1 * capped.n_examples
    assert capped.candidates["query_share_honoured"] == honoured
    said = [w for w in capped.warnings if w.startswith("max_query_share = 0.1 ")]
    assert len(said) == 1 and (" honoured: " in said[0]) == honoured
    if not honoured:
        assert f"only {capped.n_examples} could be placed" in said[0]
    # without a limit, the two queries holding most examples are named as a warning
    top2 = free.examples["query"].value_counts(normalize=True).iloc[:2].sum()
    if top2 >= 0.5:
        assert any(w.startswith(f"2 of the 20 queries able to host examples hold {100 * top2:.0f}%")
                   for w in free.warnings)
    # coverage is what the placed examples give, and a short cell is counted as such
    cov = capped.coverage
    short = ((cov["count"] < 5) & cov["feasible"]).sum()
    assert short == capped.candidates["query_cap_short_cells"]
