"""Bootstrap: intervals for every curve, point and bias value, and pairwise differences between
formulations (B = 1000 by default, seeded).

What a replicate resamples follows the data's structure, because answers are not
independent: one worker's answers share that worker's leniency, several answers to one example
share its lists, and an example's two P(Sat|phi) rows share one verdict.

- Answers with worker ids, examples answered by several workers (crossed): Owen's pigeonhole
  bootstrap (Owen 2007, "The pigeonhole bootstrap", Annals of Applied Statistics 1(2)). Each
  replicate draws the workers with replacement and, independently, the examples; an answer's
  weight is (times its worker was drawn) x (times its example was drawn).
- Worker ids and one worker per example (the default design, one answer per example):
  examples are nested in workers, so the replicate draws workers and takes all their answers
  (the cluster bootstrap of the top level; Davison & Hinkley 1997, "Bootstrap Methods and
  their Application", sec. 3.8). Crossing would count each answer's own noise three times.
- Example ids only (the ECIR 2015 data): examples, with all their answers.
- Neither: answers, independently.

Every rule keeps an answer's two satisfaction rows and its preference row together. The
label is in ``calibration.json`` (``resampling``). Replicate b draws from its own stream,
``SeedSequence(seed).spawn(B)[b]``, so the numbers do not depend on how the work is split: the
same on 1 or 8 processes, with joblib's local processes or on a Dask cluster. A replicate's
answer weights are summed per distinct (phi_A, phi_B, answer) row (``np.bincount``), so it
costs O(answers) to draw and its fits cost what the distinct rows cost.

Measured (benchmarks/bench_coverage.py, docs/benchmarks.md; 150 simulated studies of 1,500
answers from 60 workers with heterogeneity 0.5 on random pairs, 4 formulations, B = 300;
"SE ratio" is the mean bootstrap SE over the SD of the estimates across studies):

- resampling answers or examples while workers differ: SE ratio of b1 0.64-0.87, BC intervals
  cover b1 0.84 of the time (0.77-0.90), the P(Sat|0.5) band 0.79-0.82;
- one answer per example, workers resampled: SE ratio 0.94-1.02 for b1-b3, coverage of b1,
  b2, b3 0.92, 0.93, 0.93 and of the P(Sat|0.5) band 0.93;
- three answers per example, pigeonhole: conservative, SE ratio 1.3-1.8, coverage 0.97-1.00
  (0.99 for the band). No resampling scheme is exact for crossed data (McCullagh 2000,
  "Resampling and exchangeable arrays", Bernoulli 6(2)); this one counts each answer's own
  noise about three times. Workers alone there give SE ratio 0.79-0.97 and coverage 0.91-0.93:
  the pigeonhole's intervals are the ones that hold 95 %;
- no worker effects, examples resampled: SE ratio 0.87-1.03, coverage of b1, b2, b3 0.89,
  0.91, 0.94 and of the band 0.94.

Curves and points get percentile intervals (2.5 %, 97.5 %). The b1 indicators (b1, b1_joint,
b1_std: means of absolute distances |x - s(x)|, bounded below by 0) get :func:`floor_interval`,
the smallest interval holding the percentile and the basic interval, cut at 0: near the floor the estimate is
biased upward by about its standard error and the percentile and BC intervals lie above the
truth (they covered b1_std 0.00-0.44 of the time, docs/benchmarks.md), while the basic interval
undercovers where the distance is clearly positive; the span covered 0.94-1.00 in both regimes
(conservative). b2 and b3 (smooth functionals of the curves, no kink) get percentile
intervals: with worker effects they covered as well as bias-corrected (BC) ones for the paper's
estimator (b2 0.940 both, b3 0.920 against 0.918; 100 studies) and better for the standardised
ones (b2_std 0.950 against 0.892 and b3_std 0.967 against 0.921 near the floor; 0.946 against
0.917 and 0.933 against 0.942 with the default users; 60 studies each), whose BC correction,
estimated from the replicates, moved b2_std's interval the wrong way (docs/benchmarks.md). The two-sided bootstrap p-value of a difference d between
formulations is ``min(1, 2 min(P*(d <= 0), P*(d >= 0)))``. Replicates whose fit does not
converge (separation) are left out and counted.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from itertools import combinations

import numpy as np
import pandas as pd
from scipy.special import expit, ndtri

from .._results import ResultTables
from .._threads import one_blas_thread
from ..errors import SatcalError
from .core import (GRID, AnswerTypes, distinct_pairs, bias_indicators, collapse_answers, design,
                   fit_logit_replicates, preference_curves, satisfaction_curves)
from ..measures import bin_index

__all__ = ["BootstrapResult", "bootstrap_calibration", "replicate_weights", "resampling_clusters",
           "cluster_codes", "parallel_map", "RESAMPLING", "floor_interval", "robust_se"]

LEVEL = 0.95


def replicate_weights(n: int, replicates: int, seed: int, groups: np.ndarray | None = None,
                      n_groups: int | None = None, clusters=None) -> np.ndarray:
    """Resampling weights of the answers; replicate b uses child stream b of SeedSequence(seed).

    Parameters
    ----------
    n : int
        Number of answers.
    replicates, seed : int
    groups, n_groups : optional
        The distinct row of each answer (:class:`~satcal.analysis.core.AnswerTypes`
        ``inverse``) and the number of rows: the weights are then summed per distinct row,
        (B, n_groups), so memory grows with distinct rows, not answers.
    clusters : sequence of (n,) int arrays, optional
        One or two clusterings of the answers, coded 0..G-1 (:func:`cluster_codes`). Each
        replicate draws the G clusters of every clustering with replacement, independently, and
        an answer's weight is the product of its clusters' draw counts: with (workers,
        examples) this is Owen's (2007) pigeonhole bootstrap, with (examples,) the bootstrap of
        examples. None: every answer drawn independently (n draws). Each replicate costs
        O(n + G) time.

    Returns
    -------
    (B, n) weights, or (B, n_groups) with ``groups``.
    """
    children = np.random.SeedSequence(seed).spawn(replicates)
    width = n if groups is None else int(n_groups)
    out = np.empty((replicates, width), dtype=np.float64)
    sizes = [int(c.max()) + 1 if len(c) else 0 for c in clusters] if clusters is not None else []
    for b, child in enumerate(children):
        rng = np.random.default_rng(child)
        if clusters is None:
            draws = rng.integers(0, n, n)
            out[b] = np.bincount(draws if groups is None else groups[draws], minlength=width)
            continue
        w = np.ones(n)
        for codes, size in zip(clusters, sizes):
            w *= np.bincount(rng.integers(0, size, size), minlength=size)[codes]
        out[b] = w if groups is None else np.bincount(groups, weights=w, minlength=width)
    return out


#: How replicates resample, by what the answers carry (``calibration.json`` ``resampling``).
RESAMPLING = {"pigeonhole": "workers x examples (pigeonhole)", "workers": "workers (examples nested)",
              "examples": "examples", "answers": "answers"}


def cluster_codes(ids) -> np.ndarray | None:
    """Integer codes 0..G-1 of cluster labels, in order of first appearance; a missing label
    (None, NaN, empty) is a cluster of its own.

    Parameters
    ----------
    ids : sequence
        One label per answer.

    Returns
    -------
    numpy.ndarray of int, or None when every label is missing
    """
    ids = pd.Series(np.asarray(ids, dtype=object))
    missing = ids.isna().to_numpy() | (ids.astype(str).str.strip() == "").to_numpy()
    if missing.all():
        return None
    codes, uniques = pd.factorize(ids.where(~missing, None), use_na_sentinel=True)
    codes[missing] = uniques.size + np.arange(int(missing.sum()))
    return codes.astype(np.intp)


def resampling_clusters(n: int, worker_ids=None, example_ids=None) -> tuple[str, tuple | None]:
    """What the bootstrap resamples, from the ids the answers carry.

    - Worker ids (not all missing) and examples answered by several workers: workers and
      examples, crossed (Owen's pigeonhole bootstrap).
    - Worker ids and every example answered by one worker only (the default design, one
      answer per example; or no example ids): examples are nested in workers, and resampling
      workers with all their answers is the cluster bootstrap of the top level (Davison and
      Hinkley 1997, sec. 3.8); crossing them with examples would count the answers' own noise
      three times.
    - Example ids only: examples, all answers to one example together.
    - Neither: answers.

    Parameters
    ----------
    n : int
        Answers.
    worker_ids, example_ids : sequence, optional
        One label per answer.

    Returns
    -------
    label : str
        The :data:`RESAMPLING` label.
    clusters : tuple or None
        The ``clusters`` for :func:`replicate_weights`.

    References
    ----------
    Owen, A. B. (2007). The pigeonhole bootstrap. Annals of Applied Statistics 1(2), 386-411.

    Davison, A. C. and Hinkley, D. V. (1997). Bootstrap Methods and their Application.
    Cambridge University Press.
    """
    def codes(ids, name):
        """``ids`` as cluster codes (:func:`cluster_codes`), or None when not given.

        Parameters
        ----------
        ids : sequence or None
            One id per answer.
        name : str
            The argument's name, for the error.

        Raises
        ------
        SatcalError
            ``ids`` does not have one entry per answer.
        """
        if ids is None:
            return None
        if len(ids) != n:
            raise SatcalError(f"{name} has {len(ids)} entries for {n} answers")
        return cluster_codes(ids)

    workers, examples = codes(worker_ids, "worker_ids"), codes(example_ids, "example_ids")
    if workers is not None:
        if examples is None or np.unique(np.stack([examples, workers]), axis=1).shape[1] == examples.max() + 1:
            return RESAMPLING["workers"], (workers,)
        return RESAMPLING["pigeonhole"], (workers, examples)
    if examples is not None:
        return RESAMPLING["examples"], (examples,)
    return RESAMPLING["answers"], None


#: the standard normal's interquartile range, 2 Phi^-1(0.75) = 1.3490: IQR / IQR_NORMAL is the
#: SD of a normal distribution
IQR_NORMAL = 2 * float(ndtri(0.75))


def robust_se(values: np.ndarray, axis: int = 0) -> np.ndarray:
    """The bootstrap standard error read from the replicates' interquartile range.

    se = (q75 - q25) / 1.349 of the finite replicates along ``axis`` (NaN with fewer than 2),
    the normalised interquartile range: it equals the standard deviation when the replicates
    are normal and is not moved by a few wild ones, as the k-step bootstrap of a weakly
    identified fit gives (a one-step replicate whose tau lands far out). Efron and Tibshirani
    (1993, An Introduction to the Bootstrap, section 6.4 and problem 6.9) recommend such a
    percentile-based SE when the replicates are long-tailed; Wilcox (2012, Introduction to
    Robust Estimation and Hypothesis Testing, 3.12) on the normalised IQR. scipy's
    ``stats.iqr(x, scale="normal")`` computes the same number (to rounding).

    Parameters
    ----------
    values : numpy.ndarray
        Bootstrap replicates; NaN marks a failed replicate and is left out.
    axis : int
        The replicates' axis.

    Returns
    -------
    numpy.ndarray or float
        The robust standard error, one per position of the other axes.
    """
    values = np.asarray(values, dtype=float)
    enough = np.isfinite(values).sum(axis=axis) >= 2
    with np.errstate(all="ignore"), __import__("warnings").catch_warnings():
        __import__("warnings").simplefilter("ignore", RuntimeWarning)
        if np.isfinite(values).all():   # np.percentile is several times faster than nanpercentile
            q25, q75 = np.percentile(values, [25, 75], axis=axis)
        else:
            q25, q75 = np.nanpercentile(np.where(np.isfinite(values), values, np.nan), [25, 75], axis=axis)
    out = np.where(enough, (q75 - q25) / IQR_NORMAL, np.nan)
    return out[()] if np.ndim(out) == 0 else out


def robust_cov(values: np.ndarray) -> np.ndarray:
    """The bootstrap covariance of several quantities by the rule of :func:`robust_se`.

    The orthogonalised Gnanadesikan-Kettenring estimator (OGK; Maronna and Zamar 2002,
    "Robust estimates of location and dispersion for high-dimensional datasets",
    Technometrics 44(4)) with the normalised IQR s(.) as its scale: with D = diag(s(x_j)) and
    y = x D^-1, the correlations U_jk = (s(y_j + y_k)^2 - s(y_j - y_k)^2) / 4 (U_jj = 1), E the
    eigenvectors of U, z = y E; then Sigma = D E diag(s(z_l)^2) E' D. It is positive
    semi-definite by construction, estimates the covariance when the replicates are normal,
    and is not moved by a few wild replicates; for one quantity it is robust_se^2, so a Wald
    test of one contrast is the pairwise table's z test. Cost: O(B q^2) for q quantities.

    Parameters
    ----------
    values : numpy.ndarray
        (B, q) replicates of q quantities; rows with a non-finite value are left out.

    Returns
    -------
    numpy.ndarray
        (q, q); NaN with fewer than 2 complete rows.
    """
    x = np.asarray(values, dtype=float)
    x = x.reshape(x.shape[0], -1)
    x = x[np.isfinite(x).all(axis=1)]
    q = x.shape[1]
    if x.shape[0] < 2:
        return np.full((q, q), np.nan)
    d = robust_se(x)                               # (q,) the normalised IQRs
    scale = np.where(d > 0, d, 1.0)                # a constant column keeps variance 0
    y = x / scale
    u = np.eye(q)
    for j in range(q):                             # q is the number of contrasts: 1-35
        for k in range(j + 1, q):
            u[j, k] = u[k, j] = (robust_se(y[:, j] + y[:, k]) ** 2 - robust_se(y[:, j] - y[:, k]) ** 2) / 4
    _, e = np.linalg.eigh(u)
    gamma = robust_se(y @ e) ** 2
    a = scale[:, None] * e
    sigma = (a * gamma) @ a.T
    zero = d == 0
    sigma[zero, :] = 0.0
    sigma[:, zero] = 0.0
    return sigma


def _quantiles(values: np.ndarray, axis: int = 0):
    q = [(1 - LEVEL) / 2 * 100, (1 + LEVEL) / 2 * 100]
    if axis == 0 and values.ndim > 1:
        # a failed replicate is a row of NaN (a small study has a few): without those rows the
        # quantiles are the same, and nanpercentile's column-by-column loop (4 s a small
        # study's analysis, whatever B) is not needed unless NaN remain
        failed = np.isnan(values).reshape(len(values), -1).all(1)
        if failed.any() and not failed.all():
            values = values[~failed]
    if not np.isnan(values).any():  # np.percentile is several times faster than nanpercentile
        lo, hi = np.percentile(values, q, axis=axis)
        return lo, hi
    with np.errstate(all="ignore"), __import__("warnings").catch_warnings():
        __import__("warnings").simplefilter("ignore", RuntimeWarning)
        lo, hi = np.nanpercentile(values, q, axis=axis)
    return lo, hi


def floor_interval(reps: np.ndarray, estimate: np.ndarray, floor: float = 0.0):
    """95% interval of an indicator bounded below by ``floor`` whose plug-in estimate is biased
    upward near it (b1, b1_joint, b1_std: a mean of absolute distances |x - s(x)|).

    lo = max(floor, min(q_lo, 2 est - q_hi)),  hi = max(floor, q_hi, 2 est - q_lo),

    with q_lo, q_hi the replicates' 2.5% and 97.5% quantiles along axis 0 (finite ones only):
    the smallest interval holding the percentile interval (q_lo, q_hi) and the basic, or
    reverse-percentile, interval (2 est - q_hi, 2 est - q_lo): their union, and the gap between
    them when they do not overlap (Davison and Hinkley 1997, Bootstrap Methods and
    their Application, sec. 5.2), cut at the floor the indicator cannot cross.

    Why both. Where the true curve is near the diagonal, the curve's noise adds to |x - s|
    whatever its sign, so the estimate is biased upward by about its own standard error and the
    replicates, biased again, sit above it: the percentile and BC intervals then lie above the
    truth (they covered 0.00-0.44 there). The basic interval reflects the replicates about the
    estimate and moves down by the bootstrap's own bias, but where the distance is clearly
    positive and skewed it is the wrong side to reflect (0.88 against the percentile's 0.94 at
    b1 = 0.06 in benchmarks/bench_floor_intervals.py's Gaussian model; 0.78-0.87 against
    0.91-0.94 in bench_coverage_standardised.py). The bootstrap is not consistent at such a
    boundary (Andrews 2000, Econometrica 68(2); Fang and Santos 2019, Review of Economic
    Studies 86(1), for directionally differentiable functionals such as |.|), and which regime
    a study is in is not known; an interval holding the intervals that hold in each regime holds
    in both (in the spirit of Andrews and Cheng 2012, Econometrica 80(5), whose robust confidence
    sets take the least favourable critical value over the regimes; this is not their construction), at the price of some width near the floor (docs/benchmarks.md). It estimates a
    95% confidence interval for the indicator of the fitted model's estimand (b1 of the true
    curve), conservative rather than short where the two intervals disagree. Not always: the
    replicates carry only 39-69% of the estimate's bias at the floor, and it covered b1_std
    0.83-0.99 there with worker effects (benchmarks/bench_floor_coverage.py, docs/benchmarks.md).

    Parameters
    ----------
    reps : numpy.ndarray
        Bootstrap replicates, (B, ...); NaN marks a failed replicate and is left out.
    estimate : numpy.ndarray
        The full-sample estimates, reps.shape[1:].
    floor : float, default 0.0
        The indicator's lower bound.

    Returns
    -------
    lo, hi : numpy.ndarray
        Shaped like ``estimate``; NaN where no replicate is finite.
    """
    reps = np.asarray(reps, dtype=float)
    est = np.asarray(estimate, dtype=float)
    q_lo, q_hi = _quantiles(np.where(np.isfinite(reps), reps, np.nan))
    with np.errstate(invalid="ignore"):
        lo = np.maximum(floor, np.fmin(q_lo, 2 * est - q_hi))
        hi = np.maximum(floor, np.fmax(q_hi, 2 * est - q_lo))
    bad = ~np.isfinite(q_lo) | ~np.isfinite(est)
    return np.where(bad, np.nan, lo), np.where(bad, np.nan, hi)


def _bc_interval(reps: np.ndarray, estimate: np.ndarray):
    """Bias-corrected percentile interval along axis 0 (Efron 1981).

    z0 = Phi^-1(P*(theta* < theta_hat)); the bounds are the Phi(2 z0 -+ z) quantiles.
    """
    from scipy.stats import norm
    z = norm.ppf((1 + LEVEL) / 2)
    valid = np.isfinite(reps)
    share = np.where(valid, reps < estimate[None], False).sum(0) / np.maximum(valid.sum(0), 1)
    z0 = norm.ppf(np.clip(share, 1e-3, 1 - 1e-3))
    lo_q, hi_q = norm.cdf(2 * z0 - z) * 100, norm.cdf(2 * z0 + z) * 100
    lo, hi = np.full(estimate.shape, np.nan), np.full(estimate.shape, np.nan)
    for idx in np.ndindex(estimate.shape):
        col = reps[(slice(None),) + idx]
        col = col[np.isfinite(col)]
        if col.size:
            lo[idx], hi[idx] = np.percentile(col, [lo_q[idx], hi_q[idx]])
    return lo, hi


def _collapse(x: np.ndarray, y: np.ndarray, w: np.ndarray):
    """Merge rows with equal (x, y), summing their weights: the likelihood is unchanged and
    the fits run on a few hundred distinct rows instead of thousands."""
    from scipy.sparse import csr_matrix
    xd, yd, inv = distinct_pairs(np.asarray(x, float), np.asarray(y, float))
    group = csr_matrix((np.ones(x.size), (np.arange(x.size), inv)), shape=(x.size, xd.size))
    return xd, yd, np.asarray((group.T @ w.T).T)


def _binned_rates(x, y, W, n_bins):
    """(B, n_bins) weighted proportions per bin of x."""
    onehot = np.zeros((x.size, n_bins))
    onehot[np.arange(x.size), bin_index(x, n_bins)] = 1.0
    n = W @ onehot
    s = W @ (onehot * y[:, None])
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(n > 0, s / n, np.nan)


def _one_formulation(x_sat, y_sat, w_sat, x_pref, y_pref, w_pref, n_bins, sat_range=None, pref_range=None):
    """All replicates of one formulation: curve bands, point bands, b1-b3 per replicate."""
    out = {}
    curves = {}
    for curve, x, y, w in (("sat", x_sat, y_sat, w_sat), ("pref", x_pref, y_pref, w_pref)):
        xu, yu, wu = _collapse(x, y, w)
        beta, ok = fit_logit_replicates(design(xu), yu, wu)
        p = expit(beta @ design(GRID).T)
        p[~ok] = np.nan
        curves[curve] = p
        # row 0 is the full sample (the point estimate), the replicates follow
        out[f"{curve}_band"] = _quantiles(p[1:])
        out[f"{curve}_points"] = _quantiles(_binned_rates(x, y, w[1:], n_bins))
        out[f"{curve}_failed"] = int((~ok[1:]).sum())
    ind = bias_indicators(curves["sat"], curves["pref"], sat_range=sat_range, pref_range=pref_range)
    out["indicators"] = np.stack([ind["b1"], ind["b2"], ind["b3"]], axis=1)  # (B, 3)
    return out


def holm_adjusted(p) -> np.ndarray:
    """Holm's step-down adjusted p-values (Holm 1979): with the m p-values sorted,
    p_(i) -> max_{k <= i} min(1, (m - k + 1) p_(k)), returned in the input's order.

    The arithmetic of statsmodels' ``multipletests(p, method="holm")`` (the same bits; tested
    against it), without its ``gc.collect()`` on every call, which in a process holding a
    large analysis costs more than the adjustment.

    Parameters
    ----------
    p : array_like, shape (m,)
        The p-values (no NaN).

    Returns
    -------
    numpy.ndarray, shape (m,)

    References
    ----------
    Holm, S. (1979). A simple sequentially rejective multiple test procedure. Scandinavian
    Journal of Statistics 6(2), 65-70.
    """
    p = np.asarray(p, float)
    order = np.argsort(p)
    adjusted = np.maximum.accumulate(np.take(p, order) * np.arange(p.size, 0, -1))
    adjusted[adjusted > 1] = 1
    out = np.empty_like(adjusted)
    out[order] = adjusted
    return out


def parallel_map(func, tasks, n_jobs: int = 1, backend: str = "loky", progress: bool = False,
                 desc: str = "working", total: int | None = None):
    """``[func(*t) for t in tasks]`` through joblib: local processes, or a Dask cluster.

    Parameters
    ----------
    func : callable
    tasks : iterable of tuple
        May be a generator (built as the workers take them; ``total`` sizes the progress bar).
    n_jobs : int, default 1
    backend : str, default ``"loky"``
        ``"loky"`` (local processes), ``"dask"`` (a new local Dask cluster) or
        ``"dask:ADDRESS"`` (an existing scheduler).
    progress : bool, default False
    desc : str
        The progress bar's label.
    total : int, optional

    Returns
    -------
    list
        The results in task order.
    """
    from joblib import Parallel, delayed, parallel_config
    from tqdm.auto import tqdm

    if total is None and hasattr(tasks, "__len__"):
        total = len(tasks)
    bar = tqdm(total=total, desc=desc, disable=not progress)
    client = None
    if backend.startswith("dask"):
        try:
            from dask.distributed import Client
        except ImportError:
            raise SatcalError("the dask backend needs the optional dask extra: "
                              "pip install 'satcal[dask]'") from None
        address = backend.partition(":")[2] or None
        client = Client(address) if address else Client(processes=False)
        config = parallel_config(backend="dask")
    elif backend == "loky":
        config = parallel_config(backend="loky", n_jobs=n_jobs)
    else:
        raise SatcalError(f"unknown backend {backend!r}; use loky, dask or dask:ADDRESS")
    try:
        with config:
            jobs = Parallel(n_jobs=n_jobs if backend == "loky" else -1, return_as="generator")(
                delayed(func)(*t) for t in tasks)
            results = []
            for r in jobs:
                results.append(r)
                bar.update(1)
    finally:
        bar.close()
        if client is not None:
            client.close()
    return results


@dataclass(repr=False)
class BootstrapResult(ResultTables):
    """Bootstrap distributions and intervals; see the module docstring.

    Attributes
    ----------
    formulations : list of str
        The formulations' ids, in the order of the arrays' F axis.
    replicates : int
        Bootstrap replicates B.
    indicators : numpy.ndarray
        (B, F, 3): b1, b2, b3 of each replicate and formulation (NaN where a fit failed).
    curve_bands : dict
        ``(formulation, curve) -> (lo, hi)``, ``curve`` ``"sat"`` or ``"pref"``: the 95%
        percentile band of the fitted curve at each point of ``GRID`` (phi 0 to 1 by 0.001).
    point_bands : dict
        ``(formulation, curve) -> (lo, hi)``: the 95% percentile band of the observed rate in
        each of the ``n_bins`` bins.
    failed : pandas.DataFrame or None
        One row per formulation: ``formulation`` and the replicates whose ``sat`` and ``pref``
        fits failed to converge.
    seed : int
        Seed of the replicates' weights.
    estimates : numpy.ndarray or None
        (F, 3): the full-sample b1, b2, b3, the point estimates of the intervals.
    joint : dict or None
        The joint model's bootstrap (:func:`bootstrap_joint`): ``bands``, ``indicators``
        (B, F, 3), ``thetas`` (B, F, 7), ``estimates`` (F, 3), and ``std_indicators``,
        ``std_estimates`` when the standardised estimator ran; None without the joint model.
    resampling : str
        What a replicate resamples, a value of ``RESAMPLING`` (answers, examples, workers with
        examples nested, or workers x examples).
    clusters : int or None
        How many independent units a replicate resamples (workers; the fewer of workers and
        examples when crossed; examples; answers): the effect tests' small-sample correction.
    """

    formulations: list[str]
    replicates: int
    indicators: np.ndarray                  # (B, F, 3): b1, b2, b3 per replicate
    curve_bands: dict = field(repr=False)   # (formulation, curve) -> (lo, hi) on GRID
    point_bands: dict = field(repr=False)   # (formulation, curve) -> (lo, hi) per bin
    failed: pd.DataFrame = None
    seed: int = 0
    estimates: np.ndarray = None            # (F, 3): the full-sample b1, b2, b3
    joint: dict | None = field(default=None, repr=False)  # the joint model's, see bootstrap_joint
    resampling: str = RESAMPLING["answers"]  # what a replicate resamples, see RESAMPLING
    #: how many independent units a replicate resamples (workers; the fewer of workers and
    #: examples when crossed; examples; answers): the effect tests' small-sample correction
    clusters: int | None = None

    @property
    def bias_intervals(self) -> pd.DataFrame:
        """95% intervals and standard errors of b1, b2, b3 (and of b1_joint-b3_joint when the
        joint model ran, b1_std-b3_std when the standardised indicators were bootstrapped),
        one row per formulation. The b1 indicators, means of absolute distances bounded below
        by 0, get :func:`floor_interval`; b2 and b3 percentile intervals (module docstring).
        Standard errors are :func:`robust_se`.
        """
        out = pd.DataFrame({"formulation": self.formulations})
        sets = [(("b1", "b2", "b3"), self.indicators, self.estimates)]
        if self.joint is not None:
            sets.append((("b1_joint", "b2_joint", "b3_joint"), self.joint["indicators"], self.joint["estimates"]))
            if self.joint.get("std_indicators") is not None:
                sets.append((("b1_std", "b2_std", "b3_std"), self.joint["std_indicators"],
                             self.joint["std_estimates"]))
        for names, reps, est in sets:
            lo, hi = _quantiles(reps)
            # b1: |x - s(x)| averaged, biased upward near its floor (floor_interval's docstring)
            lo[:, 0], hi[:, 0] = floor_interval(reps[:, :, 0], est[:, 0])
            for k, name in enumerate(names[:reps.shape[2]]):
                out[f"{name}_lo"], out[f"{name}_hi"] = lo[:, k], hi[:, k]
                if names[0] == "b1":
                    with np.errstate(all="ignore"):
                        out[f"{name}_se"] = robust_se(reps[:, :, k])
        return out

    @property
    def pairwise(self) -> pd.DataFrame:
        """Every pair of formulations, every indicator (the per-list ``b1_joint``-``b3_joint``
        too when the joint model ran): difference, interval, p-values.

        ``diff`` is the full-sample difference (the bootstrap mean where no estimate is kept),
        ``lo``/``hi`` the 95% percentile interval of the replicates' differences, ``se`` their
        normalised interquartile range (:func:`robust_se`). ``p`` is the two-sided bootstrap p-value, twice the share of
        replicates on the far side of 0: it cannot resolve anything below 1/B (``p_floor``).
        ``p_normal`` = 2 (1 - Phi(|diff| / se)) uses the bootstrap standard error with a
        normal approximation, which does resolve small p-values; ``p_holm`` is Holm's step-down
        adjustment of ``p_normal`` over all the pairs of that indicator (Holm 1979), since many
        pairs are tested at once: with B = 1000 and 630 pairs, Holm on the bootstrap p could
        never go below 0.63.
        """
        from scipy.stats import norm
        rows = []
        ids = self.formulations
        sets = [(name, self.indicators[:, :, k], None if self.estimates is None else self.estimates[:, k])
                for k, name in enumerate(("b1", "b2", "b3"))]
        if self.joint is not None:  # the per-list estimator's indicators, paired the same way
            sets += [(name, self.joint["indicators"][:, :, k], self.joint["estimates"][:, k])
                     for k, name in enumerate(("b1_joint", "b2_joint", "b3_joint")[:self.joint["indicators"].shape[2]])]
            if self.joint.get("std_indicators") is not None:   # the standardised estimator's
                sets += [(name, self.joint["std_indicators"][:, :, k], self.joint["std_estimates"][:, k])
                         for k, name in enumerate(("b1_std", "b2_std", "b3_std"))]
        pairs = list(combinations(range(len(ids)), 2))
        first = np.array([i for i, _ in pairs], dtype=int)
        second = np.array([j for _, j in pairs], dtype=int)
        names = np.asarray(ids, dtype=object)
        for name, vals, est in sets:
            # every pair at once, a pair's replicate differences in a contiguous row, so that
            # each reduction adds in the order the one-pair-at-a-time code did (the same bits);
            # a pair with a non-finite difference drops those replicates, one pair at a time
            d = np.ascontiguousarray((vals[:, first] - vals[:, second]).T)   # (pairs, B)
            lo, hi, diff, se, p_boot = (np.full(len(pairs), np.nan) for _ in range(5))
            keep = np.isfinite(d).all(axis=1) & (d.shape[1] >= 2)
            if keep.any():
                full = d[keep]
                lo[keep], hi[keep] = np.percentile(full, [2.5, 97.5], axis=1)
                diff[keep] = est[first[keep]] - est[second[keep]] if est is not None else np.mean(full, axis=1)
                se[keep] = robust_se(full, axis=1)
                p_boot[keep] = np.minimum(1.0, 2 * np.minimum(np.mean(full <= 0, axis=1),
                                                              np.mean(full >= 0, axis=1)))
            for k in np.flatnonzero(~np.isfinite(d).all(axis=1)):
                dk = d[k][np.isfinite(d[k])]
                if dk.size < 2:
                    continue
                keep[k] = True
                lo[k], hi[k] = np.percentile(dk, [2.5, 97.5])
                diff[k] = (est[first[k]] - est[second[k]]) if est is not None else np.mean(dk)
                se[k] = robust_se(dk)
                p_boot[k] = min(1.0, 2 * min(np.mean(dk <= 0), np.mean(dk >= 0)))
            with np.errstate(divide="ignore", invalid="ignore"):
                p_normal = np.where(se > 0, 2 * norm.sf(np.abs(diff) / se), (diff == 0).astype(float))
            rows.append(pd.DataFrame({"indicator": name, "formulation_1": names[first[keep]],
                                      "formulation_2": names[second[keep]], "diff": diff[keep], "lo": lo[keep],
                                      "hi": hi[keep], "se": se[keep], "p": p_boot[keep],
                                      "p_normal": p_normal[keep]}))
        out = pd.concat(rows, ignore_index=True) if any(len(r) for r in rows) else pd.DataFrame()
        if out.empty:
            return out.assign(p_holm=[])
        out["p_holm"] = np.nan
        for _, g in out.groupby("indicator"):
            out.loc[g.index, "p_holm"] = holm_adjusted(g["p_normal"].to_numpy())
        out["p_floor"] = 1.0 / self.replicates
        return out

    def tables(self) -> dict[str, pd.DataFrame]:
        """Every pairwise difference of the indicators (``bias_pairs``) and the failed fits
        per formulation (``bootstrap_failures``).

        Returns
        -------
        dict of str to pandas.DataFrame
        """
        return {"bias_pairs": self.pairwise, "bootstrap_failures": self.failed}

    def summary(self) -> str:
        """Replicates, what they resample, failed fits and each formulation's b1 interval.

        Returns
        -------
        str
        """
        failed = int(self.failed[["sat", "pref"]].to_numpy().sum()) if self.failed is not None else 0
        lines = [f"<BootstrapResult: {self.replicates} replicates resampling {self.resampling}, seed {self.seed}, "
                 f"{failed} failed fits{', joint model too' if self.joint is not None else ''}>"]
        if self.estimates is not None:
            shown = self.bias_intervals[["formulation", "b1_lo", "b1_hi", "b1_se"]]
            lines += ["", shown.to_string(index=False, float_format=lambda v: f"{v:.4f}")]
        return "\n".join(lines)

    def attach(self, result) -> None:
        """Add interval columns to the result's bias, curves and points tables.

        Parameters
        ----------
        result : CalibrationResult
            Changed in place; its ``meta`` records the replicates, seed and failed fits.
        """
        result.bias = result.bias.merge(self.bias_intervals, on="formulation", how="left")
        lo_c = np.full(len(result.curves), np.nan)
        hi_c = np.full(len(result.curves), np.nan)
        model = result.curves["sat_model"].to_numpy() if "sat_model" in result.curves else "published"
        bands = [(key, band, "published") for key, band in self.curve_bands.items()]
        if self.joint is not None:
            bands += [((f, "sat"), band, "joint") for f, band in self.joint["bands"].items()]
            bands += [(key, band, "standardised") for key, band in self.joint.get("std_bands", {}).items()]
        for (f, curve), (lo, hi), which in bands:
            mask = ((result.curves["formulation"] == f) & (result.curves["curve"] == curve)).to_numpy() & \
                (model == which)
            lo_c[mask], hi_c[mask] = lo, hi
        result.curves = result.curves.assign(boot_lo=lo_c, boot_hi=hi_c)
        lo_p = np.full(len(result.points), np.nan)
        hi_p = np.full(len(result.points), np.nan)
        for (f, curve), (lo, hi) in self.point_bands.items():
            mask = ((result.points["formulation"] == f) & (result.points["curve"] == curve)).to_numpy()
            bins = result.points.loc[mask, "bin"].to_numpy()
            lo_p[mask], hi_p[mask] = lo[bins], hi[bins]
        result.points = result.points.assign(boot_lo=lo_p, boot_hi=hi_p)
        result.meta.update(bootstrap=self.replicates, bootstrap_seed=self.seed,
                           bootstrap_failed_fits=int(self.failed[["sat", "pref"]].to_numpy().sum()))


def _range(support: dict | None, curve: str, j: int):
    """Formulation ``j``'s range for ``curve`` in ``support`` (None: the whole of [0, 1])."""
    return None if support is None or support.get(curve) is None else support[curve][j]


