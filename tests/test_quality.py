import sys

import numpy as np
import pandas as pd
import pytest

from satcal.errors import SatcalError
from satcal.quality import dawid_skene, worker_table


def test_trust_from_traps_and_platform():
    a = pd.DataFrame({
        "worker_id": ["a"] * 5 + ["b"] * 3 + ["c"] * 2,
        "is_trap": [True, True, True, True, False, True, True, False, False, False],
        "correct": [True, True, True, False, "", False, False, "", "", ""],
        "trust": [np.nan] * 8 + [0.95, 0.95],
    })
    w = worker_table(a, threshold=0.7, min_traps=1).set_index("worker_id")
    assert w.loc["a", "trust"] == 0.75 and not w.loc["a", "excluded"] and w.loc["a", "trust_source"] == "traps"
    assert w.loc["b", "trust"] == 0.0 and w.loc["b", "excluded"] and "likelier at chance than at 0.70" in w.loc["b", "reason"]
    assert w.loc["c", "trust"] == 0.95 and w.loc["c", "trust_source"] == "platform"
    assert w.loc["a", "examples_answered"] == 1 and w.loc["a", "traps_seen"] == 4


def _trap_answers(worker, n, correct, expected="a_better"):
    return pd.DataFrame({"worker_id": worker, "is_trap": True, "correct": [True] * correct + [False] * (n - correct),
                         "expected": expected})


def test_exclusion_weighs_the_evidence_of_few_traps_by_hand():
    """Threshold 0.7. One slip in 3 single-answer traps: log LR = 2 log(0.25/0.7) + log(0.75/0.3)
    = -1.14 and binomial P(X <= 2 | 3, 0.7) = 0.657: kept (the raw share 0.67 excluded it). Two
    slips: LR = exp(log(0.25/0.7) + 2 log(0.75/0.3)) = 2.23: excluded. Traps accepting two codes
    (chance 1/2) count less. 15 of 30: log LR = 15 (log(0.25/0.7) + log(0.75/0.3)) = -1.70, not at
    chance, but P(X <= 15 | 30, 0.7) = 0.0169 < 0.05: excluded as below the threshold."""
    from scipy.stats import binom
    a = pd.concat([_trap_answers("slip", 3, 2), _trap_answers("two", 3, 1),
                   _trap_answers("wide", 3, 1, "a_better;both_bad"), _trap_answers("half", 30, 15)])
    w = worker_table(a, threshold=0.7, min_traps=3).set_index("worker_id")
    lo, hi = np.log(0.25 / 0.7), np.log(0.75 / 0.3)
    assert w.loc["slip", "chance_evidence"] == pytest.approx(2 * lo + hi) and not w.loc["slip", "excluded"]
    assert w.loc["slip", "binomial_p"] == pytest.approx(1 - 0.7 ** 3)
    assert w.loc["two", "excluded"] and np.exp(w.loc["two", "chance_evidence"]) == pytest.approx(np.exp(lo + 2 * hi))
    assert "likelihood ratio 2.2" in w.loc["two", "reason"]
    wide = np.log(0.5 / 0.7) + 2 * np.log(0.5 / 0.3)
    assert w.loc["wide", "chance_evidence"] == pytest.approx(wide) and w.loc["wide", "excluded"] == (wide > 0)
    assert w.loc["half", "chance_evidence"] == pytest.approx(15 * (lo + hi)) and 15 * (lo + hi) < 0
    assert w.loc["half", "binomial_p"] == pytest.approx(binom.cdf(15, 30, 0.7)) and w.loc["half", "excluded"]
    assert "binomial p = 0.017" in w.loc["half", "reason"]


def test_min_traps_before_trap_trust_counts():
    a = pd.DataFrame({"worker_id": ["a", "a", "b"], "is_trap": [True, False, False], "correct": [False, "", ""]})
    w = worker_table(a, threshold=0.7, min_traps=3).set_index("worker_id")
    assert w.loc["a", "trust_source"] == "none" and not w.loc["a", "excluded"]
    assert w.loc["a", "reason"] == "1 trap seen, fewer than min_traps = 3: trust unknown, kept"
    assert w.loc["b", "reason"] == "no traps seen: trust unknown, kept"


def test_dawid_skene_is_an_optional_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "crowdkit", None)
    monkeypatch.setitem(sys.modules, "crowdkit.aggregation", None)
    with pytest.raises(SatcalError, match=r"pip install 'satcal\[crowd\]'"):
        dawid_skene(pd.DataFrame({"example_id": ["e"], "worker_id": ["w"], "answer": ["a_better"]}))


def test_cli_dawid_skene_without_crowdkit_writes_nothing(monkeypatch, tmp_path):
    from click.testing import CliRunner
    from satcal.cli import main
    from satcal.workspace import Workspace
    (tmp_path / "q.txt").write_text("q1 0 d1 0\nq1 0 d2 1\nq1 0 d3 2\n")
    ws = Workspace.init(tmp_path / "s", tmp_path / "q.txt", k=2, min_per_cell=1)
    monkeypatch.setitem(sys.modules, "crowdkit", None)
    monkeypatch.setitem(sys.modules, "crowdkit.aggregation", None)
    (tmp_path / "r.csv").write_text("item_id,worker_id,answer\nx,w,a_better\n")
    res = CliRunner().invoke(main, ["ingest", str(ws.path), str(tmp_path / "r.csv"), "--dawid-skene"])
    assert res.exit_code == 2 and "pip install 'satcal[crowd]'" in res.output
    assert not (ws.path / "answers.csv").exists() and not (ws.path / "raw").exists()


