"""Quality control that works on any judgments (issue 21): built-in traps whose expected answer
follows from the levels' order alone, honest simulated workers pass them on every shape of
judgments, spammers do not; a per-trap table flags a trap trusted workers miss, and dropping it
recomputes trust; platform settings come from study.toml."""
import json
import re

import numpy as np
import pandas as pd
import pytest

from satcal.judgments import read_judgments
from satcal.traps import build_traps

# the simulator's estimand fit sees a single real example here: its warnings are beside the point
pytestmark = [pytest.mark.filterwarnings("ignore:Perfect separation"),
              pytest.mark.filterwarnings("ignore:The design matrix is rank-deficient"),
              # synthetic judgments have no topic texts or document titles to show
              pytest.mark.filterwarnings("ignore::satcal.errors.SatcalWarning")]

#: Documents per query at each level: TREC-like, most non-relevant, few at the top.
SHAPES = {
    "0-2": {0: 30, 1: 12, 2: 12},
    "0-3": {0: 30, 1: 12, 2: 8, 3: 11},
    "-2..4": {-2: 3, 0: 30, 1: 12, 2: 8, 3: 8, 4: 11},
}


def trec_like(path, counts: dict, n_queries: int = 12, top_in_every: int = 1, seed: int = 0):
    """Synthetic TREC qrels: each query has ``counts`` documents per level, except that only
    every ``top_in_every``-th query keeps its top-level documents (the others keep one: none
    when ``top_in_every`` exceeds ``n_queries``), as in TREC Web where level 4 is rare."""
    rng = np.random.default_rng(seed)
    top = max(counts)
    lines = []
    for q in range(n_queries):
        qid = 201 + q
        c = dict(counts)
        if (q + 1) % top_in_every:
            c[top] = 1
        levels = np.repeat(list(c), list(c.values()))
        for i, lv in enumerate(rng.permutation(levels)):
            lines.append(f"{qid} 0 clueweb12-{qid}-{i:04d} {int(lv)}")
    path.write_text("\n".join(lines) + "\n")
    return path


def _mixture_nll_by_scipy(theta, y, n):
    """The consistency test's honest/guesser mixture's negative log likelihood, written
    independently of satcal (which multiplies the beta-binomial out term by term): the
    gamma-function form log C(n, y) + log B(y + a, n - y + b) - log B(a, b) by scipy.special
    (honest, mean mu, intra-worker correlation rho; the binomial below rho = 1e-6, where the
    form loses digits), Bin(n, 1/2) (guessers, share pi), a Beta(2, 2) prior on mu."""
    from scipy.special import betaln, gammaln, xlog1py, xlogy
    mu, rho, pi = theta
    if not (0 < mu <= 0.5 and 0 <= rho <= 0.5 and 0 <= pi <= 0.5):
        return np.inf
    y, n = np.asarray(y, float), np.asarray(n, float)
    log_choose = gammaln(n + 1) - gammaln(y + 1) - gammaln(n - y + 1)
    if rho < 1e-6:
        honest = log_choose + xlogy(y, mu) + xlog1py(n - y, -mu)
    else:
        a, b = mu * (1 - rho) / rho, (1 - mu) * (1 - rho) / rho
        honest = log_choose + betaln(y + a, n - y + b) - betaln(a, b)
    with np.errstate(divide="ignore"):
        ll = np.logaddexp(np.log1p(-pi) + honest, np.log(pi) + log_choose + n * np.log(0.5))
    return -(ll[n > 0].sum() + np.log(mu) + np.log1p(-mu))


def _mixture_fit_by_scipy(y, n):
    """The mixture's maximum likelihood found independently of satcal: Nelder-Mead on
    :func:`_mixture_nll_by_scipy` from a grid of starts on the natural parameters."""
    from scipy.optimize import minimize
    fits = [minimize(_mixture_nll_by_scipy, [m, r, p], args=(y, n), method="Nelder-Mead",
                     options={"xatol": 1e-8, "fatol": 1e-10, "maxiter": 20000})
            for m in (0.05, 0.2) for r in (0.0, 0.05, 0.3) for p in (0.01, 0.1, 0.3)]
    return min(fits, key=lambda f: f.fun)


