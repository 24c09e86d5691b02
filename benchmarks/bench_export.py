"""Exporting one batch to every platform (issue 26), printed in one run.

A study on the embedded ECIR 2015 judgments with a documents table (titles), generated with
``min_per_cell`` examples per cell (100 gives about 1,050 items with the traps), then
``satcal export --platform P`` for each platform, each in a fresh process (imports included),
best of ``--trials``. Label Studio's export renders every item's HTML from the item templates:
it took 138 s on a larger batch (30.4 s on this one) when a Jinja2 environment was built per
item; the environment is now built once.

    python benchmarks/bench_export.py [--min-per-cell 100] [--trials 3]
"""
from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--min-per-cell", type=int, default=100)
    parser.add_argument("--trials", type=int, default=3)
    args = parser.parse_args()
    import pandas as pd
    from satcal.datasets import load_ecir2015
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        table = load_ecir2015().judgments.table
        table.to_csv(d / "qrels.tsv", sep="\t", index=False)
        docs = pd.DataFrame({"doc": table["doc"].unique()})
        docs["title"] = "Title of " + docs["doc"]
        docs.to_csv(d / "docs.csv", index=False)
        study = d / "study"
        run = lambda *a: subprocess.run([sys.executable, "-m", "satcal", *a], check=True,
                                        capture_output=True, text=True)
        run("init", str(study), "--judgments", str(d / "qrels.tsv"), "--documents", str(d / "docs.csv"),
            "--min-per-cell", str(args.min_per_cell))
        run("generate", str(study), "-q")
        items = None
        print(f"{'platform':<12} {'export, best of ' + str(args.trials):>18}")
        for platform in ("appen", "toloka", "labelstudio", "csv", "serve"):
            times = []
            for _ in range(args.trials):
                t0 = time.perf_counter()
                run("export", str(study), "--platform", platform, "--force")
                times.append(time.perf_counter() - t0)
            items = items or sum(1 for _ in open(study / "items.csv")) - 1
            print(f"{platform:<12} {min(times):>16.2f} s")
        print(f"({items} items)")


if __name__ == "__main__":
    main()
