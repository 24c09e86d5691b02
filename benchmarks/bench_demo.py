"""Issue 23, item 3: ``satcal demo --out DIR -q`` under 45 s of wall time on an idle 2-core
machine. Runs the demo as a fresh process (imports included) and prints its wall time against
the goal, the CPU time (user + system) of the whole process tree (every worker and the second
process reaped: ``getrusage(RUSAGE_CHILDREN)``), and CPU / wall, the cores kept busy on average
(the demo's parts run side by side: up to 2 on 2 cores). On a loaded machine the wall time says
little: compare CPU times, and read docs/benchmarks.md for the idle estimate.

    python benchmarks/bench_demo.py [RUNS]
"""
import os
import resource
import subprocess
import sys
import tempfile
import time

from _context import arguments, note

GOAL = 45.0


def one_run() -> tuple[float, float, float]:
    """Wall, user and system seconds of one ``python -m satcal demo --out DIR -q``."""
    with tempfile.TemporaryDirectory() as tmp:
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t = time.perf_counter()
        subprocess.run([sys.executable, "-m", "satcal", "demo", "--out", os.path.join(tmp, "demo"), "-q"],
                       check=True, stdout=subprocess.DEVNULL)
        wall = time.perf_counter() - t
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, after.ru_utime - before.ru_utime, after.ru_stime - before.ru_stime


def main(runs: int) -> None:
    for i in range(runs):
        context = note()
        wall, user, system = one_run()
        cpu = user + system
        print(f"run {i + 1}: wall {wall:.1f} s = {wall / GOAL:.2f}x the {GOAL:.0f} s goal; CPU {cpu:.1f} s "
              f"({user:.1f} user + {system:.1f} system), {cpu / wall:.2f} cores busy on average {context}")


if __name__ == "__main__":
    main(arguments(__doc__, ("RUNS", int, 1, "demo runs, one after the other")).RUNS)
