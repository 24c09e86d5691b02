"""Gains, discounts, normalisations and vectorised scoring of the DCG family.

Every gain, discount and normalisation is declared once, in a registry, with its formula and
reference beside it; the scoring code never branches on names.

    DCG@k = sum_{i=1..k} g(r_i) d(i)                  (Jarvelin & Kekalainen, 2002)

References
----------
- Urbano and Marrero, ECIR 2015: the 36 study formulations and the ``max``
  normalisation phi = DCG@k / (g(L-1) * sum_i d(i)).
- Lillis, NDCG lecture notes: the original ``jarvelin<b>`` discount.
- Karmaker and Feng 2022: ``ul1`` and ``ul2`` with the random-ordering lower bound RLB.
- Gienapp et al., CIKM 2020: ``minmax`` normalisation for negative relevance levels.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Callable, Iterable, Mapping, Sequence

import numpy as np

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

N_BINS = 10

#: Plot order of the paper (Fig. 1-3).
STUDY_GAINS = ("bin2", "bin1", "exp5", "exp3", "exp2", "lin")
STUDY_DISCOUNTS = ("zipf", "lin", "log2", "log3", "log5", "const")
#: Column codes of the published ECIR 2015 file.
ECIR_GAIN_CODES = {"b2": "bin2", "b1": "bin1", "e5": "exp5", "e3": "exp3", "e2": "exp2", "l": "lin"}
ECIR_DISCOUNT_CODES = {"z": "zipf", "l": "lin", "l2": "log2", "l3": "log3", "l5": "log5", "n": "const"}
NEGATIVE_POLICIES = ("keep", "zero")


# --------------------------------------------------------------------------------------------
# Gains
# --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Gain:
    """A gain function g: level -> utility.

    Parameters
    ----------
    id : str
        Registry id (``lin``, ``exp2``, ``bin1``, ...) or a custom name.
    fn : callable
        Vectorised map from a float array of levels to gains.
    formula : str
        Human-readable formula, shown in reports.
    """

    id: str
    fn: Callable[[np.ndarray], np.ndarray] = field(repr=False, compare=False)
    formula: str = ""

    def __call__(self, levels) -> np.ndarray:
        return np.asarray(self.fn(np.asarray(levels, dtype=float)), dtype=float)

    @classmethod
    def from_mapping(cls, mapping: Mapping[int, float], name: str = "custom") -> "Gain":
        """A custom gain from a ``{level: value}`` map; levels not in the map raise.

        Examples
        --------
        >>> Gain.from_mapping({0: 0.0, 1: 0.4, 2: 1.0})([0, 2, 1]).tolist()
        [0.0, 1.0, 0.4]
        """
        if not mapping:
            raise ValueError("a custom gain needs at least one level -> value pair")
        keys = np.array(sorted(mapping), dtype=float)
        values = np.array([float(mapping[k]) for k in sorted(mapping)], dtype=float)

        def fn(levels: np.ndarray) -> np.ndarray:
            pos = np.searchsorted(keys, levels)
            pos_clipped = np.clip(pos, 0, len(keys) - 1)
            found = keys[pos_clipped] == levels
            if not np.all(found):
                missing = sorted(set(np.asarray(levels)[~found].tolist()))
                raise ValueError(f"custom gain {name!r} has no value for level(s) {missing}; "
                                 f"it maps levels {keys.astype(int).tolist()}")
            return values[pos_clipped]

        text = ", ".join(f"{int(k)}->{v:g}" for k, v in zip(keys, values))
        return cls(name, fn, f"map {{{text}}}")


def _lin_gain(_m: re.Match) -> Gain:
    return Gain("lin", lambda l: l, "g(l) = l")


def _base_above_one(b: str, what: str, formula: str) -> float:
    """A logarithm's or a power's base from an id: above 1, or the measure is degenerate
    (log base 1 divides by log 1 = 0; a power of 1 gives every level gain 0; below 1 the
    discount grows or the gain falls with relevance)."""
    base = float(b)
    if not base > 1:
        raise ValueError(f"{what}{b}: the base must be greater than 1 in {formula}, got {b}")
    return base


def _exp_gain(m: re.Match) -> Gain:
    base = _base_above_one(m.group("b"), "gain exp", "g(l) = b^l - 1")
    return Gain(f"exp{m.group('b')}", lambda l: base ** l - 1.0, f"g(l) = {m.group('b')}^l - 1")


def _bin_gain(m: re.Match) -> Gain:
    lmin = int(m.group("m"))
    return Gain(f"bin{lmin}", lambda l: (l >= lmin).astype(float), f"g(l) = 1 if l >= {lmin} else 0")


#: Gain families: id pattern -> constructor (declared once; parsed by :func:`get_gain`).
GAIN_FAMILIES: dict[str, Callable[[re.Match], Gain]] = {
    r"lin": _lin_gain,
    r"exp(?P<b>\d+(?:\.\d+)?)": _exp_gain,
    r"bin(?P<m>\d+)": _bin_gain,
}


# --------------------------------------------------------------------------------------------
# Discounts
# --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Discount:
    """A discount function d: rank -> factor, evaluated for a cutoff k.

    Parameters
    ----------
    id : str
        Registry id (``zipf``, ``log2``, ``jarvelin2``, ...) or a custom name.
    fn : callable
        ``fn(ranks, k)`` with ``ranks = 1..k`` (float array) returning the k factors.
    formula : str
        Human-readable formula.
    """

    id: str
    fn: Callable[[np.ndarray, int], np.ndarray] = field(repr=False, compare=False)
    formula: str = ""

    def factors(self, k: int) -> np.ndarray:
        """The k discount factors d(1), ..., d(k)."""
        ranks = np.arange(1, k + 1, dtype=float)
        out = np.asarray(self.fn(ranks, k), dtype=float)
        if out.shape != (k,):
            raise ValueError(f"discount {self.id!r} gives {out.shape[0] if out.ndim else 1} "
                             f"factors for k = {k}; it needs exactly k")
        return out

    @classmethod
    def from_factors(cls, factors: Sequence[float], name: str = "custom") -> "Discount":
        """A custom discount given its k factors d(1..k)."""
        values = np.asarray(factors, dtype=float)
        if values.ndim != 1 or values.size == 0:
            raise ValueError("a custom discount needs a non-empty vector of k factors")

        def fn(ranks: np.ndarray, k: int) -> np.ndarray:
            if k != values.size:
                raise ValueError(f"custom discount {name!r} has {values.size} factors, "
                                 f"but lists have k = {k} documents")
            return values

        return cls(name, fn, "d = (" + ", ".join(f"{v:.4g}" for v in values) + ")")


def _zipf(_m):
    return Discount("zipf", lambda i, k: 1.0 / i, "d(i) = 1/i")


def _lin_discount(_m):
    return Discount("lin", lambda i, k: (k + 1.0 - i) / k, "d(i) = (k+1-i)/k")


def _log_discount(m):
    b = _base_above_one(m.group("b"), "discount log", "d(i) = 1/log_b(b + i - 1)")
    # 1/log_b(b + i - 1): log2 gives the de facto 1/log2(i+1) (Burges et al., 2005).
    return Discount(f"log{m.group('b')}", lambda i, k: np.log(b) / np.log(b + i - 1.0),
                    f"d(i) = 1/log_{m.group('b')}({m.group('b')} + i - 1)")


def _jarvelin(m):
    b = _base_above_one(m.group("b"), "discount jarvelin", "d(i) = 1/max(1, log_b i)")
    # The original DCG (Jarvelin & Kekalainen 2000): no discount before rank b.
    return Discount(f"jarvelin{m.group('b')}",
                    lambda i, k: 1.0 / np.maximum(1.0, np.log(i) / np.log(b)),
                    f"d(i) = 1/max(1, log_{m.group('b')} i)")


def _const(_m):
    return Discount("const", lambda i, k: np.ones_like(i), "d(i) = 1")


def _geo(m):
    p = float(m.group("p"))
    if not 0 < p < 1:
        raise ValueError(f"discount geo{m.group('p')}: the persistence p must be in (0, 1)")
    # Rank-biased precision's user model (Moffat & Zobel, TOIS 2008): the user goes on to the
    # next document with probability p. With the 'max' normalisation and g = l/(L-1) this is
    # graded RBP@k / (1 - p^k).
    return Discount(f"geo{m.group('p')}", lambda i, k: p ** (i - 1.0), f"d(i) = {m.group('p')}^(i-1)")


DISCOUNT_FAMILIES: dict[str, Callable[[re.Match], Discount]] = {
    r"zipf": _zipf,
    r"lin": _lin_discount,
    r"log(?P<b>\d+(?:\.\d+)?)": _log_discount,
    r"jarvelin(?P<b>\d+(?:\.\d+)?)": _jarvelin,
    r"const": _const,
    r"geo(?P<p>0?\.\d+)": _geo,
}


def _lookup(families: dict, name: str, kind: str):
    for pattern, make in families.items():
        m = re.fullmatch(pattern, name)
        if m:
            return make(m)
    known = ", ".join(p.replace("(?P<b>\\d+(?:\\.\\d+)?)", "<b>").replace("(?P<m>\\d+)", "<m>")
                      .replace("(?P<p>0?\\.\\d+)", "<p>").replace("(?P<m>\\d+)?", "[<m>]")
                      for p in families)
    raise ValueError(f"unknown {kind} {name!r}; use one of: {known}")


def get_gain(gain: "str | Gain | Mapping[int, float]") -> Gain:
    """Resolve a gain id (``lin``, ``exp<b>``, ``bin<m>``), a :class:`Gain` or a level map."""
    if isinstance(gain, Gain):
        return gain
    if isinstance(gain, Mapping):
        return Gain.from_mapping(gain)
    return _lookup(GAIN_FAMILIES, str(gain), "gain")


def get_discount(discount: "str | Discount | Sequence[float]") -> Discount:
    """Resolve a discount id (``zipf``, ``lin``, ``log<b>``, ``jarvelin<b>``, ``const``),
    a :class:`Discount` or a vector of k factors."""
    if isinstance(discount, Discount):
        return discount
    if isinstance(discount, str):
        return _lookup(DISCOUNT_FAMILIES, discount, "discount")
    return Discount.from_factors(discount)


# --------------------------------------------------------------------------------------------
# Normalisations
# --------------------------------------------------------------------------------------------
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

    ``needs`` names the bounds it uses: ``max`` (per formulation: g(L-1) * sum d) or the
    per-query pool bounds ``ideal`` (IDCG@k), ``worst`` (WDCG@k) and ``rlb`` (E[DCG@k] of a
    random ordering of the pool).
    """

    id: str
    fn: Callable[[np.ndarray, dict], np.ndarray] = field(repr=False, compare=False)
    needs: tuple[str, ...] = ()
    formula: str = ""

    @property
    def uses_pool(self) -> bool:
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
    if isinstance(name, Normalization):
        return name
    try:
        return NORMALIZATIONS[name]
    except KeyError:
        raise ValueError(f"unknown normalisation {name!r}; use one of: "
                         f"{', '.join(NORMALIZATIONS)}") from None