def test_krippendorff_alpha_matches_the_published_example():
    """Krippendorff (2011), 'Computing Krippendorff's alpha-reliability', the nominal example
    with 4 coders and 12 units (missing values blank): alpha = 0.743."""
    from satcal.quality import agreement
    coders = ["1 2 3 3 2 1 4 1 2 . . .", "1 2 3 3 2 2 4 1 2 5 . 3",
              ". 3 3 3 2 3 4 2 2 5 1 .", "1 2 3 3 2 4 4 1 2 5 1 ."]
    codes = {"1": "a_better", "2": "b_better", "3": "both_good", "4": "both_bad", "5": "fifth"}
    rows = [(f"u{u}", codes[v]) for line in coders for u, v in enumerate(line.split()) if v != "."]
    answers = pd.DataFrame(rows, columns=["example_id", "answer"])
    # the example has five values; satcal's four codes plus one: count it by hand as well
    import krippendorff
    counts = pd.crosstab(answers["example_id"], answers["answer"])
    counts = counts[counts.sum(axis=1) >= 2].to_numpy(float)
    assert round(float(krippendorff.alpha(value_counts=counts, level_of_measurement="nominal")), 3) == 0.743
    four = answers[answers["answer"] != "fifth"]
    result = agreement(four)
    by_hand = _nominal_alpha(four)
    assert result.alpha == pytest.approx(by_hand, abs=1e-12)


def _nominal_alpha(answers):
    """Nominal alpha from the coincidence matrix (Krippendorff 2011, section C)."""
    values = sorted(answers["answer"].unique())
    o = np.zeros((len(values), len(values)))
    for _, g in answers.groupby("example_id"):
        m = len(g)
        if m < 2:
            continue
        idx = [values.index(v) for v in g["answer"]]
        for i in range(m):
            for j in range(m):
                if i != j:
                    o[idx[i], idx[j]] += 1 / (m - 1)
    n_c = o.sum(axis=1)
    n = n_c.sum()
    d_o = (o.sum() - np.trace(o)) / n
    d_e = (n * n - (n_c ** 2).sum()) / (n * (n - 1))
    return 1 - d_o / d_e


def test_agreement_counts_pairs_and_needs_repeated_examples():
    from satcal.quality import agreement
    answers = pd.DataFrame({"example_id": ["e1", "e1", "e1", "e2", "e2", "e3"],
                            "answer": ["a_better", "a_better", "b_better", "both_bad", "both_bad", "both_good"]})
    result = agreement(answers)
    # e1: 3 answers, 2 of 6 ordered pairs agree; e2: 2 of 2; e3 has one answer and is left out
    assert result.examples == 2 and result.observed == pytest.approx(4 / 8)
    assert agreement(answers[answers["example_id"] == "e3"]) is None


def test_screening_flags_fast_and_same_side_workers():
    from satcal.quality import screening
    rows = []
    for i in range(12):  # w1: 12 items on 3 pages of 4, 20 s a page = 5 s an item; varied sides
        rows.append(("w1", ["a_better", "b_better", "both_good"][i % 3], 20.0, f"t{i // 4}"))
    for i in range(12):  # w2: 1 s an item, always the side shown first
        rows.append(("w2", "a_better", 4.0, f"t{i // 4}"))
    a = pd.DataFrame(rows, columns=["worker_id", "answer_shown", "seconds", "submitted_at"])
    s = screening(a)
    assert s.loc["w1", "seconds_per_answer"] == pytest.approx(60 / 12)
    assert s.loc["w2", "seconds_per_answer"] == pytest.approx(12 / 12)
    assert list(s["too_fast"]) == [False, True] and list(s["same_side"]) == [False, True]
    assert s.loc["w1", "same_side_share"] == pytest.approx(4 / 12)


def test_cli_dawid_skene_says_when_the_design_cannot_support_it(monkeypatch, exported_workspace, tmp_path, copy_workspace):
    """With one answer per example there is nothing for Dawid-Skene to estimate: a clear
    message, not a table nobody can use (crowd-kit itself stands in as installed)."""
    from click.testing import CliRunner
    from satcal import quality
    from satcal.cli import main
    ws = copy_workspace(exported_workspace("appen", 10), tmp_path)
    results, _ = ws.simulate("appen")
    monkeypatch.setattr(quality, "require_crowdkit", lambda: object)
    res = CliRunner().invoke(main, ["ingest", str(ws.path), str(results), "--dawid-skene"])
    assert res.exit_code == 2 and "answers_per_example to 2 or more" in res.output
    assert not (ws.path / "workers_ds.csv").exists()


def test_screening_thresholds_come_from_the_caller():
    from satcal.quality import screening
    a = pd.DataFrame({"worker_id": ["w"] * 12, "answer_shown": ["a_better"] * 8 + ["b_better"] * 4,
                      "seconds": [30.0] * 12, "submitted_at": [f"t{i // 4}" for i in range(12)]})
    # 7.5 s an item, 8 of 12 on the first side shown
    assert not screening(a)["too_fast"].iloc[0] and screening(a, seconds=10)["too_fast"].iloc[0]
    assert not screening(a)["same_side"].iloc[0] and screening(a, same_side=0.6)["same_side"].iloc[0]


def test_the_worker_table_has_the_same_columns_with_or_without_answers_and_times():
    """An empty study's workers table (no answers), an untimed one and one timed against the
    reading load have the same columns, in the same order: the timed one's, relative_speed
    included (NaN where it is not computed)."""
    from satcal.quality import empty_worker_table, worker_table
    rows = [(f"w{i}", j % 3 == 0, j % 2 == 0, 20.0 + i, 5.0, f"t{j // 4}") for i in range(6) for j in range(8)]
    timed = pd.DataFrame(rows, columns=["worker_id", "is_trap", "correct", "seconds", "reading_seconds",
                                        "submitted_at"])
    full = worker_table(timed)
    assert full["relative_speed"].notna().all()   # six timed workers: a typical pace to compare with
    untimed = worker_table(timed.drop(columns=["seconds", "reading_seconds", "submitted_at"]))
    empty = empty_worker_table()
    assert len(empty) == 0
    assert list(empty.columns) == list(untimed.columns) == list(full.columns)
    assert untimed["relative_speed"].isna().all() and untimed["reading_floor_per_answer"].isna().all()