def _derived_expected(traps: pd.DataFrame, k: int, top: int, nonrel_max: int) -> list[str]:
    """The expected answer from the levels' order, computed from the traps' own level columns."""
    ra = traps[[f"ra{i}" for i in range(1, k + 1)]].to_numpy()
    rb = traps[[f"rb{i}" for i in range(1, k + 1)]].to_numpy()
    a_top, b_top = (ra == top).all(1), (rb == top).all(1)
    a_bad, b_bad = (ra <= nonrel_max).all(1), (rb <= nonrel_max).all(1)
    a_rel, b_rel = (ra > nonrel_max).all(1), (rb > nonrel_max).all(1)
    out = []
    for i in range(len(traps)):
        if a_top[i] and b_top[i]:
            out.append("both_good")
        elif a_bad[i] and b_bad[i]:
            out.append("both_bad")
        elif a_rel[i] and b_bad[i]:
            out.append("a_better" if a_top[i] else "a_better;both_bad")
        elif b_rel[i] and a_bad[i]:
            out.append("b_better" if b_top[i] else "b_better;both_bad")
        else:
            out.append("?")
    return out


def _simulate_traps(traps, k, levels, seed, workers=60, spammers=0.15):
    """Every simulated worker answers every trap (satcal.simulate with its UserModel). Returns
    (per-worker accuracy computed here from the canonical answers, the spammers)."""
    from satcal.platforms import build_items, swap_answer
    from satcal.simulate import UserModel, simulate_answers
    # one real example (the simulator pages examples), then the traps
    example = traps.iloc[[0]].drop(columns=["trap_id", "expected"]).assign(example_id="ex1")
    items, key = build_items(example, traps, k, seed=seed, items_per_page=10)
    lists = pd.concat([example.assign(source_id="ex1"), traps.assign(source_id=traps["trap_id"])], ignore_index=True)
    model = UserModel(workers=workers, spammers=spammers, seed=seed)
    answers, truth = simulate_answers(items, key, lists, k, max(levels), model)
    answers = answers[answers["status"] == ""].merge(key, on="item_id")
    answers = answers[answers["is_trap"].astype(str) == "True"]
    canonical = [swap_answer(a) if str(s) == "True" else a for a, s in zip(answers["answer"], answers["swapped"])]
    ok = [a in e.split(";") for a, e in zip(canonical, answers["expected"])]
    return answers.assign(ok=ok).groupby("worker_id")["ok"].mean(), set(truth["spammers"])


@pytest.mark.parametrize("k", [5, 10])
@pytest.mark.parametrize("shape", list(SHAPES))
@pytest.mark.parametrize("top_in_every", [1, 20], ids=["top-level-common", "top-level-rare"])
def test_builtin_traps_follow_the_order_and_honest_workers_pass_them(tmp_path, shape, k, top_in_every):
    counts = SHAPES[shape]
    judgments = read_judgments(trec_like(tmp_path / "qrels.txt", counts, top_in_every=top_in_every))
    levels = [lv for lv in counts if lv >= 0]  # as satcal init does: the non-negative levels
    traps = build_traps(judgments, k=k, n=20, seed=1, levels=levels)
    # every level column is the document's own judgment
    for side in "ab":
        got = judgments.lookup(traps["query"], traps[[f"{side}{i}" for i in range(1, k + 1)]].to_numpy())
        np.testing.assert_array_equal(got, traps[[f"r{side}{i}" for i in range(1, k + 1)]].to_numpy(float))
    derived = _derived_expected(traps, k, max(levels), 0)
    assert derived == traps["expected"].tolist()
    rare = top_in_every > 1 and k > 1
    kinds = traps["expected"].str.split(";").str[0].value_counts().to_dict()
    # no query has k top-level documents when the top is rare (one document each): no "both good"
    assert kinds == ({"a_better": 7, "b_better": 7, "both_bad": 6} if rare else
                     {"a_better": 5, "b_better": 5, "both_good": 5, "both_bad": 5})
    accuracy, spammers = _simulate_traps(traps, k, levels, seed=k + len(shape))
    honest = accuracy[~accuracy.index.isin(spammers)]
    # the trust threshold of the template, 0.7: no honest worker falls under it, every spammer does
    assert (honest >= 0.7).mean() >= 0.95
    assert (accuracy[accuracy.index.isin(spammers)] < 0.7).all() and len(spammers) == 9


