"""One BLAS thread inside satcal's numerical loops, the caller's limits restored; worker counts
from the CPU affinity."""
import os

import numpy as np
import pytest
from scipy.special import expit
from threadpoolctl import threadpool_info, threadpool_limits

import satcal.analysis.core as core
from satcal import _threads
from satcal.analysis import calibrate
from satcal.measures import formulation


def _blas_threads() -> list[int]:
    return [lib["num_threads"] for lib in threadpool_info() if lib["user_api"] == "blas"]


def _study(n=300, seed=3):
    rng = np.random.default_rng(seed)
    pa, pb = rng.uniform(0, 1, n), rng.uniform(0, 1, n)
    sa, sb = rng.uniform(size=n) < expit(-3 + 6 * pa), rng.uniform(size=n) < expit(-3 + 6 * pb)
    answers = np.select([sa & sb, ~sa & ~sb, sa], ["both_good", "both_bad", "a_better"], "b_better")
    return pa[:, None], pb[:, None], answers


def test_calibrate_fits_on_one_blas_thread_and_restores_the_callers_limit(monkeypatch):
    if not _blas_threads():
        pytest.skip("threadpoolctl sees no BLAS library")
    seen = []
    import satcal.analysis.calibration as calibrate_module  # where calibrate looks fit_logit up
    real_fit = calibrate_module.fit_logit

    def probe(*args, **kwargs):  # records the BLAS threads the fits run with
        seen.append(_blas_threads())
        return real_fit(*args, **kwargs)

    monkeypatch.setattr(calibrate_module, "fit_logit", probe)
    pa, pb, answers = _study()
    caller = 2
    with threadpool_limits(limits=caller, user_api="blas"):
        before = _blas_threads()
        calibrate(phi_a=pa, phi_b=pb, answers=answers, formulations=[formulation("lin-const")],
                  model_check_folds=0, bootstrap=0, seed=0, sat_model="published")
        after = _blas_threads()
    assert seen and all(threads == [1] * len(before) for threads in seen)
    assert after == before == [caller] * len(before)  # the caller's setting, as threadpoolctl reports it


def test_one_blas_thread_restores_limits_after_an_error():
    if not _blas_threads():
        pytest.skip("threadpoolctl sees no BLAS library")

    @_threads.one_blas_thread
    def fails():
        assert _blas_threads() == [1] * len(_blas_threads())
        raise ValueError("boom")

    with threadpool_limits(limits=2, user_api="blas"):
        with pytest.raises(ValueError):
            fails()
        assert _blas_threads() == [2] * len(_blas_threads())


@pytest.mark.parametrize("n_jobs, expected", [(None, 3), (0, 3), (-1, 3), (-2, 2), (-9, 1), (4, 4), (1, 1)])
def test_jobs_follow_the_cpu_affinity(monkeypatch, n_jobs, expected):
    # a process allowed on 3 of the machine's cores (as taskset or a container would)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 3, 5}, raising=False)
    assert _threads.resolve_jobs(n_jobs) == expected


def test_available_cores_is_this_process_affinity():
    if not hasattr(os, "sched_getaffinity"):
        pytest.skip("no CPU affinity on this system")
    assert _threads.available_cores() == len(os.sched_getaffinity(0)) <= os.cpu_count()
