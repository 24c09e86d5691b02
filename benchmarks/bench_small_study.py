"""Issue 23: a small study's bootstrap must not cost more per replicate than a large one's.

Builds a 60-answer study as a user would (``satcal init`` on the ECIR 2015 judgments with
``--min-per-cell 2``, two answers per example, ``generate``, ``export``, ``simulate``,
``ingest``: workers and examples, so the pigeonhole bootstrap), then times, in a fresh process
on one BLAS thread, ``calibrate`` as ``satcal analyze`` runs it (both satisfaction models, the
standardised intervals, one process) with B replicates, on it and on the ECIR 2015 answers
(4,115). The cost per replicate is the CPU of the bootstrap's stages (timed by wrapping
``bootstrap_calibration``, ``bootstrap_joint`` and the replicates' ``standardised_indicators``)
over B: the difference of two whole runs drowned in the full-sample fits' noise. With
``--against SRC`` (another checkout's ``src``, the code before a change) the same runs use that
code too, and the bias tables of both are compared (sha256 of ``bias.to_csv()``).

On the small study every formulation's tau is weakly identified (``joint.weak_tau``), so each
replicate re-fits the shared-effect model by L-BFGS-B; on ECIR 2015 none is, one Newton step.

    OPENBLAS_NUM_THREADS=1 python benchmarks/bench_small_study.py [B] [--against SRC]
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from _context import note  # BLAS threads and load beside each figure

SRC = Path(__file__).resolve().parents[1] / "src"

CHILD = r"""
import hashlib, json, sys, time
import satcal.analysis.bootstrap as bootstrap
import satcal.analysis.standardise as standardise
from satcal.analysis import calibrate
which, B = sys.argv[1], int(sys.argv[2])
if which == "ecir2015":
    from satcal.datasets import load_ecir2015
    study, forms = load_ecir2015(), None
else:
    from satcal.study import Study
    ws = Study.open(which)
    study, forms = ws.study_data(), ws.formulations()
cpu = {"curves_and_joint": 0.0, "joint": 0.0, "standardised": 0.0}

def clocked(func, key, when=lambda kw: True):
    def wrapper(*args, **kw):
        t = time.process_time()
        try:
            return func(*args, **kw)
        finally:
            if when(kw):
                cpu[key] += time.process_time() - t
    return wrapper

# calibrate imports these from their modules when it calls them, bootstrap_calibration calls
# bootstrap_joint by its module's name: the wrappers time the bootstrap's stages
bootstrap.bootstrap_calibration = clocked(bootstrap.bootstrap_calibration, "curves_and_joint")
bootstrap.bootstrap_joint = clocked(bootstrap.bootstrap_joint, "joint")
standardise.standardised_indicators = clocked(standardise.standardised_indicators, "standardised",
                                              lambda kw: kw.get("centre") is not None)
t = time.process_time()
r = calibrate(study, formulations=forms, bootstrap=B, seed=2015, n_jobs=1, sat_model="both")
print(json.dumps({"answers": int(len(study.examples)), "total": time.process_time() - t, **cpu,
                  "bias_sha256": hashlib.sha256(r.bias.to_csv().encode()).hexdigest()}))
"""


def small_study(root: Path, seed: int = 2015, answers_per_example: int = 2, min_per_cell: int = 2) -> Path:
    """A simulated study in ``root/ws``, built with the CLI (the defaults: 60 answers)."""
    from satcal.datasets import ecir2015_file
    ws = root / "ws"
    env = dict(os.environ, PYTHONPATH=str(SRC))

    def run(*args):
        """One satcal command in a subprocess (this checkout's code)."""
        subprocess.run([sys.executable, "-m", "satcal", *args], check=True, env=env, capture_output=True)
    run("init", str(ws), "--judgments", str(ecir2015_file("judgments.tsv")), "--min-per-cell", str(min_per_cell),
        "--platform", "csv", "--seed", str(seed))
    toml = ws / "study.toml"
    toml.write_text(toml.read_text().replace("answers_per_example = 1", f"answers_per_example = {answers_per_example}"))
    for verb in ("generate", "export", "simulate"):
        run(verb, str(ws))
    run("ingest", str(ws), *map(str, (ws / "simulated").glob("*results*")))
    return ws


def timed(which: str, B: int, src: Path) -> dict:
    """CPU of calibrate with B replicates and of its bootstrap's stages, in a fresh process on
    ``src``."""
    env = dict(os.environ, PYTHONPATH=str(src), OPENBLAS_NUM_THREADS="1")
    done = subprocess.run([sys.executable, "-c", CHILD, which, str(B)], check=True, env=env,
                          capture_output=True, text=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("B", type=int, nargs="?", default=50, help="bootstrap replicates (default 50)")
    parser.add_argument("--against", metavar="SRC", help="another checkout's src/ (before a change)")
    args = parser.parse_args()
    sides = {"this code": SRC, **({f"--against {args.against}": Path(args.against)} if args.against else {})}
    with tempfile.TemporaryDirectory() as tmp:
        ws = small_study(Path(tmp))
        runs = {(side, which): timed(which, args.B, src) for side, src in sides.items()
                for which in (str(ws), "ecir2015")}
    # the bootstrap's CPU: its curves and joint model, and the standardised indicators' replicates
    per = {k: (r["curves_and_joint"] + r["standardised"]) / args.B for k, r in runs.items()}
    print(f"calibrate as satcal analyze runs it, B = {args.B}, one process; CPU per replicate of the "
          f"bootstrap (curves, joint model, standardised indicators) {note()}")
    for side in sides:
        for which in (str(ws), "ecir2015"):
            r = runs[side, which]
            name = f"{r['answers']}-answer study" if which != "ecir2015" else f"ECIR 2015 ({r['answers']:,} answers)"
            print(f"  {side}, {name}: {1000 * per[side, which]:.0f} ms (joint model "
                  f"{1000 * r['joint'] / args.B:.0f}, standardised {1000 * r['standardised'] / args.B:.0f}, "
                  f"curves {1000 * (r['curves_and_joint'] - r['joint']) / args.B:.0f}); whole calibrate {r['total']:.1f} s")
        print(f"  {side}: small / large {per[side, str(ws)] / per[side, 'ecir2015']:.2f}x")
    if args.against:
        before = f"--against {args.against}"
        for which, name in ((str(ws), "small study"), ("ecir2015", "ECIR 2015")):
            same = runs["this code", which]["bias_sha256"] == runs[before, which]["bias_sha256"]
            print(f"  {name}: before / now {per[before, which] / per['this code', which]:.2f}x CPU a replicate; "
                  f"joint model {runs[before, which]['joint'] / runs['this code', which]['joint']:.2f}x; "
                  f"bias table {'identical' if same else 'DIFFERENT'} to the code before")

if __name__ == "__main__":
    main()