def _joint_replicates(phi_a, phi_b, code, W, fit, sat_range=None, pref_range=None):
    """One formulation's joint model over the replicates: s(phi) band and b1, b2, b3 (of the
    implied preference curve) per replicate."""
    from .joint import bootstrap_thetas, implied_preference, replicate_loglik
    thetas = bootstrap_thetas(fit, phi_a, phi_b, code, W)
    if thetas.shape[1] > 7:   # the shared-effect model: its population-averaged curve
        from .joint import shared_curve_on
        curves = shared_curve_on(thetas, GRID)
    else:
        curves = expit(thetas[:, :3] @ design(GRID).T)  # (B, G)
    ind = bias_indicators(curves, implied_preference(thetas, GRID), sat_range=sat_range, pref_range=pref_range)
    # re-fitted replicates (a weakly identified tau) are far from the fit: their exact
    # log-likelihoods, not the second-order form around the fit that suits one-step ones
    from .joint import weak_tau
    near = None if thetas.shape[1] > 7 and weak_tau(fit) else fit
    return {"band": _quantiles(curves), "indicators": np.stack([ind["b1"], ind["b2"], ind["b3"]], axis=1),
            "thetas": thetas, "loglik": replicate_loglik(thetas, phi_a, phi_b, code, W, fit=near)}


