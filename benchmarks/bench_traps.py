"""Built-in traps, the straight-lining test and the judgment-consistency test on TREC-like graded
judgments: how many honest simulated workers they exclude and how many spammers they catch
(issue 21).

For each judgments shape (levels -2..4 with a rare top level as in TREC Web 2011-2014, 0-3 as
TREC DL 2019, 0-2), spammer kind and seed: init (k = 10), generate (4 formulations,
min_per_cell 1), export to Toloka, simulate 60 workers (15% spammers, the template's user
model; spammers answering at random, or "mixed": random, "both bad" to everything and always
the side shown first, in turn), ingest with the template's settings (trust threshold 0.7,
straight_lining_alpha 0.001, consistency_alpha 0.01, crowd_alpha 0.01), and again with
consistency_alpha 0 (that test off) and with crowd_alpha 0 (the crowd-likelihood rule off: the
rules before it). Prints, per shape and kind, the honest workers excluded (by straight-lining, by
preferring dominated lists) and the spammers caught over the seeds (by kind; those only the
consistency test caught), the lowest per-trap accuracy among otherwise trusted workers and the
example answers per worker. The two done-when shapes again with examples besides the traps
(min_per_cell 5, each example answered by 20 workers). ``--timing``: worker_table, the
consistency test and the crowd-likelihood rule on a million answers. ``--template-only``: the
template's settings only; ``--seeds=A-B``: other seeds (a validation on seeds not looked at
before); ``--diagnose``: every spammer kept and honest worker excluded, with its evidence under
each rule, and the crowd rule's log ratios of honest workers and spammers;
``--done-when-only``: the issue's two shapes, -2..4 and 0-3 each with a rare top level, and 0-3
DL-like (the template's settings); ``--trap-power=P``:
quality.trap_power (the traps the rule asks per worker).
Run: PYTHONPATH=src python benchmarks/bench_traps.py
"""
import re
import sys
import tempfile
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from test_trap_validity import SHAPES, trec_like  # noqa: E402

SEEDS = range(5)
#: ``--trap-power=P``: study.toml's quality.trap_power (None: the template's).
TRAP_POWER = None
#: Columns of workers.csv printed for each spammer kept and each honest worker excluded
#: (``--diagnose``): how much evidence each had and how close each rule came.
DIAGNOSE_COLUMNS = ["worker_id", "answers", "examples_answered", "traps_seen", "traps_correct", "chance_evidence",
                    "binomial_p", "straight_lining_p", "dominance_decisive", "dominated_preferred",
                    "dominated_crowd_share", "consistency_p", "crowd_answers", "random_evidence", "reason"]
DIAGNOSED = []
#: The traps each run's workers saw (every worker sees all of them in the Toloka shape).
TRAPS_SEEN = []
#: Every worker's evidence under each rule, for the distributions ``--diagnose`` prints.
EVIDENCE = []