def test_random_spammers_answer_uniformly_and_the_trap_rule_keeps_them_at_its_stated_rate(tmp_path):
    """The 0-3 DL-like shape's 20 one-answer traps (chance 1/4 each), 200 random spammers of the
    simulator (every one answers every trap): their shown answers are uniform over the four codes
    and their correct counts Binomial(20, 1/4) (chi-square, scipy); the trap rule alone
    (worker_table with the other rules off) keeps exactly those with 11 or more right, a rule
    worked out by hand: the likelihood ratio keeps y >= 10 (y log(0.25 / 0.7) + (20 - y)
    log(0.75 / 0.3) <= 0) and the binomial test of "accuracy >= 0.7" excludes y <= 10
    (P(Bin(20, 0.7) <= 10) = 0.048 < 0.05), so a random answerer is kept with probability
    P(Bin(20, 1/4) >= 11) = 0.0039, trap_exclusion's complement. (Two spammers of 45 kept with
    11 right on seeds 8101-8105 were that chance: 1 of 360 on 40 other seeds, 1.4 expected.)"""
    from scipy.stats import binom, chisquare
    from satcal.platforms import build_items, swap_answer
    from satcal.quality import trap_exclusion, worker_table
    from satcal.simulate import UserModel, simulate_answers
    counts = SHAPES["0-3"]
    judgments = read_judgments(trec_like(tmp_path / "qrels.txt", counts, top_in_every=1, seed=8103))
    traps = build_traps(judgments, k=10, n=20, seed=8103, levels=[0, 1, 2, 3])
    assert (~traps["expected"].str.contains(";")).all()  # one accepted answer each: chance 1/4
    example = traps.iloc[[0]].drop(columns=["trap_id", "expected"]).assign(example_id="ex1")
    items, key = build_items(example, traps, 10, seed=8103, items_per_page=10)
    lists = pd.concat([example.assign(source_id="ex1"), traps.assign(source_id=traps["trap_id"])], ignore_index=True)
    answers, truth = simulate_answers(items, key, lists, 10, 3, UserModel(workers=400, spammers=0.5, seed=8103))
    answers = answers[answers["status"] == ""].merge(key, on="item_id")
    answers = answers[(answers["is_trap"].astype(str) == "True") & answers["worker_id"].isin(truth["spammers"])]
    assert len(truth["spammers"]) == 200 and len(answers) == 200 * 20
    shown = answers["answer"].value_counts().reindex(["a_better", "b_better", "both_good", "both_bad"])
    assert chisquare(shown.to_numpy()).pvalue > 0.01
    canonical = [swap_answer(a) if str(sw) == "True" else a for a, sw in zip(answers["answer"], answers["swapped"])]
    expected = answers["source_id"].map(traps.set_index("trap_id")["expected"])
    right = pd.Series(np.array(canonical) == expected.to_numpy()).groupby(answers["worker_id"].to_numpy()).sum()
    observed = np.bincount(np.minimum(right.to_numpy(), 9), minlength=10)
    law = np.r_[binom.pmf(np.arange(9), 20, 0.25), binom.sf(8, 20, 0.25)] * 200
    assert chisquare(observed, law).pvalue > 0.01
    table = worker_table(pd.DataFrame({"worker_id": answers["worker_id"].to_numpy(), "example_id": answers["source_id"].to_numpy(),
                                       "is_trap": True, "correct": np.array(canonical) == expected.to_numpy(),
                                       "expected": expected.to_numpy(), "answer": canonical}),
                         0.7, 3, straight_alpha=0, consistency_alpha=0, crowd_alpha=0).set_index("worker_id")
    assert (~table["excluded"].astype(bool)).to_dict() == (right.reindex(table.index) >= 11).to_dict()
    assert (right >= 10).sum() >= 1  # the boundary is met
    assert 1 - trap_exclusion([0.25], 0.7, 20) == pytest.approx(binom.sf(10, 20, 0.25))


