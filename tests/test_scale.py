"""Issue 14: fits on sufficient statistics equal the per-row fits; a light ``import satcal``;
memory-bounded scoring. References are computed row by row, independently of satcal's collapse."""
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
import statsmodels.api as sm
from sklearn.isotonic import IsotonicRegression
from sklearn.model_selection import StratifiedKFold
from scipy.special import expit

from satcal.analysis import calibrate, collapse_answers, design, fit_logit, model_check
from satcal.analysis.bootstrap import replicate_weights
from satcal.ingest import ANSWER_CODES
from satcal.measures import score_lists, study_formulations

FORMS = ["lin-const", "exp2-log2", "bin1-zipf"]


def _many_answers(rng, n_examples=60, answers_per_example=25):
    """Few distinct examples, many answers each: the case the collapse is for."""
    la = rng.integers(0, 3, size=(n_examples, 5))
    lb = rng.integers(0, 3, size=(n_examples, 5))
    rows = np.repeat(np.arange(n_examples), answers_per_example)
    answers = np.asarray(ANSWER_CODES, dtype=object)[rng.integers(0, 4, rows.size)]
    return score_lists(la[rows], FORMS), score_lists(lb[rows], FORMS), answers


def _per_row_glm(x, y, groups=None):
    model = sm.GLM(y, design(x), family=sm.families.Binomial())
    return model.fit() if groups is None else model.fit(cov_type="cluster", cov_kwds={"groups": groups})


def test_point_fits_equal_per_row_glm(rng):
    phi_a, phi_b, answers = _many_answers(rng)
    result = calibrate(phi_a=phi_a, phi_b=phi_b, answers=answers, formulations=FORMS,
                       model_check_folds=0, bootstrap=0, seed=0, sat_model="published")
    assert result.meta["n_distinct_rows"] < len(answers) / 5
    sat = np.isin(answers, ("both_good", "both_bad"))
    y_sat = np.tile((answers[sat] == "both_good").astype(float), 2)
    for j, f in enumerate(FORMS):
        # the P(Sat|phi) covariance is clustered by answer (its A and B rows), CR1
        ref = _per_row_glm(np.concatenate([phi_a[sat, j], phi_b[sat, j]]), y_sat,
                           groups=np.tile(np.arange(sat.sum()), 2))
        row = result.fits.query("formulation == @f and curve == 'sat'").iloc[0]
        np.testing.assert_allclose(row[["beta0", "beta1", "beta2"]].to_numpy(float), ref.params,
                                   rtol=1e-9, atol=1e-9)
        np.testing.assert_allclose(row[["se0", "se1", "se2"]].to_numpy(float), ref.bse, rtol=1e-9)
        assert row["deviance"] == pytest.approx(ref.deviance, rel=1e-9)
        assert row["aic"] == pytest.approx(ref.aic, rel=1e-9)
        assert row["n"] == sat.sum() * 2
        d = phi_a[:, j] - phi_b[:, j]
        agree = ((answers == "a_better") & (d > 1e-9)) | ((answers == "b_better") & (d < -1e-9))
        ref = _per_row_glm(np.abs(d), agree.astype(float))
        row = result.fits.query("formulation == @f and curve == 'pref'").iloc[0]
        np.testing.assert_allclose(row[["beta0", "beta1", "beta2"]].to_numpy(float), ref.params,
                                   rtol=1e-9, atol=1e-9)


def _model_check_per_row(x, y, fold_of):
    """The model check as a per-row computation: every observation its own row, in the folds
    ``fold_of`` (each observation's test fold)."""
    out = {m: (np.empty_like(y)) for m in ("quadratic_logit", "linear_logit", "isotonic")}
    for f in np.unique(fold_of):
        train, test = fold_of != f, fold_of == f
        for model, degree in (("quadratic_logit", 2), ("linear_logit", 1)):
            res = sm.GLM(y[train], design(x[train], degree), family=sm.families.Binomial()).fit(tol=1e-12)
            out[model][test] = expit(design(x[test], degree) @ res.params)
        iso = IsotonicRegression(out_of_bounds="clip", y_min=0, y_max=1).fit(x[train], y[train])
        out["isotonic"][test] = iso.predict(x[test])
    rows = {}
    for model, p in out.items():
        pc = np.clip(p, 1e-4, 1 - 1e-4)
        rows[model] = (-np.mean(y * np.log(pc) + (1 - y) * np.log(1 - pc)), np.mean((p - y) ** 2))
    return rows


