"""Issue 2 benchmarks, printed in one run (figures recorded in docs/benchmarks.md).

1. classic nDCG@5 over 10,000 queries x 100 retrieved documents: satcal vs pytrec_eval on the
   same input (goal: satcal >= 10x faster);
2. all 36 study formulations over 1,000,000 lists of 5 (goal <= 1 s on 2 cores);
3. the full analysis of the embedded ECIR 2015 answers.

    python benchmarks/bench_core.py
"""
import time

import numpy as np

from satcal.measures import formulation, score_lists, study_formulations
from _context import arguments, note  # BLAS threads and load beside each figure


def best_of(fn, repeat=3):
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t)
    return min(times), out


def bench_ndcg(n_queries=10_000, n_docs=100, k=5, seed=0):
    rng = np.random.default_rng(seed)
    levels = rng.integers(0, 4, size=(n_queries, n_docs))
    scores = rng.permutation(n_queries * n_docs).reshape(n_queries, n_docs).astype(float)
    qids = [f"q{i}" for i in range(n_queries)]
    docids = [f"d{j}" for j in range(n_docs)]
    qrels = {q: {d: int(l) for d, l in zip(docids, row)} for q, row in zip(qids, levels)}
    run = {q: {d: float(s) for d, s in zip(docids, row)} for q, row in zip(qids, scores)}
    ndcg = formulation("lin-log2", normalization="ideal")

    def ours():
        top = np.argpartition(scores, n_docs - k, axis=1)[:, n_docs - k:]
        order = np.take_along_axis(top, np.argsort(-np.take_along_axis(scores, top, 1), axis=1), 1)
        ranked = np.take_along_axis(levels, order, 1)
        return ndcg.score(ranked, pools=levels, query_index=np.arange(n_queries))

    t_ours, phi = best_of(ours)
    try:
        import pytrec_eval
    except ImportError:
        print("1. nDCG@5: pytrec_eval not installed (pip install -e '.[test]'); satcal "
              f"{t_ours:.3f} s")
        return
    def theirs():
        ev = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg_cut.5"})
        return ev.evaluate(run)
    t_theirs, res = best_of(theirs)
    ev = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg_cut.5"})
    t_eval_only, _ = best_of(lambda: ev.evaluate(run))
    diff = np.abs(phi - np.array([res[q]["ndcg_cut_5"] for q in qids])).max()
    print(f"1. nDCG@5, {n_queries} queries x {n_docs} docs: satcal {t_ours:.3f} s, pytrec_eval "
          f"{t_theirs:.3f} s (evaluate() alone {t_eval_only:.3f} s) -> {t_theirs / t_ours:.1f}x "
          f"({t_eval_only / t_ours:.1f}x vs evaluate alone); max |diff| = {diff:.1e} {note()}")


def bench_36(n=1_000_000, k=5, seed=0):
    levels = np.random.default_rng(seed).integers(0, 3, size=(n, k))
    forms = study_formulations()
    t, out = best_of(lambda: score_lists(levels, forms, n_levels=3))

    def write_floor():  # what writing the result alone costs: allocate and fill (n, 36)
        floor = np.empty((n, len(forms)))
        floor.fill(1.0)
        return floor

    t_floor, _ = best_of(write_floor)
    print(f"2. 36 formulations x {n:,} lists of {k}: {t:.3f} s (goal <= 1 s), "
          f"{out.size / t / 1e6:.0f} M scores/s; writing the result alone {t_floor:.3f} s -> "
          f"{t / t_floor:.1f}x the write floor (goal <= 3x) {note()}")


def bench_analysis():
    from satcal.analysis import calibrate
    from satcal.datasets import load_ecir2015
    t0 = time.perf_counter()
    study = load_ecir2015()
    t1 = time.perf_counter()
    calibrate(study, model_check_folds=0, bootstrap=0, seed=0, sat_model="published")
    t2 = time.perf_counter()
    calibrate(study, bootstrap=0, seed=0, sat_model="published")
    t3 = time.perf_counter()
    print(f"3. ECIR 2015 analysis: load {t1 - t0:.2f} s, 72 fits + points + bias + ANOVA "
          f"{t2 - t1:.2f} s, with the 5-fold model check {t3 - t2:.2f} s {note()}")


if __name__ == "__main__":
    arguments(__doc__)
    bench_ndcg()
    bench_36()
    bench_analysis()