# --------------------------------------------------------------------------------------------
# Formulations
# --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Formulation:
    """A (gain, discount, normalisation, negative-level policy) combination.

    Parameters
    ----------
    gain : Gain
    discount : Discount
    normalization : str, default ``"max"``
        One of ``raw``, ``max``, ``ideal``, ``minmax``, ``ul1``, ``ul2``.
    negatives : {"keep", "zero"}, default ``"keep"``
        ``keep`` applies the gain to negative levels as given; ``zero`` maps them to 0 first.
    cutoff : int, optional
        The k a name such as ``nDCG@10`` fixes; lists of another length are refused.
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
        return f"{self.gain.id}-{self.discount.id}"

    @property
    def uses_pool(self) -> bool:
        return get_normalization(self.normalization).uses_pool

    @property
    def labels(self) -> dict:
        # a geometric discount makes the DCG sum rank-biased precision (Moffat & Zobel 2008)
        family = "rbp" if self.discount.id.startswith("geo") else "dcg"
        return {"gain": self.gain.id, "discount": self.discount.id, "family": family}

    def gains(self, levels) -> np.ndarray:
        """Gains of levels under this formulation's negative-level policy."""
        lv = np.asarray(levels, dtype=float)
        if self.negatives == "zero":
            lv = np.maximum(lv, 0.0)
        return self.gain(lv)

    def score(self, levels, **kwargs) -> np.ndarray:
        """phi of each list (rows of ``levels``); see :func:`score_lists`."""
        return score_lists(levels, [self], **kwargs)[:, 0]

    def __str__(self) -> str:
        return self.id


