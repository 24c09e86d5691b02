"""Ingest and external-study reading against their peers (issue 23), printed in one run.

1. ``ingest`` of an N-row generic CSV result file (default 1,000,000 rows) into a fresh
   workspace, against ``pandas.read_csv`` of the same file. First whole processes, as a user
   waits for them: ``python -m satcal ingest WS FILE`` against
   ``python -c "import pandas; pandas.read_csv(FILE)"``, start-up and imports included, CPU
   (user + system, the operating system's accounting of each child) and wall time, and their
   ratio pair by pair (goal: ingest within 3x the peer); whether pyarrow wrote the tables is
   printed beside it. Then inside one process: the ``ingest`` call against the ``read_csv``
   call, and the peak memory the ingest adds per row (resident set at its peak minus before
   the ingest began; goal: under 1 KB per row);
2. ``satcal analyze --answers FILE --judgments FILE`` (no bootstrap) at 4,400 and at
   2,000,000 answers, whole process, and ``read_external_study`` + ``calibrate`` inside one
   process: CPU seconds of each size and their ratio (goal: at most 2x for the larger).

Each figure is taken in a fresh interpreter, the two sides in turn (A B A B ...; the whole
process's sides in reverse order every other round, B A after A B), the median of ``--repeat``
runs quoted; the BLAS setting and the machine load are printed beside it.

    python benchmarks/bench_ingest.py [--rows N] [--answers N] [--repeat R] [--quick] [--against SRC]
    python benchmarks/bench_ingest.py --profile [--rows N]      # cProfile of one ingest

The result file is the embedded ECIR 2015 batch's items answered by many workers (one per 400
rows), answers drawn uniformly from the four codes, every row with a submission time and a row
id; repeated (worker, example) pairs become duplicate rejects, as in a real crowd.
"""
from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from _context import note  # BLAS threads and load beside each figure

HERE = Path(__file__).resolve().parent

_MEASURE = """
import json, os, resource, sys, time
def rss_kb():
    with open('/proc/self/status') as f:
        for line in f:
            if line.startswith('VmRSS:'):
                return int(line.split()[1])
    return 0
def peak_kb():
    with open('/proc/self/status') as f:
        for line in f:
            if line.startswith('VmHWM:'):
                return int(line.split()[1])
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
def reset_peak():
    try:
        with open('/proc/self/clear_refs', 'w') as f:
            f.write('5')  # resets VmHWM to the current resident set (Linux >= 4.0)
    except OSError:
        pass
"""

_READ_CSV = _MEASURE + """
import pandas as pd
reset_peak(); before = rss_kb()
t0, c0 = time.perf_counter(), time.process_time()
table = pd.read_csv(sys.argv[1]) if sys.argv[2] == 'default' else pd.read_csv(sys.argv[1], dtype=object, na_filter=False)
wall, cpu = time.perf_counter() - t0, time.process_time() - c0
print(json.dumps({'wall': wall, 'cpu': cpu, 'rows': len(table), 'added_kb': peak_kb() - before}))
"""

_INGEST = _MEASURE + """
import shutil, tempfile
from pathlib import Path
from satcal import Workspace
with tempfile.TemporaryDirectory() as tmp:
    ws_dir = Path(tmp) / 'ws'
    shutil.copytree(sys.argv[1], ws_dir)  # a fresh workspace each run: a second ingest is a no-op
    ws = Workspace.open(ws_dir)
    reset_peak(); before = rss_kb()
    t0, c0 = time.perf_counter(), time.process_time()
    rep = ws.ingest([sys.argv[2]], platform='csv', threshold=0.0)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    print(json.dumps({'wall': wall, 'cpu': cpu, 'rows': len(rep.answers) + len(rep.rejects),
                      'answers': len(rep.answers), 'rejects': len(rep.rejects),
                      'added_kb': peak_kb() - before}))
"""

_ANALYZE = """
import json, resource, subprocess, sys, tempfile
from pathlib import Path
with tempfile.TemporaryDirectory() as tmp:
    subprocess.run([sys.executable, '-m', 'satcal', 'analyze', '--answers', sys.argv[1],
                    '--judgments', sys.argv[2], '--bootstrap', '0', '--jobs', '1', '--quiet',
                    '--out', str(Path(tmp) / 'out')], check=True, capture_output=True)
ru = resource.getrusage(resource.RUSAGE_CHILDREN)
print(json.dumps({'cpu': ru.ru_utime + ru.ru_stime, 'peak_mb': ru.ru_maxrss / 1024}))
"""

_READ_CALIBRATE = _MEASURE + """
from satcal import calibrate, read_external_study, read_judgments
c0 = time.process_time()
study = read_external_study(sys.argv[1], read_judgments(sys.argv[2]))
c1 = time.process_time()
result = calibrate(study, bootstrap=0, seed=1)
c2 = time.process_time()
print(json.dumps({'read_cpu': c1 - c0, 'calibrate_cpu': c2 - c1, 'cpu': c2 - c0,
                  'b1': float(result.bias.set_index('formulation').loc['lin-const', 'b1'])}))
"""