def test_model_check_on_counts_equals_per_row(rng):
    """The check on distinct rows with counts equals statsmodels and scikit-learn fitted row by
    row on the same folds: fold_counts' table spread over the observations of each row."""
    from satcal.analysis.core import fold_counts
    x = rng.choice(np.linspace(0, 1, 17), size=3000)
    y = (rng.uniform(size=x.size) < expit(-1 + 2.5 * x)).astype(float)
    xy, inv, counts = np.unique(np.stack([x, y], 1), axis=0, return_inverse=True, return_counts=True)
    inv = inv.ravel()
    table = fold_counts(xy[:, 1], counts, 5, seed=7)
    fold_of = np.empty(x.size, dtype=int)
    for r in range(len(xy)):  # row r's observations, in data order, take its folds' counts
        fold_of[inv == r] = np.repeat(np.arange(5), table[:, r])
    ref = _model_check_per_row(x, y, fold_of)
    as_rows = {r["model"]: (r["log_loss"], r["brier"]) for r in model_check(x, y, 5, seed=7)}
    for got in (as_rows,
                {r["model"]: (r["log_loss"], r["brier"])
                 for r in model_check(xy[:, 0], xy[:, 1], 5, seed=7, weights=counts)},
                {r["model"]: (r["log_loss"], r["brier"])
                 for r in model_check(xy[:, 0], xy[:, 1], 5, seed=7, obs=inv)}):
        assert got == as_rows  # the same observations, one per row or collapsed: the same draw
        for model, (ll, br) in ref.items():
            assert got[model][0] == pytest.approx(ll, rel=1e-8)
            assert got[model][1] == pytest.approx(br, rel=1e-8)


def test_fold_counts_have_sklearn_fold_sizes_and_row_counts():
    """Each row's observations all land in some fold; each fold tests as many of each class as
    scikit-learn's StratifiedKFold does when the labels' sorted order is their order of first
    appearance (y[0] is the smaller label here; otherwise the odd observations land in other
    folds, same sizes)."""
    from satcal.analysis.core import fold_counts
    rng = np.random.default_rng(5)
    y = np.r_[0.0, (rng.uniform(size=1200) < 0.35).astype(float)]
    rows = rng.integers(0, 40, y.size) * 2 + y.astype(int)  # rows hold one class each
    ids, row_of = np.unique(rows, return_inverse=True)
    counts, y_row = np.bincount(row_of), ids % 2
    for folds, seed in ((5, 0), (3, 11), (10, 4)):
        table = fold_counts(y_row, counts, folds, seed)
        np.testing.assert_array_equal(table.sum(0), counts)
        ours = np.stack([np.bincount(y_row, weights=t, minlength=2) for t in table])
        theirs = np.stack([np.bincount(y[test].astype(int), minlength=2) for _, test in
                           StratifiedKFold(folds, shuffle=True, random_state=seed).split(y[:, None], y)])
        np.testing.assert_array_equal(ours, theirs)
        np.testing.assert_array_equal(fold_counts(y_row, counts, folds, seed), table)  # seeded
    assert fold_counts(np.array([0.0, 1.0]), np.array([20, 4]), 5, 0) is None
    assert fold_counts(np.array([0.0]), np.array([20]), 5, 0) is None


