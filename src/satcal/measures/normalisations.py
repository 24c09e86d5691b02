"""Normalisations: how a raw DCG@k becomes phi, declared once in ``NORMALIZATIONS``.

``raw``: DCG@k; ``max``: DCG@k / (g(L-1) sum_i d(i)); ``ideal``: DCG@k / IDCG@k;
``minmax``: (DCG - WDCG) / (BDCG - WDCG); ``ul1`` and ``ul2``: against the random-ordering
lower bound RLB.

References
----------
Urbano, J. and Marrero, M. (2015). How do gain and discount functions affect the correlation
between DCG and user satisfaction? ECIR 2015 (the ``max`` normalisation).

Järvelin, K. and Kekäläinen, J. (2002). Cumulated gain-based evaluation of IR techniques.
ACM Transactions on Information Systems 20(4) (``ideal``: nDCG).

Gienapp, L., Fröbe, M., Hagen, M. and Potthast, M. (2020). The impact of negative relevance
judgments on NDCG. CIKM 2020 (``minmax``).

Karmaker Santu, S. K. and Feng, D. (2022). Joint upper & lower bound normalization for IR
evaluation. arXiv preprint, September 2022 (``ul1``, ``ul2``).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np

__all__ = ["Normalization", "NORMALIZATIONS", "POOL_BOUNDS", "get_normalization"]


def _safe_div(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    """num / den with 0 where den == 0 (the documented convention for empty bounds)."""
    num, den = np.broadcast_arrays(np.asarray(num, float), np.asarray(den, float))
    out = np.zeros(num.shape, dtype=float)
    np.divide(num, den, out=out, where=den != 0)
    return out


def _norm_ul1(dcg, b):
    # (DCG/IDCG) * DCG/(DCG + RLB)   (Karmaker and Feng 2022)
    return _safe_div(dcg, b["ideal"]) * _safe_div(dcg, dcg + b["rlb"])


def _norm_ul2(dcg, b):
    # (DCG-RLB)/(IDCG-RLB) above the random baseline, (DCG-RLB)/RLB below it   (Karmaker and Feng 2022)
    above = _safe_div(dcg - b["rlb"], b["ideal"] - b["rlb"])
    below = _safe_div(dcg - b["rlb"], b["rlb"])
    return np.where(dcg >= b["rlb"], above, below)


#: Per-query bounds computed from the judged pool (see :func:`pool_bounds`).
POOL_BOUNDS = ("ideal", "best", "worst", "rlb")


@dataclass(frozen=True)
class Normalization:
    """How raw DCG@k becomes phi.

    Parameters
    ----------
    id : str
        ``raw``, ``max``, ``ideal``, ``minmax``, ``ul1`` or ``ul2``.
    fn : callable
        ``fn(dcg, bounds)``: phi from the raw DCG and the bounds named in ``needs``.
    needs : tuple of str
        The bounds it uses: ``max`` (per formulation: g(L-1) * sum d) or the per-query pool
        bounds ``ideal`` (IDCG@k), ``best`` and ``worst`` (BDCG@k, WDCG@k) and ``rlb``
        (E[DCG@k] of a random ordering of the pool).
    formula : str
        Human-readable formula with its reference.
    """

    id: str
    fn: Callable[[np.ndarray, dict], np.ndarray] = field(repr=False, compare=False)
    needs: tuple[str, ...] = ()
    formula: str = ""

    @property
    def uses_pool(self) -> bool:
        """Whether it needs each query's judged pool (any bound but ``max``)."""
        return any(n in POOL_BOUNDS for n in self.needs)


NORMALIZATIONS: dict[str, Normalization] = {n.id: n for n in (
    Normalization("raw", lambda d, b: d, (), "DCG@k"),
    Normalization("max", lambda d, b: _safe_div(d, b["max"]), ("max",),
                  "DCG@k / (g(L-1) * sum_i d(i))   [Urbano and Marrero, ECIR 2015]"),
    Normalization("ideal", lambda d, b: _safe_div(d, b["ideal"]), ("ideal",),
                  "DCG@k / IDCG@k   [classic nDCG]"),
    Normalization("minmax", lambda d, b: _safe_div(d - b["worst"], b["best"] - b["worst"]),
                  ("best", "worst"), "(DCG - WDCG) / (BDCG - WDCG), best and worst lists of the pool "
                  "and unjudged documents   [Gienapp et al., CIKM 2020]"),
    Normalization("ul1", _norm_ul1, ("ideal", "rlb"), "(DCG/IDCG) * DCG/(DCG + RLB)   [Karmaker and Feng 2022]"),
    Normalization("ul2", _norm_ul2, ("ideal", "rlb"),
                  "(DCG-RLB)/(IDCG-RLB) if DCG >= RLB else (DCG-RLB)/RLB   [Karmaker and Feng 2022]"),
)}


def get_normalization(name: "str | Normalization") -> Normalization:
    """The :class:`Normalization` of an id (a :class:`Normalization` is returned as is).

    Parameters
    ----------
    name : str or Normalization
        One of ``NORMALIZATIONS``: ``raw``, ``max``, ``ideal``, ``minmax``, ``ul1``, ``ul2``.

    Returns
    -------
    Normalization

    Raises
    ------
    ValueError
        For an unknown id, naming those known.
    """
    if isinstance(name, Normalization):
        return name
    try:
        return NORMALIZATIONS[name]
    except KeyError:
        raise ValueError(f"unknown normalisation {name!r}; use one of: "
                         f"{', '.join(NORMALIZATIONS)}") from None