# --------------------------------------------------------------------------------------------
# Beyond DCG (SPEC 3.4): measures of a list that are not a discounted sum of gains
# --------------------------------------------------------------------------------------------
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
        """1 / rank of the first document with level >= m; 0 when none is in the top k."""
        rel = _relevant(levels, m)
        return np.where(rel.any(axis=1), 1.0 / (rel.argmax(axis=1) + 1.0), 0.0)
    return fn


def _precision(m: int):
    def fn(levels: np.ndarray, ctx: dict) -> np.ndarray:
        """Share of the k positions holding a document with level >= m (trec_eval P_k)."""
        return _relevant(levels, m).sum(axis=1) / levels.shape[1]
    return fn


def _ap(m: int):
    def fn(levels: np.ndarray, ctx: dict) -> np.ndarray:
        """AP@k = (1/R) sum_{i<=k, l_i >= m} P@i, R = pool documents with level >= m
        (trec_eval map_cut_k); 0 when R = 0. R is at least the list's own relevant documents
        (always so when the list's documents come from the pool), which keeps AP in [0, 1]."""
        rel = _relevant(levels, m)
        precision_at = np.cumsum(rel, axis=1) / np.arange(1, rel.shape[1] + 1)
        r = np.maximum(ctx["relevant"](m), rel.sum(axis=1))
        return _safe_div((rel * precision_at).sum(axis=1), r)
    return fn


