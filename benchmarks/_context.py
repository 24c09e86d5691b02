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


def arguments(doc: str, *spec: tuple) -> "argparse.Namespace":
    """Parse a benchmark's positional arguments, with ``--help`` printing its docstring.

    Parameters
    ----------
    doc : str
        The script's docstring (what ``--help`` says first).
    *spec : tuple of (name, type, default, help)
        One positional argument each. A default of ``...`` makes it required; a list default
        takes any number of values (``nargs="*"``).

    Returns
    -------
    argparse.Namespace
        The values, by name.
    """
    import argparse
    parser = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    for name, kind, default, text in spec:
        if default is ...:
            parser.add_argument(name, type=kind, help=text)
        elif isinstance(default, list):
            parser.add_argument(name, type=kind, nargs="*", default=default, help=f"{text} (default {default})")
        else:
            parser.add_argument(name, type=kind, nargs="?", default=default, help=f"{text} (default {default})")
    return parser.parse_args()