def run(shape: str, seed: int, top_in_every: int, spammer_kind: str = "random", min_per_cell: int = 1,
        per_example: int = 1, consistency_alpha: float = None, crowd_alpha: float = None):
    """One simulated Toloka study; returns (honest excluded, honest, {kind: (caught, spammers)},
    lowest trusted trap accuracy, honest workers excluded for straight-lining, honest workers
    excluded for preferring dominated lists, example answers per worker, spammers excluded for
    preferring dominated lists (and by no earlier rule), honest workers and spammers excluded
    as likelier at random than like the crowd (and by no earlier rule))."""
    from satcal.workspace import Workspace
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        qrels = trec_like(tmp / "qrels.txt", SHAPES[shape], n_queries=12, top_in_every=top_in_every, seed=seed)
        ws = Workspace.init(tmp / "study", qrels, k=10, min_per_cell=min_per_cell, platform="toloka", seed=seed)
        text = (ws.path / "study.toml").read_text()
        text = re.sub(r"(?m)^gains = .*$", 'gains = ["lin", "exp2"]', text)
        text = re.sub(r"(?m)^discounts = .*$", 'discounts = ["log2", "const"]', text)
        text = re.sub(r'(?m)^spammer_kind = .*$', f'spammer_kind = "{spammer_kind}"', text)
        text = re.sub(r"(?m)^answers_per_example = .*$", f"answers_per_example = {per_example}", text)
        if consistency_alpha is not None:  # the template's level otherwise (0: the test off)
            text = re.sub(r"(?m)^consistency_alpha = .*$", f"consistency_alpha = {consistency_alpha}", text)
        if crowd_alpha is not None:  # likewise (0: the crowd-likelihood rule off)
            text = re.sub(r"(?m)^crowd_alpha = .*$", f"crowd_alpha = {crowd_alpha}", text)
        if TRAP_POWER is not None:  # the traps per worker the rule asks ([traps] count = "auto")
            text = re.sub(r"(?m)^trap_power = .*$", f"trap_power = {TRAP_POWER}", text)
        (ws.path / "study.toml").write_text(text)
        ws = Workspace.open(ws.path)
        ws.generate()
        ws.export("toloka")
        results, truth = ws.simulate("toloka")
        ws.ingest([results])
        w = ws.table("workers.csv")
        spam = w["worker_id"].isin(truth["spammers"])
        excluded = w["excluded"] == "True"
        lined = w["straight_lining"] == "True"
        dominated = excluded & w["reason"].astype(str).str.startswith("prefers the dominated")
        at_random = excluded & w["reason"].astype(str).str.startswith("answers likelier at random")
        kinds = truth["spammer_kinds"]
        by_kind = {}
        for kind in sorted(set(kinds.values())):
            ids = w["worker_id"].isin([s for s, k in kinds.items() if k == kind])
            by_kind[kind] = (int((excluded & ids).sum()), int(ids.sum()))
        traps = ws.table("traps_report.csv")
        EVIDENCE.append(pd.DataFrame({"spammer": spam.to_numpy(), "excluded": excluded.to_numpy(),
                                      "traps_seen": w["traps_seen"].astype(float).to_numpy(),
                                      "random_evidence": w["random_evidence"].astype(float).to_numpy(),
                                      "chance_evidence": pd.to_numeric(w["chance_evidence"], errors="coerce").to_numpy(),
                                      "consistency_p": pd.to_numeric(w["consistency_p"], errors="coerce").to_numpy()}))
        odd = (spam & ~excluded) | (~spam & excluded)
        for _, row in w.loc[odd, [c for c in DIAGNOSE_COLUMNS if c in w.columns]].iterrows():
            DIAGNOSED.append({"shape": shape, "top_in_every": top_in_every, "seed": seed, "kind": spammer_kind,
                              "per_example": per_example, "spammer": row["worker_id"] in set(truth["spammers"]),
                              **row.to_dict()})
        TRAPS_SEEN.append(int(w["traps_seen"].astype(float).max()))
        return (int((excluded & ~spam).sum()), int((~spam).sum()), by_kind,
                float(traps["trusted_accuracy"].astype(float).min()), int((lined & ~spam).sum()),
                int((dominated & ~spam).sum()), float(w["examples_answered"].astype(float).mean()),
                int((dominated & spam).sum()), int((at_random & ~spam).sum()), int((at_random & spam).sum()))


CASES = (("-2..4", 99, "-2..4, level 4 rare (Web)", ("random", "mixed")),
         ("0-3", 1, "0-3 (DL 2019)", ("random", "mixed")),
         ("0-3", 99, "0-3, level 3 rare", ("random", "mixed")),
         ("0-2", 1, "0-2", ("random", "mixed")))
#: The done-when shapes again with examples to answer besides the traps (min_per_cell 5, each
#: example answered by EXAMPLE_ANSWERS of the 60 workers): the evidence the judgment-consistency
#: test adds.
EXAMPLE_ANSWERS = 20
CASES_EXAMPLES = (("-2..4", 99, "-2..4, level 4 rare (Web)", ("random",)),
                  ("0-3", 1, "0-3 (DL 2019)", ("random",)))


