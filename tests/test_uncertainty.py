"""Issue 20: uncertainty that follows the data's structure. The pigeonhole weights against their
exact moments, the clustered Wald covariance against statsmodels, the plumbing of calibrate
against per-answer refits, and a light coverage check under a crowd with worker effects."""
import numpy as np
import pandas as pd
import pytest
import statsmodels.api as sm
from scipy.special import expit

from satcal.analysis import GRID, bias_indicators, calibrate, collapse_answers, design, fit_logit
from satcal.analysis import satisfaction_curves
from satcal.analysis.bootstrap import (RESAMPLING, bootstrap_calibration, replicate_weights,
                                       resampling_clusters)
from satcal.errors import SatcalError
from satcal.ingest import StudyData
from satcal.measures import formulation, score_lists


def _crowd(rng, examples=150, per_example=3, workers=20, heterogeneity=0.5, k=3):
    """Random pairs of lists, each answered by ``per_example`` different workers with offsets."""
    la = rng.integers(0, 3, size=(examples, k))
    lb = rng.integers(0, 3, size=(examples, k))
    u = rng.normal(0, heterogeneity, workers)
    who = np.argsort(rng.random((examples, workers)), axis=1)[:, :per_example].ravel()
    ex = np.repeat(np.arange(examples), per_example)
    f = [formulation("lin-const")]
    pa, pb = score_lists(la, f, n_levels=3)[ex], score_lists(lb, f, n_levels=3)[ex]
    sa = rng.random(ex.size) < expit(-3 + u[who] + 6 * pa[:, 0])
    sb = rng.random(ex.size) < expit(-3 + u[who] + 6 * pb[:, 0])
    answers = np.select([sa & sb, ~sa & ~sb, sa], ["both_good", "both_bad", "a_better"], "b_better")
    return la[ex], lb[ex], pa, pb, answers.astype(object), who, ex


def test_pigeonhole_weights_have_the_moments_of_two_crossed_multinomials(rng):
    """Var*(sum_i w_i y_i) of the pigeonhole weights equals y^T (E[w w^T] - 1 1^T) y, with
    E[w_i w_j] = (d_rr' + 1 - 1/R)(d_cc' + 1 - 1/C) for multinomial(R, 1/R) worker counts and
    independent multinomial(C, 1/C) example counts (Owen 2007, sec. 3)."""
    n, R, C = 120, 7, 25
    worker, example = rng.integers(0, R, n), rng.integers(0, C, n)
    y = rng.normal(size=n)
    label, clusters = resampling_clusters(n, worker.astype(str), example)
    assert label == RESAMPLING["pigeonhole"]
    W = replicate_weights(n, 20000, seed=3, clusters=clusters)
    same_w = worker[:, None] == worker[None]
    same_e = example[:, None] == example[None]
    second = (same_w + 1 - 1 / R) * (same_e + 1 - 1 / C)
    exact = y @ (second - 1) @ y
    mc = np.var(W @ y, ddof=1)
    assert mc == pytest.approx(exact, rel=0.04)  # MC error of a variance from 20000 draws: ~1 %
    np.testing.assert_allclose(W.mean(0), 1, atol=0.05)
    # an answer's weight is the product of its worker's and its example's draw counts, drawn
    # (workers, then examples) from replicate b's own stream
    for b in (0, 7):
        draw = np.random.default_rng(np.random.SeedSequence(3).spawn(20000)[b])
        cw = np.bincount(draw.integers(0, R, R), minlength=R)
        ce = np.bincount(draw.integers(0, C, C), minlength=C)
        np.testing.assert_array_equal(W[b], cw[clusters[0]] * ce[clusters[1]])


def test_example_resampling_moves_an_examples_answers_together(rng):
    ex = np.repeat(np.arange(40), 3)
    label, clusters = resampling_clusters(ex.size, None, [f"e{e}" for e in ex])
    assert label == "examples"
    W = replicate_weights(ex.size, 50, seed=1, clusters=clusters)
    per_example = W.reshape(50, 40, 3)
    assert (per_example == per_example[:, :, :1]).all()           # the 3 answers together
    np.testing.assert_array_equal(per_example[:, :, 0].sum(1), 40)  # 40 examples drawn


def test_worker_resampling_moves_a_workers_answers_together():
    who = np.tile(np.arange(9), 10)
    _, clusters = resampling_clusters(who.size, who, None)
    W = replicate_weights(who.size, 30, seed=2, clusters=clusters)
    for w in range(9):
        assert (W[:, who == w] == W[:, [w]]).all()
    np.testing.assert_array_equal(W.sum(1), 90)      # 9 workers of 10 answers drawn


