"""Adaptive studies (satcal.analysis.adaptive): the pool, the design criterion, the waves and the
stopping rule, each against an independent computation: a hand-computed spending function and
boundary, brute-force refits of the joint model, an independent count of cells, and a simulation
of the rule under a known null."""
import json
import math
from statistics import NormalDist
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from satcal.analysis.adaptive import (Settlement, _b1_and_gradient, _information, _levels, alpha_spending,
                                      candidate_pool, example_priorities, plan_wave, settle)
from satcal.answers import StudyData
from satcal.errors import SatcalError
from satcal.generate import Design, generate
from satcal.judgments import Judgments
from satcal.measures import bin_index, formulation, score_lists
from satcal.simulate import UserModel

FORMS = ["lin-const", "bin1-const"]   # agree on lists of levels {0, 3}, disagree where 1s and 2s are


@pytest.fixture(scope="module")
def judgments():
    """A shape unlike ECIR 2015: levels 0-3, 12 queries of 40 documents."""
    rng = np.random.default_rng(5)
    rows = [(f"q{q}", f"d{q}-{d}", int(rng.choice(4, p=[0.4, 0.25, 0.2, 0.15])))
            for q in range(12) for d in range(40)]
    return Judgments(pd.DataFrame(rows, columns=["query", "doc", "level"]))


@pytest.fixture(scope="module")
def pool(judgments):
    return candidate_pool(judgments, 4, (0, 1, 2, 3), FORMS, 600, seed=3)


def _answers(rows, seed, slope=6.0, tau=0.0):
    """Honest simulated answers from the per-list model (no worker effects: a hand-checkable
    truth for the criterion), lin-const driving satisfaction; ``tau`` > 0 adds an offset
    v ~ N(0, tau^2) shared by both lists of an answer (the shared-effect model's truth)."""
    rng = np.random.default_rng(seed)
    k = 4
    phi = lambda side: score_lists(_levels(rows, side, k), ["lin-const"], n_levels=4)[:, 0]
    v = rng.normal(0.0, tau, len(rows)) if tau else 0.0   # no draw at tau = 0: the same answers as before
    sa = rng.random(len(rows)) < 1 / (1 + np.exp(-(-3 + v + slope * phi("a"))))
    sb = rng.random(len(rows)) < 1 / (1 + np.exp(-(-3 + v + slope * phi("b"))))
    ans = np.select([sa & sb, ~sa & ~sb, sa], ["both_good", "both_bad", "a_better"], "b_better").astype(object)
    undecided = (sa == sb) & (rng.random(len(rows)) < 0.2)
    ans[undecided] = np.where(phi("a")[undecided] >= phi("b")[undecided], "a_better", "b_better")
    return StudyData(rows.assign(answer=ans, worker_id=[f"w{i % 20}" for i in range(len(rows))]), k=4, n_levels=4)


def test_pool_covers_every_feasible_cell_and_is_stable(judgments, pool):
    gen = generate(judgments, Design(k=4, levels=(0, 1, 2, 3), formulations=FORMS, min_per_cell=1, seed=3))
    feasible = gen.coverage[gen.coverage["feasible"]]
    la, lb = _levels(pool, "a", 4), _levels(pool, "b", 4)
    pa, pb = score_lists(la, FORMS, n_levels=4), score_lists(lb, FORMS, n_levels=4)
    for _, cell in feasible.iterrows():
        j = FORMS.index(cell["formulation"])
        if cell["kind"] == "phi":
            hit = (bin_index(pa[:, j]) == cell["bin"]) | (bin_index(pb[:, j]) == cell["bin"])
        else:
            hit = bin_index(np.abs(pa[:, j] - pb[:, j])) == cell["bin"]
        assert hit.any(), (cell["formulation"], cell["kind"], cell["bin"])
    assert pool["example_id"].is_unique and len(pool) >= 600
    again = candidate_pool(judgments, 4, (0, 1, 2, 3), FORMS, 600, seed=3)
    pd.testing.assert_frame_equal(pool, again)
    other = candidate_pool(judgments, 4, (0, 1, 2, 3), FORMS, 600, seed=4)
    assert not pool.drop(columns="example_id").equals(other.drop(columns="example_id"))
    # every document belongs to its query and carries its judged level
    table = judgments.table.set_index(["query", "doc"])["level"]
    row = pool.iloc[0]
    for side in "ab":
        for i in range(1, 5):
            assert table[(row["query"], row[f"{side}{i}"])] == row[f"r{side}{i}"]


def _cell_counts(rows, forms, n_levels=4, k=4, nb=10):
    pa = score_lists(_levels(rows, "a", k), forms, n_levels=n_levels)
    pb = score_lists(_levels(rows, "b", k), forms, n_levels=n_levels)
    out = {}
    for j, f in enumerate(forms):
        for b in range(nb):
            out[(f, "phi", b)] = int((bin_index(pa[:, j]) == b).sum() + (bin_index(pb[:, j]) == b).sum())
            out[(f, "dphi", b)] = int((bin_index(np.abs(pa[:, j] - pb[:, j])) == b).sum())
    return out


def test_first_wave_fills_every_cell_to_min_depth(pool):
    """With no answers the wave is space-filling: every cell the pool reaches gets min_depth
    (or all the pool has), counted independently, and the short-cell examples come first."""
    wave = plan_wave(pool, None, FORMS, 120, seed=1, min_depth=3)
    have, got = _cell_counts(pool, FORMS), _cell_counts(wave, FORMS)
    for cell, available in have.items():
        assert got[cell] >= min(3, available), cell
    first = wave["priority"].to_numpy()
    short = first >= 1000
    assert short[:np.argmin(short)].all() and not short[np.argmin(short):].any()


def test_min_depth_honoured_with_answers(pool):
    """Cells a study leaves below min_depth are asked first: the wave's short-cell picks are
    exactly the examples landing in a cell the study (plus the wave's earlier picks) left short."""
    study = _answers(pool.iloc[:60].reset_index(drop=True), seed=2)
    wave = plan_wave(pool, study, FORMS, 40, seed=1, min_depth=8)
    done = pd.concat([study.examples, wave.drop(columns="priority")], ignore_index=True)
    counts = _cell_counts(study.examples, FORMS)
    for i in range(len(wave)):
        row = wave.iloc[[i]]
        cells = [c for c, v in _cell_counts(row, FORMS).items() if v]
        short = any(counts[c] < 8 for c in cells)
        assert (wave["priority"].iloc[i] >= 1000) == short, i
        for c in cells:
            counts[c] += _cell_counts(row, FORMS)[c]
    assert not set(wave["example_id"]) & set(study.examples["example_id"])
    assert len(done) == 100


def test_plan_wave_is_deterministic_for_a_seed(pool):
    study = _answers(pool.iloc[:150].reset_index(drop=True), seed=4)
    a = plan_wave(pool, study, FORMS, 30, seed=9, exclude=["px001", "px002"])
    b = plan_wave(pool, study, FORMS, 30, seed=9, exclude=["px001", "px002"])
    pd.testing.assert_frame_equal(a, b)
    assert not {"px001", "px002"} & set(a["example_id"])
    p = example_priorities(pool, study, FORMS, seed=9)
    assert p.index.is_unique and len(p) == len(pool)
    assert p.index[np.argmax(p.to_numpy())] == a["example_id"].iloc[0]