def test_too_fast_is_calibrated_to_the_reading_load_of_the_items():
    """Paces are read against each worker's reading load: five workers on heavy items (22 s to
    decide and skim) at 10-14 s an item, five on light items (3 s) at 2.5-3.5 s, and one on
    heavy items at 5 s. Everyone is under the skimming floor, as honest people often are, so
    the floor alone would flag all of them; the relative speed index (median pace / own pace,
    by hand) flags only the one at twice the typical pace."""
    from satcal.quality import SCREEN_RELATIVE_SPEED, screening
    per_item = {"h1": (10, 20), "h2": (11, 20), "h3": (12, 20), "h4": (13, 20), "h5": (14, 20),
                "l1": (2.5, 1), "l2": (2.75, 1), "l3": (3.0, 1), "l4": (3.25, 1), "l5": (3.5, 1),
                "rusher": (5.0, 20)}
    rows = [(w, 4 * sec, read, f"t{i // 4}") for w, (sec, read) in per_item.items() for i in range(8)]
    a = pd.DataFrame(rows, columns=["worker_id", "seconds", "reading_seconds", "submitted_at"])
    s = screening(a)
    floor = {w: 2.0 + read for w, (_, read) in per_item.items()}
    pace = {w: sec / floor[w] for w, (sec, _) in per_item.items()}
    median = float(np.median(list(pace.values())))
    for w in per_item:
        assert s.loc[w, "reading_floor_per_answer"] == pytest.approx(floor[w])
        assert s.loc[w, "relative_speed"] == pytest.approx(median / pace[w])
    assert median / pace["rusher"] >= SCREEN_RELATIVE_SPEED
    assert list(s.index[s["too_fast"]]) == ["rusher"]
    # a worker whose pages took 0 s is infinitely fast, flagged even with no fixed floor
    zero = pd.concat([a, a[a["worker_id"] == "h1"].assign(worker_id="zero", seconds=0.0)])
    z = screening(zero, seconds=0)
    assert z.loc["zero", "relative_speed"] == np.inf and z.loc["zero", "too_fast"]
    # too few timed workers for a typical pace: only the fixed seconds an item apply
    few = screening(a[a["worker_id"].isin(["h1", "l1", "rusher"])])
    assert few["relative_speed"].isna().all() and not few["too_fast"].any()
    # an item without a known reading load falls back to the fixed seconds an item
    b = a.assign(reading_seconds=np.nan)
    assert not screening(b)["too_fast"].any() and screening(b, seconds=6)["too_fast"].sum() == 6


def test_reading_seconds_counts_the_words_an_item_shows():
    from satcal.quality import SKIM_WORDS_PER_MINUTE, reading_seconds
    items = pd.DataFrame([{"item_id": "x1", "page": 1, "query": "q1", "A1": "d1", "A1_title": "two words",
                           "A1_snippet": "three more words", "B1": "d2", "B1_title": "", "B1_snippet": ""}])
    # query 1 + A1 title 2 + A1 snippet 3 + B1 (no title: its id is shown) 1 = 7 words
    assert reading_seconds(items, 1)["x1"] == pytest.approx(7 * 60 / SKIM_WORDS_PER_MINUTE)


def test_failed_attention_checks_exclude_at_the_limit_and_are_kept_when_asked():
    from satcal.quality import attention_failures, exclude_failed_attention
    rows = pd.DataFrame({"worker_id": ["w1", "w1", "w2", "w2", "w3", "w3"],
                         "attention_passed": ["no", "no", "no", "yes", "", ""]})
    failures = attention_failures(rows)
    assert failures.to_dict() == {"w1": 2, "w2": 1}
    workers = pd.DataFrame({"worker_id": ["w1", "w2", "w3"], "excluded": [False, False, True],
                            "reason": ["", "", "trust 0.20 < 0.70 (traps)"]})
    out = exclude_failed_attention(workers, failures, 2).set_index("worker_id")
    assert list(out["excluded"]) == [True, False, True]
    assert out.loc["w1", "reason"] == "failed 2 attention checks (limit 2)"
    assert out.loc["w3", "reason"].startswith("trust")  # the first reason stays
    assert list(exclude_failed_attention(workers, failures, 1)["excluded"]) == [True, True, True]
    kept = exclude_failed_attention(workers, failures, None).set_index("worker_id")
    assert list(kept["excluded"]) == [False, False, True] and list(kept["attention_failed"]) == [2, 1, 0]


def test_straight_lining_is_an_exact_binomial_test_against_the_other_workers():
    """'line' answers both_bad (as shown) 20 times of 20; the other workers give both_bad 58 of
    their 158 answers, so its p-value is 4 P(Bin(20, 58/158) >= 20), scipy's exact binomial test
    times the four codes. 'lenient' gives both_good 27 of 30 (90%), far above the others' rate:
    excluded too. 'mild' answers
    both_bad 26 of 30 (87%, under the 90% share): kept, whatever its p-value. A worker with 8
    answers all one code is under the 10 answers needed."""
    from scipy.stats import binomtest
    from satcal.quality import straight_lining

    def worker(w, counts):
        return pd.DataFrame({"worker_id": w, "answer_shown": [c for c, n in counts.items() for _ in range(n)]})
    a = pd.concat([worker("line", {"both_bad": 20}),
                   worker("o1", {"both_bad": 8, "a_better": 11, "b_better": 8, "both_good": 3}),
                   worker("o2", {"both_bad": 9, "a_better": 9, "b_better": 9, "both_good": 3}),
                   worker("o3", {"both_bad": 10, "a_better": 10, "b_better": 10}),
                   worker("lenient", {"both_good": 27, "a_better": 3}),
                   worker("mild", {"both_bad": 26, "a_better": 4}),
                   worker("short", {"both_bad": 8})], ignore_index=True)
    s = straight_lining(a).loc[["line", "lenient", "mild", "short"]]
    # the other workers' answers, counted here: everything but the worker's own
    def crowd(w, code):
        others = a[a["worker_id"] != w]
        return (others["answer_shown"] == code).mean()
    for w, code, x, n in (("line", "both_bad", 20, 20), ("lenient", "both_good", 27, 30), ("mild", "both_bad", 26, 30)):
        p0 = crowd(w, code)
        assert s.loc[w, "top_answer"] == code and s.loc[w, "crowd_share"] == pytest.approx(p0)
        assert s.loc[w, "straight_lining_p"] == pytest.approx(min(1, 4 * binomtest(x, n, p0, alternative="greater").pvalue))
    assert s.loc["line", "crowd_share"] == pytest.approx((8 + 9 + 10 + 26 + 8) / (5 * 30 + 8))  # hand count
    assert s["straight_lining"].to_dict() == {"line": True, "lenient": True, "mild": False, "short": False}
    assert s.loc["mild", "straight_lining_p"] < 0.001  # significant, but not one code often enough
    # in worker_table: excluded with the reason, even though every trap it met accepted both_bad
    traps = a.assign(is_trap=a["worker_id"] == "line", correct=a["worker_id"] == "line", expected="a_better;both_bad")
    w = worker_table(traps, threshold=0.7, min_traps=3).set_index("worker_id")
    assert w.loc["line", "trust"] == 1.0 and w.loc["line", "excluded"]
    assert w.loc["line", "reason"].startswith("straight-lining: answered both_bad in 100% of 20 answers")
    assert not w.loc["o1", "excluded"] and not w.loc["mild", "excluded"]
    assert not worker_table(traps, 0.7, 3, straight_alpha=0).set_index("worker_id").loc["line", "excluded"]
    # the others gave 8 answers, under the 10 a rate needs: no test (with them, 'line' has p = 0)
    pair = pd.concat([worker("line", {"both_bad": 20}), worker("o", {"a_better": 8})], ignore_index=True)
    alone = straight_lining(pair).loc["line"]
    assert np.isnan(alone["straight_lining_p"]) and not alone["straight_lining"]