def _run(code: str, *args) -> dict:
    out = subprocess.run([sys.executable, "-c", code, *map(str, args)], capture_output=True,
                         text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def _median(runs: list[dict], key: str) -> float:
    return statistics.median(r[key] for r in runs)


def _child(argv: list[str], env: dict | None = None) -> dict:
    """Run ``argv`` to its end: its wall time, and its CPU time (user + system) as the
    operating system accounts the finished child (its peak resident set is not quoted: a
    forked child starts from this process's, which holds the generated file)."""
    import os
    import time
    t0 = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    err = proc.stderr.read().decode()
    proc.stderr.close()
    if proc.returncode:
        raise SystemExit(f"{' '.join(argv)} failed: {err.strip().splitlines()[-1] if err.strip() else proc.returncode}")
    return {"wall": wall, "cpu": usage.ru_utime + usage.ru_stime, "user": usage.ru_utime,
            "sys": usage.ru_stime}


def arrow_writer() -> str:
    """Whether satcal's CSV writer can use pyarrow here (the ``fast`` extra, 14 or later)."""
    try:
        import pyarrow
    except ImportError:
        return "pyarrow absent: tables written by pandas"
    if int(pyarrow.__version__.split(".")[0]) < 14:
        return f"pyarrow {pyarrow.__version__} < 14: tables written by pandas"
    return f"pyarrow {pyarrow.__version__}: result file read and large tables written through Arrow"


def bench_whole_process(ws: Path, results: Path, repeat: int, against: str | None = None) -> None:
    """``satcal ingest`` and the peer as whole processes, in turn, a fresh workspace each;
    with ``against`` (another checkout's ``src``), that code's ingest in turn too."""
    import os
    peer = [sys.executable, "-c", f"import pandas; pandas.read_csv({str(results)!r})"]
    sides = {"ingest": None, **({"against": dict(os.environ, PYTHONPATH=str(against))} if against else {})}
    runs = {"peer": [], **{name: [] for name in sides}}
    order = ["peer", *sides]
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(repeat):
            # the sides in turn, the order reversed every other round: a run that follows
            # another gets the pages that one freed (already backed, cheaper to touch on this
            # virtual machine), so a fixed order favours whichever side runs later
            for name in (order if i % 2 == 0 else order[::-1]):
                if name == "peer":
                    runs["peer"].append(_child(peer))
                    continue
                copy = Path(tmp) / f"ws{i}-{name}"
                shutil.copytree(ws, copy)  # outside the timing: a second ingest of a file is a no-op
                runs[name].append(_child([sys.executable, "-m", "satcal", "ingest", str(copy), str(results),
                                          "--platform", "csv", "--threshold", "0"], sides[name]))
                shutil.rmtree(copy)
    labels = {"peer": 'python -c "import pandas; pandas.read_csv(FILE)"', "ingest": "python -m satcal ingest WS FILE",
              "against": f"the same with PYTHONPATH={against}"}
    for name in runs:
        r = runs[name]
        print(f"   {labels[name]}: {_median(r, 'cpu'):.2f} s CPU ({_median(r, 'user'):.2f} user + "
              f"{_median(r, 'sys'):.2f} system), {_median(r, 'wall'):.2f} s wall {note()}")
    if against:
        other = sorted(o["cpu"] / p["cpu"] for o, p in zip(runs["against"], runs["peer"]))
        mine = sorted(o["cpu"] / a["cpu"] for o, a in zip(runs["ingest"], runs["against"]))
        print(f"   ratio {against} / peer: {statistics.median(other):.2f}x CPU ({other[0]:.2f}-{other[-1]:.2f}); "
              f"this ingest / that one: {statistics.median(mine):.2f}x CPU ({mine[0]:.2f}-{mine[-1]:.2f})")
    cpu = sorted(o["cpu"] / p["cpu"] for o, p in zip(runs["ingest"], runs["peer"]))
    wall = sorted(o["wall"] / p["wall"] for o, p in zip(runs["ingest"], runs["peer"]))
    print(f"   ratio ingest / peer, whole process: {statistics.median(cpu):.2f}x CPU "
          f"({cpu[0]:.2f}-{cpu[-1]:.2f}), {statistics.median(wall):.2f}x wall, pair by pair over "
          f"{repeat} pairs (goal <= 3); {arrow_writer()}")


def bench_ingest(ws: Path, results: Path, repeat: int) -> None:
    peers = {"default": "pandas.read_csv(file)", "text": "pandas.read_csv(file, dtype=object, na_filter=False)"}
    runs = {"default": [], "text": [], "ingest": []}
    for _ in range(repeat):  # in turn, so that a change in the machine's load hits every side
        for name in peers:
            runs[name].append(_run(_READ_CSV, results, name))
        runs["ingest"].append(_run(_INGEST, ws, results))
    ours = runs["ingest"]
    rows = ours[0]["rows"]
    wall, cpu = _median(ours, "wall"), _median(ours, "cpu")
    for name, label in peers.items():
        print(f"   {label}: {_median(runs[name], 'wall'):.2f} s wall, {_median(runs[name], 'cpu'):.2f} s CPU, "
              f"{_median(runs[name], 'added_kb') * 1024 / rows:.0f} B/row {note()}")
    print(f"   satcal ingest: {wall:.2f} s wall, {cpu:.2f} s CPU ({ours[0]['answers']:,} answers + "
          f"{ours[0]['rejects']:,} rejects), {_median(ours, 'added_kb') * 1024 / rows:.0f} B/row peak "
          f"(goal < 1024) {note()}")
    for name, label in peers.items():
        ratios = sorted(o["cpu"] / p["cpu"] for o, p in zip(ours, runs[name]))
        print(f"   ratio ingest / {label}: {wall / _median(runs[name], 'wall'):.2f}x wall, "
              f"{cpu / _median(runs[name], 'cpu'):.2f}x CPU (pairwise CPU {ratios[0]:.2f}-{ratios[-1]:.2f}; "
              f"goal <= 3) over {repeat} runs")


def bench_external(tmp: Path, sizes: tuple[int, int], repeat: int) -> None:
    from bench_scale import make_external_study
    files = {n: make_external_study(n, tmp / str(n)) for n in sizes}
    for label, code in (("satcal analyze --answers (whole process, report included)", _ANALYZE),
                        ("read_external_study + calibrate (one process)", _READ_CALIBRATE)):
        print(f"   {label}")
        runs = {n: [] for n in sizes}
        for _ in range(repeat):
            for n in sizes:
                runs[n].append(_run(code, *files[n]))
        for n in sizes:
            extra = (f", read {_median(runs[n], 'read_cpu'):.2f} s + calibrate "
                     f"{_median(runs[n], 'calibrate_cpu'):.2f} s, b1(lin-const) {runs[n][0]['b1']:.6f}"
                     if "read_cpu" in runs[n][0] else f", peak {_median(runs[n], 'peak_mb'):.0f} MB")
            print(f"     {n:>9,} answers: {_median(runs[n], 'cpu'):.2f} s CPU{extra} {note()}")
        small, large = sizes
        print(f"     ratio {large:,} / {small:,} answers: "
              f"{_median(runs[large], 'cpu') / _median(runs[small], 'cpu'):.2f}x CPU (goal <= 2)")


def profile_ingest(ws: Path, results: Path) -> None:
    import cProfile
    import pstats
    from satcal import Workspace
    with tempfile.TemporaryDirectory() as tmp:
        shutil.copytree(ws, Path(tmp) / "ws")
        prof = cProfile.Profile()
        prof.enable()
        Workspace.open(Path(tmp) / "ws").ingest([results], platform="csv", threshold=0.0)
        prof.disable()
    st = pstats.Stats(prof)
    st.sort_stats("cumulative").print_stats(40)
    st.sort_stats("tottime").print_stats(25)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000, help="rows of the result file")
    parser.add_argument("--answers", type=int, default=2_000_000, help="answers of the large external study")
    parser.add_argument("--repeat", type=int, default=3, help="runs of each side (median quoted)")
    parser.add_argument("--quick", action="store_true", help="100,000 rows and 220,000 answers, 1 run")
    parser.add_argument("--profile", action="store_true", help="profile one ingest instead")
    parser.add_argument("--skip", choices=["ingest", "external"], help="leave one part out")
    parser.add_argument("--against", metavar="SRC", help="another checkout's src/ (before a change): its whole-"
                        "process ingest timed in turn with this one's and the peer's")
    args = parser.parse_args(argv)
    if args.quick:
        args.rows, args.answers, args.repeat = 100_000, 220_000, 1
    from bench_scale import make_ingest_workspace
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        if args.profile or args.skip != "ingest":
            ws, results = make_ingest_workspace(tmp, args.rows)
            if args.profile:
                return profile_ingest(ws, results)
            print(f"1. ingest of a {args.rows:,}-row generic CSV result file, against pandas.read_csv "
                  "of the same file (fresh process each, medians)")
            print("   whole process (start-up and imports included):")
            bench_whole_process(ws, results, args.repeat, args.against)
            print("   inside one process (the calls alone):")
            bench_ingest(ws, results, args.repeat)
        if args.skip != "external":
            print(f"2. analysis of an external study, 4,400 against {args.answers:,} answers, no bootstrap "
                  "(fresh process each, medians of CPU time)")
            bench_external(tmp, (4_400, args.answers), args.repeat)


if __name__ == "__main__":
    main()
