"""The scoring engine behind :mod:`satcal.measures.scoring`, on formulations already resolved.

The public functions accept ids and resolve them through the registry; the formulation
classes' own ``score`` methods call this module directly, so the registry, the classes and
the scoring functions import one way only (classes -> engine, public scoring -> registry ->
engine). A column is a discounted sum when its object has a ``discount`` (a
:class:`~satcal.measures.registry.Formulation`); any other is a
:class:`~satcal.measures.list_measures.ListMeasure` with its own ``fn``.
"""
from __future__ import annotations

from typing import Iterable, Sequence

import numpy as np

from .normalisations import NORMALIZATIONS, POOL_BOUNDS, _safe_div, get_normalization

#: Lists scored per block: bounds the temporaries to a few hundred MB whatever n is.
CHUNK_LISTS = 250_000


def _is_dcg_sum(f) -> bool:
    """Whether a resolved formulation is a discounted sum of gains (else a list measure)."""
    return hasattr(f, "discount")


def _level_table(levels) -> tuple[np.ndarray, np.ndarray]:
    """Map levels (NaN = no document) to small integer codes and the table of their values.

    Returns ``codes`` (same shape, the last code meaning "no document") and ``table`` (the
    R level values followed by NaN).
    """
    lv = np.asarray(levels)
    if lv.size == 0:
        return np.zeros(lv.shape, dtype=np.intp), np.array([np.nan])
    if np.issubdtype(lv.dtype, np.integer):  # the common case: no NaN, no fractions
        lo, hi = int(lv.min()), int(lv.max())
        if hi - lo <= 4096:
            codes = lv - lo if lo else lv  # no copy when levels already start at 0
            return codes, np.append(np.arange(lo, hi + 1, dtype=float), np.nan)
    lv = lv.astype(float)
    finite = np.isfinite(lv)
    if not finite.any():
        return np.zeros(lv.shape, dtype=np.intp), np.array([np.nan])
    values = lv[finite]
    lo, hi = values.min(), values.max()
    if hi - lo <= 4096 and np.all(values == np.floor(values)):
        table = np.arange(lo, hi + 1)
        codes = np.where(finite, lv - lo, len(table)).astype(np.intp)
    else:
        table, inv = np.unique(values, return_inverse=True)
        codes = np.full(lv.shape, len(table), dtype=np.intp)
        codes[finite] = inv
    return codes, np.append(table, np.nan)  # last slot: no document, gain 0


def _gain_table(forms: list, table: np.ndarray) -> np.ndarray:
    """(R+1, F) gains of every table level; the last row (no document) is 0."""
    out = np.zeros((len(table), len(forms)))
    real = table[:-1]
    for j, f in enumerate(forms):
        out[:-1, j] = f.gains(real)
    return out