def _brute(types, fits, pa, pb, i, forms_idx, weight=1.0):
    """E_y[(change of b1(c) - b1(L) after one more answer y to example i)^2] by refitting, y drawn
    from the mean of the fits' answer probabilities; one formulation: E_y[(change of its b1)^2]."""
    from satcal.analysis.joint import CODES, fit_joint, joint_probabilities
    p = np.mean([joint_probabilities(fits[j].theta, pa[i:i + 1, j], pb[i:i + 1, j])[0] for j in forms_idx], axis=0)
    before = [_b1_and_gradient(fits[j].theta)[0] for j in forms_idx]
    out = 0.0
    for o, code in enumerate(CODES):
        change = []
        for j, b in zip(forms_idx, before):
            fit = fit_joint(np.r_[types.phi_a[:, j], pa[i, j]], np.r_[types.phi_b[:, j], pb[i, j]],
                            np.append(types.answers, np.array([code], dtype=object)), np.r_[types.counts, weight])
            change.append((_b1_and_gradient(fit.theta)[0] - b) / weight)
        out += p[o] * (change[-1] - change[0]) ** 2 if len(change) == 2 else p[o] * change[0] ** 2
    return out


def test_criterion_matches_brute_force_refits(pool):
    """The criterion's terms are expected squared changes after one more answer: of one
    formulation's b1_joint (the spread term), and of the difference b1(c) - b1(L) (the contrast
    term). Brute force: refit the joint model with the example added under each answer and take
    the expectation under the fitted answer probabilities. The criterion ranks the examples as the
    refits do and its ratios between examples agree with theirs."""
    from satcal.analysis.core import collapse_study
    from satcal.analysis.joint import fit_joint
    study = _answers(pool.iloc[:400].reset_index(drop=True), seed=6)
    rest = pool.iloc[400:].reset_index(drop=True)
    forms = [formulation(f) for f in FORMS]
    pa = score_lists(_levels(rest, "a", 4), forms, n_levels=4)
    pb = score_lists(_levels(rest, "b", 4), forms, n_levels=4)
    types = collapse_study(study, forms)
    fits = [fit_joint(types.phi_a[:, j], types.phi_b[:, j], types.answers, types.counts) for j in range(2)]
    # one formulation: the spread term alone
    info, _, _ = _information(pa[:, 1:], pb[:, 1:], study, forms[1:], None, spread=1.0)
    picks = np.argsort(info)[[len(info) // 4, len(info) // 2, -1]]
    brute = np.array([_brute(types, fits, pa, pb, i, [1]) for i in picks])
    assert np.all(np.diff(brute) > 0)
    np.testing.assert_allclose(info[picks] / info[picks[-1]], brute / brute[-1], rtol=0.25)
    # two formulations: the contrast term alone
    info, leader, contenders = _information(pa, pb, study, forms, contenders=2, spread=0.0)
    assert (leader, contenders) == ("lin-const", ("bin1-const",))
    picks = np.argsort(info)[[len(info) // 4, len(info) // 2, -1]]
    brute = np.array([_brute(types, fits, pa, pb, i, [0, 1]) for i in picks])
    # a difference of two nearly equal influences, and lin-const's lapse sits at its bound (where
    # the refits are not smooth): the same order, ratios within a factor of 2
    assert np.all(np.diff(brute) > 0)
    ratio = (info[picks] / info[picks[-1]]) / (brute / brute[-1])
    assert np.all((ratio > 0.5) & (ratio < 2)), ratio


def test_alpha_spending_equals_hand_computation():
    phi = lambda x: 0.5 * math.erfc(-x / math.sqrt(2))
    z975 = NormalDist().inv_cdf(0.975)
    for t in (0.1, 0.25, 0.5, 1.0):
        assert alpha_spending(t, 0.05) == pytest.approx(2 - 2 * phi(z975 / math.sqrt(t)), rel=1e-9)
        assert alpha_spending(t, 0.05, "pocock") == pytest.approx(0.05 * math.log(1 + (math.e - 1) * t), rel=1e-12)
    # the textbook values: O'Brien-Fleming-type spending at t = 0.5 is 0.0056 of 0.05
    assert alpha_spending(0.5, 0.05) == pytest.approx(0.005575, abs=5e-6)
    assert alpha_spending(0.0, 0.05) == 0.0


def _niqr(d):
    """The normalised interquartile range (q75 - q25) / (2 Phi^-1(0.75)): settle's standard error
    of a difference, by np.percentile."""
    q25, q75 = np.percentile(d, [25, 75])
    return (q75 - q25) / (2 * NormalDist().inv_cdf(0.75))


def _fake_result(est, reps):
    names = [f"f{i}" for i in range(len(est))]
    bias = pd.DataFrame({"formulation": names, "b1_joint": est})
    boot = SimpleNamespace(joint={"indicators": np.stack([reps, reps, reps], axis=2)}, indicators=None)
    return SimpleNamespace(bias=bias, bootstrap=boot, meta={"n_examples": 100})


def test_settle_boundary_equals_hand_computation():
    """Look 2 of 4, 3 formulations, top 1: the increment of O'Brien-Fleming-type spending
    between t = 1/4 and 1/2, shared by m (F - m) + 1 = 3 events; z the estimate difference over
    the replicates' robust standard error of the difference (their normalised IQR)."""
    rng = np.random.default_rng(0)
    est = np.array([0.10, 0.30, 0.12])
    reps = est + rng.normal(0, 0.01, (400, 3))
    s = settle(_fake_result(est, reps), confidence=0.95, look=2, max_looks=4, margin=0.0)
    nd = NormalDist()
    spend = lambda t: 2 * (1 - nd.cdf(nd.inv_cdf(0.975) / math.sqrt(t)))
    level = (spend(0.5) - spend(0.25)) / 3
    assert s.critical == pytest.approx(nd.inv_cdf(1 - level), rel=1e-9)
    assert s.alpha_spent == pytest.approx(spend(0.5), rel=1e-9)
    assert s.z["f2"] == pytest.approx(0.02 / _niqr(reps[:, 2] - reps[:, 0]), rel=1e-9)
    assert s.leaders == ("f0",) and s.settled == (s.z["f2"] > s.critical)
    d = s.to_dict()
    assert json.loads(json.dumps(d)) == d and d["leaders"] == ["f0"] and d["margin"] == 0.0
    assert "look 2" in s.summary()
    top2 = settle(_fake_result(est, reps), top_m=2, look=4, max_looks=4, margin=0.0)
    assert top2.leaders == ("f0", "f2") and top2.settled  # 0.30 is far from both
    # with an indifference margin delta (default 0.005): z = (d + delta) / sd, and a tie within
    # the margin is no error, so the increment is shared by m (F - m) = 2 events only
    m = settle(_fake_result(est, reps), confidence=0.95, look=2, max_looks=4)
    assert m.margin == 0.005
    assert m.critical == pytest.approx(nd.inv_cdf(1 - (spend(0.5) - spend(0.25)) / 2), rel=1e-9)
    assert m.z["f2"] == pytest.approx(0.025 / _niqr(reps[:, 2] - reps[:, 0]), rel=1e-9)
    assert "within 0.005" in m.reason
    with pytest.raises(SatcalError, match="margin"):
        settle(_fake_result(est, reps), margin=-0.001)


def _sequential_errors(true_b1, margin, rng, studies=1000, looks=5, alpha=0.10, sd1=0.01):
    """Share of sequential studies (5 looks, estimates a running mean of new answers, normal
    replicates of the right spread) whose first settlement picks a leader whose true b1 exceeds
    the least by more than ``margin``; and the share that settle at all."""
    n_f = len(true_b1)
    errors = settled = 0
    for _ in range(studies):
        total = np.zeros(n_f)
        for look in range(1, looks + 1):
            total += rng.normal(0, 1, n_f)
            est = true_b1 + sd1 * total / look
            reps = est + rng.normal(0, sd1 / np.sqrt(look), (100, n_f))
            s = settle(_fake_result(est, reps), confidence=1 - alpha, look=look, max_looks=looks, margin=margin)
            if s.settled:
                settled += 1
                errors += true_b1[int(s.leaders[0][1:])] > true_b1.min() + margin
                break
    return errors / studies, settled / studies


@pytest.mark.parametrize("n_f", [2, 4])
def test_settle_with_a_margin_errs_at_most_alpha_at_the_edge_of_the_zone(n_f):
    """The least favourable case of the indifference zone (Bechhofer 1954): one formulation best,
    the others just beyond the margin (any of them is a wrong pick). Wrong settlements at most at
    alpha (0.10), up to Monte Carlo error. And the margin's point: formulations tied exactly
    settle (on any of them, all right) once the spread is well below the margin."""
    rng = np.random.default_rng(10 + n_f)
    alpha, margin = 0.10, 0.01
    true_b1 = np.r_[0.2, np.full(n_f - 1, 0.2 + margin * 1.001)]
    rate, _ = _sequential_errors(true_b1, margin, rng, alpha=alpha)
    assert rate <= alpha + 3 * math.sqrt(alpha * (1 - alpha) / 1000), rate
    tied = np.full(n_f, 0.2)
    wrong, settled = _sequential_errors(tied, margin, rng, studies=200, alpha=alpha, sd1=0.002)
    assert wrong == 0 and settled > 0.9


@pytest.mark.parametrize("n_f", [2, 4])
def test_settle_error_rate_under_a_null_at_most_alpha(n_f):
    """All formulations equal; estimates accumulate over 5 looks as a random walk of new
    answers (a sequential study), bootstrap replicates normal around them with the right
    spread. Any settlement is an error: it happens at most at alpha (0.10), up to Monte Carlo
    error; with two formulations the bound is attained at the last look (0.10 of the spending)."""
    rng = np.random.default_rng(n_f)
    alpha, studies, looks = 0.10, 1000, 5
    errors = 0
    for _ in range(studies):
        total = np.zeros(n_f)
        for look in range(1, looks + 1):
            total += rng.normal(0, 1, n_f)
            est = 0.2 + 0.01 * total / look
            sd = 0.01 / np.sqrt(look)
            reps = est + rng.normal(0, sd, (100, n_f))
            if settle(_fake_result(est, reps), confidence=1 - alpha, look=look, max_looks=looks, margin=0.0).settled:
                errors += 1
                break
    rate = errors / studies
    assert rate <= alpha + 3 * math.sqrt(alpha * (1 - alpha) / studies), rate


def test_settle_without_bootstrap_is_never_settled():
    res = SimpleNamespace(bias=pd.DataFrame({"formulation": ["a", "b"], "b1_joint": [0.1, 0.9]}),
                          bootstrap=None, meta={"n_examples": 5})
    s = settle(res)
    assert not s.settled and "bootstrap" in s.reason and isinstance(s, Settlement)


def test_population_truth_recovers_the_generating_curve(pool):
    """With no worker effects, lapses, undecided preferences or position bias, the joint model is
    exact for the generating formulation: the limit's b1_joint is mean |x - expit(-3 + 6 x)| over
    the grid, computed here directly."""
    from satcal.analysis.adaptive import population_truth
    from satcal.analysis.core import GRID
    model = UserModel(formulation="lin-const", intercept=-3.0, slope=6.0, heterogeneity=0.0, spammers=0.0,
                      position_bias=0.0)
    truth = population_truth(pool, model, ["lin-const"], n_levels=4)
    exact = np.mean(np.abs(GRID - 1 / (1 + np.exp(3 - 6 * GRID))))
    assert truth["lin-const"] == pytest.approx(exact, abs=2e-4)


def test_expected_answers_match_the_simulated_crowd():
    """The expected answer shares behind population_truth (worker effect by quadrature, undecided
    preferences, lapses, position bias) against simulate.py's honest answers, 40,000 draws an
    example, random shown order."""
    from satcal.analysis.adaptive import _expected_answers
    from satcal.platforms import swap_answer
    from satcal.simulate import honest_answers
    model = UserModel(heterogeneity=0.8, undecided_preference=0.3, preference_accuracy=0.7, lapse=0.1,
                      position_bias=0.1, spammers=0.0)
    phi_a, phi_b = np.array([0.2, 0.7, 0.5]), np.array([0.6, 0.1, 0.5])
    expected = _expected_answers(phi_a, phi_b, model)
    rng = np.random.default_rng(1)
    n = 40_000
    for i in range(3):
        swapped = rng.random(n) < 0.5
        a, b = np.full(n, phi_a[i]), np.full(n, phi_b[i])
        shown, _, _ = honest_answers(a, b, rng.normal(0, 0.8, n), swapped, model, rng, joint_rng=rng)
        canon = np.array([swap_answer(x) if s else x for x, s in zip(shown, swapped)])
        got = [np.mean(canon == c) for c in ("a_better", "b_better", "both_good", "both_bad")]
        np.testing.assert_allclose(got, expected[i], atol=4 * np.sqrt(0.25 / n))


def test_simulated_waves_answer_in_the_examples_orientation(pool):
    """The simulation harness's answers (new crowd, random shown order, back to the example's
    A/B) have the expected shares of each answer, example by example."""
    from satcal.analysis.adaptive import _answer, _expected_answers
    model = UserModel(heterogeneity=0.5, undecided_preference=0.2, preference_accuracy=0.8, lapse=0.05,
                      position_bias=0.05, spammers=0.0, workers=200)
    rng = np.random.default_rng(3)
    n = 20_000
    for i in (0, 7):
        rows = pool.iloc[[i] * n].reset_index(drop=True)
        got = _answer(rows, model, 4, {"n_levels": 4}, rng, 1)["answer"].to_numpy()
        phi = lambda side: score_lists(_levels(rows.iloc[:1], side, 4), ["lin-const"], n_levels=4)[:, 0]
        # worker offsets are drawn per wave (200 workers), so allow their sampling error too
        expected = _expected_answers(phi("a"), phi("b"), model)[0]
        shares = [np.mean(got == c) for c in ("a_better", "b_better", "both_good", "both_bad")]
        np.testing.assert_allclose(shares, expected, atol=0.03)


def test_standardised_truth_equals_standardise_on_a_noiseless_crowd(judgments, pool):
    """With no worker effect, the crowd's satisfaction of a list is expit(-3 + 6 phi) under
    lin-const, exactly the per-list curve of a joint model with theta = (-3, 6, 0, ...). So the
    harness's true b1_std must equal standardise's b1_std from that theta with all the weight on
    lin-const, on the same reference population; and for lin-const itself the standardised
    curve is the generating one, so its b1_std is mean |x - expit(-3 + 6 x)| by hand."""
    from satcal.analysis.adaptive import standardised_truth
    from satcal.analysis.core import GRID
    from satcal.analysis.standardise import reference_scores, standardised_indicators
    model = UserModel(formulation="lin-const", intercept=-3.0, slope=6.0, heterogeneity=0.0, spammers=0.0)
    truth = standardised_truth(judgments, model, FORMS, k=4, n_levels=4, reference_seed=5, size=2000)
    ref = reference_scores(judgments, [formulation(f) for f in FORMS], 4, 4, size=2000, seed=5)
    thetas = np.zeros((2, 7))
    thetas[0, :3] = (-3.0, 6.0, 0.0)
    thetas[1, :3] = (5.0, -9.0, 1.0)   # weight 0: must not matter
    std = standardised_indicators(thetas, ref, np.array([1.0, 0.0]))
    np.testing.assert_allclose(truth.to_numpy(), std["b1_std"], rtol=1e-6)
    exact = np.mean(np.abs(GRID - 1 / (1 + np.exp(3 - 6 * GRID))))
    # the standardised fit groups scores to 3 decimals (a shift of phi below 5e-4)
    assert truth["lin-const"] == pytest.approx(exact, abs=5e-5)
    assert truth["bin1-const"] > truth["lin-const"] + 0.01   # users do not follow bin1-const
    # with no position bias the joint model is exact for the generating formulation, so its
    # limit (satisfaction="model") gives the same truth, to the fit's tolerance
    plain = UserModel(formulation="lin-const", intercept=-3.0, slope=6.0, heterogeneity=0.0, spammers=0.0,
                      position_bias=0.0)
    limit = standardised_truth(judgments, plain, FORMS, k=4, n_levels=4, reference_seed=5, size=2000,
                               satisfaction="model", pool=pool)
    np.testing.assert_allclose(limit.to_numpy(), truth.to_numpy(), atol=2e-4)


def test_settle_on_b1_std_uses_its_bootstrap_replicates(judgments, pool):
    """settle(indicator="b1_std") against a hand computation of its z from the standardised
    replicates (which resample workers and refit the reference population's curves), which differ
    from b1_joint's."""
    from satcal.analysis.calibration import calibrate
    from satcal.analysis.standardise import reference_scores
    rows = pool.iloc[:300].reset_index(drop=True)
    study = _answers(rows, 4)
    study = StudyData(study.examples, k=4, n_levels=4, judgments=judgments)
    ref = reference_scores(judgments, [formulation(f) for f in FORMS], 4, 4, size=1000, seed=0)
    res = calibrate(study, FORMS, bootstrap=40, seed=3, model_check_folds=0, reference=ref,
                    standardised_intervals=True)
    s = settle(res, indicator="b1_std", look=3, max_looks=5, margin=0.0)
    est = res.bias["b1_std"].to_numpy(float)
    reps = res.bootstrap.joint["std_indicators"][:, :, 0]
    lead, other = np.argmin(est), np.argmax(est)
    d = reps[:, other] - reps[:, lead]
    d = d[np.isfinite(d)]
    assert s.indicator == "b1_std" and s.leaders == (FORMS[lead],)
    assert s.z[FORMS[other]] == pytest.approx((est[other] - est[lead]) / _niqr(d), rel=1e-9)
    joint = settle(res, indicator="b1_joint", look=3, max_looks=5, margin=0.0)
    assert joint.z[FORMS[other]] != pytest.approx(s.z[FORMS[other]], rel=1e-3) or joint.leaders != s.leaders


def test_std_replicates_are_the_calibrations(judgments, pool):
    """One replicate computation: std_replicates (what settle decides on) is the calibration's
    standardised replicates; (a) read from a calibration that computed them; (b) computed for a
    calibration that did not (standardised_intervals=False, same seed) and equal to (a); (c)
    replicate by replicate, standardise's b1_std with the replicate's own Akaike weights
    exp(l - max l) / sum from its log-likelihoods; (d) settle's z from those replicates."""
    from satcal.analysis.adaptive import std_replicates
    from satcal.analysis.calibration import calibrate
    from satcal.analysis.standardise import reference_scores, standardised_indicators
    rows = pool.iloc[:300].reset_index(drop=True)
    study = StudyData(_answers(rows, 4).examples, k=4, n_levels=4, judgments=judgments)
    forms = [formulation(f) for f in FORMS]
    ref = reference_scores(judgments, forms, 4, 4, size=1000, seed=0)
    kw = dict(bootstrap=40, seed=3, model_check_folds=0, reference=ref)
    res = calibrate(study, FORMS, standardised_intervals=True, **kw)
    est, reps = std_replicates(res, study)
    np.testing.assert_allclose(est, res.bias["b1_std"].to_numpy(float))
    np.testing.assert_array_equal(reps, res.bootstrap.joint["std_indicators"][:, :, 0])
    bare = calibrate(study, FORMS, standardised_intervals=False, **kw)
    assert bare.bootstrap.joint.get("std_indicators") is None
    est2, reps2 = std_replicates(bare, study)
    np.testing.assert_allclose(est2, est)
    np.testing.assert_allclose(reps2, reps, rtol=1e-9, atol=1e-12)
    thetas, ll = res.bootstrap.joint["thetas"], res.bootstrap.joint["loglik"]
    sat_range = res.meta["support"]["sat_joint"]
    for b in (0, 7, 23):
        w = np.exp(ll[b] - ll[b].max()) / np.exp(ll[b] - ll[b].max()).sum()
        hand = standardised_indicators(thetas[b], ref, w, sat_range=sat_range)["b1_std"]
        np.testing.assert_allclose(reps[b], hand, rtol=1e-6, atol=1e-9)
    for r in (res, bare):
        s = settle(r, indicator="b1_std", study=study, look=3, max_looks=5, margin=0.0)
        lead, other = np.argmin(est), np.argmax(est)
        d = reps[:, other] - reps[:, lead]
        assert s.z[FORMS[other]] == pytest.approx((est[other] - est[lead]) / _niqr(d[np.isfinite(d)]),
                                                  rel=1e-6)
        # b1_std by default, once replicates can be had (the calibration's, or computed from its joint ones)
        assert settle(r, look=3, max_looks=5).indicator == "b1_std"
    with pytest.raises(SatcalError, match="fitted 300 answers"):
        std_replicates(bare, StudyData(study.examples.iloc[:200], k=4, n_levels=4, judgments=judgments))


def _brute_std(types, fits, pa, pb, i, ref, weights, pair=None, weight=1.0):
    """E_y[(change of b1_std(c) - b1_std(L))^2] after one more answer y to example i, by refitting
    every joint model of weight above 0.01 with the example added and recomputing b1_std with
    standardise (the weights held, as the criterion holds them); y from the weighted models'
    answer probabilities. ``pair`` None: the only formulation's own b1_std."""
    from satcal.analysis.joint import CODES, fit_joint, joint_probabilities
    from satcal.analysis.standardise import standardised_indicators
    models = [g for g in range(len(fits)) if weights[g] > 0.01]
    thetas = np.stack([f.theta for f in fits])
    p = sum(weights[g] * joint_probabilities(fits[g].theta, pa[i:i + 1, g], pb[i:i + 1, g])[0] for g in models)
    p = p / sum(weights[g] for g in models)
    before = standardised_indicators(thetas, ref, weights)["b1_std"]
    out = 0.0
    for o, code in enumerate(CODES):
        new = thetas.copy()
        for g in models:
            new[g] = fit_joint(np.r_[types.phi_a[:, g], pa[i, g]], np.r_[types.phi_b[:, g], pb[i, g]],
                               np.append(types.answers, np.array([code], dtype=object)),
                               np.r_[types.counts, weight]).theta
        change = (standardised_indicators(new, ref, weights)["b1_std"] - before) / weight
        out += p[o] * ((change[pair[1]] - change[pair[0]]) ** 2 if pair else change[0] ** 2)
    return out


def test_b1_std_criterion_matches_brute_force_refits(judgments, pool):
    """The b1_std criterion's terms are expected squared changes after one more answer, through
    the joint models that carry the satisfaction model's weight: of one formulation's b1_std (the
    spread term) and of b1_std(c) - b1_std(L) (the contrast term). Brute force: refit those models
    with the example added under each answer and recompute b1_std with standardise. The
    criterion orders the examples as the refits do, ratios within a factor of 2."""
    from satcal.analysis.adaptive import _information_std
    from satcal.analysis.core import collapse_study
    from satcal.analysis.joint import fit_joint
    from satcal.analysis.standardise import akaike_weights, reference_scores
    study = _answers(pool.iloc[:400].reset_index(drop=True), seed=6)
    rest = pool.iloc[400:].reset_index(drop=True)
    forms = [formulation(f) for f in FORMS]
    pa = score_lists(_levels(rest, "a", 4), forms, n_levels=4)
    pb = score_lists(_levels(rest, "b", 4), forms, n_levels=4)
    ref = reference_scores(judgments, forms, 4, 4, size=1000, seed=0)
    types = collapse_study(study, forms)
    fits = [fit_joint(types.phi_a[:, j], types.phi_b[:, j], types.answers, types.counts) for j in range(2)]
    # one formulation: its own model is the satisfaction model; the spread term alone
    info, _, _ = _information_std(pa[:, 1:], pb[:, 1:], study, forms[1:], None, 1.0, ref[:, 1:], 0.0)
    picks = np.argsort(info)[[len(info) // 4, len(info) // 2, -1]]
    alone = collapse_study(study, forms[1:])
    brute = np.array([_brute_std(alone, fits[1:], pa[:, 1:], pb[:, 1:], i, ref[:, 1:], np.array([1.0])) for i in picks])
    assert np.all(np.diff(brute) > 0)
    ratio = (info[picks] / info[picks[-1]]) / (brute / brute[-1])
    assert np.all((ratio > 0.5) & (ratio < 2)), ratio
    # two formulations: the contrast term alone (no margin, so the contrast stays open)
    weights = akaike_weights([f.loglik for f in fits])
    info, leader, contenders = _information_std(pa, pb, study, forms, 2, 0.0, ref, 0.0)
    lead = FORMS.index(leader)
    assert contenders == (FORMS[1 - lead],)
    picks = np.argsort(info)[[len(info) // 4, len(info) // 2, -1]]
    brute = np.array([_brute_std(types, fits, pa, pb, i, ref, weights, pair=(lead, 1 - lead)) for i in picks])
    assert np.all(np.diff(brute) > 0)
    ratio = (info[picks] / info[picks[-1]]) / (brute / brute[-1])
    assert np.all((ratio > 0.5) & (ratio < 2)), ratio


def _assert_full_greedy(wave, state, rest):
    """Each of ``wave``'s picks has the largest reduction of the full recomputation among the
    examples not yet picked (up to exact ties: pool examples of the same pattern pair have the
    same reduction), ``state`` (a _Design) taking each pick's information in turn."""
    where = {e: n for n, e in enumerate(rest["example_id"])}
    free = np.ones(len(rest), bool)
    for e in wave["example_id"]:
        red, j = state.reductions(), where[e]
        assert red[j] == pytest.approx(red[free].max(), rel=1e-9)
        free[j] = False
        state.add(j)


def test_information_criterion_is_the_exact_expected_information_update(judgments, pool):
    """criterion="information": (a) U U' is the expected Fisher information of one answer, checked
    against the Hessian of the expected log-likelihood sum_y p_y(theta0) log p_y(theta) by
    finite differences of joint_probabilities; (b) each example's reduction equals
    tr(M Sigma) - tr(M (Sigma^-1 + I_x)^-1) by explicit inverses; (c) after a pick the
    covariance is (Sigma^-1 + I_x)^-1; (d) plan_wave's picks (min_depth 0) are the greedy
    sequence of the full recomputation."""
    from satcal.analysis.adaptive import _design_std
    from satcal.analysis.joint import joint_probabilities
    study, rest, forms, pa, pb, ref = _std_candidates(judgments, pool, FORMS)
    state, leader, contenders = _design_std(pa, pb, study, forms, None, 1.0, ref, 0.0)
    assert leader in FORMS and len(state.U) >= 1
    # (a) for the first model, at one example
    from satcal.analysis.adaptive import _fit_all
    _, _, fits = _fit_all(study, forms)
    weights = np.array([f.loglik for f in fits])
    g = int(np.argmax(weights))
    m = [i for i, U in enumerate(state.U)][0]
    theta = fits[g].theta
    i = 5
    p0 = joint_probabilities(theta, pa[i:i + 1, g], pb[i:i + 1, g])[0]
    h = 1e-4
    def ell(t):
        return float(p0 @ np.log(joint_probabilities(t, pa[i:i + 1, g], pb[i:i + 1, g])[0]))
    hess = np.empty((7, 7))
    for r in range(7):
        for c in range(7):
            er, ec = np.eye(7)[r] * h, np.eye(7)[c] * h
            hess[r, c] = (ell(theta + er + ec) - ell(theta + er - ec) - ell(theta - er + ec) + ell(theta - er - ec)) / (4 * h * h)
    info = state.U[m][i].T @ state.U[m][i]
    if len(state.U) == 1 or g == sorted(range(len(fits)), key=lambda j: -weights[j])[0]:
        np.testing.assert_allclose(info, -hess, atol=1e-3 * np.abs(hess).max() + 1e-6)
    # (b) and (c), every model
    red = state.reductions()
    for idx in (0, 17, 101):
        want = 0.0
        for U, S, M in zip(state.U, state.sigma, state.M):
            post = np.linalg.inv(np.linalg.inv(S) + U[idx].T @ U[idx])
            want += np.trace(M @ S) - np.trace(M @ post)
        assert red[idx] == pytest.approx(want, rel=1e-6, abs=1e-12)
    before = [np.linalg.inv(np.linalg.inv(S) + U[17].T @ U[17]) for U, S in zip(state.U, state.sigma)]
    state.add(17)
    for S, want in zip(state.sigma, before):
        np.testing.assert_allclose(S, want, rtol=1e-6, atol=1e-12 * np.abs(want).max())
    # (d) the lazy greedy picks the same as recomputing every reduction every pick (up to exact
    # ties: pool examples of the same pattern pair have the same reduction)
    wave = plan_wave(rest, study, FORMS, 6, seed=1, min_depth=0, reference=ref, margin=0.0, cell_cap=None)
    state, _, _ = _design_std(pa, pb, study, forms, None, 1.0, ref, 0.0)
    _assert_full_greedy(wave, state, rest)


def test_cell_cap_greedy_equals_a_direct_capped_greedy(judgments, pool):
    """plan_wave's cell cap: the wave is the greedy sequence of the full recomputation of every
    reduction (the information update after each pick) among the examples none of whose phi or
    |dphi| cells, of the formulations the criterion reads, already holds ceil(cap n) of the wave's
    picks (cells counted here from bin_index, not from plan_wave's cell ids), and no such cell
    holds more than the cap."""
    from satcal.analysis.adaptive import _design_std
    from satcal.analysis.standardise import reference_scores
    study = _answers(pool.iloc[:400].reset_index(drop=True), seed=6)
    study = StudyData(study.examples, k=4, n_levels=4, judgments=judgments)
    rest = pool.iloc[400:].reset_index(drop=True)
    forms = [formulation(f) for f in FORMS]
    pa = score_lists(_levels(rest, "a", 4), forms, n_levels=4)
    pb = score_lists(_levels(rest, "b", 4), forms, n_levels=4)
    ref = reference_scores(judgments, forms, 4, 4, size=1000, seed=0)
    n, share = 12, 0.25
    cap = int(np.ceil(share * n))
    wave = plan_wave(rest, study, FORMS, n, seed=1, min_depth=0, reference=ref, margin=0.0, cell_cap=share)
    state, leader, contenders = _design_std(pa, pb, study, forms, None, 1.0, ref, 0.0)
    read = sorted({FORMS.index(leader), *(FORMS.index(c) for c in contenders), *state.models})
    # each example's cells of the read formulations, as (formulation, kind, bin) sets
    cells = [{(j, "phi", int(bin_index(pa[i, j]))) for j in read} | {(j, "phi", int(bin_index(pb[i, j]))) for j in read}
             | {(j, "dphi", int(bin_index(abs(pa[i, j] - pb[i, j])))) for j in read} for i in range(len(rest))]
    where = {e: m for m, e in enumerate(rest["example_id"])}
    free = np.ones(len(rest), bool)
    held: dict = {}
    for e in wave["example_id"]:
        red, j = state.reductions(), where[e]
        open_ = free & np.array([all(held.get(c, 0) < cap for c in cs) for cs in cells])
        assert open_[j]
        assert red[j] == pytest.approx(red[open_].max(), rel=1e-9)
        free[j] = False
        state.add(j)
        for c in cells[j]:
            held[c] = held.get(c, 0) + 1
    assert max(held.values()) <= cap
    uncapped = plan_wave(rest, study, FORMS, n, seed=1, min_depth=0, reference=ref, margin=0.0, cell_cap=None)
    most = max(sum(c in cells[where[e]] for e in uncapped["example_id"]) for c in held)
    assert most > cap   # on this study the greedy alone piles more than the cap into one cell


def _std_candidates(judgments, pool, names):
    """400 answered pool examples (with the judgments) as the study, the rest of the pool as
    candidates scored on ``names`` (A and B lists), and a reference population of 1,000 lists."""
    from satcal.analysis.standardise import reference_scores
    study = _answers(pool.iloc[:400].reset_index(drop=True), seed=6)
    study = StudyData(study.examples, k=4, n_levels=4, judgments=judgments)
    rest = pool.iloc[400:].reset_index(drop=True)
    forms = [formulation(f) for f in names]
    pa = score_lists(_levels(rest, "a", 4), forms, n_levels=4)
    pb = score_lists(_levels(rest, "b", 4), forms, n_levels=4)
    ref = reference_scores(judgments, forms, 4, 4, size=1000, seed=0)
    return study, rest, forms, pa, pb, ref


def _std_criterion_inputs(judgments, pool, names):
    """What the b1_std criterion's tests check against: 400 answered pool examples (with the
    judgments), the rest as candidates scored on ``names``, a reference population of 1,000
    lists, the joint fits, b1_std with its gradients (std_gradients) and the models whose
    covariance is finite."""
    from satcal.analysis.adaptive import _fit_all, std_gradients
    from satcal.analysis.standardise import akaike_weights
    study, _, forms, pa, pb, ref = _std_candidates(judgments, pool, names)
    _, _, fits = _fit_all(study, forms)
    b1, grads = std_gradients(np.stack([f.theta for f in fits]), ref, akaike_weights([f.loglik for f in fits]))
    models = [g for g in grads if np.isfinite(fits[g].cov).all()]
    return study, forms, pa, pb, ref, fits, b1, grads, models


def test_information_criterion_precision_terms_relative_and_summed(judgments, pool):
    """The precision term of criterion="information" is the fall of the mean relative variance
    (1/F) sum_f Var b1_std(f) / Var_0(f); of "information-sum" the fall of sum_f Var(f) over its
    value now (A-optimal on the b1_std vector: the widest count most). Checked by explicit
    inverses: each model's covariance after one answer (Sigma^-1 + I_x)^-1, the variances
    sum_g G_fg Sigma_g G_fg' from std_gradients; the contrast term (spread 0) taken out."""
    from satcal.analysis.adaptive import _design_std
    study, forms, pa, pb, ref, fits, _, grads, models = _std_criterion_inputs(judgments, pool, FORMS)
    var0 = sum(np.einsum("fi,ij,fj->f", grads[g], fits[g].cov, grads[g]) for g in models)
    assert var0.max() > 1.2 * var0.min()   # so the two weightings differ
    for relative in (False, True):
        full, _, _ = _design_std(pa, pb, study, forms, None, 1.0, ref, 0.005, fits=fits, relative=relative)
        contrast, _, _ = _design_std(pa, pb, study, forms, None, 0.0, ref, 0.005, fits=fits, relative=relative)
        red = full.reductions() - contrast.reductions()
        for idx in (0, 17, 101):
            after = np.zeros_like(var0)
            for m, g in enumerate(models):
                U = full.U[m][idx]
                post = np.linalg.inv(np.linalg.inv(fits[g].cov) + U.T @ U)
                after += np.einsum("fi,ij,fj->f", grads[g], post, grads[g])
            want = np.mean((var0 - after) / var0) if relative else (var0 - after).sum() / var0.sum()
            assert red[idx] == pytest.approx(want, rel=1e-6, abs=1e-12)


def test_contrast_openness_pick_hand_worked():
    """openness="pick" against NormalDist by hand: |d| = 0.007, sd = 0.005, margin = 0.005:
    stop 2 Phi(-2.4) = 0.01640; pick Phi(0.4) x 2 Phi(-1.4) = 0.65542 x 0.16151 = 0.10586; the
    larger is taken. Far beyond the margin with a sure sign the pick term vanishes and stop
    remains; the default is the stopping rule's openness; _open_contrasts ranks by it."""
    from satcal.analysis.adaptive import _open_contrasts, contrast_openness
    Phi = NormalDist().cdf
    assert contrast_openness(0.007, 0.005, 0.005) == pytest.approx(2 * Phi(-2.4), rel=1e-9)
    assert contrast_openness(-0.007, 0.005, 0.005) == pytest.approx(0.016395, abs=1e-6)
    pick = contrast_openness(0.007, 0.005, 0.005, "pick")
    assert pick == pytest.approx(Phi(0.4) * 2 * Phi(-1.4), rel=1e-9)
    assert pick == pytest.approx(0.105859, abs=1e-6)
    # |d| = 0.05 (10 sd), sd = 0.005: the sign is sure, pick = stop = 2 Phi(-11)
    assert contrast_openness(0.05, 0.005, 0.005, "pick") == pytest.approx(2 * Phi(-11), rel=1e-6)
    # two contrasts with the leader 0: c=1 at 0.007 (sd 0.005), c=2 at 0.002 (sd 0.01)
    b1, ok = np.array([0.020, 0.027, 0.022]), np.ones(3, bool)
    var = {1: 0.005 ** 2, 2: 0.01 ** 2}
    got = _open_contrasts(b1, ok, 0, 0.005, None, var.get, "pick")
    want2 = max(2 * Phi(-0.7), Phi(-0.3) * 2 * Phi(-0.2))   # stop 0.48393 > pick 0.32677
    assert [c for _, c, _ in got] == [2, 1]
    assert got[0][0] == pytest.approx(want2, rel=1e-6) and got[1][0] == pytest.approx(0.105859, abs=1e-6)
    with pytest.raises(SatcalError, match="openness must be one of"):
        contrast_openness(0.01, 0.01, 0.005, "both")


def test_information_criterion_contrast_precision_term(judgments, pool):
    """precision="contrasts" (pick24): the precision term is the fall of the mean relative
    variance (1/(F-1)) sum_{f != L} Var(b1_std(f) - b1_std(L)) / Var_0(f - L) over every
    formulation's contrast with the leader, open or not; "both" is half of it plus half of the
    levels term. Checked by explicit inverses, (Sigma^-1 + I_x)^-1 per model, with the
    variances from std_gradients; the open-contrast term (spread 0) taken out."""
    from satcal.analysis.adaptive import _design_std
    names = FORMS + ["lin-zipf"]
    study, forms, pa, pb, ref, fits, b1, grads, models = _std_criterion_inputs(judgments, pool, names)
    lead = int(np.argmin(b1))
    others = [f for f in range(len(names)) if f != lead]

    def variances(covs):
        lv = sum(np.einsum("fi,ij,fj->f", grads[g], covs[g], grads[g]) for g in models)
        cv = np.array([sum((grads[g][f] - grads[g][lead]) @ covs[g] @ (grads[g][f] - grads[g][lead]) for g in models)
                       for f in others])
        return lv, cv

    lv0, cv0 = variances({g: fits[g].cov for g in models})
    assert cv0.min() > 0 and len(others) == 2
    base, _, _ = _design_std(pa, pb, study, forms, None, 0.0, ref, 0.005, fits=fits)
    for precision in ("contrasts", "both"):
        full, leader, _ = _design_std(pa, pb, study, forms, None, 1.0, ref, 0.005, fits=fits, precision=precision)
        assert leader == names[lead]
        red = full.reductions() - base.reductions()
        for idx in (0, 17, 101):
            covs = {}
            for m, g in enumerate(models):
                U = full.U[m][idx]
                covs[g] = np.linalg.inv(np.linalg.inv(fits[g].cov) + U.T @ U)
            lv, cv = variances(covs)
            contrast = np.mean((cv0 - cv) / cv0)
            level = np.mean((lv0 - lv) / lv0)
            want = contrast if precision == "contrasts" else (contrast + level) / 2
            assert red[idx] == pytest.approx(want, rel=1e-6, abs=1e-12)


def test_plan_wave_defensive_picks_follow_the_coverage_order(judgments, pool):
    """plan_wave(defensive=0.5): every second pick (t = 1, 3, ...) is the free example with the
    largest sum over its phi (A and B) and |dphi| cells of 1 / (1 + answers there), the study's
    answers and the wave's picks so far, counted here from bin_index; the other picks are the
    criterion's (the greedy of the full recomputation among the rest, after the defensive picks'
    information). Bad shares and precision values are refused with one-line errors."""
    from satcal.analysis.adaptive import _design_std
    study, rest, forms, pa, pb, ref = _std_candidates(judgments, pool, FORMS)
    sa = score_lists(_levels(study.examples, "a", 4), forms, n_levels=4)
    sb = score_lists(_levels(study.examples, "b", 4), forms, n_levels=4)

    def keys(a, b):
        return ([(j, "phi", int(bin_index(a[j]))) for j in range(len(FORMS))]
                + [(j, "phi", int(bin_index(b[j]))) for j in range(len(FORMS))]
                + [(j, "dphi", int(bin_index(abs(a[j] - b[j])))) for j in range(len(FORMS))])

    held: dict = {}
    for a, b in zip(sa, sb):
        for c in keys(a, b):
            held[c] = held.get(c, 0) + 1
    cells = [keys(pa[i], pb[i]) for i in range(len(rest))]
    n = 8
    wave = plan_wave(rest, study, FORMS, n, seed=1, min_depth=0, reference=ref, margin=0.0, cell_cap=None,
                     defensive=0.5)
    state, _, _ = _design_std(pa, pb, study, forms, None, 1.0, ref, 0.0)
    where = {e: m for m, e in enumerate(rest["example_id"])}
    free = np.ones(len(rest), bool)
    for t, e in enumerate(wave["example_id"]):
        j = where[e]
        if t % 2:
            cover = np.array([sum(1 / (1 + held.get(c, 0)) for c in cs) for cs in cells])
            assert cover[j] == pytest.approx(cover[free].max(), rel=1e-9)
        else:
            red = state.reductions()
            assert red[j] == pytest.approx(red[free].max(), rel=1e-9)
        free[j] = False
        state.add(j)
        for c in cells[j]:
            held[c] = held.get(c, 0) + 1
    plain = plan_wave(rest, study, FORMS, n, seed=1, min_depth=0, reference=ref, margin=0.0, cell_cap=None)
    assert set(plain["example_id"]) != set(wave["example_id"])
    with pytest.raises(SatcalError, match="defensive must be in"):
        plan_wave(rest, study, FORMS, n, seed=1, reference=ref, defensive=1.0)
    with pytest.raises(SatcalError, match="precision must be one of"):
        plan_wave(rest, study, FORMS, n, seed=1, reference=ref, precision="pick")
    with pytest.raises(SatcalError, match="needs target 'b1_std'"):
        example_priorities(rest, study, FORMS, seed=1, reference=ref, precision="contrasts", criterion="influence")


def test_std_only_options_refused_when_the_study_has_no_judgments(judgments, pool):
    """Without judgments the criterion falls back to b1_joint, which reads neither ``precision``
    nor ``openness``: asking for either is refused in one line naming the option, where it was
    ignored before; the defaults still plan (on b1_joint), and with the judgments the same call
    plans a wave of the size asked."""
    bare = _answers(pool.iloc[:300].reset_index(drop=True), seed=4)
    rest = pool.iloc[300:].reset_index(drop=True)
    for option, said in (({"precision": "contrasts"}, "precision='contrasts'"),
                         ({"openness": "pick"}, "openness='pick'"),
                         ({"precision": "both", "openness": "pick"}, "precision='both', openness='pick'")):
        with pytest.raises(SatcalError) as refused:
            plan_wave(rest, bare, FORMS, 10, seed=1, min_depth=0, **option)
        message = str(refused.value)
        assert message.startswith(said) and "judgments" in message and "\n" not in message
    assert len(plan_wave(rest, bare, FORMS, 10, seed=1, min_depth=0)) == 10
    with_judgments = StudyData(bare.examples, k=4, n_levels=4, judgments=judgments)
    assert len(plan_wave(rest, with_judgments, FORMS, 10, seed=1, min_depth=0, precision="contrasts")) == 10


def test_shared_model_information_and_gradients(judgments, pool):
    """The criterion on the shared-effect model's 8 parameters (issue 24, picks): (a) U'U from
    ``_jacobian`` (central differences of shared_probabilities) is the expected information
    sum_y p_y s_y s_y', s_y the analytic score of the shared likelihood
    (``_shared_negloglik_and_gradient``); (b) std_gradients' b0-b2 columns at tau = 0 equal the
    independent model's, and its tau column equals b1_std's difference quotient over tau +- 1e-3
    computed directly by standardised_curves and bias_indicators."""
    from satcal.analysis.adaptive import _jacobian, std_gradients
    from satcal.analysis.core import bias_indicators
    from satcal.analysis.joint import _shared_negloglik_and_gradient
    from satcal.analysis.standardise import akaike_weights, standardised_curves
    study, forms, pa, pb, ref, fits, b1, grads, models = _std_criterion_inputs(judgments, pool, FORMS)
    g = models[0]
    theta = np.append(fits[g].theta, 0.6)
    p, jac = _jacobian(theta, pa[:3, g], pb[:3, g])
    for i in range(3):
        want = np.zeros((8, 8))
        for y in range(4):
            nll, grad = _shared_negloglik_and_gradient(theta, pa[i:i + 1, g], pb[i:i + 1, g], np.array([y]), np.ones(1))
            want += np.exp(-nll) * np.outer(grad, grad)
        got = jac[i].T @ (jac[i] / p[i][:, None])
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-6 * np.abs(want).max())
    weights = akaike_weights([f.loglik for f in fits])
    thetas = np.stack([f.theta for f in fits])
    shared0 = np.concatenate([thetas, np.zeros((len(thetas), 1))], axis=1)
    b1_0, grads0 = std_gradients(shared0, ref, weights)
    np.testing.assert_allclose(b1_0, b1, rtol=1e-9)
    for m in grads:
        np.testing.assert_allclose(grads0[m][:, :3], grads[m][:, :3], rtol=1e-6, atol=1e-9)
    shared = shared0.copy()
    shared[:, 7] = 0.5
    _, grads5 = std_gradients(shared, ref, weights)
    h = 1e-3
    up, down = shared.copy(), shared.copy()
    up[g, 7] += h
    down[g, 7] -= h
    curves, _ = standardised_curves(np.stack([up, down]), ref, weights)
    b = np.asarray(bias_indicators(curves, curves)["b1"], float).reshape(2, -1)
    np.testing.assert_allclose(grads5[g][:, 7], (b[0] - b[1]) / (2 * h), rtol=1e-3, atol=1e-6)
    assert np.abs(grads5[g][:, 7]).max() > 1e-4   # tau moves b1_std: the column is not vacuous


def _shared_candidates(judgments, pool):
    """As _std_candidates, the 400 answers drawn with a shared offset (tau = 1.5), so the
    shared-effect fits have tau inside its box."""
    study, rest, forms, pa, pb, ref = _std_candidates(judgments, pool, FORMS)
    answered = _answers(pool.iloc[:400].reset_index(drop=True), seed=6, tau=1.5)
    return StudyData(answered.examples, k=4, n_levels=4, judgments=judgments), rest, forms, pa, pb, ref


def test_shared_model_fits_are_the_analysis_fits_and_their_covariance(judgments, pool):
    """plan_wave(model="shared")'s fits between waves (_fit_all): (a) the shared-effect fit the
    analysis makes (fit_joint_shared from fit_joint, as calibrate), theta for theta; (b) its
    covariance the inverse of the Hessian of the shared log-likelihood by second differences of
    its value, sum n log p_y (p from shared_probabilities, not the analytic gradient the fit
    differentiates); (c) tau inside its box, so the check has an eighth parameter to place. The comparison is on the
    correlation scale: within 1e-4 for the parameters inside their box, 2e-2 for lambda at its
    bound (measured 3e-6 and 4.3e-3; 5.8e-6 and 1.05e-2 once the quadrature's expit was
    factored, which moved the fit by up to 1.6e-5, within L-BFGS-B's tolerance: the second differences
    along lambda's nearly flat direction are that sensitive to where they are taken)."""
    from satcal.analysis.adaptive import _fit_all, _types_code
    from satcal.analysis.joint import _shared_free, fit_joint, fit_joint_shared, shared_probabilities
    study, _, forms, _, _, _ = _shared_candidates(judgments, pool)
    types, code, fits = _fit_all(study, forms, model="shared")
    for j, fit in enumerate(fits):
        args = (types.phi_a[:, j], types.phi_b[:, j], types.answers, types.counts)
        direct = fit_joint_shared(*args, independent=fit_joint(*args))
        np.testing.assert_array_equal(fit.theta, direct.theta)
    g = 0   # lin-const, the formulation the answers follow
    theta = fits[g].theta
    assert theta.size == 8 and 0.3 < theta[7] < 4.0, theta
    rows = np.arange(code.size)

    def loglik(t):
        return float(types.counts @ np.log(shared_probabilities(t, types.phi_a[:, g], types.phi_b[:, g])[rows, code]))
    h = 1e-3
    hess = np.empty((8, 8))
    for r in range(8):
        for c in range(8):
            er, ec = np.eye(8)[r] * h, np.eye(8)[c] * h
            hess[r, c] = (loglik(theta + er + ec) - loglik(theta + er - ec) - loglik(theta - er + ec)
                          + loglik(theta - er - ec)) / (4 * h * h)
    want = np.linalg.inv(-hess)
    # entry by entry on the correlation scale, |C - W| / sqrt(W_ii W_jj): lambda at its bound (no
    # lapses in the truth) is a nearly flat direction whose variance dwarfs the others'
    scaled = np.abs(fits[g].cov - want) / np.sqrt(np.outer(np.diag(want), np.diag(want)))
    free = _shared_free(theta)
    assert not free.all() and free[7]   # lambda at its bound; tau free
    assert scaled[np.ix_(free, free)].max() < 1e-4 and scaled.max() < 2e-2, scaled


def test_shared_model_criterion_is_the_exact_8_parameter_update(judgments, pool):
    """criterion="information" with model="shared": (a) every model's state holds the shared
    fit's 8x8 covariance and U (P, 4, 8); the objective's weight matrices are those of b1_std's
    gradients (std_gradients) at the shared thetas and their Akaike weights, checked through the
    precision term (spread 1 minus spread 0) against explicit inverses (Sigma^-1 + I_x)^-1 and
    the mean relative variance; (b) every reduction equals tr(M Sigma) - tr(M (Sigma^-1 + I_x)^-1)
    by explicit 8x8 inverses, and after a pick the covariance is (Sigma^-1 + I_x)^-1; (c)
    plan_wave(model="shared")'s picks (min_depth 0, no cap) are the greedy sequence of the full
    recomputation."""
    from satcal.analysis.adaptive import _design_std, _fit_all, std_gradients
    from satcal.analysis.standardise import akaike_weights
    study, rest, forms, pa, pb, ref = _shared_candidates(judgments, pool)
    _, _, fits = _fit_all(study, forms, model="shared")
    b1, grads = std_gradients(np.stack([f.theta for f in fits]), ref, akaike_weights([f.loglik for f in fits]))
    models = [g for g in grads if np.isfinite(fits[g].cov).all()]
    full, leader, _ = _design_std(pa, pb, study, forms, None, 1.0, ref, 0.005, model="shared")
    contrast, _, _ = _design_std(pa, pb, study, forms, None, 0.0, ref, 0.005, model="shared")
    assert leader in FORMS and list(full.models) == models
    var0 = sum(np.einsum("fi,ij,fj->f", grads[g], fits[g].cov, grads[g]) for g in models)
    red = full.reductions() - contrast.reductions()
    for m, g in enumerate(models):
        assert full.U[m].shape == (len(rest), 4, 8)
        np.testing.assert_array_equal(full.sigma[m], fits[g].cov)
    for idx in (0, 17, 101):
        after = np.zeros_like(var0)
        for m, g in enumerate(models):
            U = full.U[m][idx]
            after += np.einsum("fi,ij,fj->f", grads[g], np.linalg.inv(np.linalg.inv(fits[g].cov) + U.T @ U), grads[g])
        assert red[idx] == pytest.approx(np.mean((var0 - after) / var0), rel=1e-6, abs=1e-12)
    red = full.reductions()
    for idx in (0, 17, 101):
        want = sum(np.trace(M @ S) - np.trace(M @ np.linalg.inv(np.linalg.inv(S) + U[idx].T @ U[idx]))
                   for U, S, M in zip(full.U, full.sigma, full.M))
        assert red[idx] == pytest.approx(want, rel=1e-6, abs=1e-12)
    before = [np.linalg.inv(np.linalg.inv(S) + U[17].T @ U[17]) for U, S in zip(full.U, full.sigma)]
    full.add(17)
    for S, want in zip(full.sigma, before):
        np.testing.assert_allclose(S, want, rtol=1e-6, atol=1e-12 * np.abs(want).max())
    wave = plan_wave(rest, study, FORMS, 6, seed=1, min_depth=0, reference=ref, margin=0.0, cell_cap=None,
                     model="shared")
    state, _, _ = _design_std(pa, pb, study, forms, None, 1.0, ref, 0.0, fits=fits)
    independent = plan_wave(rest, study, FORMS, 6, seed=1, min_depth=0, reference=ref, margin=0.0, cell_cap=None)
    assert list(wave["example_id"]) != list(independent["example_id"])   # the model changes the wave
    _assert_full_greedy(wave, state, rest)


def test_shared_model_option_refused_where_it_cannot_apply(judgments, pool):
    """model= is checked in one line: an unknown model, model="shared" with target b1_joint
    (whose criterion reads the independent curve), on a study with neither judgments nor a
    reference (the b1_joint fallback), or with 7-parameter fits=."""
    from satcal.analysis.adaptive import _fit_all
    bare = _answers(pool.iloc[:300].reset_index(drop=True), seed=4)
    rest = pool.iloc[300:].reset_index(drop=True)
    study = StudyData(bare.examples, k=4, n_levels=4, judgments=judgments)
    _, _, fits = _fit_all(study, [formulation(f) for f in FORMS])
    for call, said in ((dict(study=study, model="mixed"), "model must be one of independent, shared"),
                       (dict(study=study, model="shared", target="b1_joint"), "model='shared' needs target 'b1_std'"),
                       (dict(study=bare, model="shared"), "model='shared' needs b1_std's reference"),
                       (dict(study=study, model="shared", fits=fits), "fits= must be shared joint fits")):
        study_ = call.pop("study")
        with pytest.raises(SatcalError) as refused:
            plan_wave(rest, study_, FORMS, 10, seed=1, min_depth=0, **call)
        assert str(refused.value).startswith(said) and "\n" not in str(refused.value), str(refused.value)