def main(cases=CASES, min_per_cell: int = 1, per_example: int = 1, consistency_alpha: float = None,
         crowd_alpha: float = None):
    warnings.simplefilter("ignore")
    print(f"Toloka shape: every worker answers all the traps ([traps] count as the template: \"auto\", from quality.trap_power); k = 10; {len(SEEDS)} seeds ({SEEDS.start}-{SEEDS.stop - 1}) x 60 workers (15% spammers); "
          f"min_per_cell {min_per_cell}, {per_example} answer(s) an example; consistency_alpha "
          f"{'as the template' if consistency_alpha is None else consistency_alpha}; crowd_alpha "
          f"{'as the template' if crowd_alpha is None else crowd_alpha}")
    print(f"{'judgments':<28} {'spammers':<8} {'honest excluded':>17} {'(straight-l., dominated)':>24}  "
          f"{'spammers caught, by kind':<44} {'(dominated)':>11} {'min trap acc.':>13} {'examples/worker':>15}")
    for shape, top_in_every, label, kinds in cases:
        for kind in kinds:
            del TRAPS_SEEN[:]
            rows = [run(shape, s, top_in_every, kind, min_per_cell, per_example, consistency_alpha, crowd_alpha)
                    for s in SEEDS]
            honest_ex, honest = sum(r[0] for r in rows), sum(r[1] for r in rows)
            caught = {}
            for r in rows:
                for k, (c, n) in r[2].items():
                    got = caught.get(k, (0, 0))
                    caught[k] = (got[0] + c, got[1] + n)
            text = ", ".join(f"{k} {c} of {n}" for k, (c, n) in caught.items())
            print(f"{label:<28} {kind:<8} {honest_ex:>6} of {honest:<4} ({100 * honest_ex / honest:3.1f}%) "
                  f"{sum(r[4] for r in rows):>12}, {sum(r[5] for r in rows):<10} {text:<44} {sum(r[7] for r in rows):>11} "
                  f"{min(r[3] for r in rows):>13.3f} {np.mean([r[6] for r in rows]):>15.1f} "
                  f"{sum(r[8] for r in rows):>12}, {sum(r[9] for r in rows):<10} traps {sorted(set(TRAPS_SEEN))}", flush=True)


def _simulate_answers_per_trap(shape: str, top_in_every: int, seed: int, k: int = 10):
    """Every simulated worker (60, 15% spammers, satcal.simulate's UserModel) answers each of 20
    built-in traps: rows ``worker_id, example_id`` (the trap), ``is_trap, correct, expected``
    and the spammers."""
    from satcal.judgments import read_judgments
    from satcal.platforms import build_items, swap_answer
    from satcal.simulate import UserModel, simulate_answers
    from satcal.traps import build_traps
    counts = SHAPES[shape]
    with tempfile.TemporaryDirectory() as tmp:
        judgments = read_judgments(trec_like(Path(tmp) / "qrels.txt", counts, top_in_every=top_in_every, seed=seed))
    levels = [lv for lv in counts if lv >= 0]
    traps = build_traps(judgments, k=k, n=20, seed=seed, levels=levels)
    example = traps.iloc[[0]].drop(columns=["trap_id", "expected"]).assign(example_id="ex1")
    items, key = build_items(example, traps, k, seed=seed, items_per_page=10)
    lists = pd.concat([example.assign(source_id="ex1"), traps.assign(source_id=traps["trap_id"])], ignore_index=True)
    answers, truth = simulate_answers(items, key, lists, k, max(levels), UserModel(workers=60, spammers=0.15, seed=seed))
    answers = answers[answers["status"] == ""].merge(key, on="item_id")
    answers = answers[answers["is_trap"].astype(str) == "True"]
    canonical = [swap_answer(a) if str(s) == "True" else a for a, s in zip(answers["answer"], answers["swapped"])]
    ok = [a in e.split(";") for a, e in zip(canonical, answers["expected"])]
    out = pd.DataFrame({"worker_id": answers["worker_id"].to_numpy(), "example_id": answers["source_id"].to_numpy(),
                        "is_trap": True, "correct": ok,
                        "expected": answers["expected"].to_numpy(), "answer": canonical})
    return out, set(truth["spammers"])


