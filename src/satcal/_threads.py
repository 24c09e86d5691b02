"""One BLAS thread inside satcal's own numerical loops, and worker counts sized to the cores.

Why: the batched fits (:func:`satcal.analysis.core.fit_logit_batch` and friends), the joint
model's likelihood and the bootstrap make thousands of BLAS calls on small matrices. An
OpenBLAS with several threads splits each of them across the cores and its extra threads
spin while they wait; when the cores are shared (other processes, or our own parallel
bootstrap workers) they wait a lot. Measured on 2 shared cores: ``satcal analyze --dataset
ecir2015 --jobs 1`` took 57.8 s of CPU with OpenBLAS's default 2 threads and 33.3 s with one
(docs/benchmarks.md, issue 23). The limit is process-wide while the decorated function runs and is
restored afterwards (threadpoolctl), so a caller's own setting is untouched.
"""
from __future__ import annotations

import functools
import os

__all__ = ["one_blas_thread", "available_cores", "resolve_jobs"]


def one_blas_thread(func):
    """Decorator: run ``func`` with BLAS limited to one thread, restoring the previous limits
    afterwards (``threadpoolctl.threadpool_limits(1, "blas")``).

    Parameters
    ----------
    func : callable
        The function to wrap.

    Returns
    -------
    callable
    """

    @functools.wraps(func)
    def limited(*args, **kwargs):
        from threadpoolctl import threadpool_limits
        with threadpool_limits(limits=1, user_api="blas"):
            return func(*args, **kwargs)

    return limited


def available_cores() -> int:
    """Processors this process may run on (its CPU affinity, which containers and ``taskset``
    narrow), not the machine's count."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # no sched_getaffinity (macOS, Windows)
        return max(1, os.cpu_count() or 1)


def resolve_jobs(n_jobs: int | None) -> int:
    """Worker processes for ``n_jobs``: None or 0 -> one per available core; a negative n ->
    that many fewer than the cores plus one (joblib's convention: -1 all, -2 all but one),
    at least 1; a positive n -> n.

    Parameters
    ----------
    n_jobs : int or None
        The requested number.

    Returns
    -------
    int
    """
    cores = available_cores()
    if n_jobs is None or n_jobs == 0:
        return cores
    if n_jobs < 0:
        return max(1, cores + 1 + n_jobs)
    return int(n_jobs)
