"""Vectorised scoring: phi of n lists under F formulations in one pass, per-query pool
bounds, and raw DCG@k. Formulation ids are resolved here; the work is done by the engine
(:mod:`satcal.measures._engine`)."""
from __future__ import annotations

from typing import Iterable, Sequence

import numpy as np

from . import _engine
from ._engine import CHUNK_LISTS
from .registry import resolve_formulations

__all__ = ["score_lists", "score_table", "pool_bounds", "dcg_matrix", "CHUNK_LISTS"]


def dcg_matrix(levels, formulations=None, scale: np.ndarray | None = None,
               out: np.ndarray | None = None) -> np.ndarray:
    """Raw DCG@k of n lists under F formulations: DCG@k = sum_{i=1..k} g(r_i) d(i).

    When the number of possible relevance patterns R^k is small next to n (3^5 = 243 in the
    study), every pattern is scored once and each list takes its pattern's row: one gather.
    Otherwise the DCG is k gathers of a (level x formulation) table. Either way the cost is
    O(n F) memory traffic with no Python loop over lists.

    Parameters
    ----------
    levels : array-like, shape (n, k)
        NaN marks a missing document (a run shorter than k), gain 0.
    formulations : list of str or Formulation, optional
        Defaults to the 36 study formulations.
    scale : array-like, shape (F,), optional
        Multiplies each column; a per-formulation normalisation applied to the small gain table
        costs nothing, applied to the (n, F) result it costs a full pass.
    out : numpy.ndarray, shape (n, F), optional
        A C-contiguous array to write into (its dtype: the float64 values rounded once), e.g.
        a block of rows of a larger result; returned.

    Returns
    -------
    numpy.ndarray of shape (n, F)

    References
    ----------
    Järvelin, K. and Kekäläinen, J. (2002). Cumulated gain-based evaluation of IR techniques.
    ACM Transactions on Information Systems 20(4), 422-446.

    Examples
    --------
    >>> dcg_matrix([[2, 1, 0]], ["lin-zipf", "exp2-const"]).tolist()
    [[2.5, 4.0]]
    """
    return _engine.dcg_of(levels, resolve_formulations(formulations), scale, out)


def pool_bounds(pools, formulations=None, k: int = 5,
                which: Iterable[str] = ("ideal", "best", "worst", "rlb")) -> dict[str, np.ndarray]:
    """Per-query bounds from each query's judged pool, each of shape (Q, F).

    ``ideal``: IDCG@k, the pool sorted by decreasing gain;
    ``best``: like IDCG but over the pool and k unjudged (gain 0) fillers, so negative
    documents are never needed to fill the list (the top of ``minmax``);
    ``worst``: WDCG@k, the k lowest-gain documents of the pool and k unjudged (gain 0) fillers,
    in increasing gain (rearrangement inequality: the most harmful document goes where the
    discount is largest);
    ``rlb``: E[DCG@k] of a uniformly random ordering = mean pool gain * sum_{i<=min(k,n)} d(i).

    Parameters
    ----------
    pools : sequence of array-like, or numpy.ndarray of shape (Q, n)
        Each query's judged levels; a 2-D array is padded with NaN.
    formulations : list of str or Formulation, optional
        Defaults to the 36 study formulations.
    k : int, default 5
        The cutoff.
    which : iterable of str
        The bounds wanted, among ``ideal``, ``best``, ``worst``, ``rlb``.

    Returns
    -------
    dict of str to numpy.ndarray of shape (Q, F)

    References
    ----------
    Gienapp, L., Fröbe, M., Hagen, M. and Potthast, M. (2020). The impact of negative
    relevance judgments on NDCG. CIKM 2020 (best and worst lists).

    Karmaker Santu, S. K. and Feng, D. (2022). Joint upper & lower bound normalization for IR
    evaluation. arXiv preprint (the random-ordering lower bound).

    Examples
    --------
    One pool of levels (2, 1, 0), lin-zipf at k = 2: IDCG = 2 + 1/2; a random ordering's
    expected DCG is the mean gain 1 times d(1) + d(2) = 1.5:

    >>> b = pool_bounds([[2, 1, 0]], ["lin-zipf"], k=2, which=("ideal", "rlb"))
    >>> b["ideal"].tolist(), b["rlb"].tolist()
    ([[2.5]], [[1.5]])
    """
    return _engine.bounds_of(pools, resolve_formulations(formulations), k, which)