def hosted(shape: str, top_in_every: int, seed: int, per_participant: int, draws: int = 10):
    """The hosted study's shape: each participant meets only ``per_participant`` traps. Every
    simulated worker answers all 20 built-in traps (satcal.simulate's user model, as
    tests/test_trap_validity.py), then ``draws`` random subsets of ``per_participant`` of their
    answers stand for as many participants. Returns (honest excluded, honest, spammers caught,
    spammers) under the raw-share rule (trust < 0.7), under quality.worker_table's trap rule
    (crowd_alpha 0) and under worker_table with the crowd-likelihood rule (each participant's
    trap answers against the other participants' answers to the same traps)."""
    from satcal.quality import worker_table
    answers, spammers = _simulate_answers_per_trap(shape, top_in_every, seed)
    rng = np.random.default_rng(seed)
    rows = []
    for w, g in answers.groupby("worker_id"):
        for d in range(draws):
            pick = g.iloc[rng.choice(len(g), size=per_participant, replace=False)]
            rows.append(pick.assign(worker_id=f"{w}-{d}", spam=w in spammers))
    sub = pd.concat(rows, ignore_index=True)
    spam = sub.groupby("worker_id")["spam"].first()
    old = sub.groupby("worker_id")["correct"].mean() < 0.7
    cols = ["worker_id", "example_id", "is_trap", "correct", "expected", "answer"]
    new = worker_table(sub[cols], 0.7, per_participant, crowd_alpha=0)
    new = new.set_index("worker_id")["excluded"].reindex(spam.index)
    crowd = worker_table(sub[cols], 0.7, per_participant).set_index("worker_id")["excluded"].reindex(spam.index)
    count = lambda ex: (int((ex & ~spam).sum()), int((~spam).sum()), int((ex & spam).sum()), int(spam.sum()))
    return count(old) + count(new.astype(bool)) + count(crowd.astype(bool))


def main_hosted():
    warnings.simplefilter("ignore")
    print(f"\nhosted-study shape: participants meeting few traps, random spammers (k = 10; {len(SEEDS)} seeds x 60 "
          "workers x 10 draws; min_traps = the traps met)")
    print(f"{'judgments':<28} {'traps':>5} {'raw share: honest excl.':>24} {'caught':>14} "
          f"{'evidence: honest excl.':>24} {'caught':>14} {'+ crowd rule: honest excl.':>27} {'caught':>14}")
    for shape, top_in_every, label in (("-2..4", 99, "-2..4, level 4 rare (Web)"), ("0-3", 1, "0-3 (DL 2019)"),
                                       ("0-3", 99, "0-3, level 3 rare"), ("0-2", 1, "0-2")):
        for per in (3, 5):
            n = np.array([hosted(shape, top_in_every, s, per) for s in SEEDS]).sum(axis=0)
            print(f"{label:<28} {per:>5} {n[0]:>10} of {n[1]:<6} ({100 * n[0] / n[1]:4.1f}%) "
                  f"{n[2]:>5} of {n[3]:<5} {n[4]:>10} of {n[5]:<6} ({100 * n[4] / n[5]:4.1f}%) "
                  f"{n[6]:>5} of {n[7]:<5} {n[8]:>13} of {n[9]:<6} ({100 * n[8] / n[9]:4.1f}%) "
                  f"{n[10]:>5} of {n[11]:<5}", flush=True)


def timing(n_answers: int = 1_000_000, workers: int = 5_000, repeats: int = 3, seed: int = 0):
    """Seconds of quality.worker_table on ``n_answers`` synthetic answers (10% traps, a fifth
    of the pairs with list A dominant and a fifth with B) and of quality.judgment_consistency within it (best of
    ``repeats``): the consistency test's share of worker_table's time."""
    import time
    from satcal.quality import crowd_likelihood, judgment_consistency, worker_table
    rng = np.random.default_rng(seed)
    codes = np.array(["a_better", "b_better", "both_good", "both_bad"], dtype=object)
    is_trap = rng.random(n_answers) < 0.1
    a = pd.DataFrame({"worker_id": np.char.add("w", rng.integers(0, workers, n_answers).astype(str)).astype(object),
                      "example_id": np.char.add("ex", rng.integers(0, 50_000, n_answers).astype(str)).astype(object),
                      "is_trap": is_trap, "correct": is_trap & (rng.random(n_answers) < 0.8),
                      "expected": np.where(is_trap, "a_better;both_bad", ""),
                      "answer_shown": codes[rng.integers(0, 4, n_answers)], "answer": codes[rng.integers(0, 4, n_answers)],
                      "dominant": rng.choice([-1, 0, 0, 0, 1], n_answers)})
    best = lambda f: min((lambda t0: (f(), time.perf_counter() - t0)[1])(time.perf_counter()) for _ in range(repeats))  # noqa: E731
    whole = best(lambda: worker_table(a, 0.7, 5))
    part = best(lambda: judgment_consistency(a, reference=pd.Series(True, index=a["worker_id"].unique())))
    crowd = best(lambda: crowd_likelihood(a, reference=pd.Series(True, index=a["worker_id"].unique())))
    print(f"worker_table on {n_answers:,} answers ({workers:,} workers): {whole:.2f} s; judgment_consistency "
          f"{part:.3f} s, {100 * part / whole:.1f}% of it; crowd_likelihood {crowd:.3f} s, "
          f"{100 * crowd / whole:.1f}% (best of {repeats})")