@dataclass(frozen=True)
class ListMeasure:
    """A measure of one ranked list that is not a DCG sum: ERR, RR, P, AP (SPEC 3.4).

    Used wherever a :class:`Formulation` is: ``id`` names it in every table, ``phi`` is in
    [0, 1]. ``fn(levels, ctx)`` gives the raw score of (n, k) levels (NaN: empty position);
    ``ctx`` holds ``top`` (the top level) and, for pool-based measures, ``relevant(m)``: the
    number of documents at level >= m in each list's query pool. ``max_fn(k, top)``, when set,
    is the raw score of k top-level documents, which phi divides by (``max`` normalisation);
    pool-based measures are already in [0, 1] and use their pool instead.
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
        return "raw" if self.raw else ("pool" if self.pool else "max")

    @property
    def negatives(self) -> str:
        return "zero"

    @property
    def uses_pool(self) -> bool:
        return self.pool

    @property
    def labels(self) -> dict:
        return {"gain": self.id, "discount": "", "family": self.family}

    def scale(self, k: int, top: float) -> float:
        """1 / the maximum raw score over k documents (1 when the raw score is phi already)."""
        if self.raw or self.max_fn is None:
            return 1.0
        bound = self.max_fn(k, top)
        return 1.0 / bound if bound else 0.0

    def score(self, levels, **kwargs) -> np.ndarray:
        """phi of each list (rows of ``levels``); see :func:`score_lists`."""
        return score_lists(levels, [self], **kwargs)[:, 0]

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


#: ir_measures names (SPEC 11) -> (satcal id, normalisation); ``@k`` gives the cutoff.
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
    """``gain``, ``discount`` and ``family`` columns of a formulation or measure in tables."""
    return f.labels


def uses_pool(f: "Formulation | ListMeasure") -> bool:
    """Whether phi needs the list's query pool (``ideal``-type normalisations, AP)."""
    return f.uses_pool


def formulation(spec: "str | Formulation | ListMeasure", normalization: str = "max",
                negatives: str = "keep") -> "Formulation | ListMeasure":
    """Parse ``"<gain>-<discount>"`` (e.g. ``"exp2-log2"``) into a :class:`Formulation`, or a
    measure id beyond DCG (``err``, ``rr``, ``rr<m>``, ``p``, ``p<m>``, ``ap``, ``ap<m>``)
    into a :class:`ListMeasure`.

    A :class:`ListMeasure` carries its own normalisation (ERR by its maximum over k
    documents, AP by its pool; RR and P are in [0, 1] already); ``normalization="raw"`` gives
    its unnormalised value, any other value leaves it as declared.
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
    """The 36 study formulations in the paper's plot order (discount-major, then gain)."""
    gains, discounts = list(gains), list(discounts)
    return [Formulation(get_gain(g), get_discount(d), normalization, negatives)
            for d in discounts for g in gains]


def resolve_formulations(formulations) -> list[Formulation]:
    """Formulations from ids, objects or a mix (one id alone is a list of one); None gives the
    36 study formulations."""
    if formulations is None:
        return study_formulations()
    if isinstance(formulations, (str, Formulation, ListMeasure)):
        formulations = [formulations]
    return [formulation(f) for f in formulations]


# --------------------------------------------------------------------------------------------
# Vectorised scoring
# --------------------------------------------------------------------------------------------
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


