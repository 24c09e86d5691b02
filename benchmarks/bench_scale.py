"""Scale benchmarks (issue 14), printed in one run; figures go to docs/benchmarks.md.

1. the analysis of an external study at 4,400 and at 220,000 answers (no bootstrap, with the
   model check): wall time, the growth ratio (goal: at most 2x for 50x the answers) and the
   peak memory of each run, measured in a fresh process;
2. 1,000 bootstrap replicates at both sizes;
3. ``import satcal`` and ``satcal --help`` start-up times (goal: well under a second);
4. the peak memory of scoring 10,000,000 lists under the 36 formulations (goal: 4 GB), and of
   ingesting a 1,000,000-row result file (goal: 2 GB).

    python benchmarks/bench_scale.py [--quick]

The answers are the embedded ECIR 2015 examples resampled with replacement (so examples are
answered several times, as in a study with many answers per example), with 30% of the answers
replaced by a uniformly drawn code: a stand-in for a large study, not real data.
"""
from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from _context import note  # BLAS threads and load beside each figure

HERE = Path(__file__).resolve().parent


def make_external_study(n_answers: int, out_dir: Path, seed: int = 0) -> tuple[Path, Path]:
    """Write ``answers.csv`` (an external study) and ``judgments.tsv``; return both paths."""
    import satcal
    from satcal.ingest import ANSWER_CODES

    study = satcal.load_ecir2015()
    ex = study.examples
    rng = np.random.default_rng(seed)
    rows = rng.integers(0, len(ex), n_answers)
    cols = ["query", *[f"a{i}" for i in range(1, 6)], *[f"b{i}" for i in range(1, 6)]]
    table = ex.iloc[rows][cols + ["answer"]].reset_index(drop=True)
    noisy = rng.random(n_answers) < 0.3
    table.loc[noisy, "answer"] = np.asarray(ANSWER_CODES, dtype=object)[rng.integers(0, 4, noisy.sum())]
    out_dir.mkdir(parents=True, exist_ok=True)
    answers = out_dir / f"answers-{n_answers}.csv"
    table.to_csv(answers, index=False)
    judgments = out_dir / "judgments.tsv"
    from satcal.datasets import ecir2015_file
    judgments.write_bytes(ecir2015_file("judgments.tsv").read_bytes())
    return answers, judgments


