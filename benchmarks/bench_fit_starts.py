"""Issue 23: the joint models' starts in lockstep against scipy's minimize start by start.

``fit_joint`` runs L-BFGS-B from five starts and ``fit_joint_shared`` from three tau starts
before polishing the best. The starts run in lockstep (``joint._lbfgsb_lockstep``: scipy's
L-BFGS-B through its reverse-communication routine, one batched likelihood evaluation for
every run asking); the peer is what the package does where that routine is missing and what it
did before: ``scipy.optimize.minimize`` start by start (``_lbfgsb_lockstep`` made to raise).
Both sides fit every formulation of two studies in one process, alternating side by side
formulation by formulation (ABBA), on one BLAS thread; CPU (``time.process_time``) is summed
per side. The fits of both sides are compared bit for bit (theta, log-likelihood, covariance,
the starts' ends).

Studies: the ECIR 2015 answers (4,115; 36 formulations) and a 60-answer study built as a user
would (``bench_small_study.small_study``: init, generate, export, simulate, ingest), where a
likelihood evaluation costs numpy's per-call overhead rather than its rows.

    OPENBLAS_NUM_THREADS=1 python benchmarks/bench_fit_starts.py
"""
from __future__ import annotations

import tempfile
import time
from pathlib import Path

import numpy as np

from _context import note


def rows_of(study, forms=None):
    """Every formulation's (phi_A, phi_B, answers, counts), as calibrate hands them to the fits."""
    from satcal.analysis.core import collapse_study
    from satcal.measures import study_formulations
    types = collapse_study(study, forms or study_formulations())
    return [(types.phi_a[:, j], types.phi_b[:, j], types.answers, types.counts)
            for j in range(types.phi_a.shape[1])]


def fitted(rows):
    """fit_joint then fit_joint_shared on one formulation's rows: CPU and what to compare."""
    from satcal.analysis.joint import fit_joint, fit_joint_shared
    t = time.process_time()
    independent = fit_joint(*rows)
    shared = fit_joint_shared(*rows, independent=independent)
    cpu = time.process_time() - t
    return cpu, [independent.theta, independent.loglik, independent.cov, shared.theta, shared.loglik,
                 shared.cov, shared.ends]


def peer():
    """A context in which the starts run by scipy's minimize one by one (the fallback)."""
    import contextlib
    import satcal.analysis.joint as joint

    @contextlib.contextmanager
    def one_by_one():
        real = joint._lbfgsb_lockstep

        def missing(*args, **kwargs):
            raise joint._NotTheRoutine("scipy.optimize._lbfgsb.setulb")
        joint._lbfgsb_lockstep = missing
        try:
            yield
        finally:
            joint._lbfgsb_lockstep = real
    return one_by_one()


def compare(name, formulations):
    """Fit every formulation both ways, ABBA; print CPU per side, the ratio, and equality."""
    cpu = {"lockstep": 0.0, "minimize": 0.0}
    same = 0
    for j, rows in enumerate(formulations):
        order = ("lockstep", "minimize") if j % 2 == 0 else ("minimize", "lockstep")
        got = {}
        for side in order:
            if side == "minimize":
                with peer():
                    seconds, got[side] = fitted(rows)
            else:
                seconds, got[side] = fitted(rows)
            cpu[side] += seconds
        same += all(np.array_equal(a, b, equal_nan=True) for a, b in zip(got["lockstep"], got["minimize"]))
    print(f"  {name}, {len(formulations)} formulations: lockstep {cpu['lockstep']:.2f} s CPU, "
          f"minimize start by start {cpu['minimize']:.2f} s; peer / lockstep "
          f"{cpu['minimize'] / cpu['lockstep']:.2f}x; fits identical bit for bit: {same} of {len(formulations)}")


def main() -> None:
    from satcal.datasets import load_ecir2015
    from satcal.study import Study
    from bench_small_study import small_study
    print(f"fit_joint + fit_joint_shared of every formulation, starts in lockstep against scipy's "
          f"minimize start by start {note()}")
    with tempfile.TemporaryDirectory() as tmp:
        ws = Study.open(small_study(Path(tmp)))
        small = rows_of(ws.study_data(), ws.formulations())
    compare(f"{int(sum(r[3].sum() for r in small[:1]))}-answer study", small)
    compare("ECIR 2015 (4,115 answers)", rows_of(load_ecir2015()))


if __name__ == "__main__":
    import sys
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    main()
