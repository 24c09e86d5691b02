"""Reading and scoring TREC files at peer speed (issue 12), printed in one run.

From files on disk: a qrels file of 1,000,000 lines (10,000 queries x 100 judged documents,
levels 0-3) and a run of 1,000,000 lines (the same documents, retrieved in random order).
Each side runs in a fresh process, reading both files and computing nDCG@5 (trec_eval's
ndcg_cut_5: linear gain, 1/log2(i+1), ideal over the pool) for every query:

- satcal: read_judgments, read_runs, level_cube, score_lists (``lin-log2`` with ``ideal``);
- pytrec_eval: parse_qrel, parse_run, RelevanceEvaluator.evaluate.

Goal: satcal at least 2x faster, same values (checked here to 1e-9).

    python benchmarks/bench_files.py [--queries 10000] [--docs 100]
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from _context import note  # BLAS threads and load beside each figure

SATCAL = """
import time, json, numpy as np
t0 = time.perf_counter()
from satcal.judgments import read_judgments
from satcal.runs import read_runs, level_cube
from satcal.measures import formulation
j = read_judgments({qrels!r})
t1 = time.perf_counter()
runs = read_runs([{run!r}])
t2 = time.perf_counter()
cube, systems, queries = level_cube(runs, j, 5)
pools = j.pools()
phi = formulation("lin-log2", normalization="ideal").score(cube[0], pools=[pools[q] for q in queries],
                                                           query_index=np.arange(len(queries)))
t3 = time.perf_counter()
np.save({out!r}, phi); open({out!r} + ".q", "w").write("\\n".join(queries))
print(json.dumps({{"read_qrels": t1 - t0, "read_run": t2 - t1, "score": t3 - t2, "total": t3 - t0}}))
"""

PYTREC = """
import time, json
t0 = time.perf_counter()
import pytrec_eval
with open({qrels!r}) as f:
    qrels = pytrec_eval.parse_qrel(f)
t1 = time.perf_counter()
with open({run!r}) as f:
    run = pytrec_eval.parse_run(f)
t2 = time.perf_counter()
res = pytrec_eval.RelevanceEvaluator(qrels, {{"ndcg_cut.5"}}).evaluate(run)
t3 = time.perf_counter()
json.dump({{q: v["ndcg_cut_5"] for q, v in res.items()}}, open({out!r}, "w"))
print(json.dumps({{"read_qrels": t1 - t0, "read_run": t2 - t1, "score": t3 - t2, "total": t3 - t0}}))
"""


def write_files(tmp: Path, n_queries: int, n_docs: int, seed: int = 0) -> tuple[Path, Path]:
    rng = np.random.default_rng(seed)
    q = np.repeat([f"q{i}" for i in range(n_queries)], n_docs)
    d = np.array([f"doc{i:07d}" for i in range(n_queries * n_docs)])
    levels = rng.integers(0, 4, size=q.size)
    qrels, run = tmp / "qrels.txt", tmp / "run.txt"
    qrels.write_text("".join(f"{a} 0 {b} {c}\n" for a, b, c in zip(q, d, levels)))
    order = rng.permutation(q.size)
    scores = rng.permutation(q.size).astype(float)  # distinct: the ranking is unambiguous
    run.write_text("".join(f"{q[i]} Q0 {d[i]} 1 {scores[i]:.1f} bench\n" for i in order))
    return qrels, run


def run_child(code: str) -> tuple[dict, float]:
    t = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1]), time.perf_counter() - t


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queries", type=int, default=10_000)
    parser.add_argument("--docs", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        qrels, run = write_files(tmp, args.queries, args.docs)
        lines = args.queries * args.docs
        print(f"{lines:,}-line qrels and {lines:,}-line run; nDCG@5 for {args.queries:,} queries; "
              f"whole process, best of {args.repeat}")
        # the two sides alternate, so that both meet the same machine (memory first touched
        # by a fresh process costs more or less depending on what ran before)
        trials: dict[str, list] = {"satcal": [], "pytrec_eval": []}
        for _ in range(args.repeat):
            for name, code in (("satcal", SATCAL), ("pytrec_eval", PYTREC)):
                out = str(tmp / f"{name}.out")
                trials[name].append(run_child(code.format(qrels=str(qrels), run=str(run), out=out)))
        best = {}
        for name, runs in trials.items():
            inner, wall = min(runs, key=lambda t: t[1])
            best[name] = wall
            median = float(np.median([w for _, w in runs]))
            print(f"  {name:<12} wall {wall:6.2f} s (median {median:.2f} s)   (read qrels "
                  f"{inner['read_qrels']:.2f} s, read run {inner['read_run']:.2f} s, score {inner['score']:.2f} s) "
                  f"{note()}")
        ratios = [p[1] / s[1] for s, p in zip(trials["satcal"], trials["pytrec_eval"])]
        ours = np.load(str(tmp / "satcal.out.npy"))
        queries = (tmp / "satcal.out.q").read_text().split("\n")
        theirs = json.load(open(tmp / "pytrec_eval.out"))
        diff = float(np.max(np.abs(ours - np.array([theirs[q] for q in queries]))))
        print(f"  ratio: satcal is {best['pytrec_eval'] / best['satcal']:.2f}x faster, best against best "
              f"(median of paired trials {np.median(ratios):.2f}x; goal >= 2x); max |difference| {diff:.1e} {note()}")


if __name__ == "__main__":
    main()