def test_a_strict_honest_worker_on_both_bad_traps_is_not_a_straight_liner():
    """69 traps, every one accepting "a_better;both_bad" (level 3 rare: no list is all top
    level), worked by hand. Ten crowd workers answer both_bad to 41 and A (right) to 28; 'strict'
    answers both_bad to 58 (84%) and A to 11, every trap right; 'line' answers both_bad to all
    69. 'strict' is far above the crowd's rate (binomial p < 0.001 even times the four codes: the
    old 80% share excluded them) but does not give one answer whatever the item: kept. 'line' is
    excluded for straight-lining though every trap is right."""
    from scipy.stats import binomtest
    from satcal.quality import STRAIGHT_ALPHA, STRAIGHT_SHARE

    def worker(w, bad, good):
        return pd.DataFrame({"worker_id": w, "answer_shown": ["both_bad"] * bad + ["a_better"] * good,
                             "example_id": [f"t{i}" for i in range(bad + good)]})
    a = pd.concat([worker(f"c{i}", 41, 28) for i in range(10)] + [worker("strict", 58, 11), worker("line", 69, 0)],
                  ignore_index=True)
    a = a.assign(is_trap=True, correct=True, expected="a_better;both_bad", answer=a["answer_shown"])
    w = worker_table(a, threshold=0.7, min_traps=5, consistency_alpha=0, crowd_alpha=0).set_index("worker_id")
    # the others' both_bad rate, by hand: strict's others are 10 x 41 + 69 of 11 x 69 answers
    p_strict = (10 * 41 + 69) / (11 * 69)
    p_line = (10 * 41 + 58) / (11 * 69)
    assert w.loc["strict", "crowd_share"] == pytest.approx(p_strict)
    assert w.loc["line", "crowd_share"] == pytest.approx(p_line)
    p = min(1.0, 4 * binomtest(58, 69, p_strict, alternative="greater").pvalue)
    assert w.loc["strict", "straight_lining_p"] == pytest.approx(p) and p < STRAIGHT_ALPHA
    assert w.loc["strict", "trust"] == 1.0 and not w.loc["strict", "excluded"] and w.loc["strict", "reason"] == ""
    assert 0.8 <= 58 / 69 < STRAIGHT_SHARE == 0.9
    q = min(1.0, 4 * p_line ** 69)  # P(Bin(69, p) >= 69) = p^69
    assert w.loc["line", "straight_lining_p"] == pytest.approx(q)
    assert w.loc["line", "trust"] == 1.0 and w.loc["line", "excluded"]
    assert w.loc["line", "reason"] == (f"straight-lining: answered both_bad in 100% of 69 answers, the other workers "
                                       f"{p_line:.0%} (binomial p = {q:.2g}, x4 codes, < 0.001)")
    assert not w.loc[[f"c{i}" for i in range(10)], "excluded"].any()


def test_dominance_rank_by_rank_by_the_levels_order():
    """Hand-worked pairs (k = 3): A dominates where every rank is at least B's and one is
    higher; the levels' order decides (-2 < 0), not a gain; equal lists, crossing lists and a
    rank empty in one list only are incomparable; a rank empty in both compares equal."""
    from satcal.quality import dominance, trap_dominance
    nan = np.nan
    ra = [[2, 1, 0], [0, 0, 0], [0, 0, -2], [1, 1, 1], [2, 0, 1], [2, 1, nan], [2, 1, nan], [-2, -2, -2]]
    rb = [[1, 1, 0], [1, 0, 0], [0, 0, 0], [1, 1, 1], [1, 1, 0], [1, 0, nan], [1, 0, 0], [-2, -2, -1]]
    assert dominance(ra, rb).tolist() == [1, -1, -1, 0, 0, 1, 0, -1]
    assert dominance(rb, ra).tolist() == [-1, 1, 1, 0, 0, -1, 0, 1]  # antisymmetric
    # traps: the list the expected answers name better, alone or with "both bad"
    assert trap_dominance(["a_better", "b_better;both_bad", "both_bad", "both_good", "a_better;b_better", "",
                           "a_better;both_bad"]).tolist() == [1, -1, 0, 0, 0, 0, 1]