def test_fold_counts_distribution_equals_sklearn_shuffle():
    """Over seeds, a row's count in a fold has the hypergeometric mean and variance (worked by
    hand: a fold of a observations out of a class of N, a row of n), and scikit-learn's
    shuffled folds, counted per row, give the same moments."""
    from satcal.analysis.core import fold_counts
    y_row, counts = np.array([0, 0, 0, 1, 1]), np.array([7, 3, 10, 6, 4])
    y = np.repeat(y_row, counts).astype(float)
    row_of = np.repeat(np.arange(5), counts)
    seeds = range(600)
    ours = np.stack([fold_counts(y_row, counts, 4, s) for s in seeds]).astype(float)
    theirs = np.empty_like(ours)
    for i, s in enumerate(seeds):
        for f, (_, test) in enumerate(StratifiedKFold(4, shuffle=True, random_state=s).split(y[:, None], y)):
            theirs[i, f] = np.bincount(row_of[test], minlength=5)
    N = np.array([20, 20, 20, 10, 10])  # each row's class size
    # fold i takes positions i, i + 4, ... of the sorted labels: 5 of class 0's 20 (positions
    # 0-19); of class 1's 10 (positions 20-29) 3, 3, 2, 2
    a = np.array([[5, 5, 5, 3, 3], [5, 5, 5, 3, 3], [5, 5, 5, 2, 2], [5, 5, 5, 2, 2]])
    mean = counts * a / N
    var = counts * (a / N) * (1 - a / N) * (N - counts) / (N - 1)
    for sample in (ours, theirs):
        np.testing.assert_array_equal(sample.sum(1), np.broadcast_to(counts, (len(seeds), 5)))
        se = np.sqrt(var / len(seeds))
        assert np.all(np.abs(sample.mean(0) - mean) < 4.5 * se + 1e-12)
        assert np.all(np.abs(sample.var(0) / var - 1) < 0.3)


def test_fit_logit_weights_are_frequency_weights(rng):
    x = rng.choice(np.linspace(0, 1, 11), size=400)
    y = (rng.uniform(size=400) < expit(-0.5 + 2 * x)).astype(float)
    w = rng.integers(0, 4, size=400).astype(float)
    rep = np.repeat(np.arange(400), w.astype(int))
    a, b = fit_logit(x, y, weights=w), _per_row_glm(x[rep], y[rep])
    np.testing.assert_allclose(a.beta, b.params, rtol=1e-9, atol=1e-10)
    np.testing.assert_allclose(a.cov, b.cov_params(), rtol=1e-8, atol=1e-12)
    assert a.n == len(rep) and a.deviance == pytest.approx(b.deviance, rel=1e-10)


def test_collapse_keeps_every_answer(rng):
    phi_a, phi_b, answers = _many_answers(rng)
    t = collapse_answers(phi_a, phi_b, answers)
    assert t.counts.sum() == len(answers)
    np.testing.assert_array_equal(t.phi_a[t.inverse], phi_a)
    np.testing.assert_array_equal(t.phi_b[t.inverse], phi_b)
    np.testing.assert_array_equal(t.answers[t.inverse], answers)


def test_grouped_replicate_weights_sum_the_per_answer_draws(rng):
    groups = rng.integers(0, 7, size=200)
    per_answer = replicate_weights(200, 12, seed=5)
    grouped = replicate_weights(200, 12, seed=5, groups=groups, n_groups=7)
    expected = np.stack([np.bincount(groups, weights=w, minlength=7) for w in per_answer])
    np.testing.assert_array_equal(grouped, expected)


def test_bootstrap_equals_the_bootstrap_of_the_rows(rng):
    """Resampling answers then counting per distinct row is the per-answer bootstrap: the
    replicate indicators of a collapsed study equal those recomputed from per-answer weights."""
    phi_a, phi_b, answers = _many_answers(rng, 40, 10)
    res = calibrate(phi_a=phi_a, phi_b=phi_b, answers=answers, formulations=FORMS,
                    model_check_folds=0, bootstrap=30, seed=2, sat_model="published")
    W = replicate_weights(len(answers), 30, seed=2)
    sat = np.isin(answers, ("both_good", "both_bad"))
    y_sat = np.tile((answers[sat] == "both_good").astype(float), 2)
    from satcal.analysis import GRID, bias_indicators
    for b in (0, 17):
        w = W[b]
        for j in range(len(FORMS)):
            s = fit_logit(np.concatenate([phi_a[sat, j], phi_b[sat, j]]), y_sat,
                          weights=np.tile(w[sat], 2))
            d = phi_a[:, j] - phi_b[:, j]
            agree = ((answers == "a_better") & (d > 1e-9)) | ((answers == "b_better") & (d < -1e-9))
            p = fit_logit(np.abs(d), agree.astype(float), weights=w)
            # over the ranges the answers support, as calibrate computes its indicators
            ind = bias_indicators(s.predict(GRID)[None], p.predict(GRID)[None],
                                  sat_range=res.meta["support"]["sat"][j:j + 1],
                                  pref_range=res.meta["support"]["pref"][j:j + 1])
            got = res.bootstrap.indicators[b, j]
            np.testing.assert_allclose(got, [ind["b1"][0], ind["b2"][0], ind["b3"][0]], atol=1e-7)


