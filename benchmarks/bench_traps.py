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


if __name__ == "__main__":
    main()