def _mixture_fit_by_scipy(y, n):
    """The honest/guesser mixture's maximum likelihood, written independently: scipy.stats'
    betabinom and binom log pmfs, Nelder-Mead from a grid of starts on the natural parameters
    (mu, rho, pi), with the Beta(2, 2) prior on mu."""
    from scipy.optimize import minimize
    from scipy.stats import betabinom, binom

    def nll(t):
        mu, rho, pi = t
        if not (0 < mu <= 0.5 and 0 <= rho <= 0.5 and 0 < pi <= 0.5):
            return np.inf
        # below 1e-6 scipy's betabinom is noisier (1e-6 a point) than its distance to the binomial
        s = (1 - rho) / max(rho, 1e-6)
        honest = binom.logpmf(y, n, mu) if rho < 1e-6 else betabinom.logpmf(y, n, mu * s, (1 - mu) * s)
        ll = np.logaddexp(np.log1p(-pi) + honest, np.log(pi) + binom.logpmf(y, n, 0.5))
        return -(ll.sum() + np.log(mu) + np.log1p(-mu))
    fits = [minimize(nll, [m, r, p], method="Nelder-Mead", options={"xatol": 1e-9, "fatol": 1e-12, "maxiter": 20000})
            for m in (0.05, 0.2) for r in (0.0, 0.1, 0.3) for p in (0.01, 0.1, 0.3)]
    return min(fits, key=lambda f: f.fun)


def test_judgment_consistency_tests_against_a_beta_binomial_of_the_honest_workers():
    """On pairs with a dominant list (``dominant`` +1 A, -1 B), each worker's decisive answers
    and those naming the dominated list are counted ('both bad' answers and pairs without a
    dominant list are not decisive). The null's mean and spread are the maximum likelihood
    of the honest/guesser mixture (checked against scipy.stats' betabinom and binom by
    Nelder-Mead), and each p is scipy's betabinom.sf; the guesser (12 of 20 on the dominated
    list) is excluded, the spread-out honest workers are not."""
    from scipy.stats import betabinom
    from satcal.quality import honest_dispersion, judgment_consistency

    def worker(w, right, wrong, undecided=0, free=0):
        # right: the dominant list named (half on A-dominant pairs, half on B-dominant ones)
        rows = ([("a_better", 1), ("b_better", -1)] * right)[:right] + ([("b_better", 1), ("a_better", -1)] * wrong)[:wrong]
        rows += [("both_bad", 1)] * undecided + [("a_better", 0)] * free
        return pd.DataFrame({"worker_id": w, "answer": [r[0] for r in rows], "dominant": [r[1] for r in rows]})
    # honest workers whose rates differ (0 to 6 of 16-20 on the dominated list), and a guesser
    y_h = [1, 2, 0, 1, 4, 1, 0, 2, 1, 5, 1, 0, 3, 0, 6]
    n_h = [18, 17, 16, 19, 18, 20, 16, 18, 17, 19, 18, 16, 20, 17, 20]
    honest = {f"h{i:02d}": (nn - yy, yy) for i, (yy, nn) in enumerate(zip(y_h, n_h))}
    a = pd.concat([worker(w, r, x, undecided=3, free=2) for w, (r, x) in honest.items()]
                  + [worker("guess", 8, 12, undecided=4, free=6)], ignore_index=True)
    c = judgment_consistency(a, alpha=0.01)
    counts = {**honest, "guess": (8, 12)}
    y = np.array([counts[w][1] for w in c.index])
    n = np.array([sum(counts[w]) for w in c.index])
    assert c["dominance_decisive"].tolist() == n.tolist() and c["dominated_preferred"].tolist() == y.tolist()
    fit = _mixture_fit_by_scipy(y, n)
    mu, rho, pi = honest_dispersion(y, n)
    assert [mu, rho, pi] == pytest.approx(fit.x, rel=1e-3, abs=1e-5)
    assert rho > 0.01  # the honest counts spread more than one binomial rate allows
    s = (1 - rho) / rho
    assert c["consistency_p"].to_numpy() == pytest.approx(betabinom.sf(y - 1, n, mu * s, (1 - mu) * s), rel=1e-9)
    assert (c["dominated_crowd_share"] == mu).all() and (c["dominated_dispersion"] == rho).all()
    assert c["inconsistent"].to_dict() == {**{w: False for w in honest}, "guess": True}
    # a reference crowd: the fit reads its workers only (here the guesser left out)
    ref = pd.Series(True, index=c.index)
    ref["guess"] = False
    out = judgment_consistency(a, 0.01, reference=ref)
    assert out["dominated_crowd_share"].iloc[0] == pytest.approx(honest_dispersion(y[ref.to_numpy()], n[ref.to_numpy()])[0])
    # in worker_table (no traps: trust unknown, kept by the traps): excluded with the reason
    w = worker_table(a.assign(is_trap=False, correct=""), 0.7, 3).set_index("worker_id")
    assert w.loc["guess", "excluded"] and not w.loc[list(honest), "excluded"].any()
    assert w.loc["guess", "reason"].startswith("prefers the dominated list: in 12 of 20 decisive answers")
    assert not worker_table(a.assign(is_trap=False, correct=""), 0.7, 3, consistency_alpha=0)["excluded"].any()
    # without the columns nobody is tested
    assert not judgment_consistency(a[["worker_id", "answer"]])["inconsistent"].any()