def test_trap_table_is_leave_one_out_by_hand():
    """Three workers, three traps, worked by hand (threshold 0.5, min_traps 2): a worker is
    otherwise trusted on a trap when their share right on the two other traps is >= 0.5."""
    from satcal.quality import trap_table
    rows = [("w1", "t1", 1), ("w1", "t2", 1), ("w1", "t3", 0),
            ("w2", "t1", 1), ("w2", "t2", 0), ("w2", "t3", 0),
            ("w3", "t1", 0), ("w3", "t2", 0), ("w3", "t3", 1)]
    a = pd.DataFrame(rows, columns=["worker_id", "example_id", "correct"]).assign(
        is_trap=True, answer=lambda d: np.where(d["correct"] == 1, "a_better", "both_bad"))
    a["correct"] = a["correct"].astype(bool)
    t = trap_table(a, pd.Series({"t1": "a_better", "t2": "a_better", "t3": "a_better"}), threshold=0.5,
                   min_traps=2).set_index("trap_id")
    # leave-one-out trust on t1: w1 (t2, t3) = 1/2, w2 (t2, t3) = 0/2, w3 (t2, t3) = 1/2
    # -> trusted w1, w3; right answers on t1: w1 -> 1/2
    assert t.loc["t1", "trusted_answers"] == 2 and t.loc["t1", "trusted_accuracy"] == 0.5
    # on t2: w1 (t1, t3) 1/2, w2 (t1, t3) 1/2, w3 (t1, t3) 1/2 -> all trusted; right: w1 -> 1/3
    assert t.loc["t2", "trusted_answers"] == 3 and t.loc["t2", "trusted_accuracy"] == round(1 / 3, 4)
    # on t3: w1 (t1, t2) 2/2, w2 1/2, w3 0/2 -> w1, w2 trusted; right: none -> 0 -> suspect
    assert t.loc["t3", "trusted_answers"] == 2 and t.loc["t3", "trusted_accuracy"] == 0.0
    assert t.loc["t3", "accuracy"] == round(1 / 3, 4) and t.loc["t3", "most_common_answer"] == "both_bad"
    # suspect needs 5 otherwise trusted answers (t2 has 3, t3 only 2) and a significant shortfall:
    # t2's 1 of 3 has P(Bin(3, 0.5) <= 1) = 4/8, what a good trap often gets
    assert t.loc["t2", "suspect_p"] == pytest.approx(0.5)
    assert t["suspect"].to_dict() == {"t1": False, "t2": False, "t3": False}
    # dropping t2: it no longer counts towards anyone's trust
    d = trap_table(a, pd.Series({"t1": "a_better", "t2": "a_better", "t3": "a_better"}), threshold=0.5,
                   min_traps=1, drop_traps=["t2"]).set_index("trap_id")
    # on t1 without t2: w1 (t3) 0/1, w2 (t3) 0/1, w3 (t3) 1/1 -> w3 trusted, wrong
    assert d.loc["t1", "trusted_answers"] == 1 and d.loc["t1", "trusted_accuracy"] == 0.0
    assert d["dropped"].to_dict() == {"t1": False, "t2": True, "t3": False}


def _study(tmp_path, shape, k=10, min_per_cell=1, top_in_every=20, platform="toloka"):
    from satcal.workspace import Workspace
    qrels = trec_like(tmp_path / "qrels.txt", SHAPES[shape], n_queries=12, top_in_every=top_in_every)
    ws = Workspace.init(tmp_path / "study", qrels, k=k, min_per_cell=min_per_cell, platform=platform)
    text = (ws.path / "study.toml").read_text()
    text = re.sub(r"(?m)^gains = .*$", 'gains = ["lin", "exp2"]', text)
    text = re.sub(r"(?m)^discounts = .*$", 'discounts = ["log2", "const"]', text)
    (ws.path / "study.toml").write_text(text)
    return Workspace.open(ws.path)


