import os

import numpy as np
import pytest

# The whole suite runs on pytest-xdist's workers, one a core the process may use (at most
# MAX_WORKERS), when xdist is installed and the run names no paths, no -n and no --pdb: the
# README's plain ``python -m pytest`` (and ``-m "not slow"``). Named files run serially unless
# -n is given; ``-n 0`` or ``-p no:xdist`` run everything serially, and without xdist installed
# pytest never sees an -n it does not know. DIST is measured in docs/benchmarks.md (the test
# suite's wall time); each worker builds the session fixtures once.
DIST = "loadscope"
MAX_WORKERS = 4


def parallel_workers(cores: int | None = None) -> int:
    """Workers for the whole suite: the cores this process may run on (its CPU affinity), at
    most MAX_WORKERS (each holds its own session fixtures and servers); 0, a serial run, on one
    core."""
    if cores is None:
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    workers = min(cores, MAX_WORKERS)
    return workers if workers > 1 else 0


@pytest.hookimpl(tryfirst=True)
def pytest_cmdline_main(config):
    """Turn xdist on for the whole suite (see DIST): sets what ``-n N --dist DIST`` would, so
    that xdist's own hook, before or after this one, finds the same."""
    if (not config.pluginmanager.hasplugin("xdist") or hasattr(config, "workerinput")
            or config.option.numprocesses is not None or config.getoption("usepdb")
            or config.args_source != pytest.Config.ArgsSource.TESTPATHS):
        return
    workers = parallel_workers()
    config.option.numprocesses = workers
    if workers:
        if config.option.dist == "no":
            config.option.dist = DIST
        config.option.tx = ["popen"] * workers
        # the modules are handed out in the order slow_modules_first leaves them, not by
        # their number of tests: a one-test end-to-end module (a Label Studio server, minutes)
        # handed out last kept one worker busy while the other idled
        config.option.loadscopereorder = False


def pytest_configure(config):
    """On xdist's workers, one a core: one BLAS thread a worker, for the tests' own numerics
    (peer libraries, independent searches, simulations) and for the processes they start, as
    satcal sizes its own bootstrap workers. With OpenBLAS's default of a thread a core, two
    workers ran four BLAS threads on two cores, and their spinning doubled the CPU of scipy's
    searches in the joint models' maximum checks (measured in docs/benchmarks.md). Tests that
    check satcal's own limit set the caller's limit themselves (threadpoolctl), so they still
    see satcal lower it and give it back."""
    if not hasattr(config, "workerinput"):
        return
    from threadpoolctl import threadpool_limits
    for variable in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(variable, "1")
    threadpool_limits(limits=1, user_api="blas")


def slow_modules_first(items):
    """Reorder ``items`` so that the modules holding an end-to-end (``slow``) test come first,
    in collection order, then the rest; a module's tests keep their order. Every worker
    collects the same items and so gets the same order, as xdist requires."""
    def module(item):
        return item.nodeid.split("::")[0]
    slow = {module(item) for item in items if item.get_closest_marker("slow")}
    items[:] = sorted(items, key=lambda item: module(item) not in slow)


def pytest_collection_modifyitems(config, items):
    if getattr(config.option, "dist", "no") == "loadscope" and not getattr(config.option, "loadscopereorder", True):
        slow_modules_first(items)


@pytest.fixture(scope="session")
def ecir_study():
    from satcal.datasets import load_ecir2015
    return load_ecir2015()


@pytest.fixture(scope="session")
def ecir_result(ecir_study):
    from satcal.analysis import calibrate
    return calibrate(ecir_study, model_check_folds=5, seed=1, bootstrap=0, sat_model="published")


@pytest.fixture
def rng():
    return np.random.default_rng(12345)


@pytest.fixture(scope="session")
def make_workspace(tmp_path_factory, ecir_study):
    """Build a generated workspace on the embedded judgments, with a documents table whose
    titles are ``title(doc)`` (so escaping can be checked wherever a document shows up)."""
    import pandas as pd
    from satcal.workspace import Workspace

    def build(title, min_per_cell=15, platform="appen", audio=False):
        d = tmp_path_factory.mktemp("ws")
        qrels = d / "qrels.tsv"
        ecir_study.judgments.table.to_csv(qrels, sep="\t", index=False)
        docs = pd.DataFrame({"doc": ecir_study.judgments.table["doc"].unique()})
        docs["title"] = docs["doc"].map(title)
        if audio:
            docs["audio_url"] = "https://example.org/" + docs["doc"] + ".mp3"
        docs.to_csv(d / "docs.csv", index=False)
        ws = Workspace.init(d / "study", qrels, d / "docs.csv", min_per_cell=min_per_cell, platform=platform)
        ws.generate()
        return ws

    return build


@pytest.fixture(scope="session")
def exported_workspace(tmp_path_factory, ecir_study):
    """``exported_workspace(platform, min_per_cell)``: a generated and exported workspace on
    the embedded judgments, built once per session and argument pair."""
    from satcal.workspace import Workspace
    built = {}

    def build(platform="appen", min_per_cell=10):
        if (platform, min_per_cell) not in built:
            d = tmp_path_factory.mktemp(f"exported-{platform}")
            q = d / "qrels.tsv"
            ecir_study.judgments.table.to_csv(q, sep="\t", index=False)
            ws = Workspace.init(d / "study", q, min_per_cell=min_per_cell, platform=platform)
            ws.generate()
            ws.export()
            built[(platform, min_per_cell)] = ws
        return built[(platform, min_per_cell)]

    return build


@pytest.fixture(scope="session")
def copy_workspace():
    """``copy_workspace(ws, directory)``: a fresh copy of a workspace under ``directory``, for a
    test that changes it."""
    import shutil
    from satcal.workspace import Workspace

    def copy(ws, directory):
        target = directory / "study"
        shutil.copytree(ws.path, target)
        return Workspace.open(target)

    return copy


def random_start_search(fun, args, bounds, seed: int, starts: int = 40, tau_high: float | None = None) -> float:
    """The highest log-likelihood that scipy's own L-BFGS-B reaches from ``starts`` seeded random
    points of the joint model's box (b0, logit delta and logit 2 lambda +-5; b1, b2, c0, c1
    +-10; with ``tau_high``, tau uniform on [0, tau_high]), clipped to ``bounds``: the
    independent reference the small-study fits are compared with. ``fun`` returns the negative
    log-likelihood and its gradient."""
    from scipy.optimize import minimize
    rng = np.random.default_rng(seed)
    points = rng.uniform(-5, 5, (starts, 7)) * [1, 2, 2, 2, 2, 1, 1]
    if tau_high is not None:
        points = np.c_[points, rng.uniform(0, tau_high, starts)]
    low, high = np.array(bounds).T
    return max(-minimize(fun, x, args=args, jac=True, method="L-BFGS-B", bounds=bounds).fun
               for x in np.clip(points, low, high))