def test_unique_example_ids_give_the_answer_bootstrap_and_missing_workers_are_singletons(rng):
    n = 90
    _, unique = resampling_clusters(n, None, [str(i) for i in range(n)])
    np.testing.assert_array_equal(replicate_weights(n, 8, 4, clusters=unique), replicate_weights(n, 8, 4))
    assert resampling_clusters(n, [None] * n, None)[0] == "answers"   # no worker id at all
    workers = np.array(["a", "b", None, ""] * 22 + ["a", "b"], dtype=object)
    # every answer its own example: examples nested in workers, so workers alone
    label, (w,) = resampling_clusters(n, workers, None)
    assert label == RESAMPLING["workers"]
    assert len(set(w[workers == "a"])) == 1 and len(set(w[pd.isna(workers) | (workers == "")])) == 44
    # one worker per example (examples repeated by the same worker) is still nested; a second
    # worker on one example makes the design crossed
    examples = np.arange(n) // 2
    assert resampling_clusters(n, np.repeat(np.arange(45), 2) % 7, examples)[0] == RESAMPLING["workers"]
    crossed = np.repeat(np.arange(45), 2) % 7
    crossed[1] = 6
    assert resampling_clusters(n, crossed, examples)[0] == RESAMPLING["pigeonhole"]
    with pytest.raises(SatcalError, match="worker_ids has 3 entries for 90 answers"):
        resampling_clusters(n, ["a", "b", "c"], None)


def test_clustered_covariance_on_collapsed_rows_equals_statsmodels(rng):
    _, _, pa, pb, answers, _, _ = _crowd(rng, examples=300)
    types = collapse_answers(pa, pb, answers)
    curve = satisfaction_curves(types)[0]
    assert types.counts.max() > 1        # the collapse merged answers: the counts matter
    fit = fit_logit(curve.x, curve.y, weights=curve.w, clusters=curve.types)
    keep = np.isin(answers, ("both_good", "both_bad"))
    x = np.concatenate([pa[keep, 0], pb[keep, 0]])
    y = np.tile((answers[keep] == "both_good").astype(float), 2)
    model = sm.GLM(y, design(x), family=sm.families.Binomial())
    ref = model.fit(cov_type="cluster", cov_kwds={"groups": np.tile(np.arange(keep.sum()), 2)})
    np.testing.assert_allclose(fit.beta, ref.params, atol=1e-9)
    np.testing.assert_allclose(fit.cov, ref.cov_params(), rtol=1e-8, atol=1e-12)
    assert fit.cov_type == "cluster"
    lo, hi = fit.band([0.5])
    se = np.sqrt(design([0.5]) @ ref.cov_params() @ design([0.5])[0])
    eta = design([0.5]) @ ref.params
    np.testing.assert_allclose([lo[0], hi[0]], expit([eta[0] - 1.959964 * se[0], eta[0] + 1.959964 * se[0]]),
                               rtol=1e-6)
    # rows of one cluster with different weights are a mistake
    with pytest.raises(SatcalError, match="same weight"):
        fit_logit(x, y, weights=np.r_[np.ones(keep.sum()), 2 * np.ones(keep.sum())],
                  clusters=np.tile(np.arange(keep.sum()), 2))


def _study(la, lb, answers, who, ex):
    k = la.shape[1]
    frame = pd.DataFrame({"example_id": [f"e{e}" for e in ex], "query": "q", "answer": answers,
                          "worker_id": [f"w{w}" for w in who]})
    for i in range(k):
        frame[f"ra{i + 1}"], frame[f"rb{i + 1}"] = la[:, i], lb[:, i]
    return StudyData(frame, k=k, n_levels=3)


def test_calibrate_resamples_workers_and_examples_as_per_answer_refits_say(rng):
    """Replicate b of calibrate's bootstrap on a study with worker ids equals the per-answer
    fits with weights (worker draws x example draws) rebuilt from replicate b's own stream;
    the joint model's k-step replicates see the same weights."""
    from satcal.analysis.joint import CODES, bootstrap_thetas, fit_joint_shared, shared_curve
    la, lb, pa, pb, answers, who, ex = _crowd(rng, examples=80)
    study = _study(la, lb, answers, who, ex)
    res = calibrate(study, ["lin-const"], bootstrap=6, seed=11, model_check_folds=0, sat_model="both")
    assert res.meta["provenance"]["resampling"] == "workers x examples (pigeonhole)"
    b = 4
    rng_b = np.random.default_rng(np.random.SeedSequence(11).spawn(6)[b])
    # codes in order of first appearance, as the bootstrap numbers its clusters
    w_first = pd.factorize(pd.Series([f"w{w}" for w in who]))[0]
    e_first = pd.factorize(pd.Series(ex))[0]
    cw = np.bincount(rng_b.integers(0, w_first.max() + 1, w_first.max() + 1), minlength=w_first.max() + 1)
    ce = np.bincount(rng_b.integers(0, e_first.max() + 1, e_first.max() + 1), minlength=e_first.max() + 1)
    w = cw[w_first] * ce[e_first]
    sat = np.isin(answers, ("both_good", "both_bad"))
    s = fit_logit(np.concatenate([pa[sat, 0], pb[sat, 0]]), np.tile((answers[sat] == "both_good") * 1.0, 2),
                  weights=np.tile(w[sat], 2))
    d = pa[:, 0] - pb[:, 0]
    agree = ((answers == "a_better") & (d > 1e-9)) | ((answers == "b_better") & (d < -1e-9))
    p = fit_logit(np.abs(d), agree * 1.0, weights=w)
    # over the ranges the study's data support, as calibrate computes its indicators
    ind = bias_indicators(s.predict(GRID)[None], p.predict(GRID)[None], sat_range=res.meta["support"]["sat"],
                          pref_range=res.meta["support"]["pref"])
    np.testing.assert_allclose(res.bootstrap.indicators[b, 0], [ind[k][0] for k in ("b1", "b2", "b3")],
                               atol=1e-7)
    # joint model: the same weights, per distinct row (its fit, refitted here, agrees to ~1e-8)
    types = collapse_answers(pa, pb, answers)
    code = np.select([types.answers == c for c in CODES], range(len(CODES)), -1)
    fit = fit_joint_shared(types.phi_a[:, 0], types.phi_b[:, 0], types.answers, types.counts)
    theta = bootstrap_thetas(fit, types.phi_a[:, 0], types.phi_b[:, 0], code,
                             np.bincount(types.inverse, weights=w, minlength=types.counts.size)[None])
    curve = shared_curve(theta[0], GRID)   # the shared-effect model's population-averaged s(phi)
    lo, hi = res.meta["support"]["sat_joint"][0]
    inside = (GRID >= lo - 1e-12) & (GRID <= hi + 1e-12)
    assert res.bootstrap.joint["indicators"][b, 0, 0] == pytest.approx(
        np.mean(np.abs(GRID - curve)[inside]), abs=1e-6)