def bootstrap_joint(types: AnswerTypes, fits: list, formulations: list[str], replicates: int,
                    seed: int, n_jobs: int = 1, backend: str = "loky", progress: bool = False,
                    clusters=None, support: dict | None = None) -> dict:
    """The joint model's bootstrap, on the same replicates as the published curves' (same
    seed, same resampled examples): each replicate's parameters by the k-step bootstrap
    (:func:`~satcal.analysis.joint.bootstrap_thetas`), s(phi) percentile bands, and b1_joint,
    b2_joint, b3_joint per replicate for their intervals. ``clusters`` as for
    :func:`replicate_weights` (the same as the published curves', so the same weights).

    Parameters
    ----------
    types : satcal.analysis.core.AnswerTypes
        The answers as distinct rows with counts.
    fits : list of JointFit
        The full-sample joint fit of each formulation.
    formulations : list of str
        Their ids, in the same order.
    replicates : int
        Bootstrap replicates.
    seed : int
        Seed of the replicates' weights.
    n_jobs : int, optional
        Worker processes (default 1).
    backend : str, optional
        Parallel backend (default ``"loky"``).
    progress : bool, optional
        Show progress (default False).
    clusters : sequence of int arrays, optional
        As for :func:`replicate_weights`.
    support : dict or None, optional
        Per curve (``"sat_joint"``, ``"pref"``), each formulation's range of the indicators;
        None means [0, 1].

    Returns
    -------
    dict
        ``bands`` (by formulation), ``indicators`` (B, F, 3), ``thetas`` (B, F, 7), or
        (B, F, 8) for the shared-effect model,
        ``loglik`` (B, F), each replicate's log-likelihood at its own parameters (for the
        standardised estimator's per-replicate model weights), and ``estimates`` (F, 3), the
        full-sample b1, b2, b3.
    """
    from .joint import CODES, implied_preference
    code = np.select([types.answers == c for c in CODES], range(len(CODES)), -1)
    W = replicate_weights(types.n_answers, replicates, seed, types.inverse, types.counts.size, clusters)
    tasks = ((types.phi_a[:, j], types.phi_b[:, j], code, W, fits[j], _range(support, "sat_joint", j), _range(support, "pref", j))
             for j in range(len(fits)))
    results = parallel_map(_joint_replicates, tasks, n_jobs, backend, progress, "bootstrap (joint model)",
                           total=len(fits))
    def estimate(j, f):  # the full-sample indicators, over the same ranges as the replicates'
        """Full-sample b1, b2, b3 of formulation ``j``'s fit ``f``.

        Parameters
        ----------
        j : int
            The formulation's position.
        f : JointFit
            Its fit.
        """
        ind = bias_indicators(f.predict(GRID)[0], implied_preference(f, GRID), sat_range=_range(support, "sat_joint", j),
                              pref_range=_range(support, "pref", j))
        return [float(ind["b1"]), float(ind["b2"]), float(ind["b3"])]
    estimates = np.array([estimate(j, f) for j, f in enumerate(fits)])
    return {"bands": {f: r["band"] for f, r in zip(formulations, results)},
            "indicators": np.stack([r["indicators"] for r in results], axis=1),  # (B, F, 3)
            "thetas": np.stack([r["thetas"] for r in results], axis=1),          # (B, F, 7)
            "loglik": np.stack([r["loglik"] for r in results], axis=1),          # (B, F)
            "estimates": estimates}


