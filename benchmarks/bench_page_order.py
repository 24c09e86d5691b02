"""The hosted adaptive study's capped page order (``[design] cell_cap``, issue 24): its CPU per
refit against the uncapped order (the pages sorted by priority, what the refit did before),
printed in one run.

Random pages of ``--per-page`` examples, each in a phi A, phi B and |dphi| cell (10 bins) of
``--formulations`` formulations the cap reads; three skews, none, half and 90% of the examples in
one |dphi| cell (the cap then binds on every run). Best of ``--trials``, CPU time of this process. The order is
worked out in the server's refit process, never on a participant's claim: this is what a refit
pays, beside the joint fits (0.78 s warm on the ECIR 2015 answers, docs/adaptive.md).

    python benchmarks/bench_page_order.py [--pages 4000] [--per-page 5] [--formulations 9] [--trials 3]
"""
from __future__ import annotations

import argparse
import time

import numpy as np


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--pages", type=int, default=4000)
    parser.add_argument("--per-page", type=int, default=5)
    parser.add_argument("--formulations", type=int, default=9)
    parser.add_argument("--wave-pages", type=int, default=10)
    parser.add_argument("--trials", type=int, default=3)
    args = parser.parse_args()
    from satcal.adaptive_study import capped_page_order
    rng = np.random.default_rng(1)
    n, f = args.pages * args.per_page, args.formulations
    pages = np.repeat(np.arange(1, args.pages + 1), args.per_page)
    priority = {int(p): float(v) for p, v in zip(range(1, args.pages + 1), rng.random(args.pages))}
    for skew in (0.0, 0.5, 0.9):
        cells = rng.integers(0, 10, (n, 3 * f)) + np.arange(3 * f) * 10
        cells[rng.random(n) < skew, 2 * f] = 2 * f * 10   # one crowded |dphi| cell
        best = {}
        for name, share in (("uncapped", 1.0), ("capped", 0.25)):
            times = []
            for _ in range(args.trials):
                t = time.process_time()
                capped_page_order(priority, pages, cells, args.wave_pages, share)
                times.append(time.process_time() - t)
            best[name] = min(times)
        print(f"{args.pages} pages, {f} formulations, skew {skew}: capped {best['capped']:.3f} s CPU, "
              f"uncapped {best['uncapped']:.4f} s ({best['capped'] / max(best['uncapped'], 1e-9):.0f}x)")


if __name__ == "__main__":
    main()
