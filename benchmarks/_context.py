"""What a benchmark figure was measured under, printed beside it: the BLAS library and its
thread count (threadpoolctl), and the machine's load (os.getloadavg: runnable processes
averaged over 1 minute) against the cores this process may use. A figure taken at load 6
on 2 cores is not the figure of an idle machine."""
from __future__ import annotations

import os


def blas() -> str:
    """``openblas x2``: each BLAS library seen and its threads outside satcal's own loops
    (satcal's fits, joint fits and bootstrap run with one; satcal._threads)."""
    import numpy  # noqa: F401  (loads numpy's BLAS, so that threadpoolctl sees it)
    from threadpoolctl import threadpool_info
    libs = [f"{i['internal_api']} x{i['num_threads']}" for i in threadpool_info() if i["user_api"] == "blas"]
    return ", ".join(libs) or "none seen"


def note() -> str:
    """``[BLAS openblas x2 (satcal's loops: x1); load 3.1 on 2 cores]``, for the end of a line."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:
        cores = os.cpu_count()
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    return f"[BLAS {blas()} (satcal's loops: x1); load {load:.1f} on {cores} cores]"