def dcg_of(levels, forms: list, scale: np.ndarray | None = None,
           out: np.ndarray | None = None) -> np.ndarray:
    """Raw DCG@k of (n, k) levels under resolved formulations: :func:`~satcal.measures.dcg_matrix`.

    When the number of possible relevance patterns R^k is small next to n (3^5 = 243 in the
    study), every pattern is scored once and each list takes its pattern's row: one gather.
    Otherwise the DCG is k gathers of a (level x formulation) table. Either way the cost is
    O(n F) memory traffic with no Python loop over lists.

    Parameters
    ----------
    levels : array-like, shape (n, k)
        Relevance level of each ranked document; NaN marks a missing document, gain 0.
    forms : list of Formulation
        Resolved formulations (:func:`~satcal.measures.resolve_formulations`), F of them.
    scale : array-like, shape (F,), optional
        Multiplies each column (applied to the small gain table, not to the result).
    out : numpy.ndarray, shape (n, F), optional
        A C-contiguous array to write into, returned.

    Returns
    -------
    As :func:`~satcal.measures.dcg_matrix`.
    """
    lv = np.asarray(levels)
    lv = lv[None, :] if lv.ndim == 1 else lv
    n, k = lv.shape
    codes, table = _level_table(lv)
    used = int(codes.max()) + 1 if codes.size else 1
    gains = _gain_table(forms, table)[:used]                             # (R, F)
    disc = np.stack([f.discount.factors(k) for f in forms], axis=1)      # (k, F)
    if scale is not None:
        disc = disc * np.asarray(scale, float)[None, :]
    if used ** k <= min(n // 4, 1 << 16):
        patterns = gains * disc[0]
        for i in range(1, k):
            patterns = (patterns[:, None, :] + gains[None, :, :] * disc[i]).reshape(-1, len(forms))
        pattern_code = codes[:, 0].astype(np.int64)
        for i in range(1, k):
            pattern_code *= used
            pattern_code += codes[:, i]
        # Take straight into the (preallocated) result: numpy's own allocation path is
        # several times slower here on large outputs, and with out= the default mode="raise"
        # gathers into a buffer and copies it over (measured in benchmarks/bench_core.py).
        # "clip" is safe: every code is below used ** k by construction.
        out = np.empty((n, len(forms))) if out is None else out
        np.take(patterns.astype(out.dtype, copy=False), pattern_code, axis=0, out=out, mode="clip")
        return out
    total = np.zeros((n, len(forms)))
    step = np.empty_like(total)
    for i in range(k):
        np.take(gains * disc[i], codes[:, i], axis=0, out=step, mode="clip")  # codes < used
        total += step
    if out is None:
        return total
    out[...] = total
    return out


def _max_bound(forms: list, k: int, top_level: float) -> np.ndarray:
    """g(L-1) * sum_i d(i): the DCG of k documents all at the top level (Urbano and Marrero, ECIR 2015)."""
    return np.array([f.gains([top_level])[0] * f.discount.factors(k).sum() for f in forms])


def _pool_counts(pools):
    """(Q, R) counts of each level in each pool, the level table and the pool sizes.

    ``pools`` is a sequence of 1-D arrays or a 2-D array padded with NaN.
    """
    if isinstance(pools, np.ndarray) and pools.ndim == 2:
        codes, table = _level_table(pools)
        r = len(table) - 1
        if r <= 16:  # a few vectorised comparisons beat a bincount over every cell
            counts = np.stack([(codes == c).sum(axis=1) for c in range(max(r, 1))], axis=1)
            counts = counts.astype(float)
            return counts, table, counts.sum(axis=1).astype(np.int64)
        q = pools.shape[0]
        owner = np.repeat(np.arange(q), pools.shape[1])
        codes = codes.reshape(-1)
    else:
        q = len(pools)
        arrays = [np.asarray(p, float).reshape(-1) for p in pools]
        flat = np.concatenate(arrays) if arrays else np.zeros(0)
        owner = np.repeat(np.arange(q), [a.size for a in arrays])
        codes, table = _level_table(flat)
    r = len(table) - 1
    real = codes < r
    counts = np.bincount(owner[real] * max(r, 1) + codes[real], minlength=q * max(r, 1))
    counts = counts.reshape(q, max(r, 1)).astype(float)
    return counts, table, counts.sum(axis=1).astype(np.int64)


def bounds_of(pools, forms: list, k: int = 5,
              which: Iterable[str] = ("ideal", "best", "worst", "rlb")) -> dict[str, np.ndarray]:
    """Per-query pool bounds under resolved formulations: :func:`~satcal.measures.pool_bounds`.

    Parameters
    ----------
    pools : sequence of array-like, or numpy.ndarray of shape (Q, n)
        Each query's judged levels; a 2-D array is padded with NaN.
    forms : list of Formulation
        Resolved formulations (:func:`~satcal.measures.resolve_formulations`), F of them.
    k : int, default 5
        The cutoff.
    which : iterable of str
        The bounds wanted, among ``ideal``, ``best``, ``worst``, ``rlb``.

    Returns
    -------
    As :func:`~satcal.measures.pool_bounds`.
    """
    which = tuple(which)
    counts, table, sizes = _pool_counts(pools)
    r = len(table) - 1
    q = counts.shape[0]
    positions = np.arange(k)
    filled = positions[None, :] < sizes[:, None]
    out = {name: np.zeros((q, len(forms))) for name in which}
    for j, f in enumerate(forms):
        g = f.gains(table[:-1]) if r else np.zeros(1)
        d = f.discount.factors(k)
        for name in ("ideal", "best", "worst"):
            if name not in which:
                continue
            gains, level_counts, have = g, counts, filled
            if name != "ideal":
                # A list can always hold unjudged documents (gain 0), so the best and worst
                # lists of minmax are built from the pool plus k zero-gain fillers: with a pool
                # of relevant documents only (or fewer than k), or negative ones, the extremes
                # are not orderings of the pool alone.
                gains = np.append(g, 0.0)
                level_counts = np.hstack([counts, np.full((q, 1), float(k))])
                have = np.ones_like(filled)
            order = np.argsort(gains if name == "worst" else -gains, kind="stable")
            cum = np.cumsum(level_counts[:, order], axis=1)                   # (Q, R)
            slot = (positions[None, :, None] >= cum[:, None, :]).sum(axis=2)  # (Q, k)
            gk = np.where(have, gains[order][np.minimum(slot, len(order) - 1)], 0.0)
            out[name][:, j] = gk @ d
        if "rlb" in which:
            cum_d = np.concatenate([[0.0], np.cumsum(d)])
            out["rlb"][:, j] = _safe_div(counts @ g, sizes) * cum_d[np.minimum(sizes, k)]
    return out


def score_of(levels, forms: list, *, n_levels: int | None = None,
             top_level: float | None = None, pools: Sequence[np.ndarray] | None = None,
             query_index: Sequence[int] | None = None, k: int | None = None,
             dtype=np.float64, chunk_size: int = CHUNK_LISTS) -> np.ndarray:
    """phi of n lists under resolved formulations: :func:`~satcal.measures.score_lists`.

    Parameters
    ----------
    levels : array-like, shape (n, k)
        Relevance level of each ranked document; NaN marks an empty position.
    forms : list of Formulation or ListMeasure
        Resolved formulations (:func:`~satcal.measures.resolve_formulations`), F of them.
    n_levels, top_level : int, optional
        For ``max``: the top level is ``top_level`` or ``n_levels - 1`` (default L = 3).
    pools : sequence of arrays, optional
        For pool-based normalisations and measures: the judged levels of each query's pool.
    query_index : sequence of int, optional
        For each list, the index of its query in ``pools``.
    k : int, optional
        The cutoff; default the lists' length, which must equal it.
    dtype : numpy dtype, default float64
        Of the result (the computation is in float64 either way).
    chunk_size : int, default :data:`CHUNK_LISTS`
        Lists scored per block (at least 1).

    Returns
    -------
    As :func:`~satcal.measures.score_lists`.
    """
    lv = np.asarray(levels)
    lv = lv[None, :] if lv.ndim == 1 else lv
    k = lv.shape[1] if k is None else k
    if lv.shape[1] != k:
        raise ValueError(f"lists have {lv.shape[1]} positions but k = {k}")
    if chunk_size < 1:
        raise ValueError(f"chunk_size must be a positive number of lists, got {chunk_size}")
    top = top_level if top_level is not None else (n_levels if n_levels is not None else 3) - 1
    n = lv.shape[0]
    _check_top(lv, forms, top, top_level is None and n_levels is None)
    for f in forms:
        if f.cutoff is not None and f.cutoff != k:
            from ..errors import SatcalError
            raise SatcalError(f"{f.id} was named at cutoff {f.cutoff}, but the lists have k = {k}")
    dcg_cols = [j for j, f in enumerate(forms) if _is_dcg_sum(f)]
    other_cols = [j for j, f in enumerate(forms) if not _is_dcg_sum(f)]
    dcg_forms = [forms[j] for j in dcg_cols]
    norms = [get_normalization(f.normalization) for f in dcg_forms]
    pooled = [j for j, nm in enumerate(norms) if nm.uses_pool]
    # raw and max are a constant per formulation: fold them into the gain table.
    scale = np.ones(len(dcg_forms))
    for j, nm in enumerate(norms):
        if "max" in nm.needs:
            bound = _max_bound([dcg_forms[j]], k, top)[0]
            scale[j] = 1.0 / bound if bound else 0.0
    pool_groups = _pool_groups(dcg_forms, norms, pooled, pools, query_index, n, k)
    needs_pool = [forms[j] for j in other_cols if forms[j].uses_pool]
    relevant = _relevant_counts(pools, query_index, n, needs_pool[0].id) if needs_pool else None
    out = np.empty((n, len(forms)), dtype=dtype)
    # DCG-family columns only, and nothing computed after the gather in a narrower dtype: each
    # block is gathered straight into its rows of the result, with no block copied over.
    direct = not other_cols and (out.dtype == np.float64 or not pool_groups)
    for start in range(0, n, chunk_size):
        rows = slice(start, min(start + chunk_size, n))
        if dcg_forms:
            block = dcg_of(lv[rows], dcg_forms, scale, out=out[rows] if direct else None)
            for cols, norm, bounds, qi in pool_groups:
                block[:, cols] = norm.fn(block[:, cols], {name: b[qi[rows]] for name, b in bounds.items()})
            if other_cols:
                out[rows, dcg_cols] = block
            elif not direct:
                out[rows] = block
        if other_cols:
            chunk = np.asarray(lv[rows], dtype=float)
            ctx = {"top": top, "relevant": (lambda m, rows=rows: relevant(m)[rows])}
            for j in other_cols:
                out[rows, j] = forms[j].fn(chunk, ctx) * forms[j].scale(k, top)
    return out


def _check_top(levels: np.ndarray, forms, top: float, defaulted: bool) -> None:
    """Levels above the declared top level would give phi above 1 under ``max``-type
    normalisations (and ERR): an error that says how to declare the scale."""
    if not any(f.normalization == "max" for f in forms) or levels.size == 0:
        return
    with np.errstate(invalid="ignore"):
        above = np.nanmax(levels) if np.isfinite(levels).any() else -np.inf
    if above > top:
        where = " (the default: 3 levels, 0..2)" if defaulted else ""
        from ..errors import SatcalError  # a ValueError too
        raise SatcalError(f"level {above:g} is above the top level {top:g}{where}; declare the "
                          "scale with n_levels= (levels 0..L-1) or top_level=")


def _list_queries(pools, query_index, n: int, what: str) -> np.ndarray:
    """Each list's query, checked: pool-based scores need the pools and one query per list."""
    if pools is None or query_index is None:
        raise ValueError(f"{what} needs each query's judged pool: pass pools= and query_index=")
    qi = np.asarray(query_index, dtype=np.intp)
    if qi.shape != (n,):
        raise ValueError("query_index needs one entry per list")
    return qi


def _relevant_counts(pools, query_index, n: int, measure_id: str):
    """For pool-based list measures: m -> per-list count of pool documents at level >= m."""
    qi = _list_queries(pools, query_index, n, f"measure {measure_id!r}")
    counts, table, _ = _pool_counts(pools)
    cache: dict[int, np.ndarray] = {}

    def relevant(m: int) -> np.ndarray:
        """Per list, pool documents of its query at level ``m`` or above (cached).

        Parameters
        ----------
        m : int
            The level.
        """
        if m not in cache:
            cache[m] = (counts[:, table[:-1] >= m].sum(axis=1) if counts.size else
                        np.zeros(len(pools)))[qi]
        return cache[m]
    return relevant


def _warn_unbounded(forms, norms, pooled, pools) -> None:
    """ideal, ul1 and ul2 with negative gains kept are not bounded: say so once."""
    risky = [forms[j].id for j in pooled if norms[j].id in ("ideal", "ul1", "ul2")
             and forms[j].negatives == "keep" and not forms[j].gain.id.startswith("bin")]
    if not risky:
        return
    levels = np.concatenate([np.asarray(p, float).ravel() for p in pools] + [np.zeros(1)])
    lowest = np.nanmin(levels)  # the zero appended: only a negative level matters
    if lowest < 0:
        import warnings

        from ..errors import SatcalWarning
        warnings.warn(f"{risky[0]}{' and others' if len(risky) > 1 else ''}: the pools hold negative "
                      f"levels (down to {lowest:g}) and negatives = 'keep', so ideal, ul1 and ul2 "
                      "scores are not bounded to [0, 1] (a negative IDCG flips their sign); use "
                      "negatives = 'zero' or the minmax normalisation", SatcalWarning, stacklevel=5)


def _pool_groups(forms, norms, pooled, pools, query_index, n: int, k: int) -> list:
    """Per pool-based normalisation: its columns, the normalisation, each query's bounds
    (computed once for all lists) and the query of each list."""
    if not pooled:
        return []
    qi = _list_queries(pools, query_index, n, f"normalisation {norms[pooled[0]].id!r}")
    groups: dict[str, list[int]] = {}
    for j in pooled:
        groups.setdefault(norms[j].id, []).append(j)
    _warn_unbounded(forms, norms, pooled, pools)
    out = []
    for norm_id, cols in groups.items():
        norm = NORMALIZATIONS[norm_id]
        wanted = [name for name in norm.needs if name in POOL_BOUNDS]
        out.append((cols, norm, bounds_of(pools, [forms[j] for j in cols], k, wanted), qi))
    return out
