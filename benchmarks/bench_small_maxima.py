"""Issue 23's side finding: on a small study, is the shared-effect fit the highest maximum?

Builds the 60-answer study of ``bench_small_study.py`` (``small_study``: init on the ECIR 2015
judgments, ``--min-per-cell 2``, two answers per example, generate, export, simulate, ingest)
and fits every formulation with ``fit_joint_shared``, as ``calibrate`` does. Then, per
formulation, an independent multi-start: ``STARTS`` seeded random points in a box inside the
bounds (b0 +-5, b1, b2, c0, c1 +-10, the logits of delta and 2 lambda +-5, tau uniform on
[0, 3]; seed = the formulation's index), every one carried by L-BFGS-B at tight tolerances
(ftol 0, gtol 1e-10) on the full quadrature, all in lockstep (``joint._lockstep``, each run
scipy's own iterates). Prints, per formulation, the fit's log-likelihood, its tau, the best the
starts reached, the gap, how many starts ended more than 0.01 above the fit, and the CPU the
starts took (one BLAS thread).

Then two candidate rules for a fit that finds the highest maximum, against the same search:
(1) the fit polished at the replicates' tight tolerances (``REFIT_POLISH``, passes until one
gains under ``REFIT_GAIN``): does the fit stop short on a ridge, or sit on another maximum?
(2) screened starts: ``SCREEN`` seeded random points in the same box (another seed), their
log-likelihood at the starts' nodes in one batched call, the ``KEEP`` highest carried to their
ends in lockstep, then the best of them and the fit polished as in (1). Prints how many
formulations each leaves more than 0.01 and 0.1 below the search, and the CPU it adds.

    OPENBLAS_NUM_THREADS=1 python benchmarks/bench_small_maxima.py [STARTS] [SCREEN] [KEEP]
"""
from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _context import arguments, note  # noqa: E402
from bench_fit_starts import rows_of  # noqa: E402
from bench_small_study import small_study  # noqa: E402

#: Half-widths of the box of random starts (fitting scale), and tau's upper end.
BOX, TAU_HIGH = np.array([5.0, 10, 10, 10, 10, 5, 5]), 3.0


def multi_start(rows, starts: int, seed: int):
    """The log-likelihood of every random start's end, (starts,), and the CPU they took."""
    import satcal.analysis.joint as J
    code = np.full(len(rows[2]), -1)
    for i, c in enumerate(J.CODES):
        code[np.asarray(rows[2]) == c] = i
    pa, pb, cd, cnt = J._collapse_rows(rows[0], rows[1], code, np.asarray(rows[3], float))
    low, high = np.array(J.SHARED_BOUNDS).T
    rng = np.random.default_rng(seed)
    points = np.clip(np.c_[rng.uniform(-BOX, BOX, (starts, 7)), rng.uniform(0, TAU_HIGH, starts)], low, high)
    t = time.process_time()
    ends = J._lockstep(points, pa, pb, cd, np.broadcast_to(cnt, (starts, cnt.size)), J.SHARED_NODES,
                       {**J._LBFGSB, **J.REFIT_POLISH})[0]
    cpu = time.process_time() - t
    return np.array([-J._shared_negloglik_and_gradient(x, pa, pb, cd, cnt)[0] for x in ends]), cpu


def collapsed(rows):
    """A formulation's rows as the likelihood takes them: (phi_A, phi_B, code, counts)."""
    import satcal.analysis.joint as J
    code = np.full(len(rows[2]), -1)
    for i, c in enumerate(J.CODES):
        code[np.asarray(rows[2]) == c] = i
    return J._collapse_rows(rows[0], rows[1], code, np.asarray(rows[3], float))


def polished(rows, starts) -> float:
    """The highest log-likelihood the tight passes reach from ``starts`` (k, 8)."""
    import satcal.analysis.joint as J
    pa, pb, cd, cnt = collapsed(rows)
    x = np.atleast_2d(starts)
    weights = np.broadcast_to(cnt, (len(x), cnt.size))
    x, f = J._lockstep(x, pa, pb, cd, weights, J.SHARED_NODES, {**J._LBFGSB, **J.REFIT_POLISH})
    for _ in range(J.REFIT_RESTARTS):
        x, after = J._lockstep(x, pa, pb, cd, weights, J.SHARED_NODES, {**J._LBFGSB, **J.REFIT_POLISH})
        done = (f - after).max() <= J.REFIT_GAIN
        f = after
        if done:
            break
    return float(-f.min())