def test_import_satcal_is_light():
    code = ("import sys, satcal; heavy = [m for m in ('statsmodels', 'scipy.stats', 'matplotlib', "
            "'pandas', 'sklearn') if m in sys.modules]; print(','.join(heavy))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


def test_cli_help_and_version_do_not_load_the_analysis_stack():
    code = ("import sys; from click.testing import CliRunner; from satcal.cli import main; "
            "r = CliRunner().invoke(main, ['--help']); v = CliRunner().invoke(main, ['--version']); "
            "heavy = [m for m in ('statsmodels', 'scipy', 'matplotlib', 'pandas') if m in sys.modules]; "
            "print(r.exit_code, v.exit_code, v.output.strip(), ','.join(heavy))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    import satcal
    assert out.stdout.split() == ["0", "0", "satcal,", "version", satcal.__version__]


def test_public_names_resolve():
    import satcal
    for name in satcal.__all__:
        assert getattr(satcal, name) is not None
    assert satcal.generate.generate is not None  # submodules stay reachable as attributes
    with pytest.raises(AttributeError):
        satcal.no_such_name


@pytest.mark.parametrize("normalization", ["max", "ideal", "minmax", "ul2"])
def test_scoring_in_blocks_equals_one_pass(rng, normalization):
    levels = rng.integers(-1, 4, size=(1000, 5)).astype(float)
    levels[rng.uniform(size=levels.shape) < 0.05] = np.nan  # short lists
    pools = [rng.integers(-1, 4, size=rng.integers(3, 30)) for _ in range(40)]
    qi = rng.integers(0, 40, size=1000)
    forms = study_formulations(normalization)
    kw = dict(n_levels=4, pools=pools, query_index=qi)
    whole = score_lists(levels, forms, chunk_size=10_000, **kw)
    blocks = score_lists(levels, forms, chunk_size=37, **kw)
    np.testing.assert_array_equal(blocks, whole)
    single = score_lists(levels, forms, chunk_size=10_000, dtype=np.float32, **kw)
    assert single.dtype == np.float32
    np.testing.assert_allclose(single, whole, rtol=1e-6, atol=1e-6)


def test_scoring_memory_is_bounded():
    """2,000,000 lists x 36 formulations: the result (576 MB) plus the input and at most a few
    block-sized temporaries (measured in a fresh process: its peak resident set)."""
    code = ("import numpy as np, resource; from satcal.measures import score_lists; "
            "lv = np.random.default_rng(0).integers(0, 3, size=(2_000_000, 5), dtype=np.int8); "
            "base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss; phi = score_lists(lv); "
            "print(base, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, phi.nbytes)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    base_kb, peak_kb, out_bytes = map(int, out.stdout.split())
    extra_mb = (peak_kb - base_kb) / 1024 - out_bytes / 2**20
    assert extra_mb < 900, f"{extra_mb:.0f} MB of temporaries beyond the result"


def _sklearn_folds(y, folds, seed):
    theirs = np.empty(len(y), dtype=int)
    for f, (_, test) in enumerate(StratifiedKFold(folds, shuffle=True, random_state=seed).split(np.zeros(len(y)), y)):
        theirs[test] = f
    return theirs


@pytest.mark.parametrize("seed", [0, 3, 11])
@pytest.mark.parametrize("folds", [2, 5])
def test_stratified_folds_equal_sklearn(seed, folds):
    from satcal.analysis.core import stratified_folds
    rng = np.random.default_rng(seed)
    y = (rng.uniform(size=503) < rng.uniform(0.1, 0.9)).astype(float)
    np.testing.assert_array_equal(stratified_folds(y, folds, seed), _sklearn_folds(y, folds, seed))


@pytest.mark.parametrize("labels", ["int3", "negative", "strings", "bool", "many", "first_is_one"])
def test_stratified_folds_equal_sklearn_any_labels(labels):
    """Beyond 0/1 floats: several classes, negative and string labels, booleans, hundreds of
    classes; each asked twice (the shuffled labels are cached), each a fresh writable array."""
    from satcal.analysis.core import stratified_folds
    rng = np.random.default_rng(7)
    y = {"int3": rng.integers(0, 3, 2000), "negative": rng.integers(-4, 2, 1500),
         "strings": np.asarray(list("abcab"))[rng.integers(0, 5, 999)],
         "bool": rng.uniform(size=800) < 0.3, "many": rng.integers(0, 300, 30000).astype(float),
         "first_is_one": np.r_[1.0, (rng.uniform(size=700) < 0.5).astype(float)]}[labels]
    for folds, seed in ((5, 0), (3, 11), (10, 4), (5, 0)):
        ours = stratified_folds(y, folds, seed)
        np.testing.assert_array_equal(ours, _sklearn_folds(y, folds, seed))
        ours[:] = -1  # a caller writing into the result must not touch the next call's


def test_stratified_folds_none_when_a_class_is_too_small():
    from satcal.analysis.core import stratified_folds
    assert stratified_folds(np.r_[np.zeros(20), np.ones(4)], 5, 0) is None
    assert stratified_folds(np.zeros(20), 5, 0) is None


def test_unique_rows_equal_a_sort_of_the_row_bytes(rng):
    """Hashing column by column groups and orders rows as ``np.unique`` of their bytes does,
    with -0.0 and 0.0 one value, NaN, negative levels, huge values and many columns."""
    from satcal.analysis.data import _unique_rows
    n = 5000
    cases = [[rng.integers(-2, 3, (n, 4)).astype(float), rng.integers(0, 4, (n, 1)).astype(float)],
             [rng.choice([-0.0, 0.0, 0.5, np.nan, 1e300, -np.inf], (n, 3))],
             [np.round(rng.uniform(size=(n, 40)), 1), rng.integers(0, 9, (n, 1)).astype(float)]]
    for blocks in cases:
        key = np.concatenate(blocks, axis=1)
        key[key == 0] = 0.0
        rows = np.ascontiguousarray(key).view(np.dtype((np.void, 8 * key.shape[1])))[:, 0]
        _, first, inverse, counts = np.unique(rows, return_index=True, return_inverse=True, return_counts=True)
        ours = _unique_rows(blocks)
        for got, want in zip(ours, (first, inverse.ravel(), counts)):
            np.testing.assert_array_equal(got, want)


def test_collapse_study_equals_grouping_scored_rows(rng):
    """collapse_study against scoring every answer and grouping the rows in a Python dict."""
    from satcal import load_ecir2015
    from satcal.analysis.core import collapse_study
    study = load_ecir2015()
    ex = study.examples.iloc[rng.integers(0, len(study.examples), 4000)].reset_index(drop=True)
    cols = [f"r{s}{i}" for s in "ab" for i in range(1, study.k + 1)]
    patterns = rng.integers(0, study.n_levels, (40, len(cols)))  # new patterns, each answered often
    ex[cols] = patterns[rng.integers(0, len(patterns), len(ex))]
    study.examples = ex
    forms = study_formulations()
    types = collapse_study(study, forms)
    pa, pb = score_lists(study.levels("a"), forms), score_lists(study.levels("b"), forms)
    keys = [(tuple(a), tuple(b), c) for a, b, c in zip(pa.tolist(), pb.tolist(), study.answers)]
    counts: dict = {}
    for k in keys:
        counts[k] = counts.get(k, 0) + 1
    got = [(tuple(a), tuple(b), c) for a, b, c in zip(types.phi_a.tolist(), types.phi_b.tolist(), types.answers)]
    assert sorted(got) == sorted(counts) and len(got) == len(counts)
    assert [counts[k] for k in got] == types.counts.tolist()
    assert [got[j] for j in types.inverse] == keys
    assert types.counts.max() > 10


def test_calibrate_from_levels_equals_from_scores(rng):
    """Grouping a study by relevance patterns before scoring changes nothing."""
    from satcal import load_ecir2015
    study = load_ecir2015()
    study.examples = study.examples.iloc[rng.integers(0, len(study.examples), 3000)].reset_index(drop=True)
    forms = study_formulations()[:6]
    a = calibrate(study, forms, model_check_folds=3, bootstrap=0, seed=0, sat_model="published")
    b = calibrate(phi_a=score_lists(study.levels("a"), forms), phi_b=score_lists(study.levels("b"), forms),
                  answers=study.answers, formulations=forms, model_check_folds=3, bootstrap=0, seed=0, sat_model="published")
    for name in ("fits", "bias", "points", "model_check"):
        pd.testing.assert_frame_equal(a.tables()[name], b.tables()[name], rtol=1e-12)