def _child(code: str) -> dict:
    """Run ``code`` in a fresh interpreter; it prints a JSON dict. Adds peak RSS (MB)."""
    wrapped = code + "\nimport resource, json as _j\nprint(_j.dumps({**RESULT, 'peak_mb': " \
        "resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))"
    out = subprocess.run([sys.executable, "-c", wrapped], capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def bench_analysis(answers: Path, judgments: Path, bootstrap: int) -> dict:
    code = f"""
import time
from satcal import read_judgments, read_external_study, calibrate
t0 = time.perf_counter()
j = read_judgments({str(judgments)!r})
s = read_external_study({str(answers)!r}, j)
t1 = time.perf_counter()
r = calibrate(s, bootstrap={bootstrap}, seed=1, sat_model="published")
t2 = time.perf_counter()
RESULT = {{'read_s': t1 - t0, 'calibrate_s': t2 - t1, 'b1_lin_const': float(r.bias.set_index('formulation').loc['lin-const', 'b1'])}}
"""
    return _child(code)


def bench_startup(repeat: int = 5) -> dict:
    def best(cmd):
        times = []
        for _ in range(repeat):
            t = time.perf_counter()
            subprocess.run(cmd, capture_output=True, check=True)
            times.append(time.perf_counter() - t)
        return min(times)
    return {"python_empty_s": best([sys.executable, "-c", "pass"]),
            "import_satcal_s": best([sys.executable, "-c", "import satcal"]),
            "satcal_help_s": best([sys.executable, "-m", "satcal", "--help"]),
            "satcal_version_s": best([sys.executable, "-m", "satcal", "--version"])}


def bench_score_memory(n_lists: int, dtype: str) -> dict:
    code = f"""
import time, numpy as np
from satcal.measures import score_lists
rng = np.random.default_rng(0)
levels = rng.integers(0, 3, size=({n_lists}, 5), dtype=np.int8)
t = time.perf_counter()
phi = score_lists(levels, dtype=np.{dtype})
RESULT = {{'seconds': time.perf_counter() - t, 'output_mb': phi.nbytes / 2**20}}
"""
    return _child(code)


def make_ingest_workspace(root: Path, n_rows: int, seed: int = 0) -> tuple[Path, Path]:
    """A workspace (embedded judgments, generic CSV batch) and an ``n_rows`` result file: its
    items answered by many workers, some rows repeated (duplicates are rejects, as in life)."""
    import pandas as pd
    from satcal import Workspace
    from satcal.datasets import ecir2015_file
    from satcal.ingest import ANSWER_CODES

    ws = Workspace.init(root / "ws", ecir2015_file("judgments.tsv"), platform="csv")
    ws.generate()
    ws.export()
    items = ws.table("key.csv")["item_id"].to_numpy()
    rng = np.random.default_rng(seed)
    workers = np.array([f"w{i:05d}" for i in range(max(n_rows // 400, 1))], dtype=object)
    table = pd.DataFrame({"item_id": items[rng.integers(0, items.size, n_rows)],
                          "worker_id": workers[rng.integers(0, workers.size, n_rows)],
                          "answer": np.asarray(ANSWER_CODES, dtype=object)[rng.integers(0, 4, n_rows)],
                          "submitted_at": "2026-11-01T10:00:00Z",
                          "row_id": [f"r{i}" for i in range(n_rows)]})
    results = root / f"results-{n_rows}.csv"
    table.to_csv(results, index=False)
    return ws.path, results


def bench_ingest_memory(ws: Path, results: Path) -> dict:
    code = f"""
import time
from satcal import Workspace
t = time.perf_counter()
rep = Workspace.open({str(ws)!r}).ingest([{str(results)!r}], platform="csv", threshold=0.0)
RESULT = {{'seconds': time.perf_counter() - t, 'answers': len(rep.answers), 'rejects': len(rep.rejects)}}
"""
    return _child(code)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller sizes, for a smoke run")
    args = parser.parse_args(argv)
    small, large = (4_400, 22_000) if args.quick else (4_400, 220_000)
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        print("1. analysis of an external study, no bootstrap (fresh process each)")
        res = {}
        for n in (small, large):
            answers, judgments = make_external_study(n, tmp)
            res[n] = bench_analysis(answers, judgments, bootstrap=0)
            r = res[n]
            print(f"   {n:>7,} answers: read {r['read_s']:.2f} s, calibrate {r['calibrate_s']:.2f} s, "
                  f"peak {r['peak_mb']:.0f} MB, b1(lin-const) = {r['b1_lin_const']:.6f} {note()}")
        ratio = res[large]["calibrate_s"] / res[small]["calibrate_s"]
        print(f"   growth ratio {large // small}x answers -> {ratio:.2f}x time (goal <= 2)")
        print("2. with 1,000 bootstrap replicates")
        for n in (small, large):
            answers, judgments = make_external_study(n, tmp)
            r = bench_analysis(answers, judgments, bootstrap=1000)
            print(f"   {n:>7,} answers: calibrate {r['calibrate_s']:.2f} s, peak {r['peak_mb']:.0f} MB {note()}")
    print("3. start-up (best of 5, fresh process)")
    s = bench_startup()
    print(f"   python -c pass {s['python_empty_s']:.3f} s; import satcal {s['import_satcal_s']:.3f} s; "
          f"satcal --help {s['satcal_help_s']:.3f} s; satcal --version {s['satcal_version_s']:.3f} s {note()}")
    n_lists = 1_000_000 if args.quick else 10_000_000
    print(f"4. scoring {n_lists:,} lists x 36 formulations")
    for dtype in ("float64", "float32"):
        r = bench_score_memory(n_lists, dtype)
        print(f"   {dtype}: {r['seconds']:.2f} s, output {r['output_mb']:.0f} MB, peak {r['peak_mb']:.0f} MB "
                  f"{note()}")
    n_rows = 100_000 if args.quick else 1_000_000
    print(f"5. ingest of a {n_rows:,}-row result file (generic CSV; goal: peak under 2 GB)")
    with tempfile.TemporaryDirectory() as tmp:
        ws, results = make_ingest_workspace(Path(tmp), n_rows)
        r = bench_ingest_memory(ws, results)
        print(f"   {r['seconds']:.1f} s, {r['answers']:,} answers + {r['rejects']:,} rejects, "
              f"peak {r['peak_mb']:.0f} MB {note()}")


if __name__ == "__main__":
    main()
