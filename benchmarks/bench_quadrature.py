"""Issue 23: the shared-effect quadrature's logistic, factored, against scipy's expit of the sum.

The shared-effect model needs expit(eta_i + tau z_k) at every row i and Gauss-Hermite node k
(``joint._moments_at_once``). satcal computes it as 1 / (1 + exp(-eta_i) exp(-tau z_k)): n + K
exponentials, not n K (``joint._logistic``). The peer is the straightforward
``scipy.special.expit(eta + tau z)`` on the (K, n) sum, which is what the quadrature did before.

Part 1 times the two logistics alone, on the shapes the fits use: one parameter vector on the
ECIR 2015 answers' distinct pairs of a formulation (1,217 rows) at the starts' 12 nodes and the
polish's 24, and three tau starts in lockstep (3, 12, 1,217). Part 2 times ``fit_joint_shared``
on every formulation of ECIR 2015 with each in turn (the peer: scipy's expit of the sum
patched in for the factored pair, ``peer_exp_neg`` and ``peer_logistic``), alternating
formulation by formulation (ABBA), one BLAS thread, CPU by ``time.process_time``; it prints the
largest differences between the two sides' fits (the log-likelihood, and the parameters other
than logit(delta), which lies on a flat ridge at delta ~ 1 on these answers).

    OPENBLAS_NUM_THREADS=1 python benchmarks/bench_quadrature.py
"""
from __future__ import annotations

import time
import timeit

import numpy as np

from _context import note


def peer_exp_neg(eta):
    """The peer's half of the pair: eta itself (see :func:`peer_logistic`)."""
    return eta


def peer_logistic(eta, shift):
    """What the quadrature computed before the logistic was factored (f2d706f): scipy's expit
    of the sum. Patched in with :func:`peer_exp_neg` in place of ``joint._exp_neg``, the
    quadrature's code then does the old arithmetic exactly."""
    from scipy.special import expit
    return expit(eta + shift)


def part_one() -> None:
    """The logistic alone on the fits' shapes."""
    from scipy.special import expit
    from satcal.analysis.joint import _exp_neg, _logistic, shared_nodes
    rng = np.random.default_rng(0)
    for label, runs, nodes in (("one vector, 12 nodes", 1, 12), ("one vector, 24 nodes", 1, 24),
                               ("three tau starts, 12 nodes", 3, 12)):
        z, _ = shared_nodes(nodes)
        eta = rng.normal(0, 3, (runs, 1, 1217))
        shift = (np.array([0.3, 1.0, 2.0])[:runs, None] * z)[..., None]
        ours = lambda: _logistic(_exp_neg(eta), shift)  # noqa: E731
        peer = lambda: expit(eta + shift)  # noqa: E731
        t_ours = min(timeit.repeat(ours, number=200, repeat=3)) / 200
        t_peer = min(timeit.repeat(peer, number=200, repeat=3)) / 200
        gap = np.max(np.abs(ours() - peer()) / peer())
        print(f"  {label:28s} factored {t_ours * 1e6:7.1f} us, expit of the sum {t_peer * 1e6:7.1f} us: "
              f"{t_peer / t_ours:.2f}x; largest relative difference {gap:.1e}")


def part_two() -> None:
    """fit_joint_shared on ECIR 2015 with each logistic, ABBA."""
    import satcal.analysis.joint as joint
    from satcal.analysis.core import collapse_study
    from satcal.datasets import load_ecir2015
    from satcal.measures import study_formulations
    study = load_ecir2015()
    types = collapse_study(study, study_formulations())
    ours = joint._exp_neg, joint._logistic
    cpu = {"factored": 0.0, "expit of the sum": 0.0}
    fits = {side: [] for side in cpu}
    for j in range(types.phi_a.shape[1]):
        rows = (types.phi_a[:, j], types.phi_b[:, j], types.answers, types.counts)
        independent = joint.fit_joint(*rows)
        order = ("factored", "expit of the sum") if j % 2 == 0 else ("expit of the sum", "factored")
        for side in order:
            joint._exp_neg, joint._logistic = ours if side == "factored" else (peer_exp_neg, peer_logistic)
            try:
                t = time.process_time()
                fits[side].append(joint.fit_joint_shared(*rows, independent=independent))
                cpu[side] += time.process_time() - t
            finally:
                joint._exp_neg, joint._logistic = ours
    a, b = fits["factored"], fits["expit of the sum"]
    loglik = max(abs(x.loglik - y.loglik) for x, y in zip(a, b))
    others = max(np.abs(np.delete(x.theta - y.theta, 5)).max() for x, y in zip(a, b))
    print(f"  fit_joint_shared, 36 formulations: factored {cpu['factored']:.2f} s CPU, expit of the sum "
          f"{cpu['expit of the sum']:.2f} s: {cpu['expit of the sum'] / cpu['factored']:.2f}x")
    print(f"  the fits' largest differences: log-likelihood {loglik:.1e}; parameters but logit(delta) "
          f"{others:.1e}")


def main() -> None:
    print(f"the shared-effect quadrature's logistic {note()}")
    part_one()
    part_two()


if __name__ == "__main__":
    main()