def test_consistency_fit_is_a_maximum_when_the_spread_is_small_but_not_zero():
    """A reference crowd (a simulated study's at 47 traps) whose honest spread is small but
    not 0: the fit's (mu, rho, pi) satisfies the maximum's first-order conditions on a log
    likelihood written with scipy.stats (betabinom and binom pmfs, central differences): the
    derivatives in mu and rho vanish, the one in pi points out of the box at pi = 0, and the
    likelihood is higher than at the best rho = 0 (a fit that switched to the binomial below a
    small rho stopped there, 0.11 short, and its p-values were too small, 2-50 times at 5-10 of 20). Each p is
    scipy's betabinom.sf at the fit; at rho = 0 the tail is the exact binomial's."""
    from scipy.optimize import minimize_scalar
    from scipy.stats import betabinom, binom
    from satcal.quality import _betabinom_tail, honest_dispersion, judgment_consistency
    y = np.array([1, 3, 0, 1, 0, 1, 1, 0, 1, 0, 0, 0, 0, 1, 2, 0, 0, 2, 0, 0, 1, 1, 1, 0, 1, 0, 1, 0, 4, 0, 0, 1, 0,
                  2, 0, 0, 0, 0, 1, 1, 1, 0, 1, 0, 1, 1, 0, 0, 1, 1, 0])
    n = np.array([25, 27, 25, 24, 24, 20, 18, 20, 25, 24, 24, 11, 18, 24, 22, 22, 21, 20, 21, 10, 20, 17, 10, 28, 20,
                  21, 21, 21, 25, 26, 18, 23, 18, 22, 22, 21, 26, 20, 26, 19, 23, 24, 21, 23, 18, 17, 27, 21, 19, 18, 25])

    def loglik(mu, rho, pi):
        s = (1 - rho) / max(rho, 1e-300)
        honest = binom.logpmf(y, n, mu) if rho == 0 else betabinom.logpmf(y, n, mu * s, (1 - mu) * s)
        with np.errstate(divide="ignore"):
            ll = np.logaddexp(np.log1p(-pi) + honest, np.log(pi) + binom.logpmf(y, n, 0.5))
        return ll.sum() + np.log(mu) + np.log1p(-mu)
    mu, rho, pi = honest_dispersion(y, n)
    assert rho > 1e-3 and pi == 0.0
    h = 1e-5
    d_mu = (loglik(mu + h, rho, pi) - loglik(mu - h, rho, pi)) / (2 * h)
    d_rho = (loglik(mu, rho + h, pi) - loglik(mu, rho - h, pi)) / (2 * h)
    d_pi = (loglik(mu, rho, pi + h) - loglik(mu, rho, pi)) / h
    assert abs(d_mu) < 1e-2 and abs(d_rho) < 1e-2 and d_pi < 0
    at_zero = minimize_scalar(lambda m: -loglik(m, 0.0, 0.0), bounds=(1e-4, 0.5), method="bounded",
                              options={"xatol": 1e-10})
    assert loglik(mu, rho, pi) > -at_zero.fun + 0.1
    # the p-values: the same tail as scipy's at the fit, the binomial's at rho = 0
    answers = pd.DataFrame([(f"w{i}", "b_better", 1) for i, yy in enumerate(y) for _ in range(yy)]
                           + [(f"w{i}", "a_better", 1) for i, (yy, nn) in enumerate(zip(y, n)) for _ in range(nn - yy)],
                           columns=["worker_id", "answer", "dominant"])
    c = judgment_consistency(answers, 0.01).loc[[f"w{i}" for i in range(len(y))]]
    s = (1 - rho) / rho
    assert c["consistency_p"].to_numpy() == pytest.approx(betabinom.sf(y - 1, n, mu * s, (1 - mu) * s), rel=1e-9)
    assert _betabinom_tail(y, n, mu, 0.0) == pytest.approx(binom.sf(y - 1, n, mu), rel=1e-9)


def test_judgment_consistency_one_binomial_rate_when_no_spread():
    """Honest counts that vary no more than one binomial rate: the fit's spread is ~0 and the p
    is (to 1%) the exact binomial test against the fitted rate (scipy's binomtest); with one decisive
    answer each there is no spread to measure and the rate is the smoothed (Y + 1) / (N + 2)."""
    from scipy.stats import binomtest
    from satcal.quality import honest_dispersion, judgment_consistency
    y, n = np.array([1, 1, 1, 1, 1, 1, 1, 1, 6]), np.array([10] * 8 + [12])
    mu, rho, pi = honest_dispersion(y, n)
    assert rho < 1e-3
    rows = []
    for i, (yy, nn) in enumerate(zip(y, n)):
        rows += [(f"w{i}", "b_better", 1)] * yy + [(f"w{i}", "a_better", 1)] * (nn - yy)
    c = judgment_consistency(pd.DataFrame(rows, columns=["worker_id", "answer", "dominant"]), 0.01)
    assert c["consistency_p"].to_numpy() == pytest.approx(
        [binomtest(int(a), int(b), mu, alternative="greater").pvalue for a, b in zip(y, n)], rel=1e-2)
    assert c["inconsistent"].tolist() == [False] * 8 + [True]
    one = honest_dispersion(np.array([0, 0, 1, 0]), np.array([1, 1, 1, 1]))
    assert one == pytest.approx(((1 + 1) / (4 + 2), 0.0, 0.0))


@pytest.mark.parametrize("rho", [0.05, 0.15])
def test_judgment_consistency_excludes_heterogeneous_honest_workers_at_about_alpha(rho):
    """From a known truth: 300 honest workers whose rates of naming the dominated list are
    drawn from a beta distribution (mean 0.08, intra-worker correlation rho: worker effects),
    4-40 decisive answers each, and 30 guessers at 1/2, in one crowd. The beta-binomial null
    excludes honest workers at about its level (1%: at most 1% + 2 standard errors over 4
    crowds), where a binomial null at the same mean excludes them 3-9 times as often; most
    guessers are caught where the honest spread is modest."""
    from scipy.stats import binom
    from satcal.quality import judgment_consistency
    honest_out, binomial_out, guessers_out, total = 0, 0, 0, 0
    for seed in range(4):
        rng = np.random.default_rng(seed)
        mu = 0.08
        q = np.r_[rng.beta(mu * (1 - rho) / rho, (1 - mu) * (1 - rho) / rho, 300), np.full(30, 0.5)]
        n = rng.integers(4, 41, len(q))
        y = rng.binomial(n, q)
        ids = np.array([f"h{i:03d}" for i in range(300)] + [f"g{i:02d}" for i in range(30)])
        worker = np.repeat(ids, n)
        wrong = np.concatenate([np.arange(k) < j for k, j in zip(n, y)])
        dom = np.where(np.arange(len(worker)) % 2, 1, -1)
        a = pd.DataFrame({"worker_id": worker, "answer": np.where(wrong == (dom == 1), "b_better", "a_better"),
                          "dominant": dom})
        c = judgment_consistency(a, 0.01).reindex(ids)
        h = c.index.str.startswith("h")
        honest_out += int(c.loc[h, "inconsistent"].sum())
        guessers_out += int(c.loc[~h, "inconsistent"].sum())
        binomial_out += int((binom.sf(y[h] - 1, n[h], c.loc[h, "dominated_crowd_share"]) < 0.01).sum())
        total += int(h.sum())
    assert honest_out / total <= 0.01 + 2 * np.sqrt(0.01 * 0.99 / total)
    assert binomial_out > 3 * max(honest_out, 1)
    if rho == 0.05:
        assert guessers_out / 120 > 0.6


