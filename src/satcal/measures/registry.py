"""The formulation registry: ``Formulation`` (gain x discount x normalisation x negative-level
policy), the parser of formulation and measure ids (satcal's own and ir_measures' names such
as ``nDCG@10``), and the 36 formulations of the ECIR 2015 study in its plot order.

    DCG@k = sum_{i=1..k} g(r_i) d(i)

References
----------
Järvelin, K. and Kekäläinen, J. (2002). Cumulated gain-based evaluation of IR techniques.
ACM Transactions on Information Systems 20(4), 422-446.

Urbano, J. and Marrero, M. (2015). How do gain and discount functions affect the correlation
between DCG and user satisfaction? ECIR 2015 (the 36 study formulations).

MacAvaney, S., Macdonald, C. and Ounis, I. (2022). Streamlining evaluation with ir-measures.
ECIR 2022 (the measure names).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Iterable

import numpy as np

from ._engine import score_of
from .discounts import Discount, get_discount
from .gains import Gain, get_gain
from .list_measures import ListMeasure, _list_measure
from .normalisations import get_normalization

__all__ = ["Formulation", "formulation", "study_formulations", "resolve_formulations",
           "measure_labels", "uses_pool", "STUDY_GAINS", "STUDY_DISCOUNTS", "ECIR_GAIN_CODES",
           "ECIR_DISCOUNT_CODES", "NEGATIVE_POLICIES", "IR_MEASURES_NAMES"]

#: Plot order of the paper (Fig. 1-3).
STUDY_GAINS = ("bin2", "bin1", "exp5", "exp3", "exp2", "lin")
STUDY_DISCOUNTS = ("zipf", "lin", "log2", "log3", "log5", "const")
#: Column codes of the published ECIR 2015 file.
ECIR_GAIN_CODES = {"b2": "bin2", "b1": "bin1", "e5": "exp5", "e3": "exp3", "e2": "exp2", "l": "lin"}
ECIR_DISCOUNT_CODES = {"z": "zipf", "l": "lin", "l2": "log2", "l3": "log3", "l5": "log5", "n": "const"}
NEGATIVE_POLICIES = ("keep", "zero")


@dataclass(frozen=True)
class Formulation:
    """A (gain, discount, normalisation, negative-level policy) combination.

    phi of a list of levels r_1..r_k is its DCG@k = sum_i g(r_i) d(i), normalised.

    Parameters
    ----------
    gain : Gain
        g, the gain of each relevance level.
    discount : Discount
        d, the discount of each rank 1..k.
    normalization : str, default ``"max"``
        One of ``raw``, ``max``, ``ideal``, ``minmax``, ``ul1``, ``ul2``.
    negatives : {"keep", "zero"}, default ``"keep"``
        ``keep`` applies the gain to negative levels as given; ``zero`` maps them to 0 first.
    cutoff : int, optional
        The k a name such as ``nDCG@10`` fixes; lists of another length are refused.

    References
    ----------
    Järvelin, K. and Kekäläinen, J. (2002). Cumulated gain-based evaluation of IR techniques.
    ACM Transactions on Information Systems 20(4), 422-446.
    """

    gain: Gain
    discount: Discount
    normalization: str = "max"
    negatives: str = "keep"
    cutoff: int | None = field(default=None, compare=False)

    def __post_init__(self):
        get_normalization(self.normalization)
        if self.negatives not in NEGATIVE_POLICIES:
            raise ValueError(f"negatives must be one of {NEGATIVE_POLICIES}, got {self.negatives!r}")

    @property
    def id(self) -> str:
        """The formulation's id, ``<gain>-<discount>``."""
        return f"{self.gain.id}-{self.discount.id}"

    @property
    def uses_pool(self) -> bool:
        """Whether phi needs the list's query pool (``ideal``, ``minmax``, ``ul1``, ``ul2``)."""
        return get_normalization(self.normalization).uses_pool

    @property
    def labels(self) -> dict:
        # a geometric discount makes the DCG sum rank-biased precision (Moffat & Zobel 2008)
        """The ``gain``, ``discount`` and ``family`` (``dcg`` or ``rbp``) columns of tables."""
        family = "rbp" if self.discount.id.startswith("geo") else "dcg"
        return {"gain": self.gain.id, "discount": self.discount.id, "family": family}

    def gains(self, levels) -> np.ndarray:
        """Gains of levels under this formulation's negative-level policy.

        Parameters
        ----------
        levels : array-like of float

        Returns
        -------
        numpy.ndarray of float, the shape of ``levels``
        """
        lv = np.asarray(levels, dtype=float)
        if self.negatives == "zero":
            lv = np.maximum(lv, 0.0)
        return self.gain(lv)

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

        Examples
        --------
        lin-zipf of levels (2, 1, 0) with top level 2: DCG = 2/1 + 1/2 = 2.5 over
        g(2) (1 + 1/2 + 1/3) = 11/3:

        >>> round(float(formulation("lin-zipf").score([[2, 1, 0]], n_levels=3)[0]), 4)
        0.6818
        """
        return score_of(levels, [self], **kwargs)[:, 0]

    def __str__(self) -> str:
        return self.id


#: ir_measures names -> (satcal id, normalisation); ``@k`` gives the cutoff.
IR_MEASURES_NAMES = {
    "nDCG": ("lin-log2", "ideal"),                     # trec_eval ndcg_cut: linear gain
    "nDCG(dcg='exp-log2')": ("exp2-log2", "ideal"),   # Burges et al.'s exponential gain
    "ERR": ("err", None), "RR": ("rr", None), "P": ("p", None), "AP": ("ap", None),
}


def _ir_measures_name(spec: str):
    """``nDCG@10``, ``nDCG(dcg='exp-log2')@10``, ``ERR@10``, ``RR(rel=2)@10`` ... ->
    (satcal id, normalisation, cutoff); None for any other spelling."""
    m = re.fullmatch(r"(?P<name>[A-Za-z]+(?:\(dcg='[a-z0-9-]+'\))?)(?:\(rel=(?P<rel>\d+)\))?@(?P<k>\d+)",
                     spec.replace('"', "'").replace(" ", ""))
    if not m or m.group("name") not in IR_MEASURES_NAMES:
        return None
    base, norm = IR_MEASURES_NAMES[m.group("name")]
    if m.group("rel"):
        if base not in ("rr", "p", "ap"):
            return None
        base = f"{base}{m.group('rel')}"
    return base, norm, int(m.group("k"))


def measure_labels(f: "Formulation | ListMeasure") -> dict:
    """``gain``, ``discount`` and ``family`` columns of a formulation or measure in tables.

    Parameters
    ----------
    f : Formulation or ListMeasure

    Returns
    -------
    dict of str to str
    """
    return f.labels


def uses_pool(f: "Formulation | ListMeasure") -> bool:
    """Whether phi needs the list's query pool (``ideal``-type normalisations, AP).

    Parameters
    ----------
    f : Formulation or ListMeasure

    Returns
    -------
    bool
    """
    return f.uses_pool


def formulation(spec: "str | Formulation | ListMeasure", normalization: str = "max",
                negatives: str = "keep") -> "Formulation | ListMeasure":
    """Parse a formulation or measure id.

    ``"<gain>-<discount>"`` (e.g. ``"exp2-log2"``) gives a :class:`Formulation`; a measure id
    beyond DCG (``err``, ``rr``, ``rr<m>``, ``p``, ``p<m>``, ``ap``, ``ap<m>``) a
    :class:`~satcal.measures.ListMeasure`; ir_measures' names (``nDCG@10``,
    ``nDCG(dcg='exp-log2')@10``, ``ERR@10``, ``RR(rel=2)@10``, ``P@5``, ``AP@10``) the
    formulation they mean, at their cutoff (MacAvaney, Macdonald and Ounis, ECIR 2022).

    Parameters
    ----------
    spec : str, Formulation or ListMeasure
        The id (an object is returned as is).
    normalization : str, default ``"max"``
        For a DCG formulation, its normalisation. A :class:`ListMeasure` carries its own (ERR by
        its maximum over k documents, AP by its pool; RR and P are in [0, 1] already);
        ``normalization="raw"`` gives its unnormalised value, any other value leaves it as
        declared.
    negatives : {"keep", "zero"}, default ``"keep"``
        How a DCG formulation treats negative levels.

    Returns
    -------
    Formulation or ListMeasure

    Raises
    ------
    ValueError
        For an id that is none of these.

    Examples
    --------
    >>> f = formulation("exp2-log2")
    >>> f.id, f.normalization, f.gain.formula
    ('exp2-log2', 'max', 'g(l) = 2^l - 1')
    >>> g = formulation("nDCG@10")
    >>> g.id, g.normalization, g.negatives, g.cutoff
    ('lin-log2', 'ideal', 'zero', 10)
    """
    if isinstance(spec, (Formulation, ListMeasure)):
        return spec
    named = _ir_measures_name(str(spec))
    if named is not None:
        base, norm, cutoff = named
        from dataclasses import replace
        # trec_eval, whose nDCG these names mean, reads negative levels as unjudged: gain 0
        negs = "zero" if norm == "ideal" else negatives
        return replace(formulation(base, norm if norm else normalization, negs), cutoff=cutoff)
    measure = _list_measure(str(spec), normalization)
    if measure is not None:
        return measure
    gain_id, sep, discount_id = str(spec).partition("-")
    if not sep or not gain_id or not discount_id:
        raise ValueError(f"formulation {spec!r} is not of the form <gain>-<discount> (e.g. "
                         "'exp2-log2', 'lin-geo0.8') nor a measure id (err, rr, rr<m>, p, p<m>, "
                         "ap, ap<m>)")
    return Formulation(get_gain(gain_id), get_discount(discount_id), normalization, negatives)


def study_formulations(normalization: str = "max", negatives: str = "keep",
                       gains: Iterable[str] = STUDY_GAINS,
                       discounts: Iterable[str] = STUDY_DISCOUNTS) -> list[Formulation]:
    """The 36 formulations of Urbano and Marrero (ECIR 2015) in their plot order
    (discount-major, then gain).

    Parameters
    ----------
    normalization : str, default ``"max"``
    negatives : {"keep", "zero"}, default ``"keep"``
    gains, discounts : iterable of str
        Default: the paper's six gains and six discounts (``STUDY_GAINS``, ``STUDY_DISCOUNTS``).

    Returns
    -------
    list of Formulation

    Examples
    --------
    >>> forms = study_formulations()
    >>> len(forms), forms[0].id, forms[-1].id
    (36, 'bin2-zipf', 'lin-const')
    """
    gains, discounts = list(gains), list(discounts)
    return [Formulation(get_gain(g), get_discount(d), normalization, negatives)
            for d in discounts for g in gains]


def resolve_formulations(formulations) -> list[Formulation]:
    """Formulations from ids, objects or a mix.

    Parameters
    ----------
    formulations : str, Formulation, ListMeasure, sequence of them, or None
        One id or object alone is a list of one; None gives the 36 study formulations.

    Returns
    -------
    list of Formulation or ListMeasure
    """
    if formulations is None:
        return study_formulations()
    if isinstance(formulations, (str, Formulation, ListMeasure)):
        formulations = [formulations]
    return [formulation(f) for f in formulations]