def _gain_table(forms: list[Formulation], table: np.ndarray) -> np.ndarray:
    """(R+1, F) gains of every table level; the last row (no document) is 0."""
    out = np.zeros((len(table), len(forms)))
    real = table[:-1]
    for j, f in enumerate(forms):
        out[:-1, j] = f.gains(real)
    return out


def dcg_matrix(levels, formulations=None, scale: np.ndarray | None = None,
               out: np.ndarray | None = None) -> np.ndarray:
    """Raw DCG@k of n lists under F formulations, shape (n, F).

    ``levels`` is (n, k); NaN marks a missing document (a run shorter than k), gain 0.
    ``scale`` (F,) multiplies each column; a per-formulation normalisation applied to the small
    gain table costs nothing, applied to the (n, F) result it costs a full pass.
    ``out``: a C-contiguous (n, F) array to write into (its dtype: the float64 values rounded
    once), e.g. a block of rows of a larger result; returned.

    When the number of possible relevance patterns R^k is small next to n (3^5 = 243 in the
    study), every pattern is scored once and each list takes its pattern's row: one gather.
    Otherwise the DCG is k gathers of a (level x formulation) table. Either way the cost is
    O(n F) memory traffic with no Python loop over lists.
    """
    forms = resolve_formulations(formulations)
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


def _max_bound(forms: list[Formulation], k: int, top_level: float) -> np.ndarray:
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


def pool_bounds(pools, formulations=None, k: int = 5,
                which: Iterable[str] = ("ideal", "best", "worst", "rlb")) -> dict[str, np.ndarray]:
    """Per-query bounds from each query's judged pool, each of shape (Q, F).

    ``ideal``: IDCG@k, the pool sorted by decreasing gain;
    ``best``: like IDCG but over the pool and k unjudged (gain 0) fillers, so negative
    documents are never needed to fill the list (the top of ``minmax``);
    ``worst``: WDCG@k, the k lowest-gain documents of the pool and k unjudged (gain 0) fillers,
    in increasing gain (rearrangement inequality: the most harmful document goes where the
    discount is largest);
    ``rlb``: E[DCG@k] of a uniformly random ordering = mean pool gain * sum_{i<=min(k,n)} d(i)
    (Karmaker and Feng 2022).

    ``pools``: a sequence of level arrays, or a (Q, n) array padded with NaN.
    """
    forms = resolve_formulations(formulations)
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


#: Lists scored per block: bounds the temporaries to a few hundred MB whatever n is.
CHUNK_LISTS = 250_000


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

    Returns
    -------
    numpy.ndarray of shape (n, F)
    """
    forms = resolve_formulations(formulations)
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
            from .errors import SatcalError
            raise SatcalError(f"{f.id} was named at cutoff {f.cutoff}, but the lists have k = {k}")
    dcg_cols = [j for j, f in enumerate(forms) if isinstance(f, Formulation)]
    other_cols = [j for j, f in enumerate(forms) if not isinstance(f, Formulation)]
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
            block = dcg_matrix(lv[rows], dcg_forms, scale, out=out[rows] if direct else None)
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
        from .errors import SatcalError  # a ValueError too
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

        from .errors import SatcalWarning
        warnings.warn(f"{risky[0]}{' and others' if len(risky) > 1 else ''}: the pools hold negative "
                      f"levels (down to {lowest:g}) and negatives = 'keep', so ideal, ul1 and ul2 "
                      "scores are not bounded to [0, 1] (a negative IDCG flips their sign); use "
                      "negatives = 'zero' or the minmax normalisation", SatcalWarning, stacklevel=4)


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
        out.append((cols, norm, pool_bounds(pools, [forms[j] for j in cols], k, wanted), qi))
    return out


# --------------------------------------------------------------------------------------------
# Bins
# --------------------------------------------------------------------------------------------
def bin_index(x, n_bins: int = N_BINS) -> np.ndarray:
    """Bin of each score: ``min(floor((x + 1e-5) * n_bins), n_bins - 1)`` (SPEC section 4).

    The 1e-5 guards against scores such as 0.3 computed as 0.29999...; scores below 0
    fall in bin 0.
    """
    x = np.asarray(x, dtype=float)
    return np.clip(np.floor((x + 1e-5) * n_bins), 0, n_bins - 1).astype(np.intp)


def bin_midpoints(n_bins: int = N_BINS) -> np.ndarray:
    """Label of each bin: its midpoint j/n + 1/(2n)."""
    return np.arange(n_bins) / n_bins + 0.5 / n_bins