def test_crowd_likelihood_by_hand_against_scipy_multinomial():
    """Three items; 'g' answers against the crowd on each. For each of w's answers the crowd is
    the other reference workers' answers to that item, one pseudo-answer a code: p = (n_c + 1) /
    (N + 4), the probability scipy's multinomial (one draw) gives the answer; the evidence is
    sum log(1/4) - log p. An item only w answered counts 0."""
    from scipy.stats import multinomial
    from satcal.quality import ANSWER_CODES, crowd_likelihood
    honest = [pd.DataFrame([("i1", "a_better"), ("i2", "both_bad"), ("i3", "b_better")],
                           columns=["example_id", "answer"]).assign(worker_id=f"h{j}") for j in range(5)]
    honest[4].loc[1, "answer"] = "both_good"  # one honest disagreement
    guess = pd.DataFrame([("i1", "b_better"), ("i2", "both_good"), ("i3", "a_better"), ("i4", "a_better")],
                         columns=["example_id", "answer"]).assign(worker_id="g")
    a = pd.concat(honest + [guess], ignore_index=True)
    out = crowd_likelihood(a, alpha=0.01)

    def by_hand(w, ref):
        total, n = 0.0, 0
        for row in a[a["worker_id"] == w].itertuples():
            others = a[(a["example_id"] == row.example_id) & (a["worker_id"] != w) & a["worker_id"].isin(ref)]
            counts = np.array([(others["answer"] == c).sum() for c in ANSWER_CODES]) + 1
            x = np.array([c == row.answer for c in ANSWER_CODES], dtype=int)
            total += np.log(0.25) - multinomial.logpmf(x, 1, counts / counts.sum())
            n += len(others) > 0
        return total, n
    everyone = set(a["worker_id"])
    for w in everyone:
        e, n = by_hand(w, everyone)
        assert out.loc[w, "random_evidence"] == pytest.approx(e) and out.loc[w, "crowd_answers"] == n
    # g: p = 1/9 on i1 and i3 (no other worker's answer + 1 over 5 + 4), 2/9 on i2 (h4's), i4 nobody else
    assert out.loc["g", "random_evidence"] == pytest.approx(2 * np.log(9 / 4) + np.log(9 / 8))
    assert out["random_like"].to_dict() == {**{f"h{j}": False for j in range(5)}, "g": False}  # 1.74 < log 100
    assert crowd_likelihood(a, alpha=0.2)["random_like"]["g"]  # 1.74 >= log 5
    # a reference crowd: g's answers leave the honest workers' crowd
    ref = pd.Series({**{f"h{j}": True for j in range(5)}, "g": False})
    out = crowd_likelihood(a, 0.01, reference=ref)
    for w in everyone:
        assert out.loc[w, "random_evidence"] == pytest.approx(by_hand(w, {f"h{j}" for j in range(5)})[0])
    assert not crowd_likelihood(a, alpha=0)["random_like"].any()
    assert not crowd_likelihood(a[["worker_id", "answer"]])["random_like"].any()


def test_crowd_likelihood_excludes_a_crowd_like_worker_at_most_alpha_of_the_time():
    """Markov's bound: a worker answering each item from the crowd's distribution (here the
    reference crowd is large, so its smoothed shares are the truth) reaches 1/alpha at most
    alpha of the time; a guesser on 20 items the crowd agrees on is caught."""
    from satcal.quality import ANSWER_CODES, crowd_likelihood
    rng = np.random.default_rng(3)
    items, crowd_n = 20, 400
    probs = rng.dirichlet([2, 0.5, 0.5, 1], size=items)
    crowd = pd.DataFrame([(f"c{w}", f"i{j}", ANSWER_CODES[rng.choice(4, p=probs[j])])
                          for w in range(crowd_n) for j in range(items)], columns=["worker_id", "example_id", "answer"])
    testers = 400
    tested = pd.DataFrame([(f"t{w}", f"i{j}", ANSWER_CODES[rng.choice(4, p=probs[j])])
                           for w in range(testers) for j in range(items)], columns=["worker_id", "example_id", "answer"])
    guess = pd.DataFrame([(f"g{w}", f"i{j}", ANSWER_CODES[rng.integers(4)]) for w in range(50) for j in range(items)],
                         columns=["worker_id", "example_id", "answer"])
    a = pd.concat([crowd, tested, guess], ignore_index=True)
    ref = pd.Series(True, index=a["worker_id"].unique())
    ref[ref.index.str.startswith(("t", "g"))] = False
    out = crowd_likelihood(a, 0.05, reference=ref)
    share = out.loc[out.index.str.startswith("t"), "random_like"].mean()
    assert share <= 0.05 + 2 * np.sqrt(0.05 * 0.95 / testers)
    assert out.loc[out.index.str.startswith("g"), "random_like"].mean() > 0.5