def score_table(levels, formulations=None, **kwargs):
    """:func:`score_lists` as a labelled table: one row per list, one column per formulation id.

    Parameters
    ----------
    levels, formulations, **kwargs
        As for :func:`score_lists`.

    Returns
    -------
    pandas.DataFrame of shape (n, F), columns named by formulation id
    """
    import pandas as pd
    forms = resolve_formulations(formulations)
    return pd.DataFrame(score_lists(levels, forms, **kwargs), columns=[f.id for f in forms])


def score_lists(levels, formulations=None, *, n_levels: int | None = None,
                top_level: float | None = None, pools: Sequence[np.ndarray] | None = None,
                query_index: Sequence[int] | None = None, k: int | None = None,
                dtype=np.float64, chunk_size: int = CHUNK_LISTS) -> np.ndarray:
    """phi of n lists under F formulations, shape (n, F).

    Parameters
    ----------
    levels : array-like, shape (n, k)
        Relevance level of each ranked document; NaN marks an empty position.
    formulations : list of str or Formulation, optional
        Defaults to the 36 study formulations (``max`` normalisation).
    n_levels, top_level : int, optional
        For ``max``: the top level is ``top_level`` or ``n_levels - 1`` (default L = 3).
    pools : sequence of arrays, optional
        For pool-based normalisations (``ideal``, ``minmax``, ``ul1``, ``ul2``): the judged
        levels of each query's pool.
    query_index : sequence of int, optional
        For each list, the index of its query in ``pools``.
    dtype : numpy dtype, default float64
        Of the result. ``np.float32`` halves the memory of a large result (10,000,000 lists x
        36 formulations: 1.4 GB instead of 2.9 GB) at about 7 significant digits; the
        computation itself is in float64 either way.
    chunk_size : int
        Lists scored per block. The result is allocated once and filled block by block, so
        the temporaries stay at a few block-sized arrays however many lists there are.

    k : int, optional
        The cutoff; default the lists' length, which must equal it.

    Returns
    -------
    numpy.ndarray of shape (n, F)

    References
    ----------
    Urbano, J. and Marrero, M. (2015). How do gain and discount functions affect the
    correlation between DCG and user satisfaction? ECIR 2015 (``max``: phi = DCG@k /
    (g(L-1) sum_i d(i))).

    Examples
    --------
    Levels (2, 1, 0) with top level 2. lin-zipf: DCG = 2/1 + 1/2 = 2.5 over
    2 (1 + 1/2 + 1/3) = 11/3; exp2-const: (3 + 1 + 0) / (3 * 3):

    >>> score_lists([[2, 1, 0]], ["lin-zipf", "exp2-const"], n_levels=3).round(4).tolist()
    [[0.6818, 0.4444]]

    nDCG against the query's pool (levels 2, 2, 1, 0): IDCG@3 = 3 + 3/log2(3) + 1/2 under
    exp2-log2:

    >>> ndcg = score_lists([[2, 1, 0]], ["nDCG(dcg='exp-log2')@3"], pools=[[2, 2, 1, 0]], query_index=[0])
    >>> round(float(ndcg[0, 0]), 4)
    0.6733
    """
    return _engine.score_of(levels, resolve_formulations(formulations), n_levels=n_levels,
                            top_level=top_level, pools=pools, query_index=query_index, k=k,
                            dtype=dtype, chunk_size=chunk_size)