@pytest.mark.parametrize("shape,count", [("-2..4", "auto"), ("0-3", "auto"), ("0-3", 20)])
def test_simulated_study_excludes_spammers_and_keeps_honest_workers(tmp_path, shape, count):
    """The issue's 'done when': TREC-like graded judgments, k = 10; honest workers and spammers
    of three kinds (random, "both bad" to everything, always the side shown first); the
    spammers are excluded and fewer than 5% of honest workers; a per-trap table. Level 4 (or 3)
    is rare, so every built-in trap accepts "both bad": the straight-liners are caught by the
    straight-lining test, not by traps. With the rule's count (``"auto"``: 69 traps here,
    where the consistency fit's spread is small but not 0) and with 20 traps."""
    from scipy.stats import betabinom, binom, binomtest
    ws = _study(tmp_path, shape)
    text = (ws.path / "study.toml").read_text()
    if count != "auto":
        text = text.replace('count = "auto"', f"count = {count}")
    (ws.path / "study.toml").write_text(text.replace('spammer_kind = "random"', 'spammer_kind = "mixed"'))
    from satcal.workspace import Workspace
    ws = Workspace.open(ws.path)
    ws.generate()
    n_traps = len(ws.table("traps.csv"))
    assert ws.table("traps.csv")["expected"].str.contains("both_bad").all() and n_traps == (69 if count == "auto" else 20)
    ws.export("toloka")
    results, truth = ws.simulate("toloka")
    report = ws.ingest([results])
    workers = ws.table("workers.csv")
    excluded = set(workers.loc[workers["excluded"] == "True", "worker_id"])
    spammers = set(truth["spammers"])
    honest = set(workers["worker_id"]) - spammers
    assert spammers and spammers <= excluded
    assert len(excluded & honest) < 0.05 * len(honest)
    kinds = truth["spammer_kinds"]
    assert sorted(set(kinds.values())) == ["both_bad", "first", "random"]
    w = workers.set_index("worker_id")
    for spammer, kind in kinds.items():
        if kind == "both_bad":  # every trap right, excluded for straight-lining alone
            assert w.loc[spammer, "traps_correct"] == w.loc[spammer, "traps_seen"]
            assert w.loc[spammer, "reason"].startswith("straight-lining: answered both_bad in 100% of")
        # the side shown first: straight-lining too (its traps, at chance, give the reason first)
        assert (w.loc[spammer, "straight_lining"] == "True") == (kind != "random")
    # the straight-lining p-values, recomputed with scipy from every valid answer as shown
    before = report.before_exclusion
    answered = before.assign(shown=np.where(before["swapped"].astype(str) == "True",
                                            before["answer"].map({"a_better": "b_better", "b_better": "a_better"})
                                            .fillna(before["answer"]), before["answer"]))
    for worker in sorted(kinds)[:3] + sorted(honest)[:3]:
        own = answered[answered["worker_id"] == worker]["shown"]
        code = own.value_counts().sort_index().idxmax()
        rate = (answered.loc[answered["worker_id"] != worker, "shown"] == code).mean()
        p = min(1.0, 4 * binomtest(int((own == code).sum()), len(own), rate, alternative="greater").pvalue)
        assert w.loc[worker, "top_answer"] == code
        assert float(w.loc[worker, "straight_lining_p"]) == pytest.approx(p, rel=1e-6, abs=1e-300)
    # the judgment-consistency p-values, recomputed with scipy: the dominant list of each example
    # from its levels rank by rank, of each trap from its expected answers, here in plain Python
    k = 10
    dominant = {}
    for row in ws.table("examples.csv").to_dict("records"):
        a, b = [int(row[f"ra{i}"]) for i in range(1, k + 1)], [int(row[f"rb{i}"]) for i in range(1, k + 1)]
        ge, le = all(x >= y for x, y in zip(a, b)), all(x <= y for x, y in zip(a, b))
        dominant[row["example_id"]] = 1 if ge and a != b else -1 if le and a != b else 0
    for row in ws.table("traps.csv").to_dict("records"):
        accepted = row["expected"].split(";")
        dominant[row["trap_id"]] = ("a_better" in accepted) - ("b_better" in accepted)
    side = before["answer"].map({"a_better": 1, "b_better": -1}).fillna(0)
    dom = before["example_id"].map(dominant).fillna(0)
    decisive, against = (dom != 0) & (side != 0), (dom != 0) & (side != 0) & (side != dom)
    # the crowd: workers kept by the traps and straight-lining (those this test or the crowd rule
    # after it excluded count); its honest/guesser mixture fitted independently (scipy.special's
    # gamma-function form, Nelder-Mead), each p scipy's betabinom.sf
    crowd = set(w.index[(w["excluded"] == "False") | w["reason"].fillna("").str.startswith(
        ("prefers the dominated", "answers likelier at random"))])
    per_worker = pd.DataFrame({"n": decisive.groupby(before["worker_id"]).sum(),
                               "y": against.groupby(before["worker_id"]).sum()})
    ref = per_worker.loc[sorted(crowd & set(per_worker.index))]
    fit = _mixture_fit_by_scipy(ref["y"].to_numpy(), ref["n"].to_numpy())
    mu, rho, _ = fit.x
    # satcal's fit is a maximum: its (mu, rho, pi) is at least as likely as the independent search's
    # best (at 47 traps the spread is small but not 0: a fit stopped at rho = 0 is less likely)
    satcal_fit = [float(w[c].iloc[0]) for c in ("dominated_crowd_share", "dominated_dispersion", "dominated_guessers")]
    assert _mixture_nll_by_scipy(satcal_fit, ref["y"].to_numpy(), ref["n"].to_numpy()) <= fit.fun + 1e-7
    scale = (1 - rho) / max(rho, 1e-6)
    for worker in sorted(kinds)[:3] + sorted(honest)[:3]:
        n, y = int(per_worker.loc[worker, "n"]), int(per_worker.loc[worker, "y"])
        assert int(w.loc[worker, "dominance_decisive"]) == n and int(w.loc[worker, "dominated_preferred"]) == y
        assert float(w.loc[worker, "dominated_crowd_share"]) == pytest.approx(mu, rel=1e-3)
        if n:
            p = binom.sf(y - 1, n, mu) if rho < 1e-6 else betabinom.sf(y - 1, n, mu * scale, (1 - mu) * scale)
            assert float(w.loc[worker, "consistency_p"]) == pytest.approx(p, rel=1e-2, abs=1e-12)
    # both paths are exercised: decisive answers against the dominant list, examples with one
    examples_answered = before["is_trap"].astype(str) != "True"
    assert against.sum() > 0 and (decisive & examples_answered).sum() > 0
    traps = ws.table("traps_report.csv")
    assert len(traps) == n_traps and set(traps["trap_id"]) == set(ws.table("traps.csv")["trap_id"])
    # each trap's answers and accuracy, recomputed from answers.csv (kept and excluded workers)
    on = before[before["is_trap"].astype(bool)]
    per = on.groupby("example_id")["correct"].agg(lambda s: (s.astype(str) == "True").mean())
    got = traps.set_index("trap_id")["accuracy"].astype(float)
    np.testing.assert_allclose(got.loc[per.index], per.round(4).to_numpy())
    assert (traps["suspect"] == "False").all()
    assert not any(line.lstrip().startswith("trap ") for line in report.lines())


