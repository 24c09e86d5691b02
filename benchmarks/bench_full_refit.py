"""Issue 20, item 3 probe: would full re-fits per replicate fix the k-step bootstrap where tau is
weakly identified?

Runs the first few studies of bench_coverage_standardised.py (the same seeds, so the same data
and estimates) three times with B replicates: with the k-step bootstrap (one Newton step per replicate
from the fit), with each replicate's shared-effect joint model re-fitted by L-BFGS-B from the
fit (joint.REFIT_ITERATIONS iterations at most), and by the default rule (re-fits where tau is
weakly identified, joint.weak_tau). Prints per study and formulation b1_std's robust SE over the
SD of the estimates across the studies of a saved reference run (bench_coverage_standardised's
npz), and the CPU time of each.

    OPENBLAS_NUM_THREADS=1 python benchmarks/bench_full_refit.py REF.npz [studies] [B]
"""
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_coverage_standardised as bench  # noqa: E402
from satcal.analysis import joint  # noqa: E402
from satcal.analysis.bootstrap import robust_se  # noqa: E402


def main(ref, studies=4, B=50):
    r = dict(np.load(ref, allow_pickle=True))
    sd = r["est"][:, :, 0].std(axis=0, ddof=1)
    rule = joint.weak_tau
    res = {}
    for name, weak in (("one step", lambda fit: False), ("re-fit all", lambda fit: True),
                       ("default rule", rule)):
        joint.weak_tau = weak
        c0 = time.process_time()
        res[name] = bench.run(studies, B, int(r["n_answers"]), 1, None, float(r["intercept"]), float(r["slope"]))
        res[name]["cpu_probe"] = time.process_time() - c0
    joint.weak_tau = rule
    print(f"\nfirst {studies} studies of {ref}, B = {B}; b1_std robust SE / SD across the reference run's "
          f"{r['est'].shape[0]} studies ({np.round(sd, 4).tolist()}), per formulation")
    for name, x in res.items():
        ratio = robust_se(x["reps"][:, :, :, 0], axis=1) / sd
        print(f"{name:<12} CPU {x['cpu_probe']:.0f} s; " + "; ".join(
            f"study {s}: " + " ".join(f"{v:.2f}" for v in ratio[s]) for s in range(studies)))
    assert np.allclose(res["one step"]["est"], res["default rule"]["est"])   # the same data


if __name__ == "__main__":
    from _context import arguments
    args = arguments(__doc__, ("REF", str, ..., "the reference .npz"), ("studies", int, 4, "simulated studies"),
                     ("B", int, 50, "bootstrap replicates"))
    main(args.REF, args.studies, args.B)