def test_workers_csv_read_back_as_numbers_for_the_report(tmp_path):
    """workers.csv read as text (as a workspace reads every table) and typed again gives the
    worker table's own numbers as floats (chance_evidence NaN for a worker who met no counted
    trap, not a likelihood ratio of 1) and its flags as booleans; the report's table prints each
    number to 4 significant digits, as every float of the report (not 17 digits of text)."""
    from satcal.fileio import write_csv_safe
    from satcal.quality import WORKER_FLAG_COLUMNS, WORKER_NUMBER_COLUMNS, typed_workers
    from satcal.report import _table_html
    rng = np.random.default_rng(5)
    rows = [(w, f"t{j}", True, bool(rng.random() < 0.7), "a_better;both_bad", ["a_better", "both_bad"][j % 2])
            for w in ("w1", "w2", "w3") for j in range(7)]
    rows += [("w4", f"e{j}", False, False, "", "a_better") for j in range(3)]  # no traps
    a = pd.DataFrame(rows, columns=["worker_id", "example_id", "is_trap", "correct", "expected", "answer"])
    table = worker_table(a, 0.7, 3)
    assert np.isnan(table.set_index("worker_id").loc["w4", "chance_evidence"])
    write_csv_safe(tmp_path / "workers.csv", table)
    text = pd.read_csv(tmp_path / "workers.csv", dtype=str, keep_default_na=False)
    typed = typed_workers(text)
    for c in set(WORKER_NUMBER_COLUMNS) & set(table.columns):
        assert typed[c].dtype == float
        assert np.allclose(typed[c].to_numpy(), table[c].astype(float).to_numpy(), rtol=1e-15, equal_nan=True), c
    for c in set(WORKER_FLAG_COLUMNS) & set(table.columns):
        assert typed[c].dtype == bool and (typed[c] == table[c].astype(bool)).all(), c
    html = str(_table_html(typed))
    for v in table["chance_evidence"].dropna():
        assert f"<td>{v:.4g}</td>" in html and repr(float(v)) not in html


def test_report_worker_table_draws_nothing_where_there_is_no_data(tmp_path):
    """In the report's workers table a number a worker has none of (chance_evidence of a worker
    who met no counted trap) is blank, not 'NaN', and a column no worker has a value in
    (platform_trust, where the platform reports none) is left out; workers.csv keeps both."""
    from satcal.fileio import write_csv_safe
    from satcal.quality import typed_workers
    from satcal.report import _sparse_table_html
    rows = [(w, f"t{j}", True, j < (2 if w == "w1" else 6), "a_better", "a_better")
            for w in ("w1", "w2", "w3") for j in range(7)]
    rows += [("w4", f"e{j}", False, False, "", "a_better") for j in range(3)]  # no traps
    a = pd.DataFrame(rows, columns=["worker_id", "example_id", "is_trap", "correct", "expected", "answer"])
    table = worker_table(a, 0.7, 3)
    table["platform_trust"] = np.nan
    write_csv_safe(tmp_path / "workers.csv", table)
    typed = typed_workers(pd.read_csv(tmp_path / "workers.csv", dtype=str, keep_default_na=False))
    assert typed["platform_trust"].isna().all() and typed.set_index("worker_id")["chance_evidence"].isna().loc["w4"]
    html = str(_sparse_table_html(typed))
    assert "NaN" not in html and "platform_trust" not in html and "<th>chance_evidence</th>" in html
    # every worker is still there, the excluded one with its reason
    assert all(f"<td>{w}</td>" in html for w in ("w1", "w2", "w3", "w4"))
    assert str(table.set_index("worker_id").loc["w1", "reason"]) in html


def _random_exclusion_by_hand(rates_counts, t, alpha=0.05):
    """Independent computation: enumerate every right/wrong pattern's counts per chance rate,
    with the likelihood-ratio and binomial conditions written out from their definitions."""
    from itertools import product
    from scipy.stats import binom
    n = sum(m for _, m in rates_counts)
    total = 0.0
    for ys in product(*[range(m + 1) for _, m in rates_counts]):
        p, llr = 1.0, 0.0
        for y, (c, m) in zip(ys, rates_counts):
            p *= binom.pmf(y, m, c)
            if c < t:
                llr += y * np.log(c / t) + (m - y) * np.log((1 - c) / (1 - t))
        if llr > 0 or binom.cdf(sum(ys), n, t) < alpha:
            total += p
    return total


def test_trap_exclusion_matches_an_independent_enumeration():
    from satcal.quality import trap_exclusion
    # 8 traps at chance 1/4 and 12 at 1/2, met in those shares by a worker meeting 20 or 10
    chance = [0.25] * 8 + [0.5] * 12
    assert trap_exclusion(chance, 0.7, 20) == pytest.approx(_random_exclusion_by_hand([(0.25, 8), (0.5, 12)], 0.7))
    assert trap_exclusion(chance, 0.7, 10) == pytest.approx(_random_exclusion_by_hand([(0.25, 4), (0.5, 6)], 0.7))
    # all traps at 1/2 and n = 20: the measured "13% of random workers kept" (P(Bin(20,1/2) >= 13))
    from scipy.stats import binom
    assert 1 - trap_exclusion([0.5], 0.7, 20) == pytest.approx(binom.sf(12, 20, 0.5))


def test_traps_needed_is_the_smallest_count_reaching_the_power():
    from satcal.quality import traps_needed
    from scipy.stats import binom
    # chance 1/2 only, threshold 0.7: a worker is excluded when the LLR > 0, i.e. y/n below
    # log(5/3) / (log(5/3) + log(7/5)), or when P(Bin(n, 0.7) <= y) < 0.05
    cut = np.log(5 / 3) / (np.log(5 / 3) + np.log(7 / 5))

    def power(n):
        y = np.arange(n + 1)
        out = (y < cut * n) | (binom.cdf(y, n, 0.7) < 0.05)
        return binom.pmf(y, n, 0.5)[out].sum()
    first = next(n for n in range(1, 400) if power(n) >= 0.99)
    assert traps_needed([0.5], 0.7, 0.99) == first
    assert traps_needed([0.5], 0.7, 0.99) > 20  # the 20 built-in traps cannot do it
    # chance passes a trap as often as the threshold asks: no count is enough
    assert traps_needed([0.75], 0.7, 0.99) is None


def test_trap_rule_warns_with_the_number_needed():
    from satcal.study.design import trap_rule
    from satcal.quality import traps_needed
    traps = pd.DataFrame({"expected": ["a_better;both_bad"] * 20})
    n = traps_needed([0.5], 0.7, 0.99)
    line, warned = trap_rule(traps, 0.7, 0.99, 5)
    assert line.startswith(f"traps per worker: {n}, so that a worker answering at random")
    assert warned[0].startswith(f"the batch has 20 traps, but a worker must meet {n} for the traps alone")
    assert warned[1].startswith(f"[serve] traps_per_participant = 5 gives participants fewer traps than the {n}")
    assert trap_rule(pd.DataFrame({"expected": ["a_better"] * 40}), 0.7, 0.99, 40)[1] == []