def test_a_trap_is_flagged_only_when_trusted_workers_miss_it_beyond_chance():
    """Six workers right on t1-t3 (so otherwise trusted on t4 and t5, threshold 0.7, min_traps
    3): t4 answered wrong by all six, P(Bin(6, 0.5) <= 0) = 1/64 < 0.05, flagged; t5 right by
    two of six, P(Bin(6, 0.5) <= 2) = 22/64, below one half but not flagged."""
    from scipy.stats import binom
    from satcal.quality import trap_table
    rows = [(f"w{i}", t, True) for i in range(6) for t in ("t1", "t2", "t3")]
    rows += [(f"w{i}", "t4", False) for i in range(6)] + [(f"w{i}", "t5", i < 2) for i in range(6)]
    a = pd.DataFrame(rows, columns=["worker_id", "example_id", "correct"]).assign(
        is_trap=True, answer=lambda d: np.where(d["correct"], "a_better", "b_better"))
    t = trap_table(a, pd.Series({f"t{j}": "a_better" for j in range(1, 6)}), threshold=0.7,
                   min_traps=3).set_index("trap_id")
    assert t.loc["t4", "suspect_p"] == pytest.approx(binom.cdf(0, 6, 0.5), abs=1e-6)
    assert t.loc["t5", "suspect_p"] == pytest.approx(binom.cdf(2, 6, 0.5), abs=1e-6)
    assert t["suspect"].to_dict() == {"t1": False, "t2": False, "t3": False, "t4": True, "t5": False}
    assert t.loc["t4", "most_common_answer"] == "b_better" and t.loc["t5", "most_common_answer"] == "b_better"