@one_blas_thread
def bootstrap_calibration(phi_a, phi_b, answers, forms, population: str = "all",
                          replicates: int = 1000, seed: int = 0, n_jobs: int = 1,
                          backend: str = "loky", n_bins: int = 10, progress: bool = False,
                          types: AnswerTypes | None = None, joint_fits: list | None = None,
                          support: dict | None = None, clusters=None,
                          resampling: str | None = None) -> BootstrapResult:
    """Bootstrap the whole calibration (see module docstring).

    Each replicate's answer weights are summed per distinct (phi_A, phi_B, answer) row
    (``types``, computed when not given), so the fits cost what the distinct rows cost.

    Parameters
    ----------
    phi_a, phi_b : numpy.ndarray, shape (n, F)
    answers : sequence of str, length n
    forms : list of Formulation
    population : {"all", "preferences_only"}
    replicates : int, default 1000
    seed : int, default 0
    n_jobs : int, default 1
    backend : str, default ``"loky"``
        As for :func:`parallel_map`.
    n_bins : int, default 10
    progress : bool, default False
    types : AnswerTypes, optional
    joint_fits : list, optional
        The joint model's full-sample fits, to bootstrap it on the same replicates.
    support : dict, optional
        ``{"sat": (F, 2), "pref": (F, 2)}`` ranges: the indicators are computed over the ranges
        the point estimates used (None: the whole of [0, 1]).
    clusters : tuple of sequence, optional
        None (answers resampled independently), ``(example_ids,)`` (examples) or
        ``(worker_ids, example_ids)`` (workers and examples crossed, Owen's pigeonhole
        bootstrap); a missing label is a cluster of its own.
    resampling : str, optional
        The label kept in the result (by default "examples" for one clustering).

    Returns
    -------
    BootstrapResult
    """
    if replicates < 2:
        raise SatcalError(f"the bootstrap needs at least 2 replicates, got {replicates}")
    if types is None:
        types = collapse_answers(phi_a, phi_b, answers)
    n = types.n_answers
    if clusters is not None:
        if len(clusters) not in (1, 2) or any(len(c) != n for c in clusters):
            raise SatcalError(f"clusters: one or two sequences of {n} labels (one per answer) expected")
        clusters = tuple(cluster_codes(c) for c in clusters)
        if any(c is None for c in clusters):
            raise SatcalError("clusters: a clustering whose labels are all missing; leave it out")
        resampling = resampling or (RESAMPLING["pigeonhole"] if len(clusters) == 2 else RESAMPLING["examples"])
        n_clusters = min(int(c.max()) + 1 for c in clusters)
    else:
        resampling = RESAMPLING["answers"]
        n_clusters = n
    # Row 0: the full sample (every answer once), for the point estimates of the intervals.
    W = np.vstack([types.counts[None, :],
                   replicate_weights(n, replicates, seed, types.inverse, types.counts.size, clusters)])
    sat = satisfaction_curves(types)
    pref = preference_curves(types, population)
    w_sat = W[:, sat[0].types]  # the same rows for every formulation

    def weights(curve):
        """The replicate weights of ``curve``'s rows.

        Parameters
        ----------
        curve : satcal.analysis.data.CurveData
            A preference curve; its ``types`` (None: every row) picks the rows.
        """
        return W if curve.types is None else W[:, curve.types]

    tasks = ((sat[j].x, sat[j].y, w_sat, pref[j].x, pref[j].y, weights(pref[j]), n_bins,
              _range(support, "sat", j), _range(support, "pref", j)) for j in range(len(forms)))
    results = parallel_map(_one_formulation, tasks, n_jobs, backend, progress, "bootstrap",
                           total=len(forms))
    ids = [f.id for f in forms]
    indicators = np.stack([r["indicators"] for r in results], axis=1)  # (1 + B, F, 3)
    joint = None
    if joint_fits is not None:
        joint = bootstrap_joint(types, joint_fits, ids, replicates, seed, n_jobs, backend, progress,
                                clusters=clusters, support=support)
    return BootstrapResult(
        formulations=ids, replicates=replicates, indicators=indicators[1:], estimates=indicators[0],
        curve_bands={(f, c): r[f"{c}_band"] for f, r in zip(ids, results) for c in ("sat", "pref")},
        point_bands={(f, c): r[f"{c}_points"] for f, r in zip(ids, results) for c in ("sat", "pref")},
        failed=pd.DataFrame({"formulation": ids, "sat": [r["sat_failed"] for r in results],
                             "pref": [r["pref_failed"] for r in results]}),
        seed=seed, joint=joint, resampling=resampling, clusters=n_clusters)
