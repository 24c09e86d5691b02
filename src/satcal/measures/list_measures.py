"""Measures of a ranked list that are not a discounted sum of gains: ERR, RR, P and AP.

Each is declared once, in ``LIST_MEASURE_FAMILIES``, with its formula, reference and
vectorised function, and answers to the same interface as a DCG-family formulation (``id``,
``labels``, ``uses_pool``, ``score``).

    ERR@k = sum_i (1/i) R_i prod_{j<i} (1 - R_j),  R(l) = (2^l - 1) / 2^(L-1)
    RR@k  = 1 / rank of the first document at level >= m (0 if none in the top k)
    P@k   = |{i <= k : l_i >= m}| / k
    AP@k  = (1/R) sum_{i <= k, l_i >= m} P@i,  R = pool documents at level >= m

References
----------
Chapelle, O., Metzler, D., Zhang, Y. and Grinspan, P. (2009). Expected reciprocal rank for
graded relevance. CIKM 2009.

Voorhees, E. M. (1999). The TREC-8 question answering track report. TREC-8 (reciprocal rank).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from ._engine import score_of
from .normalisations import _safe_div

__all__ = ["ListMeasure", "LIST_MEASURE_FAMILIES", "EXTRA_MEASURES"]


def _relevant(levels: np.ndarray, m: int) -> np.ndarray:
    """Documents at level >= m (an empty position, NaN, never is)."""
    with np.errstate(invalid="ignore"):
        return np.nan_to_num(levels, nan=-np.inf) >= m


def _err_grades(levels: np.ndarray, top: float) -> np.ndarray:
    """Chapelle et al.'s stopping probabilities R(l) = (2^l - 1) / 2^top, negatives and empty
    positions as 0."""
    lv = np.maximum(np.nan_to_num(levels, nan=0.0), 0.0)
    return (2.0 ** lv - 1.0) / 2.0 ** top


def _err(levels: np.ndarray, ctx: dict) -> np.ndarray:
    """ERR@k = sum_i (1/i) R_i prod_{j<i} (1 - R_j)   (Chapelle et al., CIKM 2009)."""
    r = _err_grades(levels, ctx["top"])
    reach = np.cumprod(np.concatenate([np.ones((r.shape[0], 1)), 1.0 - r[:, :-1]], axis=1), axis=1)
    return (r * reach / np.arange(1, r.shape[1] + 1)).sum(axis=1)


def _err_max(k: int, top: float) -> float:
    """ERR@k of k documents at the top level: its maximum over lists of k."""
    return float(_err(np.full((1, k), float(top)), {"top": top})[0])


def _rr(m: int):
    def fn(levels: np.ndarray, ctx: dict) -> np.ndarray:
        """1 / rank of the first document with level >= m; 0 when none is in the top k.

        Parameters
        ----------
        levels : numpy.ndarray
            Relevance levels of the lists, (n, k).
        ctx : dict
            The scoring context (``relevant(m)``: per-list pool documents at level >= m, for AP).

        Returns
        -------
        numpy.ndarray
            One value per list.
        """
        rel = _relevant(levels, m)
        return np.where(rel.any(axis=1), 1.0 / (rel.argmax(axis=1) + 1.0), 0.0)
    return fn


def _precision(m: int):
    def fn(levels: np.ndarray, ctx: dict) -> np.ndarray:
        """Share of the k positions holding a document with level >= m (trec_eval P_k).

        Parameters
        ----------
        levels : numpy.ndarray
            Relevance levels of the lists, (n, k).
        ctx : dict
            The scoring context (``relevant(m)``: per-list pool documents at level >= m, for AP).

        Returns
        -------
        numpy.ndarray
            One value per list.
        """
        return _relevant(levels, m).sum(axis=1) / levels.shape[1]
    return fn


def _ap(m: int):
    def fn(levels: np.ndarray, ctx: dict) -> np.ndarray:
        """AP@k = (1/R) sum_{i<=k, l_i >= m} P@i, R = pool documents with level >= m
        (trec_eval map_cut_k); 0 when R = 0. R is at least the list's own relevant documents
        (always so when the list's documents come from the pool), which keeps AP in [0, 1].

        Parameters
        ----------
        levels : numpy.ndarray
            Relevance levels of the lists, (n, k).
        ctx : dict
            The scoring context (``relevant(m)``: per-list pool documents at level >= m, for AP).

        Returns
        -------
        numpy.ndarray
            One value per list.
        """
        rel = _relevant(levels, m)
        precision_at = np.cumsum(rel, axis=1) / np.arange(1, rel.shape[1] + 1)
        r = np.maximum(ctx["relevant"](m), rel.sum(axis=1))
        return _safe_div((rel * precision_at).sum(axis=1), r)
    return fn


@dataclass(frozen=True)
class ListMeasure:
    """A measure of one ranked list that is not a DCG sum: ERR, RR, P, AP.

    Used wherever a :class:`~satcal.measures.Formulation` is: ``id`` names it in every table,
    ``phi`` is in [0, 1].

    Parameters
    ----------
    id : str
        ``err``, ``rr<m>``, ``p<m>``, ``ap<m>``.
    family : str
        ``err``, ``rr``, ``p`` or ``ap``: the ``family`` column of tables.
    fn : callable
        ``fn(levels, ctx)``: the raw score of (n, k) levels (NaN: empty position); ``ctx``
        holds ``top`` (the top level) and, for pool-based measures, ``relevant(m)``: the number
        of documents at level >= m in each list's query pool.
    formula, reference : str
        Its formula and where it comes from, shown in reports.
    pool : bool
        Whether it needs each query's judged pool (AP).
    max_fn : callable, optional
        ``max_fn(k, top)``: the raw score of k top-level documents, which phi divides by
        (``max`` normalisation); pool-based measures are already in [0, 1].
    raw : bool
        Report the raw score, not phi.
    cutoff : int, optional
        The k a name such as ``ERR@10`` fixes.

    References
    ----------
    Chapelle, O., Metzler, D., Zhang, Y. and Grinspan, P. (2009). Expected reciprocal rank for
    graded relevance. CIKM 2009.

    Voorhees, E. M. (1999). The TREC-8 question answering track report. TREC-8.

    Examples
    --------
    ERR of levels (2, 0, 1) with top level 2: R = (3/4, 0, 1/4), so
    ERR = 3/4 + (1/3)(1/4)(1/4) = 0.770833; k = 3 top-level documents give 0.859375:

    >>> from satcal.measures import formulation
    >>> round(float(formulation("err").score([[2, 0, 1]], n_levels=3)[0]), 4)
    0.897
    """

    id: str
    family: str
    fn: Callable[[np.ndarray, dict], np.ndarray] = field(repr=False, compare=False)
    formula: str = ""
    reference: str = ""
    pool: bool = False
    max_fn: Callable[[int, float], float] | None = field(default=None, repr=False, compare=False)
    raw: bool = False
    cutoff: int | None = field(default=None, compare=False)

    @property
    def normalization(self) -> str:
        """``raw``, ``pool`` (divided by its pool) or ``max`` (by its maximum over k documents)."""
        return "raw" if self.raw else ("pool" if self.pool else "max")

    @property
    def negatives(self) -> str:
        """Always ``zero``: negative levels count as non-relevant."""
        return "zero"

    @property
    def uses_pool(self) -> bool:
        """Whether phi needs the list's query pool."""
        return self.pool

    @property
    def labels(self) -> dict:
        """The ``gain``, ``discount`` and ``family`` columns of tables."""
        return {"gain": self.id, "discount": "", "family": self.family}

    def scale(self, k: int, top: float) -> float:
        """1 / the maximum raw score over k documents (1 when the raw score is phi already).

        Parameters
        ----------
        k : int
            The cutoff.
        top : float
            The top relevance level.

        Returns
        -------
        float
        """
        if self.raw or self.max_fn is None:
            return 1.0
        bound = self.max_fn(k, top)
        return 1.0 / bound if bound else 0.0

    def score(self, levels, **kwargs) -> np.ndarray:
        """phi of each list (rows of ``levels``).

        Parameters
        ----------
        levels : array-like, shape (n, k)
            Relevance level of each ranked document; NaN marks an empty position.
        **kwargs
            As for :func:`~satcal.measures.score_lists` (``n_levels``, ``top_level``, ``pools``,
            ``query_index``).

        Returns
        -------
        numpy.ndarray of float, shape (n,)
        """
        return score_of(levels, [self], **kwargs)[:, 0]

    def __str__(self) -> str:
        return self.id


def _err_measure(m: re.Match) -> ListMeasure:
    return ListMeasure("err", "err", _err,
                       "ERR@k / ERR@k of k top-level documents; ERR@k = sum_i (1/i) R_i "
                       "prod_{j<i} (1 - R_j), R(l) = (2^l - 1) / 2^(L-1)",
                       "Chapelle, Metzler, Zhang & Grinspan, CIKM 2009", max_fn=_err_max)


def _rr_measure(m: re.Match) -> ListMeasure:
    lmin = int(m.group("m") or 1)
    return ListMeasure(m.group(0), "rr", _rr(lmin),
                       f"1 / rank of the first document with level >= {lmin} in the top k, else 0",
                       "Voorhees, TREC-8 QA track, 1999 (mean reciprocal rank)")


def _p_measure(m: re.Match) -> ListMeasure:
    lmin = int(m.group("m") or 1)
    return ListMeasure(m.group(0), "p", _precision(lmin),
                       f"share of the top k with level >= {lmin} (= bin{lmin}-const with max)",
                       "precision at k (trec_eval P_k)")


def _ap_measure(m: re.Match) -> ListMeasure:
    lmin = int(m.group("m") or 1)
    return ListMeasure(m.group(0), "ap", _ap(lmin),
                       f"(1/R) sum over ranks i <= k with level >= {lmin} of P@i; R = documents "
                       f"of the query's pool with level >= {lmin}",
                       "average precision at k (trec_eval map_cut_k)", pool=True)


#: Measures beyond DCG: id pattern -> constructor (declared once; parsed by :func:`formulation`).
LIST_MEASURE_FAMILIES: dict[str, Callable[[re.Match], ListMeasure]] = {
    r"err": _err_measure,
    r"rr(?P<m>\d+)?": _rr_measure,
    r"p(?P<m>\d+)?": _p_measure,
    r"ap(?P<m>\d+)?": _ap_measure,
}

#: The other measures calibrated beside the 36 by ``--formulations all``: graded and binary
#: RBP (persistence 0.8), ERR, RR, AP and P.
EXTRA_MEASURES = ("lin-geo0.8", "bin1-geo0.8", "err", "rr", "ap", "p")


def _list_measure(spec: str, normalization: str) -> ListMeasure | None:
    for pattern, make in LIST_MEASURE_FAMILIES.items():
        m = re.fullmatch(pattern, spec)
        if m:
            measure = make(m)
            if normalization == "raw":
                from dataclasses import replace
                measure = replace(measure, raw=True)
            return measure
    return None
