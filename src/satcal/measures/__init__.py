"""Gains, discounts, normalisations and vectorised scoring of the DCG family, and the measures
beyond it.

Every gain, discount and normalisation is declared once, in a registry, with its formula and
reference beside it; the scoring code never branches on names.

    DCG@k = sum_{i=1..k} g(r_i) d(i)                  (Järvelin & Kekäläinen, 2002)

The package is laid out by concept; every public name is importable from ``satcal.measures``:

- :mod:`~satcal.measures.gains`: ``Gain``, ``get_gain``;
- :mod:`~satcal.measures.discounts`: ``Discount``, ``get_discount``;
- :mod:`~satcal.measures.normalisations`: ``Normalization``, ``get_normalization``;
- :mod:`~satcal.measures.list_measures`: ``ListMeasure`` (ERR, RR, P, AP);
- :mod:`~satcal.measures.registry`: ``Formulation``, ``formulation``, ``study_formulations``;
- :mod:`~satcal.measures.scoring`: ``score_lists``, ``score_table``, ``pool_bounds``,
  ``dcg_matrix``;
- :mod:`~satcal.measures.bins`: ``bin_index``, ``bin_midpoints``.

References
----------
Järvelin, K. and Kekäläinen, J. (2002). Cumulated gain-based evaluation of IR techniques.
ACM Transactions on Information Systems 20(4), 422-446.

Urbano, J. and Marrero, M. (2015). How do gain and discount functions affect the correlation
between DCG and user satisfaction? ECIR 2015 (the 36 study formulations and the ``max``
normalisation phi = DCG@k / (g(L-1) * sum_i d(i))).

Lillis, D. Normalised discounted cumulated gain (NDCG), COMP3009J lecture notes, University
College Dublin (the original ``jarvelin<b>`` discount).

Karmaker Santu, S. K. and Feng, D. (2022). Joint upper & lower bound normalization for IR
evaluation. arXiv preprint (``ul1`` and ``ul2`` with the random-ordering lower bound RLB).

Gienapp, L., Fröbe, M., Hagen, M. and Potthast, M. (2020). The impact of negative relevance
judgments on NDCG. CIKM 2020 (``minmax`` normalisation for negative relevance levels).
"""
from __future__ import annotations

# Names beyond __all__ are re-exported too: other modules import them from satcal.measures.
from ._engine import CHUNK_LISTS  # noqa: F401
from .bins import N_BINS, bin_index, bin_midpoints
from .discounts import DISCOUNT_FAMILIES, Discount, get_discount  # noqa: F401
from .gains import GAIN_FAMILIES, Gain, get_gain  # noqa: F401
from .list_measures import EXTRA_MEASURES, LIST_MEASURE_FAMILIES, ListMeasure  # noqa: F401
from .normalisations import NORMALIZATIONS, POOL_BOUNDS, Normalization, get_normalization  # noqa: F401
from .registry import (  # noqa: F401
    ECIR_DISCOUNT_CODES, ECIR_GAIN_CODES, IR_MEASURES_NAMES, NEGATIVE_POLICIES,
    STUDY_DISCOUNTS, STUDY_GAINS, Formulation, formulation, measure_labels,
    resolve_formulations, study_formulations, uses_pool)
from .scoring import dcg_matrix, pool_bounds, score_lists, score_table  # noqa: F401

__all__ = [
    "Gain",
    "Discount",
    "Normalization",
    "Formulation",
    "get_gain",
    "get_discount",
    "get_normalization",
    "formulation",
    "study_formulations",
    "STUDY_GAINS",
    "STUDY_DISCOUNTS",
    "ECIR_GAIN_CODES",
    "ECIR_DISCOUNT_CODES",
    "NEGATIVE_POLICIES",
    "score_lists",
    "pool_bounds",
    "ListMeasure",
    "EXTRA_MEASURES",
    "measure_labels",
    "bin_index",
    "bin_midpoints",
    "N_BINS",
]
