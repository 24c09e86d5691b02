"""Built-in traps on TREC-like graded judgments: how many honest simulated workers they exclude
and how many spammers they catch (issue 21).

For each judgments shape (levels -2..4 with a rare top level as in TREC Web 2011-2014, 0-3 as
TREC DL 2019, 0-2) and seed: init (k = 10), generate (4 formulations, min_per_cell 1), export to
Toloka, simulate 60 workers (15% spammers, the template's user model), ingest with the
template's trust threshold (0.7). Prints, per shape, the honest workers excluded and the
spammers caught over the seeds, and the lowest per-trap accuracy among otherwise trusted
workers. Run: PYTHONPATH=src python benchmarks/bench_traps.py
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


def run(shape: str, seed: int, top_in_every: int):
    from satcal.workspace import Workspace
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        qrels = trec_like(tmp / "qrels.txt", SHAPES[shape], n_queries=12, top_in_every=top_in_every, seed=seed)
        ws = Workspace.init(tmp / "study", qrels, k=10, min_per_cell=1, platform="toloka", seed=seed)
        text = (ws.path / "study.toml").read_text()
        text = re.sub(r"(?m)^gains = .*$", 'gains = ["lin", "exp2"]', text)
        text = re.sub(r"(?m)^discounts = .*$", 'discounts = ["log2", "const"]', text)
        (ws.path / "study.toml").write_text(text)
        ws = Workspace.open(ws.path)
        ws.generate()
        ws.export("toloka")
        results, truth = ws.simulate("toloka")
        ws.ingest([results])
        w = ws.table("workers.csv")
        spam = w["worker_id"].isin(truth["spammers"])
        excluded = w["excluded"] == "True"
        traps = ws.table("traps_report.csv")
        return (int((excluded & ~spam).sum()), int((~spam).sum()), int((excluded & spam).sum()), int(spam.sum()),
                float(traps["trusted_accuracy"].astype(float).min()))


def main():
    warnings.simplefilter("ignore")
    print(f"{'judgments':<28} {'honest excluded':>16} {'spammers caught':>16} {'min trap acc.':>14}")
    for shape, top_in_every, label in (("-2..4", 99, "-2..4, level 4 rare (Web)"), ("0-3", 1, "0-3 (DL 2019)"),
                                       ("0-3", 99, "0-3, level 3 rare"), ("0-2", 1, "0-2")):
        rows = np.array([run(shape, s, top_in_every) for s in SEEDS])
        n = rows[:, :4].sum(axis=0).astype(int)
        print(f"{label:<28} {n[0]:>6} of {n[1]:<6} {n[2]:>6} of {n[3]:<6}"
              f" {rows[:, 4].min():>14.3f}")




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
                        "expected": answers["expected"].to_numpy()})
    return out, set(truth["spammers"])


def hosted(shape: str, top_in_every: int, seed: int, per_participant: int, draws: int = 10):
    """The hosted study's shape: each participant meets only ``per_participant`` traps. Every
    simulated worker answers all 20 built-in traps (satcal.simulate's user model, as
    tests/test_trap_validity.py), then ``draws`` random subsets of ``per_participant`` of their
    answers stand for as many participants. Returns (honest excluded, honest, spammers caught,
    spammers) under the raw-share rule (trust < 0.7) and under quality.worker_table's rule."""
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
    new = worker_table(sub[["worker_id", "example_id", "is_trap", "correct", "expected"]], 0.7,
                       min(3, per_participant))
    new = new.set_index("worker_id")["excluded"].reindex(spam.index)
    count = lambda ex: (int((ex & ~spam).sum()), int((~spam).sum()), int((ex & spam).sum()), int(spam.sum()))
    return count(old) + count(new.astype(bool))


def main_hosted():
    warnings.simplefilter("ignore")
    print(f"\nhosted-study shape: participants meeting few traps (k = 10; 5 seeds x 60 workers x 10 draws)")
    print(f"{'judgments':<28} {'traps':>5} {'raw share: honest excl.':>24} {'caught':>14} "
          f"{'evidence: honest excl.':>24} {'caught':>14}")
    for shape, top_in_every, label in (("-2..4", 99, "-2..4, level 4 rare (Web)"), ("0-3", 1, "0-3 (DL 2019)"),
                                       ("0-3", 99, "0-3, level 3 rare"), ("0-2", 1, "0-2")):
        for per in (3, 5):
            n = np.array([hosted(shape, top_in_every, s, per) for s in SEEDS]).sum(axis=0)
            print(f"{label:<28} {per:>5} {n[0]:>10} of {n[1]:<6} ({100 * n[0] / n[1]:4.1f}%) "
                  f"{n[2]:>5} of {n[3]:<5} {n[4]:>10} of {n[5]:<6} ({100 * n[4] / n[5]:4.1f}%) "
                  f"{n[6]:>5} of {n[7]:<5}", flush=True)


if __name__ == "__main__":
    if "--hosted-only" not in sys.argv:
        main()
    main_hosted()