def screened_end(rows, screen: int, keep: int, seed: int):
    """Rule (2)'s best end: the ``keep`` highest of ``screen`` random points, carried by
    L-BFGS-B on the starts' nodes, as fit_joint_shared carries its tau starts."""
    import satcal.analysis.joint as J
    pa, pb, cd, cnt = collapsed(rows)
    low, high = np.array(J.SHARED_BOUNDS).T
    rng = np.random.default_rng(seed)
    points = np.clip(np.c_[rng.uniform(-BOX, BOX, (screen, 7)), rng.uniform(0, TAU_HIGH, screen)], low, high)
    p = J._shared_rows(points, pa, pb, cd, J.START_NODES, gradient=False)[0]
    top = points[np.argsort(-(cnt * np.log(np.maximum(p, 1e-300))).sum(axis=1))[:keep]]
    ends = J._lockstep(top, pa, pb, cd, np.broadcast_to(cnt, (keep, cnt.size)), J.START_NODES,
                       {**J._LBFGSB, "maxiter": 1000})[0]
    values = [-J._shared_negloglik_and_gradient(x, pa, pb, cd, cnt)[0] for x in ends]
    return ends[int(np.argmax(values))]


def tally(name: str, gaps, cpu: float) -> None:
    """One line: formulations more than 0.01 and 0.1 below the search, and the CPU added."""
    gaps = np.array(gaps)
    print(f"  {name}: gap > 0.01 on {int((gaps > 0.01).sum())} of {gaps.size} (> 0.1 on "
          f"{int((gaps > 0.1).sum())}, largest {gaps.max():.3f}); {cpu / gaps.size:.2f} s CPU a formulation")


def main() -> None:
    from satcal.analysis.joint import fit_joint_shared
    from satcal.study import Study
    args = arguments(__doc__, ("starts", int, 100, "random starts a formulation"),
                     ("screen", int, 256, "rule (2): random points screened"),
                     ("keep", int, 8, "rule (2): the highest screened points carried"))
    with tempfile.TemporaryDirectory() as tmp:
        ws = Study.open(small_study(Path(tmp)))
        forms = ws.formulations()
        rows = rows_of(ws.study_data(), forms)
    print(f"fit_joint_shared against {args.starts} random starts in lockstep, 60-answer study {note()}")
    gaps, cpus, fits, best = [], [], [], []
    for j, (form, r) in enumerate(zip(forms, rows)):
        fit = fit_joint_shared(*r)
        ends, cpu = multi_start(r, args.starts, j)
        fits.append(fit)
        best.append(ends.max())
        gaps.append(ends.max() - fit.loglik)
        cpus.append(cpu)
        print(f"  {form.id:11s} fit {fit.loglik:9.3f} (tau {fit.tau:.2f}); best start {ends.max():9.3f}; "
              f"gap {gaps[-1]:+.3f}; starts above the fit by > 0.01: {int((ends > fit.loglik + 0.01).sum())}; "
              f"{cpu:.1f} s CPU")
    gaps = np.array(gaps)
    print(f"  gap > 0.01 on {int((gaps > 0.01).sum())} of {gaps.size} formulations (> 0.1 on "
          f"{int((gaps > 0.1).sum())}, largest {gaps.max():.3f}); the starts' CPU {np.median(cpus):.2f} s a "
          f"formulation (median)")
    print("candidate rules against the same search:")
    t = time.process_time()
    tally("(1) the fit polished", [b - polished(r, f.theta) for b, f, r in zip(best, fits, rows)],
          time.process_time() - t)
    t = time.process_time()
    tally(f"(2) {args.keep} of {args.screen} screened starts, then polished",
          [b - polished(r, np.stack([f.theta, screened_end(r, args.screen, args.keep, 10_000 + j)]))
           for j, (b, f, r) in enumerate(zip(best, fits, rows))], time.process_time() - t)


if __name__ == "__main__":
    main()
