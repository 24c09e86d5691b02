"""Reproduce the published figures and tables of Urbano & Marrero (ECIR 2015) with satcal.

Figure 1 (P(Sat|phi)), Figure 2 (P(Pref|dphi)), Figure 3 (bias by gain and discount), the bias
scores b1-b3 of the 36 formulations and the ANOVA, from the embedded published answers, plus
bootstrap intervals the paper did not report.

    python analysis/reproduce_ecir2015.py [OUT] [--bootstrap B]

Data: CC BY-SA 4.0, J. Urbano and M. Marrero, ECIR 2015.
"""
import argparse
from pathlib import Path

from satcal import calibrate, load_ecir2015, write_analysis

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("out", nargs="?", default=str(Path(__file__).parent / "output"))
parser.add_argument("--bootstrap", type=int, default=1000)
args = parser.parse_args()

study = load_ecir2015()
print(study.notice)
result = calibrate(study, bootstrap=args.bootstrap, seed=2015, n_jobs=2, progress=True, sat_model="published")
written = write_analysis(result, args.out)
print(result.ranking.head(10).to_string(index=False))
print(result.anova.to_string(index=False))
print(f"figures and tables in {args.out}: " + ", ".join(sorted(Path(p).name for p in written.values())))
