"""Issue 25.2: writing commands killed with SIGKILL at random instants, and a full disk.

Each command (first ingest, a later ingest, ingest --remove, export --force, generate --force)
is run once without a kill to learn its duration and its outputs, then N times killed at a
uniformly random instant (seeded) within that duration. After each kill the workspace lock is
taken (what every command does first) and the outputs are compared with those before and
after: 'old', 'new' or 'mixed'; then the same command is run again and must finish (exit 0)
with the outputs of the run without a kill.

With --disk (root only: mounts a tmpfs), the workspace is copied to a tmpfs filled to 20 KB
and 200 KB free and every writing command is run: each must succeed or end with exit 1, one
line naming the path, and the workspace unchanged.

    python benchmarks/bench_interrupted.py --kills 8 --disk
"""
from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

SATCAL = [sys.executable, "-m", "satcal"]
INGESTED = ("answers.csv", "rejects.csv", "workers.csv", "traps_report.csv", "raw/index.csv",
            "raw/ingest-settings.json")
EXPORTED = ("key.csv", "items.csv", "batches/keys/batch-1.csv", "batches/csv/items.csv")
GENERATED = ("examples.csv", "traps.csv", "scores.csv", "coverage.csv", "coverage.png", "design.json")


def sh(*args, check=True):
    done = subprocess.run([*SATCAL, *map(str, args)], capture_output=True, text=True)
    if check and done.returncode != 0:
        raise RuntimeError(f"{args}: {done.stderr}")
    return done


def state(path: Path, names) -> dict:
    return {n: (path / n).read_bytes() if (path / n).exists() else None for n in names}


def build(root: Path) -> tuple[Path, Path, Path]:
    from satcal.datasets import load_ecir2015
    study = load_ecir2015()
    qrels = root / "qrels.tsv"
    study.judgments.table.to_csv(qrels, sep="\t", index=False)
    ws = root / "study"
    sh("init", ws, "--judgments", qrels, "--min-per-cell", "10", "--platform", "csv")
    sh("generate", ws, "-q")
    sh("export", ws)
    sh("simulate", ws)
    table = pd.read_csv(ws / "simulated" / "csv-results.csv", dtype=str, keep_default_na=False)
    half = len(table) // 2
    first, second = root / "part0.csv", root / "part1.csv"
    table.iloc[:half].to_csv(first, index=False)
    table.iloc[half:].to_csv(second, index=False)
    return ws, first, second


def edit(ws: Path, old: str, new: str) -> None:
    toml = ws / "study.toml"
    toml.write_text(toml.read_text().replace(old, new))


def kills(ws: Path, first: Path, second: Path, n: int, seed: int, only=()) -> list[dict]:
    rng = np.random.default_rng(seed)
    pristine = ws.parent / "pristine"
    shutil.copytree(ws, pristine)

    def fresh():
        shutil.rmtree(ws)
        shutil.copytree(pristine, ws)

    plans = {
        "first ingest": (lambda: None, ("ingest", ws, first, "--threshold", "0"), INGESTED),
        "later ingest": (lambda: sh("ingest", ws, first, "--threshold", "0"),
                         ("ingest", ws, second, "--threshold", "0"), INGESTED),
        "ingest --remove": (lambda: sh("ingest", ws, first, second, "--threshold", "0"),
                            ("ingest", ws, "--remove", second.name, "--threshold", "0"), INGESTED),
        "export --force": (lambda: edit(ws, "items_per_page = 10", "items_per_page = 7"),
                           ("export", ws, "--force"), EXPORTED),
        "generate --force": (lambda: edit(ws, "seed = 2015", "seed = 7"),
                             ("generate", ws, "--force", "-q"), GENERATED),
    }
    rows = []
    for label, (setup, args, names) in plans.items():
        if only and label not in only:
            continue
        fresh()
        setup()
        before = state(ws, names)
        start = time.monotonic()
        sh(*args)
        took = time.monotonic() - start
        after = state(ws, names)
        counts = {"command": label, "seconds": round(took, 2), "kills": n, "old": 0, "new": 0, "mixed": 0,
                  "next command failed": 0}
        for _ in range(n):
            fresh()
            setup()
            proc = subprocess.Popen([*SATCAL, *map(str, args)], stdout=subprocess.DEVNULL,
                                    stderr=subprocess.DEVNULL)
            time.sleep(float(rng.uniform(0, took)))
            proc.send_signal(signal.SIGKILL)
            proc.wait()
            from satcal.workspace import Workspace
            with Workspace.open(ws).locked():
                pass
            now = state(ws, names)
            counts["old" if now == before else "new" if now == after else "mixed"] += 1
            # the next command: the same one again (a removal that had finished: an ingest of
            # a file already ingested, which changes nothing)
            again = sh(*(("ingest", ws, first, "--threshold", "0") if "--remove" in args and now == after
                         else args), check=False)
            if again.returncode != 0 or state(ws, names) != after:
                counts["next command failed"] += 1
        rows.append(counts)
    return rows


