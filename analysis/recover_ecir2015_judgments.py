"""Recover the ECIR 2015 study's judgments from its published per-list scores.

Each list's 36 published DCG scores (3 decimals) pin down one relevance pattern of 5 levels in
{0, 1, 2}; every (query, document) then takes the level of the positions it appears in.
Writes ``src/satcal/data/ecir2015/judgments.tsv`` (query, doc, level), which satcal ships.

Data: Urbano & Marrero, ECIR 2015; CC BY-SA 4.0 (the recovered file carries the same licence).

    python analysis/recover_ecir2015_judgments.py [OUT]
"""
import sys
from pathlib import Path

from satcal.datasets import ECIR2015_NOTICE, recover_judgments

out = Path(sys.argv[1]) if len(sys.argv) > 1 else (
    Path(__file__).resolve().parents[1] / "src" / "satcal" / "data" / "ecir2015" / "judgments.tsv")
judgments = recover_judgments()
judgments.table.to_csv(out, sep="\t", index=False, lineterminator="\n")
print(f"{len(judgments)} judgments over {len(judgments.queries)} queries -> {out}")
print(ECIR2015_NOTICE)