def test_a_trap_trusted_workers_miss_is_flagged_and_can_be_dropped(tmp_path, ecir_result):
    """A user trap with a wrong expected answer: flagged in traps_report.csv, in ingest's
    summary and in the report; --drop-trap recomputes trust without it."""
    from click.testing import CliRunner
    from satcal.cli import main
    from satcal.workspace import Workspace
    ws = _study(tmp_path, "0-3", k=5, top_in_every=1)
    ws.generate()
    built = ws.table("traps.csv")
    cols = ["query"] + [f"a{i}" for i in range(1, 6)] + [f"b{i}" for i in range(1, 6)] + ["expected"]
    mine = built[cols].copy()
    wrong = int(np.flatnonzero(mine["expected"] == "a_better")[0])
    mine.loc[wrong, "expected"] = "b_better"  # A is all top level, B non-relevant: wrong on purpose
    mine.to_csv(ws.path / "my-traps.csv", index=False)
    text = (ws.path / "study.toml").read_text().replace('file = ""', 'file = "my-traps.csv"')
    (ws.path / "study.toml").write_text(text)
    ws = Workspace.open(ws.path)
    ws.generate(force=True)
    ws.export("toloka")
    results, truth = ws.simulate("toloka")
    run = CliRunner().invoke(main, ["ingest", str(ws.path), str(results)])
    assert run.exit_code == 0, run.output
    bad = f"trap{wrong + 1:02d}"
    table = ws.table("traps_report.csv").set_index("trap_id")
    assert table.loc[bad, "suspect"] == "True" and float(table.loc[bad, "trusted_accuracy"]) < 0.5
    assert table.loc[bad, "most_common_answer"] == "a_better"
    assert (table.drop(index=bad)["suspect"] == "False").all()
    assert f"--drop-trap {bad}" in run.output
    before = ws.table("workers.csv").set_index("worker_id")
    run = CliRunner().invoke(main, ["ingest", str(ws.path), "--drop-trap", bad])
    assert run.exit_code == 0, run.output
    after = ws.table("workers.csv").set_index("worker_id")
    answers = pd.read_csv(ws.path / "answers.csv", dtype=str, keep_default_na=False)
    rejects = pd.read_csv(ws.path / "rejects.csv", dtype=str, keep_default_na=False)
    # trust by hand: right answers to the other traps over the other traps seen, every valid
    # answer counted (excluded workers' answers are in rejects.csv as "excluded worker")
    key = ws.table("key.csv").set_index("item_id")
    valid = pd.concat([answers[["worker_id", "example_id", "is_trap", "correct"]],
                       rejects[rejects["reason"].str.startswith("excluded worker")].assign(
                           example_id=lambda d: d["item_id"].map(key["source_id"]),
                           is_trap=lambda d: d["item_id"].map(key["is_trap"]))])
    traps_only = valid[(valid["is_trap"] == "True") & (valid["example_id"] != bad)]
    seen = traps_only.groupby("worker_id").size()
    np.testing.assert_array_equal(after.loc[seen.index, "traps_seen"].astype(int), seen.to_numpy())
    assert (after["traps_seen"].astype(int) == before["traps_seen"].astype(int) - 1).all()
    assert ws.table("traps_report.csv").set_index("trap_id").loc[bad, "dropped"] == "True"
    # the honest workers the bad trap pulled down are back
    honest = after.index.difference(truth["spammers"])
    assert (after.loc[honest, "excluded"] == "False").mean() >= (before.loc[honest, "excluded"] == "False").mean()
    # the report's section (on the published study's result, with this trap table)
    from satcal.report import render_report
    ecir_result.trap_report = ws.table("traps_report.csv")
    try:
        html = render_report(ecir_result, {})
    finally:
        del ecir_result.trap_report
    start = html.index('<h2 id="traps">')
    section = html[start:html.index("<h2", start + 1)]
    assert f"Dropped from trust: {bad}." in section and "No trap is missed by most of them" in section
    assert section.count("<tr") == 1 + len(ws.table("traps.csv"))  # the header and each trap


def test_toloka_settings_come_from_study_toml(tmp_path):
    """[platforms.toloka] decides the pool's reward, duration, control tasks and restriction;
    toloka-kit still loads the pool; export prints them; a bad value is a one-line error."""
    import warnings
    from click.testing import CliRunner
    from satcal.cli import main
    from satcal.errors import SatcalError
    from satcal.workspace import Workspace
    ws = _study(tmp_path, "0-2", k=5, top_in_every=1)
    ws.generate()
    text = (ws.path / "study.toml").read_text()
    # the template holds every key with its default, temporary restriction included
    assert 'restriction = "temporary"' in text and "reward_per_assignment = 0.05" in text
    text = (text.replace("reward_per_assignment = 0.05", "reward_per_assignment = 0.3")
            .replace("restriction_days = 7", "restriction_days = 3")
            .replace("control_min_accuracy = 70", "control_min_accuracy = 60")
            .replace("payment_cents_per_page = 10", "payment_cents_per_page = 45")
            .replace("overlap_cohort_percentage = 100", "overlap_cohort_percentage = 50"))
    (ws.path / "study.toml").write_text(text)
    run = CliRunner().invoke(main, ["export", str(ws.path), "--platform", "toloka"])
    assert run.exit_code == 0, run.output
    assert "reward 0.3 USD per task suite of 10 items (0.03 an item)" in run.output
    assert "restricted for 3 days" in run.output
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        toloka = pytest.importorskip("toloka.client")
    pool = toloka.Pool.structure(json.loads((ws.path / "batches" / "toloka" / "pool.json").read_text()))
    assert pool.reward_per_assignment == 0.3
    rule = pool.quality_control.configs[0].rules[0]
    assert rule.action.parameters.duration == 3 and rule.action.parameters.duration_unit.value == "DAYS"
    assert [c.value for c in rule.conditions] == [5, 60]  # control_min_answers: the template's 5
    ws = Workspace.open(ws.path)
    for platform, file, needle in (("appen", "job-settings.txt", "payment_per_assignment_cents = 45"),
                                   ("labelstudio", "project.json", '"overlap_cohort_percentage": 50')):
        ws.export(platform)
        assert needle in (ws.path / "batches" / platform / file).read_text()
    (ws.path / "study.toml").write_text(text.replace('restriction = "temporary"', 'restriction = "permanent"'))
    Workspace.open(ws.path).export("toloka", force=True)
    pool = json.loads((ws.path / "batches" / "toloka" / "pool.json").read_text())
    params = pool["quality_control"]["configs"][0]["rules"][0]["action"]["parameters"]
    assert params["duration_unit"] == "PERMANENT" and "duration" not in params
    for bad, message in (('restriction = "forever"', r"platforms\.toloka\.restriction = 'forever': expected "
                                                     "temporary, permanent or none"),
                         ("reward_per_assigment = 1", r"unknown key platforms\.toloka\.reward_per_assigment "
                                                      r"\(did you mean platforms\.toloka\.reward_per_assignment\?\)")):
        edited = re.sub(r'(?m)^restriction = "temporary"$', bad, text) if "forever" in bad else \
            text.replace("[platforms.toloka]\n", f"[platforms.toloka]\n{bad}\n")
        (ws.path / "study.toml").write_text(edited)
        with pytest.raises(SatcalError, match=message):
            Workspace.open(ws.path)