def disk_full(ws: Path, first: Path) -> list[dict]:
    rows = []
    for free_kb in (20, 200):
        mnt = Path(tempfile.mkdtemp(prefix="satcal-full-"))
        used = sum(p.stat().st_size for p in ws.rglob("*") if p.is_file()) // 1024
        if subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={used + free_kb + 4096}k", "tmpfs",
                           str(mnt)]).returncode != 0:
            print("cannot mount a tmpfs here (root needed): disk-full study skipped")
            return rows
        try:
            target = mnt / "study"
            shutil.copytree(ws, target)
            st = os.statvfs(mnt)
            with open(mnt / "filler", "wb") as fh:
                fh.write(b"\0" * max(0, st.f_bavail * st.f_frsize - free_kb * 1024))
            for args in (("ingest", target, first, "--threshold", "0"), ("generate", target, "--force", "-q"),
                         ("export", target, "--force"), ("preview", target, "--force"),
                         ("simulate", target, "--force"), ("analyze", target, "--bootstrap", "0", "-q")):
                files = {p: p.read_bytes() for p in target.rglob("*") if p.is_file()}
                done = sh(*args, check=False)
                errors = [l for l in done.stderr.splitlines() if l.startswith("satcal: error")]
                unchanged = {p: p.read_bytes() for p in target.rglob("*") if p.is_file()
                             and p.name != ".satcal.lock"} == {p: b for p, b in files.items()
                                                              if p.name != ".satcal.lock"}
                rows.append({"free KB": free_kb, "command": args[0], "exit": done.returncode,
                             "stderr lines": len(done.stderr.splitlines()),
                             "traceback": "Traceback" in done.stderr,
                             "unchanged after failure": unchanged if done.returncode else "-",
                             "message": errors[0][:90] if errors else ""})
            (mnt / "filler").unlink()
            again = sh("ingest", target, first, "--threshold", "0", check=False)
            rows.append({"free KB": free_kb, "command": "ingest, space again", "exit": again.returncode,
                         "stderr lines": len(again.stderr.splitlines()), "traceback": "Traceback" in again.stderr,
                         "unchanged after failure": "-", "message": ""})
        finally:
            subprocess.run(["umount", str(mnt)])
            mnt.rmdir()
    return rows


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--kills", type=int, default=8, help="kills per command")
    parser.add_argument("--seed", type=int, default=25)
    parser.add_argument("--disk", action="store_true", help="also the full-disk study (root)")
    parser.add_argument("--only", action="append", default=[], help="only this command (repeatable)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        ws, first, second = build(Path(tmp))
        if args.disk:
            print(pd.DataFrame(disk_full(ws, first)).to_string(index=False))
        print(pd.DataFrame(kills(ws, first, second, args.kills, args.seed, args.only)).to_string(index=False))


if __name__ == "__main__":
    main()