def main_examples():
    """The done-when shapes with examples besides the traps, with the judgment-consistency
    test and without it (consistency_alpha 0: traps and straight-lining alone), and without the
    crowd-likelihood rule (crowd_alpha 0: the rules before it)."""
    for alpha, crowd in ((None, None), (0, None), (None, 0)):
        main(CASES_EXAMPLES, min_per_cell=5, per_example=EXAMPLE_ANSWERS, consistency_alpha=alpha, crowd_alpha=crowd)


def print_diagnosed():
    """Every spammer kept and honest worker excluded by the runs so far, with its evidence."""
    if not DIAGNOSED:
        return
    table = pd.DataFrame(DIAGNOSED)
    with pd.option_context("display.width", 250, "display.max_columns", 40, "display.max_colwidth", 60):
        print("\nspammers kept and honest workers excluded:")
        print(table.drop(columns=["reason"]).to_string(index=False))
    if EVIDENCE:
        e = pd.concat(EVIDENCE, ignore_index=True)
        print("\ncrowd-likelihood log ratio (random_evidence), quantiles 50/90/99/max, and the share above "
              "log 100 (crowd_alpha 0.01) and log((1 - pi)/pi) at pi = 0.15 (the Bayes rule at the simulated share):")
        for who, part in (("honest", e[~e["spammer"]]), ("spammers", e[e["spammer"]])):
            r = part["random_evidence"]
            q = np.quantile(r, [0.5, 0.9, 0.99, 1.0])
            print(f"  {who:<9} n={len(r):>5}: {q[0]:6.2f} {q[1]:6.2f} {q[2]:6.2f} {q[3]:6.2f}; "
                  f"> log 100: {(r >= np.log(100)).mean():.3f}; > log(0.85/0.15): {(r >= np.log(0.85 / 0.15)).mean():.3f}")


if __name__ == "__main__":
    if "--help" in sys.argv or "-h" in sys.argv:  # no argparse here: the docstring says what each flag does
        print(__doc__)
        sys.exit(0)
    # --timing: worker_table at 1M answers; --examples-only, --hosted-only, --no-hosted: parts;
    # --done-when-only: the shapes (-2..4, 0-3 DL-like, 0-3 level 3 rare), the template's settings;
    # --trap-power=P: quality.trap_power (the rule's count of traps);
    # --seeds A-B: other seeds (a validation on seeds never looked at); --diagnose: print the
    # kept spammers and excluded honest workers; --template-only: the template's settings only
    for arg in sys.argv:
        if arg.startswith("--seeds="):
            lo, hi = arg.split("=", 1)[1].split("-")
            SEEDS = range(int(lo), int(hi) + 1)
        if arg.startswith("--trap-power="):
            TRAP_POWER = float(arg.split("=", 1)[1])
    if "--done-when-only" in sys.argv:  # the shapes (top level rare; and 0-3 DL-like), the template's settings
        main(CASES[:3])
    elif "--template-only" in sys.argv:
        main()
        main(CASES_EXAMPLES, min_per_cell=5, per_example=EXAMPLE_ANSWERS)
        if "--diagnose" in sys.argv:
            print_diagnosed()
    elif "--timing" in sys.argv:
        timing()
    elif "--examples-only" in sys.argv:
        main_examples()
    elif "--hosted-only" in sys.argv:
        main_hosted()
    else:
        main()
        main(CASES, consistency_alpha=0)
        main(CASES, crowd_alpha=0)
        main_examples()
        if "--no-hosted" not in sys.argv:
            main_hosted()