def test_merge_hint_names_the_rare_level_and_what_merging_reaches(tmp_path):
    """Level 3 of 0-3 held by one document a query: the hint's reachable shares are the
    coverage of the design as it is and of the judgments with 3 relabelled 2 (k = 5: every
    pattern enumerated, so both are exact)."""
    from satcal.generate import Design, generate
    path = trec_like(tmp_path / "qrels.txt", SHAPES["0-3"], n_queries=6, top_in_every=99)
    forms = ["lin-const", "exp2-log2", "exp5-zipf"]
    now = generate(read_judgments(path), Design(k=5, levels=(0, 1, 2, 3), min_per_cell=1, formulations=forms))
    hint = [w for w in now.warnings if w.startswith("level 3 is rare")]
    assert len(hint) == 1
    merged_path = tmp_path / "merged.txt"
    merged_path.write_text(re.sub(r"(?m) 3$", " 2", path.read_text()))
    merged = generate(read_judgments(merged_path), Design(k=5, levels=(0, 1, 2), min_per_cell=1, formulations=forms))
    share = lambda r: r.coverage.query("kind == 'phi'")["feasible"].mean()
    assert f": {100 * share(now):.0f}% of the phi cells are reachable" in hint[0]
    assert f"would make {100 * share(merged):.0f}% reachable" in hint[0]
    assert "at most 1 document(s) a query" in hint[0] and "merging levels 2 and 3" in hint[0]


def test_auto_trap_count_reaches_the_power_and_the_toloka_export_carries_it(tmp_path):
    """[traps] count = "auto": the batch holds as many traps as a worker must meet for the trap
    rule to exclude a random answerer with probability 0.999 (the default), checked by an independent Monte
    Carlo of random answerers through worker_table, and the Toloka export carries them all."""
    import warnings
    from satcal.quality import _chance, traps_needed, worker_table
    from satcal.workspace import Workspace
    qrels = trec_like(tmp_path / "qrels.txt", SHAPES["-2..4"], n_queries=12, top_in_every=99, seed=3)
    ws = Workspace.init(tmp_path / "study", qrels, k=10, min_per_cell=1, platform="toloka", seed=3)
    ws.generate()
    traps = ws.table("traps.csv")
    chance = _chance(traps)
    needed = traps_needed(chance, 0.7, 0.999)
    assert len(traps) >= needed > 20  # the mix of 1/4 and 1/2 traps needs more than 20
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        paths = ws.export("toloka")
    # the rule's line is information, not a warning: the batch holds the count
    assert not [str(w.message) for w in caught if "traps per worker" in str(w.message)]
    from satcal.pipeline import export_text
    said, warned = export_text(ws, paths, "toloka", False)
    assert f"\nTraps per worker: {needed}, so that a worker answering at random" in said
    assert not [w for w in warned if "traps per worker" in w.lower()]
    # the platform's own task file: every trap is a control task with its known solution
    tasks = json.loads((ws.path / "batches" / "toloka" / "tasks.json").read_text())
    assert sum(1 for t in tasks if t.get("known_solutions")) == len(traps)
    # random answerers over the traps (a seed; 4,000 of them): the share excluded by traps alone
    rng = np.random.default_rng(5)
    workers, n = 4000, len(traps)
    right = rng.random((workers, n)) < chance[None, :]
    answers = pd.DataFrame({"worker_id": np.repeat(np.arange(workers), n), "is_trap": True,
                            "correct": right.ravel(), "expected": np.tile(traps["expected"].to_numpy(), workers)})
    table = worker_table(answers, 0.7, 5, straight_alpha=0, consistency_alpha=0, crowd_alpha=0)
    assert table["excluded"].mean() >= 0.999 - 3 * np.sqrt(0.999 * 0.001 / workers)