def test_calibrate_records_what_it_resampled(rng, ecir_study):
    _, _, pa, pb, answers, who, ex = _crowd(rng, examples=60)
    plain = calibrate(phi_a=pa, phi_b=pb, answers=answers, formulations=["lin-const"], bootstrap=3,
                      model_check_folds=0, seed=0, sat_model="published")
    assert plain.meta["provenance"]["resampling"] == "answers"
    by_example = calibrate(phi_a=pa, phi_b=pb, answers=answers, formulations=["lin-const"], bootstrap=3,
                           model_check_folds=0, example_ids=ex, seed=0, sat_model="published")
    assert by_example.meta["provenance"]["resampling"] == "examples"
    both = calibrate(phi_a=pa, phi_b=pb, answers=answers, formulations=["lin-const"], bootstrap=3,
                     model_check_folds=0, example_ids=ex, worker_ids=who, seed=0, sat_model="published")
    assert both.meta["provenance"]["resampling"] == "workers x examples (pigeonhole)"
    nested = calibrate(phi_a=pa, phi_b=pb, answers=answers, formulations=["lin-const"], bootstrap=3,
                       model_check_folds=0, worker_ids=who, seed=0, sat_model="published")   # each answer its own example
    assert nested.meta["provenance"]["resampling"] == "workers (examples nested)"
    direct = bootstrap_calibration(pa, pb, answers, [formulation("lin-const")], replicates=3,
                                   clusters=(who, ex), support=both.meta["support"])
    np.testing.assert_allclose(both.bootstrap.indicators, direct.indicators, rtol=1e-12)
    ecir = calibrate(ecir_study, ["lin-const"], bootstrap=2, model_check_folds=0, seed=0, sat_model="published")
    assert ecir.meta["provenance"]["resampling"] == "examples"   # the ECIR 2015 data has no worker ids


def test_pigeonhole_standard_errors_match_the_spread_across_studies():
    """A light version of benchmarks/bench_coverage.py: 24 studies from one crowd model with
    worker effects (heterogeneity 0.8, 12 workers); the pigeonhole bootstrap's mean SE of b1
    and of P(Sat|0.5) reaches at least 0.75 of the SD of the estimates across the studies,
    while the answer bootstrap's falls short."""
    rng = np.random.default_rng(20)
    half = int(np.flatnonzero(GRID == 0.5)[0])
    est, se = [], {"answers": [], "pigeonhole": []}
    forms = [formulation("lin-const")]
    for s in range(24):
        _, _, pa, pb, answers, who, ex = _crowd(rng, examples=150, per_example=2, workers=12,
                                                heterogeneity=0.8)
        for kind, clusters in (("answers", None), ("pigeonhole", (who, ex))):
            boot = bootstrap_calibration(pa, pb, answers, forms, replicates=60, seed=s, clusters=clusters)
            lo, hi = boot.curve_bands[("lin-const", "sat")]
            se[kind].append([np.nanstd(boot.indicators[:, 0, 0], ddof=1), (hi[half] - lo[half]) / 3.92])
        curve = satisfaction_curves(collapse_answers(pa, pb, answers))[0]
        est.append([boot.estimates[0, 0], fit_logit(curve.x, curve.y, weights=curve.w).predict([0.5])[0]])
    sd = np.std(est, axis=0, ddof=1)
    ratio = {k: np.mean(v, axis=0) / sd for k, v in se.items()}
    assert (ratio["pigeonhole"] >= 0.75).all(), ratio
    assert (ratio["answers"] < ratio["pigeonhole"]).all(), ratio
